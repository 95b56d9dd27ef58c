// gptq_kernels.cc: GPTQ layer dequantization and fused matvec, scalar and AVX2.
//
// docs/gptq.md sections 4 to 6. The scalar kernel is the truth and follows
// the page's formulas literally, one element at a time. The AVX2 kernel
// works on strips of 32 columns (four 8-lane halves, one column per 32-bit
// lane): per block of 32 k it loads the b stream words of each column (every
// width and both layouts, all shifts compile-time constants), dequantizes
// with per-strip tables of zero points and widened scales indexed by g_idx,
// and transposes 8 x 8 tiles so that out[n * K + k] rows are written
// contiguously. The matvec keeps the lanes as columns and needs no transpose.
// Continuous 2, 3, 4, 8 and planar 3, 5, 6, 7 bits each have an instantiation;
// planar 2, 4, 8 reuse the continuous one (the words are equal, section 4).
//
// Bit-exactness across kernels:
//  * Dequantization is d = (float)(c - z) (exact, an integer of magnitude
//    <= 256) times s, one binary32 multiply, on every kernel. Scales are
//    widened exactly by float16.h on every kernel, before the SIMD code
//    sees them. So the AVX2 output equals the scalar output bit for bit,
//    provided the floating-point environment is the default (round to
//    nearest even, no FTZ/DAZ), which both kernels then share.
//  * The matvec: the scalar kernel computes, for each n,
//      acc = w(0) * x[0];  acc = acc + w(k) * x[k] for k = 1..K-1
//    with w(k) the dequantized weight: a multiply for w, one multiply and
//    one add per term, no FMA. The AVX2 kernel puts one column in each lane
//    and runs the same recurrence in each lane in the same k order, with
//    separate multiply and add instructions, so it too is bit-identical to
//    the scalar kernel. The header allows SIMD kernels a tolerance; this
//    one does not use it (tests/gptq_pack_test.cc checks exact equality and,
//    for any future kernel that sums in another order, the bound
//      |y_simd - y_scalar| <= 2 (K + 1) 2^-24 sum_k |w(k) x[k]| + 2 K 2^-149).
//  * This file is compiled with -ffp-contract=off (codecs/CMakeLists.txt),
//    and the AVX2 functions target "avx2" without "fma", so no multiply and
//    add can fuse.
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codecs/float16.h"
#include "codecs/gptq.h"

namespace qd::codec {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the packed words are read with memcpy as little-endian");

inline std::uint32_t LoadU32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline std::uint32_t Mask(int bits) { return (1u << bits) - 1u; }

// Planes of the planar layout (docs/gptq.md section 4), low first.
struct Planes {
  int count = 0;
  int width[3] = {0, 0, 0};
  int offset[3] = {0, 0, 0};
};

Planes PlanesOf(int bits) {
  Planes p;
  auto add = [&p](int w) {
    p.offset[p.count] = p.count == 0 ? 0 : p.offset[p.count - 1] + p.width[p.count - 1];
    p.width[p.count++] = w;
  };
  switch (bits) {
    case 2: add(2); break;
    case 3: add(2); add(1); break;
    case 4: add(4); break;
    case 5: add(4); add(1); break;
    case 6: add(4); add(2); break;
    case 7: add(4); add(2); add(1); break;
    default: add(8); break;
  }
  return p;
}

// Field i of a stream whose word j is word(j): section 4's two formulas.
template <typename WordAt>
inline std::uint32_t StreamField(GptqFormat format, int bits, const Planes& planes,
                                 std::int64_t i, WordAt word) {
  if (format != GptqFormat::kPlanar) {
    const std::int64_t s = i * bits;
    const std::int64_t w = s / 32;
    const int o = static_cast<int>(s % 32);
    std::uint32_t v = word(w) >> o;
    if (o + bits > 32) v |= word(w + 1) << (32 - o);
    return v & Mask(bits);
  }
  const std::int64_t block = (i / 32) * bits;
  const int t = static_cast<int>(i % 32);
  std::uint32_t v = 0;
  for (int j = 0; j < planes.count; ++j) {
    const int p = planes.width[j];
    const int per_word = 32 / p;
    const std::uint32_t part =
        (word(block + planes.offset[j] + t / per_word) >> ((t % per_word) * p)) & Mask(p);
    v |= part << planes.offset[j];
  }
  return v;
}

struct LayerAccess {
  const GptqLayerView& l;
  Planes planes;
  std::int64_t zero_words;  // qzeros words per row: N * b / 32

