// gptq_pack_test: the GPTQ packer and layer kernels (codecs/gptq_pack.cc,
// codecs/gptq_kernels.cc) against docs/gptq.md sections 4 to 9.
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

namespace {

using qd::codec::Dtype;
using qd::codec::GptqFormat;
using qd::codec::GptqLayerView;
using qd::codec::GptqPackError;
using qd::codec::GptqPacked;
using qd::codec::Kernel;

std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }

struct Plane {
  int width;
  int offset;
};

// docs/gptq.md section 4, copied from the table by hand.
std::vector<Plane> PlanesOf(int bits) {
  switch (bits) {
    case 2: return {{2, 0}};
    case 3: return {{2, 0}, {1, 2}};
    case 4: return {{4, 0}};
    case 5: return {{4, 0}, {1, 4}};
    case 6: return {{4, 0}, {2, 4}};
    case 7: return {{4, 0}, {2, 4}, {1, 6}};
    case 8: return {{8, 0}};
  }
  ADD_FAILURE() << "no planes for " << bits;
  return {};
}

// Stream word and bit holding bit u of field i.
struct BitPos {
  std::int64_t word;
  int bit;
};

BitPos PositionOf(bool planar, int bits, std::int64_t i, int u) {
  if (!planar) {
    const std::int64_t t = i * bits + u;
    return {t / 32, static_cast<int>(t % 32)};
  }
  const std::int64_t block = i / 32;
  const int t = static_cast<int>(i % 32);
  for (const Plane& p : PlanesOf(bits)) {
    if (u >= p.offset && u < p.offset + p.width) {
      const int per_word = 32 / p.width;
      return {block * bits + p.offset + t / per_word, (t % per_word) * p.width + (u - p.offset)};
    }
  }
  ADD_FAILURE() << "bit " << u << " in no plane";
  return {0, 0};
}

// The reference packer: words of one stream of `count` fields, bit by bit.
std::vector<std::uint32_t> PackStream(bool planar, int bits, const std::vector<std::uint32_t>& f) {
  std::vector<std::uint32_t> words(f.size() * bits / 32, 0u);
  for (std::size_t i = 0; i < f.size(); ++i) {
    for (int u = 0; u < bits; ++u) {
      if ((f[i] >> u) & 1u) {
        const BitPos p = PositionOf(planar, bits, static_cast<std::int64_t>(i), u);
        words.at(static_cast<std::size_t>(p.word)) |= 1u << p.bit;
      }
    }
  }
  return words;
}

// A whole layer as a test builds it: codes [K][N], zero points [G][N],
// scales, g_idx, and the words from the reference packer.
struct Layer {
  GptqFormat format = GptqFormat::kV2;
  int bits = 4;
  std::int64_t K = 0, N = 0, G = 0;
  std::vector<std::int32_t> codes, zeros, g_idx;
  std::vector<std::uint8_t> scales;  // raw bytes of scales_dtype
  Dtype scales_dtype = Dtype::kF32;
  std::vector<std::int32_t> qweight, qzeros;

