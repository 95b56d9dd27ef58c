// ggml_blocks_kernels.h: the AVX2 decoders behind qd::codec::GgmlDecode
// (codecs/ggml_blocks.h); internal to the codecs.
#ifndef QUANTDIFF_CODECS_GGML_BLOCKS_KERNELS_H_
#define QUANTDIFF_CODECS_GGML_BLOCKS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"

namespace qd::codec {

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

// Decodes like the scalar decoders, bit for bit, with AVX2 (no FMA). False,
// writing nothing, when `type` has no AVX2 decoder or this build has no
// AVX2 code; the caller then runs the scalar one.
bool GgmlDecodeAvx2(GgmlType type, const std::uint8_t* blocks, std::size_t block_count, float* out);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_GGML_BLOCKS_KERNELS_H_
