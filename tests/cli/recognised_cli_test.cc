// recognised_cli_test.cc: the quantdiff binary on files of the families it
// recognises but does not decode (docs/recognised.md): `check` accepts a
// well-formed file and names the family (warning REC-101), `decode` refuses
// it with REC-001 and writes nothing (exit 1), and a Marlin-labelled GPTQ
// checkpoint stays GPTQ-005. Files are built by hand (tests/recognised_files.h).
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
  const qd::hostile::RunResult check = Run({"check", model, "--report", "json"});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ(Rules(check.out), std::vector<std::string>{"REC-101:exl3"}) << check.out;
  EXPECT_EQ(Run({"diff", model}).exit_code, 0);

  const std::string out = (dir_ / "out.safetensors").string();
  const qd::hostile::RunResult decode = Run({"decode", model, "--out", out});
  EXPECT_EQ(decode.exit_code, 1) << decode.err;
  EXPECT_NE(decode.err.find("REC-001"), std::string::npos) << decode.err;
  EXPECT_FALSE(fs::exists(out));

  // The suh shard's shape no longer what tensor_storage says: REC-007 names that shard.
  PutFile("model/model-00002-of-00002.safetensors", MakeFile({{"m.suh", "F16", {8}}}));
  const qd::hostile::RunResult broken = Run({"check", model, "--report", "json"});
  EXPECT_EQ(broken.exit_code, 1) << broken.err;
  EXPECT_EQ(Rules(broken.out), std::vector<std::string>{"REC-007:shape"}) << broken.out;
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