  explicit LayerAccess(const GptqLayerView& layer)
      : l(layer), planes(PlanesOf(layer.bits)), zero_words(layer.out_features / 32 * layer.bits) {}

  std::uint32_t Code(std::int64_t k, std::int64_t n) const {
    const std::uint8_t* base = l.qweight;
    const std::int64_t columns = l.out_features;
    return StreamField(l.format, l.bits, planes, k, [=](std::int64_t j) {
      return LoadU32(base + 4 * (j * columns + n));
    });
  }
  std::int32_t Zero(std::int64_t g, std::int64_t n) const {
    const std::uint8_t* row = l.qzeros + 4 * g * zero_words;
    const std::uint32_t field = StreamField(l.format, l.bits, planes, n, [=](std::int64_t j) {
      return LoadU32(row + 4 * j);
    });
    // v1: field + 1, not masked (section 5).
    return static_cast<std::int32_t>(field) + (l.format == GptqFormat::kV1 ? 1 : 0);
  }
  float Scale(std::int64_t g, std::int64_t n) const {
    const std::int64_t e = g * l.out_features + n;
    switch (l.scales_dtype) {
      case Dtype::kF16: {
        std::uint16_t h;
        std::memcpy(&h, l.scales + 2 * e, 2);
        return F16ToF32(h);
      }
      case Dtype::kBF16: {
        std::uint16_t h;
        std::memcpy(&h, l.scales + 2 * e, 2);
        return BF16ToF32(h);
      }
      default: {
        float f;
        std::memcpy(&f, l.scales + 4 * e, 4);
        return f;
      }
    }
  }
  std::int32_t Group(std::int64_t k) const {
    std::int32_t g;
    std::memcpy(&g, l.g_idx + 4 * k, 4);
    return g;
  }
  float Weight(std::int64_t k, std::int64_t n) const {
    const std::int32_t g = Group(k);
    const std::int32_t c = static_cast<std::int32_t>(Code(k, n));
    const float d = static_cast<float>(c - Zero(g, n));
    return d * Scale(g, n);
  }
};

// ---- scalar kernels: the page, element by element ---------------------------

void DequantizeRowsScalar(const GptqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                          float* out) {
  const LayerAccess a(layer);
  const std::int64_t K = layer.in_features;
  for (std::int64_t n = n_begin; n < n_end; ++n) {
    float* row = out + (n - n_begin) * K;
    for (std::int64_t k = 0; k < K; ++k) row[k] = a.Weight(k, n);
  }
}

void MatvecScalar(const GptqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                  const float* x, float* y) {
  const LayerAccess a(layer);
  const std::int64_t K = layer.in_features;
  for (std::int64_t n = n_begin; n < n_end; ++n) {
    if (K == 0) {
      y[n] = 0.0f;
      continue;
    }
    float acc = a.Weight(0, n) * x[0];
    for (std::int64_t k = 1; k < K; ++k) {
      const float term = a.Weight(k, n) * x[k];
      acc = acc + term;
    }
    y[n] = acc;
  }
}

// ---- AVX2 kernels (no FMA: see the top of the file) ---------------------------
#if defined(__x86_64__)
#define QD_GPTQ_AVX2 __attribute__((target("avx2")))

// Plane widths and offsets of the planar layout as constants.
constexpr int PlaneCount(int b) { return b == 3 || b == 5 || b == 6 ? 2 : b == 7 ? 3 : 1; }
constexpr int PlaneWidth(int b, int j) {
  return j == 0 ? (b == 2 || b == 3 ? 2 : b == 8 ? 8 : 4) : j == 1 ? (b == 3 || b == 5 ? 1 : 2) : 1;
}
constexpr int PlaneOffset(int b, int j) { return j == 0 ? 0 : PlaneOffset(b, j - 1) + PlaneWidth(b, j - 1); }

// Field I (0..31) of a block of 32 fields held in the B words w[0..B-1],
// one stream per lane: section 4's formulas with every shift a constant.
template <int B, bool kPlanar, int I, int J = 0>
QD_GPTQ_AVX2 inline __m256i PlanePart(const __m256i* w) {
  constexpr int p = PlaneWidth(B, J);
  constexpr int per_word = 32 / p;
  constexpr int shift = (I % per_word) * p;
  __m256i v = _mm256_srli_epi32(w[PlaneOffset(B, J) + I / per_word], shift);
  if constexpr (shift + p < 32) v = _mm256_and_si256(v, _mm256_set1_epi32((1 << p) - 1));
  if constexpr (PlaneOffset(B, J) > 0) v = _mm256_slli_epi32(v, PlaneOffset(B, J));
  if constexpr (J + 1 < PlaneCount(B)) {
    return _mm256_or_si256(v, PlanePart<B, kPlanar, I, J + 1>(w));
  } else {
    return v;
  }
}

template <int B, bool kPlanar, int I>
QD_GPTQ_AVX2 inline __m256i FieldOf(const __m256i* w) {
  if constexpr (kPlanar) {
    return PlanePart<B, true, I>(w);
  } else {
    constexpr int s = I * B;
    constexpr int word = s / 32;
    constexpr int o = s % 32;
    __m256i v = _mm256_srli_epi32(w[word], o);
    if constexpr (o + B > 32) v = _mm256_or_si256(v, _mm256_slli_epi32(w[word + 1], 32 - o));
    if constexpr (o + B != 32) v = _mm256_and_si256(v, _mm256_set1_epi32((1 << B) - 1));
    return v;
  }
}

// Rows of an 8 x 8 float tile become its columns.
QD_GPTQ_AVX2 inline void Transpose8x8(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
  const __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
  const __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
  const __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
  const __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xee);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, 0xee);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Zero points and widened scales of columns [n0, n0 + width) for every
