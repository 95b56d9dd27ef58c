// bnb_test_tables.h: the 4-bit tables as the oracle tests write them by hand,
// copied from ../shared/peer/bnb/TABLES.json (nf4.values[code].hex,
// fp4.values[code].hex; FP4 code 8 is +0.0), so expected values in the
// oracle's tests never come from the oracle's own tables.
#ifndef QUANTDIFF_ORACLES_BNB_TEST_TABLES_H_
#define QUANTDIFF_ORACLES_BNB_TEST_TABLES_H_

#include <cstdint>
#include <vector>

namespace qd::oracle::test {

using Bits = std::vector<std::uint32_t>;

inline const Bits kNf4 = {0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f,
                          0xbdba7871, 0x00000000, 0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a,
                          0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000};
inline const Bits kFp4 = {0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000, 0x3eaaaaab, 0x3f000000,
                          0x3e2aaaab, 0x3e800000, 0x00000000, 0xbbaaaaab, 0xbf2aaaab, 0xbf800000,
                          0xbeaaaaab, 0xbf000000, 0xbe2aaaab, 0xbe800000};

}  // namespace qd::oracle::test

#endif  // QUANTDIFF_ORACLES_BNB_TEST_TABLES_H_
