// awq_pack.cc: where each AWQ code and zero lives (docs/awq.md section 4),
// the dequantization kernels (section 6: scalar, and AVX2 for GEMM, GEMV
// and GEMV_FAST, chosen at run time as codecs/kernels.h says) and the encoder (section 8).
// Built with -ffp-contract=off: section 6 is one multiply (and for GEMV_FAST
// one add), never a fused multiply-add.
#include <algorithm>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codecs/awq.h"
#include "codecs/float16.h"

namespace qd::codec {
namespace {

// GEMM: nibble i of a word holds column 8c + [0, 2, 4, 6, 1, 3, 5, 7][i], so
// column 8c + j is in nibble kNibbleOfColumn[j] (the inverse order).
constexpr int kNibbleOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::uint32_t U32At(const std::uint8_t* base, std::uint64_t i) {
  const std::uint8_t* p = base + 4 * i;
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

std::uint16_t U16At(const std::uint8_t* base, std::uint64_t i) {
  const std::uint8_t* p = base + 2 * i;
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

// Where GEMV_FAST keeps code (k, n): the I16 word index and the nibble.
struct Slot {
  std::uint64_t word;
  int nibble;
};
Slot FastSlot(std::uint64_t k, std::uint64_t n, std::uint64_t K) {
  // In-block shuffle: k's place p in its 32-block, from k % 32 = 8c + 2a + d.
  const std::uint64_t in_block = k % 32;
  const std::uint64_t c = in_block / 8, a = (in_block % 8) / 2, d = in_block % 2;
  const std::uint64_t placed = (k / 32) * 32 + a * 8 + d * 4 + c;
  // Interleave of four rows over 64-code chunks: t = (n % 4) * 64 + place.
  const std::uint64_t t = (n % 4) * 64 + placed % 64;
  return {(n / 4) * K + (placed / 64) * 64 + t / 4, static_cast<int>(t % 4)};
}

// code(k, n) of docs/awq.md section 4.
std::int32_t CodeAt(const AwqLayerView& v, std::uint64_t k, std::uint64_t n) {
  const std::uint64_t K = static_cast<std::uint64_t>(v.in_features);
  const std::uint64_t N = static_cast<std::uint64_t>(v.out_features);
  std::uint32_t word = 0;
  switch (v.format) {
    case AwqFormat::kGemm:
      word = U32At(v.qweight, k * (N / 8) + n / 8) >> (4 * kNibbleOfColumn[n % 8]);
      break;
    case AwqFormat::kGemv:
      word = U32At(v.qweight, n * (K / 8) + k / 8) >> (4 * (k % 8));
      break;
    case AwqFormat::kGemvFast: {
      const Slot s = FastSlot(k, n, K);
      word = static_cast<std::uint32_t>(U16At(v.qweight, s.word)) >> (4 * s.nibble);
      break;
    }
  }
  return static_cast<std::int32_t>(word & 0xFu);
}

float ScaleAt(const AwqLayerView& v, std::uint64_t i) {
  switch (v.scales_dtype) {
    case Dtype::kF32: {
      const std::uint32_t bits = U32At(v.scales, i);
      float f;
      static_assert(sizeof f == sizeof bits);
      __builtin_memcpy(&f, &bits, sizeof f);
      return f;
    }
    case Dtype::kBF16: return BF16ToF32(U16At(v.scales, i));
    default: return F16ToF32(U16At(v.scales, i));
  }
}

}  // namespace

std::int64_t AwqZerosWidth(std::int64_t in_features, std::int64_t group_size) {
  std::int64_t multiplier = 0;
  if (group_size >= 128) multiplier = 1;
  if (group_size == 64) multiplier = 2;
  if (group_size == 32) multiplier = 4;
  if (multiplier == 0) return 0;
  const std::int64_t base = (in_features / group_size + 7) / 8;
  return (base + multiplier - 1) / multiplier * multiplier;
}

void AwqUnpack(const AwqLayerView& v, std::vector<std::int32_t>* codes,
               std::vector<std::int32_t>* zeros) {
  const std::uint64_t K = static_cast<std::uint64_t>(v.in_features);
  const std::uint64_t N = static_cast<std::uint64_t>(v.out_features);
  const std::uint64_t G = static_cast<std::uint64_t>(v.groups);
  const std::uint64_t Z = static_cast<std::uint64_t>(v.zeros_width);
  codes->assign(K * N, 0);
  zeros->assign(v.format == AwqFormat::kGemvFast ? 0 : G * N, 0);
  for (std::uint64_t k = 0; k < K; ++k) {
    for (std::uint64_t n = 0; n < N; ++n) {
      (*codes)[k * N + n] = CodeAt(v, k, n);
    }
  }
  if (v.format == AwqFormat::kGemvFast) return;
  for (std::uint64_t g = 0; g < G; ++g) {
    for (std::uint64_t n = 0; n < N; ++n) {
      const std::uint32_t word = v.format == AwqFormat::kGemm
                                     ? U32At(v.qzeros, g * (N / 8) + n / 8) >> (4 * kNibbleOfColumn[n % 8])
                                     : U32At(v.qzeros, n * Z + g / 8) >> (4 * (g % 8));
      (*zeros)[g * N + n] = static_cast<std::int32_t>(word & 0xFu);
    }
  }
}

namespace {

// Row n's per-group terms (section 6): GEMM, GEMV scale and integer zero;
// GEMV_FAST scale and scaled zero.
void GroupTerms(const AwqLayerView& v, std::uint64_t n, float* scale, std::int32_t* zero, float* zero_term) {
  const std::uint64_t N = static_cast<std::uint64_t>(v.out_features);
  const std::uint64_t G = static_cast<std::uint64_t>(v.groups);
  const std::uint64_t Z = static_cast<std::uint64_t>(v.zeros_width);
  for (std::uint64_t g = 0; g < G; ++g) {
    switch (v.format) {
      case AwqFormat::kGemm:
        scale[g] = ScaleAt(v, g * N + n);
        zero[g] = static_cast<std::int32_t>(
            (U32At(v.qzeros, g * (N / 8) + n / 8) >> (4 * kNibbleOfColumn[n % 8])) & 0xFu);
        break;
      case AwqFormat::kGemv:
        scale[g] = ScaleAt(v, n * 8 * Z + g);
        zero[g] = static_cast<std::int32_t>((U32At(v.qzeros, n * Z + g / 8) >> (4 * (g % 8))) & 0xFu);
        break;
      case AwqFormat::kGemvFast:
        scale[g] = F16ToF32(U16At(v.scales, g * N + n));
        zero_term[g] = F16ToF32(U16At(v.qzeros, g * N + n));
        break;
    }
  }
}

// Section 6 for row n, inputs [k_begin, k_end), into dst[k].
void ScalarRow(const AwqLayerView& v, std::uint64_t n, std::uint64_t k_begin, std::uint64_t k_end,
               const float* scale, const std::int32_t* zero, const float* zero_term, float* dst) {
  const std::uint64_t gs = static_cast<std::uint64_t>(v.group_size);
  for (std::uint64_t k = k_begin; k < k_end; ++k) {
    const std::uint64_t g = k / gs;
    const std::int32_t c = CodeAt(v, k, n);
    if (v.format == AwqFormat::kGemvFast) {
      // fl32(fl32(c * s) + sz): the product is exact, one rounding on the add.
      const float product = static_cast<float>(c) * scale[g];
      dst[k] = product + zero_term[g];
    } else {
      dst[k] = static_cast<float>(c - zero[g]) * scale[g];
    }
  }
}

#if defined(__x86_64__)
// GEMM with AVX2 (target "avx2" without "fma": no multiply can fuse). The
// words (k .. k+7, c) of one word column go in the eight lanes of a vector;
// each row n of the column (n / 8 == c) takes its nibble from every lane,
// so out[n][k .. k+7] is one store: (float)(code - zero) is exact and the one
// multiply by the exactly widened scale rounds as the scalar multiply does.
// Bit for bit the scalar kernel's output in the default floating-point
// environment. Needs the group size to be a multiple of 8 (one group per
// lane block); the K % 8 tail runs ScalarRow.
__attribute__((target("avx2"))) void GemmRowsAvx2(const AwqLayerView& v, std::int64_t n_begin,
                                                   std::int64_t n_end, const std::vector<float>& scales,
                                                   const std::vector<std::int32_t>& zeros, float* out) {
  const std::uint64_t K = static_cast<std::uint64_t>(v.in_features);
  const std::uint64_t N = static_cast<std::uint64_t>(v.out_features);
  const std::uint64_t G = static_cast<std::uint64_t>(v.groups);
  const std::uint64_t gs = static_cast<std::uint64_t>(v.group_size);
  const std::uint64_t words_per_k = N / 8;
  const std::uint64_t k_vector = K - K % 8;
  const __m256i nibble = _mm256_set1_epi32(0xF);
  const std::uint64_t first = static_cast<std::uint64_t>(n_begin), last = static_cast<std::uint64_t>(n_end);
  for (std::uint64_t c = first / 8; c * 8 < last; ++c) {
    const std::uint64_t n0 = std::max(first, 8 * c), n1 = std::min(last, 8 * c + 8);
    for (std::uint64_t k = 0; k < k_vector; k += 8) {
      const std::uint8_t* w = v.qweight + 4 * (k * words_per_k + c);
      const std::uint64_t stride = 4 * words_per_k;
      const __m256i words = _mm256_setr_epi32(
          static_cast<int>(U32At(w, 0)), static_cast<int>(U32At(w + stride, 0)),
          static_cast<int>(U32At(w + 2 * stride, 0)), static_cast<int>(U32At(w + 3 * stride, 0)),
          static_cast<int>(U32At(w + 4 * stride, 0)), static_cast<int>(U32At(w + 5 * stride, 0)),
          static_cast<int>(U32At(w + 6 * stride, 0)), static_cast<int>(U32At(w + 7 * stride, 0)));
      const std::uint64_t g = k / gs;
      for (std::uint64_t n = n0; n < n1; ++n) {
        const std::uint64_t r = n - first;
        const __m128i shift = _mm_cvtsi32_si128(4 * kNibbleOfColumn[n % 8]);
        const __m256i codes = _mm256_and_si256(_mm256_srl_epi32(words, shift), nibble);
        const __m256i centred = _mm256_sub_epi32(codes, _mm256_set1_epi32(zeros[r * G + g]));
        const __m256 values = _mm256_mul_ps(_mm256_cvtepi32_ps(centred), _mm256_set1_ps(scales[r * G + g]));
        _mm256_storeu_ps(out + r * K + k, values);
      }
    }
  }
  for (std::uint64_t n = first; k_vector < K && n < last; ++n) {
    const std::uint64_t r = n - first;
    ScalarRow(v, n, k_vector, K, scales.data() + r * G, zeros.data() + r * G, nullptr, out + r * K);
  }
}

// Where eight consecutive inputs k0 .. k0+7 of a row (k0 rising from call
// to call) take their group terms: one group while the eight share it, else
// each lane its own. GEMV and GEMV_FAST group sizes are 32, 64 or at least
// 128 (AWQ-005) but need not be multiples of 8 (K = 2368, gs = 148), so a
// lane block may straddle two groups.
class LaneGroups {
 public:
  explicit LaneGroups(std::uint64_t group_size) : gs_(group_size), end_(group_size) {}
  // Moves to the block at k0; true when its eight inputs are in Group().
  bool OneGroup(std::uint64_t k0) {
    while (k0 >= end_) {
      ++group_;
      end_ += gs_;
    }
    return k0 + 8 <= end_;
  }
  std::uint64_t Group() const { return group_; }
  std::uint64_t GroupOf(std::uint64_t k) const { return k / gs_; }

 private:
  std::uint64_t gs_;
  std::uint64_t group_ = 0;
  std::uint64_t end_;
};

__attribute__((target("avx2"))) __m256 FloatLanes(const LaneGroups& lanes, bool one_group, std::uint64_t k0,
                                                   const float* per_group) {
  if (one_group) return _mm256_set1_ps(per_group[lanes.Group()]);
  alignas(32) float lane[8];
  for (std::uint64_t i = 0; i < 8; ++i) lane[i] = per_group[lanes.GroupOf(k0 + i)];
  return _mm256_load_ps(lane);
}

__attribute__((target("avx2"))) __m256i IntLanes(const LaneGroups& lanes, bool one_group, std::uint64_t k0,
                                                  const std::int32_t* per_group) {
  if (one_group) return _mm256_set1_epi32(per_group[lanes.Group()]);
  alignas(32) std::int32_t lane[8];
  for (std::uint64_t i = 0; i < 8; ++i) lane[i] = per_group[lanes.GroupOf(k0 + i)];
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(lane));
}

// GEMV row n with AVX2: word (n, j) holds inputs 8j .. 8j+7 in nibbles 0..7,
// so one broadcast word shifted by 0, 4, .., 28 is eight codes in k order;
// then the exact (float)(code - zero) and one binary32 multiply, as
// ScalarRow (no FMA in this target). K is a multiple of 8 (K = 8 *
// qweight.shape[1]).
__attribute__((target("avx2"))) void GemvRowAvx2(const AwqLayerView& v, std::uint64_t n, const float* scale,
                                                  const std::int32_t* zero, float* dst) {
  const std::uint64_t K = static_cast<std::uint64_t>(v.in_features);
  const std::uint8_t* words = v.qweight + 4 * n * (K / 8);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i nibble = _mm256_set1_epi32(0xF);
  LaneGroups groups(static_cast<std::uint64_t>(v.group_size));
  for (std::uint64_t k = 0; k < K; k += 8) {
    const __m256i word = _mm256_set1_epi32(static_cast<int>(U32At(words, k / 8)));
    const __m256i codes = _mm256_and_si256(_mm256_srlv_epi32(word, shifts), nibble);
    const bool one_group = groups.OneGroup(k);
    const __m256i centred = _mm256_sub_epi32(codes, IntLanes(groups, one_group, k, zero));
    _mm256_storeu_ps(dst + k, _mm256_mul_ps(_mm256_cvtepi32_ps(centred), FloatLanes(groups, one_group, k, scale)));
  }
}

// GEMV_FAST row n with AVX2. Section 4's shuffle and interleave put inputs
// 32b + 8c + j (c in 0..3, j in 0..7) of row n in nibble c of I16 word
// (n / 4) * K + 64 * (b / 2) + 16 * (n % 4) + 8 * (b % 2) + j: eight words
// widened to eight lanes give, shifted by 4c, the eight codes of inputs
// 32b + 8c .. +7 in k order. Then fl32(code * scale), exact, and one
// rounded add of the scaled zero, two instructions as ScalarRow's two
// operations (no FMA in this target). K is a multiple of 64 (AWQ-002).
__attribute__((target("avx2"))) void GemvFastRowAvx2(const AwqLayerView& v, std::uint64_t n, const float* scale,
                                                      const float* zero_term, float* dst) {
  const std::uint64_t K = static_cast<std::uint64_t>(v.in_features);
  const std::uint8_t* row_words = v.qweight + 2 * ((n / 4) * K + 16 * (n % 4));
  const __m256i nibble = _mm256_set1_epi32(0xF);
  LaneGroups groups(static_cast<std::uint64_t>(v.group_size));
  for (std::uint64_t b = 0; b < K / 32; ++b) {
    const __m128i eight = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row_words + 2 * (64 * (b / 2) + 8 * (b % 2))));
    const __m256i words = _mm256_cvtepu16_epi32(eight);
    for (int c = 0; c < 4; ++c) {
      const std::uint64_t k = 32 * b + 8 * static_cast<std::uint64_t>(c);
      const __m256i codes = _mm256_and_si256(_mm256_srl_epi32(words, _mm_cvtsi32_si128(4 * c)), nibble);
      const bool one_group = groups.OneGroup(k);
      const __m256 product = _mm256_mul_ps(_mm256_cvtepi32_ps(codes), FloatLanes(groups, one_group, k, scale));
      _mm256_storeu_ps(dst + k, _mm256_add_ps(product, FloatLanes(groups, one_group, k, zero_term)));
    }
  }
}
#endif

}  // namespace

