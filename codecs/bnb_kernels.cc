// bnb_kernels.cc: bitsandbytes dequantization kernels, scalar and AVX2.
//
// Bit-exactness across kernels:
//  * Every product is one binary32 multiply; there is no addition next to a
//    multiply in the per-element kernels, so nothing can fuse there.
//  * The nested absmax (a multiply, then an add) is computed once per block by
//    BnbNestedAbsmax, shared by every kernel. This file is compiled with
//    -ffp-contract=off (codecs/CMakeLists.txt), so the compiler may not fuse
//    the two steps into an FMA even when a build targets FMA hardware; the
//    AVX2 functions are compiled for "avx2" without "fma", so no FMA
//    instruction is available to them at all.
//  * Rounding to binary16 / bfloat16: the scalar path uses float16.h's integer
//    conversions; the AVX2 path rounds in the float domain ((|x| + c) - c with
//    c = 2^(e+13), the binary16 ulp of x times 2^23) for binary16 and with
//    integer adds for bfloat16. The two are written independently and tested
//    against each other (tests/bnb_codec_test.cc).
#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codecs/bnb.h"
#include "codecs/float16.h"

namespace qd::codec {
namespace {

// The tables of get_4bit_type, as binary32 bit patterns.
constexpr std::array<std::uint32_t, 16> kNf4Bits = {
    0xbf800000u, 0xbf3239b1u, 0xbf066b30u, 0xbeca32a0u, 0xbe91a24du, 0xbe3d353fu,
    0xbdba7871u, 0x00000000u, 0x3da2faffu, 0x3e24cae3u, 0x3e7c04ddu, 0x3ead033au,
    0x3ee1a4b8u, 0x3f1007abu, 0x3f3913b3u, 0x3f800000u,
};

std::array<float, 16> MakeNf4() {
  std::array<float, 16> t{};
  for (int i = 0; i < 16; ++i) t[i] = std::bit_cast<float>(kNf4Bits[i]);
  return t;
}

// FP4: [0, 0.0625, 8, 12, 4, 6, 2, 3, -0, -0.0625, -8, -12, -4, -6, -2, -3] / 12,
// where bnb's "-0" is the integer 0, so code 8 is +0.0.
std::array<float, 16> MakeFp4() {
  constexpr float kMagnitudes[8] = {0.0f, 0.0625f, 8.0f, 12.0f, 4.0f, 6.0f, 2.0f, 3.0f};
  std::array<float, 16> t{};
  for (int i = 0; i < 8; ++i) {
    t[i] = kMagnitudes[i] / 12.0f;
    t[8 + i] = i == 0 ? 0.0f : -kMagnitudes[i] / 12.0f;
  }
  return t;
}

float BF16Round(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::bit_cast<float>((u | 0x00400000u) & 0xffff0000u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xffff0000u);
}

template <BnbDtype D>
inline float RoundScalar(float x) {
  if constexpr (D == BnbDtype::kFloat16) {
    return F16ToF32(F32ToF16(x));
  } else if constexpr (D == BnbDtype::kBfloat16) {
    return BF16Round(x);
  } else {
    return x;
  }
}

unsigned Log2(std::uint64_t power_of_two) {
  return static_cast<unsigned>(std::countr_zero(power_of_two));
}

// ---- scalar kernels -----------------------------------------------------------

template <BnbDtype D>
void Dequantize4bitScalar(const float* table, const std::uint8_t* packed, std::uint64_t begin,
                          std::uint64_t n, const float* absmax, unsigned shift, float* out) {
  for (std::uint64_t i = begin; i < n; ++i) {
    const std::uint8_t byte = packed[i >> 1];
    const unsigned code = (i & 1u) != 0 ? byte & 0x0fu : byte >> 4;
    out[i] = RoundScalar<D>(table[code] * absmax[i >> shift]);
  }
}

template <BnbDtype D>
void DequantizeBlockwise8Scalar(const std::uint8_t* codes, std::uint64_t begin, std::uint64_t n,
                                const float* map, const float* absmax, unsigned shift,
                                float* out) {
  for (std::uint64_t i = begin; i < n; ++i) {
    out[i] = RoundScalar<D>(map[codes[i]] * absmax[i >> shift]);
  }
}

void Int8RowScalar(const std::int8_t* w, std::uint64_t begin, std::uint64_t columns, float scb,
                   float* out) {
  const float k = std::bit_cast<float>(kBnbInt8ScaleBits);
  for (std::uint64_t c = begin; c < columns; ++c) {
    const float scaled = static_cast<float>(w[c]) * scb;
    out[c] = scaled * k;
  }
}

template <BnbDtype D>
void RoundArrayScalar(const float* in, std::uint64_t begin, std::uint64_t n, float* out) {
  for (std::uint64_t i = begin; i < n; ++i) out[i] = RoundScalar<D>(in[i]);
}

// ---- AVX2 kernels (no FMA: see the top of the file) ----------------------------
#if defined(__x86_64__)
#define QD_BNB_AVX2 __attribute__((target("avx2")))

QD_BNB_AVX2 inline __m256i Splat(std::uint32_t v) {
  return _mm256_set1_epi32(static_cast<int>(v));
}

// Round to binary16 and widen, in the float domain. For |x| with binary
// exponent e in [-14, 15], c = 2^(e+13) has ulp 2^(e-10), the binary16 ulp
// at e, so |x| + c rounds |x| to binary16 precision (RNE) and subtracting c
// is exact. Below 2^-14, c = 2^-1 gives the fixed subnormal ulp 2^-24.
// |x| >= 65520 becomes infinity; a NaN keeps its top 9 payload bits, quiet.
QD_BNB_AVX2 inline __m256 RoundF16Avx2(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i abs = _mm256_and_si256(bits, Splat(0x7fffffffu));
  const __m256i sign = _mm256_xor_si256(bits, abs);
  const __m256i exponent = _mm256_max_epi32(_mm256_and_si256(abs, Splat(0x7f800000u)),
                                            Splat(0x38800000u));
  const __m256 c = _mm256_castsi256_ps(_mm256_add_epi32(exponent, Splat(13u << 23)));
  const __m256 rounded = _mm256_sub_ps(_mm256_add_ps(_mm256_castsi256_ps(abs), c), c);
  __m256i result = _mm256_castps_si256(rounded);
  const __m256i overflow = _mm256_cmpgt_epi32(abs, Splat(0x477fefffu));
  result = _mm256_blendv_epi8(result, Splat(0x7f800000u), overflow);
  const __m256i nan = _mm256_cmpgt_epi32(abs, Splat(0x7f800000u));
  const __m256i quiet = _mm256_or_si256(Splat(0x7fc00000u), _mm256_and_si256(abs, Splat(0x007fe000u)));
  result = _mm256_blendv_epi8(result, quiet, nan);
  return _mm256_castsi256_ps(_mm256_or_si256(result, sign));
}

// Round to bfloat16 and widen: add 0x7fff plus the kept lowest bit, drop 16
// bits (a carry into the exponent gives the next binade or infinity).
QD_BNB_AVX2 inline __m256 RoundBF16Avx2(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), Splat(1u));
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(bits, Splat(0x7fffu)), odd);
  __m256i result = _mm256_and_si256(sum, Splat(0xffff0000u));
  const __m256i abs = _mm256_and_si256(bits, Splat(0x7fffffffu));
  const __m256i nan = _mm256_cmpgt_epi32(abs, Splat(0x7f800000u));
  const __m256i quiet = _mm256_and_si256(_mm256_or_si256(bits, Splat(0x00400000u)), Splat(0xffff0000u));
  result = _mm256_blendv_epi8(result, quiet, nan);
  return _mm256_castsi256_ps(result);
}

