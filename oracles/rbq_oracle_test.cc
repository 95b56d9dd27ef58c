// rbq_oracle_test.cc: unit tests of the oracle's RBQ reader (RBQ-001..
// RBQ-005, RBQ-101), its Q4/Q8 decoding, quantizer and matvec.
//
// Every expected value below comes from the spec text or the rule catalogue
// and is worked out by hand in the comments next to it; none is a recorded
// output of the code under test.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/json.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"
#include "oracles/oracle_test_files.h"

namespace qd::oracle {
namespace {

using namespace test_files;  // NOLINT: the shared file builders

// ===========================================================================
// RBQ reader.

TEST(Rbq, NonRbqFileReadsLikeTheContainer) {
  // A two dimensional F32 tensor in a file without block tensors or a
  // rabbit- format: no RBQ-101.
  Bytes data;
  PutU32(&data, 0x3F800000);
  const std::string header = "{\"__metadata__\":{\"format\":\"pt\"},\"w\":" + Entry("F32", "[1,1]", 0, 4) + "}";
  const Bytes file = MakeFile(header, data);
  const qd::Outcome rbq = ReadRbq(file);
  const qd::Outcome container = Read(file);
  EXPECT_EQ(Summary(rbq), " accepted");
  ASSERT_EQ(rbq.tensors.size(), 1u);
  EXPECT_EQ(rbq.tensors[0].values, container.tensors[0].values);
  // Refused by the container: the same finding.
  const Bytes bad = MakeFile(" {\"__metadata__\":1}", {}, false);
  EXPECT_EQ(Summary(ReadRbq(bad)), "ST-101,ST-102,ST-006 refused");
}

TEST(Rbq, MixedWidthsAreRBQ001) {
  Bytes data = Block(4, 0x3C00, {});
  Append(&data, Block(8, 0x3C00, {}));
  // Sorted by offsets: "b" (Q4B32, [0,18]) then "a" (Q8B32, [18,52]).
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"b\":" + Entry("Q4B32", "[1,32]", 0, 18) +
                             ",\"a\":" + Entry("Q8B32", "[1,32]", 18, 52) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), "RBQ-001 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "a");
  EXPECT_EQ(outcome.findings.back().field, "dtype");
  EXPECT_EQ(outcome.findings.back().byte_offset, 8);
  // The other way round, and no metadata at all: RBQ-001 still comes first.
  Bytes swapped = Block(8, 0x3C00, {});
  Append(&swapped, Block(4, 0x3C00, {}));
  const std::string header2 = "{\"b\":" + Entry("Q8B32", "[1,32]", 0, 34) + ",\"a\":" +
                              Entry("Q4B32", "[1,32]", 34, 52) + "}";
  const qd::Outcome outcome2 = ReadRbq(MakeFile(header2, swapped));
  EXPECT_EQ(Summary(outcome2), "RBQ-001 refused");
  EXPECT_EQ(outcome2.findings.back().tensor, "a");
}

TEST(Rbq, WrongDeclarationIsRBQ002) {
  const Bytes q4 = Block(4, 0x3C00, {});
  const std::string tensor = "\"w\":" + Entry("Q4B32", "[1,32]", 0, 18) + "}";
  struct Case {
    std::string metadata;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"", "__metadata__"},
      {"\"__metadata__\":{}", "format"},
      {"\"__metadata__\":{\"format\":\"rabbit-q8b32\",\"block\":\"32\",\"scale\":\"f16\"}", "format"},
      {"\"__metadata__\":{\"format\":\"RABBIT-Q4B32\",\"block\":\"32\",\"scale\":\"f16\"}", "format"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"scale\":\"f16\"}", "block"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"64\",\"scale\":\"f16\"}", "block"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\" 32\",\"scale\":\"f16\"}", "block"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\"}", "scale"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"F16\"}", "scale"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"bf16\"}", "scale"},
  };
  for (const Case& c : cases) {
    const std::string header = "{" + c.metadata + (c.metadata.empty() ? "" : ",") + tensor;
    const qd::Outcome outcome = ReadRbq(MakeFile(header, q4));
    EXPECT_EQ(Summary(outcome), "RBQ-002 refused") << header;
    if (!outcome.findings.empty()) {
      EXPECT_EQ(outcome.findings.back().field, c.field) << header;
      EXPECT_EQ(outcome.findings.back().tensor, "") << header;
    }
  }
  // Extra keys are fine.
  const std::string extra =
      "{\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"f16\",\"by\":\"me\"}," + tensor;
  EXPECT_EQ(Summary(ReadRbq(MakeFile(extra, q4))), " accepted");
}

