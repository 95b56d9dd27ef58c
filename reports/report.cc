#include "reports/report.h"

namespace qd::reports {

std::string_view ToolVersion() { return QD_VERSION; }

Verdict VerdictOf(const qd::Outcome& outcome) {
  Verdict v;
  v.refused = outcome.refused;
  for (const qd::Finding& f : outcome.findings) {
    if (f.severity == qd::Severity::kWarning) {
      v.warning_rules.push_back(f.rule);
    } else if (v.error_rule.empty()) {
      v.error_rule = f.rule;
    }
  }
  return v;
}

std::string VerdictText(const Verdict& verdict) {
  std::string text;
  if (verdict.refused) {
    text = "refused " + (verdict.error_rule.empty() ? std::string("(no error finding)")
                                                    : verdict.error_rule);
    if (!verdict.warning_rules.empty()) text += " after warnings";
  } else {
    text = verdict.warning_rules.empty() ? "accepted" : "accepted with warnings";
  }
  for (std::size_t i = 0; i < verdict.warning_rules.size(); ++i) {
    text += (i == 0 ? " " : ",") + verdict.warning_rules[i];
  }
  return text;
}

FileReport FromOutcome(std::string path, std::string format, const qd::Outcome& outcome) {
  FileReport r;
  r.path = std::move(path);
  r.format = std::move(format);
  r.refused = outcome.refused;
  r.findings = outcome.findings;
  return r;
}

const std::string& FindingFile(const FileReport& file, const qd::Finding& finding) {
  return finding.file.empty() ? file.path : finding.file;
}

Summary Summarize(const Report& report) {
  Summary s;
  for (const FileReport& file : report.files) {
    ++s.files;
    if (file.refused) ++s.refused;
    if (file.divergence) ++s.divergences;
    for (const qd::Finding& f : file.findings) {
      if (f.severity == qd::Severity::kError) {
        ++s.errors;
      } else {
        ++s.warnings;
      }
      ++s.by_rule[f.rule];
    }
  }
  return s;
}

}  // namespace qd::reports
