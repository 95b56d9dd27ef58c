// outcome_text.h: an outcome as one line for a failure message (the verdict,
// then every finding as qd::harness::Describe gives it) and its error count,
// for the property tests that judge readers' outcomes.
//
//   RC_ASSERT(qdtest::ErrorCount(o) == 0);  // else print qdtest::Findings(o)
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_OUTCOME_TEXT_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_OUTCOME_TEXT_H_

#include <string>

#include "harness/differ.h"
#include "quantdiff/plain_data.h"

namespace qdtest {

inline std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) s += " | " + qd::harness::Describe(f);
  return s;
}

inline int ErrorCount(const qd::Outcome& o) {
  int n = 0;
  for (const qd::Finding& f : o.findings) n += f.severity == qd::Severity::kError;
  return n;
}

}  // namespace qdtest

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_OUTCOME_TEXT_H_