  void Pack() {
    const bool planar = format == GptqFormat::kPlanar;
    const std::int64_t zw = N * bits / 32;
    qweight.assign(static_cast<std::size_t>(K * bits / 32 * N), 0);
    qzeros.assign(static_cast<std::size_t>(G * zw), 0);
    for (std::int64_t n = 0; n < N; ++n) {
      std::vector<std::uint32_t> column(static_cast<std::size_t>(K));
      for (std::int64_t k = 0; k < K; ++k) column[k] = static_cast<std::uint32_t>(codes[k * N + n]);
      const std::vector<std::uint32_t> words = PackStream(planar, bits, column);
      for (std::size_t j = 0; j < words.size(); ++j) {
        qweight[j * N + n] = static_cast<std::int32_t>(words[j]);
      }
    }
    for (std::int64_t g = 0; g < G; ++g) {
      std::vector<std::uint32_t> row(static_cast<std::size_t>(N));
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int32_t z = zeros[g * N + n];
        row[n] = static_cast<std::uint32_t>(format == GptqFormat::kV1 ? z - 1 : z);
      }
      const std::vector<std::uint32_t> words = PackStream(planar, bits, row);
      for (std::size_t j = 0; j < words.size(); ++j) qzeros[g * zw + j] = static_cast<std::int32_t>(words[j]);
    }
  }

  float Scale(std::int64_t g, std::int64_t n) const {
    const std::size_t e = static_cast<std::size_t>(g * N + n);
    std::uint16_t h;
    float f;
    switch (scales_dtype) {
      case Dtype::kF16: std::memcpy(&h, &scales[2 * e], 2); return qdtest::HalfValue(h);
      case Dtype::kBF16: std::memcpy(&h, &scales[2 * e], 2); return qdtest::BFloat16Value(h);
      default: std::memcpy(&f, &scales[4 * e], 4); return f;
    }
  }

  // Section 6, from the chosen codes and zero points.
  float Expected(std::int64_t k, std::int64_t n) const {
    const std::int64_t g = g_idx[k];
    const float d = static_cast<float>(codes[k * N + n] - zeros[g * N + n]);
    return d * Scale(g, n);
  }

  GptqLayerView View() const {
    GptqLayerView v;
    v.format = format;
    v.bits = bits;
    v.in_features = K;
    v.out_features = N;
    v.groups = G;
    v.qweight = reinterpret_cast<const std::uint8_t*>(qweight.data());
    v.qzeros = reinterpret_cast<const std::uint8_t*>(qzeros.data());
    v.scales = scales.data();
    v.scales_dtype = scales_dtype;
    v.g_idx = reinterpret_cast<const std::uint8_t*>(g_idx.data());
    return v;
  }
};

int ZeroMin(GptqFormat f) { return f == GptqFormat::kV1 ? 1 : 0; }
int ZeroMax(GptqFormat f, int bits) { return f == GptqFormat::kV1 ? (1 << bits) : (1 << bits) - 1; }

