// finding.h: how every oracle reader writes a qd::Finding (the oracle's own;
// the codecs have theirs).
#ifndef QUANTDIFF_ORACLES_FINDING_H_
#define QUANTDIFF_ORACLES_FINDING_H_

#include <cstdint>
#include <string>

#include "quantdiff/plain_data.h"

namespace qd::oracle {

// A finding with every field the caller knows; row, block and element are
// left at -1 for the caller to set when the rule names them.
inline qd::Finding NewFinding(const char* rule, qd::Severity severity, const std::string& file,
                              const std::string& tensor, const char* field,
                              std::int64_t byte_offset, const std::string& message) {
  qd::Finding finding;
  finding.rule = rule;
  finding.severity = severity;
  finding.file = file;
  finding.tensor = tensor;
  finding.field = field;
  finding.byte_offset = byte_offset;
  finding.message = message;
  return finding;
}

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_FINDING_H_
