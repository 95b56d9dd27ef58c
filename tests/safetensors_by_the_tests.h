// safetensors_by_the_tests.h: a safetensors file read the tests' own way,
// sharing nothing with the readers under test (the format README: u64
// little-endian header length N, then the JSON header; a tensor's bytes at
// 8 + N + data_offsets), so expected values never come from quantdiff's code.
//
//   qdtest::RawTensor t = qdtest::TensorReadByTheTests(file_bytes, "w");
//   if (t.found) Use(t.dtype, t.shape, t.bytes);
#ifndef QUANTDIFF_TESTS_SAFETENSORS_BY_THE_TESTS_H_
#define QUANTDIFF_TESTS_SAFETENSORS_BY_THE_TESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qdtest {

// The JSON header; discarded (is_discarded()) when the file is too short or
// the header is not JSON.
inline nlohmann::json HeaderReadByTheTests(const std::vector<std::uint8_t>& file) {
  if (file.size() < 8) return nlohmann::json::value_t::discarded;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  if (n > file.size() - 8) return nlohmann::json::value_t::discarded;
  const auto begin = file.begin() + 8;
  return nlohmann::json::parse(begin, begin + static_cast<std::ptrdiff_t>(n), nullptr, false);
}

struct RawTensor {
  bool found = false;  // false when missing or its offsets are out of the file
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;
};

inline RawTensor TensorReadByTheTests(const std::vector<std::uint8_t>& file, const std::string& name) {
  RawTensor out;
  const nlohmann::json header = HeaderReadByTheTests(file);
  if (!header.is_object() || !header.contains(name)) return out;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  const nlohmann::json& t = header[name];
  const std::uint64_t begin = t["data_offsets"][0].get<std::uint64_t>();
  const std::uint64_t end = t["data_offsets"][1].get<std::uint64_t>();
  if (end < begin || end > file.size() - 8 - n) return out;
  out.found = true;
  out.dtype = t["dtype"].get<std::string>();
  out.shape = t["shape"].get<std::vector<std::uint64_t>>();
  out.bytes.assign(file.begin() + static_cast<std::ptrdiff_t>(8 + n + begin),
                   file.begin() + static_cast<std::ptrdiff_t>(8 + n + end));
  return out;
}

}  // namespace qdtest

#endif  // QUANTDIFF_TESTS_SAFETENSORS_BY_THE_TESTS_H_
