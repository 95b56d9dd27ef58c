// gptq_config_oracle_test.cc: hand-computed cases for the oracle GPTQ
// reader's config steps (docs/gptq.md section 3, C1..C11): aliases, every
// CFG- rule, GPTQ-001 and GPTQ-005. Every expected value comes from
// docs/gptq.md, never from running the code. The files are built by
// gptq_oracle_test_files.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "oracles/gptq.h"
#include "quantdiff/plain_data.h"
#include "oracles/gptq_oracle_test_files.h"

namespace qd::oracle {
namespace {

using namespace gptq_test_files;  // NOLINT: the shared file builders

// ---------------------------------------------------------------------------
// Config: aliases and every CFG rule.

// Aliases: w_bit, q_group_size, version (lowercased) give bits 4, gs 32,
// format gptq_v2: zero = field (0), no +1. null counts as absent.
TEST(GptqOracleConfig, AliasesAndNull) {
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome o = Read(
      SmallLayer(),
      R"({"bits": null, "w_bit": 4, "q_group_size": 32, "version": "GPTQ_V2", "sym": null})",
      &layers);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_EQ(layers[0].zeros[0], 0);
  EXPECT_EQ(layers[0].groups, 2);
  const qd::Outcome w = Read(SmallLayer(), R"({"wbits": 4, "group_size": 32, "quant_method": "gptq",
                                               "checkpoint_format": "gptq"})",
                             &layers);
  ASSERT_FALSE(w.refused) << Describe(w);
  EXPECT_EQ(layers[0].zeros[0], 1);
}

TEST(GptqOracleConfig, Cfg001NotStrictJson) {
  ExpectConfigError(Read(SmallLayer(), "{"), "CFG-001", "config");
  ExpectConfigError(Read(SmallLayer(), "[4]"), "CFG-001", "config");
  ExpectConfigError(Read(SmallLayer(), "\xEF\xBB\xBF{\"bits\": 4, \"group_size\": 32}"), "CFG-001",
                    "config");
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "x": 1e999})"), "CFG-001",
                    "config");
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "m": {"a": 1, "a": 2}})"),
                    "CFG-001", "config");
  // Whitespace around the value is allowed.
  EXPECT_FALSE(Read(SmallLayer(), " \n" + kV1 + "\r\n\t").refused);
}

TEST(GptqOracleConfig, Cfg001NestedQuantizationConfigNotAnObject) {
  const std::string name = "dir/config.json";
  ExpectConfigError(
      Read(SmallLayer(), {Config(R"({"model_type": "llama", "quantization_config": 5})", name)}),
      "CFG-001", "quantization_config", name);
  // Nested: the member is the config.
  EXPECT_FALSE(
      Read(SmallLayer(), {Config(R"({"quantization_config": {"bits": 4, "group_size": 32}})", name)})
          .refused);
  // Absent or null: no source at all -> CFG-003 on the tensor file.
  ExpectOnlyError(Read(SmallLayer(), {Config(R"({"bits": 4, "group_size": 32})", name)}),
                  "CFG-003", kFile, "", "config", -1);
  ExpectOnlyError(Read(SmallLayer(), {Config(R"({"quantization_config": null})", name)}),
                  "CFG-003", kFile, "", "config", -1);
  // A source that is not named config.json is read plain, whatever it holds.
  ExpectConfigError(Read(SmallLayer(), R"({"quantization_config": {"bits": 4, "group_size": 32}})"),
                    "CFG-006", "bits");
}

// Every present source is checked, also one that would not win.
TEST(GptqOracleConfig, Cfg001OnALaterSource) {
  ExpectConfigError(Read(SmallLayer(), {Config(kV1), Config("{]", "dir/quantize_config.json")}),
                    "CFG-001", "config", "dir/quantize_config.json");
}

TEST(GptqOracleConfig, Cfg002WrongTypes) {
  const struct {
    std::string text;
    const char* field;
  } cases[] = {
      {R"({"bits": "4", "group_size": 32})", "bits"},
      {R"({"bits": 4.0, "group_size": 32})", "bits"},
      {R"({"bits": 4e0, "group_size": 32})", "bits"},
      {R"({"bits": true, "group_size": 32})", "bits"},
      {R"({"w_bit": 9223372036854775808, "group_size": 32})", "w_bit"},
      {R"({"bits": 4, "group_size": 32, "q_group_size": -0.5})", "q_group_size"},
      {R"({"bits": 4, "group_size": 32, "sym": "yes"})", "sym"},
      {R"({"bits": 4, "group_size": 32, "zero_point": 0})", "zero_point"},
      {R"({"bits": 4, "group_size": 32, "desc_act": 1})", "desc_act"},
      {R"({"bits": 4, "group_size": 32, "pack_dtype": 32})", "pack_dtype"},
      {R"({"bits": 4, "group_size": 32, "is_marlin_format": "false"})", "is_marlin_format"},
      {R"({"bits": 4, "group_size": 32, "dynamic": []})", "dynamic"},
      {R"({"bits": 4, "group_size": 32, "version": 2})", "version"},
      // Table row order: method before bits, checkpoint_format before version.
      {R"({"bits": "4", "group_size": 32, "method": 1})", "method"},
      {R"({"version": 1, "checkpoint_format": false, "bits": 4, "group_size": 32})",
       "checkpoint_format"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ExpectConfigError(Read(SmallLayer(), c.text), "CFG-002", c.field);
  }
  // -9223372036854775808 is an integer (then CFG-007 on group_size).
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "group_size": -9223372036854775808})"),
                    "CFG-007", "group_size");
}

