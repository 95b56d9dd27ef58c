// recognised_cli_test.cc: the quantdiff binary on files of the families it
// recognises but does not decode (docs/recognised.md): `check` accepts a
// well-formed file and names the family (warning REC-101), `decode` refuses
// it with REC-001 and writes nothing (exit 1), a BitBLAS checkpoint is told
// from GPTQ by its config (beside the file, --config, or its directory), and
// a Marlin-labelled GPTQ checkpoint stays GPTQ-005. Files are built by hand
// (tests/recognised_files.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/hostile/run_quantdiff.h"
#include "tests/recognised_files.h"

namespace {

namespace fs = std::filesystem;
using qdtest::MakeFile;

class RecognisedCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = qd::hostile::FreshFolder(fs::path(QD_TEST_TMPDIR) /
                                    testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  std::string Put(const std::string& name, const std::string& bytes) {
    qd::hostile::WriteWhole(dir_ / name, bytes);
    return (dir_ / name).string();
  }
  std::string PutFile(const std::string& name, const qdtest::Bytes& bytes) {
    return Put(name, std::string(bytes.begin(), bytes.end()));
  }
  qd::hostile::RunResult Run(const std::vector<std::string>& args) {
    return qd::hostile::Quantdiff(args, dir_ / "scratch");
  }
  // "rule:field" of every finding of a JSON report.
  static std::vector<std::string> Rules(const std::string& report) {
    const nlohmann::json j = nlohmann::json::parse(report, nullptr, false);
    std::vector<std::string> rules;
    if (j.is_discarded() || !j.contains("findings")) return rules;
    for (const auto& f : j["findings"]) rules.push_back(f.value("rule", "") + ":" + f.value("field", ""));
    return rules;
  }
  // INPUT (a file or a model directory) as docs/recognised.md 0 says: check
  // accepts it naming FAMILY, diff finds the readers agree, decode refuses
  // with REC-001 and writes nothing.
  void ExpectCheckedNotDecoded(const std::string& input, const std::string& family) {
    const qd::hostile::RunResult check = Run({"check", input, "--report", "json"});
    EXPECT_EQ(check.exit_code, 0) << check.err;
    EXPECT_EQ(Rules(check.out), std::vector<std::string>{"REC-101:" + family}) << check.out;
    const qd::hostile::RunResult diff = Run({"diff", input});
    EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
    const std::string out = (dir_ / "out.safetensors").string();
    const qd::hostile::RunResult decode = Run({"decode", input, "--out", out});
    EXPECT_EQ(decode.exit_code, 1) << decode.err;
    EXPECT_NE(decode.err.find("REC-001"), std::string::npos) << decode.err;
    EXPECT_FALSE(fs::exists(out));
  }
  fs::path dir_;
};

const std::vector<qdtest::T> kExl3 = {{"m.trellis", "I16", {1, 1, 16}}, {"m.suh", "F16", {16}}};
const char kExl3Config[] =
    R"({"quantization_config":{"quant_method":"exl3","tensor_storage":{"m":{"stored_tensors":{)"
    R"("m.trellis":{"shape":[1,1,16],"torch_dtype":"torch.int16"},)"
    R"("m.suh":{"shape":[16],"torch_dtype":"torch.float16"}}}}}})";

TEST_F(RecognisedCli, CheckNamesExl3AndDecodeRefusesWithRec001) {
  const std::string file = PutFile("model.safetensors", MakeFile(kExl3));
  Put("config.json", kExl3Config);
  const qd::hostile::RunResult check = Run({"check", file, "--report", "json"});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(Rules(check.out), std::vector<std::string>{"REC-101:exl3"}) << check.out;
  const qd::hostile::RunResult text = Run({"check", file});
  EXPECT_NE(text.out.find("EXL3"), std::string::npos) << text.out;

  const std::string out = (dir_ / "out.safetensors").string();
  const qd::hostile::RunResult decode = Run({"decode", file, "--out", out});
  EXPECT_EQ(decode.exit_code, 1) << decode.err;
  EXPECT_NE(decode.err.find("REC-001"), std::string::npos) << decode.err;
  EXPECT_FALSE(fs::exists(out));
  // diff: both readers agree, on the format too.
  const qd::hostile::RunResult diff = Run({"diff", file});
  EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
  EXPECT_NE(diff.out.find("[recognised]"), std::string::npos) << diff.out;
}

TEST_F(RecognisedCli, Exl3WhoseTensorStorageDisagreesIsRefusedByCheck) {
  const std::string file = PutFile("model.safetensors", MakeFile({{"m.trellis", "I16", {1, 1, 8}}, kExl3[1]}));
  Put("config.json", kExl3Config);
  const qd::hostile::RunResult check = Run({"check", file, "--report", "json"});
  EXPECT_EQ(check.exit_code, 1) << check.err;
  EXPECT_EQ(Rules(check.out), std::vector<std::string>{"REC-007:shape"}) << check.out;
  const qd::hostile::RunResult decode = Run({"decode", file, "--out", (dir_ / "o.safetensors").string()});
  EXPECT_EQ(decode.exit_code, 1);
  EXPECT_NE(decode.err.find("REC-007"), std::string::npos) << decode.err;
}

TEST_F(RecognisedCli, EveryOtherFamilyIsCheckedAndNotDecoded) {
  const std::vector<std::pair<std::string, std::vector<qdtest::T>>> families = {
      {"qqq", {{"m.B", "I32", {2, 8}}, {"m.s_channel", "F32", {1, 4}}, {"m.s_group", "F16", {0}}}},
      {"vptq", {{"m.centroids.weight", "F16", {2, 8}}, {"m.indices", "I32", {2, 3, 1}}}},
      {"paroquant",
       {{"m.qweight", "I32", {16, 1}}, {"m.qzeros", "I32", {1, 1}}, {"m.scales", "F16", {1, 8}},
        {"m.theta", "F32", {1, 8}}, {"m.pairs", "I16", {1, 16}}, {"m.channel_scales", "F16", {1, 16}}}}};
  for (const auto& [family, tensors] : families) {
    SCOPED_TRACE(family);
    const std::string file = PutFile(family + ".safetensors", MakeFile(tensors));
    const qd::hostile::RunResult check = Run({"check", file, "--report", "json"});
    EXPECT_EQ(check.exit_code, 0) << check.err;
    EXPECT_EQ(Rules(check.out), std::vector<std::string>{"REC-101:" + family}) << check.out;
    const qd::hostile::RunResult decode = Run({"decode", file, "--out", (dir_ / "o.safetensors").string()});
    EXPECT_EQ(decode.exit_code, 1);
    EXPECT_NE(decode.err.find("REC-001"), std::string::npos) << decode.err;
    EXPECT_FALSE(fs::exists(dir_ / "o.safetensors"));
  }
}

// A model directory (docs/model_dir.md): an EXL3 layer split over two shards
// is one layer, checked against config.json; decode DIR refuses with REC-001.
TEST_F(RecognisedCli, ShardedExl3DirectoryIsCheckedAsOneModelAndNotDecoded) {
  fs::create_directories(dir_ / "model");
  PutFile("model/model-00001-of-00002.safetensors", MakeFile({kExl3[0], {"norm", "F32", {2}}}));
  PutFile("model/model-00002-of-00002.safetensors", MakeFile({kExl3[1]}));
  Put("model/model.safetensors.index.json",
      R"({"weight_map":{"m.trellis":"model-00001-of-00002.safetensors",)"
      R"("norm":"model-00001-of-00002.safetensors","m.suh":"model-00002-of-00002.safetensors"}})");
  Put("model/config.json", kExl3Config);
  const std::string model = (dir_ / "model").string();
  ExpectCheckedNotDecoded(model, "exl3");

  // The suh shard's shape no longer what tensor_storage says: REC-007 names that shard.
  PutFile("model/model-00002-of-00002.safetensors", MakeFile({{"m.suh", "F16", {8}}}));
  const qd::hostile::RunResult broken = Run({"check", model, "--report", "json"});
  EXPECT_EQ(broken.exit_code, 1) << broken.err;
  EXPECT_EQ(Rules(broken.out), std::vector<std::string>{"REC-007:shape"}) << broken.out;
  EXPECT_NE(broken.out.find("model-00002-of-00002.safetensors"), std::string::npos) << broken.out;
}

// BitBLAS (docs/recognised.md 2, 4): N 16, G 2, b 4, I8 storage; scales
// [16, 2], qzeros [2, 8]; its names are GPTQ's.
const std::vector<qdtest::T> kBitblas = {{"m.qweight", "I8", {16, 32}}, {"m.scales", "F16", {16, 2}},
                                         {"m.qzeros", "I8", {2, 8}}};
const char kBitblasConfig[] = R"({"bits":4,"group_size":32,"quant_method":"gptq","format":"bitblas"})";

TEST_F(RecognisedCli, BitblasIsToldFromGptqByItsConfigBesideTheFileOrGiven) {
  const std::string file = PutFile("model.safetensors", MakeFile(kBitblas));
  // No config: no label, so the names are AWQ-shaped GPTQ names (docs/awq.md
  // 2), read by a reader that needs a config.
  const qd::hostile::RunResult alone = Run({"check", file, "--report", "json"});
  EXPECT_EQ(alone.exit_code, 1) << alone.err;
  EXPECT_EQ(Rules(alone.out), std::vector<std::string>{"CFG-003:config"}) << alone.out;

  const std::string given = Put("bitblas.json", kBitblasConfig);
  const qd::hostile::RunResult with_config = Run({"check", file, "--config", given, "--report", "json"});
  EXPECT_EQ(with_config.exit_code, 0) << with_config.err;
  EXPECT_EQ(Rules(with_config.out), std::vector<std::string>{"REC-101:bitblas"}) << with_config.out;

  Put("quantize_config.json", kBitblasConfig);
  ExpectCheckedNotDecoded(file, "bitblas");
  const qd::hostile::RunResult diff = Run({"diff", file});
  EXPECT_NE(diff.out.find("[recognised]"), std::string::npos) << diff.out;
  // --format gptq reads it as GPTQ with its config: format bitblas is CFG-005.
  const qd::hostile::RunResult as_gptq = Run({"check", file, "--format", "gptq", "--report", "json"});
  EXPECT_EQ(as_gptq.exit_code, 1) << as_gptq.err;
  EXPECT_EQ(Rules(as_gptq.out), std::vector<std::string>{"CFG-005:format"}) << as_gptq.out;

  // Both qzeros and its alias zeros: REC-008.
  std::vector<qdtest::T> both = kBitblas;
  both.push_back({"m.zeros", "I8", {2, 8}});
  const std::string two = PutFile("two.safetensors", MakeFile(both));
  const qd::hostile::RunResult refused = Run({"check", two, "--report", "json"});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_EQ(Rules(refused.out), std::vector<std::string>{"REC-008:zeros"}) << refused.out;
}

// A sharded BitBLAS directory: config.json's quantization_config labels the
// merged table; a layer split over two shards is one layer.
TEST_F(RecognisedCli, ShardedBitblasDirectoryIsCheckedAsOneModelAndNotDecoded) {
  fs::create_directories(dir_ / "model");
  PutFile("model/model-00001-of-00002.safetensors", MakeFile({kBitblas[0], kBitblas[1]}));
  PutFile("model/model-00002-of-00002.safetensors", MakeFile({kBitblas[2], {"norm", "F32", {2}}}));
  Put("model/model.safetensors.index.json",
      R"({"weight_map":{"m.qweight":"model-00001-of-00002.safetensors",)"
      R"("m.scales":"model-00001-of-00002.safetensors","m.qzeros":"model-00002-of-00002.safetensors",)"
      R"("norm":"model-00002-of-00002.safetensors"}})");
  Put("model/config.json", std::string(R"({"model_type":"llama","quantization_config":)") + kBitblasConfig + "}");
  const std::string model = (dir_ / "model").string();
  ExpectCheckedNotDecoded(model, "bitblas");

  // One weight file, no index: read as that file with the directory's config.
  fs::create_directories(dir_ / "single");
  PutFile("single/model.safetensors", MakeFile(kBitblas));
  Put("single/config.json", std::string(R"({"quantization_config":)") + kBitblasConfig + "}");
  ExpectCheckedNotDecoded((dir_ / "single").string(), "bitblas");

  // qzeros with 3 group rows where scales has 2: REC-004 names that shard.
  PutFile("model/model-00002-of-00002.safetensors", MakeFile({{"m.qzeros", "I8", {3, 8}}, {"norm", "F32", {2}}}));
  const qd::hostile::RunResult broken = Run({"check", model, "--report", "json"});
  EXPECT_EQ(broken.exit_code, 1) << broken.err;
  EXPECT_EQ(Rules(broken.out), std::vector<std::string>{"REC-004:shape"}) << broken.out;
  EXPECT_NE(broken.out.find("model-00002-of-00002.safetensors"), std::string::npos) << broken.out;
}

TEST_F(RecognisedCli, MarlinLabelledGptqStaysGptq005) {
  const std::string file =
      PutFile("model.safetensors", MakeFile({{"l.qweight", "I32", {4, 32}}, {"l.qzeros", "I32", {1, 4}},
                                             {"l.scales", "F16", {1, 32}}, {"l.g_idx", "I32", {32}}}));
  Put("quantize_config.json", R"({"bits":4,"group_size":-1,"checkpoint_format":"marlin"})");
  const qd::hostile::RunResult check = Run({"check", file, "--report", "json"});
  EXPECT_EQ(check.exit_code, 1) << check.err;
  EXPECT_EQ(Rules(check.out), std::vector<std::string>{"GPTQ-005:checkpoint_format"}) << check.out;
}

}  // namespace
