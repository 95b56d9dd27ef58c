// conformance.h: what `quantdiff test-impl` found about another
// implementation (issue 13), independent of how it is printed.
//
// One VectorRun per vector run: the vector (format, tcId, rule group, file),
// what the vector asks for, what the implementation did, and the judgement.
// RenderConformance prints the same facts in each --report format: text for
// a terminal, JSON for programs, JUnit XML (one testsuite per format, one
// testcase per vector) and SARIF 2.1.0 for CI tools, Markdown for a CI job
// summary, and one self-contained HTML page for a person.
//
//   qd::reports::ConformanceReport report{command_template, {}};
//   report.runs.push_back(run);
//   std::string doc = qd::reports::RenderConformance(qd::reports::OutputFormat::kHtml, report);
#ifndef QUANTDIFF_REPORTS_CONFORMANCE_H_
#define QUANTDIFF_REPORTS_CONFORMANCE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/writers.h"

namespace qd::reports {

// The first element where an accepted output differs from the expected
// tensors, both values as binary32 bit patterns.
struct FirstDifference {
  std::string tensor;  // from the file under test: hostile
  std::uint64_t element = 0;
  std::uint32_t expected_bits = 0;
  std::uint32_t got_bits = 0;
};

// "0x3f800000".
std::string Hex32(std::uint32_t bits);
// The binary32 value of BITS, %.9g: "1", "-0", "nan", "inf".
std::string Binary32Text(std::uint32_t bits);

// The judgement every conforming run gets; anything else is a failure class
// ("accepted-invalid", "wrong-output", "crashed", ...: test-impl --help).
inline constexpr std::string_view kPassOutcome = "pass";

struct VectorRun {
  std::string format;       // registry name
  std::uint64_t tc_id = 0;  // 1, 2, ... within the format
  std::string rule;         // the vector's rule group; "" for the valid group
  std::string file;         // relative to the vector folder
  std::string expected;     // "refuse with ST-004", "accept and decode 2 tensors"
  std::string got;          // "exit 1 naming ST-004", "signal 11", ...
  std::string outcome;      // kPassOutcome or a failure class
  std::string detail;       // why, for a failure (may quote the implementation)
  std::optional<FirstDifference> difference;  // wrong-output, signed-zero
  std::string reproducer;   // one shell line running this vector alone
  bool Passed() const { return outcome == kPassOutcome; }
  // "valid" for the valid group, else the rule ID.
  std::string Group() const { return rule.empty() ? "valid" : rule; }
};

struct ConformanceReport {
  std::string command;  // the --cmd template, as given
  std::vector<VectorRun> runs;
};

// Pass and fail counts keyed by (format, group), in key order.
struct PassFail {
  std::uint64_t pass = 0;
  std::uint64_t fail = 0;
};
std::map<std::pair<std::string, std::string>, PassFail> CountByGroup(const ConformanceReport& report);
std::map<std::string, PassFail> CountByFormat(const ConformanceReport& report);

// One implementation's test-impl results as `quantdiff report-merge` reads
// them back from its JSON report: a column of the rules x implementations
// page.
struct ImplementationResults {
  std::string name;     // the column's label
  std::string command;  // what was tested (the report's "command")
  std::uint64_t vectors = 0;
  std::uint64_t failed = 0;
  // Keyed by (format, group): the valid group as "valid", else the rule ID.
  std::map<std::pair<std::string, std::string>, PassFail> groups;
};

// Several implementations side by side: rows are the rule groups of every
// format any of them ran, columns the implementations, each cell its pass
// and fail counts, coloured all pass, all fail, mixed or not run. HTML (one
// self-contained page, table id "impl-matrix") or text.
std::string ComparisonHtml(const std::vector<ImplementationResults>& implementations);
std::string ComparisonText(const std::vector<ImplementationResults>& implementations);

// The document in FORMAT (every OutputFormat).
std::string RenderConformance(OutputFormat format, const ConformanceReport& report);

// The HTML page alone (conformance_html.cc).
std::string ConformanceHtml(const ConformanceReport& report);

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_CONFORMANCE_H_
