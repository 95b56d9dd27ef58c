// rbq_oracle_vectors_test.cc: hand-computed Q4B32 / Q8B32 vectors from the
// spec text (specs/002_a5b0561d4b728a5e.txt), checked on both sides: the
// codec (every kernel) and the oracle. Every expected byte and value below
// was worked out by hand from the spec's formulas; the arithmetic is in the
// comments next to it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"
#include "oracles/rbq.h"
#include "property_tests/gen/files.h"
#include "quantdiff/tensor_sink.h"
#include "tests/recording_sink.h"

namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr char kName[] = "vectors.safetensors";

struct Read {
  std::string who;
  qd::Outcome outcome;
};

// The file read by the codec with every kernel and by the oracle.
std::vector<Read> ReadBothSides(const Bytes& file) {
  const qd::ByteView view{file.data(), file.size()};
  std::vector<Read> reads;
  for (qd::codec::Kernel k : qd::codec::AvailableKernels()) {
    reads.push_back({"codec/" + std::string(qd::codec::KernelName(k)),
                     qd::codec::DecodeRbqFile(view, kName, k)});
  }
  reads.push_back({"oracle", qd::oracle::ReadRbqFile(view, kName)});
  return reads;
}

std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) {
    s += " | " + f.rule + " tensor=" + f.tensor + " row=" + std::to_string(f.row) +
         " block=" + std::to_string(f.block) + " offset=" + std::to_string(f.byte_offset);
  }
  return s;
}

std::uint32_t Bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Accepted with no finding; tensor `index` has the shape and exactly the values.
void ExpectDecoded(const Bytes& file, std::size_t index, const std::string& name,
                   const std::vector<std::uint64_t>& shape, const std::vector<float>& values) {
  for (const Read& r : ReadBothSides(file)) {
    SCOPED_TRACE(r.who);
    ASSERT_FALSE(r.outcome.refused) << Findings(r.outcome);
    ASSERT_TRUE(r.outcome.findings.empty()) << Findings(r.outcome);
    ASSERT_LT(index, r.outcome.tensors.size());
    const qd::DecodedTensor& t = r.outcome.tensors[index];
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(t.shape, shape);
    ASSERT_EQ(t.values.size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(Bits(t.values[i]), Bits(values[i]))
          << "element " << i << ": got " << t.values[i] << ", expected " << values[i];
    }
  }
}

void ExpectRefused(const Bytes& file, const std::string& rule, const std::string& tensor) {
  for (const Read& r : ReadBothSides(file)) {
    SCOPED_TRACE(r.who);
    ASSERT_TRUE(r.outcome.refused) << Findings(r.outcome);
    const qd::Finding& f = r.outcome.findings.back();
    EXPECT_EQ(f.rule, rule) << Findings(r.outcome);
    EXPECT_EQ(f.severity, qd::Severity::kError);
    EXPECT_EQ(f.tensor, tensor) << Findings(r.outcome);
  }
}

void ExpectQuantizedTo(int bits, const std::vector<float>& w, std::uint64_t rows,
                       std::uint64_t columns, const Bytes& want) {
  for (int side = 0; side < 2; ++side) {
    SCOPED_TRACE(side == 0 ? "codec RbqQuantize" : "oracle QuantizeRbq");
    Bytes out;
    qd::Finding error;
    const bool ok = side == 0
        ? qd::codec::RbqQuantize(bits, w.data(), rows, columns, &out, &error)
        : qd::oracle::QuantizeRbq(bits, w.data(), rows, columns, &out, &error);
    ASSERT_TRUE(ok) << error.rule << " " << error.message;
    EXPECT_EQ(out, want);
  }
}

Bytes Concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes Repeat(std::uint8_t byte, std::size_t count) { return Bytes(count, byte); }

// ---- the gate (spec "Producing and checking a checkpoint") -----------------------
//
// "every block of thirty-two carries a +7 or a -7, so the scale is one and
// every payload value is an integer": max|w| = 7, 7 / 7 = 1.0 = binary16
// 0x3c00 (bytes 00 3c), q = w / 1 = w.
const std::vector<int> kGateBlock = {7,  -7, 0,  1,  -1, 2,  -2, 3,  -3, 4,  -4,
                                     5,  -5, 6,  -6, 7,  -7, 6,  5,  4,  3,  2,
                                     1,  0,  -1, -2, -3, -4, -5, -6, -7, 7};
