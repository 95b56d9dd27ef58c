// ggml_blocks_kernels.h: the AVX2 decoders behind qd::codec::GgmlDecode
// (codecs/ggml_blocks.h); internal to the codecs.
#ifndef QUANTDIFF_CODECS_GGML_BLOCKS_KERNELS_H_
#define QUANTDIFF_CODECS_GGML_BLOCKS_KERNELS_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"

namespace qd::codec {

// Section 3.11: the IQ4_NL code book and section 3.12's FP4 (E2M1) values
// doubled, so that with half the E8M0 scale every product is exact. Code 8
// is -0 (OCP; ggml's table has +0 there: section 5).
inline constexpr std::array<std::int8_t, 16> kGgmlIq4NlValues = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                                 1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr std::array<float, 16> kGgmlFp4Doubled = {0.0f,  1.0f,  2.0f,  3.0f,  4.0f,  6.0f,  8.0f,  12.0f,
                                                          -0.0f, -1.0f, -2.0f, -3.0f, -4.0f, -6.0f, -8.0f, -12.0f};

inline std::uint32_t GgmlU32At(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// Section 2.2: E8M0 exponent byte e is 2^(e-127); 0xFF is NaN (OCP MX 1.0).
// Half of it, as the doubled FP4 values need; exact for every e < 0xFF.
inline float GgmlE8M0HalfToF32(std::uint8_t e) {
  if (e == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  const std::uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<std::uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// The F16 field at p widened exactly (docs/ggml_blocks.md section 2.1).
inline float GgmlHalfAt(const std::uint8_t* p) {
  return F16ToF32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// Section 3.8: the 12-byte packing of eight 6-bit scales and eight 6-bit
// mins shared by q4_K and q5_K; scale and min number j of the bytes at p.
inline void GgmlScaleMinK4(const std::uint8_t* p, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = p[j] & 63;
    *min = p[j + 4] & 63;
  } else {
    *scale = (p[j + 4] & 0x0F) | ((p[j - 4] >> 6) << 4);
    *min = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

// q4_K / q5_K sub-block s of the block at b: dl = d * scale and
// ml = dmin * min, each one binary32 product (section 3.8).
inline void GgmlSubBlockScaleMin(const std::uint8_t* b, int s, float* dl, float* ml) {
  int scale = 0;
  int min = 0;
  GgmlScaleMinK4(b + 4, s, &scale, &min);
  *dl = GgmlHalfAt(b) * static_cast<float>(scale);
  *ml = GgmlHalfAt(b + 2) * static_cast<float>(min);
}

// Decodes like the scalar decoders, bit for bit, with AVX2 (no FMA), every
// type. False, writing nothing, when this build has no AVX2 code; the
// caller then runs the scalar one.
bool GgmlDecodeAvx2(GgmlType type, const std::uint8_t* blocks, std::size_t block_count, float* out);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_GGML_BLOCKS_KERNELS_H_