// group: zeros[g * width + c], scales[g * width + c].
void FillStripTables(const LayerAccess& a, std::int64_t n0, int width,
                     std::vector<std::int32_t>* zeros, std::vector<float>* scales) {
  const std::int64_t G = a.l.groups;
  zeros->resize(static_cast<std::size_t>(G * width));
  scales->resize(static_cast<std::size_t>(G * width));
  for (std::int64_t g = 0; g < G; ++g) {
    for (int c = 0; c < width; ++c) {
      (*zeros)[g * width + c] = a.Zero(g, n0 + c);
      (*scales)[g * width + c] = a.Scale(g, n0 + c);
    }
  }
}

// One dequantized weight vector: field I of block words w, lanes = columns
// of one 8-lane half h of the strip.
template <int B, bool kPlanar, int I, int kHalves>
QD_GPTQ_AVX2 inline __m256 WeightOf(const __m256i* w, const std::int32_t* groups,
                                    const std::int32_t* zeros, const float* scales, int h) {
  const std::int64_t at = static_cast<std::int64_t>(groups[I]) * (8 * kHalves) + 8 * h;
  const __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zeros + at));
  const __m256 s = _mm256_loadu_ps(scales + at);
  const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(FieldOf<B, kPlanar, I>(w), z));
  return _mm256_mul_ps(d, s);
}

// Eight k (8S .. 8S+7 of the block) for the 8 columns of half h, transposed
// and stored to out rows (row stride K).
template <int B, bool kPlanar, int S, int kHalves, std::size_t... T>
QD_GPTQ_AVX2 inline void DequantizeTile(const __m256i* w, const std::int32_t* groups,
                                        const std::int32_t* zeros, const float* scales, int h,
                                        float* out, std::int64_t K, std::index_sequence<T...>) {
  __m256 r[8] = {WeightOf<B, kPlanar, 8 * S + static_cast<int>(T), kHalves>(w, groups, zeros,
                                                                             scales, h)...};
  Transpose8x8(r);
  ((_mm256_storeu_ps(out + static_cast<std::int64_t>(T) * K + 8 * S, r[T])), ...);
}

constexpr int kDequantHalves = 4;  // strips of 32 columns: 128 bytes of each word row
constexpr std::int64_t kPrefetchBlocks = 4;

