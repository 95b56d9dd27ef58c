// gptq_pack_test_support.h: what the GPTQ packer and kernel tests share
// (gptq_pack_test.cc, gptq_kernels_test.cc): the reference packer that sets
// stream bits one at a time from docs/gptq.md's bit positions, layers of
// chosen codes, zeros and scales, the shapes swept, and decoding through a
// kernel. Expected values come from the page, never from the code under test.
#ifndef QUANTDIFF_TESTS_GPTQ_PACK_TEST_SUPPORT_H_
#define QUANTDIFF_TESTS_GPTQ_PACK_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "property_tests/gen/half.h"

namespace qd_gptq_test {

using qd::codec::Dtype;
using qd::codec::GptqFormat;
using qd::codec::GptqLayerView;
using qd::codec::GptqPackError;
using qd::codec::GptqPacked;
using qd::codec::Kernel;

inline std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }

struct Plane {
  int width;
  int offset;
};

// docs/gptq.md section 4, copied from the table by hand.
inline std::vector<Plane> PlanesOf(int bits) {
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

inline BitPos PositionOf(bool planar, int bits, std::int64_t i, int u) {
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
inline std::vector<std::uint32_t> PackStream(bool planar, int bits, const std::vector<std::uint32_t>& f) {
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

inline int ZeroMin(GptqFormat f) { return f == GptqFormat::kV1 ? 1 : 0; }
inline int ZeroMax(GptqFormat f, int bits) { return f == GptqFormat::kV1 ? (1 << bits) : (1 << bits) - 1; }

inline std::vector<std::uint8_t> ScaleBytes(Dtype dtype, const std::vector<std::uint32_t>& patterns) {
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
inline std::uint32_t RandomScale(Dtype dtype, std::mt19937_64& rng) {
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

inline Layer RandomLayer(GptqFormat format, int bits, std::int64_t K, std::int64_t N, std::int64_t gs,
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

inline std::vector<Shape> AllShapes() {
  std::vector<Shape> s;
  for (int b : {2, 3, 4, 8}) {
    s.push_back({GptqFormat::kV1, b});
    s.push_back({GptqFormat::kV2, b});
  }
  for (int b = 2; b <= 8; ++b) s.push_back({GptqFormat::kPlanar, b});
  return s;
}

inline std::string Name(const Shape& s) {
  return std::string(qd::codec::GptqFormatName(s.format)) + " b" + std::to_string(s.bits);
}

inline std::vector<std::int32_t> Words(std::initializer_list<std::uint32_t> w) {
  std::vector<std::int32_t> out;
  for (std::uint32_t x : w) out.push_back(static_cast<std::int32_t>(x));
  return out;
}

// ---- conversions and decoding ----------------------------------------------------

inline GptqPacked Convert(const Layer& l, GptqFormat target) {
  GptqPacked p;
  GptqPackError e;
  EXPECT_TRUE(qd::codec::GptqConvert(l.View(), target, &p, &e)) << e.message;
  return p;
}

inline Layer WithWords(Layer l, GptqFormat format, const GptqPacked& p) {
  l.format = format;
  l.qweight = p.qweight;
  l.qzeros = p.qzeros;
  return l;
}

inline std::vector<float> Decode(const Layer& l, Kernel kernel = Kernel::kScalar) {
  std::vector<float> out(static_cast<std::size_t>(l.N * l.K), 1.5f);
  qd::codec::GptqDequantize(l.View(), out.data(), kernel);
  return out;
}

inline std::vector<std::uint32_t> AsBits(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = Bits(v[i]);
  return b;
}

}  // namespace qd_gptq_test

#endif  // QUANTDIFF_TESTS_GPTQ_PACK_TEST_SUPPORT_H_
