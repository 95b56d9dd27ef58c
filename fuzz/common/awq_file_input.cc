// awq_file_input.cc: builds the file and config sources an awq_file_diff
// input stands for (see the header).
#include "fuzz/common/awq_file_input.h"

#include <string>

#include "fuzz/common/gptq_file_input.h"
#include "generators/generators.h"

namespace qd::fuzz {
namespace {

void Apply(AwqCase* c, AwqOp op, std::uint8_t a, std::uint8_t b, std::uint8_t v) {
  std::vector<std::uint8_t>& f = c->file;
  const std::size_t at = static_cast<std::size_t>(a | (b << 8));
  switch (op) {
    case AwqOp::kSetByte:
      if (!f.empty()) f[at % f.size()] = v;
      break;
    case AwqOp::kFlipBit: {
      if (f.empty()) break;
      const std::size_t bit = (at | (static_cast<std::size_t>(v) << 16)) % (8 * f.size());
      f[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      break;
    }
    case AwqOp::kTruncate:
      f.resize(f.size() - at % (f.size() + 1));
      break;
    case AwqOp::kConfigByte:
      if (!c->configs.empty() && !c->configs[0].bytes.empty()) {
        std::vector<std::uint8_t>& text = c->configs[0].bytes;
        text[at % text.size()] = v;
      }
      break;
    default:
      if (!c->configs.empty()) c->configs.pop_back();
      break;
  }
}

}  // namespace

std::array<std::uint8_t, kAwqFileTailSize> AwqTail(std::uint8_t rule, std::uint32_t seed) {
  return {0, rule, static_cast<std::uint8_t>(seed), static_cast<std::uint8_t>(seed >> 8),
          static_cast<std::uint8_t>(seed >> 16), static_cast<std::uint8_t>(seed >> 24), 0, 0};
}

std::vector<std::uint8_t> AwqRawInput(const std::vector<qd::SideFile>& sources,
                                      const std::vector<std::uint8_t>& file) {
  std::vector<std::uint8_t> out = GptqRawInput(sources, file);
  out.resize(out.size() - kGptqFileTailSize);  // the raw layout without gptq's tail
  std::array<std::uint8_t, kAwqFileTailSize> tail = {1, 0, 0, 0, 0, 0, 0, 0};
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

AwqCase AwqCaseFromInput(const std::uint8_t* data, std::size_t size) {
  if (size < kAwqFileTailSize || (data[size - kAwqFileTailSize] & 1) != 0) {
    const std::size_t body = size < kAwqFileTailSize ? size : size - kAwqFileTailSize;
    GptqCase raw = GptqRawCase(data, body);
    return AwqCase{std::move(raw.file), std::move(raw.configs)};
  }
  const std::uint8_t* t = data + size - kAwqFileTailSize;
  const std::uint32_t seed = static_cast<std::uint32_t>(t[2] | (t[3] << 8) | (t[4] << 16)) |
                             (static_cast<std::uint32_t>(t[5]) << 24);
  gen::Rng rng(seed);
  const std::vector<std::string> rules = gen::AwqViolableRules();
  const gen::Generated g = t[1] == 0 ? gen::AwqValid(rng)
                                     : gen::AwqViolation(rules[(t[1] - 1u) % rules.size()], rng);
  AwqCase c{g.bytes, g.side_files};
  constexpr std::size_t kMaxOps = 32;
  const std::size_t body = size - kAwqFileTailSize;
  for (std::size_t i = 0; i + 4 <= body && i / 4 < kMaxOps; i += 4) {
    Apply(&c, static_cast<AwqOp>(data[i] % static_cast<std::uint8_t>(AwqOp::kCount)), data[i + 1],
          data[i + 2], data[i + 3]);
  }
  return c;
}

}  // namespace qd::fuzz
