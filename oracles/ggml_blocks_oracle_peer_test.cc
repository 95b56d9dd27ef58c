// ggml_blocks_oracle_peer_test.cc: the oracle's ggml block decoder against
// the 37 cases ggml's own code made (${QD_PEER_DIR}/gguf, read in place):
// every case's `blocks` decodes to its `dequant` bit for bit, -0.0 included,
// and the oracle's block shapes are the manifest's. Includes nothing from
// codecs/.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/ggml_blocks.h"
#include "tests/ggml/ggml_peer_cases.h"

namespace {

std::uint32_t Bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

TEST(GgmlBlocksOraclePeer, DecodeIsGgmlsDequantBitForBit) {
  const auto cases = qdtest::ggml_peer::LoadCases(QD_GGUF_PEER_DIR);
  ASSERT_EQ(cases.size(), 37u);
  for (const auto& c : cases) {
    ASSERT_TRUE(c.ok) << c.file;
    const auto shape = qd::oracle::GgmlBlockShapeOf(c.type);
    ASSERT_TRUE(shape.has_value()) << c.file;
    EXPECT_EQ(c.blocks.size() / c.rows,
              c.cols / static_cast<std::uint64_t>(shape->weights_per_block) *
                  static_cast<std::uint64_t>(shape->bytes_per_block))
        << c.file;
    std::vector<float> got;
    ASSERT_TRUE(qd::oracle::DecodeGgmlBlocks(c.type, c.blocks, &got)) << c.file;
    ASSERT_EQ(got.size(), c.dequant.size()) << c.file;
    std::size_t differing = 0;
    std::size_t first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (Bits(got[i]) != Bits(c.dequant[i]) && differing++ == 0) first = i;
    }
    EXPECT_EQ(differing, 0u) << c.file << " first at " << first;
  }
}

TEST(GgmlBlocksOraclePeer, RefusesPartialBlocksAndUnknownTypes) {
  std::vector<float> out = {1.0f};
  EXPECT_FALSE(qd::oracle::DecodeGgmlBlocks("q4_0", std::vector<std::uint8_t>(19, 0), &out));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(qd::oracle::DecodeGgmlBlocks("q4_K_M", std::vector<std::uint8_t>(144, 0), &out));
  EXPECT_FALSE(qd::oracle::GgmlBlockShapeOf("Q4_0").has_value());
}

}  // namespace
