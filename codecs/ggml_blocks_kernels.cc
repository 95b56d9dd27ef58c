// ggml_blocks_kernels.cc: AVX2 decoders for q4_0, q8_0, q4_K and q6_K
// (docs/ggml_blocks.md section 3; the types the bench measures).
//
// Bit-exactness: each lane computes exactly the scalar expression of section
// 3 with one binary32 instruction per written operation (codes widened to
// int32 then converted exactly; products and differences as separate
// _mm256_mul_ps / _mm256_sub_ps). Scales and the per-sub-block products
// (d*scale, dmin*min) are the scalar ones, broadcast. The functions target
// "avx2" without "fma" and the file is compiled with -ffp-contract=off, so
// nothing fuses; the scalar kernel is the truth they are tested against.
#include "codecs/ggml_blocks_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace qd::codec {

#if defined(__x86_64__)
namespace {

#define QD_AVX2 __attribute__((target("avx2")))


// Eight bytes widened to eight int32 lanes, zero- or sign-extended.
QD_AVX2 inline __m256i U8x8(const std::uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
QD_AVX2 inline __m256i I8x8(const std::uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

QD_AVX2 void Q4_0(const std::uint8_t* b, std::size_t count, float* y) {
  const __m256i mask = _mm256_set1_epi32(0x0F);
  const __m256i eight = _mm256_set1_epi32(8);
  for (std::size_t k = 0; k < count; ++k, b += 18, y += 32) {
    const __m256 d = _mm256_set1_ps(GgmlHalfAt(b));
    for (int half = 0; half < 2; ++half) {
      const __m256i bytes = U8x8(b + 2 + 8 * half);
      const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(bytes, mask), eight);
      const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(bytes, 4), eight);
      _mm256_storeu_ps(y + 8 * half, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
      _mm256_storeu_ps(y + 16 + 8 * half, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
    }
  }
}

QD_AVX2 void Q8_0(const std::uint8_t* b, std::size_t count, float* y) {
  for (std::size_t k = 0; k < count; ++k, b += 34, y += 32) {
    const __m256 d = _mm256_set1_ps(GgmlHalfAt(b));
    for (int part = 0; part < 4; ++part) {
      _mm256_storeu_ps(y + 8 * part, _mm256_mul_ps(_mm256_cvtepi32_ps(I8x8(b + 2 + 8 * part)), d));
    }
  }
}

QD_AVX2 void Q4_K(const std::uint8_t* b, std::size_t count, float* y) {
  const __m256i mask = _mm256_set1_epi32(0x0F);
  for (std::size_t k = 0; k < count; ++k, b += 144, y += 256) {
    for (int s = 0; s < 8; ++s) {
      float dl_scalar = 0.0f;
      float ml_scalar = 0.0f;
      GgmlSubBlockScaleMin(b, s, &dl_scalar, &ml_scalar);
      const __m256 dl = _mm256_set1_ps(dl_scalar);
      const __m256 ml = _mm256_set1_ps(ml_scalar);
      const std::uint8_t* q = b + 16 + 32 * (s / 2);
      const __m128i shift = _mm_cvtsi32_si128(4 * (s % 2));
      for (int part = 0; part < 4; ++part) {
        const __m256i codes = _mm256_and_si256(_mm256_srl_epi32(U8x8(q + 8 * part), shift), mask);
        const __m256 scaled = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(codes));
        _mm256_storeu_ps(y + 32 * s + 8 * part, _mm256_sub_ps(scaled, ml));
      }
    }
  }
}

QD_AVX2 void Q6_K(const std::uint8_t* b, std::size_t count, float* y) {
  const __m256i mask4 = _mm256_set1_epi32(0x0F);
  const __m256i mask2 = _mm256_set1_epi32(0x03);
  const __m256i bias = _mm256_set1_epi32(32);
  for (std::size_t k = 0; k < count; ++k, b += 210, y += 256) {
    const float d = GgmlHalfAt(b + 208);
    for (int h = 0; h < 2; ++h) {
      for (int quarter = 0; quarter < 4; ++quarter) {
        const __m128i low_shift = _mm_cvtsi32_si128(quarter < 2 ? 0 : 4);
        const __m128i high_shift = _mm_cvtsi32_si128(2 * quarter);
        for (int part = 0; part < 4; ++part) {
          const int l = 8 * part;
          const __m256i low =
              _mm256_and_si256(_mm256_srl_epi32(U8x8(b + 64 * h + 32 * (quarter % 2) + l), low_shift), mask4);
          const __m256i high = _mm256_and_si256(_mm256_srl_epi32(U8x8(b + 128 + 32 * h + l), high_shift), mask2);
          const __m256i q = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), bias);
          const float scale = static_cast<float>(static_cast<std::int8_t>(b[192 + 8 * h + 2 * quarter + l / 16]));
          const __m256 ds = _mm256_set1_ps(d * scale);
          _mm256_storeu_ps(y + 128 * h + 32 * quarter + l, _mm256_mul_ps(ds, _mm256_cvtepi32_ps(q)));
        }
      }
    }
  }
}

#undef QD_AVX2

}  // namespace

bool GgmlDecodeAvx2(GgmlType type, const std::uint8_t* blocks, std::size_t block_count, float* out) {
  switch (type) {
    case GgmlType::kQ4_0: Q4_0(blocks, block_count, out); return true;
    case GgmlType::kQ8_0: Q8_0(blocks, block_count, out); return true;
    case GgmlType::kQ4_K: Q4_K(blocks, block_count, out); return true;
    case GgmlType::kQ6_K: Q6_K(blocks, block_count, out); return true;
    default: return false;
  }
}

#else

bool GgmlDecodeAvx2(GgmlType, const std::uint8_t*, std::size_t, float*) { return false; }

#endif

}  // namespace qd::codec
