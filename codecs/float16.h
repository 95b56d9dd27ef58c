// float16.h: binary16 and bfloat16 conversions for the codecs.
//
// Exact widening (F16 -> F32, BF16 -> F32) and round-to-nearest-even
// narrowing (F32 -> F16), and the binary32 finiteness test on raw bits.
// The oracles carry their own, written separately.
#ifndef QUANTDIFF_CODECS_FLOAT16_H_
#define QUANTDIFF_CODECS_FLOAT16_H_

#include <bit>
#include <cstdint>

namespace qd::codec {

// True when binary32 bits are an infinity or a NaN (all exponent bits set).
inline bool IsNonFiniteF32Bits(std::uint32_t bits) { return (bits & 0x7f800000u) == 0x7f800000u; }

inline float F16ToF32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {  // inf or NaN, payload kept
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: value = mantissa * 2^-24, exact in binary32
    const int shift = std::countl_zero(mantissa) - 21;  // bring bit 10 to top
    mantissa = (mantissa << shift) & 0x3ffu;
    bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) |
           (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

inline float BF16ToF32(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t F32ToF16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN: keep a quiet NaN non-zero
    if (abs == 0x7f800000u) return sign | 0x7c00u;
    return sign | 0x7e00u | static_cast<std::uint16_t>((abs >> 13) & 0x3ffu);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {                       // normal binary16 result
    const std::uint32_t rounded =
        abs + 0xfffu + ((abs >> 13) & 1u) - (112u << 23);
    return sign | static_cast<std::uint16_t>(rounded >> 13);
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
  // Subnormal result: shift the implicit-one mantissa, round to nearest even.
  const std::uint32_t exponent = abs >> 23;
  const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // 14..24
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t remainder = mantissa & ((1u << shift) - 1);
  std::uint32_t result = mantissa >> shift;
  if (remainder > half || (remainder == half && (result & 1u))) ++result;
  return sign | static_cast<std::uint16_t>(result);
}

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_FLOAT16_H_
