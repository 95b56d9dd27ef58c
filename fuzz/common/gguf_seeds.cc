// gguf_seeds.cc: the gguf_file_diff seeds (fuzz/common/gguf_seeds.h): eight
// valid generated files, three instances of every rule, a few edited ones
// and the raw bytes of two valid files.
#include "fuzz/common/gguf_seeds.h"

#include "fuzz/common/gguf_file_input.h"
#include "generators/generators.h"
#include "harness/registry.h"

namespace qd::fuzz {

std::vector<GgufSeed> GgufFileSeeds() {
  std::vector<GgufSeed> seeds;
  for (std::uint32_t seed = 1; seed <= 8; ++seed) seeds.push_back({GgufGeneratedInput(0, seed), {}});
  const std::size_t rules = qd::gen::GgufViolableRules().size();
  for (std::size_t k = 0; k < rules; ++k) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      seeds.push_back({GgufGeneratedInput(static_cast<std::uint8_t>(k + 1), seed), {}});
    }
  }
  // Edits in the header counts, the first key's type and deep in the file.
  seeds.push_back({GgufGeneratedInput(0, 21, {9, 0, 0x40, 17, 0, 0x01}), {}});
  seeds.push_back({GgufGeneratedInput(0, 22, {0x30, 0, 0x08}), {}});
  seeds.push_back({GgufGeneratedInput(0, 23, {0x10, 0x01, 0xFF, 0x80, 0x00, 0x7F}), {}});
  for (std::uint64_t seed = 31; seed <= 32; ++seed) {
    qd::gen::Rng rng(seed);
    std::vector<std::uint8_t> raw = {0};
    const qd::gen::Generated g = qd::gen::GgufValid(rng);
    raw.insert(raw.end(), g.bytes.begin(), g.bytes.end());
    seeds.push_back({raw, {}});
  }
  for (GgufSeed& s : seeds) {
    const std::vector<std::uint8_t> file = GgufFileFromInput(s.input.data(), s.input.size());
    s.oracle = qd::harness::FindFormat("gguf")->oracle_read({file.data(), file.size()}, "input.gguf", {});
  }
  return seeds;
}

}  // namespace qd::fuzz
