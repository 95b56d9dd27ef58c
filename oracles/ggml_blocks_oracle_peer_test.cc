// ggml_blocks_oracle_peer_test.cc: the oracle's ggml block decoder against
// the 37 cases ggml's own code made (${QD_PEER_DIR}/gguf, read in place):
// every case's `blocks` decodes to its `dequant` bit for bit, -0.0 included,
// and the oracle's block shapes are the manifest's. Like the oracles it
// includes nothing from codecs/ (or tests/): the manifest is read with the
// oracle's JSON parser, the files with its safetensors container stage.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/bytes.h"
#include "oracles/ggml_blocks.h"
#include "oracles/peer_test_support.h"
#include "oracles/safetensors.h"

namespace {

using qd::oracle::JsonDocument;
using qd::oracle::kNoNode;
using qd::oracle::peer_test::Bytes;

const std::string kDir = QD_GGUF_PEER_DIR;

// The raw bytes of tensor `name` of an accepted safetensors file (empty
// when the container refuses it or the tensor is missing).
Bytes TensorBytes(const Bytes& file, const std::string& name) {
  qd::Outcome outcome;
  qd::oracle::Container container;
  if (!qd::oracle::CheckContainer(qd::oracle::peer_test::View(file), name, &outcome, &container)) return {};
  for (const qd::oracle::ContainerTensor& t : container.tensors) {
    if (t.name == name) {
      const std::uint8_t* data = file.data() + container.data_start;
      return Bytes(data + t.begin, data + t.end);
    }
  }
  return {};
}

TEST(GgmlBlocksOraclePeer, DecodeIsGgmlsDequantBitForBit) {
  const qd::oracle::peer_test::Json manifest = qd::oracle::peer_test::LoadJson(kDir + "/manifest.json");
  ASSERT_TRUE(manifest.ok);
  const JsonDocument& d = manifest.document;
  const std::uint32_t files = d.FindMember(0, "files");
  ASSERT_NE(files, kNoNode);
  int cases = 0;
  for (std::uint32_t f = d.nodes[files].first_child; f != kNoNode; f = d.nodes[f].next_sibling) {
    ++cases;
    const std::string file = qd::oracle::peer_test::StringMember(d, f, "file");
    const std::string type = qd::oracle::peer_test::StringMember(d, f, "type");
    const auto shape = qd::oracle::GgmlBlockShapeOf(type);
    ASSERT_TRUE(shape.has_value()) << file;
    EXPECT_EQ(static_cast<std::uint64_t>(shape->weights_per_block),
              qd::oracle::peer_test::IntegerMember(d, f, "block_size"))
        << file;
    EXPECT_EQ(static_cast<std::uint64_t>(shape->bytes_per_block),
              qd::oracle::peer_test::IntegerMember(d, f, "type_size"))
        << file;
    const Bytes bytes = qd::oracle::peer_test::ReadBytes(kDir + "/" + file);
    const Bytes blocks = TensorBytes(bytes, "blocks");
    const Bytes dequant = TensorBytes(bytes, "dequant");
    ASSERT_FALSE(blocks.empty() || dequant.empty()) << file;
    std::vector<float> got;
    ASSERT_TRUE(qd::oracle::DecodeGgmlBlocks(type, blocks, &got)) << file;
    ASSERT_EQ(4 * got.size(), dequant.size()) << file;
    std::size_t differing = 0;
    std::size_t first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (qd::oracle::BitsOfFloat(got[i]) != qd::oracle::LoadU32(dequant.data() + 4 * i) && differing++ == 0) {
        first = i;
      }
    }
    EXPECT_EQ(differing, 0u) << file << " first at " << first;
  }
  EXPECT_EQ(cases, 37);
}

TEST(GgmlBlocksOraclePeer, RefusesPartialBlocksAndUnknownTypes) {
  std::vector<float> out = {1.0f};
  EXPECT_FALSE(qd::oracle::DecodeGgmlBlocks("q4_0", std::vector<std::uint8_t>(19, 0), &out));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(qd::oracle::DecodeGgmlBlocks("q4_K_M", std::vector<std::uint8_t>(144, 0), &out));
  EXPECT_FALSE(qd::oracle::GgmlBlockShapeOf("Q4_0").has_value());
}

}  // namespace
