// gptq_internal.h: what the two units of the GPTQ oracle share and nothing
// else (not part of the oracle's interface; include it from oracles/gptq.cc
// and oracles/gptq_config.cc only). It exists because the config steps
// (gptq_config.cc: docs/gptq.md sections 1 and 3, C1..C11) and the layer
// checks (gptq.cc: L1..L10) both report findings the same way and both quote
// values in messages; without it these would sit in two anonymous namespaces
// as two copies.
#ifndef QUANTDIFF_ORACLES_GPTQ_INTERNAL_H_
#define QUANTDIFF_ORACLES_GPTQ_INTERNAL_H_

#include <cstdint>
#include <string>

#include "oracles/finding.h"
#include "oracles/gptq.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::gptq_internal {

constexpr std::int64_t kNoOffset = -1;  // byte_offset of config findings

using Settings = QuantSettings;

inline std::string Quote(const std::string& text) { return "\"" + text + "\""; }

// Section 2 of oracles/gptq.cc's plan: findings.
class Reporter {
 public:
  explicit Reporter(qd::Outcome* outcome) : outcome_(outcome) {}

  // Appends an error (always the last finding); returns false so that a
  // check can end with `return report.Error(...)`.
  bool Error(const char* rule, const std::string& file, const std::string& tensor,
             const std::string& field, std::int64_t byte_offset, const std::string& message,
             std::int64_t row = -1, std::int64_t element = -1) {
    Add(rule, qd::Severity::kError, file, tensor, field, byte_offset, message, row, element);
    outcome_->refused = true;
    return false;
  }

  void Warning(const char* rule, const std::string& file, const std::string& tensor,
               const std::string& field, std::int64_t byte_offset, const std::string& message,
               std::int64_t row = -1, std::int64_t element = -1) {
    Add(rule, qd::Severity::kWarning, file, tensor, field, byte_offset, message, row, element);
  }

 private:
  void Add(const char* rule, qd::Severity severity, const std::string& file,
           const std::string& tensor, const std::string& field, std::int64_t byte_offset,
           const std::string& message, std::int64_t row, std::int64_t element) {
    qd::Finding finding =
        NewFinding(rule, severity, file, tensor, field.c_str(), byte_offset, message);
    finding.row = row;
    finding.element = element;  // block stays -1: GPTQ has no blocks
    outcome_->findings.push_back(finding);
  }

  qd::Outcome* outcome_;
};

}  // namespace qd::oracle::gptq_internal

#endif  // QUANTDIFF_ORACLES_GPTQ_INTERNAL_H_