std::vector<std::uint8_t> ScaleBytes(Dtype dtype, const std::vector<std::uint32_t>& patterns) {
  const std::size_t size = dtype == Dtype::kF32 ? 4 : 2;
  std::vector<std::uint8_t> b(patterns.size() * size);
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    if (size == 4) {
      std::memcpy(&b[4 * i], &patterns[i], 4);
    } else {
      const std::uint16_t h = static_cast<std::uint16_t>(patterns[i]);
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}

// Random scale bit patterns of a dtype: finite, both signs, subnormals and
// zeros included now and then.
std::uint32_t RandomScale(Dtype dtype, std::mt19937_64& rng) {
  const std::uint32_t r = static_cast<std::uint32_t>(rng());
  const int kind = static_cast<int>(rng() % 8);
  switch (dtype) {
    case Dtype::kF16: {
      std::uint32_t h = r & 0xffffu;
      if (kind == 0) h &= 0x83ffu;                                   // subnormal or zero
      if (((h >> 10) & 0x1fu) == 0x1fu) h &= 0xbfffu;                // no inf / NaN
      return h;
    }
    case Dtype::kBF16: {
      std::uint32_t h = r & 0xffffu;
      if (kind == 0) h &= 0x807fu;
      if (((h >> 7) & 0xffu) == 0xffu) h &= 0xbfffu;
      return h;
    }
    default: {
      std::uint32_t f = r;
      if (kind == 0) f &= 0x807fffffu;
      if (kind == 1) f = (f & 0x807fffffu) | (0x3c000000u);  // near 2^-7
      if (((f >> 23) & 0xffu) == 0xffu) f &= 0xbfffffffu;
      return f;
    }
  }
}

Layer RandomLayer(GptqFormat format, int bits, std::int64_t K, std::int64_t N, std::int64_t gs,
                  bool act_order, Dtype dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layer l;
  l.format = format;
  l.bits = bits;
  l.K = K;
  l.N = N;
  l.G = gs < 0 ? 1 : (K + gs - 1) / gs;
  l.scales_dtype = dtype;
  l.codes.resize(static_cast<std::size_t>(K * N));
  for (auto& c : l.codes) c = static_cast<std::int32_t>(rng() % (1u << bits));
  l.zeros.resize(static_cast<std::size_t>(l.G * N));
  const int zmin = ZeroMin(format), zmax = ZeroMax(format, bits);
  for (auto& z : l.zeros) z = zmin + static_cast<std::int32_t>(rng() % (zmax - zmin + 1));
  l.g_idx.resize(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k) {
    l.g_idx[k] = act_order ? static_cast<std::int32_t>(rng() % l.G)
                           : static_cast<std::int32_t>(gs < 0 ? 0 : k / gs);
  }
  std::vector<std::uint32_t> s(static_cast<std::size_t>(l.G * N));
  for (auto& v : s) v = RandomScale(dtype, rng);
  l.scales = ScaleBytes(dtype, s);
  l.Pack();
  return l;
}

struct Shape {
  GptqFormat format;
  int bits;
};

std::vector<Shape> AllShapes() {
  std::vector<Shape> s;
  for (int b : {2, 3, 4, 8}) {
    s.push_back({GptqFormat::kV1, b});
    s.push_back({GptqFormat::kV2, b});
  }
  for (int b = 2; b <= 8; ++b) s.push_back({GptqFormat::kPlanar, b});
  return s;
}

std::string Name(const Shape& s) {
  return std::string(qd::codec::GptqFormatName(s.format)) + " b" + std::to_string(s.bits);
}

std::vector<std::int32_t> Words(std::initializer_list<std::uint32_t> w) {
  std::vector<std::int32_t> out;
  for (std::uint32_t x : w) out.push_back(static_cast<std::int32_t>(x));
  return out;
}

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

GptqPacked Convert(const Layer& l, GptqFormat target) {
  GptqPacked p;
  GptqPackError e;
  EXPECT_TRUE(qd::codec::GptqConvert(l.View(), target, &p, &e)) << e.message;
  return p;
}

Layer WithWords(Layer l, GptqFormat format, const GptqPacked& p) {
  l.format = format;
  l.qweight = p.qweight;
  l.qzeros = p.qzeros;
  return l;
}

std::vector<float> Decode(const Layer& l, Kernel kernel = Kernel::kScalar) {
  std::vector<float> out(static_cast<std::size_t>(l.N * l.K), 1.5f);
  qd::codec::GptqDequantize(l.View(), out.data(), kernel);
  return out;
}

std::vector<std::uint32_t> AsBits(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = Bits(v[i]);
  return b;
}

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

// ---- dequantization ------------------------------------------------------------

TEST(GptqDequant, HandValues) {
  // v2 4-bit, K = N = 32, one group. Column 0: code 3 with zero 3 and scale
  // -2.0 gives -0.0 (+0.0 times a negative scale); column 1 with the F16
  // subnormal 0x0001 = 2^-24: code 5, zero 2 gives 3 * 2^-24 = 0x34400000.
  for (Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string(qd::codec::KernelName(kernel)));
    Layer l;
    l.format = GptqFormat::kV2;
    l.bits = 4;
    l.K = 32;
    l.N = 32;
    l.G = 1;
    l.codes.assign(32 * 32, 0);
    l.zeros.assign(32, 0);
    l.g_idx.assign(32, 0);
    for (int k = 0; k < 32; ++k) {
      l.codes[k * 32 + 0] = 3;
      l.codes[k * 32 + 1] = 5;
      l.codes[k * 32 + 2] = 0;
    }
    l.zeros[0] = 3;
    l.zeros[1] = 2;
    l.zeros[2] = 15;
    std::vector<std::uint32_t> s(32, 0x3c00u);  // 1.0
    s[0] = 0xc000u;                            // -2.0
    s[1] = 0x0001u;                            // 2^-24
    s[2] = 0x8400u;                            // -2^-14
    l.scales_dtype = Dtype::kF16;
    l.scales = ScaleBytes(Dtype::kF16, s);
    l.Pack();
    const std::vector<float> out = Decode(l, kernel);
    for (int k = 0; k < 32; ++k) {
      EXPECT_EQ(Bits(out[0 * 32 + k]), 0x80000000u);
      EXPECT_EQ(Bits(out[1 * 32 + k]), 0x34400000u);
      EXPECT_EQ(Bits(out[2 * 32 + k]), Bits(15.0f * 0x1p-14f));  // (0 - 15) * -2^-14
      EXPECT_EQ(Bits(out[3 * 32 + k]), 0u);                     // +0.0 * 1.0
    }
    // F32: subnormal products are kept (no FTZ/DAZ), overflow gives inf.
    l.scales_dtype = Dtype::kF32;
    s.assign(32, Bits(1.0f));
    s[0] = 0x00000001u;     // 2^-149, code - zero = 0 -> +0
    s[1] = 0x80000001u;     // -2^-149 * 3
    s[2] = Bits(3.0e38f);   // -15 * 3e38 = -inf
    s[3] = 0x00400000u;     // 2^-127 subnormal * 0
    l.scales = ScaleBytes(Dtype::kF32, s);
    const std::vector<float> f = Decode(l, kernel);
    EXPECT_EQ(Bits(f[0 * 32]), 0u);
    EXPECT_EQ(Bits(f[1 * 32]), 0x80000003u);
    EXPECT_EQ(Bits(f[2 * 32]), Bits(-std::numeric_limits<float>::infinity()));
    EXPECT_EQ(Bits(f[3 * 32]), 0u);
    // BF16 widening: 0x4049 = 3.140625; code 5 - zero 2 = 3 -> 9.421875.
    l.scales_dtype = Dtype::kBF16;
    s.assign(32, 0x4049u);
    l.scales = ScaleBytes(Dtype::kBF16, s);
    EXPECT_EQ(Decode(l, kernel)[1 * 32], 9.421875f);
    // v1: field 15 is zero point 16 (unmasked): code 0 gives -16 * scale.
    Layer v1 = l;
    v1.format = GptqFormat::kV1;
    v1.zeros.assign(32, 16);
    v1.Pack();
    EXPECT_EQ(v1.qzeros[0], -1);  // all fields 15
    EXPECT_EQ(Decode(v1, kernel)[2 * 32], -16.0f * 3.140625f);
  }
}