// Nibble pairs (even position low, odd high, two's complement):
//   (7,-7) -> 7 | 9<<4 = 0x97   (0,1) -> 0x10   (-1,2) -> f | 2<<4 = 0x2f ...
const Bytes kGatePayload = {0x97, 0x10, 0x2f, 0x3e, 0x4d, 0x5c, 0x6b, 0x7a,
                            0x69, 0x45, 0x23, 0x01, 0xef, 0xcd, 0xab, 0x79};
// The same block negated: (-7,7) -> 9 | 7<<4 = 0x79   (0,-1) -> 0 | f<<4 = 0xf0 ...
const Bytes kNegatedGatePayload = {0x79, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96,
                                   0xa7, 0xcb, 0xed, 0x0f, 0x21, 0x43, 0x65, 0x97};
const Bytes kScaleOne = {0x00, 0x3c};

// Row 0: the gate block, then 32 x -7 (nibble 9: bytes 0x99).
// Row 1: the negated gate block, then 32 x +7 (bytes 0x77).
std::vector<float> GateWeights() {
  std::vector<float> w;
  for (int q : kGateBlock) w.push_back(static_cast<float>(q));
  for (int k = 0; k < 32; ++k) w.push_back(-7.0f);
  for (int q : kGateBlock) w.push_back(static_cast<float>(-q));
  for (int k = 0; k < 32; ++k) w.push_back(7.0f);
  return w;
}

Bytes GateBlocks() {
  return Concat({kScaleOne, kGatePayload, kScaleOne, Repeat(0x99, 16), kScaleOne,
                 kNegatedGatePayload, kScaleOne, Repeat(0x77, 16)});
}

TEST(RbqVectors, GateWeightsQuantizeToScaleOneAndTheirOwnCodes) {
  ExpectQuantizedTo(4, GateWeights(), 2, 64, GateBlocks());
}

TEST(RbqVectors, GateCheckpointDecodesToTheFloatingPointWeights) {
  ExpectDecoded(qdtest::RbqFile(4, 2, 64, GateBlocks()), 0, "w", {2, 64}, GateWeights());
}

// Product with x = 1, 2, ..., 64. Row 0: the gate block against 1..32 gives
// -210 (sum of q_k (k+1)), the -7 block gives -7 * (33 + ... + 64) = -7 * 1552
// = -10864; total -11074. Row 1 is its negation, 11074. Every partial sum is
// an integer below 2^24, so every evaluation order is exact.
TEST(RbqVectors, GateMatvecIsExact) {
  const Bytes blocks = GateBlocks();
  std::vector<float> x;
  for (int k = 1; k <= 64; ++k) x.push_back(static_cast<float>(k));
  std::vector<float> y(2, 0.0f);
  ASSERT_TRUE(qd::oracle::MatvecRbq(4, qd::ByteView{blocks.data(), blocks.size()}, 2, 64,
                                    x.data(), y.data()));
  EXPECT_EQ(y[0], -11074.0f);
  EXPECT_EQ(y[1], 11074.0f);
  for (qd::codec::Kernel k : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(qd::codec::KernelName(k));
    std::vector<float> yc(2, 0.0f);
    qd::codec::RbqMatvec(4, blocks.data(), 2, 64, x.data(), yc.data(), k);
    EXPECT_EQ(yc[0], -11074.0f);
    EXPECT_EQ(yc[1], 11074.0f);
  }
}