TEST(Rbq, WidthFromFormatWhenNoBlockTensor) {
  // A rabbit- format that is neither width, no block tensor: RBQ-002 on format.
  qd::Outcome outcome = ReadRbq(MakeFile("{\"__metadata__\":{\"format\":\"rabbit-q5\",\"block\":\"32\",\"scale\":\"f16\"}}"));
  EXPECT_EQ(Summary(outcome), "RBQ-002 refused");
  EXPECT_EQ(outcome.findings.back().field, "format");
  // rabbit-q8b32 with no block tensor: width 8, checks block and scale.
  outcome = ReadRbq(MakeFile("{\"__metadata__\":{\"format\":\"rabbit-q8b32\",\"block\":\"16\",\"scale\":\"f16\"}}"));
  EXPECT_EQ(Summary(outcome), "RBQ-002 refused");
  EXPECT_EQ(outcome.findings.back().field, "block");
  EXPECT_EQ(Summary(ReadRbq(MakeFile("{" + std::string(kQ8Metadata) + "}"))), " accepted");
}

TEST(Rbq, BadBlockShapesAreRBQ003) {
  const std::vector<std::string> shapes = {"[32]", "[1,16]", "[1,2,32]", "[]", "[1,33]"};
  for (const std::string& shape : shapes) {
    const std::string header = "{" + std::string(kQ4Metadata) + ",\"w\":" + Entry("Q4B32", shape, 0, 18) + "}";
    const qd::Outcome outcome = ReadRbq(MakeFile(header, Block(4, 0x3C00, {})));
    EXPECT_EQ(Summary(outcome), "RBQ-003 refused") << shape;
    EXPECT_EQ(outcome.findings.back().tensor, "w");
    EXPECT_EQ(outcome.findings.back().field, "shape");
  }
}

TEST(Rbq, EmptyMatricesAreAccepted) {
  // rows = 0, and columns = 0 with a huge row count: no block, no loop.
  const std::string header = "{" + std::string(kQ8Metadata) + ",\"a\":" + Entry("Q8B32", "[0,64]", 0, 0) +
                             ",\"b\":" + Entry("Q8B32", "[18446744073709551615,0]", 0, 0) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header));
  EXPECT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 2u);
  EXPECT_TRUE(outcome.tensors[0].values.empty());
  EXPECT_TRUE(outcome.tensors[1].values.empty());
}

TEST(Rbq, TwoDimensionalFloatTensorWarnsRBQ101) {
  // "a" F32 [1,1] at [0,4] warns; "b" Q4B32 [1,16] at [4,22] is RBQ-003.
  Bytes data(4, 0);
  Append(&data, Block(4, 0x3C00, {}));
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"a\":" + Entry("F32", "[1,1]", 0, 4) +
                             ",\"b\":" + Entry("Q4B32", "[1,16]", 4, 22) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), "RBQ-101,RBQ-003 refused");
  EXPECT_EQ(outcome.findings[0].severity, qd::Severity::kWarning);
  EXPECT_EQ(outcome.findings[0].tensor, "a");
  EXPECT_EQ(outcome.findings[0].field, "dtype");
  EXPECT_EQ(outcome.findings[1].tensor, "b");
}

TEST(Rbq, ByteLengthMismatchIsRBQ004) {
  // Q4B32 [1,32] needs 18 bytes.
  std::string header = "{" + std::string(kQ4Metadata) + ",\"w\":" + Entry("Q4B32", "[1,32]", 0, 17) + "}";
  qd::Outcome outcome = ReadRbq(MakeFile(header, Bytes(17, 0)));
  EXPECT_EQ(Summary(outcome), "RBQ-004 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "w");
  EXPECT_EQ(outcome.findings.back().field, "data_offsets");
  // Q8B32 [2,32] needs 68 bytes, not 34.
  header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[2,32]", 0, 34) + "}";
  EXPECT_EQ(Summary(ReadRbq(MakeFile(header, Bytes(34, 0)))), "RBQ-004 refused");
  // 2^57 rows x 2 blocks x 34 bytes overflows 64 bits: disagrees with 0.
  header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[144115188075855872,64]", 0, 0) + "}";
  EXPECT_EQ(Summary(ReadRbq(MakeFile(header))), "RBQ-004 refused");
}

