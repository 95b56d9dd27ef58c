// check and diff reports (report.h) as Markdown and as one HTML page.
#include <map>
#include <set>

#include "reports/escape.h"
#include "reports/html_page.h"
#include "reports/report.h"
#include "reports/rules.h"
#include "reports/writers.h"

namespace qd::reports {
namespace {

std::string Count(std::uint64_t n) { return std::to_string(n); }

// "refused", "warnings", "divergence" or "ok": a file's verdict as one word.
std::string FileVerdict(const FileReport& file) {
  if (file.divergence) return "divergence";
  if (file.refused) return "refused";
  return file.findings.empty() ? "ok" : "warnings";
}

std::string SummaryLine(const Report& report) {
  const Summary s = Summarize(report);
  return Count(s.files) + " files: " + Count(s.refused) + " refused, " + Count(s.errors) + " errors, " +
         Count(s.warnings) + " warnings, " + Count(s.divergences) + " divergences";
}

// The rules any finding names, in catalogue order, then any the catalogue
// does not hold.
std::vector<std::string> RulesSeen(const Report& report) {
  std::set<std::string> seen;
  for (const FileReport& file : report.files) {
    for (const qd::Finding& f : file.findings) seen.insert(f.rule);
  }
  std::vector<std::string> ordered;
  for (const RuleInfo& r : AllRules()) {
    if (seen.erase(r.id) > 0) ordered.push_back(r.id);
  }
  ordered.insert(ordered.end(), seen.begin(), seen.end());
  return ordered;
}

}  // namespace

std::string WriteMarkdown(const Report& report) {
  std::string md = "## quantdiff " + ForMarkdown(report.command) + ": " + ForMarkdown(SummaryLine(report)) +
                   "\n\n| file | format | verdict | findings |\n|---|---|---|---|\n";
  for (const FileReport& file : report.files) {
    std::string findings;
    if (file.codec && file.oracle) {
      findings = ForMarkdown("codec " + VerdictText(*file.codec) + "; oracle " + VerdictText(*file.oracle));
    }
    for (const qd::Finding& f : file.findings) {
      findings += (findings.empty() ? "" : "<br>") + ForMarkdown(FindingFile(file, f) + ": " + FindingLine(f));
    }
    if (file.divergence) {
      findings += (findings.empty() ? "" : "<br>") +
                  ForMarkdown(file.divergence->signature + ": " + file.divergence->detail);
    }
    md += "| " + ForMarkdown(file.path) + " | " + ForMarkdown(file.format) + " | " + FileVerdict(file) + " | " +
          findings + " |\n";
  }
  const Summary s = Summarize(report);
  if (!s.by_rule.empty()) {
    md += "\n| rule | findings | what the rule says |\n|---|--:|---|\n";
    for (const auto& [rule, n] : s.by_rule) {
      const RuleInfo* info = FindRule(rule);
      md += "| " + ForMarkdown(rule) + " | " + Count(n) + " | " + ForMarkdown(info != nullptr ? info->text : "") +
            " |\n";
    }
  }
  return md;
}

std::string WriteHtml(const Report& report) {
  std::string html = HtmlPageStart("quantdiff " + report.command + ": " + SummaryLine(report));
  const Summary s = Summarize(report);
  const bool clean = s.refused == 0 && s.divergences == 0;
  html += "<h1>quantdiff " + ForHtml(report.command) + "</h1>\n<div class=\"verdict " +
          std::string(clean ? "o-pass" : "o-fail") + "\" id=\"verdict\">" + ForHtml(SummaryLine(report)) +
          "</div>\n";

  // Per format: files and their verdicts.
  std::map<std::string, std::map<std::string, std::uint64_t>> by_format;
  for (const FileReport& file : report.files) ++by_format[file.format][FileVerdict(file)];
  const std::vector<std::string> verdicts = {"ok", "warnings", "refused", "divergence"};
  html += "<h2>Per format</h2>\n<table class=\"counts\" id=\"formats\"><thead><tr><th>format</th><th>files</th>";
  for (const std::string& v : verdicts) html += "<th>" + v + "</th>";
  html += "<th></th></tr></thead><tbody>\n";
  for (auto& [format, counts] : by_format) {
    std::uint64_t files = 0;
    std::vector<std::pair<std::string, std::uint64_t>> parts;
    std::string cells;
    for (const std::string& v : verdicts) {
      files += counts[v];
      cells += "<td>" + Count(counts[v]) + "</td>";
      // ok as pass, a refusal as an error: the matrix's colours.
      parts.emplace_back(v == "ok" ? "pass" : v == "refused" ? "error" : v == "warnings" ? "warning" : v, counts[v]);
    }
    html += "<tr><td>" + ForHtml(format) + "</td><td>" + Count(files) + "</td>" + cells + "<td>" +
            StackedBarSvg(parts, 200) + "</td></tr>\n";
  }
  html += "</tbody></table>\n";

  // Rules x files, a cell per (rule, file) coloured by the worst finding.
  const std::vector<std::string> rules = RulesSeen(report);
  html += "<h2>Rules &times; files</h2>\n" + LegendHtml({"error", "warning", "none"}) +
          "<table id=\"matrix\"><thead><tr><th>rule</th><th>severity</th><th>files (number: see below)</th></tr>"
          "</thead><tbody>\n";
  for (const std::string& rule : rules) {
    const RuleInfo* info = FindRule(rule);
    std::string cells;
    for (std::size_t i = 0; i < report.files.size(); ++i) {
      std::string worst = "none";
      for (const qd::Finding& f : report.files[i].findings) {
        if (f.rule != rule) continue;
        if (f.severity == qd::Severity::kError) worst = "error";
        if (f.severity == qd::Severity::kWarning && worst == "none") worst = "warning";
      }
      const std::string title = report.files[i].path + ": " + worst;
      cells += worst == "none" ? "<span class=\"cell o-none\" title=\"" + ForHtml(title) + "\">" + Count(i + 1) + "</span>"
                               : "<a class=\"cell " + OutcomeClass(worst) + "\" href=\"#f-" + Count(i + 1) +
                                     "\" title=\"" + ForHtml(title) + "\">" + Count(i + 1) + "</a>";
    }
    html += "<tr><th title=\"" + ForHtml(info != nullptr ? info->text : "") + "\">" + ForHtml(rule) +
            "</th><td class=\"muted\">" + (info != nullptr ? std::string(SeverityName(info->severity)) : "") +
            "</td><td class=\"cells\">" + cells + "</td></tr>\n";
  }
  if (rules.empty()) html += "<tr><td colspan=\"3\" class=\"muted\">no findings</td></tr>\n";
  html += "</tbody></table>\n<h2>Files</h2>\n<div id=\"files\">\n";

  for (std::size_t i = 0; i < report.files.size(); ++i) {
    const FileReport& file = report.files[i];
    const std::string verdict = FileVerdict(file);
    const std::string cls = verdict == "ok" ? "o-pass" : verdict == "warnings" ? "o-warning" : OutcomeClass(verdict == "refused" ? "error" : verdict);
    html += "<details class=\"item\" id=\"f-" + Count(i + 1) + "\"" + (verdict == "ok" ? "" : " open") +
            "><summary><span class=\"badge " + cls + "\">" + verdict + "</span><b>" + Count(i + 1) +
            "</b> <span class=\"mono\">" + ForHtml(file.path) + "</span> &middot; " + ForHtml(file.format) +
            "</summary>\n<div class=\"body\">";
    if (!file.note.empty()) html += "<p>" + ForHtml(file.note) + "</p>";
    if (file.codec && file.oracle) {
      html += "<dl class=\"kv\"><dt>codec</dt><dd>" + ForHtml(VerdictText(*file.codec)) + "</dd><dt>oracle</dt><dd>" +
              ForHtml(VerdictText(*file.oracle)) + "</dd></dl>";
    }
    for (const qd::Finding& f : file.findings) html += "<pre>" + ForHtml(FindingFile(file, f) + ": " + FindingLine(f)) + "</pre>";
    if (file.divergence) {
      html += "<pre>" + ForHtml(file.divergence->signature + ": " + file.divergence->detail) + "</pre>";
    }
    if (file.findings.empty() && !file.divergence) html += "<p class=\"muted\">no findings</p>";
    html += "</div></details>\n";
  }
  return html + "</div>\n" + HtmlPageEnd();
}

}  // namespace qd::reports