// The eight-bit gate: a block carrying +-127 has scale 127 / 127 = 1.
// Bytes: 127 -> 7f, -127 -> 81, -1 -> ff, 100 -> 64, -100 -> 9c, 50 -> 32.
TEST(RbqVectors, Q8BlockWithLevel127HasScaleOne) {
  std::vector<float> w = {127, -127, 0, 1, -1, 100, -100, 50};
  w.resize(32, 0.0f);
  const Bytes block = Concat({kScaleOne, {0x7f, 0x81, 0x00, 0x01, 0xff, 0x64, 0x9c, 0x32},
                              Repeat(0x00, 24)});
  ExpectQuantizedTo(8, w, 1, 32, block);
  ExpectDecoded(qdtest::RbqFile(8, 1, 32, block), 0, "w", {1, 32}, w);
}

// ---- the scale rule worked by hand ------------------------------------------------
//
// w = (1.0, -0.5, 0.3, -1.0, 0 x 28), max|w| = 1.
// Q4B32: 1 / 7 = 0.142857... in binary32; binary16 neighbours 0x3092 =
// 1170/8192 = 0.142822265625 and 0x3093 = 0.1429443359375; the first is
// nearer: scale = 0x3092 (bytes 92 30), s = 1170/8192.
//   1.0 / s = 7.0017 -> 7;  -0.5 / s = -3.5009 -> -4;  0.3 / s = 2.1005 -> 2;
//   -1.0 / s -> -7.  Payload: (7,-4) -> 7 | c<<4 = 0xc7, (2,-7) -> 2 | 9<<4 = 0x92.
//   Decoded: 7s = 8190/8192 = 0.999755859375, -4s = -0.5712890625,
//   2s = 0.28564453125, -7s = -0.999755859375.
// Q8B32: 1 / 127 = 0.0078740...; binary16 0x2008 = 1032/131072 =
// 0.00787353515625 (next up 0x2009 = 0.0078811645...): scale bytes 08 20.
//   1.0 / s = 127.0078 -> 127 (7f); -0.5 / s = -63.5039 -> -64 (c0);
//   0.3 / s = 38.1023 -> 38 (26); -1.0 / s -> -127 (81).
//   Decoded: 127s = 0.99993896484375, -64s = -0.50390625,
//   38s = 0.2991943359375, -127s = -0.99993896484375.
std::vector<float> HandWeights() {
  std::vector<float> w = {1.0f, -0.5f, 0.3f, -1.0f};
  w.resize(32, 0.0f);
  return w;
}

TEST(RbqVectors, Q4ScaleRuleByHand) {
  const Bytes block = Concat({{0x92, 0x30, 0xc7, 0x92}, Repeat(0x00, 14)});
  ExpectQuantizedTo(4, HandWeights(), 1, 32, block);
  std::vector<float> want = {0.999755859375f, -0.5712890625f, 0.28564453125f, -0.999755859375f};
  want.resize(32, 0.0f);
  ExpectDecoded(qdtest::RbqFile(4, 1, 32, block), 0, "w", {1, 32}, want);
}

TEST(RbqVectors, Q8ScaleRuleByHand) {
  const Bytes block = Concat({{0x08, 0x20, 0x7f, 0xc0, 0x26, 0x81}, Repeat(0x00, 28)});
  ExpectQuantizedTo(8, HandWeights(), 1, 32, block);
  std::vector<float> want = {0.99993896484375f, -0.50390625f, 0.2991943359375f,
                             -0.99993896484375f};
  want.resize(32, 0.0f);
  ExpectDecoded(qdtest::RbqFile(8, 1, 32, block), 0, "w", {1, 32}, want);
}

// "A block of zeros stores a scale of 0.0 and a payload of zero."
TEST(RbqVectors, BlockOfZerosIsAllZeroBytes) {
  std::vector<float> w(64, 0.0f);
  w[40] = -0.0f;
  ExpectQuantizedTo(4, w, 1, 64, Repeat(0x00, 36));
  ExpectQuantizedTo(8, w, 1, 64, Repeat(0x00, 68));
}

