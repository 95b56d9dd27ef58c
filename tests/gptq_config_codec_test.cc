// gptq_config_codec_test: the GPTQ reader's config steps on hand-built
// configs (docs/gptq.md section 3, C1..C11): every CFG-/GPTQ- config rule with
// its finding fields, the keys, aliases and source priority. Expected values
// come from the contract, not from running the code. The layers, detection
// and decoding are in tests/gptq_codec_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "tests/gptq_codec_files.h"
#include "tests/recording_sink.h"

namespace {

using namespace qd::gptq_codec_test;  // NOLINT: the shared builders

// ---- config: C1 CFG-001 / CFG-002 ------------------------------------------------

TEST(GptqConfig, ValidConfigIsRead) {
  const GptqResult r = Read(DefaultFile(), {Cfg(kCfg4)});
  ExpectAccepted(r);
  EXPECT_TRUE(r.is_gptq);
  EXPECT_EQ(r.config.format, GptqFormat::kV1);
  EXPECT_EQ(r.config.bits, 4);
  EXPECT_EQ(r.config.group_size, 32);
  EXPECT_EQ(r.config.source, "q.json");
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_EQ(r.layers[0].prefix, "layer.");
  EXPECT_EQ(r.layers[0].in_features, 64);
  EXPECT_EQ(r.layers[0].out_features, 32);
  EXPECT_EQ(r.layers[0].groups, 2);
  EXPECT_EQ(r.layers[0].bias, qd::codec::kGptqNoTensor);
}

TEST(GptqConfig, NotStrictJsonIsCfg001) {
  const std::vector<std::string> bad = {
      "{bits: 4}", "\xef\xbb\xbf{\"bits\": 4, \"group_size\": 32}",
      R"({"bits": 4, "bits": 4, "group_size": 32})", "[1]", "4", "",
      R"({"bits": 4, "group_size": 32} x)", R"({"bits": 4, "group_size": 32, "x": 1e400})",
      kCfg4 + std::string(1, '\0'),
      R"({"bits": 4, "group_size": 32, "a": {"dup": 1, "dup": 2}})"};
  for (const std::string& text : bad) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(DenseFile(), {Cfg(text)}), ConfigWant("CFG-001", "config"));
  }
  // Whitespace around the value is JSON.
  ExpectAccepted(Read(DenseFile(), {Cfg(" \t\n{\"bits\": 4, \"group_size\": 32}\r\n ")}));
}

TEST(GptqConfig, EverySourceIsParsedAlsoThoseThatDoNotWin) {
  ExpectRefused(Read(DenseFile(), {Cfg(kCfg4, "a.json"), Cfg("{", "b.json")}),
                ConfigWant("CFG-001", "config", "b.json"));
  ExpectRefused(Read(DenseFile(), {Cfg(kCfg4, "a.json"), Cfg(R"({"bits": "4"})", "b.json")}),
                ConfigWant("CFG-002", "bits", "b.json"));
  // Source by source: the first source's type error before the second's syntax.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4.0})", "a.json"), Cfg("{", "b.json")}),
                ConfigWant("CFG-002", "bits", "a.json"));
}

TEST(GptqConfig, NestedSourceReadsQuantizationConfig) {
  const std::string nested = R"({"model_type": "llama", "bits": 99,
                                 "quantization_config": {"bits": 4, "group_size": 32}})";
  for (const std::string name : {"config.json", "dir/config.json", "/a/b/config.json"}) {
    SCOPED_TRACE(name);
    const GptqResult r = Read(DefaultFile(), {Cfg(nested, name)});
    ExpectAccepted(r);
    EXPECT_EQ(r.config.source, name);
  }
  // Another file name is plain: its top level is the config (no bits there).
  ExpectRefused(Read(DefaultFile(), {Cfg(R"({"quantization_config": {"bits": 4, "group_size": 32}})",
                                         "dir/quantize_config.json")}),
                ConfigWant("CFG-006", "bits", "dir/quantize_config.json"));
  ExpectRefused(Read(DefaultFile(), {Cfg(R"({"quantization_config": {"bits": 4, "group_size": 32}})",
                                         "dir/config.json.bak")}),
                ConfigWant("CFG-006", "bits", "dir/config.json.bak"));
  // quantization_config not an object.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"quantization_config": "gptq"})", "d/config.json")}),
                ConfigWant("CFG-001", "quantization_config", "d/config.json"));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"quantization_config": [1]})", "d/config.json")}),
                ConfigWant("CFG-001", "quantization_config", "d/config.json"));
  // The nested document is strict JSON too.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"a": 1, "a": 2, "quantization_config": {}})", "config.json")}),
                ConfigWant("CFG-001", "config", "config.json"));
  // Types are checked inside quantization_config, not at the top.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"quantization_config": {"bits": "4", "group_size": 32}})",
                                       "config.json")}),
                ConfigWant("CFG-002", "bits", "config.json"));
}

