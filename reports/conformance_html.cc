// The test-impl report as one HTML page (conformance.h): the verdict, counts
// per format, the matrix of rule groups x vectors coloured by outcome, and a
// drill-down per failing vector with both bit patterns of its first
// differing element. Also report-merge's comparison of several
// implementations, rule groups x implementations, as a page or as text.
#include <algorithm>
#include <map>
#include <set>

#include "reports/conformance.h"
#include "reports/escape.h"
#include "reports/html_page.h"
#include "reports/report.h"
#include "reports/rules.h"

namespace qd::reports {
namespace {

// Failure classes in the order the legend lists them (test-impl --help);
// an outcome not listed here is appended after them.
constexpr std::string_view kKnownOutcomes[] = {"pass",        "accepted-invalid", "refused-valid",
                                               "other-rule",  "wrong-output",     "signed-zero",
                                               "garbage",     "crashed",          "hung"};

std::vector<std::string> OutcomesSeen(const ConformanceReport& report) {
  std::set<std::string> seen;
  for (const VectorRun& r : report.runs) seen.insert(r.outcome);
  std::vector<std::string> ordered;
  for (const std::string_view known : kKnownOutcomes) {
    if (seen.erase(std::string(known)) > 0) ordered.emplace_back(known);
  }
  ordered.insert(ordered.end(), seen.begin(), seen.end());
  return ordered;
}

std::string Count(std::uint64_t n) { return std::to_string(n); }

// The drill-down's anchor: the run's position, never a name from a file.
std::string Anchor(std::size_t index) { return "v-" + std::to_string(index); }

// BITS as sign | exponent | mantissa, each bit an <i>, the ones that differ
// from OTHER marked.
std::string BitsHtml(std::uint32_t bits, std::uint32_t other) {
  std::string html = "<span class=\"b mono\">";
  for (int i = 31; i >= 0; --i) {
    const bool bit = ((bits >> i) & 1u) != 0;
    const bool differs = bit != (((other >> i) & 1u) != 0);
    html += differs ? "<i class=\"d\">" : "<i>";
    html += bit ? "1</i>" : "0</i>";
    if (i == 31 || i == 23) html += "<span class=\"sep\"></span>";
  }
  return html + "</span>";
}

std::string CountsSection(const ConformanceReport& report, const std::vector<std::string>& outcomes) {
  std::map<std::string, std::map<std::string, std::uint64_t>> by_format;
  for (const VectorRun& r : report.runs) ++by_format[r.format][r.outcome];
  std::string html =
      "<h2>Per format</h2>\n<table class=\"counts\" id=\"formats\"><thead><tr><th>format</th><th>vectors</th>"
      "<th>pass</th><th>fail</th><th>outcomes</th><th></th></tr></thead><tbody>\n";
  for (const auto& [format, n] : CountByFormat(report)) {
    std::vector<std::pair<std::string, std::uint64_t>> parts;
    std::string failing;
    for (const std::string& o : outcomes) {
      const auto it = by_format[format].find(o);
      if (it == by_format[format].end()) continue;
      parts.emplace_back(o, it->second);
      if (o != kPassOutcome) failing += (failing.empty() ? "" : ", ") + ForHtml(o) + " " + Count(it->second);
    }
    html += "<tr><td>" + ForHtml(format) + "</td><td>" + Count(n.pass + n.fail) + "</td><td>" + Count(n.pass) +
            "</td><td>" + Count(n.fail) + "</td><td>" + StackedBarSvg(parts, 220) + "</td><td class=\"muted\">" +
            failing + "</td></tr>\n";
  }
  return html + "</tbody></table>\n";
}

// One row per (format, rule group), one cell per vector of the group, a
// failing cell linking to its drill-down.
std::string MatrixSection(const ConformanceReport& report, const std::vector<std::string>& outcomes) {
  // Keyed by (format, rule), the valid group under "" so it leads its format.
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> rows;
  for (std::size_t i = 0; i < report.runs.size(); ++i) rows[{report.runs[i].format, report.runs[i].rule}].push_back(i);
  std::string html = "<h2>Rules &times; vectors</h2>\n<p class=\"muted\">One row per rule the vectors break (and "
                     "<b>valid</b> for the valid and acceptable vectors), one square per vector, labelled with its "
                     "tcId. Select a failing square for its details.</p>\n" +
                     LegendHtml(outcomes) +
                     "<table id=\"matrix\"><thead><tr><th>rule</th><th>severity</th><th>pass</th><th>fail</th>"
                     "<th>vectors</th></tr></thead><tbody>\n";
  std::string format_shown;
  for (const auto& [key, indices] : rows) {
    const std::string& format = key.first;
    const std::string group = key.second.empty() ? "valid" : key.second;
    if (format != format_shown) {
      html += "<tr class=\"family\"><th colspan=\"5\">" + ForHtml(format) + "</th></tr>\n";
      format_shown = format;
    }
    const RuleInfo* rule = FindRule(group);
    std::uint64_t pass = 0;
    std::string cells;
    for (const std::size_t i : indices) {
      const VectorRun& r = report.runs[i];
      const std::string title = "tcId " + Count(r.tc_id) + ": " + r.outcome + (r.Passed() ? "" : " \xe2\x80\x94 " + r.detail);
      if (r.Passed()) {
        ++pass;
        cells += "<span class=\"cell o-pass\" title=\"" + ForHtml(title) + "\">" + Count(r.tc_id) + "</span>";
      } else {
        cells += "<a class=\"cell " + OutcomeClass(r.outcome) + "\" href=\"#" + Anchor(i) + "\" title=\"" +
                 ForHtml(title) + "\">" + Count(r.tc_id) + "</a>";
      }
    }
    html += "<tr><th title=\"" + ForHtml(rule != nullptr ? rule->text : "valid and acceptable vectors: accepted, decoded bit for bit") +
            "\">" + ForHtml(group) + "</th><td class=\"muted\">" +
            (rule != nullptr ? std::string(SeverityName(rule->severity)) : std::string()) + "</td><td class=\"n\">" +
            Count(pass) + "</td><td class=\"n\">" + Count(indices.size() - pass) + "</td><td class=\"cells\">" + cells +
            "</td></tr>\n";
  }
  return html + "</tbody></table>\n";
}

std::string DrillDown(const VectorRun& r, std::size_t index, bool open) {
  std::string html = "<details class=\"item\" id=\"" + Anchor(index) + "\"" + (open ? " open" : "") +
                     "><summary><span class=\"badge " + OutcomeClass(r.outcome) + "\">" + ForHtml(r.outcome) +
                     "</span><b>" + ForHtml(r.format) + " tcId " + Count(r.tc_id) + "</b> &middot; " +
                     ForHtml(r.Group()) + " &middot; <span class=\"mono\">" + ForHtml(r.file) +
                     "</span></summary>\n<div class=\"body\"><dl class=\"kv\"><dt>expected</dt><dd>" +
                     ForHtml(r.expected) + "</dd><dt>got</dt><dd>" + ForHtml(r.got) + "</dd><dt>why</dt><dd>" +
                     ForHtml(r.detail) + "</dd></dl>\n";
  if (r.difference) {
    const FirstDifference& d = *r.difference;
    html += "<p>First differing element: tensor <code>" + ForHtml(d.tensor) + "</code>, element " +
            Count(d.element) + "</p>\n<table class=\"bits\"><thead><tr><th></th><th>bits (sign, exponent, "
            "mantissa)</th><th>hex</th><th>value</th></tr></thead><tbody>\n<tr><th>expected</th><td>" +
            BitsHtml(d.expected_bits, d.got_bits) + "</td><td class=\"mono\">" + Hex32(d.expected_bits) +
            "</td><td class=\"mono\">" + Binary32Text(d.expected_bits) + "</td></tr>\n<tr><th>got</th><td>" +
            BitsHtml(d.got_bits, d.expected_bits) + "</td><td class=\"mono\">" + Hex32(d.got_bits) +
            "</td><td class=\"mono\">" + Binary32Text(d.got_bits) + "</td></tr>\n</tbody></table>\n";
  }
  return html + "<p class=\"muted\">Reproduce:</p><pre>" + ForHtml(r.reproducer) + "</pre></div></details>\n";
}

// Every (format, group) any implementation ran, in key order: the rows of
// the comparison.
std::set<std::pair<std::string, std::string>> AllGroups(const std::vector<ImplementationResults>& implementations) {
  std::set<std::pair<std::string, std::string>> rows;
  for (const ImplementationResults& impl : implementations) {
    for (const auto& entry : impl.groups) rows.insert(entry.first);
  }
  return rows;
}

// A comparison cell's class: every vector passes, every one fails, some of
// each, or the implementation did not run the group.
std::string_view CellClass(const PassFail* n) {
  if (n == nullptr || n->pass + n->fail == 0) return "o-none";
  if (n->fail == 0) return "o-pass";
  return n->pass == 0 ? "o-fail" : "o-mixed";
}

}  // namespace

std::string ComparisonHtml(const std::vector<ImplementationResults>& implementations) {
  std::string html = HtmlPageStart("quantdiff report-merge: " + Count(implementations.size()) + " implementations");
  html += "<h1>quantdiff: rules &times; implementations</h1>\n<p class=\"muted\">quantdiff " + ForHtml(ToolVersion()) +
          ", rule catalogue version " + Count(CatalogueVersion()) +
          ". One row per rule the vectors break (<b>valid</b>: the valid and acceptable vectors), one column per "
          "implementation; a cell holds its passing / failing vectors.</p>\n";
  html += "<div class=\"legend\"><span><i class=\"sw o-pass\"></i>all pass</span><span><i class=\"sw o-mixed\"></i>"
          "some fail</span><span><i class=\"sw o-fail\"></i>all fail</span><span><i class=\"sw o-none\"></i>not run"
          "</span></div>\n";
  html += "<table class=\"counts\" id=\"implementations\"><thead><tr><th>implementation</th><th>vectors</th>"
          "<th>fail</th><th>tested</th></tr></thead><tbody>\n";
  for (const ImplementationResults& impl : implementations) {
    html += "<tr><td>" + ForHtml(impl.name) + "</td><td>" + Count(impl.vectors) + "</td><td>" + Count(impl.failed) +
            "</td><td class=\"muted mono\">" + ForHtml(impl.command) + "</td></tr>\n";
  }
  html += "</tbody></table>\n<h2>Rules &times; implementations</h2>\n<table id=\"impl-matrix\"><thead><tr>"
          "<th>rule</th><th>severity</th>";
  for (const ImplementationResults& impl : implementations) html += "<th>" + ForHtml(impl.name) + "</th>";
  html += "</tr></thead><tbody>\n";
  std::string format_shown;
  for (const auto& key : AllGroups(implementations)) {
    if (key.first != format_shown) {
      html += "<tr class=\"family\"><th colspan=\"" + Count(implementations.size() + 2) + "\">" +
              ForHtml(key.first) + "</th></tr>\n";
      format_shown = key.first;
    }
    const RuleInfo* rule = FindRule(key.second);
    html += "<tr><th title=\"" + ForHtml(rule != nullptr ? rule->text : "valid and acceptable vectors") + "\">" +
            ForHtml(key.second) + "</th><td class=\"muted\">" +
            (rule != nullptr ? std::string(SeverityName(rule->severity)) : std::string()) + "</td>";
    for (const ImplementationResults& impl : implementations) {
      const auto found = impl.groups.find(key);
      const PassFail* n = found == impl.groups.end() ? nullptr : &found->second;
      const std::string text = n == nullptr ? "&ndash;" : Count(n->pass) + " / " + Count(n->fail);
      html += "<td class=\"pf " + std::string(CellClass(n)) + "\" title=\"" + ForHtml(impl.name) + ", " +
              ForHtml(key.first) + " " + ForHtml(key.second) +
              (n == nullptr ? ": not run" : ": " + Count(n->pass) + " pass, " + Count(n->fail) + " fail") + "\">" +
              text + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</tbody></table>\n" + HtmlPageEnd();
}

std::string ComparisonText(const std::vector<ImplementationResults>& implementations) {
  std::string text;
  for (std::size_t i = 0; i < implementations.size(); ++i) {
    const ImplementationResults& impl = implementations[i];
    text += "[" + Count(i + 1) + "] " + ForTerminal(impl.name) + ": " + Count(impl.failed) + " of " +
            Count(impl.vectors) + " vectors fail (" + ForTerminal(impl.command) + ")\n";
  }
  for (const auto& key : AllGroups(implementations)) {
    text += ForTerminal(key.first) + " " + ForTerminal(key.second) + ":";
    for (std::size_t i = 0; i < implementations.size(); ++i) {
      const auto found = implementations[i].groups.find(key);
      text += " [" + Count(i + 1) + "] " +
              (found == implementations[i].groups.end()
                   ? std::string("-")
                   : Count(found->second.pass) + " pass " + Count(found->second.fail) + " fail");
    }
    text += "\n";
  }
  return text;
}

std::string ConformanceHtml(const ConformanceReport& report) {
  const std::vector<std::string> outcomes = OutcomesSeen(report);
  std::uint64_t failed = 0;
  for (const VectorRun& r : report.runs) failed += r.Passed() ? 0 : 1;
  const std::string verdict = failed == 0 ? "Conforms: all " + Count(report.runs.size()) + " vectors pass"
                                          : "Does not conform: " + Count(failed) + " of " +
                                                Count(report.runs.size()) + " vectors fail";
  std::string html = HtmlPageStart("quantdiff test-impl: " + verdict);
  html += "<h1>quantdiff test-impl</h1>\n<div class=\"verdict " + std::string(failed == 0 ? "o-pass" : "o-fail") +
          "\" id=\"verdict\">" + ForHtml(verdict) + "</div>\n<p class=\"muted\">Implementation under test "
          "(quantdiff " + ForHtml(ToolVersion()) + ", rule catalogue version " + Count(CatalogueVersion()) +
          "):</p>\n<pre>" + ForHtml(report.command) + "</pre>\n";
  html += CountsSection(report, outcomes);
  html += MatrixSection(report, outcomes);
  if (failed > 0) {
    html += "<h2>Failing vectors</h2>\n<div id=\"failures\">\n";
    // The first few open, so a short report needs no clicking.
    std::size_t shown = 0;
    for (std::size_t i = 0; i < report.runs.size(); ++i) {
      if (!report.runs[i].Passed()) html += DrillDown(report.runs[i], i, shown++ < 3);
    }
    html += "</div>\n";
  }
  return html + HtmlPageEnd();
}

}  // namespace qd::reports
