// cli_quant_formats_test.cc: the built quantdiff binary on hand-made GPTQ
// and AWQ files: configs found beside the file or given by --config, check,
// decode and convert between the layouts. Each file is built from the
// contract text (docs/gptq.md, docs/awq.md) and the expected weights worked
// out by hand, not from quantdiff's own code. The other verbs and the
// container rules are in tests/cli/cli_test.cc.
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/pt_test_builder.h"
#include "tests/safetensors_by_the_tests.h"
#include "tests/cli/cli_test_support.h"

namespace {

using namespace qd::cli_test;  // NOLINT: the shared runner and file builders

// Its own suite name: CliTest is tests/cli/cli_test.cc's (one ctest entry a suite).
class CliQuantFormatsTest : public CliTest {};

// ---------------------------------------------------------------------------
// GPTQ: the config found beside the file (docs/gptq.md section 1)

// One 4-bit layer "layer.", K = N = 32, group_size 32 (one group), built from
// docs/gptq.md sections 2 and 4: qweight [4][32] with every word 0x76543210
// (field j of word r is code 8r + j, so code(k, n) = k % 8), qzeros [1][4]
// with every word `zero_word`, scales [1][32] F16 1.0 except column 1, -0.5
// (0xB800), g_idx all 0.
Bytes GptqFile(std::uint32_t zero_word) {
  Bytes data;
  auto put32 = [&data](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) data.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  for (int i = 0; i < 4 * 32; ++i) put32(0x76543210u);
  for (int i = 0; i < 4; ++i) put32(zero_word);
  for (int n = 0; n < 32; ++n) {
    const std::uint16_t half = n == 1 ? 0xB800 : 0x3C00;
    data.push_back(static_cast<std::uint8_t>(half));
    data.push_back(static_cast<std::uint8_t>(half >> 8));
  }
  for (int k = 0; k < 32; ++k) put32(0);
  return File(R"({"layer.qweight":{"dtype":"I32","shape":[4,32],"data_offsets":[0,512]},)"
              R"("layer.qzeros":{"dtype":"I32","shape":[1,4],"data_offsets":[512,528]},)"
              R"("layer.scales":{"dtype":"F16","shape":[1,32],"data_offsets":[528,592]},)"
              R"("layer.g_idx":{"dtype":"I32","shape":[32],"data_offsets":[592,720]}})",
              data);
}

std::string GptqConfig(const std::string& format, int bits) {
  return R"({"bits":)" + std::to_string(bits) + R"(,"group_size":32,"format":")" + format +
         R"(","sym":false,"desc_act":false})";
}

Bytes Text(const std::string& text) { return Bytes(text.begin(), text.end()); }

// out[n][k] = (k % 8 - 3) * scale[n] (section 6): the zero is 3 in every file
// below (v1 stores 2, v2 stores 3).
void ExpectGptqWeights(const fs::path& out) {
  const auto tensors = ReadF32File(out);
  ASSERT_EQ(tensors.size(), 1u);
  ASSERT_TRUE(tensors.count("layer.weight"));
  const SafetensorsTensor& w = tensors.at("layer.weight");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{32, 32}));
  ASSERT_EQ(w.values.size(), 32u * 32u);
  for (int n = 0; n < 32; ++n) {
    for (int k = 0; k < 32; ++k) {
      const float scale = n == 1 ? -0.5f : 1.0f;
      const float want = static_cast<float>(k % 8 - 3) * scale;
      const float got = w.values[static_cast<std::size_t>(n * 32 + k)];
      EXPECT_EQ(got, want) << "n " << n << " k " << k;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << "n " << n << " k " << k;
    }
  }
  // (3 - 3) * -0.5 is -0.0 by IEEE: the sign survives.
  EXPECT_TRUE(std::signbit(w.values[32 + 3]));
}

