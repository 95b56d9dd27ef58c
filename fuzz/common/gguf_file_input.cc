#include "fuzz/common/gguf_file_input.h"

#include <string>

#include "generators/generators.h"

namespace qd::fuzz {

std::vector<std::uint8_t> GgufFileFromInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return {};
  if ((data[0] & 1) == 0 || size < 5) return std::vector<std::uint8_t>(data + 1, data + size);
  std::uint32_t seed = 0;
  for (int i = 0; i < 4; ++i) seed |= static_cast<std::uint32_t>(data[1 + i]) << (8 * i);
  qd::gen::Rng rng(seed);
  const unsigned what = data[0] >> 1;
  std::vector<std::uint8_t> file;
  if (what == 0) {
    file = qd::gen::GgufValid(rng).bytes;
  } else {
    const std::vector<std::string> rules = qd::gen::GgufViolableRules();
    file = qd::gen::GgufViolation(rules[(what - 1) % rules.size()], rng).bytes;
  }
  for (std::size_t at = 5; at + 3 <= size && !file.empty(); at += 3) {
    const std::size_t position = (data[at] | (std::size_t{data[at + 1]} << 8)) % file.size();
    file[position] ^= data[at + 2];
  }
  return file;
}

std::vector<std::uint8_t> GgufGeneratedInput(std::uint8_t what, std::uint32_t seed,
                                             const std::vector<std::uint8_t>& edits) {
  std::vector<std::uint8_t> input = {static_cast<std::uint8_t>((what << 1) | 1)};
  for (int i = 0; i < 4; ++i) input.push_back(static_cast<std::uint8_t>(seed >> (8 * i)));
  input.insert(input.end(), edits.begin(), edits.end());
  return input;
}

}  // namespace qd::fuzz