TEST(Rbq, NonFiniteScaleIsRBQ005WithRowAndBlock) {
  // Q8B32 [2,64]: blocks (0,0) (0,1) (1,0) (1,1). Zero, -0, negative,
  // subnormal and the largest finite scale are fine; (1,1) is +inf.
  Bytes data = Block(8, 0x0000, {});
  Append(&data, Block(8, 0x8000, {}));
  Append(&data, Block(8, 0x0001, {}));
  Append(&data, Block(8, 0x7C00, {}));
  const std::string header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[2,64]", 0, 136) + "}";
  const Bytes file = MakeFile(header, data);
  const std::int64_t data_start = static_cast<std::int64_t>(file.size() - 136);
  const qd::Outcome outcome = ReadRbq(file);
  EXPECT_EQ(Summary(outcome), "RBQ-005 refused");
  const qd::Finding& finding = outcome.findings.back();
  EXPECT_EQ(finding.tensor, "w");
  EXPECT_EQ(finding.field, "scale");
  EXPECT_EQ(finding.row, 1);
  EXPECT_EQ(finding.block, 1);
  EXPECT_EQ(finding.byte_offset, data_start + 3 * 34);
}

TEST(Rbq, NaNScaleInTheSecondTensorIsRBQ005) {
  // "z" Q4B32 [1,64] at [0,36] is fine (scales 0xFBFF, 0x3C00); "a" Q4B32
  // [1,64] at [36,72] has a NaN scale (0x7E01) in block (0,1).
  Bytes data = Block(4, 0xFBFF, {});
  Append(&data, Block(4, 0x3C00, {}));
  Append(&data, Block(4, 0x3C00, {}));
  Append(&data, Block(4, 0x7E01, {}));
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"a\":" + Entry("Q4B32", "[1,64]", 36, 72) +
                             ",\"z\":" + Entry("Q4B32", "[1,64]", 0, 36) + "}";
  const Bytes file = MakeFile(header, data);
  const std::int64_t data_start = static_cast<std::int64_t>(file.size() - 72);
  const qd::Outcome outcome = ReadRbq(file);
  EXPECT_EQ(Summary(outcome), "RBQ-005 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "a");
  EXPECT_EQ(outcome.findings.back().row, 0);
  EXPECT_EQ(outcome.findings.back().block, 1);
  EXPECT_EQ(outcome.findings.back().byte_offset, data_start + 36 + 18);
}

TEST(Rbq, DecodesQ4NibblesLowThenHigh) {
  // Block 0, scale 0x3C00 (1.0), payload bytes:
  //   0x80: n0 = 0x0 -> 0,   n1 = 0x8 -> (8^8)-8 = -8
  //   0xF7: n2 = 0x7 -> 7,   n3 = 0xF -> (15^8)-8 = -1
  //   0x21: n4 = 0x1 -> 1,   n5 = 0x2 -> 2
  //   0x9E: n6 = 0xE -> (14^8)-8 = -2, n7 = 0x9 -> (9^8)-8 = -7
  //   the rest zero.
  // Block 1, scale 0xB800 (-0.5), payload 0x87: n0 = 7 -> -3.5, n1 = -8 -> 4.0;
  // the rest q = 0 -> 0 * -0.5 = -0.0.
  Bytes data = Block(4, 0x3C00, {0x80, 0xF7, 0x21, 0x9E});
  Append(&data, Block(4, 0xB800, {0x87}));
  // A BF16 norm weight after the blocks: 0x4040 = 3.0.
  PutU16(&data, 0x4040);
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"norm\":" + Entry("BF16", "[1]", 36, 38) +
                             ",\"w\":" + Entry("Q4B32", "[1,64]", 0, 36) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  ASSERT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 2u);
  const qd::DecodedTensor& w = outcome.tensors[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{1, 64}));
  ASSERT_EQ(w.values.size(), 64u);
  const std::vector<float> first = {0, -8, 7, -1, 1, 2, -2, -7};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(w.values[n], first[n]) << n;
  for (int n = 8; n < 32; ++n) EXPECT_EQ(Bits(w.values[n]), 0x00000000u) << n;
  EXPECT_EQ(w.values[32], -3.5f);
  EXPECT_EQ(w.values[33], 4.0f);
  for (int n = 34; n < 64; ++n) EXPECT_EQ(Bits(w.values[n]), 0x80000000u) << n;
  EXPECT_EQ(outcome.tensors[1].name, "norm");
  EXPECT_EQ(outcome.tensors[1].values, (std::vector<float>{3.0f}));
}