// ---- decoding corners ---------------------------------------------------------------
//
// Q4B32, row 0: scale 0x3800 = 0.5, payload 8f 70 00...
//   byte 0x8f: low nibble f -> -1 (position 0), high 8 -> -8 (position 1)
//   byte 0x70: low 0 -> 0 (position 2), high 7 -> 7 (position 3)
//   weights -0.5, -4.0, 0.0, 3.5, then 0.0.
// Row 1: scale 0x0001 = 2^-24 (smallest subnormal), payload 87 00...
//   7 * 2^-24 = 4.172325134277344e-07, -8 * 2^-24 = -4.76837158203125e-07.
TEST(RbqVectors, Q4NibblesSignsAndSubnormalScale) {
  const Bytes blocks = Concat({{0x00, 0x38, 0x8f, 0x70}, Repeat(0x00, 14),
                               {0x01, 0x00, 0x87}, Repeat(0x00, 15)});
  std::vector<float> want(64, 0.0f);
  want[0] = -0.5f;
  want[1] = -4.0f;
  want[3] = 3.5f;
  want[32] = std::ldexp(7.0f, -24);
  want[33] = std::ldexp(-8.0f, -24);
  ExpectDecoded(qdtest::RbqFile(4, 2, 32, blocks), 0, "w", {2, 32}, want);
}

// Q8B32, row 0: scale 0xc000 = -2.0 (finite, so accepted), payload 80 7f 00 01:
//   -128 * -2 = 256, 127 * -2 = -254, 0 * -2 = -0.0 (IEEE sign rule), 1 * -2 = -2.
// Row 1: scale 0x7bff = 65504 (largest finite), payload 80 7f:
//   -128 * 65504 = -8384512, 127 * 65504 = 8319008.
TEST(RbqVectors, Q8SignedBytesNegativeAndLargestScale) {
  const Bytes blocks = Concat({{0x00, 0xc0, 0x80, 0x7f, 0x00, 0x01}, Repeat(0x00, 28),
                               {0xff, 0x7b, 0x80, 0x7f}, Repeat(0x00, 30)});
  std::vector<float> want(64, 0.0f);
  want[0] = 256.0f;
  want[1] = -254.0f;
  want[3] = -2.0f;
  for (int k = 2; k < 32; ++k) {
    if (k != 3) want[k] = -0.0f;
  }
  want[32] = -8384512.0f;
  want[33] = 8319008.0f;
  ExpectDecoded(qdtest::RbqFile(8, 2, 32, blocks), 0, "w", {2, 32}, want);
}

// ---- the refusal list ("A reader of this runtime refuses ...") ------------------------

// [2, 64] Q4B32: 2 rows x 2 blocks of 18 bytes = 72 bytes; block b starts at
// data offset 18 b. "The error names the tensor, the field and, for a scale,
// the row and the block."
TEST(RbqVectors, NonFiniteScaleNamesRowBlockAndOffset) {
  struct Case {
    std::vector<std::pair<int, std::uint16_t>> bad;  // (block index, scale bits)
    int row, block, index;
  };
  const Case cases[] = {
      {{{3, 0x7c00}}, 1, 1, 3},                // +inf in the last block
      {{{1, 0xfe00}, {3, 0x7c00}}, 0, 1, 1},   // a NaN first
      {{{2, 0xfc00}}, 1, 0, 2},                // -inf
      {{{0, 0x7c01}}, 0, 0, 0},                // signalling NaN pattern
  };
  for (const Case& c : cases) {
    Bytes blocks;
    for (int b = 0; b < 4; ++b) blocks = Concat({blocks, kScaleOne, kGatePayload});
    for (const auto& [index, bits] : c.bad) {
      blocks[18 * index] = static_cast<std::uint8_t>(bits & 0xff);
      blocks[18 * index + 1] = static_cast<std::uint8_t>(bits >> 8);
    }
    const Bytes file = qdtest::RbqFile(4, 2, 64, blocks);
    const std::int64_t offset = static_cast<std::int64_t>(qdtest::DataStart(file)) + 18 * c.index;
    for (const Read& r : ReadBothSides(file)) {
      SCOPED_TRACE(r.who + " block " + std::to_string(c.index));
      ASSERT_TRUE(r.outcome.refused) << Findings(r.outcome);
      const qd::Finding& f = r.outcome.findings.back();
      EXPECT_EQ(f.rule, "RBQ-005");
      EXPECT_EQ(f.tensor, "w");
      EXPECT_EQ(f.field, "scale");
      EXPECT_EQ(f.row, c.row);
      EXPECT_EQ(f.block, c.block);
      EXPECT_EQ(f.byte_offset, offset);
    }
  }
}

