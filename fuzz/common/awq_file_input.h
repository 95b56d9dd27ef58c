// awq_file_input.h: the input format of the awq_file_diff fuzz target.
//
// An input is   [file ops ...][8-byte tail]
// The tail picks an instance of the registry's AWQ generator
// (generators/awq.cc): t[0] bit 0 raw mode; t[1] 0 a valid file, else the
// violation of AwqViolableRules()[(t[1] - 1) % count]; t[2..5] the generator
// seed (little endian); t[6..7] reserved. The leading bytes are ops of 4
// bytes (op, a, b, c) applied in order to the written file and its first
// config source: set a file byte, flip a file bit, cut bytes off the end,
// set a config byte, drop the last config source.
// In raw mode the bytes before the tail are gptq_file_diff's raw layout
// ([u8 n][n x (u8 name, u16 length, bytes)] then the file as it is), so
// whole instances reach the readers.
//
//   std::vector<std::uint8_t> input = qd::fuzz::AwqRawInput(g.side_files, g.bytes);
//   qd::fuzz::AwqCase c = qd::fuzz::AwqCaseFromInput(input.data(), input.size());
#ifndef QUANTDIFF_FUZZ_COMMON_AWQ_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_AWQ_FILE_INPUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::fuzz {

inline constexpr std::size_t kAwqFileTailSize = 8;

enum class AwqOp : std::uint8_t { kSetByte, kFlipBit, kTruncate, kConfigByte, kDropSource, kCount };

struct AwqCase {
  std::vector<std::uint8_t> file;
  std::vector<qd::SideFile> configs;
};

// A generator-mode tail: RULE 0 valid, else 1 + index into AwqViolableRules().
std::array<std::uint8_t, kAwqFileTailSize> AwqTail(std::uint8_t rule, std::uint32_t seed);
// A raw-mode input holding these sources and this file.
std::vector<std::uint8_t> AwqRawInput(const std::vector<qd::SideFile>& sources,
                                      const std::vector<std::uint8_t>& file);

AwqCase AwqCaseFromInput(const std::uint8_t* data, std::size_t size);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_AWQ_FILE_INPUT_H_
