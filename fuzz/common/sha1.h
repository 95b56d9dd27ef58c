// sha1.h: SHA-1 (FIPS 180-4) of a byte string, for naming corpus files
// `<rule-or-valid>-<first 8 hex digits of the SHA-1>` (DESIGN.md), the same
// digits `sha1sum FILE | cut -c1-8` prints.
//
//   std::string name = "RBQ-005-" + qd::fuzz::Sha1Hex(bytes).substr(0, 8);
#ifndef QUANTDIFF_FUZZ_COMMON_SHA1_H_
#define QUANTDIFF_FUZZ_COMMON_SHA1_H_

#include <cstdint>
#include <string>
#include <vector>

namespace qd::fuzz {

// 40 lowercase hex digits.
std::string Sha1Hex(const std::vector<std::uint8_t>& bytes);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_SHA1_H_