TEST(Rbq, DecodesQ8SignedBytes) {
  // Scale 0x3800 (0.5): 0x80 = -128 -> -64, 0x7F = 127 -> 63.5, 0x03 -> 1.5,
  // 0xFF = -1 -> -0.5. Row 1: scale 0x0001 (2^-24), q = 3 -> 3 * 2^-24.
  Bytes data = Block(8, 0x3800, {0x80, 0x7F, 0x03, 0xFF});
  Append(&data, Block(8, 0x0001, {0x03}));
  const std::string header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[2,32]", 0, 68) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  ASSERT_EQ(Summary(outcome), " accepted");
  const std::vector<float>& v = outcome.tensors[0].values;
  ASSERT_EQ(v.size(), 64u);
  EXPECT_EQ(v[0], -64.0f);
  EXPECT_EQ(v[1], 63.5f);
  EXPECT_EQ(v[2], 1.5f);
  EXPECT_EQ(v[3], -0.5f);
  EXPECT_EQ(v[32], std::ldexp(3.0f, -24));
  EXPECT_EQ(v[33], 0.0f);
}

TEST(Rbq, FormatOnlyFileWithFloatTensors) {
  // format rabbit-q4b32, no block tensor, one F32 [1] tensor: accepted and decoded.
  Bytes data;
  PutU32(&data, 0x40000000);  // 2.0
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"n\":" + Entry("F32", "[1]", 0, 4) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 1u);
  EXPECT_EQ(outcome.tensors[0].values, (std::vector<float>{2.0f}));
}

// ===========================================================================
// Quantizer.

TEST(Quantizer, Q4BlockWithMaxSevenHasScaleOne) {
  // max |w| = 7, 7 / 7 = 1 -> 0x3C00. q = round(w / 1), half away from zero:
  //   7 -> 7, -7 -> -7, 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, 2.5 -> 3, -2.5 -> -3,
  //   3.49 -> 3, 6.5 -> 7, -6.5 -> -7, 0.4 -> 0, -0.0 -> 0, the rest 0.
  // Nibbles, low = even: (7, -7=0x9) -> 0x97; (1, -1=0xF) -> 0xF1;
  // (2, 3) -> 0x32; (-3=0xD, 3) -> 0x3D; (7, -7) -> 0x97; (0, 0) -> 0x00.
  std::vector<float> w(32, 0.0f);
  const float head[] = {7, -7, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.49f, 6.5f, -6.5f, 0.4f, -0.0f};
  for (int i = 0; i < 12; ++i) w[i] = head[i];
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 1, 32, &blocks, &error)) << error.message;
  Bytes expected(18, 0);
  const std::uint8_t bytes[] = {0x00, 0x3C, 0x97, 0xF1, 0x32, 0x3D, 0x97, 0x00};
  for (int i = 0; i < 8; ++i) expected[i] = bytes[i];
  EXPECT_EQ(blocks, expected);
}

TEST(Quantizer, Q8Blocks) {
  // Row 0: max 127 -> scale 1.0 (0x3C00): 127, -127, 0.5 -> 1, -1.5 -> -2,
  // 63.5 -> 64, 100.49 -> 100. Row 1: max 254 -> 254 / 127 = 2 -> 0x4000:
  // 3 / 2 = 1.5 -> 2, 1 / 2 = 0.5 -> 1, -1 / 2 -> -1, 254 -> 127, -254 -> -127.
  std::vector<float> w(64, 0.0f);
  const float row0[] = {127, -127, 0.5f, -1.5f, 63.5f, 100.49f};
  const float row1[] = {3, 1, -1, 254, -254};
  for (int i = 0; i < 6; ++i) w[i] = row0[i];
  for (int i = 0; i < 5; ++i) w[32 + i] = row1[i];
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(8, w.data(), 2, 32, &blocks, &error)) << error.message;
  Bytes expected(68, 0);
  const std::uint8_t b0[] = {0x00, 0x3C, 0x7F, 0x81, 0x01, 0xFE, 0x40, 0x64};
  const std::uint8_t b1[] = {0x00, 0x40, 0x02, 0x01, 0xFF, 0x7F, 0x81};
  for (int i = 0; i < 8; ++i) expected[i] = b0[i];
  for (int i = 0; i < 7; ++i) expected[34 + i] = b1[i];
  EXPECT_EQ(blocks, expected);
}