TEST_F(CliQuantFormatsTest, DecodeGptqFindsTheConfigBesideTheFile) {
  struct Case {
    const char* what;
    const char* config_name;
    std::string config;
    std::uint32_t zero_word;
  };
  const std::vector<Case> cases = {
      {"v1 in STEM.quantize_config.json", "model.quantize_config.json", GptqConfig("gptq", 4),
       0x22222222u},
      {"v2 in quantize_config.json", "quantize_config.json", GptqConfig("gptq_v2", 4), 0x33333333u},
      {"v1 in quant_config.json, aliases", "quant_config.json",
       R"({"w_bit":4,"q_group_size":32,"quant_method":"gptq"})", 0x22222222u},
      {"v2 nested in config.json", "config.json",
       R"({"model_type":"llama","quantization_config":)" + GptqConfig("gptq_v2", 4) + "}",
       0x33333333u},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove_all(dir_ / "m");
    fs::create_directories(dir_ / "m");
    const fs::path in = Write("m/model.safetensors", GptqFile(c.zero_word));
    Write(std::string("m/") + c.config_name, Text(c.config));
    const fs::path out = dir_ / "m" / "out.safetensors";
    const Result run = Quantdiff({"decode", in.string(), "--out", out.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    ExpectGptqWeights(out);
    const Result diff = Quantdiff({"diff", in.string()});
    EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
  }
}

TEST_F(CliQuantFormatsTest, GptqConfigFlagReplacesDiscovery) {
  const fs::path in = Write("model.safetensors", GptqFile(0x33333333u));
  // Beside the file: a v1 config, under which the zero would read 4.
  Write("quantize_config.json", Text(GptqConfig("gptq", 4)));
  const fs::path given = Write("v2.json", Text(GptqConfig("gptq_v2", 4)));
  const fs::path out = dir_ / "out.safetensors";
  const Result run =
      Quantdiff({"decode", in.string(), "--out", out.string(), "--config", given.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectGptqWeights(out);

  // A --config that does not exist is an I/O error, not a finding.
  const Result missing = Quantdiff(
      {"decode", in.string(), "--out", out.string(), "--config", (dir_ / "nope.json").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
}

TEST_F(CliQuantFormatsTest, CheckGptqConfigFindingsNameTheConfig) {
  const fs::path in = Write("model.safetensors", GptqFile(0x33333333u));
  {  // No config anywhere: CFG-003 on the safetensors file.
    const Result run = Quantdiff({"check", in.string(), "--report", "json"});
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    const Json report = Json::parse(run.out);
    const Json* error = ErrorFinding(report);
    ASSERT_NE(error, nullptr) << run.out;
    EXPECT_EQ((*error)["rule"], "CFG-003");
    EXPECT_EQ((*error)["file"], in.string());
  }
  {  // Two sources disagree on bits: CFG-010 names the winner.
    const fs::path winner = Write("quantize_config.json", Text(GptqConfig("gptq_v2", 4)));
    Write("config.json", Text(R"({"quantization_config":)" + GptqConfig("gptq_v2", 8) + "}"));
    const Result run = Quantdiff({"check", in.string(), "--report", "json"});
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    const Json report = Json::parse(run.out);
    const Json* error = ErrorFinding(report);
    ASSERT_NE(error, nullptr) << run.out;
    EXPECT_EQ((*error)["rule"], "CFG-010");
    EXPECT_EQ((*error)["file"], winner.string());
    EXPECT_EQ((*error)["field"], "bits");
  }
  {  // 5 bits labelled gptq (spec 001: {2, 3, 4, 8}): GPTQ-001 on the config.
    const fs::path config = Write("quantize_config.json", Text(GptqConfig("gptq", 5)));
    fs::remove(dir_ / "config.json");
    const Result run = Quantdiff({"check", in.string(), "--report", "json"});
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    const Json report = Json::parse(run.out);
    const Json* error = ErrorFinding(report);
    ASSERT_NE(error, nullptr) << run.out;
    EXPECT_EQ((*error)["rule"], "GPTQ-001");
    EXPECT_EQ((*error)["file"], config.string());
    EXPECT_EQ((*error)["field"], "bits");
  }
}

// The data section of the file at PATH is WANT's, byte for byte (headers
// may differ in key order and padding).
void ExpectSameTensorData(const fs::path& path, const Bytes& want) {
  std::ifstream f(path, std::ios::binary);
  const Bytes got{std::istreambuf_iterator<char>(f), {}};
  const std::uint64_t got_n = HeaderLength(got), want_n = HeaderLength(want);
  ASSERT_EQ(got.size() - got_n, want.size() - want_n);
  EXPECT_TRUE(std::equal(got.begin() + 8 + static_cast<std::ptrdiff_t>(got_n), got.end(),
                         want.begin() + 8 + static_cast<std::ptrdiff_t>(want_n)));
}

// convert: the contract's v1 -> v2 rule (docs/gptq.md section 9: field + 1)
// on the hand-made layer, and the refusals it names.
TEST_F(CliQuantFormatsTest, ConvertGptqV1ToV2AddsOneToEveryZeroField) {
  const fs::path in = Write("v1.safetensors", GptqFile(0x22222222u));
  Write("v1.quantize_config.json", Text(GptqConfig("gptq", 4)));
  const fs::path out = dir_ / "v2.safetensors";
  const Result run = Quantdiff({"convert", in.string(), "--to", "gptq_v2", "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The output is the v2 file built by hand (every zero field 3), byte for
  // byte in its tensors, with a config naming gptq_v2 beside it.
  ExpectSameTensorData(out, GptqFile(0x33333333u));
  const Json config = Json::parse(ReadText(dir_ / "v2.quantize_config.json"));
  EXPECT_EQ(config["format"], "gptq_v2");
  EXPECT_EQ(config["bits"], 4);
  // check finds that config beside the output; decode gives the same weights.
  EXPECT_EQ(Quantdiff({"check", out.string()}).exit_code, 0);
  const fs::path weights = dir_ / "w.safetensors";
  ASSERT_EQ(Quantdiff({"decode", out.string(), "--out", weights.string()}).exit_code, 0);
  ExpectGptqWeights(weights);
}

TEST_F(CliQuantFormatsTest, ConvertGptqReportsWhatTheTargetCannotHold) {
  {  // A v1 zero field of 15 is zero point 16: no 4-bit v2 field (overflow).
    const fs::path in = Write("flood.safetensors", GptqFile(0xFFFFFFFFu));
    Write("flood.quantize_config.json", Text(GptqConfig("gptq", 4)));
    const fs::path out = dir_ / "never.safetensors";
    const Result run = Quantdiff({"convert", in.string(), "--to", "gptq_v2", "--out", out.string()});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("GPTQ-107"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("layer.qzeros row 0, element 0: overflow"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(dir_ / "never.quantize_config.json"));
  }
  {  // A true zero 0 has no v1 field (underflow).
    const fs::path in = Write("zero.safetensors", GptqFile(0x00000000u));
    Write("zero.quantize_config.json", Text(GptqConfig("gptq_v2", 4)));
    const fs::path out = dir_ / "never.safetensors";
    const Result run = Quantdiff({"convert", in.string(), "--to", "gptq", "--out", out.string()});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("layer.qzeros row 0, element 0: underflow"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // Usage: an unknown target.
  EXPECT_EQ(Quantdiff({"convert", (dir_ / "zero.safetensors").string(), "--to", "awq", "--out",
                       (dir_ / "x.safetensors").string()})
                .exit_code,
            2);
}

// convert across families (docs/awq.md section 11): GPTQ v2 -> AWQ GEMM ->
// GPTQ v2 gives the hand-made tensors back, and each step decodes to the
// hand-computed weights; the zeros AWQ-201 names.
TEST_F(CliQuantFormatsTest, ConvertGptqToAwqGemmAndBack) {
  const fs::path in = Write("v2.safetensors", GptqFile(0x33333333u));
  Write("v2.quantize_config.json", Text(GptqConfig("gptq_v2", 4)));
  const fs::path awq = dir_ / "awq.safetensors";
  Result run = Quantdiff({"convert", in.string(), "--to", "awq_gemm", "--out", awq.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json config = Json::parse(ReadText(dir_ / "awq.quantize_config.json"));
  EXPECT_EQ(config["format"], "gemm");
  EXPECT_EQ(Quantdiff({"check", awq.string()}).exit_code, 0);
  const fs::path weights = dir_ / "w.safetensors";
  ASSERT_EQ(Quantdiff({"decode", awq.string(), "--out", weights.string()}).exit_code, 0);
  ExpectGptqWeights(weights);

  const fs::path back = dir_ / "back.safetensors";
  run = Quantdiff({"convert", awq.string(), "--to", "gptq_v2", "--out", back.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ExpectSameTensorData(back, GptqFile(0x33333333u));

  {  // A v1 zero field 15 (zero 16) has no AWQ nibble.
    const fs::path flood = Write("flood.safetensors", GptqFile(0xFFFFFFFFu));
    Write("flood.quantize_config.json", Text(GptqConfig("gptq", 4)));
    run = Quantdiff({"convert", flood.string(), "--to", "awq_gemv", "--out", (dir_ / "never.safetensors").string()});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("layer.qzeros row 0, element 0: AWQ-201 overflow"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir_ / "never.safetensors"));
  }
  {  // An AWQ zero 0 has no v1 field.
    const fs::path zero = Write("zero.safetensors", GptqFile(0x00000000u));
    Write("zero.quantize_config.json", Text(GptqConfig("gptq_v2", 4)));
    const fs::path zero_awq = dir_ / "zero_awq.safetensors";
    ASSERT_EQ(Quantdiff({"convert", zero.string(), "--to", "awq_gemm", "--out", zero_awq.string()}).exit_code, 0);
    run = Quantdiff({"convert", zero_awq.string(), "--to", "gptq", "--out", (dir_ / "never.safetensors").string()});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("layer.qzeros row 0, element 0: AWQ-201 underflow"), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir_ / "never.safetensors"));
  }
}


// One AWQ GEMM layer "layer.", K = 32, N = 8, group_size 32 (one group), built
// from docs/awq.md section 4: every qweight word 0x76543210 (nibble i holds
// column [0,2,4,6,1,3,5,7][i], so code(k, n) = [0,4,1,5,2,6,3,7][n]), the
// qzeros word 0x33333333 (zero 3), scales F16 1.0 except column 1, -0.5.
Bytes AwqGemmFile() {
  Bytes data;
  auto put32 = [&data](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) data.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  for (int k = 0; k < 32; ++k) put32(0x76543210u);
  put32(0x33333333u);
  for (int n = 0; n < 8; ++n) {
    const std::uint16_t half = n == 1 ? 0xB800 : 0x3C00;
    data.push_back(static_cast<std::uint8_t>(half));
    data.push_back(static_cast<std::uint8_t>(half >> 8));
  }
  return File(R"({"layer.qweight":{"dtype":"I32","shape":[32,1],"data_offsets":[0,128]},)"
              R"("layer.qzeros":{"dtype":"I32","shape":[1,1],"data_offsets":[128,132]},)"
              R"("layer.scales":{"dtype":"F16","shape":[1,8],"data_offsets":[132,148]}})",
              data);
}

// out[n][k] = (code(n) - 3) * scale[n] (docs/awq.md section 6).
void ExpectAwqWeights(const fs::path& out) {
  const auto tensors = ReadF32File(out);
  ASSERT_EQ(tensors.size(), 1u);
  ASSERT_TRUE(tensors.count("layer.weight"));
  const SafetensorsTensor& w = tensors.at("layer.weight");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{8, 32}));
  ASSERT_EQ(w.values.size(), 8u * 32u);
  const int code[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int n = 0; n < 8; ++n) {
    for (int k = 0; k < 32; ++k) {
      const float want = static_cast<float>(code[n] - 3) * (n == 1 ? -0.5f : 1.0f);
      EXPECT_EQ(w.values[static_cast<std::size_t>(n * 32 + k)], want) << "n " << n << " k " << k;
    }
  }
}

TEST_F(CliQuantFormatsTest, CheckAndDecodeAwqWithAutoAwqAndGptqModelConfigs) {
  struct Case {
    const char* what;
    const char* config_name;
    std::string config;
  };
  const std::vector<Case> cases = {
      {"AutoAWQ config.json quantization_config", "config.json",
       R"({"model_type":"llama","quantization_config":{"bits":4,"group_size":32,)"
       R"("modules_to_not_convert":null,"quant_method":"awq","version":"gemm","zero_point":true}})"},
      {"GPT-QModel quantize_config.json", "quantize_config.json",
       R"({"bits":4,"group_size":32,"desc_act":false,"method":"awq","quant_method":"awq",)"
       R"("format":"gemm","checkpoint_format":"gemm","pack_dtype":"int32","zero_point":true,"version":"gemm"})"},
      {"AutoAWQ legacy quant_config.json", "quant_config.json",
       R"({"zero_point":true,"q_group_size":32,"w_bit":4,"version":"GEMM","modules_to_not_convert":null})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove_all(dir_ / "m");
    fs::create_directories(dir_ / "m");
    const fs::path in = Write("m/model.safetensors", AwqGemmFile());
    Write(std::string("m/") + c.config_name, Text(c.config));
    const Result check = Quantdiff({"check", in.string()});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    EXPECT_EQ(check.out.find("CFG-005"), std::string::npos) << check.out;
    // The directory as a model directory (docs/model_dir.md): its one weight
    // file, read with the config beside it.
    const Result dir_check = Quantdiff({"check", (dir_ / "m").string()});
    EXPECT_EQ(dir_check.exit_code, 0) << dir_check.out << dir_check.err;
    EXPECT_NE(dir_check.out.find("awq"), std::string::npos) << dir_check.out;
    const fs::path out = dir_ / "out.safetensors";
    const Result run = Quantdiff({"decode", in.string(), "--out", out.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    ExpectAwqWeights(out);
    const Result diff = Quantdiff({"diff", in.string()});
    EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
  }
}

// The other family's label on each file: CFG-005 (docs/awq.md section 2).
TEST_F(CliQuantFormatsTest, CheckNamesBothFamiliesWhenTheLabelIsTheOther) {
  const fs::path awq = Write("awq.safetensors", AwqGemmFile());
  Write("awq.quantize_config.json", Text(GptqConfig("gptq", 4)));
  const Result a = Quantdiff({"check", awq.string()});
  EXPECT_EQ(a.exit_code, 1) << a.out << a.err;
  EXPECT_NE(a.out.find("CFG-005"), std::string::npos) << a.out;

  const fs::path gptq = Write("gptq.safetensors", GptqFile(0x33333333u));
  Write("gptq.quantize_config.json", Text(R"({"bits":4,"group_size":32,"quant_method":"awq","version":"gemm"})"));
  const Result g = Quantdiff({"check", gptq.string()});
  EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
  EXPECT_NE(g.out.find("CFG-005"), std::string::npos) << g.out;
}

}  // namespace
