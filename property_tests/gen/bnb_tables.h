// bnb_tables.h: the bitsandbytes 4-bit code tables as the tests write them,
// retyped by hand from ../shared/peer/bnb/TABLES.json (nf4.values[code].hex,
// fp4.values[code].hex), which records get_4bit_type() of bitsandbytes; spec
// 000 (../shared/specs/000_0c91ab05e721f99e.txt) defines the 16 NF4 levels
// and docs/bnb.md "Decoding" and "FP4 code 8" say which table decodes.
// Expected values built from these never come from a reader's own table;
// property_tests/bnb_properties.cc re-checks the transcription against
// TABLES.json whenever the file is there.
//
//   float v = qdtest::BnbTableValue(/*fp4=*/false, 15);   // 1.0f
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_BNB_TABLES_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_BNB_TABLES_H_

#include <cstdint>

#include "property_tests/gen/half.h"

namespace qdtest {

// TABLES.json nf4.values[code].hex: get_4bit_type("nf4").
inline constexpr std::uint32_t kNf4Hex[16] = {
    0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f, 0xbdba7871, 0x00000000,
    0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a, 0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000};
// TABLES.json fp4.values[code].hex: get_4bit_type("fp4"); code 8 is +0.0
// (bnb's Python literal -0 is the integer 0; docs/bnb.md "FP4 code 8").
inline constexpr std::uint32_t kFp4Hex[16] = {
    0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000, 0x3eaaaaab, 0x3f000000, 0x3e2aaaab, 0x3e800000,
    0x00000000, 0xbbaaaaab, 0xbf2aaaab, 0xbf800000, 0xbeaaaaab, 0xbf000000, 0xbe2aaaab, 0xbe800000};

inline float BnbTableValue(bool fp4, int code) { return BitsFloat((fp4 ? kFp4Hex : kNf4Hex)[code]); }

}  // namespace qdtest

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_BNB_TABLES_H_
