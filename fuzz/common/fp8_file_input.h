// fp8_file_input.h: the input format of the fp8_file_diff fuzz target and
// its seeds.
//
// An input is   [edits ...][8-byte tail]
// The tail picks an instance of the registry's FP8 generator
// (generators/fp8.cc): t[0] bit 0 raw mode; t[1] 0 a valid file, else the
// violation of Fp8ViolableRules()[(t[1] - 1) % count]; t[2..5] the generator
// seed (little endian); t[6..7] reserved. The leading bytes are edits of 3
// bytes (d0, d1, v): the file byte at distance (d0 | d1 << 8) from its end
// (modulo its size) becomes v: the codes and inverse scales lie at the end
// of a generated file, after its header. At most 32 edits.
// In raw mode the bytes before the tail are gptq_file_diff's raw layout
// ([u8 n][n x (u8 name, u16 length, bytes)] then the file as it is).
//
//   qd::fuzz::Fp8Case c = qd::fuzz::Fp8CaseFromInput(data, size);
#ifndef QUANTDIFF_FUZZ_COMMON_FP8_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_FP8_FILE_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::fuzz {

inline constexpr std::size_t kFp8FileTailSize = 8;

struct Fp8Case {
  std::vector<std::uint8_t> file;
  std::vector<qd::SideFile> configs;
};

Fp8Case Fp8CaseFromInput(const std::uint8_t* data, std::size_t size);

// The seeds of fp8_file_diff, each with what it was made to be ("valid" or
// the rule): three valid files through the tail, one instance of every
// violable rule, two raw valid instances, and one edit that puts a NaN code
// into a valid file's last weight byte.
std::vector<std::pair<std::string, std::vector<std::uint8_t>>> Fp8FileSeedInputs();

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_FP8_FILE_INPUT_H_