// Columns [n0, n0 + 8 * kHalves) of rows' output; out points at column n0's
// row. Every block of 32 k: B words per column, four 8 x 8 tiles per half.
template <int B, bool kPlanar, int kHalves>
QD_GPTQ_AVX2 void DequantizeStripAvx2(const GptqLayerView& layer, std::int64_t n0,
                                      const std::int32_t* groups, const std::int32_t* zeros,
                                      const float* scales, float* out) {
  const std::int64_t K = layer.in_features;
  const std::int64_t N = layer.out_features;
  constexpr auto kEight = std::make_index_sequence<8>();
  for (std::int64_t q = 0; q < K / 32; ++q) {
    const std::uint8_t* base = layer.qweight + 4 * (q * B * N + n0);
    // The rows are N words apart, a page or more for large layers, where the
    // hardware prefetcher stops: fetch a few blocks ahead by hand.
    if (q + kPrefetchBlocks < K / 32) {
      const std::uint8_t* ahead = base + 4 * kPrefetchBlocks * B * N;
      for (int j = 0; j < B; ++j) {
        for (int h = 0; h < kHalves; h += 2) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + 4 * (j * N + 8 * h)), _MM_HINT_T0);
        }
      }
    }
    for (int h = 0; h < kHalves; ++h) {
      __m256i w[B];
      for (int j = 0; j < B; ++j) {
        w[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 4 * (j * N + 8 * h)));
      }
      const std::int32_t* g = groups + 32 * q;
      float* o = out + 8 * h * K + 32 * q;
      DequantizeTile<B, kPlanar, 0, kHalves>(w, g, zeros, scales, h, o, K, kEight);
      DequantizeTile<B, kPlanar, 1, kHalves>(w, g, zeros, scales, h, o, K, kEight);
      DequantizeTile<B, kPlanar, 2, kHalves>(w, g, zeros, scales, h, o, K, kEight);
      DequantizeTile<B, kPlanar, 3, kHalves>(w, g, zeros, scales, h, o, K, kEight);
    }
  }
}


template <int B, bool kPlanar>
void DequantizeRowsAvx2(const GptqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                        float* out) {
  const LayerAccess a(layer);
  const std::int64_t K = layer.in_features;
  std::vector<std::int32_t> groups(static_cast<std::size_t>(K));
  std::memcpy(groups.data(), layer.g_idx, groups.size() * 4);
  std::vector<std::int32_t> zeros;
  std::vector<float> scales;
  constexpr int kWidth = 8 * kDequantHalves;
  std::int64_t n0 = n_begin;
  for (; n0 + kWidth <= n_end; n0 += kWidth) {
    FillStripTables(a, n0, kWidth, &zeros, &scales);
    DequantizeStripAvx2<B, kPlanar, kDequantHalves>(layer, n0, groups.data(), zeros.data(),
                                                     scales.data(), out + (n0 - n_begin) * K);
  }
  for (; n0 + 8 <= n_end; n0 += 8) {
    FillStripTables(a, n0, 8, &zeros, &scales);
    DequantizeStripAvx2<B, kPlanar, 1>(layer, n0, groups.data(), zeros.data(), scales.data(),
                                       out + (n0 - n_begin) * K);
  }
  DequantizeRowsScalar(layer, n0, n_end, out + (n0 - n_begin) * K);
}

// acc[h] += w(k) * x[k] for field I of the block, every half h.
template <int B, bool kPlanar, int I, int kHalves>
QD_GPTQ_AVX2 inline void MatvecTerm(const __m256i (*w)[B], const std::int32_t* groups,
                                    const std::int32_t* zeros, const float* scales,
                                    const float* x, __m256* acc) {
  const __m256 xi = _mm256_set1_ps(x[I]);
  for (int h = 0; h < kHalves; ++h) {
    const __m256 wi = WeightOf<B, kPlanar, I, kHalves>(w[h], groups, zeros, scales, h);
    acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(wi, xi));
  }
}

// y for columns [n0, n0 + 8 * kHalves): lane = column, the scalar
// recurrence in every lane (acc starts at -0.0, the exact identity of +).
template <int B, bool kPlanar, int kHalves, std::size_t... I>
QD_GPTQ_AVX2 void MatvecStripAvx2(const GptqLayerView& layer, std::int64_t n0,
                                  const std::int32_t* groups, const std::int32_t* zeros,
                                  const float* scales, const float* x, float* y,
                                  std::index_sequence<I...>) {
  const std::int64_t K = layer.in_features;
  const std::int64_t N = layer.out_features;
  __m256 acc[kHalves];
  for (int h = 0; h < kHalves; ++h) acc[h] = _mm256_set1_ps(-0.0f);
  for (std::int64_t q = 0; q < K / 32; ++q) {
    const std::uint8_t* base = layer.qweight + 4 * (q * B * N + n0);
    __m256i w[kHalves][B];
    for (int h = 0; h < kHalves; ++h) {
      for (int j = 0; j < B; ++j) {
        w[h][j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 4 * (j * N + 8 * h)));
      }
    }
    const std::int32_t* g = groups + 32 * q;
    const float* xq = x + 32 * q;
    (MatvecTerm<B, kPlanar, static_cast<int>(I), kHalves>(w, g, zeros, scales, xq, acc), ...);
  }
  for (int h = 0; h < kHalves; ++h) _mm256_storeu_ps(y + n0 + 8 * h, acc[h]);
}

