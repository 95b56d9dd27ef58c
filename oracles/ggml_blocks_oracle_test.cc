// ggml_blocks_oracle_test.cc: the oracle's ggml block decoder on blocks
// built by hand, each expected value worked out from docs/ggml_blocks.md
// section 3 in the comment beside it (no ggml, no peer vectors, no codec).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/ggml_blocks.h"

namespace {

using Block = std::vector<std::uint8_t>;

Block Zeros(std::string_view type) {
  return Block(static_cast<std::size_t>(qd::oracle::GgmlBlockShapeOf(type)->bytes_per_block), 0);
}

void PutHalf(Block* b, int at, std::uint16_t h) {
  (*b)[static_cast<std::size_t>(at)] = static_cast<std::uint8_t>(h & 0xFF);
  (*b)[static_cast<std::size_t>(at) + 1] = static_cast<std::uint8_t>(h >> 8);
}

std::vector<float> Decode(std::string_view type, const Block& b) {
  std::vector<float> out;
  EXPECT_TRUE(qd::oracle::DecodeGgmlBlocks(type, b, &out));
  return out;
}

std::uint32_t Bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(GgmlBlocksOracle, Q4_0NibblesPairWeightJWithJPlus16) {
  Block b = Zeros("q4_0");
  PutHalf(&b, 0, 0x3C00);  // d = 1
  b[2] = 0x9F;             // weight 0: 15 - 8 = 7; weight 16: 9 - 8 = 1
  const auto y = Decode("q4_0", b);
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(y[16], 1.0f);
  EXPECT_EQ(y[1], -8.0f);  // code 0
}

TEST(GgmlBlocksOracle, Q4_1AddsTheMin) {
  Block b = Zeros("q4_1");
  PutHalf(&b, 0, 0x3800);  // d = 0.5
  PutHalf(&b, 2, 0xBC00);  // m = -1
  b[4 + 3] = 0x2A;         // weight 3: 10*0.5 - 1 = 4; weight 19: 2*0.5 - 1 = 0
  const auto y = Decode("q4_1", b);
  EXPECT_EQ(y[3], 4.0f);
  EXPECT_EQ(y[19], 0.0f);
}

TEST(GgmlBlocksOracle, Q5_0FifthBitIsBitIOfQh) {
  Block b = Zeros("q5_0");
  PutHalf(&b, 0, 0x4000);  // d = 2
  b[2] = 0x20;             // qh bit 5
  b[4] = 0x20;             // qh bit 21
  b[6 + 5] = 0x31;         // weight 5: (1 + 16) - 16 = 1 -> 2; weight 21: (3 + 16) - 16 = 3 -> 6
  const auto y = Decode("q5_0", b);
  EXPECT_EQ(y[5], 2.0f);
  EXPECT_EQ(y[21], 6.0f);
  EXPECT_EQ(y[0], -32.0f);  // code 0, no fifth bit: -16 * 2
}

TEST(GgmlBlocksOracle, Q5_1CodesRunTo31) {
  Block b = Zeros("q5_1");
  PutHalf(&b, 0, 0x3C00);  // d = 1
  PutHalf(&b, 2, 0x4000);  // m = 2
  b[4 + 3] = 0x80;         // qh bit 31
  b[8 + 15] = 0xF0;        // weight 31: 15 + 16 = 31 -> 33
  EXPECT_EQ(Decode("q5_1", b)[31], 33.0f);
}

TEST(GgmlBlocksOracle, Q8_0SignedBytesAndASubnormalScale) {
  Block b = Zeros("q8_0");
  PutHalf(&b, 0, 0x0001);  // d = 2^-24, a binary16 subnormal
  b[2 + 7] = 0x80;         // -128
  b[2 + 8] = 3;
  const auto y = Decode("q8_0", b);
  EXPECT_EQ(y[7], -128.0f * std::ldexp(1.0f, -24));
  EXPECT_EQ(y[8], 3.0f * std::ldexp(1.0f, -24));
}

TEST(GgmlBlocksOracle, Q2_KSubBlockScaleMinAndPlane) {
  Block b = Zeros("q2_K");
  PutHalf(&b, 80, 0x3C00);  // d = 1
  PutHalf(&b, 82, 0x3800);  // dmin = 0.5
  b[5] = 0x23;              // sub-block 5: scale 3, min 2
  // Weight 80 is sub-block 5, half 0, r = 80: plane 2 (bits 4-5) of qs byte 16.
  b[16 + 16] = 0x30;
  const auto y = Decode("q2_K", b);
  EXPECT_EQ(y[80], 8.0f);   // 3*3 - 0.5*2
  EXPECT_EQ(y[81], -1.0f);  // code 0: 0 - 1
}

TEST(GgmlBlocksOracle, Q3_KScaleBiasAndClearHighBitSubtracts4) {
  Block b = Zeros("q3_K");
  PutHalf(&b, 108, 0x3C00);  // d = 1
  // Sub-block 9 scale 37 = 0b10'0101: low 4 bits in the high nibble of
  // scales byte 1, top 2 bits at bits 4-5 of scales byte 9; 37 - 32 = 5.
  b[96 + 1] = 0x50;
  b[96 + 9] = 0x20;
  // Weight 144: half 1, column 16, plane 0: low2 in qs byte 32 + 16; high
  // bit at bit 4 of hmask byte 16.
  b[32 + 32 + 16] = 0x02;
  b[16] = 0x10;
  const auto y = Decode("q3_K", b);
  EXPECT_EQ(y[144], 10.0f);   // 5 * 2
  EXPECT_EQ(y[145], -20.0f);  // 5 * (0 - 4): high bit clear
}

TEST(GgmlBlocksOracle, Q4_KUpperScalesTakeTheirTopBitsFromBytes0To7) {
  Block b = Zeros("q4_K");
  PutHalf(&b, 0, 0x3C00);  // d = 1
  PutHalf(&b, 2, 0x3C00);  // dmin = 1
  // Sub-block 5: scale = (t[9] & 15) | (t[1] >> 6) << 4 = 2 + 16 = 18,
  // min = (t[9] >> 4) | (t[5] >> 6) << 4 = 3 + 32 = 35.
  b[4 + 9] = 0x32;
  b[4 + 1] = 0x40;
  b[4 + 5] = 0x80;
  b[16 + 64] = 0x70;  // weight 160 (sub-block 5, odd: high nibble of qs byte 64) = 7
  EXPECT_EQ(Decode("q4_K", b)[160], 91.0f);  // 18*7 - 35
}

TEST(GgmlBlocksOracle, Q5_KFifthBitIsBitSOfQhL) {
  Block b = Zeros("q5_K");
  PutHalf(&b, 0, 0x3C00);  // d = 1
  b[4 + 2] = 1;            // sub-block 2: scale 1 (min 0)
  b[16 + 4] = 0x04;        // qh byte 4, bit 2: weight 64 + 4 gets +16
  b[48 + 32 + 4] = 0x09;   // qs byte 32 + 4 low nibble (sub-block 2 even) = 9
  EXPECT_EQ(Decode("q5_K", b)[68], 25.0f);
}

TEST(GgmlBlocksOracle, Q6_KSignedScaleTimesSixBitCode) {
  Block b = Zeros("q6_K");
  PutHalf(&b, 208, 0x3800);  // d = 0.5
  // Weight 200: half 1, quarter 2, column 8: low 4 bits in the high nibble
  // of ql byte 64 + 8, top 2 bits at bits 4-5 of qh byte 32 + 8; scale
  // byte 200 / 16 = 12.
  b[64 + 8] = 0xA0;
  b[128 + 32 + 8] = 0x30;
  b[192 + 12] = 0xFE;  // -2
  EXPECT_EQ(Decode("q6_K", b)[200], -26.0f);  // (0.5 * -2) * (10 + 48 - 32)
}

TEST(GgmlBlocksOracle, Iq4NlCodeBookEnds) {
  Block b = Zeros("iq4_nl");
  PutHalf(&b, 0, 0x3800);  // d = 0.5
  b[2] = 0xF0;             // weight 0: T[0] = -127; weight 16: T[15] = 113
  const auto y = Decode("iq4_nl", b);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
}

TEST(GgmlBlocksOracle, Mxfp4ScaleCodesNegativeZeroAndNaN) {
  Block b = Zeros("mxfp4");
  b[0] = 128;   // 2^1
  b[1] = 0x7F;  // weight 0: code 15 = -6 -> -12; weight 16: code 7 = 6 -> 12
  b[2] = 0x08;  // weight 1: code 8 = -0
  auto y = Decode("mxfp4", b);
  EXPECT_EQ(y[0], -12.0f);
  EXPECT_EQ(y[16], 12.0f);
  EXPECT_EQ(Bits(y[1]), 0x80000000u);
  b[0] = 0;  // 2^-127, subnormal: code 1 (0.5) gives 2^-128
  b[1] = 0x01;
  y = Decode("mxfp4", b);
  EXPECT_EQ(y[0], std::ldexp(1.0f, -128));
  b[0] = 0xFF;  // NaN (OCP)
  y = Decode("mxfp4", b);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[31]));
}

TEST(GgmlBlocksOracle, InfiniteScaleTimesCodeZeroIsNaN) {
  Block b = Zeros("q8_0");
  PutHalf(&b, 0, 0x7C00);  // d = +infinity
  b[2] = 1;
  const auto y = Decode("q8_0", b);
  EXPECT_EQ(y[0], INFINITY);
  EXPECT_TRUE(std::isnan(y[1]));  // 0 * infinity
}

}  // namespace
