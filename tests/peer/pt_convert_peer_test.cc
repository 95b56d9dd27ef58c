// pt_convert_peer_test: `quantdiff convert IN.pt --to safetensors` (the built
// binary) on every case of ${QD_PEER_DIR}/pt/manifest.json (issue 10 item 4):
//  * accept: exit 0; OUT, read the tests' own way, holds exactly the
//    manifest's tensors, each with the manifest's tensor_sha256 over its
//    bytes and, where the manifest records them, the safetensors dtype of its
//    torch dtype (safetensors README's names) and its shape;
//  * reject: exit 1 with the rule docs/pt.md assigns to the case on standard
//    error, no OUT and no temporary file left, nothing executed.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/hostile/run_quantdiff.h"
#include "tests/peer/pt_peer_cases.h"
#include "tests/safetensors_by_the_tests.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qdtest::pt_peer::kDir;

// torch dtype -> the safetensors README's dtype name.
std::vector<std::uint8_t> ReadBytes(const fs::path& path) {
  const std::string bytes = qd::hostile::ReadWhole(path);
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

const std::map<std::string, std::string> kSafetensorsDtype = {
    {"torch.float64", "F64"}, {"torch.float32", "F32"}, {"torch.float16", "F16"},
    {"torch.bfloat16", "BF16"}, {"torch.int64", "I64"}, {"torch.int32", "I32"},
    {"torch.int16", "I16"}, {"torch.int8", "I8"}, {"torch.uint8", "U8"}, {"torch.bool", "BOOL"},
};

std::vector<std::string> CaseFiles(const std::string& verdict) {
  std::vector<std::string> files;
  const json manifest = qdtest::pt_peer::Manifest();
  for (const json& c : manifest["cases"]) {
    if (c["verdict"] == verdict) files.push_back(c["file"].get<std::string>());
  }
  return files;
}

const json& CaseOf(const json& manifest, const std::string& file) {
  for (const json& c : manifest["cases"]) {
    if (c["file"] == file) return c;
  }
  static const json kNone;
  return kNone;
}

std::string TestName(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

class PtConvertPeer : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    scratch_ = fs::path(QD_TEST_TMPDIR) / TestName({GetParam(), 0});
    fs::remove_all(scratch_);
    fs::create_directories(scratch_);
  }
  qd::hostile::RunResult Convert(const fs::path& out) {
    return qd::hostile::Quantdiff(
        {"convert", (kDir / GetParam()).string(), "--to", "safetensors", "--out", out.string()},
        scratch_);
  }
  fs::path scratch_;
};

class PtConvertPeerAccept : public PtConvertPeer {};

TEST_P(PtConvertPeerAccept, TensorsWrittenVerbatim) {
  const json manifest = qdtest::pt_peer::Manifest();
  const json& c = CaseOf(manifest, GetParam());
  ASSERT_EQ(c["verdict"], "accept");
  const fs::path out = scratch_ / "out.safetensors";
  const qd::hostile::RunResult r = Convert(out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::uint8_t> file = ReadBytes(out);
  const json header = qdtest::HeaderReadByTheTests(file);
  ASSERT_TRUE(header.is_object());
  const json& sums = c["tensor_sha256"];
  EXPECT_EQ(header.size() - (header.contains("__metadata__") ? 1 : 0), sums.size());
  for (auto it = sums.begin(); it != sums.end(); ++it) {
    const qdtest::RawTensor t = qdtest::TensorReadByTheTests(file, it.key());
    ASSERT_TRUE(t.found) << it.key();
    EXPECT_EQ(qdtest::pt_peer::Sha256Hex(t.bytes), it.value().get<std::string>()) << it.key();
    if (c.contains("tensors")) {
      const json& spec = c["tensors"][it.key()];
      ASSERT_EQ(kSafetensorsDtype.count(spec[0].get<std::string>()), 1u) << spec[0];
      EXPECT_EQ(t.dtype, kSafetensorsDtype.at(spec[0].get<std::string>())) << it.key();
      EXPECT_EQ(t.shape, spec[1].get<std::vector<std::uint64_t>>()) << it.key();
    }
  }
  // Only OUT is left: no temporary file beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(scratch_), fs::directory_iterator()), 1);
}

INSTANTIATE_TEST_SUITE_P(Cases, PtConvertPeerAccept, testing::ValuesIn(CaseFiles("accept")),
                         TestName);

// bnb_like_mixed.pt's values (docs/pt.md 6.2) as __metadata__ strings
// (docs/pt.md 13.2): a str as its text, an int in decimal, a tuple as a JSON array.
TEST(PtConvertPeerValues, BnbLikeMixedMetadata) {
  const fs::path scratch = fs::path(QD_TEST_TMPDIR) / "bnb_like_mixed_metadata";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const fs::path out = scratch / "out.safetensors";
  const qd::hostile::RunResult r = qd::hostile::Quantdiff(
      {"convert", (kDir / "bnb_like_mixed.pt").string(), "--to", "safetensors", "--out", out.string()},
      scratch);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json header = qdtest::HeaderReadByTheTests(ReadBytes(out));
  ASSERT_TRUE(header.contains("__metadata__"));
  EXPECT_EQ(header["__metadata__"],
            (json{{"meta.quant_type", "nf4"}, {"meta.blocksize", "32"}, {"meta.shape", "[40, 30]"}}));
}

class PtConvertPeerReject : public PtConvertPeer {};

TEST_P(PtConvertPeerReject, RefusedWithTheRuleNothingWritten) {
  const json manifest = qdtest::pt_peer::Manifest();
  const json& c = CaseOf(manifest, GetParam());
  ASSERT_EQ(c["verdict"], "reject");
  ASSERT_EQ(qdtest::pt_peer::kRejects.count(GetParam()), 1u);
  const qdtest::pt_peer::Expected& want = qdtest::pt_peer::kRejects.at(GetParam());
  EXPECT_EQ(c["rule"], want.category);
  const fs::path out = scratch_ / "out.safetensors";
  const qd::hostile::RunResult r = Convert(out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(std::string(want.rule) + " error field=" + want.field), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(scratch_));
  EXPECT_FALSE(fs::exists(qdtest::pt_peer::kPwned));
}

INSTANTIATE_TEST_SUITE_P(Cases, PtConvertPeerReject, testing::ValuesIn(CaseFiles("reject")),
                         TestName);

}  // namespace