TEST(GptqConfig, WrongKeyTypeIsCfg002) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"bits": 4.0, "group_size": 32})", "bits"},
      {R"({"bits": "4", "group_size": 32})", "bits"},
      {R"({"bits": 4e0, "group_size": 32})", "bits"},
      {R"({"bits": 1e2, "group_size": 32})", "bits"},
      {R"({"bits": 4E+0, "group_size": 32})", "bits"},
      {R"({"bits": true, "group_size": 32})", "bits"},
      {R"({"bits": [4], "group_size": 32})", "bits"},
      {R"({"w_bit": 4.5, "group_size": 32})", "w_bit"},
      {R"({"wbits": {}, "group_size": 32})", "wbits"},
      {R"({"bits": 4, "group_size": 9223372036854775808})", "group_size"},
      {R"({"bits": 4, "group_size": 18446744073709551616})", "group_size"},
      {R"({"bits": 4, "group_size": -9223372036854775809})", "group_size"},
      {R"({"bits": 4, "q_group_size": "32"})", "q_group_size"},
      {R"({"method": 1, "bits": 4, "group_size": 32})", "method"},
      {R"({"quant_method": false, "bits": 4, "group_size": 32})", "quant_method"},
      {R"({"format": 2, "bits": 4, "group_size": 32})", "format"},
      {R"({"checkpoint_format": ["gptq"], "bits": 4, "group_size": 32})", "checkpoint_format"},
      {R"({"version": 2, "bits": 4, "group_size": 32})", "version"},
      {R"({"sym": "true", "bits": 4, "group_size": 32})", "sym"},
      {R"({"zero_point": 1, "bits": 4, "group_size": 32})", "zero_point"},
      {R"({"desc_act": "no", "bits": 4, "group_size": 32})", "desc_act"},
      {R"({"pack_dtype": 32, "bits": 4, "group_size": 32})", "pack_dtype"},
      {R"({"is_marlin_format": 0, "bits": 4, "group_size": 32})", "is_marlin_format"},
      {R"({"dynamic": [], "bits": 4, "group_size": 32})", "dynamic"},
      {R"({"dynamic": "x", "bits": 4, "group_size": 32})", "dynamic"},
      // Table row order, not JSON order; aliases in listed order.
      {R"({"dynamic": 1, "sym": 1, "bits": "x", "group_size": 32})", "bits"},
      {R"({"wbits": 1.5, "w_bit": "4", "group_size": 32})", "w_bit"},
      {R"({"desc_act": 1, "zero_point": 1, "sym": 1, "bits": 4, "group_size": 32})", "sym"},
  };
  for (const auto& [text, field] : cases) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(DenseFile(), {Cfg(text)}), ConfigWant("CFG-002", field));
  }
}

TEST(GptqConfig, IntegersNullsAndUnknownKeys) {
  // -0 is an integer token (value 0): group_size 0 is CFG-007, not CFG-002.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": -0})")}),
                ConfigWant("CFG-007", "group_size"));
  // The int64 extremes are integers.
  ExpectAccepted(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 9223372036854775807})")}));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": -9223372036854775808, "group_size": 32})")}),
                ConfigWant("GPTQ-001", "bits"));
  // null is absent for every key.
  const GptqResult r = Read(DenseFile(), {Cfg(R"({"bits": null, "w_bit": 4, "group_size": null,
      "q_group_size": 32, "method": null, "format": null, "sym": null, "zero_point": null,
      "desc_act": null, "pack_dtype": null, "is_marlin_format": null, "dynamic": null})")});
  ExpectAccepted(r);
  EXPECT_EQ(r.config.bits, 4);
  EXPECT_EQ(r.config.group_size, 32);
  // Unknown keys are ignored whatever their type.
  ExpectAccepted(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "damp_percent": "x",
      "static_groups": 3, "meta": {"a": [1, 2]}, "Bits": "x"})")}));
}

