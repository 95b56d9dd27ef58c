// pt_violations.h: the builders of pt_pickle_violations.cc, one a rule, for
// the rule -> builder table kPtRules in pt_violations.cc (internal to
// generators/pt*.cc). Each makes a .pt file that breaks its rule of
// docs/pt.md section 9 with no earlier check of section 8 failing; r is the
// rule, passed on as the expected rule.
#ifndef QUANTDIFF_GENERATORS_PT_VIOLATIONS_H_
#define QUANTDIFF_GENERATORS_PT_VIOLATIONS_H_

#include <string>

#include "generators/generated.h"

namespace qd::gen::pt_gen {

Generated ViolatePt011(const std::string& r, Rng& rng);  // globals, REDUCE, BUILD, instance opcodes
Generated ViolatePt012(const std::string& r, Rng& rng);  // limits
Generated ViolatePt013(const std::string& r, Rng& rng);  // opcodes, memo, UTF-8, containers, framing
Generated ViolatePt014(const std::string& r, Rng& rng);  // reduction arguments, BUILD state
Generated ViolatePt015(const std::string& r, Rng& rng);  // persistent IDs
Generated ViolatePt016(const std::string& r, Rng& rng);  // tensor geometry
Generated ViolatePt017(const std::string& r, Rng& rng);  // the state dict's keys

}  // namespace qd::gen::pt_gen

#endif  // QUANTDIFF_GENERATORS_PT_VIOLATIONS_H_