TEST(GptqOracleConfig, Cfg003NoSource) {
  ExpectOnlyError(Read(SmallLayer(), std::vector<qd::SideFile>{}), "CFG-003", kFile, "", "config",
                  -1);
}

TEST(GptqOracleConfig, Gptq005Marlin) {
  const struct {
    std::string text;
    const char* field;
  } cases[] = {
      {R"({"bits": 4, "group_size": 32, "method": "marlin"})", "method"},
      {R"({"bits": 4, "group_size": 32, "quant_method": "marlin"})", "quant_method"},
      {R"({"bits": 4, "group_size": 32, "format": "marlin"})", "format"},
      {R"({"bits": 4, "group_size": 32, "checkpoint_format": "marlin"})", "checkpoint_format"},
      {R"({"bits": 4, "group_size": 32, "is_marlin_format": true})", "is_marlin_format"},
      // before CFG-004 and the other checks, and in the listed key order
      {R"({"bits": 4, "wbits": 3, "checkpoint_format": "marlin", "quant_method": "marlin"})",
       "quant_method"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ExpectConfigError(Read(SmallLayer(), c.text), "GPTQ-005", c.field);
  }
  // version "marlin" is not one of the four keys: CFG-005 on version.
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "version": "Marlin"})"),
                    "CFG-005", "version");
}

TEST(GptqOracleConfig, Cfg101IsMarlinFormatFalse) {
  const qd::Outcome o =
      Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "is_marlin_format": false})");
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 1u);
  ExpectFinding(o.findings[0], "CFG-101", qd::Severity::kWarning, kConfigName, "",
                "is_marlin_format", -1);
  // Kept before a later error.
  const qd::Outcome e =
      Read(SmallLayer(), R"({"bits": 4, "wbits": 3, "group_size": 32, "is_marlin_format": false})");
  ASSERT_EQ(e.findings.size(), 2u) << Describe(e);
  EXPECT_EQ(e.findings[0].rule, "CFG-101");
  ExpectFinding(e.findings[1], "CFG-004", qd::Severity::kError, kConfigName, "", "wbits", -1);
}

TEST(GptqOracleConfig, Cfg004AliasesDisagree) {
  const struct {
    std::string text;
    const char* field;
  } cases[] = {
      {R"({"method": "gptq", "quant_method": "awq", "bits": 4, "group_size": 32})",
       "quant_method"},
      {R"({"format": "gptq", "checkpoint_format": "gptq_v2", "bits": 4, "group_size": 32})",
       "checkpoint_format"},
      {R"({"checkpoint_format": "gptq", "version": "GPTQ_V2", "bits": 4, "group_size": 32})",
       "version"},
      // format vs version compares the lowercased version only
      {R"({"format": "GPTQ", "version": "gptq", "bits": 4, "group_size": 32})", "version"},
      {R"({"bits": 4, "w_bit": 4, "wbits": 3, "group_size": 32})", "wbits"},
      {R"({"w_bit": 4, "wbits": 8, "group_size": 32})", "wbits"},
      {R"({"bits": 4, "group_size": 32, "q_group_size": 64})", "q_group_size"},
      // groups in the order method, format, bits, group_size
      {R"({"bits": 4, "wbits": 3, "format": "gptq", "version": "x"})", "version"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ExpectConfigError(Read(SmallLayer(), c.text), "CFG-004", c.field);
  }
  // Agreeing aliases are fine; version is lowercased before comparing.
  EXPECT_FALSE(Read(SmallLayer(), R"({"format": "gptq", "version": "GPTQ", "bits": 4, "w_bit": 4,
                                      "group_size": 32, "q_group_size": 32})")
                   .refused);
}

TEST(GptqOracleConfig, Cfg102SymAndZeroPointSayTheSame) {
  const qd::Outcome o =
      Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "sym": true, "zero_point": true})");
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 1u);
  ExpectFinding(o.findings[0], "CFG-102", qd::Severity::kWarning, kConfigName, "", "zero_point",
                -1);
  EXPECT_TRUE(
      Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "sym": true, "zero_point": false})")
          .findings.empty());
}

