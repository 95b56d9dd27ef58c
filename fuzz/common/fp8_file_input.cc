// fp8_file_input.cc: builds the file and config sources an fp8_file_diff
// input stands for, and its seeds (see the header).
#include "fuzz/common/fp8_file_input.h"

#include <array>

#include "fuzz/common/gptq_file_input.h"
#include "generators/generators.h"

namespace qd::fuzz {
namespace {

std::array<std::uint8_t, kFp8FileTailSize> Tail(bool raw, std::uint8_t rule, std::uint32_t seed) {
  return {static_cast<std::uint8_t>(raw ? 1 : 0), rule, static_cast<std::uint8_t>(seed),
          static_cast<std::uint8_t>(seed >> 8), static_cast<std::uint8_t>(seed >> 16),
          static_cast<std::uint8_t>(seed >> 24), 0, 0};
}

}  // namespace

Fp8Case Fp8CaseFromInput(const std::uint8_t* data, std::size_t size) {
  const std::size_t body = size < kFp8FileTailSize ? size : size - kFp8FileTailSize;
  if (size < kFp8FileTailSize || (data[body] & 1) != 0) {
    GptqCase raw = GptqRawCase(data, body);
    return Fp8Case{std::move(raw.file), std::move(raw.configs)};
  }
  const std::uint8_t* t = data + body;
  const std::uint32_t seed = static_cast<std::uint32_t>(t[2]) | (static_cast<std::uint32_t>(t[3]) << 8) |
                             (static_cast<std::uint32_t>(t[4]) << 16) | (static_cast<std::uint32_t>(t[5]) << 24);
  gen::Rng rng(seed);
  const std::vector<std::string> rules = gen::Fp8ViolableRules();
  gen::Generated g = t[1] == 0 ? gen::Fp8Valid(rng) : gen::Fp8Violation(rules[(t[1] - 1u) % rules.size()], rng);
  Fp8Case c{std::move(g.bytes), std::move(g.side_files)};
  constexpr std::size_t kMaxEdits = 32;
  for (std::size_t i = 0; i + 3 <= body && i / 3 < kMaxEdits && !c.file.empty(); i += 3) {
    const std::size_t distance = static_cast<std::size_t>(data[i] | (data[i + 1] << 8)) % c.file.size();
    c.file[c.file.size() - 1 - distance] = data[i + 2];
  }
  return c;
}

std::vector<std::pair<std::string, std::vector<std::uint8_t>>> Fp8FileSeedInputs() {
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> seeds;
  auto tail_only = [](bool raw, std::uint8_t rule, std::uint32_t seed) {
    const auto tail = Tail(raw, rule, seed);
    return std::vector<std::uint8_t>(tail.begin(), tail.end());
  };
  for (std::uint32_t seed = 1; seed <= 3; ++seed) seeds.emplace_back("valid", tail_only(false, 0, seed));
  const std::vector<std::string> rules = gen::Fp8ViolableRules();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    seeds.emplace_back(rules[i], tail_only(false, static_cast<std::uint8_t>(i + 1), 800 + static_cast<std::uint32_t>(i)));
  }
  for (std::uint64_t seed = 11; seed <= 12; ++seed) {
    gen::Rng rng(seed);
    const gen::Generated g = gen::Fp8Valid(rng);
    std::vector<std::uint8_t> input = GptqRawInput(g.side_files, g.bytes);
    input.resize(input.size() - kGptqFileTailSize);  // the raw layout without gptq's tail
    const auto tail = Tail(true, 0, 0);
    input.insert(input.end(), tail.begin(), tail.end());
    seeds.emplace_back("valid", std::move(input));
  }
  // One edit: 0xFF is a NaN of E4M3FN and E5M2 and a value of the others.
  std::vector<std::uint8_t> edited = {0, 0, 0xFF};
  const auto tail = Tail(false, 0, 4);
  edited.insert(edited.end(), tail.begin(), tail.end());
  seeds.emplace_back("edited", std::move(edited));
  return seeds;
}

}  // namespace qd::fuzz
