// half.h: the tests' own binary16 arithmetic, written from IEEE 754-2019
// section 3.4 and nothing else, so that expected values never come from the
// codec (codecs/float16.h) or the oracle (oracles/rbq.cc) under test.
//
// The decoding is arithmetic on the definition (an ldexp of the integer
// significand), the encoding is a search for the nearest representable value
// (ties to the even significand) instead of bit manipulation: a different
// method from both implementations on purpose.
//
//   float scale = qdtest::HalfValue(0x3c00);          // 1.0f
//   std::uint16_t bits = qdtest::NearestHalf(0.1f);   // 0x2e66
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_HALF_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_HALF_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace qdtest {

// The exact value of binary16 bits as a double: sign, 5-bit biased exponent
// e and 10-bit trailing significand m.
//   e == 0:        (-1)^s * m * 2^-24              (zero or subnormal)
//   0 < e < 31:    (-1)^s * (1024 + m) * 2^(e-25)  (normal: 2^(e-15) * (1 + m/1024))
//   e == 31:       infinity (m == 0) or NaN
inline double HalfExact(std::uint16_t h) {
  const bool negative = (h & 0x8000u) != 0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double magnitude;
  if (e == 31) {
    magnitude = m == 0 ? std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    magnitude = std::ldexp(static_cast<double>(m), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(1024 + m), e - 25);
  }
  return negative ? -magnitude : magnitude;
}

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

// Bit equality, except that any NaN equals any NaN (the differ's rule).
inline bool SameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return FloatBits(a) == FloatBits(b);
}

}  // namespace qdtest

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_HALF_H_
