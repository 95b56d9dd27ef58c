// model_dir_input.h: the input format of the model_dir_diff fuzz target: a
// whole model directory (docs/model_dir.md 1) in one byte string, framed so
// that libFuzzer's inserts and erases inside a file keep the other entries
// intact (no length fields to fall out of step).
//
// An input is entries joined by kModelDirSeparator:
//   ENTRY SEP ENTRY SEP ...
// and an entry is   [kind byte][name bytes] '/' [file bytes]
//   kind 'r' regular, 'e' escaping, 'o' other (any other byte: byte % 3 in
//   that order); the name runs to the first '/' (an entry name never holds
//   one); the file bytes are the rest of the entry, given to a regular entry
//   only. Entries whose name is empty, ".", "..", or holds a NUL are dropped
//   (no directory lists them), and so is a repeated name (the first stays).
// The listing's views point into the input itself: no copy, no disk.
//
//   const std::vector<std::uint8_t> input = qd::fuzz::ModelDirInput(generated_dir);
//   const qd::ModelDirListing listing = qd::fuzz::ModelDirListingFromInput(input.data(), input.size());
#ifndef QUANTDIFF_FUZZ_COMMON_MODEL_DIR_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_MODEL_DIR_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "generators/generated.h"
#include "quantdiff/plain_data.h"

namespace qd::fuzz {

// Between two entries; also a dictionary token (fuzz/model_dir.dict), so
// the fuzzer can split an entry in two.
inline constexpr std::string_view kModelDirSeparator = "\n@qd-entry@\n";

// The directory as given: findings name "fuzz-dir/<entry>".
inline constexpr std::string_view kModelDirName = "fuzz-dir";

// The listing an input stands for, sorted by name bytes, names unique.
qd::ModelDirListing ModelDirListingFromInput(const std::uint8_t* data, std::size_t size);

// The input standing for DIR (its entries in the order given).
std::vector<std::uint8_t> ModelDirInput(const qd::gen::GeneratedDir& dir);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_MODEL_DIR_INPUT_H_
