// half.h: the tests' own binary16 and bfloat16 arithmetic, written from IEEE
// 754-2019 sections 3.4 and 6.2.3 (bfloat16: binary32's sign and 8-bit
// exponent with 8 significant bits, i.e. the top half of a binary32) and
// nothing else, so that expected values never come from the codecs
// (codecs/float16.h) or the oracles under test.
//
// The decoding is arithmetic on the definition (an ldexp of the integer
// significand), the encoding is a search for the nearest representable value
// (ties to the even significand) instead of bit manipulation: a different
// method from both implementations on purpose.
//
//   float scale = qdtest::HalfValue(0x3c00);          // 1.0f
//   std::uint16_t bits = qdtest::NearestHalf(0.1f);   // 0x2e66
//   float s = qdtest::BFloat16Value(0x4049);          // 3.140625f
//   float r = qdtest::RoundedThroughHalf(x);          // x to binary16 (RNE) and back
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_HALF_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_HALF_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace qdtest {

// The exact value, as a double, of 16 bits of a binary format with a sign
// bit, an exponent field e of `exponent_bits` bits (bias 2^(exponent_bits-1) - 1)
// and a trailing significand m of `significand_bits` bits (IEEE 754-2019 3.4):
//   e == 0:             (-1)^s * m * 2^(1 - bias - significand_bits)     (zero or subnormal)
//   0 < e < all ones:   (-1)^s * (2^significand_bits + m) * 2^(e - bias - significand_bits)
//   e == all ones:      infinity (m == 0) or NaN
inline double Binary16BitsExact(std::uint16_t bits, int exponent_bits, int significand_bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const int all_ones = (1 << exponent_bits) - 1;
  const int bias = all_ones / 2;
  const int e = (bits >> significand_bits) & all_ones;
  const int m = bits & ((1 << significand_bits) - 1);
  double magnitude;
  if (e == all_ones) {
    magnitude = m == 0 ? std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    magnitude = std::ldexp(static_cast<double>(m), 1 - bias - significand_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>((1 << significand_bits) + m), e - bias - significand_bits);
  }
  return negative ? -magnitude : magnitude;
}

// binary16: 5-bit exponent, 10-bit significand field, so
//   e == 0:        (-1)^s * m * 2^-24
//   0 < e < 31:    (-1)^s * (1024 + m) * 2^(e-25)  (2^(e-15) * (1 + m/1024))
inline double HalfExact(std::uint16_t h) { return Binary16BitsExact(h, 5, 10); }

// Every finite binary16 value is exact in binary32 (11 significant bits,
// exponent >= -24), so the narrowing below is exact.
inline float HalfValue(std::uint16_t h) { return static_cast<float>(HalfExact(h)); }

inline bool HalfIsFinite(std::uint16_t h) { return ((h >> 10) & 0x1f) != 31; }

// binary32 -> binary16, round to nearest, ties to even, for a finite v.
// Magnitudes at or above 65520 (half way between the largest finite half,
// 65504, and 2^16) round to infinity; the tie at 65520 goes to the even
// neighbour, which is the (infinite) 2^16.
inline std::uint16_t NearestHalf(float v) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
  const double a = std::fabs(static_cast<double>(v));
  if (a >= 65520.0) return sign | 0x7c00u;
  // Finite non-negative halves 0x0000..0x7bff increase with their bits:
  // find the largest one not above a.
  std::uint32_t lo = 0, hi = 0x7bff;
  while (lo < hi) {
    const std::uint32_t mid = (lo + hi + 1) / 2;
    if (HalfExact(static_cast<std::uint16_t>(mid)) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const std::uint16_t below = static_cast<std::uint16_t>(lo);
  if (HalfExact(below) == a || below == 0x7bff) return sign | below;
  // Both differences are exact in binary64: a has 24 significant bits and
  // lies within a factor of two of its neighbours (or they are 0).
  const double down = a - HalfExact(below);
  const double up = HalfExact(static_cast<std::uint16_t>(below + 1)) - a;
  std::uint16_t nearest;
  if (down < up) {
    nearest = below;
  } else if (up < down) {
    nearest = static_cast<std::uint16_t>(below + 1);
  } else {
    nearest = (below & 1u) == 0 ? below : static_cast<std::uint16_t>(below + 1);
  }
  return sign | nearest;
}

// bfloat16: binary32's 8-bit exponent, a 7-bit significand field, so
//   e == 0:         (-1)^s * m * 2^-133
//   0 < e < 255:    (-1)^s * (128 + m) * 2^(e - 134)   (2^(e-127) * (1 + m/128))
inline double BFloat16Exact(std::uint16_t b) { return Binary16BitsExact(b, 8, 7); }

// Every finite bfloat16 value is exact in binary32 (same exponent range,
// fewer significant bits).
inline float BFloat16Value(std::uint16_t b) { return static_cast<float>(BFloat16Exact(b)); }

inline std::uint32_t FloatBits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float BitsFloat(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// A NaN taken to a narrower format and back (IEEE 754-2019 6.2.3: the
// result is a quiet NaN keeping as much of the payload as fits): the sign,
// the quiet bit, and the leading `kept` bits of the trailing significand
// (10 for binary16, 7 for bfloat16); the rest are lost.
inline float NarrowedNaN(float nan, int kept) {
  const std::uint32_t u = FloatBits(nan);
  const std::uint32_t payload = u & (((1u << kept) - 1u) << (23 - kept));
  return BitsFloat((u & 0x80000000u) | 0x7fc00000u | payload);
}

// x rounded to binary16 (nearest, ties to even; 65520 and above to
// infinity) and widened back to binary32.
inline float RoundedThroughHalf(float x) {
  if (std::isnan(x)) return NarrowedNaN(x, 10);
  if (std::isinf(x)) return x;
  return HalfValue(NearestHalf(x));
}

// x rounded to bfloat16 (nearest, ties to even) and widened back, by
// arithmetic on the value: |x| = f 2^e with f in [0.5, 1); the bfloat16
// quantum is 2^(e-8) for normal numbers and 2^-133 below 2^-126. nearbyint
// rounds ties to even in the default rounding mode.
inline float RoundedThroughBFloat16(float x) {
  if (std::isnan(x)) return NarrowedNaN(x, 7);
  if (std::isinf(x) || x == 0.0f) return x;
  const double a = std::fabs(static_cast<double>(x));
  int e = 0;
  std::frexp(a, &e);
  const int quantum = a < std::ldexp(1.0, -126) ? -133 : e - 8;
  const double r = std::ldexp(std::nearbyint(std::ldexp(a, -quantum)), quantum);
  // The largest bfloat16 is (2^8 - 1) 2^120; a rounding up to 2^128 is infinity.
  const float magnitude = r >= std::ldexp(1.0, 128) ? std::numeric_limits<float>::infinity()
                                                     : static_cast<float>(r);
  return std::signbit(x) ? -magnitude : magnitude;
}

// The values of a tensor's little-endian bytes of dtype F16, BF16, F32 or
// F64 in binary32: F16 and BF16 widened by the definitions above (exact, NaN
// payloads aside), F32 as it is, F64 rounded to nearest. Empty for another
// dtype.
inline std::vector<float> LittleEndianFloats(const std::string& dtype, const std::uint8_t* bytes,
                                             std::size_t size) {
  const std::size_t width = dtype == "F64" ? 8 : dtype == "F32" ? 4 : dtype == "F16" || dtype == "BF16" ? 2 : 0;
  std::vector<float> out;
  if (width == 0) return out;
  for (std::size_t at = 0; at + width <= size; at += width) {
    std::uint64_t u = 0;
    for (std::size_t k = width; k-- > 0;) u = (u << 8) | bytes[at + k];
    if (dtype == "F16") {
      out.push_back(HalfValue(static_cast<std::uint16_t>(u)));
    } else if (dtype == "BF16") {
      out.push_back(BFloat16Value(static_cast<std::uint16_t>(u)));
    } else if (dtype == "F32") {
      out.push_back(BitsFloat(static_cast<std::uint32_t>(u)));
    } else {
      double d;
      std::memcpy(&d, &u, sizeof d);
      out.push_back(static_cast<float>(d));
    }
  }
  return out;
}

// Bit equality, except that any NaN equals any NaN (the differ's rule).
inline bool SameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return FloatBits(a) == FloatBits(b);
}

}  // namespace qdtest

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_HALF_H_