constexpr int kMatvecHalves = 4;  // strips of 32 columns: four add chains

template <int B, bool kPlanar>
void MatvecAvx2(const GptqLayerView& layer, const float* x, float* y) {
  const LayerAccess a(layer);
  const std::int64_t K = layer.in_features;
  const std::int64_t N = layer.out_features;
  std::vector<std::int32_t> groups(static_cast<std::size_t>(K));
  std::memcpy(groups.data(), layer.g_idx, groups.size() * 4);
  std::vector<std::int32_t> zeros;
  std::vector<float> scales;
  constexpr auto k32 = std::make_index_sequence<32>();
  constexpr int kWidth = 8 * kMatvecHalves;
  std::int64_t n0 = 0;
  for (; n0 + kWidth <= N; n0 += kWidth) {
    FillStripTables(a, n0, kWidth, &zeros, &scales);
    MatvecStripAvx2<B, kPlanar, kMatvecHalves>(layer, n0, groups.data(), zeros.data(),
                                               scales.data(), x, y, k32);
  }
  MatvecScalar(layer, n0, N, x, y);  // none left: N is a multiple of 32
}

// The instantiation for a layer: planar 2, 4 and 8 bits are the continuous
// words (section 4), so only planar 3, 5, 6 and 7 need their own.
template <template <int, bool> class Op, typename... Args>
bool DispatchAvx2(const GptqLayerView& layer, Args&&... args) {
  const bool planar = layer.format == GptqFormat::kPlanar;
  switch (layer.bits) {
    case 2: Op<2, false>::Run(args...); return true;
    case 3:
      if (planar) Op<3, true>::Run(args...); else Op<3, false>::Run(args...);
      return true;
    case 4: Op<4, false>::Run(args...); return true;
    case 5: if (planar) { Op<5, true>::Run(args...); return true; } return false;
    case 6: if (planar) { Op<6, true>::Run(args...); return true; } return false;
    case 7: if (planar) { Op<7, true>::Run(args...); return true; } return false;
    case 8: Op<8, false>::Run(args...); return true;
    default: return false;
  }
}

template <int B, bool kPlanar>
struct DequantizeOp {
  static void Run(const GptqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                  float* out) {
    DequantizeRowsAvx2<B, kPlanar>(layer, n_begin, n_end, out);
  }
};

template <int B, bool kPlanar>
struct MatvecOp {
  static void Run(const GptqLayerView& layer, const float* x, float* y) {
    MatvecAvx2<B, kPlanar>(layer, x, y);
  }
};
#endif  // __x86_64__

}  // namespace

void GptqDequantizeRows(const GptqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                        float* out, Kernel kernel) {
  if (n_end <= n_begin || layer.in_features <= 0) return;
#if defined(__x86_64__)
  if (HasAvx2Code(kernel) && DispatchAvx2<DequantizeOp>(layer, layer, n_begin, n_end, out)) return;
#endif
  DequantizeRowsScalar(layer, n_begin, n_end, out);
}

void GptqDequantize(const GptqLayerView& layer, float* out, Kernel kernel) {
  GptqDequantizeRows(layer, 0, layer.out_features, out, kernel);
}

void GptqMatvec(const GptqLayerView& layer, const float* x, float* y, Kernel kernel) {
#if defined(__x86_64__)
  if (HasAvx2Code(kernel) && layer.in_features > 0 &&
      DispatchAvx2<MatvecOp>(layer, layer, x, y)) {
    return;
  }
#endif
  MatvecScalar(layer, 0, layer.out_features, x, y);
}

}  // namespace qd::codec