// ---- config: C2 CFG-003 ------------------------------------------------------

TEST(GptqConfig, NoSourceIsCfg003) {
  const Want want{"CFG-003", kFile, "", "config", -1};
  ExpectRefused(Read(DefaultFile(), {}), want);
  ExpectRefused(Read(DefaultFile(), {Cfg(R"({"model_type": "llama"})", "d/config.json")}), want);
  ExpectRefused(Read(DefaultFile(), {Cfg(R"({"quantization_config": null})", "d/config.json")}), want);
  // A config.json that is no source does not count as the winner.
  const GptqResult r = Read(DefaultFile(), {Cfg(R"({"quantization_config": null})", "config.json"),
                                            Cfg(kCfg4, "quant_config.json")});
  ExpectAccepted(r);
  EXPECT_EQ(r.config.source, "quant_config.json");
  // Config steps run on a file without layers too.
  ExpectRefused(Read(DenseFile(), {}), want);
}

// ---- config: C3 GPTQ-005, CFG-101 -----------------------------------------------

TEST(GptqConfig, MarlinIsGptq005) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"quant_method": "marlin", "bits": 4, "group_size": 32})", "quant_method"},
      {R"({"method": "marlin", "format": "marlin", "bits": 4, "group_size": 32})", "method"},
      {R"({"checkpoint_format": "marlin", "quant_method": "gptq", "bits": 4, "group_size": 32})",
       "checkpoint_format"},
      {R"({"format": "marlin", "checkpoint_format": "marlin", "bits": 4, "group_size": 32})", "format"},
      {R"({"is_marlin_format": true, "bits": 4, "group_size": 32})", "is_marlin_format"},
      {R"({"is_marlin_format": true, "format": "marlin", "bits": 4, "group_size": 32})", "format"},
      // Before alias conflicts (C4) and the rest of the config.
      {R"({"method": "gptq", "quant_method": "marlin", "bits": 4, "group_size": 32})", "quant_method"},
      {R"({"format": "marlin"})", "format"},
  };
  for (const auto& [text, field] : cases) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(DefaultFile(), {Cfg(text)}), ConfigWant("GPTQ-005", field));
  }
  // version is not a marlin key: "marlin" there is an unknown format (C5).
  ExpectRefused(Read(DefaultFile(), {Cfg(R"({"version": "Marlin", "bits": 4, "group_size": 32})")}),
                ConfigWant("CFG-005", "version"));
  // "Marlin" is not "marlin": CFG-005.
  ExpectRefused(Read(DefaultFile(), {Cfg(R"({"format": "Marlin", "bits": 4, "group_size": 32})")}),
                ConfigWant("CFG-005", "format"));
}

TEST(GptqConfig, IsMarlinFormatFalseWarnsCfg101) {
  const GptqResult r =
      Read(DefaultFile(), {Cfg(R"({"is_marlin_format": false, "bits": 4, "group_size": 32})")});
  ExpectAccepted(r, {"CFG-101"});
  ExpectFinding(r.findings[0], Want{"CFG-101", "q.json", "", "is_marlin_format", -1, -1, -1,
                                    qd::Severity::kWarning});
  EXPECT_EQ(r.config.format, GptqFormat::kV1);
  // The warning is kept before a later error.
  const GptqResult e =
      Read(DefaultFile(), {Cfg(R"({"is_marlin_format": false, "bits": 4, "w_bit": 3, "group_size": 32})")});
  ASSERT_EQ(e.findings.size(), 2u);
  EXPECT_EQ(e.findings[0].rule, "CFG-101");
  ExpectRefused(e, ConfigWant("CFG-004", "w_bit"));
}

// ---- config: C4 CFG-004, CFG-102 ------------------------------------------------