TEST(GptqOracleConfig, Cfg005MethodAndFormat) {
  ExpectConfigError(Read(SmallLayer(), R"({"quant_method": "awq", "bits": 4, "group_size": 32})"),
                    "CFG-005", "quant_method");
  ExpectConfigError(Read(SmallLayer(), R"({"method": "GPTQ", "bits": 4, "group_size": 32})"),
                    "CFG-005", "method");
  ExpectConfigError(Read(SmallLayer(), R"({"format": "exl2", "bits": 4, "group_size": 32})"),
                    "CFG-005", "format");
  ExpectConfigError(Read(SmallLayer(), R"({"version": "GEMM", "bits": 4, "group_size": 32})"),
                    "CFG-005", "version");
  // method is checked before format
  ExpectConfigError(
      Read(SmallLayer(), R"({"method": "awq", "format": "exl2", "bits": 4, "group_size": 32})"),
      "CFG-005", "method");
}

TEST(GptqOracleConfig, Cfg006NoBitsOrGroupSize) {
  ExpectConfigError(Read(SmallLayer(), R"({"group_size": 32})"), "CFG-006", "bits");
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4})"), "CFG-006", "group_size");
  ExpectConfigError(Read(SmallLayer(), R"({})"), "CFG-006", "bits");
}

TEST(GptqOracleConfig, Cfg007GroupSize) {
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "group_size": 0})"), "CFG-007",
                    "group_size");
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "q_group_size": -2})"), "CFG-007",
                    "q_group_size");
  // CFG-007 comes before GPTQ-001.
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 5, "group_size": 0})"), "CFG-007",
                    "group_size");
}

TEST(GptqOracleConfig, Gptq001Bits) {
  const struct {
    std::string text;
    const char* field;
  } cases[] = {
      {R"({"bits": 5, "group_size": 32})", "bits"},
      {R"({"w_bit": 1, "group_size": 32, "format": "gptq_v2"})", "w_bit"},
      {R"({"wbits": 9, "group_size": 32, "format": "gptq_p"})", "wbits"},
      {R"({"bits": 1, "group_size": 32, "format": "gptq_p"})", "bits"},
      {R"({"bits": -4, "group_size": 32})", "bits"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ExpectConfigError(Read(SmallLayer(), c.text), "GPTQ-001", c.field);
  }
}

TEST(GptqOracleConfig, Cfg008PackDtype) {
  ExpectConfigError(Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "pack_dtype": "int16"})"),
                    "CFG-008", "pack_dtype");
  EXPECT_FALSE(
      Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "pack_dtype": "int32"})").refused);
}

TEST(GptqOracleConfig, Cfg009Dynamic) {
  ExpectConfigError(
      Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "dynamic": {"-:lm_head": {}}})"),
      "CFG-009", "dynamic");
  EXPECT_FALSE(Read(SmallLayer(), R"({"bits": 4, "group_size": 32, "dynamic": {}})").refused);
}

TEST(GptqOracleConfig, Cfg010SourcesDisagree) {
  const std::string second = "dir/quantize_config.json";
  const struct {
    std::string other;
    const char* field;
  } cases[] = {
      {R"({"bits": 4, "group_size": 64})", "group_size"},
      {R"({"bits": 3})", "bits"},
      {R"({"bits": 4, "format": "gptq_v2"})", "format"},      // W's format defaults to gptq
      {R"({"quant_method": "awq"})", "method"},               // checked before bits
      {R"({"version": "GPTQ_V2", "wbits": 8})", "format"},     // format before bits
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.other);
    ExpectConfigError(Read(SmallLayer(), {Config(kV1), Config(c.other, second)}), "CFG-010",
                      c.field, kConfigName);
  }
  // A source without bits or group_size agrees with anything.
  EXPECT_FALSE(Read(SmallLayer(), {Config(kV1), Config(R"({"desc_act": false})", second)}).refused);
  // The nested config.json of a model directory takes part.
  ExpectConfigError(
      Read(SmallLayer(),
           {Config(kV1), Config(R"({"quantization_config": {"bits": 4, "group_size": 128}})",
                                "dir/config.json")}),
      "CFG-010", "group_size", kConfigName);
}

TEST(GptqOracleConfig, Cfg102SourcesDisagreeOnSymOrDescAct) {
  const std::string second = "dir/quantize_config.json";
  const qd::Outcome o = Read(
      SmallLayer(),
      {Config(R"({"bits": 4, "group_size": 32, "sym": true, "desc_act": false})"),
       Config(R"({"zero_point": true, "desc_act": true})", second)});
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 2u) << Describe(o);
  // sym true against !zero_point = false; desc_act false against true.
  ExpectFinding(o.findings[0], "CFG-102", qd::Severity::kWarning, kConfigName, "", "sym", -1);
  ExpectFinding(o.findings[1], "CFG-102", qd::Severity::kWarning, kConfigName, "", "desc_act", -1);
}

}  // namespace
}  // namespace qd::oracle