// "data_offsets cover exactly rows * (columns / 32) * 18 / 34 bytes".
TEST(RbqVectors, ByteLengthMustMatchShapeAndWidth) {
  ExpectRefused(qdtest::RbqFile(4, 2, 64, Repeat(0x00, 71)), "RBQ-004", "w");  // 72 needed
  ExpectRefused(qdtest::RbqFile(4, 2, 64, Repeat(0x00, 73)), "RBQ-004", "w");
  ExpectRefused(qdtest::RbqFile(8, 1, 32, Repeat(0x00, 18)), "RBQ-004", "w");  // 34 needed
  ExpectRefused(qdtest::RbqFile(4, 1, 32, Repeat(0x00, 34)), "RBQ-004", "w");  // 18 needed
  // rows = 2^59 - 1, columns = 32: the element count 2^64 - 32 fits (ST-008
  // passes), rows * 1 * 34 = 2^64 + 2^60 - 34 does not: "a byte length that
  // overflows 64 bits disagrees by definition". With 18 bytes per block it is
  // 18 * (2^59 - 1) < 2^64, still not the 0 bytes declared.
  const std::uint64_t huge_rows = (std::uint64_t{1} << 59) - 1;
  ExpectRefused(qdtest::RbqFile(8, huge_rows, 32, {}), "RBQ-004", "w");
  ExpectRefused(qdtest::RbqFile(4, huge_rows, 32, {}), "RBQ-004", "w");
  ExpectDecoded(qdtest::RbqFile(4, 2, 64, Repeat(0x00, 72)), 0, "w", {2, 64},
                std::vector<float>(128, 0.0f));
  ExpectDecoded(qdtest::RbqFile(8, 1, 32, Repeat(0x00, 34)), 0, "w", {1, 32},
                std::vector<float>(32, 0.0f));
}

// "the tensor is not two dimensional, or its columns are not a multiple of 32".
TEST(RbqVectors, ShapeMustBeTwoDimensionalWithWholeBlocks) {
  const qdtest::Metadata meta = qdtest::RbqMetadata(4);
  ExpectRefused(qdtest::SafetensorsFile({{"w", "Q4B32", {1, 48}, Repeat(0, 27)}}, &meta),
                "RBQ-003", "w");
  ExpectRefused(qdtest::SafetensorsFile({{"w", "Q4B32", {32}, Repeat(0, 18)}}, &meta), "RBQ-003",
                "w");
  ExpectRefused(qdtest::SafetensorsFile({{"w", "Q4B32", {1, 1, 32}, Repeat(0, 18)}}, &meta),
                "RBQ-003", "w");
  // columns = 0 and rows = 0 are whole (empty) matrices (catalogue decision).
  ExpectDecoded(qdtest::SafetensorsFile({{"w", "Q4B32", {3, 0}, {}}}, &meta), 0, "w", {3, 0}, {});
  ExpectDecoded(qdtest::SafetensorsFile({{"w", "Q4B32", {0, 64}, {}}}, &meta), 0, "w", {0, 64}, {});
}

