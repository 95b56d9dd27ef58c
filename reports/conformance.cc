#include "reports/conformance.h"

#include <cstdio>
#include <cstring>

#include "reports/escape.h"
#include "reports/json_parts.h"
#include "reports/rules.h"

namespace qd::reports {
namespace {

// SARIF's rule for a valid or acceptable vector, which breaks no catalogue
// rule: it must be accepted and decode to the oracle's tensors bit for bit.
constexpr std::string_view kValidRule = "QD-VALID";

// "tensor NAME element 7: expected 0x3f800000 (1), got 0xbf800000 (-1)", unescaped.
std::string DifferenceText(const FirstDifference& d) {
  return "tensor " + d.tensor + " element " + std::to_string(d.element) + ": expected " +
         Hex32(d.expected_bits) + " (" + Binary32Text(d.expected_bits) + "), got " + Hex32(d.got_bits) +
         " (" + Binary32Text(d.got_bits) + ")";
}

std::string Count(std::uint64_t n) { return std::to_string(n); }

// Every fact about a failing run, one per line, unescaped (for JUnit's
// failure text).
std::string FailureBody(const VectorRun& r) {
  std::string body = "vector: " + r.file + "\nexpected: " + r.expected + "\ngot: " + r.got + "\n" +
                     r.outcome + ": " + r.detail + "\n";
  if (r.difference) body += "first difference: " + DifferenceText(*r.difference) + "\n";
  return body + "reproduce: " + r.reproducer + "\n";
}

std::uint64_t Failed(const ConformanceReport& report) {
  std::uint64_t failed = 0;
  for (const VectorRun& r : report.runs) failed += r.Passed() ? 0 : 1;
  return failed;
}

// ---------------------------------------------------------------------------

std::string Text(const ConformanceReport& report) {
  std::string text;
  for (const auto& [key, n] : CountByGroup(report)) {
    text += ForTerminal(key.first) + " " + ForTerminal(key.second) + ": " + Count(n.pass) + " pass, " +
            Count(n.fail) + " fail\n";
  }
  std::map<std::string, std::uint64_t> by_outcome;
  for (const VectorRun& r : report.runs) {
    ++by_outcome[r.outcome];
    if (r.Passed()) continue;
    text += "FAIL " + ForTerminal(r.format) + " tcId " + Count(r.tc_id) + " (" + ForTerminal(r.Group()) + ", " +
            ForTerminal(r.file) + "): " + ForTerminal(r.outcome) + ": " + ForTerminal(r.detail) + "\n";
    if (r.difference) text += "  first difference: " + ForTerminal(DifferenceText(*r.difference)) + "\n";
    // Raw, to be pasted into a shell: it holds only the user's own --cmd.
    text += "  reproduce: " + r.reproducer + "\n";
  }
  text += Count(report.runs.size()) + " vectors:";
  for (const auto& [name, n] : by_outcome) text += " " + Count(n) + " " + ForTerminal(name);
  return text + "\n";
}

Json DifferenceJson(const FirstDifference& d) {
  return {{"tensor", Str(d.tensor)},         {"element", d.element},
          {"expected_bits", Hex32(d.expected_bits)}, {"got_bits", Hex32(d.got_bits)},
          {"expected_value", Binary32Text(d.expected_bits)}, {"got_value", Binary32Text(d.got_bits)}};
}

std::string JsonDoc(const ConformanceReport& report) {
  Json groups = Json::array();
  for (const auto& [key, n] : CountByGroup(report)) {
    groups.push_back({{"format", Str(key.first)},
                      {"rule", key.second == "valid" ? Json(nullptr) : Str(key.second)},
                      {"pass", n.pass},
                      {"fail", n.fail}});
  }
  Json failures = Json::array();
  for (const VectorRun& r : report.runs) {
    if (r.Passed()) continue;
    Json f = {{"format", Str(r.format)}, {"tcId", r.tc_id},          {"file", Str(r.file)},
              {"rule", StrOrNull(r.rule)}, {"outcome", Str(r.outcome)}, {"detail", Str(r.detail)},
              {"expected", Str(r.expected)}, {"got", Str(r.got)}};
    if (r.difference) f["difference"] = DifferenceJson(*r.difference);
    f["reproducer"] = Str(r.reproducer);
    failures.push_back(std::move(f));
  }
  const Json doc = {{"command", Str(report.command)}, {"vectors", report.runs.size()},
                    {"failed", Failed(report)},       {"groups", std::move(groups)},
                    {"failures", std::move(failures)}};
  return Dump(doc);
}

// One testsuite per format, one testcase per vector (classname names the
// rule group, so CI tools list them per rule), a <failure> per failing one.
std::string JUnit(const ConformanceReport& report) {
  std::map<std::string, std::string> cases;  // by format
  for (const VectorRun& r : report.runs) {
    std::string& out = cases[r.format];
    out += "    <testcase classname=\"quantdiff.test-impl." + ForXml(r.format) + "." + ForXml(r.Group()) +
           "\" name=\"tcId " + Count(r.tc_id) + " " + ForXml(r.file) + "\"";
    if (r.Passed()) {
      out += "/>\n";
      continue;
    }
    out += ">\n      <failure type=\"" + ForXml(r.outcome) + "\" message=\"" +
           ForXml(r.outcome + ": " + r.detail) + "\">" + ForXml(FailureBody(r)) + "</failure>\n    </testcase>\n";
  }
  std::string suites;
  for (const auto& [format, n] : CountByFormat(report)) {
    suites += "  <testsuite name=\"quantdiff test-impl " + ForXml(format) + "\" tests=\"" + Count(n.pass + n.fail) +
              "\" failures=\"" + Count(n.fail) + "\" errors=\"0\" skipped=\"0\">\n" + cases[format] +
              "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"quantdiff test-impl\" tests=\"" +
         Count(report.runs.size()) + "\" failures=\"" + Count(Failed(report)) + "\" errors=\"0\">\n" + suites +
         "</testsuites>\n";
}

// Every vector is a result: kind "pass" (level "none", as SARIF 3.27.9
// requires for a kind other than "fail") or "fail" (level "error"), under
// its rule group's ID and located at the vector's input file.
std::string Sarif(const ConformanceReport& report) {
  Json rules = SarifCatalogueRules();
  const auto valid_index = static_cast<std::int64_t>(rules.size());
  rules.push_back(SarifToolRule(kValidRule, "quantdiff/valid",
                                "A valid or acceptable vector is accepted and decodes to the expected "
                                "tensors bit for bit."));

  Json results = Json::array();
  for (const VectorRun& r : report.runs) {
    Json result = Json::object();
    result["ruleId"] = r.rule.empty() ? Json(std::string(kValidRule)) : Str(r.rule);
    const std::int64_t index = r.rule.empty() ? valid_index : CatalogueIndex(r.rule);
    if (index >= 0) result["ruleIndex"] = index;
    result["kind"] = r.Passed() ? "pass" : "fail";
    result["level"] = r.Passed() ? "none" : "error";
    result["message"] = {{"text", Str(r.Passed() ? "conforms: " + r.expected : r.outcome + ": " + r.detail)}};
    result["locations"] = SarifLocation(r.file, -1);
    Json props = {{"format", Str(r.format)}, {"tcId", r.tc_id}, {"outcome", Str(r.outcome)},
                  {"expected", Str(r.expected)}, {"got", Str(r.got)}};
    if (r.difference) props["difference"] = DifferenceJson(*r.difference);
    if (!r.Passed()) props["reproducer"] = Str(r.reproducer);
    result["properties"] = std::move(props);
    results.push_back(std::move(result));
  }
  const Json properties = {{"command", Str(report.command)},
                           {"vectors", report.runs.size()},
                           {"failed", Failed(report)}};
  return SarifLog(std::move(rules), std::move(results), properties);
}

// A GitHub step summary: the verdict, per-format and per-rule tables, and
// every failing vector with its reproducer.
std::string Markdown(const ConformanceReport& report) {
  const std::uint64_t failed = Failed(report);
  std::string md = "## quantdiff test-impl: " +
                   (failed == 0 ? "conforms, " + Count(report.runs.size()) + " vectors pass"
                                : "does not conform, " + Count(failed) + " of " + Count(report.runs.size()) +
                                      " vectors fail") +
                   "\n\n" + MarkdownCodeBlock(report.command, "sh") + "\n";
  md += "| format | vectors | pass | fail |\n|---|--:|--:|--:|\n";
  for (const auto& [format, n] : CountByFormat(report)) {
    md += "| " + ForMarkdown(format) + " | " + Count(n.pass + n.fail) + " | " + Count(n.pass) + " | " +
          Count(n.fail) + " |\n";
  }
  md += "\n### Per rule\n\n| | format | rule | pass | fail |\n|---|---|---|--:|--:|\n";
  for (const auto& [key, n] : CountByGroup(report)) {
    md += std::string("| ") + (n.fail == 0 ? "pass" : "**FAIL**") + " | " + ForMarkdown(key.first) + " | " +
          ForMarkdown(key.second) + " | " + Count(n.pass) + " | " + Count(n.fail) + " |\n";
  }
  if (failed == 0) return md;
  md += "\n### Failing vectors\n";
  for (const VectorRun& r : report.runs) {
    if (r.Passed()) continue;
    md += "\n**" + ForMarkdown(r.format) + " tcId " + Count(r.tc_id) + "** (" + ForMarkdown(r.Group()) + ", " +
          ForMarkdown(r.file) + "): " + ForMarkdown(r.outcome) + ", " + ForMarkdown(r.detail) + "\n";
    md += "expected " + ForMarkdown(r.expected) + "; got " + ForMarkdown(r.got) + "\n";
    if (r.difference) md += "first difference: " + ForMarkdown(DifferenceText(*r.difference)) + "\n";
    md += "\n" + MarkdownCodeBlock(r.reproducer, "sh");
  }
  return md;
}

}  // namespace

std::string Hex32(std::uint32_t bits) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%08x", bits);
  return buffer;
}

std::string Binary32Text(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.9g", static_cast<double>(value));
  return buffer;
}

std::map<std::pair<std::string, std::string>, PassFail> CountByGroup(const ConformanceReport& report) {
  std::map<std::pair<std::string, std::string>, PassFail> groups;
  for (const VectorRun& r : report.runs) {
    PassFail& n = groups[{r.format, r.Group()}];
    (r.Passed() ? n.pass : n.fail) += 1;
  }
  return groups;
}

std::map<std::string, PassFail> CountByFormat(const ConformanceReport& report) {
  std::map<std::string, PassFail> formats;
  for (const VectorRun& r : report.runs) (r.Passed() ? formats[r.format].pass : formats[r.format].fail) += 1;
  return formats;
}

std::string RenderConformance(OutputFormat format, const ConformanceReport& report) {
  switch (format) {
    case OutputFormat::kText: return Text(report);
    case OutputFormat::kJson: return JsonDoc(report);
    case OutputFormat::kJUnit: return JUnit(report);
    case OutputFormat::kSarif: return Sarif(report);
    case OutputFormat::kMarkdown: return Markdown(report);
    case OutputFormat::kHtml: return ConformanceHtml(report);
  }
  return Text(report);
}

}  // namespace qd::reports
