// ggml_peer_test.cc: the ggml library quantdiff loads (thirdparty/ggml/,
// fetched by scripts/fetch_ggml.sh) against the vectors ggml's own code made
// at a known commit (${QD_PEER_DIR}/gguf/manifest.json). Before ggml can be
// the third reader of the GGUF block types (issue 12), the adapter must
// reach the right exports and this build must be the ggml the vectors
// describe:
//   - block geometry: values and bytes per block as the manifest lists them;
//   - dequantize_row_<type> of the vector's blocks gives its `dequant`
//     tensor bit for bit (the manifest: dequantize is build independent);
//   - ggml_validate_row_data accepts every vector's blocks;
//   - quantize_row_<type>_ref of the vector's `input` gives its `blocks`
//     byte for byte for every type but iq4_nl, whose blocks come from
//     ggml_quantize_chunk, not the _ref function. The manifest warns that
//     K-quant reference quantizers change in a build with FMA contraction;
//     the pinned build has none (all 17 K-quant cases match), and a new pin
//     that did would fail here, as it should: quantdiff's encoders are held
//     to these bytes.
// Every expected value is read from the peer files with the tests' own
// safetensors reader.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/safetensors_by_the_tests.h"
#include "thirdparty/ggml/ggml_library.h"

namespace {

const std::string kPeerDir = QD_PEER_GGUF_DIR;

std::vector<std::uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

nlohmann::json Manifest() {
  std::ifstream in(kPeerDir + "/manifest.json");
  return nlohmann::json::parse(in);
}

std::vector<float> Floats(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | bytes[4 * i + static_cast<std::size_t>(b)];
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

std::uint32_t Bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

class GgmlPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = qd::ggml::SharedDefaultLibrary();
    ASSERT_NE(library_, nullptr) << "ggml did not open from " << qd::ggml::DefaultLibraryPath();
  }
  const qd::ggml::Library* library_ = nullptr;
};

TEST_F(GgmlPeer, EveryCaseIsListedAndThere) {
  const nlohmann::json manifest = Manifest();
  ASSERT_EQ(manifest["files"].size(), 37u);
  std::set<std::string> types;
  for (const nlohmann::json& f : manifest["files"]) types.insert(f["type"].get<std::string>());
  EXPECT_EQ(types, (std::set<std::string>{"iq4_nl", "q2_K", "q3_K", "q4_0", "q4_1", "q4_K", "q5_0",
                                          "q5_1", "q5_K", "q6_K", "q8_0"}));
}

TEST_F(GgmlPeer, BlockGeometryIsTheManifests) {
  const nlohmann::json manifest = Manifest();
  for (const nlohmann::json& f : manifest["files"]) {
    std::int64_t values = 0;
    std::size_t bytes = 0;
    ASSERT_TRUE(library_->BlockGeometry(f["ggml_type_id"].get<int>(), &values, &bytes)) << f["file"];
    EXPECT_EQ(values, f["block_size"].get<std::int64_t>()) << f["file"];
    EXPECT_EQ(bytes, f["type_size"].get<std::size_t>()) << f["file"];
  }
}

TEST_F(GgmlPeer, DequantizeGivesTheVectorsDequantBitForBit) {
  const nlohmann::json manifest = Manifest();
  for (const nlohmann::json& f : manifest["files"]) {
    const std::string file = f["file"].get<std::string>();
    const std::vector<std::uint8_t> bytes = ReadFile(kPeerDir + "/" + file);
    const qdtest::RawTensor blocks = qdtest::TensorReadByTheTests(bytes, "blocks");
    const qdtest::RawTensor dequant = qdtest::TensorReadByTheTests(bytes, "dequant");
    ASSERT_TRUE(blocks.found && dequant.found) << file;
    const std::uint64_t rows = f["shape"][0].get<std::uint64_t>();
    const std::uint64_t cols = f["shape"][1].get<std::uint64_t>();
    const std::vector<float> want = Floats(dequant.bytes);
    ASSERT_EQ(want.size(), rows * cols) << file;
    std::vector<float> got(want.size());
    const std::size_t row_bytes = blocks.bytes.size() / rows;
    for (std::uint64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(library_->Dequantize(f["type"].get<std::string>(), blocks.bytes.data() + r * row_bytes,
                                       got.data() + r * cols, static_cast<std::int64_t>(cols)))
          << file;
    }
    std::size_t differing = 0;
    for (std::size_t i = 0; i < want.size(); ++i) differing += Bits(got[i]) != Bits(want[i]);
    EXPECT_EQ(differing, 0u) << file;
  }
}