// "__metadata__ is absent, or format, block or scale is not the value the
// width requires".
TEST(RbqVectors, MetadataMustDeclareTheWidth) {
  const Bytes block = Concat({kScaleOne, kGatePayload});
  const auto file = [&](const qdtest::Metadata* meta) {
    return qdtest::SafetensorsFile({{"w", "Q4B32", {1, 32}, block}}, meta);
  };
  ExpectRefused(file(nullptr), "RBQ-002", "");
  const qdtest::Metadata wrong_format = {{"format", "rabbit-q8b32"}, {"block", "32"}, {"scale", "f16"}};
  ExpectRefused(file(&wrong_format), "RBQ-002", "");
  const qdtest::Metadata wrong_block = {{"format", "rabbit-q4b32"}, {"block", "64"}, {"scale", "f16"}};
  ExpectRefused(file(&wrong_block), "RBQ-002", "");
  const qdtest::Metadata wrong_scale = {{"format", "rabbit-q4b32"}, {"block", "32"}, {"scale", "bf16"}};
  ExpectRefused(file(&wrong_scale), "RBQ-002", "");
  const qdtest::Metadata no_scale = {{"format", "rabbit-q4b32"}, {"block", "32"}};
  ExpectRefused(file(&no_scale), "RBQ-002", "");
  // Extra keys are allowed.
  const qdtest::Metadata extra = {{"format", "rabbit-q4b32"}, {"block", "32"}, {"scale", "f16"},
                                  {"source", "gate"}};
  std::vector<float> want;
  for (int q : kGateBlock) want.push_back(static_cast<float>(q));
  ExpectDecoded(file(&extra), 0, "w", {1, 32}, want);
  // No block tensor: the width comes from format; an unknown width is RBQ-002.
  const qdtest::Metadata unknown = {{"format", "rabbit-q5b32"}, {"block", "32"}, {"scale", "f16"}};
  ExpectRefused(qdtest::SafetensorsFile({{"norm", "F32", {1}, {0, 0, 0x80, 0x3f}}}, &unknown),
                "RBQ-002", "");
  const qdtest::Metadata q4 = qdtest::RbqMetadata(4);
  ExpectDecoded(qdtest::SafetensorsFile({{"norm", "F32", {1}, {0, 0, 0x80, 0x3f}}}, &q4), 0,
                "norm", {1}, {1.0f});
}

// "a file mixes Q4B32 and Q8B32 tensors": the finding names the tensor of the
// other width, the later one in data order.
TEST(RbqVectors, OneFileCarriesOneWidth) {
  const qdtest::Metadata meta = qdtest::RbqMetadata(4);
  const Bytes q4 = Concat({kScaleOne, kGatePayload});
  const Bytes q8 = Concat({kScaleOne, Repeat(0x01, 32)});
  ExpectRefused(qdtest::SafetensorsFile({{"a", "Q4B32", {1, 32}, q4}, {"b", "Q8B32", {1, 32}, q8}},
                                        &meta),
                "RBQ-001", "b");
  ExpectRefused(qdtest::SafetensorsFile({{"b", "Q8B32", {1, 32}, q8}, {"a", "Q4B32", {1, 32}, q4}},
                                        &meta),
                "RBQ-001", "a");
}

// A two-dimensional tensor kept in floating point is a warning (RBQ-101), a
// one-dimensional norm weight is not; both decode exactly.
TEST(RbqVectors, TwoDimensionalFloatTensorIsAWarning) {
  const qdtest::Metadata meta = qdtest::RbqMetadata(4);
  // F32 little endian: 1.5 = 3fc00000, -2 = c0000000, 0.25 = 3e800000, 3 = 40400000.
  const Bytes head = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0,
                      0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x40, 0x40};
  // BF16 1.0 = 3f80, -0.5 = bf00.
  const Bytes norm = {0x80, 0x3f, 0x00, 0xbf};
  const Bytes file = qdtest::SafetensorsFile({{"w", "Q4B32", {1, 32}, Concat({kScaleOne, kGatePayload})},
                                              {"lm_head", "F32", {2, 2}, head},
                                              {"norm", "BF16", {2}, norm}},
                                             &meta);
  for (const Read& r : ReadBothSides(file)) {
    SCOPED_TRACE(r.who);
    ASSERT_FALSE(r.outcome.refused) << Findings(r.outcome);
    ASSERT_EQ(r.outcome.findings.size(), 1u) << Findings(r.outcome);
    EXPECT_EQ(r.outcome.findings[0].rule, "RBQ-101");
    EXPECT_EQ(r.outcome.findings[0].severity, qd::Severity::kWarning);
    EXPECT_EQ(r.outcome.findings[0].tensor, "lm_head");
    ASSERT_EQ(r.outcome.tensors.size(), 3u);
    EXPECT_EQ(r.outcome.tensors[1].name, "lm_head");
    EXPECT_EQ(r.outcome.tensors[1].values, (std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f}));
    EXPECT_EQ(r.outcome.tensors[2].name, "norm");
    EXPECT_EQ(r.outcome.tensors[2].values, (std::vector<float>{1.0f, -0.5f}));
  }
}

