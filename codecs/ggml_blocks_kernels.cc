// ggml_blocks_kernels.cc: AVX2 decoders for every ggml block type
// (docs/ggml_blocks.md section 3).
//
// Bit-exactness: each lane computes exactly the scalar expression of section
// 3 with one binary32 instruction per written operation (codes widened to
// int32 then converted exactly; products and differences as separate
// _mm256_mul_ps / _mm256_sub_ps). Scales and the per-sub-block products
// (d*scale, dmin*min) are the scalar ones, broadcast; code books are
// looked up with two 8-entry permutes and a blend, never computed. The functions target
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

// Nibbles of the 8 bytes at p: low halves (weights j) or high (j + 16).
QD_AVX2 inline __m256i Nibbles(const std::uint8_t* p, bool high) {
  const __m256i bytes = U8x8(p);
  return high ? _mm256_srli_epi32(bytes, 4) : _mm256_and_si256(bytes, _mm256_set1_epi32(0x0F));
}

// Bit (first + lane) of qh in each lane, as 0 or 16 (the fifth bit).
QD_AVX2 inline __m256i FifthBits(std::uint32_t qh, int first) {
  const __m256i shifts = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(first));
  const __m256i bits = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(qh)), shifts),
                                        _mm256_set1_epi32(1));
  return _mm256_slli_epi32(bits, 4);
}

// q4_1, q5_0, q5_1 (sections 3.2 to 3.4): 4- or 5-bit codes, an optional
// offset (-16 for q5_0) and an optional min m (y = q*d + m, two roundings).
template <bool kFifth, bool kMin>
QD_AVX2 void Legacy(const std::uint8_t* b, std::size_t count, float* y, int bytes, int qs_at, int offset) {
  for (std::size_t k = 0; k < count; ++k, b += bytes, y += 32) {
    const __m256 d = _mm256_set1_ps(GgmlHalfAt(b));
    const __m256 m = _mm256_set1_ps(kMin ? GgmlHalfAt(b + 2) : 0.0f);
    const std::uint32_t qh = kFifth ? GgmlU32At(b + qs_at - 4) : 0;
    for (int part = 0; part < 4; ++part) {
      const int first = 8 * part;  // weights first..first+7
      __m256i q = Nibbles(b + qs_at + first % 16, first >= 16);
      if (kFifth) q = _mm256_or_si256(q, FifthBits(qh, first));
      q = _mm256_add_epi32(q, _mm256_set1_epi32(offset));
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
      if (kMin) v = _mm256_add_ps(v, m);
      _mm256_storeu_ps(y + first, v);
    }
  }
}

// A 16-entry float table looked up by the codes 0..15 in each lane.
QD_AVX2 inline __m256 Lookup16(const float* table, __m256i codes) {
  const __m256 low = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table), codes);
  const __m256 high = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table + 8), codes);
  return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));
}

// iq4_nl and mxfp4 (sections 3.11, 3.12): a code book times one scale.
QD_AVX2 void CodeBook(const std::uint8_t* b, std::size_t count, float* y, bool mxfp4) {
  float table[16];
  for (int c = 0; c < 16; ++c) table[c] = mxfp4 ? kGgmlFp4Doubled[c] : static_cast<float>(kGgmlIq4NlValues[c]);
  const int bytes = mxfp4 ? 17 : 18;
  const int qs_at = mxfp4 ? 1 : 2;
  for (std::size_t k = 0; k < count; ++k, b += bytes, y += 32) {
    const __m256 d = _mm256_set1_ps(mxfp4 ? GgmlE8M0HalfToF32(b[0]) : GgmlHalfAt(b));
    for (int part = 0; part < 4; ++part) {
      const int first = 8 * part;
      const __m256 v = Lookup16(table, Nibbles(b + qs_at + first % 16, first >= 16));
      // The scalar order: iq4_nl d * T[c], mxfp4 T[c] * d (one rounding either way).
      _mm256_storeu_ps(y + first, mxfp4 ? _mm256_mul_ps(v, d) : _mm256_mul_ps(d, v));
    }
  }
}

QD_AVX2 void Q2_K(const std::uint8_t* b, std::size_t count, float* y) {
  for (std::size_t k = 0; k < count; ++k, b += 84, y += 256) {
    const float d = GgmlHalfAt(b + 80);
    const float dmin = GgmlHalfAt(b + 82);
    for (int s = 0; s < 16; ++s) {
      const __m256 dl = _mm256_set1_ps(d * static_cast<float>(b[s] & 0x0F));
      const __m256 ml = _mm256_set1_ps(dmin * static_cast<float>(b[s] >> 4));
      const std::uint8_t* q = b + 16 + 32 * (s / 8) + 16 * (s % 2);
      const __m128i shift = _mm_cvtsi32_si128(2 * ((s % 8) / 2));
      for (int part = 0; part < 2; ++part) {
        const __m256i codes = _mm256_and_si256(_mm256_srl_epi32(U8x8(q + 8 * part), shift), _mm256_set1_epi32(3));
        const __m256 scaled = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(codes));
        _mm256_storeu_ps(y + 16 * s + 8 * part, _mm256_sub_ps(scaled, ml));
      }
    }
  }
}