void AwqDequantizeRows(const AwqLayerView& v, std::int64_t n_begin, std::int64_t n_end, float* out,
                       Kernel kernel) {
  const std::uint64_t K = static_cast<std::uint64_t>(v.in_features);
  const std::uint64_t G = static_cast<std::uint64_t>(v.groups);
  // GEMV and GEMV_FAST run a row at a time, with AVX2 when KERNEL asks for it
  // (their kernels take whole lane blocks: K % 8 == 0 and K % 64 == 0 in a
  // checked layer, section 4 and AWQ-002).
  [[maybe_unused]] const bool avx2_rows =
      HasAvx2Code(kernel) && ((v.format == AwqFormat::kGemv && K % 8 == 0) ||
                              (v.format == AwqFormat::kGemvFast && K % 64 == 0));
#if defined(__x86_64__)
  if (HasAvx2Code(kernel) && v.format == AwqFormat::kGemm && v.group_size % 8 == 0 && n_end > n_begin) {
    const std::uint64_t rows = static_cast<std::uint64_t>(n_end - n_begin);
    std::vector<float> scales(rows * G), unused(G);
    std::vector<std::int32_t> zeros(rows * G);
    for (std::uint64_t r = 0; r < rows; ++r) {
      GroupTerms(v, static_cast<std::uint64_t>(n_begin) + r, scales.data() + r * G, zeros.data() + r * G,
                 unused.data());
    }
    GemmRowsAvx2(v, n_begin, n_end, scales, zeros, out);
    return;
  }
#endif
  std::vector<float> scale(G), zero_term(G);  // per group of the row
  std::vector<std::int32_t> zero(G);
  for (std::int64_t row = n_begin; row < n_end; ++row) {
    const std::uint64_t n = static_cast<std::uint64_t>(row);
    float* dst = out + (n - static_cast<std::uint64_t>(n_begin)) * K;
    GroupTerms(v, n, scale.data(), zero.data(), zero_term.data());
#if defined(__x86_64__)
    if (avx2_rows) {
      if (v.format == AwqFormat::kGemv) {
        GemvRowAvx2(v, n, scale.data(), zero.data(), dst);
      } else {
        GemvFastRowAvx2(v, n, scale.data(), zero_term.data(), dst);
      }
      continue;
    }
#endif
    ScalarRow(v, n, 0, K, scale.data(), zero.data(), zero_term.data(), dst);
  }
}

