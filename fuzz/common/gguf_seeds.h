// gguf_seeds.h: the deterministic seed inputs of gguf_file_diff, with the
// oracle's reading of each (what make_seeds.cc names them by).
//
//   for (const qd::fuzz::GgufSeed& s : qd::fuzz::GgufFileSeeds()) write(s.input);
#ifndef QUANTDIFF_FUZZ_COMMON_GGUF_SEEDS_H_
#define QUANTDIFF_FUZZ_COMMON_GGUF_SEEDS_H_

#include <cstdint>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::fuzz {

struct GgufSeed {
  std::vector<std::uint8_t> input;
  qd::Outcome oracle;
};

std::vector<GgufSeed> GgufFileSeeds();

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_GGUF_SEEDS_H_
