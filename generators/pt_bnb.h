// pt_bnb.h: the bitsandbytes rules a .pt file can break, for generators/pt.cc
// (the bitsandbytes readers run on a .pt file's tensor table: docs/pt.md 6.4,
// section 7 for the QuantState list layout).
#ifndef QUANTDIFF_GENERATORS_PT_BNB_H_
#define QUANTDIFF_GENERATORS_PT_BNB_H_

#include <string>
#include <vector>

#include "generators/generated.h"

namespace qd::gen {

// BNB-001, BNB-002, BNB-004, BNB-101..BNB-106, BNB-108 (no BNB-107: the 8-bit
// blockwise layout needs __metadata__, which a .pt file has not).
std::vector<std::string> PtBnbViolableRules();
// A .pt file (random state dict content plus bitsandbytes layers) that
// breaks `rule` in one layer, list layout (docs/pt.md 7.4) or HF / GPT-QModel /
// int8 tensors (docs/bnb.md), with no earlier check of either page failing.
Generated PtBnbViolation(const std::string& rule, Rng& rng);

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_PT_BNB_H_