bool AwqEncode(AwqFormat format, std::int64_t in_features, std::int64_t out_features,
               std::int64_t group_size, const std::vector<std::int32_t>& codes,
               const std::vector<std::int32_t>& zeros, AwqPacked* out, std::string* error) {
  const std::int64_t K = in_features, N = out_features;
  const std::int64_t gs = group_size == -1 ? K : group_size;
  const bool fast = format == AwqFormat::kGemvFast;
  if (K < 0 || N < 0 || gs <= 0 || K % gs != 0) {
    *error = "in_features must be a non-negative multiple of the group size";
    return false;
  }
  const std::int64_t G = K / gs;
  const std::int64_t Z = format == AwqFormat::kGemm ? 0 : AwqZerosWidth(K, gs);
  if ((format != AwqFormat::kGemm && Z == 0 && G != 0) ||
      (format == AwqFormat::kGemm && N % 8 != 0) || (format == AwqFormat::kGemv && K % 8 != 0) ||
      (fast && (N % 4 != 0 || K % 64 != 0))) {
    *error = "the shape does not fit format " + std::string(AwqFormatName(format));
    return false;
  }
  if (codes.size() != static_cast<std::size_t>(K * N) ||
      (!fast && zeros.size() != static_cast<std::size_t>(G * N))) {
    *error = "codes must hold K * N values and zeros G * N";
    return false;
  }
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] < 0 || codes[i] > 15) {
      *error = "code (" + std::to_string(i / N) + ", " + std::to_string(i % N) + ") is outside 0..15";
      return false;
    }
  }
  for (std::size_t i = 0; i < (fast ? 0 : zeros.size()); ++i) {
    if (zeros[i] < 0 || zeros[i] > 15) {
      *error = "zero (" + std::to_string(i / N) + ", " + std::to_string(i % N) + ") is outside 0..15";
      return false;
    }
  }
  std::vector<std::uint32_t> qw, qz;
  switch (format) {
    case AwqFormat::kGemm:
      out->qweight_shape = {K, N / 8};
      out->qzeros_shape = {G, N / 8};
      break;
    case AwqFormat::kGemv:
      out->qweight_shape = {N, K / 8};
      out->qzeros_shape = {N, Z};
      break;
    case AwqFormat::kGemvFast:
      out->qweight_shape = {N / 4, K};
      out->qzeros_shape = {};
      break;
  }
  qw.assign(static_cast<std::size_t>(out->qweight_shape[0] * out->qweight_shape[1]), 0);
  if (!fast) qz.assign(static_cast<std::size_t>(out->qzeros_shape[0] * out->qzeros_shape[1]), 0);
  for (std::int64_t k = 0; k < K; ++k) {
    for (std::int64_t n = 0; n < N; ++n) {
      const std::uint32_t v = static_cast<std::uint32_t>(codes[static_cast<std::size_t>(k * N + n)]);
      switch (format) {
        case AwqFormat::kGemm: qw[k * (N / 8) + n / 8] |= v << (4 * kNibbleOfColumn[n % 8]); break;
        case AwqFormat::kGemv: qw[n * (K / 8) + k / 8] |= v << (4 * (k % 8)); break;
        case AwqFormat::kGemvFast: {
          const Slot s = FastSlot(static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n),
                                  static_cast<std::uint64_t>(K));
          qw[s.word] |= v << (4 * s.nibble);
          break;
        }
      }
    }
  }
  for (std::int64_t g = 0; g < (fast ? 0 : G); ++g) {
    for (std::int64_t n = 0; n < N; ++n) {
      const std::uint32_t v = static_cast<std::uint32_t>(zeros[static_cast<std::size_t>(g * N + n)]);
      if (format == AwqFormat::kGemm) {
        qz[g * (N / 8) + n / 8] |= v << (4 * kNibbleOfColumn[n % 8]);
      } else {
        qz[n * Z + g / 8] |= v << (4 * (g % 8));
      }
    }
  }
  out->qweight.assign(qw.begin(), qw.end());
  out->qzeros.assign(qz.begin(), qz.end());
  // GEMV_FAST words are I16: the low 16 bits, sign-extended as int16 would be.
  if (fast) {
    for (std::int32_t& w : out->qweight) w = static_cast<std::int16_t>(static_cast<std::uint16_t>(w));
  }
  return true;
}

}  // namespace qd::codec
