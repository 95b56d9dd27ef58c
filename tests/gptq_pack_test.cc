// gptq_pack_test: the GPTQ packer and its conversions (codecs/gptq_pack.cc)
// against docs/gptq.md sections 4 to 9; the layer kernels (dequantization,
// matvec) are gptq_kernels_test.cc.
//
// Expected words come from the page, not from the code under test: literal
// words worked out by hand, and a reference packer in this file that sets
// stream bits one at a time from the bit positions the page defines
// (continuous: bit u of field i is stream bit i*b + u; planar: bit u belongs
// to the plane j with W_j <= u < W_j + p_j, in word block*b + W_j + t/(32/p_j)
// at bit (t % (32/p_j)) * p_j + u - W_j). Expected weights are computed here
// as fl32((c - z) * s) from the codes and zeros the test chose, the scale
// widened by the tests' own binary16 / bfloat16 arithmetic
// (property_tests/gen/half.h), not by the codec's converters.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "property_tests/gen/half.h"
#include "tests/gptq_pack_test_support.h"

namespace {

using namespace qd_gptq_test;  // NOLINT(google-build-using-namespace): the reference packer and layers

// ---- bit layouts by hand ----------------------------------------------------

// A single column (n = 0 of N = 32) of K = 32 codes, all zero but the given
// fields; zeros all at the smallest legal value.
Layer OneColumn(GptqFormat format, int bits, std::int64_t K,
                const std::vector<std::pair<int, std::int32_t>>& fields) {
  Layer l;
  l.format = format;
  l.bits = bits;
  l.K = K;
  l.N = 32;
  l.G = 1;
  l.codes.assign(static_cast<std::size_t>(K * 32), 0);
  for (auto [i, v] : fields) l.codes[static_cast<std::size_t>(i) * 32] = v;
  l.zeros.assign(32, ZeroMin(format));
  l.g_idx.assign(static_cast<std::size_t>(K), 0);
  l.scales = ScaleBytes(Dtype::kF32, std::vector<std::uint32_t>(32, Bits(1.0f)));
  return l;
}

// Column 0 of the qweight words that GptqEncode wrote.
std::vector<std::int32_t> Column0(const GptqPacked& p, std::int64_t rows) {
  std::vector<std::int32_t> c;
  for (std::int64_t r = 0; r < rows; ++r) c.push_back(p.qweight[r * 32]);
  return c;
}

void ExpectColumn(GptqFormat format, int bits, std::int64_t K,
                  const std::vector<std::pair<int, std::int32_t>>& fields,
                  const std::vector<std::int32_t>& words) {
  SCOPED_TRACE(std::string(qd::codec::GptqFormatName(format)) + " b" + std::to_string(bits));
  Layer l = OneColumn(format, bits, K, fields);
  GptqPacked p;
  GptqPackError e;
  ASSERT_TRUE(qd::codec::GptqEncode(format, bits, K, 32, 1, l.codes, l.zeros, &p, &e)) << e.message;
  EXPECT_EQ(Column0(p, K * bits / 32), words);
  // The reference packer agrees with the hand-made words.
  l.Pack();
  std::vector<std::int32_t> ref;
  for (std::int64_t r = 0; r < K * bits / 32; ++r) ref.push_back(l.qweight[r * 32]);
  EXPECT_EQ(ref, words);
  // And the words decode back to the fields.
  l.qweight = p.qweight;
  l.qzeros = p.qzeros;
  std::vector<std::int32_t> codes, zeros;
  qd::codec::GptqUnpack(l.View(), &codes, &zeros);
  EXPECT_EQ(codes, l.codes);
  EXPECT_EQ(zeros, l.zeros);
}

TEST(GptqLayout, ThreeBitStraddlingFields) {
  // Field 10 = 5 = 0b101: bits 30..31 of word 0 get 0b01 (bit 30), bit 0 of
  // word 1 gets 1. Field 21 = 3 = 0b011: bit 31 of word 1 gets 1, bits 0..1
  // of word 2 get 0b01.
  for (GptqFormat f : {GptqFormat::kV1, GptqFormat::kV2}) {
    ExpectColumn(f, 3, 32, {{10, 5}, {21, 3}}, Words({0x40000000u, 0x80000001u, 0x00000001u}));
    // Field 10 = 7 fills bits 30, 31 and word 1 bit 0; field 21 = 7 fills
    // word 1 bit 31 and word 2 bits 0, 1.
    ExpectColumn(f, 3, 32, {{10, 7}, {21, 7}}, Words({0xC0000000u, 0x80000001u, 0x00000003u}));
    // Neighbours: field 9 = 7 at bits 27..29, field 11 = 7 at word 1 bits 1..3,
    // field 20 = 7 at word 1 bits 28..30, field 22 = 7 at word 2 bits 2..4,
    // field 31 = 7 at word 2 bits 29..31.
    ExpectColumn(f, 3, 32, {{9, 7}, {11, 7}, {20, 7}, {22, 7}, {31, 7}},
                 Words({0x38000000u, 0x7000000Eu, 0xE000001Cu}));
    // Second block of 32: field 42 (10 + 32) straddles words 3 and 4.
    ExpectColumn(f, 3, 64, {{42, 6}}, Words({0, 0, 0, 0x80000000u, 0x00000001u, 0}));
  }
}

TEST(GptqLayout, WholeFieldWidths) {
  // b = 2: field 17 at stream bit 34 = word 1 bit 2.
  ExpectColumn(GptqFormat::kV2, 2, 32, {{17, 3}, {0, 1}, {31, 2}},
               Words({0x00000001u, 0x8000000Cu}));
  // b = 4: field 13 at bit 52 = word 1 bit 20; field 7 at word 0 bits 28..31.
  ExpectColumn(GptqFormat::kV2, 4, 32, {{13, 0xA}, {7, 0xF}},
               Words({0xF0000000u, 0x00A00000u, 0, 0}));
  // b = 8: field 6 at bit 48 = word 1 bit 16.
  ExpectColumn(GptqFormat::kV2, 8, 32, {{6, 0xC5}, {31, 0x80}},
               Words({0, 0x00C50000u, 0, 0, 0, 0, 0, 0x80000000u}));
  // Planar 2, 4, 8 equal the continuous words.
  ExpectColumn(GptqFormat::kPlanar, 2, 32, {{17, 3}, {0, 1}, {31, 2}},
               Words({0x00000001u, 0x8000000Cu}));
  ExpectColumn(GptqFormat::kPlanar, 4, 32, {{13, 0xA}, {7, 0xF}},
               Words({0xF0000000u, 0x00A00000u, 0, 0}));
  ExpectColumn(GptqFormat::kPlanar, 8, 32, {{6, 0xC5}, {31, 0x80}},
               Words({0, 0x00C50000u, 0, 0, 0, 0, 0, 0x80000000u}));
}

TEST(GptqLayout, PlanarPlanes) {
  // b = 3, planes [2, 1]: words 0..1 hold the low 2 bits (16 per word),
  // word 2 the top bit. Field 17 = 7: low 3 -> word 1 bits 2..3; top -> word 2 bit 17.
  ExpectColumn(GptqFormat::kPlanar, 3, 32, {{17, 7}}, Words({0, 0x0000000Cu, 0x00020000u}));
  // Field 10 = 5 (does not straddle in planar): low 01 -> word 0 bit 20,
  // top 1 -> word 2 bit 10.
  ExpectColumn(GptqFormat::kPlanar, 3, 32, {{10, 5}}, Words({0x00100000u, 0, 0x00000400u}));
  // b = 5, planes [4, 1]: field 9 = 0b11010: low 0xA -> word 1 bits 4..7,
  // bit 4 -> word 4 bit 9.
  ExpectColumn(GptqFormat::kPlanar, 5, 32, {{9, 0x1A}}, Words({0, 0x000000A0u, 0, 0, 0x00000200u}));
  // b = 6, planes [4, 2]: field 31 = 0b101101: low 0xD -> word 3 bits 28..31,
  // high 0b10 -> word 4 + 1 = 5, bits 30..31.
  ExpectColumn(GptqFormat::kPlanar, 6, 32, {{31, 0x2D}},
               Words({0, 0, 0, 0xD0000000u, 0, 0x80000000u}));
  // b = 7, planes [4, 2, 1], K = 64: field 0 = 0x7F -> words 0, 4, 6;
  // field 32 + 9 = 41 = 0b1010110: low 6 -> word 7 + 1 bits 4..7,
  // middle 0b01 -> word 7 + 4 bits 18..19, top 1 -> word 7 + 6 bit 9.
  ExpectColumn(GptqFormat::kPlanar, 7, 64, {{0, 0x7F}, {41, 0x56}},
               Words({0x0000000Fu, 0, 0, 0, 0x00000003u, 0, 0x00000001u,
                      0, 0x00000060u, 0, 0, 0x00040000u, 0, 0x00000200u}));
}

TEST(GptqLayout, ZeroStreamsRunAlongTheRow) {
  // 3-bit v2 zeros, N = 32: qzeros row = 3 words; zero at n = 10 straddles.
  Layer l = OneColumn(GptqFormat::kV2, 3, 32, {});
  l.zeros[10] = 5;
  l.zeros[21] = 3;
  GptqPacked p;
  GptqPackError e;
  ASSERT_TRUE(qd::codec::GptqEncode(l.format, 3, 32, 32, 1, l.codes, l.zeros, &p, &e));
  EXPECT_EQ(p.qzeros, Words({0x40000000u, 0x80000001u, 0x00000001u}));
  // v1 stores zero - 1: zero points 6 and 4 give the same words; zero 1
  // everywhere else stores 0.
  Layer v1 = OneColumn(GptqFormat::kV1, 3, 32, {});
  v1.zeros[10] = 6;
  v1.zeros[21] = 4;
  ASSERT_TRUE(qd::codec::GptqEncode(v1.format, 3, 32, 32, 1, v1.codes, v1.zeros, &p, &e));
  EXPECT_EQ(p.qzeros, Words({0x40000000u, 0x80000001u, 0x00000001u}));
  // v1 field 7 decodes to zero point 8, unmasked (section 5).
  v1.qweight.assign(3 * 32, 0);
  v1.qzeros = Words({0x00000007u, 0, 0});
  std::vector<std::int32_t> codes, zeros;
  qd::codec::GptqUnpack(v1.View(), &codes, &zeros);
  EXPECT_EQ(zeros[0], 8);
  EXPECT_EQ(zeros[1], 1);
}

// ---- encoder and unpacker -----------------------------------------------------

TEST(GptqPack, RoundTripsEveryFormatAndWidth) {
  std::uint64_t seed = 1;
  for (const Shape& s : AllShapes()) {
    for (std::int64_t K : {32, 96, 160}) {
      SCOPED_TRACE(Name(s) + " K " + std::to_string(K));
      Layer l = RandomLayer(s.format, s.bits, K, 64, 32, false, Dtype::kF16, seed++);
      GptqPacked p;
      GptqPackError e;
      ASSERT_TRUE(qd::codec::GptqEncode(s.format, s.bits, K, 64, l.G, l.codes, l.zeros, &p, &e))
          << e.message;
      EXPECT_EQ(p.qweight, l.qweight);  // the bit-by-bit reference packer
      EXPECT_EQ(p.qzeros, l.qzeros);
      std::vector<std::int32_t> codes, zeros;
      qd::codec::GptqUnpack(l.View(), &codes, &zeros);
      EXPECT_EQ(codes, l.codes);
      EXPECT_EQ(zeros, l.zeros);
    }
  }
}

TEST(GptqPack, ExtremeValuesRoundTrip) {
  for (const Shape& s : AllShapes()) {
    SCOPED_TRACE(Name(s));
    Layer l = RandomLayer(s.format, s.bits, 64, 32, 32, false, Dtype::kF16, 7);
    for (std::size_t i = 0; i < l.codes.size(); ++i) l.codes[i] = i % 2 ? (1 << s.bits) - 1 : 0;
    for (std::size_t i = 0; i < l.zeros.size(); ++i) {
      l.zeros[i] = i % 3 ? ZeroMax(s.format, s.bits) : ZeroMin(s.format);
    }
    l.Pack();
    GptqPacked p;
    GptqPackError e;
    ASSERT_TRUE(qd::codec::GptqEncode(s.format, s.bits, 64, 32, l.G, l.codes, l.zeros, &p, &e));
    EXPECT_EQ(p.qweight, l.qweight);
    EXPECT_EQ(p.qzeros, l.qzeros);
    std::vector<std::int32_t> codes, zeros;
    qd::codec::GptqUnpack(l.View(), &codes, &zeros);
    EXPECT_EQ(codes, l.codes);
    EXPECT_EQ(zeros, l.zeros);
  }
}

GptqPackError EncodeError(GptqFormat f, int bits, std::int64_t K, std::int64_t N, std::int64_t G,
                          const std::vector<std::int32_t>& codes,
                          const std::vector<std::int32_t>& zeros) {
  GptqPacked p;
  GptqPackError e;
  EXPECT_FALSE(qd::codec::GptqEncode(f, bits, K, N, G, codes, zeros, &p, &e));
  EXPECT_FALSE(e.message.empty());
  return e;
}

TEST(GptqPack, PreconditionsInOrder) {
  const std::vector<std::int32_t> codes(64 * 32, 0), zeros1(2 * 32, 1);
  // Bits first, even with a bad shape.
  for (int b : {0, 1, 5, 6, 7, 9, 16}) {
    EXPECT_EQ(EncodeError(GptqFormat::kV1, b, 48, 32, 2, codes, zeros1).what, "bits") << b;
    EXPECT_EQ(EncodeError(GptqFormat::kV2, b, 64, 32, 2, codes, zeros1).what, "bits") << b;
  }
  for (int b : {1, 9}) {
    EXPECT_EQ(EncodeError(GptqFormat::kPlanar, b, 64, 32, 2, codes, zeros1).what, "bits");
  }
  // Shape: K, N not multiples of 32, sizes that do not match.
  std::vector<std::int32_t> bad_codes = codes;
  bad_codes[0] = 99;  // shape is checked before codes
  EXPECT_EQ(EncodeError(GptqFormat::kV1, 4, 48, 32, 2, bad_codes, zeros1).what, "shape");
  EXPECT_EQ(EncodeError(GptqFormat::kV1, 4, 64, 48, 2, bad_codes, zeros1).what, "shape");
  EXPECT_EQ(EncodeError(GptqFormat::kV1, 4, 64, 32, 3, bad_codes, zeros1).what, "shape");
  EXPECT_EQ(EncodeError(GptqFormat::kV1, 4, -32, 32, 2, bad_codes, zeros1).what, "shape");
  EXPECT_EQ(EncodeError(GptqFormat::kV1, 4, 32, 32, 2, bad_codes, zeros1).what, "shape");
  // Codes before zeros; the first in row-major order.
  std::vector<std::int32_t> zeros_bad(2 * 32, 0);  // zero 0 is not v1
  bad_codes = codes;
  bad_codes[40 * 32 + 3] = 16;
  bad_codes[40 * 32 + 1] = -1;
  bad_codes[41 * 32 + 0] = 17;
  GptqPackError e = EncodeError(GptqFormat::kV1, 4, 64, 32, 2, bad_codes, zeros_bad);
  EXPECT_EQ(e.what, "code");
  EXPECT_EQ(e.row, 40);
  EXPECT_EQ(e.column, 1);
  // Code limits per width.
  for (const Shape& s : AllShapes()) {
    std::vector<std::int32_t> c = codes;
    std::vector<std::int32_t> z(2 * 32, ZeroMin(s.format));
    c[5 * 32 + 31] = 1 << s.bits;
    e = EncodeError(s.format, s.bits, 64, 32, 2, c, z);
    EXPECT_EQ(e.what, "code") << Name(s);
    EXPECT_EQ(e.row, 5);
    EXPECT_EQ(e.column, 31);
    c[5 * 32 + 31] = (1 << s.bits) - 1;
    GptqPacked p;
    EXPECT_TRUE(qd::codec::GptqEncode(s.format, s.bits, 64, 32, 2, c, z, &p, &e)) << Name(s);
  }
  // Zero ranges: v1 1..2^b, true zeros 0..2^b-1; first (g, n) row-major.
  for (int b : {2, 3, 4, 8}) {
    std::vector<std::int32_t> z(2 * 32, 1 << b);  // 2^b: fine for v1
    GptqPacked p;
    EXPECT_TRUE(qd::codec::GptqEncode(GptqFormat::kV1, b, 64, 32, 2, codes, z, &p, &e));
    z[1 * 32 + 7] = 0;  // underflow: no v1 form
    z[1 * 32 + 9] = (1 << b) + 1;
    e = EncodeError(GptqFormat::kV1, b, 64, 32, 2, codes, z);
    EXPECT_EQ(e.what, "zero");
    EXPECT_EQ(e.row, 1);
    EXPECT_EQ(e.column, 7);
    std::vector<std::int32_t> t(2 * 32, 0);
    EXPECT_TRUE(qd::codec::GptqEncode(GptqFormat::kV2, b, 64, 32, 2, codes, t, &p, &e));
    t[0 * 32 + 30] = 1 << b;
    t[1 * 32 + 0] = -1;
    e = EncodeError(GptqFormat::kV2, b, 64, 32, 2, codes, t);
    EXPECT_EQ(e.what, "zero");
    EXPECT_EQ(e.row, 0);
    EXPECT_EQ(e.column, 30);
  }
}

// ---- conversions -----------------------------------------------------------------

TEST(GptqConvert, V1V2Identity) {
  for (int b : {2, 3, 4, 8}) {
    SCOPED_TRACE(b);
    // Zero points 1..2^b-1 exist in both flavours.
    Layer v2 = RandomLayer(GptqFormat::kV2, b, 96, 64, 32, true, Dtype::kBF16, 100 + b);
    for (auto& z : v2.zeros) z = 1 + z % ((1 << b) - 1);
    v2.Pack();
    Layer v1 = v2;
    v1.format = GptqFormat::kV1;
    v1.Pack();
    GptqPacked to_v1 = Convert(v2, GptqFormat::kV1);
    EXPECT_EQ(to_v1.qweight, v2.qweight);
    EXPECT_EQ(to_v1.qzeros, v1.qzeros);
    GptqPacked back = Convert(v1, GptqFormat::kV2);
    EXPECT_EQ(back.qweight, v2.qweight);
    EXPECT_EQ(back.qzeros, v2.qzeros);
    // Same format: the words come back unchanged.
    EXPECT_EQ(Convert(v1, GptqFormat::kV1).qzeros, v1.qzeros);
    EXPECT_EQ(Convert(v2, GptqFormat::kV2).qzeros, v2.qzeros);
    EXPECT_EQ(AsBits(Decode(v1)), AsBits(Decode(v2)));
    EXPECT_EQ(AsBits(Decode(WithWords(v2, GptqFormat::kV1, to_v1))), AsBits(Decode(v2)));
  }
}

TEST(GptqConvert, OverflowAndUnderflowPositions) {
  for (int b : {2, 3, 4, 8}) {
    SCOPED_TRACE(b);
    Layer v1 = RandomLayer(GptqFormat::kV1, b, 64, 64, 32, false, Dtype::kF16, 200 + b);
    for (auto& z : v1.zeros) z = 1 + z % ((1 << b) - 1);
    v1.zeros[1 * 64 + 40] = 1 << b;  // field mask(b): no v2 field
    v1.zeros[1 * 64 + 50] = 1 << b;
    v1.Pack();
    for (GptqFormat target : {GptqFormat::kV2, GptqFormat::kPlanar}) {
      GptqPacked p;
      GptqPackError e;
      EXPECT_FALSE(qd::codec::GptqConvert(v1.View(), target, &p, &e));
      EXPECT_EQ(e.what, "overflow");
      EXPECT_EQ(e.row, 1);
      EXPECT_EQ(e.column, 40);
    }
    for (GptqFormat source : {GptqFormat::kV2, GptqFormat::kPlanar}) {
      Layer t = RandomLayer(source, b, 64, 64, 32, false, Dtype::kF16, 300 + b);
      for (auto& z : t.zeros) z = 1 + z % ((1 << b) - 1);
      t.zeros[0 * 64 + 63] = 0;
      t.zeros[1 * 64 + 0] = 0;
      t.Pack();
      GptqPacked p;
      GptqPackError e;
      EXPECT_FALSE(qd::codec::GptqConvert(t.View(), GptqFormat::kV1, &p, &e));
      EXPECT_EQ(e.what, "underflow");
      EXPECT_EQ(e.row, 0);
      EXPECT_EQ(e.column, 63);
    }
  }
  // Planar 5..7 have no continuous form.
  for (int b : {5, 6, 7}) {
    Layer p5 = RandomLayer(GptqFormat::kPlanar, b, 64, 32, 32, false, Dtype::kF16, 400 + b);
    for (GptqFormat target : {GptqFormat::kV1, GptqFormat::kV2}) {
      GptqPacked p;
      GptqPackError e;
      EXPECT_FALSE(qd::codec::GptqConvert(p5.View(), target, &p, &e));
      EXPECT_EQ(e.what, "bits");
    }
    EXPECT_EQ(Convert(p5, GptqFormat::kPlanar).qweight, p5.qweight);
  }
}

TEST(GptqConvert, ContinuousPlanarIdentity) {
  for (int b : {2, 3, 4, 8}) {
    SCOPED_TRACE(b);
    Layer v2 = RandomLayer(GptqFormat::kV2, b, 128, 64, 64, true, Dtype::kF32, 500 + b);
    Layer planar = v2;
    planar.format = GptqFormat::kPlanar;
    planar.Pack();
    if (b != 3) {  // section 4: 2, 4, 8 bit words are the continuous ones
      EXPECT_EQ(planar.qweight, v2.qweight);
      EXPECT_EQ(planar.qzeros, v2.qzeros);
    } else {
      EXPECT_NE(planar.qweight, v2.qweight);
    }
    GptqPacked to_p = Convert(v2, GptqFormat::kPlanar);
    EXPECT_EQ(to_p.qweight, planar.qweight);
    EXPECT_EQ(to_p.qzeros, planar.qzeros);
    GptqPacked to_c = Convert(planar, GptqFormat::kV2);
    EXPECT_EQ(to_c.qweight, v2.qweight);
    EXPECT_EQ(to_c.qzeros, v2.qzeros);
    EXPECT_EQ(AsBits(Decode(planar)), AsBits(Decode(v2)));
    // planar -> v1 is planar -> v2 -> v1, and back.
    for (auto& z : v2.zeros) z = 1 + z % ((1 << b) - 1);
    v2.Pack();
    planar.zeros = v2.zeros;
    planar.Pack();
    Layer v1 = v2;
    v1.format = GptqFormat::kV1;
    v1.Pack();
    GptqPacked p_to_v1 = Convert(planar, GptqFormat::kV1);
    EXPECT_EQ(p_to_v1.qweight, v1.qweight);
    EXPECT_EQ(p_to_v1.qzeros, v1.qzeros);
    GptqPacked v1_to_p = Convert(v1, GptqFormat::kPlanar);
    EXPECT_EQ(v1_to_p.qweight, planar.qweight);
    EXPECT_EQ(v1_to_p.qzeros, planar.qzeros);
    EXPECT_EQ(AsBits(Decode(WithWords(v1, GptqFormat::kPlanar, v1_to_p))), AsBits(Decode(v1)));
  }
}

}  // namespace