TEST(GptqConfig, AliasConflictIsCfg004) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"bits": 4, "w_bit": 3, "group_size": 32})", "w_bit"},
      {R"({"bits": 4, "w_bit": 4, "wbits": 3, "group_size": 32})", "wbits"},
      {R"({"w_bit": 4, "wbits": 8, "group_size": 32})", "wbits"},
      {R"({"bits": 4, "w_bit": 3, "wbits": 3, "group_size": 32})", "w_bit"},
      {R"({"method": "gptq", "quant_method": "awq", "bits": 4, "group_size": 32})", "quant_method"},
      {R"({"format": "gptq", "checkpoint_format": "gptq_v2", "bits": 4, "group_size": 32})",
       "checkpoint_format"},
      {R"({"format": "gptq_v2", "version": "gptq", "bits": 4, "group_size": 32})", "version"},
      {R"({"checkpoint_format": "gptq", "version": "GPTQ_V2", "bits": 4, "group_size": 32})", "version"},
      {R"({"bits": 4, "group_size": 32, "q_group_size": 64})", "q_group_size"},
      // Groups in the order method, format, bits, group_size.
      {R"({"bits": 4, "w_bit": 3, "group_size": 32, "q_group_size": 64, "method": "gptq",
          "quant_method": "x"})", "quant_method"},
      {R"({"bits": 4, "w_bit": 3, "format": "gptq", "checkpoint_format": "gptq_p", "group_size": 32})",
       "checkpoint_format"},
  };
  for (const auto& [text, field] : cases) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(DenseFile(), {Cfg(text)}), ConfigWant("CFG-004", field));
  }
  // version is lowercased before comparing; equal aliases agree.
  const GptqResult r = Read(DenseFile(), {Cfg(R"({"format": "gptq_v2", "checkpoint_format": "gptq_v2",
      "version": "GPTQ_v2", "bits": 4, "w_bit": 4, "wbits": 4, "group_size": 32, "q_group_size": 32,
      "method": "gptq", "quant_method": "gptq"})")});
  ExpectAccepted(r);
  EXPECT_EQ(r.config.format, GptqFormat::kV2);
}

TEST(GptqConfig, SymEqualToZeroPointWarnsCfg102) {
  const GptqResult r = Read(DefaultFile(), {Cfg(R"({"sym": true, "zero_point": true, "bits": 4, "group_size": 32})")});
  ExpectAccepted(r, {"CFG-102"});
  ExpectFinding(r.findings[0], Want{"CFG-102", "q.json", "", "zero_point", -1, -1, -1,
                                    qd::Severity::kWarning});
  ExpectAccepted(Read(DefaultFile(), {Cfg(R"({"sym": false, "zero_point": true, "bits": 4, "group_size": 32})")}));
  // The warning comes after CFG-004 passed, before CFG-005.
  const GptqResult e = Read(DefaultFile(), {Cfg(R"({"sym": false, "zero_point": false, "method": "awq",
      "bits": 4, "group_size": 32})")});
  ASSERT_EQ(e.findings.size(), 2u);
  EXPECT_EQ(e.findings[0].rule, "CFG-102");
  ExpectRefused(e, ConfigWant("CFG-005", "method"));
}

// ---- config: C5..C10 ----------------------------------------------------------

TEST(GptqConfig, MethodAndFormatAreCfg005) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"method": "awq", "bits": 4, "group_size": 32})", "method"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 32})", "quant_method"},
      {R"({"quant_method": "GPTQ", "bits": 4, "group_size": 32})", "quant_method"},
      {R"({"format": "gptq_v3", "bits": 4, "group_size": 32})", "format"},
      {R"({"format": "GPTQ", "bits": 4, "group_size": 32})", "format"},
      {R"({"checkpoint_format": "awq", "bits": 4, "group_size": 32})", "checkpoint_format"},
      {R"({"version": "GEMM", "bits": 4, "group_size": 32})", "version"},
      // method before format; before CFG-006.
      {R"({"method": "awq", "format": "x"})", "method"},
      {R"({"format": "x"})", "format"},
  };
  for (const auto& [text, field] : cases) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(DenseFile(), {Cfg(text)}), ConfigWant("CFG-005", field));
  }
  const std::vector<std::pair<std::string, GptqFormat>> formats = {
      {R"({"bits": 4, "group_size": 32})", GptqFormat::kV1},
      {R"({"format": "gptq", "bits": 4, "group_size": 32})", GptqFormat::kV1},
      {R"({"checkpoint_format": "gptq_v2", "bits": 4, "group_size": 32})", GptqFormat::kV2},
      {R"({"version": "GPTQ_P", "bits": 4, "group_size": 32})", GptqFormat::kPlanar},
      {R"({"format": "gptq_p", "bits": 4, "group_size": 32})", GptqFormat::kPlanar},
  };
  for (const auto& [text, format] : formats) {
    SCOPED_TRACE(text);
    const GptqResult r = Read(DenseFile(), {Cfg(text)});
    ExpectAccepted(r);
    EXPECT_EQ(r.config.format, format);
  }
}

