// bytes.h: how every oracle reads little-endian fields and binary32 bits:
// byte by byte, never through an unaligned cast (the oracle's own; the
// codecs have theirs).
#ifndef QUANTDIFF_ORACLES_BYTES_H_
#define QUANTDIFF_ORACLES_BYTES_H_

#include <cstdint>
#include <cstring>

namespace qd::oracle {

inline std::uint16_t LoadU16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

inline std::uint32_t LoadU32(const std::uint8_t* p) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

inline std::uint64_t LoadU64(const std::uint8_t* p) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

inline float FloatFromBits(std::uint32_t bits) {
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::uint32_t BitsOfFloat(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_BYTES_H_
