// recognised_files.h: safetensors files of the recognised families
// (docs/recognised.md) built by hand from the format README, for
// recognised_test and the CLI test; nothing of quantdiff's code is used.
//
//   qdtest::Bytes file = qdtest::MakeFile({{"l.B", "I32", {2, 8}}, ...});
#ifndef QUANTDIFF_TESTS_RECOGNISED_FILES_H_
#define QUANTDIFF_TESTS_RECOGNISED_FILES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace qdtest {

using Bytes = std::vector<std::uint8_t>;

struct T {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
};

inline std::uint64_t ItemBytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "I64") return 8;
  if (dtype == "I8" || dtype == "U8") return 1;
  return 2;  // F16, I16
}

// A safetensors file written by the format README: tensors laid out in the
// order given; F32 values are 1.5, -2, 1.5, ... (what the decoded checks
// expect), every other byte 0x11.
inline Bytes MakeFile(const std::vector<T>& tensors) {
  std::string header = "{";
  std::uint64_t offset = 0;
  Bytes data;
  for (const T& t : tensors) {
    std::uint64_t n = ItemBytes(t.dtype);
    std::string shape;
    for (std::uint64_t d : t.shape) {
      n *= d;
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    if (header.size() > 1) header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + n) + "]}";
    for (std::uint64_t i = 0; i < n; i += ItemBytes(t.dtype)) {
      const float value = (i / 4) % 2 == 0 ? 1.5f : -2.0f;
      std::uint8_t word[4];
      std::memcpy(word, &value, 4);
      for (std::uint64_t b = 0; b < ItemBytes(t.dtype); ++b) {
        data.push_back(t.dtype == "F32" ? word[b] : 0x11);
      }
    }
    offset += n;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  Bytes file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

}  // namespace qdtest

#endif  // QUANTDIFF_TESTS_RECOGNISED_FILES_H_