TEST(GptqConfig, MissingBitsOrGroupSizeIsCfg006) {
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"group_size": 32})")}), ConfigWant("CFG-006", "bits"));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({})")}), ConfigWant("CFG-006", "bits"));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4})")}), ConfigWant("CFG-006", "group_size"));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": null, "group_size": 32})")}),
                ConfigWant("CFG-006", "bits"));
  const GptqResult r = Read(DenseFile(), {Cfg(R"({"wbits": 8, "q_group_size": -1})")});
  ExpectAccepted(r);
  EXPECT_EQ(r.config.bits, 8);
  EXPECT_EQ(r.config.group_size, -1);
}

TEST(GptqConfig, BadGroupSizeIsCfg007) {
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 0})")}),
                ConfigWant("CFG-007", "group_size"));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "q_group_size": -2})")}),
                ConfigWant("CFG-007", "q_group_size"));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": -9223372036854775808})")}),
                ConfigWant("CFG-007", "group_size"));
  // CFG-007 before GPTQ-001.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 5, "group_size": 0})")}),
                ConfigWant("CFG-007", "group_size"));
  ExpectAccepted(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 1})")}));
}

TEST(GptqConfig, BitsPerFormatAreGptq001) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"bits": 5, "group_size": 32})", "bits"},
      {R"({"bits": 1, "group_size": 32})", "bits"},
      {R"({"bits": 16, "group_size": 32})", "bits"},
      {R"({"wbits": 1, "group_size": 32})", "wbits"},
      {R"({"w_bit": 7, "format": "gptq_v2", "group_size": 32})", "w_bit"},
      {R"({"bits": 9, "format": "gptq_p", "group_size": 32})", "bits"},
      {R"({"bits": 1, "format": "gptq_p", "group_size": 32})", "bits"},
      {R"({"bits": 0, "format": "gptq_p", "group_size": 32})", "bits"},
  };
  for (const auto& [text, field] : bad) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(DenseFile(), {Cfg(text)}), ConfigWant("GPTQ-001", field));
  }
  for (int b : {2, 3, 4, 8}) {
    ExpectAccepted(Read(DenseFile(), {Cfg(R"({"group_size": 32, "bits": )" + std::to_string(b) + "}")}));
    ExpectAccepted(Read(DenseFile(), {Cfg(R"({"format": "gptq_v2", "group_size": 32, "bits": )" +
                                          std::to_string(b) + "}")}));
  }
  for (int b = 2; b <= 8; ++b) {
    ExpectAccepted(Read(DenseFile(), {Cfg(R"({"format": "gptq_p", "group_size": 32, "bits": )" +
                                          std::to_string(b) + "}")}));
  }
}

TEST(GptqConfig, PackDtypeAndDynamic) {
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "pack_dtype": "int16"})")}),
                ConfigWant("CFG-008", "pack_dtype"));
  ExpectAccepted(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "pack_dtype": "int32"})")}));
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "dynamic": {"-:.*": {}}})")}),
                ConfigWant("CFG-009", "dynamic"));
  ExpectAccepted(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "dynamic": {}})")}));
  // CFG-008 before CFG-009.
  ExpectRefused(Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "pack_dtype": "int8",
                                          "dynamic": {"a": 1}})")}),
                ConfigWant("CFG-008", "pack_dtype"));
}

// ---- config: C11 CFG-010, CFG-102 ------------------------------------------------