TEST(Quantizer, SubnormalScaleClampsToTheRange) {
  // w0 = 9.8 * 2^-24, w1 = -9.8 * 2^-24: max / 7 = 1.4 * 2^-24 rounds to the
  // subnormal 0x0001 (2^-24). w / 2^-24 = +-9.8 -> +-10, clamped to 7 and -8.
  // Nibbles (7, -8 = 0x8) -> 0x87.
  std::vector<float> w(32, 0.0f);
  w[0] = std::ldexp(9.8f, -24);
  w[1] = -std::ldexp(9.8f, -24);
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 1, 32, &blocks, &error));
  Bytes expected(18, 0);
  expected[0] = 0x01;
  expected[2] = 0x87;
  EXPECT_EQ(blocks, expected);
}

TEST(Quantizer, ZeroAndUnderflowingBlocksStoreZero) {
  // All zeros (and -0): scale 0, payload 0. max 2^-30: 2^-30 / 7 is below
  // 2^-25, the scale rounds to 0, so the block stores zeros too.
  std::vector<float> w(96, 0.0f);
  w[3] = -0.0f;
  w[32] = std::ldexp(1.0f, -30);
  w[33] = -std::ldexp(1.0f, -31);
  w[64] = 1.0f;  // third block: 1 / 127 -> scale nonzero
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(8, w.data(), 1, 96, &blocks, &error));
  ASSERT_EQ(blocks.size(), 3u * 34);
  for (int i = 0; i < 68; ++i) EXPECT_EQ(blocks[i], 0) << i;
  // 1 / 127 = 1.007874 * 2^-7: mantissa 1.007874 * 1024 = 1032.06 -> 1032,
  // binary16 (-7 + 15) << 10 | 8 = 0x2008, value 1032 / 1024 * 2^-7.
  // q = round(128 * 1024 / 1032) = round(127.0078) = 127.
  EXPECT_EQ(blocks[68] | (blocks[69] << 8), 0x2008);
  EXPECT_EQ(blocks[70], 0x7F);
}

TEST(Quantizer, LargestFiniteScale) {
  // 65504 * 7 = 458528 -> scale 65504 = 0x7BFF, q = 7.
  std::vector<float> w(32, 0.0f);
  w[5] = 458528.0f;
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 1, 32, &blocks, &error));
  EXPECT_EQ(blocks[0], 0xFF);
  EXPECT_EQ(blocks[1], 0x7B);
  EXPECT_EQ(blocks[2 + 2], 0x70);  // n = 5 is the high nibble of byte 2 + 2
}

