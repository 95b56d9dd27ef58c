// writers.h: a Report or CampaignStats as text, JSON, JUnit XML, SARIF,
// Markdown or HTML.
//
// Every writer returns the whole document as a string; the caller decides
// where it goes. Text from the files under test (tensor names, messages) is
// escaped for the medium (escape.h), so no report can be broken or turned
// into terminal escapes by a hostile file.
//
//   auto format = qd::reports::ParseOutputFormat("sarif");
//   std::string doc = qd::reports::Render(*format, report);
//
// The JSON document:
//   {"findings":[{"rule","severity":"error"|"warning","file","tensor","field",
//                 "position":{"byte_offset","row","block","element"},"message"}],
//    "summary":{"files","refused","errors","warnings","divergences","by_rule":{}},
//    "divergences":[{"file","signature","detail"}]}
// with null for an absent tensor, field or position. A diff report adds
//    "verdicts":[{"file","format","codec","oracle"}].
#ifndef QUANTDIFF_REPORTS_WRITERS_H_
#define QUANTDIFF_REPORTS_WRITERS_H_

#include <optional>
#include <string>
#include <string_view>

#include "quantdiff/plain_data.h"
#include "reports/report.h"

namespace qd::reports {

enum class OutputFormat { kText, kJson, kJUnit, kSarif, kMarkdown, kHtml };

// "text", "json", "junit", "sarif", "markdown", "html"; nullopt otherwise.
std::optional<OutputFormat> ParseOutputFormat(std::string_view name);
// The names ParseOutputFormat knows, for usage messages: "text|json|...".
std::string_view OutputFormatNames();

// "RULE severity tensor=... field=... offset=... row=... block=... element=...: message",
// absent parts left out, escaped for a terminal.
std::string FindingLine(const qd::Finding& finding);

// In every writer a finding is reported against the file it names
// (Finding::file: a config source for CFG-* findings), else the file read;
// JSON adds "input", the file read, when the two differ.
// One line per finding ("file: " + FindingLine), "file: ok (format)" for a
// file with none, the verdicts and divergences of a diff, then a summary.
std::string WriteText(const Report& report);
std::string WriteJson(const Report& report);
// One testsuite, one testcase per file, one <failure> per error finding and
// per divergence; warnings go to the testcase's <system-out>.
std::string WriteJUnit(const Report& report);
// SARIF 2.1.0: one run, the whole rule catalogue as the driver's rules, one
// result per finding and per divergence with the file's byte offset.
std::string WriteSarif(const Report& report);
// For a CI job summary: the summary line, one table row per file (verdict
// and findings), the counts per rule (report_pages.cc).
std::string WriteMarkdown(const Report& report);
// One self-contained page (html_page.h): counts per format, a matrix of
// rules x files coloured by the finding's severity, and each file's
// findings (report_pages.cc).
std::string WriteHtml(const Report& report);
std::string Render(OutputFormat format, const Report& report);

// The campaign for a person (OUT/summary.txt and the end of the run) and for
// a program (OUT/report.json).
std::string CampaignText(const CampaignStats& stats);
std::string CampaignJson(const CampaignStats& stats);

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_WRITERS_H_