TEST(GptqConfig, FirstSourceWins) {
  const GptqResult r = Read(DenseFile(), {Cfg(R"({"bits": 4, "group_size": 32, "format": "gptq_v2"})", "a"),
                                          Cfg(R"({"format": "gptq_v2", "method": "gptq"})", "b")});
  ExpectAccepted(r);
  EXPECT_EQ(r.config.source, "a");
  EXPECT_EQ(r.config.format, GptqFormat::kV2);
  // C3..C10 look at the winner only: the other source's alias conflict and
  // marlin-free extras do not matter.
  ExpectAccepted(Read(DenseFile(), {Cfg(kCfg4, "a"), Cfg(R"({"bits": 4, "wbits": 5, "pack_dtype": "x",
                                                            "dynamic": {"x": 1}})", "b")}));
}

TEST(GptqConfig, SourcesThatDisagreeAreCfg010) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"bits": 4, "group_size": 64})", "group_size"},
      {R"({"bits": 3})", "bits"},
      {R"({"w_bit": 8, "q_group_size": 64})", "bits"},
      {R"({"quant_method": "awq", "bits": 3})", "method"},
      {R"({"format": "gptq_v2", "bits": 3})", "format"},
      {R"({"version": "gemm"})", "format"},
      {R"({"checkpoint_format": "marlin"})", "format"},
      {R"({"group_size": -1})", "group_size"},
  };
  for (const auto& [other, field] : cases) {
    SCOPED_TRACE(other);
    ExpectRefused(Read(DenseFile(), {Cfg(kCfg4, "w.json"), Cfg(other, "o.json")}),
                  ConfigWant("CFG-010", field, "w.json"));
  }
  // Defaults apply to method and format; absent bits / group_size agree.
  ExpectAccepted(Read(DenseFile(), {Cfg(kCfg4, "w.json"),
                                    Cfg(R"({"quant_method": "gptq", "checkpoint_format": "gptq"})", "o.json")}));
  ExpectAccepted(Read(DenseFile(), {Cfg(R"({"format": "gptq_v2", "bits": 4, "group_size": 32})", "w.json"),
                                    Cfg(R"({"version": "GPTQ_V2"})", "o.json")}));
  ExpectAccepted(Read(DenseFile(), {Cfg(kCfg4, "w.json"), Cfg(R"({})", "o.json")}));
  // Every other source in priority order; the winner is named.
  ExpectRefused(Read(DenseFile(), {Cfg(kCfg4, "a"), Cfg(kCfg4, "b"), Cfg(R"({"group_size": 128})", "c")}),
                ConfigWant("CFG-010", "group_size", "a"));
}

TEST(GptqConfig, SourcesThatDisagreeOnSymOrDescActWarnCfg102) {
  const GptqResult r = Read(DefaultFile(),
                            {Cfg(R"({"bits": 4, "group_size": 32, "sym": true, "desc_act": true})", "a"),
                             Cfg(R"({"zero_point": true, "desc_act": false})", "b"),
                             Cfg(R"({"sym": true})", "c"),
                             Cfg(R"({"sym": false})", "d")});
  ExpectAccepted(r, {"CFG-102", "CFG-102", "CFG-102"});
  ExpectFinding(r.findings[0], Want{"CFG-102", "a", "", "sym", -1, -1, -1, qd::Severity::kWarning});
  ExpectFinding(r.findings[1], Want{"CFG-102", "a", "", "desc_act", -1, -1, -1, qd::Severity::kWarning});
  ExpectFinding(r.findings[2], Want{"CFG-102", "a", "", "sym", -1, -1, -1, qd::Severity::kWarning});
  // sym of the winner from zero_point; a missing value is no disagreement.
  ExpectAccepted(Read(DefaultFile(), {Cfg(R"({"bits": 4, "group_size": 32, "zero_point": false})", "a"),
                                      Cfg(R"({"sym": true, "desc_act": true})", "b")}));
  ExpectAccepted(Read(DefaultFile(), {Cfg(R"({"bits": 4, "group_size": 32, "zero_point": true})", "a"),
                                      Cfg(R"({"sym": true})", "b")}),
                 {"CFG-102"});
}

TEST(GptqConfig, ConfigErrorStopsBeforeLayers) {
  FileSpec f = DefaultFile();
  f.Erase("layer.qzeros");
  const GptqResult r = Read(f, {Cfg(R"({"bits": 5, "group_size": 32})")});
  ExpectRefused(r, ConfigWant("GPTQ-001", "bits"));
  EXPECT_TRUE(r.is_gptq);
}

}  // namespace
