// ggml_blocks_peer_test.cc: the codec's ggml block decoder (every kernel)
// and its legacy encoders against the 37 cases ggml's own code made
// (${QD_PEER_DIR}/gguf, read in place; docs/ggml_blocks.md):
//   - every case's `blocks` decodes to its `dequant` bit for bit, -0.0
//     included, with every kernel this processor runs;
//   - for q4_0, q4_1, q5_0, q5_1 and q8_0, encoding `input` gives `blocks`
//     byte for byte (ggml's quantize_row_<type>_ref made them);
//   - the codec's block geometry is the manifest's.
#include <bit>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/ggml_blocks.h"
#include "codecs/kernels.h"
#include "tests/ggml/ggml_peer_cases.h"
#include "tests/peer/peer_file.h"

namespace {

const std::vector<qdtest::ggml_peer::Case>& Cases() {
  static const auto* cases = new std::vector<qdtest::ggml_peer::Case>(qdtest::ggml_peer::LoadCases(QD_PEER_GGUF_DIR));
  return *cases;
}

TEST(GgmlBlocksPeer, EveryCaseLoads) {
  ASSERT_EQ(Cases().size(), 37u);
  for (const auto& c : Cases()) {
    EXPECT_TRUE(c.ok) << c.file;
    const qd::codec::GgmlTypeInfo* info = qd::codec::FindGgmlType(c.type);
    ASSERT_NE(info, nullptr) << c.file;
    EXPECT_EQ(c.cols % static_cast<std::uint64_t>(info->values), 0u) << c.file;
    EXPECT_EQ(c.blocks.size() / c.rows, c.cols / static_cast<std::uint64_t>(info->values) *
                                            static_cast<std::uint64_t>(info->bytes))
        << c.file;
  }
}

TEST(GgmlBlocksPeer, DecodeIsGgmlsDequantBitForBitWithEveryKernel) {
  for (const qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    for (const auto& c : Cases()) {
      const qd::codec::GgmlTypeInfo* info = qd::codec::FindGgmlType(c.type);
      ASSERT_NE(info, nullptr) << c.file;
      std::vector<float> got(c.rows * c.cols, 1234.5f);
      qd::codec::GgmlDecode(info->type, c.blocks.data(), c.blocks.size() / static_cast<std::size_t>(info->bytes),
                            got.data(), kernel);
      EXPECT_EQ(qdtest::peer::FirstDifference(got, c.dequant), "")
          << c.file << " kernel " << qd::codec::KernelName(kernel);
    }
  }
}

TEST(GgmlBlocksPeer, LegacyEncodersGiveGgmlsBlocksByteForByte) {
  const std::set<std::string> legacy = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0"};
  int checked = 0;
  for (const auto& c : Cases()) {
    const qd::codec::GgmlTypeInfo* info = qd::codec::FindGgmlType(c.type);
    ASSERT_NE(info, nullptr) << c.file;
    EXPECT_EQ(info->legacy_encoder, legacy.count(c.type) == 1) << c.file;
    if (!info->legacy_encoder) continue;
    std::vector<std::uint8_t> got(c.blocks.size(), 0xAA);
    ASSERT_TRUE(qd::codec::GgmlEncode(info->type, c.input.data(), c.input.size() / 32, got.data())) << c.file;
    EXPECT_EQ(got, c.blocks) << c.file;
    ++checked;
  }
  EXPECT_EQ(checked, 17);  // the manifest's legacy cases
}

TEST(GgmlBlocksPeer, NoEncoderForTheOtherTypes) {
  std::vector<float> in(256, 1.0f);
  std::vector<std::uint8_t> out(210, 0x5A);
  EXPECT_FALSE(qd::codec::GgmlEncode(qd::codec::GgmlType::kQ6_K, in.data(), 1, out.data()));
  EXPECT_EQ(out, std::vector<std::uint8_t>(210, 0x5A));
}

}  // namespace