TEST(GptqDequant, EveryKernelMatchesTheContract) {
  std::uint64_t seed = 1000;
  for (const Shape& s : AllShapes()) {
    for (Dtype dtype : {Dtype::kF16, Dtype::kBF16, Dtype::kF32}) {
      for (bool act : {false, true}) {
        for (std::int64_t gs : {32, 128, -1}) {
          const std::int64_t K = 160;
          const std::int64_t N = 96;
          Layer l = RandomLayer(s.format, s.bits, K, N, gs, act, dtype, seed++);
          std::vector<std::uint32_t> expected(static_cast<std::size_t>(N * K));
          for (std::int64_t n = 0; n < N; ++n) {
            for (std::int64_t k = 0; k < K; ++k) expected[n * K + k] = Bits(l.Expected(k, n));
          }
          for (Kernel kernel : qd::codec::AvailableKernels()) {
            SCOPED_TRACE(Name(s) + " dtype " + std::to_string(static_cast<int>(dtype)) +
                         (act ? " act" : " sorted") + " gs " + std::to_string(gs) + " " +
                         std::string(qd::codec::KernelName(kernel)));
            ASSERT_EQ(AsBits(Decode(l, kernel)), expected);
          }
        }
      }
    }
  }
}

TEST(GptqDequant, RowSlicesEqualTheFullDecode) {
  std::uint64_t seed = 2000;
  for (const Shape& s : AllShapes()) {
    Layer l = RandomLayer(s.format, s.bits, 96, 96, 32, true, Dtype::kF16, seed++);
    for (Kernel kernel : qd::codec::AvailableKernels()) {
      SCOPED_TRACE(Name(s) + " " + std::string(qd::codec::KernelName(kernel)));
      const std::vector<float> full = Decode(l, kernel);
      const std::pair<std::int64_t, std::int64_t> slices[] = {
          {0, 96}, {0, 1}, {95, 96}, {3, 45}, {8, 40}, {16, 32}, {17, 96}, {40, 40}, {33, 88}};
      for (auto [b, e] : slices) {
        std::vector<float> part(static_cast<std::size_t>((e - b) * 96 + 1), 7.0f);
        qd::codec::GptqDequantizeRows(l.View(), b, e, part.data(), kernel);
        for (std::int64_t i = 0; i < (e - b) * 96; ++i) {
          ASSERT_EQ(Bits(part[i]), Bits(full[b * 96 + i])) << b << ".." << e << " at " << i;
        }
        EXPECT_EQ(part.back(), 7.0f) << "wrote past the slice " << b << ".." << e;
      }
    }
  }
}

// ---- matvec ----------------------------------------------------------------------

// The documented tolerance of a SIMD matvec against the scalar one
// (codecs/gptq_kernels.cc): each side is within (K + 1) u S + K 2^-149 of
// the exact sum, S = sum |w(k) x[k]|, u = 2^-24.
double MatvecBound(std::int64_t K, double abs_sum) {
  return 2.0 * static_cast<double>(K + 1) * 0x1p-24 * abs_sum + 2.0 * K * 0x1p-149;
}

