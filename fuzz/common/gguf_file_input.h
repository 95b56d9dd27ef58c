// gguf_file_input.h: how a gguf_file_diff input stands for a .gguf file,
// shared by the target and the seed maker so that seeds decode as written.
//
// Byte 0 even: the rest of the input is the file as it is.
// Byte 0 odd: a generated file. Bytes 1..4 are the generator seed (little
// endian); byte 0 >> 1 picks what to generate: 0 a valid file, k >= 1 the
// violation of rule k - 1 of qd::gen::GgufViolableRules() (modulo their
// count). The rest is a list of 3-byte edits applied to that file: a
// 16-bit position (little endian, modulo the file size) and a byte to XOR
// there.
//
//   const std::vector<std::uint8_t> file = qd::fuzz::GgufFileFromInput(data, size);
#ifndef QUANTDIFF_FUZZ_COMMON_GGUF_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_GGUF_FILE_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qd::fuzz {

std::vector<std::uint8_t> GgufFileFromInput(const std::uint8_t* data, std::size_t size);

// An input in the generated form: what (0 valid, k rule k - 1), seed, edits.
std::vector<std::uint8_t> GgufGeneratedInput(std::uint8_t what, std::uint32_t seed,
                                             const std::vector<std::uint8_t>& edits = {});

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_GGUF_FILE_INPUT_H_