template <BnbDtype D>
QD_BNB_AVX2 inline __m256 RoundAvx2(__m256 x) {
  if constexpr (D == BnbDtype::kFloat16) {
    return RoundF16Avx2(x);
  } else if constexpr (D == BnbDtype::kBfloat16) {
    return RoundBF16Avx2(x);
  } else {
    return x;
  }
}

// Eight 4-bit codes (one per 32-bit lane) to table values: vpermps looks up
// the low three bits in each half of the table; bit 3, moved to the sign bit,
// picks the half.
QD_BNB_AVX2 inline __m256 LookUp16(__m256 low_half, __m256 high_half, __m256i codes) {
  const __m256 low = _mm256_permutevar8x32_ps(low_half, codes);
  const __m256 high = _mm256_permutevar8x32_ps(high_half, codes);
  return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));
}

template <BnbDtype D>
QD_BNB_AVX2 void Dequantize4bitAvx2(const float* table, const std::uint8_t* packed,
                                    std::uint64_t n, const float* absmax, unsigned shift,
                                    float* out) {
  const __m256 low_half = _mm256_loadu_ps(table);
  const __m256 high_half = _mm256_loadu_ps(table + 8);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  std::uint64_t i = 0;
  // 32 elements (16 bytes) per step; blocks hold a multiple of 32 elements
  // and start at multiples of 32, so one step never straddles two blocks.
  for (; i + 32 <= n; i += 32) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + i / 2));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);  // even elements
    const __m128i low = _mm_and_si128(bytes, nibble);                      // odd elements
    const __m128i first = _mm_unpacklo_epi8(high, low);    // elements 0..15 in order
    const __m128i second = _mm_unpackhi_epi8(high, low);   // elements 16..31
    const __m256 scale = _mm256_set1_ps(absmax[i >> shift]);
    const __m128i parts[4] = {first, _mm_srli_si128(first, 8), second, _mm_srli_si128(second, 8)};
    for (int p = 0; p < 4; ++p) {
      const __m256 v = LookUp16(low_half, high_half, _mm256_cvtepu8_epi32(parts[p]));
      _mm256_storeu_ps(out + i + 8 * p, RoundAvx2<D>(_mm256_mul_ps(v, scale)));
    }
  }
  Dequantize4bitScalar<D>(table, packed, i, n, absmax, shift, out);
}

