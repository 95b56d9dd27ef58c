// model_dir_peer_test.cc: the model directories of ${QD_PEER_DIR}/models,
// written by the upstream packers' own code (manifest.json), read as one
// input each (docs/model_dir.md) by the codec, the oracle and `diff`:
//
//  * accept directories are accepted and decode to EXPECTED/<name>.expected
//    .safetensors bit for bit (every quantized linear; the expected values
//    are read by the tests' own safetensors reader);
//  * reject directories are refused with the rule the manifest's reason
//    describes, in the file it names where the rule is about that file;
//  * codec and oracle agree on every directory (harness DiffModelDir).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/model_dir_input.h"
#include "codecs/model_dir.h"
#include "harness/differ.h"
#include "harness/model_dir_differ.h"
#include "tests/peer/peer_file.h"
#include "tests/safetensors_by_the_tests.h"

namespace {

namespace fs = std::filesystem;
using qdtest::peer::Case;

const fs::path kModels = QD_PEER_MODELS_DIR;

// What each reject directory's `reason` describes, as a rule of the catalogue,
// and the file the finding names (relative to the directory; "" when the
// finding is about a tensor of a shard the manifest does not single out).
struct Expected {
  std::string rule;
  std::string file;
};
const std::map<std::string, Expected>& Rejections() {
  static const std::map<std::string, Expected> m = {
      // "index metadata.total_size is 1058816; the tensors ... add up to 1083392"
      {"broken-c-index-total-size", {"IDX-011", "model.safetensors.index.json"}},
      // "config.json quantization_config.bits is 4 but ... the tensors are 3-bit":
      // the first layer's qweight shape (GPTQ-002) in the shard holding it.
      {"broken-e-bits-mismatch", {"GPTQ-002", "model-00001-of-00002.safetensors"}},
      // "quantize_config.json says group_size 64 while config.json ... 128"
      {"broken-f-group-size-disagree", {"CFG-010", "quantize_config.json"}},
      // "model-00001-of-00002.safetensors has 37 bytes after the end of the last tensor"
      {"broken-i-trailing-bytes", {"ST-012", "model-00001-of-00002.safetensors"}},
  };
  return m;
}

std::vector<Case> Directories() {
  std::ifstream in(kModels / "manifest.json");
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  std::vector<Case> cases;
  if (!m.is_object() || !m.contains("directories")) return cases;
  for (const nlohmann::json& d : m["directories"]) cases.push_back({d["name"].get<std::string>(), d});
  return cases;
}

class ModelDirPeer : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(qd::cli::OpenModelDir((kModels / GetParam().id).string(), &input_, &error)) << error;
  }
  qd::cli::ModelDirInput input_;
};

TEST(ModelDirPeerManifest, HasTheDirectoriesItCounts) {
  std::ifstream in(kModels / "manifest.json");
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(Directories().size(), m["number_of_directories"].get<std::size_t>());
  std::size_t rejects = 0;
  for (const Case& c : Directories()) rejects += c.spec["verdict"] == "reject";
  EXPECT_EQ(rejects, Rejections().size()) << "a reject directory without its expected rule here";
}

TEST_P(ModelDirPeer, CodecGivesTheManifestsVerdict) {
  const Case& c = GetParam();
  qd::codec::ModelDirRead read;
  const qd::Outcome o = qd::codec::CheckModelDir(input_.Listing(), &read);
  ASSERT_FALSE(read.unsupported) << read.unsupported_why;
  if (c.spec["verdict"] == "accept") {
    EXPECT_FALSE(o.refused) << c.id << ": "
                            << (o.findings.empty() ? "" : qd::harness::Describe(o.findings.back()));
    return;
  }
  const Expected& want = Rejections().at(c.id);
  ASSERT_TRUE(o.refused);
  EXPECT_EQ(o.findings.back().rule, want.rule) << qd::harness::Describe(o.findings.back());
  EXPECT_EQ(o.findings.back().file, input_.Listing().prefix + want.file);
  EXPECT_EQ(c.spec["verdict"], "reject");
}

TEST_P(ModelDirPeer, AcceptedDirectoriesDecodeToExpectedBitForBit) {
  const Case& c = GetParam();
  if (c.spec["verdict"] != "accept") return;  // nothing to decode: the verdict test covers it
  const qd::Outcome o = qd::codec::DecodeModelDir(input_.Listing());
  ASSERT_FALSE(o.refused);
  const std::vector<std::uint8_t> expected =
      qdtest::peer::ReadBytes(kModels / c.spec["expected"]["path"].get<std::string>());
  ASSERT_FALSE(expected.empty());
  int compared = 0;
  const nlohmann::json header = qdtest::HeaderReadByTheTests(expected);
  ASSERT_TRUE(header.is_object());
  for (const auto& item : header.items()) {
    const std::string name = item.key();  // not a structured binding: a lambda captures it
    if (name == "__metadata__") continue;
    const auto it = std::find_if(o.tensors.begin(), o.tensors.end(),
                                 [&](const qd::DecodedTensor& t) { return t.name == name; });
    ASSERT_NE(it, o.tensors.end()) << name << " not decoded";
    EXPECT_EQ(qdtest::peer::FirstDifference(it->values,
                                            qdtest::peer::FloatsReadByTheTests(expected, name)),
              "")
        << name;
    ++compared;
  }
  EXPECT_EQ(compared, c.spec["expected"]["tensors"].get<int>());
}

TEST_P(ModelDirPeer, CodecAndOracleAgree) {
  const qd::harness::DirDiff d = qd::harness::DiffModelDir(input_.Listing());
  EXPECT_FALSE(d.streamed.divergence.has_value())
      << d.streamed.divergence->signature << ": " << d.streamed.divergence->detail;
  EXPECT_EQ(d.codec_read.format, d.oracle_format);
}

INSTANTIATE_TEST_SUITE_P(Manifest, ModelDirPeer, testing::ValuesIn(Directories()),
                         qdtest::peer::CaseName);

}  // namespace