QD_AVX2 void Q3_K(const std::uint8_t* b, std::size_t count, float* y) {
  for (std::size_t k = 0; k < count; ++k, b += 110, y += 256) {
    const std::uint8_t* sc = b + 96;
    const float d = GgmlHalfAt(b + 108);
    for (int s = 0; s < 16; ++s) {
      const int low = (s < 8) ? (sc[s] & 0x0F) : (sc[s - 8] >> 4);
      const int high = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
      const __m256 dl = _mm256_set1_ps(d * static_cast<float>((low | (high << 4)) - 32));
      const int plane = (s % 8) / 2;
      const int offset = 16 * (s % 2);
      const __m128i plane_shift = _mm_cvtsi32_si128(2 * plane);
      const __m128i bit_shift = _mm_cvtsi32_si128(4 * (s / 8) + plane);
      for (int part = 0; part < 2; ++part) {
        const int l = offset + 8 * part;
        const __m256i low2 =
            _mm256_and_si256(_mm256_srl_epi32(U8x8(b + 32 + 32 * (s / 8) + l), plane_shift), _mm256_set1_epi32(3));
        const __m256i hbit = _mm256_and_si256(_mm256_srl_epi32(U8x8(b + l), bit_shift), _mm256_set1_epi32(1));
        // low2 - (hbit ? 0 : 4) = low2 - 4 + 4 * hbit
        const __m256i q = _mm256_add_epi32(_mm256_sub_epi32(low2, _mm256_set1_epi32(4)), _mm256_slli_epi32(hbit, 2));
        _mm256_storeu_ps(y + 16 * s + 8 * part, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(q)));
      }
    }
  }
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

// q4_K and q5_K (sections 3.8, 3.9); q5_K's fifth bit is bit s of qh[l].
template <bool kFifth>
QD_AVX2 void ScaleMinK(const std::uint8_t* b, std::size_t count, float* y) {
  const __m256i mask = _mm256_set1_epi32(0x0F);
  const int bytes = kFifth ? 176 : 144;
  const int qs_at = kFifth ? 48 : 16;
  for (std::size_t k = 0; k < count; ++k, b += bytes, y += 256) {
    for (int s = 0; s < 8; ++s) {
      float dl_scalar = 0.0f;
      float ml_scalar = 0.0f;
      GgmlSubBlockScaleMin(b, s, &dl_scalar, &ml_scalar);
      const __m256 dl = _mm256_set1_ps(dl_scalar);
      const __m256 ml = _mm256_set1_ps(ml_scalar);
      const std::uint8_t* q = b + qs_at + 32 * (s / 2);
      const __m128i shift = _mm_cvtsi32_si128(4 * (s % 2));
      const __m128i bit = _mm_cvtsi32_si128(s);
      for (int part = 0; part < 4; ++part) {
        __m256i codes = _mm256_and_si256(_mm256_srl_epi32(U8x8(q + 8 * part), shift), mask);
        if (kFifth) {
          const __m256i fifth = _mm256_and_si256(_mm256_srl_epi32(U8x8(b + 16 + 8 * part), bit), _mm256_set1_epi32(1));
          codes = _mm256_or_si256(codes, _mm256_slli_epi32(fifth, 4));
        }
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
    case GgmlType::kQ4_1: Legacy<false, true>(blocks, block_count, out, 20, 4, 0); return true;
    case GgmlType::kQ5_0: Legacy<true, false>(blocks, block_count, out, 22, 6, -16); return true;
    case GgmlType::kQ5_1: Legacy<true, true>(blocks, block_count, out, 24, 8, 0); return true;
    case GgmlType::kQ8_0: Q8_0(blocks, block_count, out); return true;
    case GgmlType::kQ2_K: Q2_K(blocks, block_count, out); return true;
    case GgmlType::kQ3_K: Q3_K(blocks, block_count, out); return true;
    case GgmlType::kQ4_K: ScaleMinK<false>(blocks, block_count, out); return true;
    case GgmlType::kQ5_K: ScaleMinK<true>(blocks, block_count, out); return true;
    case GgmlType::kQ6_K: Q6_K(blocks, block_count, out); return true;
    case GgmlType::kIq4Nl: CodeBook(blocks, block_count, out, false); return true;
    case GgmlType::kMxfp4: CodeBook(blocks, block_count, out, true); return true;
  }
  return false;
}

#else

bool GgmlDecodeAvx2(GgmlType, const std::uint8_t*, std::size_t, float*) { return false; }

#endif

}  // namespace qd::codec