TEST(GptqMatvec, ScalarIsTheInOrderRecurrence) {
  std::uint64_t seed = 3000;
  for (const Shape& s : AllShapes()) {
    Layer l = RandomLayer(s.format, s.bits, 96, 64, 32, true, Dtype::kF16, seed++);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> x(96);
    for (float& v : x) v = normal(rng);
    std::vector<float> y(64, 9.0f);
    qd::codec::GptqMatvec(l.View(), x.data(), y.data(), Kernel::kScalar);
    for (std::int64_t n = 0; n < 64; ++n) {
      float acc = l.Expected(0, n) * x[0];
      for (std::int64_t k = 1; k < 96; ++k) {
        const float term = l.Expected(k, n) * x[k];
        acc = acc + term;
      }
      ASSERT_EQ(Bits(y[n]), Bits(acc)) << Name(s) << " n " << n;
    }
  }
  // Order matters and is k = 0..K-1: w = 1 everywhere; x = 2^24, then 1s:
  // each 1 is lost to rounding (2^24 + 1 ties to even), so y = 2^24 exactly,
  // where a pairwise or reversed sum would give more.
  Layer one = RandomLayer(GptqFormat::kV2, 4, 64, 32, 64, false, Dtype::kF32, 1);
  for (auto& c : one.codes) c = 1;
  for (auto& z : one.zeros) z = 0;
  one.scales = ScaleBytes(Dtype::kF32, std::vector<std::uint32_t>(32, Bits(1.0f)));
  one.Pack();
  std::vector<float> x(64, 1.0f);
  x[0] = 0x1p24f;
  std::vector<float> y(32);
  qd::codec::GptqMatvec(one.View(), x.data(), y.data(), Kernel::kScalar);
  EXPECT_EQ(y[0], 0x1p24f);
  // A negative zero sum stays -0.0 (the first term starts the sum).
  for (float& v : x) v = -0.0f;
  qd::codec::GptqMatvec(one.View(), x.data(), y.data(), Kernel::kScalar);
  EXPECT_EQ(Bits(y[0]), 0x80000000u);
}

TEST(GptqMatvec, EveryKernelWithinTheBound) {
  std::uint64_t seed = 4000;
  for (const Shape& s : AllShapes()) {
    for (Dtype dtype : {Dtype::kF16, Dtype::kBF16, Dtype::kF32}) {
      const std::int64_t K = 192, N = 96;
      Layer l = RandomLayer(s.format, s.bits, K, N, 64, true, dtype, seed++);
      {  // moderate scales keep every product and sum finite
        std::mt19937_64 rng(seed);
        std::vector<std::uint32_t> sc(static_cast<std::size_t>(l.G * N));
        for (auto& v : sc) {
          const float f = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f, -12);
          v = dtype == Dtype::kF32    ? Bits(f)
              : dtype == Dtype::kF16 ? qdtest::NearestHalf(f)
                                     : Bits(f) >> 16;
        }
        l.scales = ScaleBytes(dtype, sc);
      }
      std::mt19937_64 rng(seed * 7);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(static_cast<std::size_t>(K));
      for (float& v : x) v = normal(rng);
      std::vector<float> scalar(static_cast<std::size_t>(N));
      qd::codec::GptqMatvec(l.View(), x.data(), scalar.data(), Kernel::kScalar);
      for (Kernel kernel : qd::codec::AvailableKernels()) {
        SCOPED_TRACE(Name(s) + " " + std::string(qd::codec::KernelName(kernel)));
        std::vector<float> y(static_cast<std::size_t>(N), 5.0f);
        qd::codec::GptqMatvec(l.View(), x.data(), y.data(), kernel);
        for (std::int64_t n = 0; n < N; ++n) {
          double abs_sum = 0.0;
          for (std::int64_t k = 0; k < K; ++k) {
            abs_sum += std::fabs(static_cast<double>(l.Expected(k, n)) * x[k]);
          }
          ASSERT_LE(std::fabs(static_cast<double>(y[n]) - scalar[n]), MatvecBound(K, abs_sum))
              << "n " << n;
          // This AVX2 kernel keeps the scalar order in every lane: exact.
          ASSERT_EQ(Bits(y[n]), Bits(scalar[n])) << "n " << n;
        }
      }
    }
  }
}

}  // namespace
