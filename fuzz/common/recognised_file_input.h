// recognised_file_input.h: how a recognised_file_diff input holds a file and
// its config (docs/recognised.md: only EXL3 reads one), shared by the target
// and the seed maker so that seeds decode as they were written.
//
// Layout: byte 0, bit 0 set: a config follows, named config.json (read
// nested) when bit 1 is set, else quantize_config.json; then its length L as
// two little-endian bytes and L config bytes. The rest is the safetensors file.
//
//   const qd::fuzz::RecognisedCase c = qd::fuzz::RecognisedCaseFromInput(data, size);
#ifndef QUANTDIFF_FUZZ_COMMON_RECOGNISED_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_RECOGNISED_FILE_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "generators/generated.h"
#include "quantdiff/plain_data.h"

namespace qd::fuzz {

struct RecognisedCase {
  std::vector<std::uint8_t> file;
  std::vector<qd::SideFile> configs;
};

inline RecognisedCase RecognisedCaseFromInput(const std::uint8_t* data, std::size_t size) {
  RecognisedCase c;
  std::size_t at = 0;
  if (size >= 3 && (data[0] & 1) != 0) {
    const std::size_t length = std::min<std::size_t>(data[1] | (std::size_t{data[2]} << 8), size - 3);
    c.configs.push_back({(data[0] & 2) != 0 ? "config.json" : "quantize_config.json",
                         std::vector<std::uint8_t>(data + 3, data + 3 + length)});
    at = 3 + length;
  } else if (size >= 1) {
    at = 1;
  }
  c.file.assign(data + at, data + size);
  return c;
}

// A generated instance in that layout (its first side file, if any).
inline std::vector<std::uint8_t> RecognisedInput(const qd::gen::Generated& g) {
  std::vector<std::uint8_t> input;
  if (g.side_files.empty()) {
    input.push_back(0);
  } else {
    const qd::SideFile& config = g.side_files.front();
    const std::size_t length = std::min<std::size_t>(config.bytes.size(), 0xFFFF);
    input.push_back(config.name == "config.json" ? 3 : 1);
    input.push_back(static_cast<std::uint8_t>(length));
    input.push_back(static_cast<std::uint8_t>(length >> 8));
    input.insert(input.end(), config.bytes.begin(), config.bytes.begin() + static_cast<std::ptrdiff_t>(length));
  }
  input.insert(input.end(), g.bytes.begin(), g.bytes.end());
  return input;
}

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_RECOGNISED_FILE_INPUT_H_