template <BnbDtype D>
QD_BNB_AVX2 void DequantizeBlockwise8Avx2(const std::uint8_t* codes, std::uint64_t n,
                                          const float* map, const float* absmax,
                                          unsigned shift, float* out) {
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {  // 8 | blocksize: one block per step
    std::uint64_t eight;
    std::memcpy(&eight, codes + i, 8);
    const __m256i index = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(eight)));
    const __m256 v = _mm256_i32gather_ps(map, index, 4);
    const __m256 y = _mm256_mul_ps(v, _mm256_set1_ps(absmax[i >> shift]));
    _mm256_storeu_ps(out + i, RoundAvx2<D>(y));
  }
  DequantizeBlockwise8Scalar<D>(codes, i, n, map, absmax, shift, out);
}

QD_BNB_AVX2 void Int8RowAvx2(const std::int8_t* w, std::uint64_t columns, float scb, float* out) {
  const __m256 scale = _mm256_set1_ps(scb);
  const __m256 k = _mm256_set1_ps(std::bit_cast<float>(kBnbInt8ScaleBits));
  std::uint64_t c = 0;
  for (; c + 8 <= columns; c += 8) {
    std::uint64_t eight;
    std::memcpy(&eight, w + c, 8);
    const __m256i q = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<long long>(eight)));
    const __m256 scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale);
    _mm256_storeu_ps(out + c, _mm256_mul_ps(scaled, k));
  }
  Int8RowScalar(w, c, columns, scb, out);
}

template <BnbDtype D>
QD_BNB_AVX2 void RoundArrayAvx2(const float* in, std::uint64_t n, float* out) {
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, RoundAvx2<D>(_mm256_loadu_ps(in + i)));
  RoundArrayScalar<D>(in, i, n, out);
}
#endif  // __x86_64__

}  // namespace

const std::array<float, 16>& Bnb4bitTable(Bnb4bitType type) {
  static const std::array<float, 16> nf4 = MakeNf4();
  static const std::array<float, 16> fp4 = MakeFp4();
  return type == Bnb4bitType::kNf4 ? nf4 : fp4;
}

float BnbRoundToDtype(float x, BnbDtype dtype) {
  switch (dtype) {
    case BnbDtype::kFloat16: return RoundScalar<BnbDtype::kFloat16>(x);
    case BnbDtype::kBfloat16: return RoundScalar<BnbDtype::kBfloat16>(x);
    case BnbDtype::kFloat32: return x;
  }
  return x;
}

void BnbNestedAbsmax(const std::uint8_t* codes, std::uint64_t nblocks,
                     const float* nested_quant_map, const float* nested_absmax,
                     std::uint64_t nested_blocksize, float offset, float* absmax_eff) {
  const unsigned shift = Log2(nested_blocksize);
  for (std::uint64_t b = 0; b < nblocks; ++b) {
    // Two statements, two roundings; -ffp-contract=off keeps them unfused.
    const float product = nested_quant_map[codes[b]] * nested_absmax[b >> shift];
    absmax_eff[b] = product + offset;
  }
}