// A plain safetensors file (no block dtype, no rabbit- format) is not an RBQ
// file: no RBQ rule applies, even to a two-dimensional tensor.
TEST(RbqVectors, PlainSafetensorsFileIsNotAnRbqFile) {
  const qdtest::Metadata meta = {{"format", "pt"}};
  const Bytes file = qdtest::SafetensorsFile({{"m", "F32", {1, 1}, {0, 0, 0x80, 0xbf}}}, &meta);
  ExpectDecoded(file, 0, "m", {1, 1}, {-1.0f});
}

// ---- streaming by row chunk (issue 9, section 3) ---------------------------------
//
// A Q8B32 matrix of 1100 rows x 1024 columns (1,126,400 values, more than
// qd::kChunkValues = 2^20) must come from either side's stream in more than
// one chunk, none over kChunkValues, together giving every value once.
// Counting pattern: weight v = r * 1024 + c has payload byte v mod 256
// (q = that byte as a two's complement int8), and row r's scale is
// 2^(r mod 4 - 1) (binary16 0x3800 = 0.5, 0x3c00 = 1, 0x4000 = 2, 0x4400 =
// 4), so value v = q * 2^(r mod 4 - 1), exact in binary32.
TEST(RbqVectors, LargeMatrixStreamsInRowChunksWithEveryValue) {
  constexpr std::uint64_t kRows = 1100;
  constexpr std::uint64_t kColumns = 1024;
  const std::uint16_t kScales[4] = {0x3800, 0x3c00, 0x4000, 0x4400};
  const float kScaleValues[4] = {0.5f, 1.0f, 2.0f, 4.0f};
  Bytes blocks;
  std::vector<float> want;
  for (std::uint64_t r = 0; r < kRows; ++r) {
    for (std::uint64_t j = 0; j < kColumns / 32; ++j) {
      blocks.push_back(static_cast<std::uint8_t>(kScales[r % 4] & 0xff));
      blocks.push_back(static_cast<std::uint8_t>(kScales[r % 4] >> 8));
      for (std::uint64_t n = 0; n < 32; ++n) {
        const std::uint8_t byte = static_cast<std::uint8_t>((r * kColumns + j * 32 + n) % 256);
        blocks.push_back(byte);
        want.push_back(static_cast<float>(static_cast<std::int8_t>(byte)) * kScaleValues[r % 4]);
      }
    }
  }
  ASSERT_GT(want.size(), qd::kChunkValues);
  const Bytes file = qdtest::RbqFile(8, kRows, kColumns, blocks);
  const qd::ByteView view{file.data(), file.size()};
  for (int side = 0; side < 2; ++side) {
    SCOPED_TRACE(side == 0 ? "oracle StreamRbqFile" : "codec StreamRbqFile");
    qd::test::RecordingSink sink;
    const qd::Outcome o = side == 0 ? qd::oracle::StreamRbqFile(view, kName, sink)
                                    : qd::codec::StreamRbqFile(view, kName, sink);
    ASSERT_FALSE(o.refused) << Findings(o);
    EXPECT_TRUE(o.findings.empty()) << Findings(o);
    EXPECT_TRUE(o.tensors.empty());
    ASSERT_NO_FATAL_FAILURE(qd::test::ExpectOneTensorInSeveralChunks(sink, "w", {kRows, kColumns}));
    // The oracle cuts whole rows: 1024 rows of 1024 values fill a chunk
    // (2^20 values), then the last 76 rows.
    if (side == 0) {
      EXPECT_EQ(sink.chunks, 2u);
    }
    const std::vector<float>& got = sink.tensors[0].values;
    ASSERT_EQ(got.size(), want.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (Bits(got[i]) != Bits(want[i]) && wrong++ < 5) {
        ADD_FAILURE() << "element " << i << ": got " << got[i] << ", expected " << want[i];
      }
    }
    EXPECT_EQ(wrong, 0u);
  }
}

}  // namespace
