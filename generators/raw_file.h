// raw_file.h: a safetensors file from header text given verbatim, for
// generators that need headers no well-behaved writer would produce.
#ifndef QUANTDIFF_GENERATORS_RAW_FILE_H_
#define QUANTDIFF_GENERATORS_RAW_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace qd::gen {

// 8-byte little-endian length, the header (space-padded to a multiple of 8
// when pad is true), then data.
inline std::vector<std::uint8_t> RawFile(std::string header,
                                         const std::vector<std::uint8_t>& data,
                                         bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_RAW_FILE_H_