TEST(Quantizer, ScaleOverflowIsRBQ005) {
  // Row 1, block 0: max 65520 * 7 = 458640, / 7 = 65520 -> binary16 infinity.
  std::vector<float> w(64, 1.0f);
  w[32 + 9] = -458640.0f;
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  EXPECT_FALSE(QuantizeRbq(4, w.data(), 2, 32, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-005");
  EXPECT_EQ(error.severity, qd::Severity::kError);
  EXPECT_EQ(error.row, 1);
  EXPECT_EQ(error.block, 0);
}

TEST(Quantizer, NonFiniteWeightIsRBQ005) {
  std::vector<float> w(64, 1.0f);
  w[40] = std::numeric_limits<float>::quiet_NaN();  // row 0, block 1
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  EXPECT_FALSE(QuantizeRbq(8, w.data(), 1, 64, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-005");
  EXPECT_EQ(error.row, 0);
  EXPECT_EQ(error.block, 1);
  w[40] = 1.0f;
  w[0] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(QuantizeRbq(4, w.data(), 1, 64, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-005");
  EXPECT_EQ(error.block, 0);
}

TEST(Quantizer, RaggedColumnsAreRBQ003) {
  std::vector<float> w(48, 1.0f);
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  EXPECT_FALSE(QuantizeRbq(4, w.data(), 1, 48, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-003");
}

TEST(Quantizer, GateWeightsAreExact) {
  // Spec: every block carrying +7 or -7 has scale one and integer payloads,
  // so decoding gives back the weights exactly. Round trip through a file.
  std::vector<float> w(64);
  for (int i = 0; i < 64; ++i) w[i] = static_cast<float>((i * 7) % 15 - 7);  // -7..7, both ends in each block
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 2, 32, &blocks, &error));
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"w\":" + Entry("Q4B32", "[2,32]", 0, 36) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, blocks));
  ASSERT_EQ(Summary(outcome), " accepted");
  EXPECT_EQ(outcome.tensors[0].values, w);
}

// ===========================================================================
// Matrix vector product.

TEST(Matvec, Q4KnownNibbles) {
  // q = 0, -8, 7, -1, 1, 2, -2, -7, then 0; x[k] = k + 1; scale 1:
  // 0 - 16 + 21 - 4 + 5 + 12 - 14 - 56 = -52.
  const Bytes blocks = Block(4, 0x3C00, {0x80, 0xF7, 0x21, 0x9E});
  std::vector<float> x(32);
  for (int k = 0; k < 32; ++k) x[k] = static_cast<float>(k + 1);
  float y = 0.0f;
  ASSERT_TRUE(MatvecRbq(4, View(blocks), 1, 32, x.data(), &y));
  EXPECT_EQ(y, -52.0f);
}

TEST(Matvec, Q8TwoRowsTwoBlocks) {
  // x = ones. Row 0: block 0 scale 1, q = 1 x32 -> 32; block 1 scale 0.5,
  // q = 2 x32 -> 64 * 0.5 = 32; y0 = 64. Row 1: block 0 scale 2, q0 = 3 ->
  // 6; block 1 scale -2, q = -1 x32 -> -32 * -2 = 64; y1 = 70.
  Bytes blocks = Block(8, 0x3C00, Bytes(32, 0x01));
  Append(&blocks, Block(8, 0x3800, Bytes(32, 0x02)));
  Append(&blocks, Block(8, 0x4000, {0x03}));
  Append(&blocks, Block(8, 0xC000, Bytes(32, 0xFF)));
  const std::vector<float> x(64, 1.0f);
  float y[2] = {0, 0};
  ASSERT_TRUE(MatvecRbq(8, View(blocks), 2, 64, x.data(), y));
  EXPECT_EQ(y[0], 64.0f);
  EXPECT_EQ(y[1], 70.0f);
}

TEST(Matvec, AccumulatesInOrderInBinary32) {
  // q = 1 x32, scale 1, x = 2^24, 1, -2^24, 0...: in order, 2^24 + 1 rounds
  // to 2^24 (tie to even), minus 2^24 gives 0. Any other order gives 1.
  const Bytes blocks = Block(8, 0x3C00, Bytes(32, 0x01));
  std::vector<float> x(32, 0.0f);
  x[0] = 16777216.0f;
  x[1] = 1.0f;
  x[2] = -16777216.0f;
  float y = -1.0f;
  ASSERT_TRUE(MatvecRbq(8, View(blocks), 1, 32, x.data(), &y));
  EXPECT_EQ(y, 0.0f);
}

TEST(Matvec, ScalesTheBlockSumNotEachWeight) {
  // Scale 0x3555 = (1 + 0x155/1024) * 2^-2 = 1365/4096. q = 1 x32 and
  // x = 3 x32: acc = 96 exactly, 96 * 1365/4096 = 131040/4096 = 31.9921875,
  // exact in binary32.
  const Bytes blocks = Block(8, 0x3555, Bytes(32, 0x01));
  const std::vector<float> x(32, 3.0f);
  float y = 0.0f;
  ASSERT_TRUE(MatvecRbq(8, View(blocks), 1, 32, x.data(), &y));
  EXPECT_EQ(y, 31.9921875f);
}

TEST(Matvec, RejectsBadArguments) {
  const Bytes blocks = Block(8, 0x3C00, {});
  const std::vector<float> x(64, 1.0f);
  float y[2] = {0, 0};
  EXPECT_FALSE(MatvecRbq(8, View(blocks), 2, 32, x.data(), y));  // needs 68 bytes
  EXPECT_FALSE(MatvecRbq(4, View(blocks), 1, 32, x.data(), y));  // needs 18 bytes
  EXPECT_FALSE(MatvecRbq(8, View(blocks), 1, 48, x.data(), y));  // ragged columns
  EXPECT_FALSE(MatvecRbq(5, View(blocks), 1, 32, x.data(), y));  // no such width
  EXPECT_FALSE(MatvecRbq(8, View(blocks), 0xFFFFFFFFFFFFFFFFull, 64, x.data(), y));  // overflow
}

}  // namespace
}  // namespace qd::oracle