void BnbDequantize4bit(Bnb4bitType type, const std::uint8_t* packed, std::uint64_t n,
                       const float* absmax_eff, std::uint64_t blocksize, BnbDtype dtype,
                       float* out, Kernel kernel) {
  const float* table = Bnb4bitTable(type).data();
  const unsigned shift = Log2(blocksize);
#if defined(__x86_64__)
  if (HasAvx2Code(kernel)) {
    switch (dtype) {
      case BnbDtype::kFloat16:
        return Dequantize4bitAvx2<BnbDtype::kFloat16>(table, packed, n, absmax_eff, shift, out);
      case BnbDtype::kBfloat16:
        return Dequantize4bitAvx2<BnbDtype::kBfloat16>(table, packed, n, absmax_eff, shift, out);
      case BnbDtype::kFloat32:
        return Dequantize4bitAvx2<BnbDtype::kFloat32>(table, packed, n, absmax_eff, shift, out);
    }
  }
#endif
  switch (dtype) {
    case BnbDtype::kFloat16:
      return Dequantize4bitScalar<BnbDtype::kFloat16>(table, packed, 0, n, absmax_eff, shift, out);
    case BnbDtype::kBfloat16:
      return Dequantize4bitScalar<BnbDtype::kBfloat16>(table, packed, 0, n, absmax_eff, shift, out);
    case BnbDtype::kFloat32:
      return Dequantize4bitScalar<BnbDtype::kFloat32>(table, packed, 0, n, absmax_eff, shift, out);
  }
}

void BnbDequantizeBlockwise8(const std::uint8_t* codes, std::uint64_t n, const float* quant_map,
                             const float* absmax_eff, std::uint64_t blocksize, BnbDtype dtype,
                             float* out, Kernel kernel) {
  const unsigned shift = Log2(blocksize);
#if defined(__x86_64__)
  if (HasAvx2Code(kernel)) {
    switch (dtype) {
      case BnbDtype::kFloat16:
        return DequantizeBlockwise8Avx2<BnbDtype::kFloat16>(codes, n, quant_map, absmax_eff, shift, out);
      case BnbDtype::kBfloat16:
        return DequantizeBlockwise8Avx2<BnbDtype::kBfloat16>(codes, n, quant_map, absmax_eff, shift, out);
      case BnbDtype::kFloat32:
        return DequantizeBlockwise8Avx2<BnbDtype::kFloat32>(codes, n, quant_map, absmax_eff, shift, out);
    }
  }
#endif
  switch (dtype) {
    case BnbDtype::kFloat16:
      return DequantizeBlockwise8Scalar<BnbDtype::kFloat16>(codes, 0, n, quant_map, absmax_eff, shift, out);
    case BnbDtype::kBfloat16:
      return DequantizeBlockwise8Scalar<BnbDtype::kBfloat16>(codes, 0, n, quant_map, absmax_eff, shift, out);
    case BnbDtype::kFloat32:
      return DequantizeBlockwise8Scalar<BnbDtype::kFloat32>(codes, 0, n, quant_map, absmax_eff, shift, out);
  }
}

void BnbDequantizeInt8Rows(const std::int8_t* w, std::uint64_t rows, std::uint64_t columns,
                           const float* scb, float* out, Kernel kernel) {
  for (std::uint64_t r = 0; r < rows; ++r) {
#if defined(__x86_64__)
    if (HasAvx2Code(kernel)) {
      Int8RowAvx2(w + r * columns, columns, scb[r], out + r * columns);
      continue;
    }
#endif
    Int8RowScalar(w + r * columns, 0, columns, scb[r], out + r * columns);
  }
}

void BnbRoundArrayToDtype(const float* in, std::uint64_t n, BnbDtype dtype, float* out,
                          Kernel kernel) {
#if defined(__x86_64__)
  if (HasAvx2Code(kernel)) {
    switch (dtype) {
      case BnbDtype::kFloat16: return RoundArrayAvx2<BnbDtype::kFloat16>(in, n, out);
      case BnbDtype::kBfloat16: return RoundArrayAvx2<BnbDtype::kBfloat16>(in, n, out);
      case BnbDtype::kFloat32: return RoundArrayAvx2<BnbDtype::kFloat32>(in, n, out);
    }
  }
#endif
  switch (dtype) {
    case BnbDtype::kFloat16: return RoundArrayScalar<BnbDtype::kFloat16>(in, 0, n, out);
    case BnbDtype::kBfloat16: return RoundArrayScalar<BnbDtype::kBfloat16>(in, 0, n, out);
    case BnbDtype::kFloat32: return RoundArrayScalar<BnbDtype::kFloat32>(in, 0, n, out);
  }
}

}  // namespace qd::codec