TEST_F(GgmlPeer, ValidateRowAcceptsEveryVectorsBlocks) {
  const nlohmann::json manifest = Manifest();
  for (const nlohmann::json& f : manifest["files"]) {
    const std::string file = f["file"].get<std::string>();
    const qdtest::RawTensor blocks = qdtest::TensorReadByTheTests(ReadFile(kPeerDir + "/" + file), "blocks");
    ASSERT_TRUE(blocks.found) << file;
    EXPECT_TRUE(library_->ValidateRow(f["ggml_type_id"].get<int>(), blocks.bytes.data(), blocks.bytes.size()))
        << file;
  }
}

TEST_F(GgmlPeer, ValidateRowRefusesANonFiniteScale) {
  // A q8_0 block opens with its F16 scale d; 0x7c00 is +infinity, which
  // ggml_validate_row_data refuses (a check the GGUF rules will mirror).
  std::vector<std::uint8_t> block(34, 0);
  block[0] = 0x00;
  block[1] = 0x7c;
  EXPECT_FALSE(library_->ValidateRow(8, block.data(), block.size()));
  block[1] = 0x3c;  // 1.0
  EXPECT_TRUE(library_->ValidateRow(8, block.data(), block.size()));
}

TEST_F(GgmlPeer, ReferenceQuantizerGivesTheVectorsBlocks) {
  const std::set<std::string> byte_identical = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K",
                                                "q3_K", "q4_K", "q5_K", "q6_K"};
  int checked = 0;
  const nlohmann::json manifest = Manifest();
  for (const nlohmann::json& f : manifest["files"]) {
    const std::string type = f["type"].get<std::string>();
    if (byte_identical.count(type) == 0) continue;
    const std::string file = f["file"].get<std::string>();
    const std::vector<std::uint8_t> bytes = ReadFile(kPeerDir + "/" + file);
    const qdtest::RawTensor input = qdtest::TensorReadByTheTests(bytes, "input");
    const qdtest::RawTensor blocks = qdtest::TensorReadByTheTests(bytes, "blocks");
    ASSERT_TRUE(input.found && blocks.found) << file;
    const std::uint64_t rows = f["shape"][0].get<std::uint64_t>();
    const std::uint64_t cols = f["shape"][1].get<std::uint64_t>();
    const std::vector<float> values = Floats(input.bytes);
    const std::size_t row_bytes = blocks.bytes.size() / rows;
    std::vector<std::uint8_t> got(blocks.bytes.size(), 0xAA);
    for (std::uint64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(library_->QuantizeReference(type, values.data() + r * cols, got.data() + r * row_bytes,
                                              static_cast<std::int64_t>(cols)))
          << file;
    }
    EXPECT_EQ(got, blocks.bytes) << file;
    ++checked;
  }
  EXPECT_EQ(checked, 34);  // the manifest's 37 cases but iq4_nl's 3
}

TEST(GgmlLibrary, OpenNamesWhatIsMissing) {
  std::string error;
  EXPECT_FALSE(qd::ggml::Library::Open("/nonexistent/libggml-base.so", &error).has_value());
  EXPECT_NE(error.find("/nonexistent/libggml-base.so"), std::string::npos) << error;
  error.clear();
  // A shared library that is not ggml: the C library itself.
  EXPECT_FALSE(qd::ggml::Library::Open("libc.so.6", &error).has_value());
  EXPECT_NE(error.find("not a ggml base library"), std::string::npos) << error;
}

}  // namespace
