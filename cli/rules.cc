// quantdiff rules: the rule catalogue the binary was built with.
#include <cstdio>

#include "cli/common.h"
#include "reports/rules.h"

namespace qd::cli {

extern const std::string_view kRulesHelp =
    "usage: quantdiff rules [--json] [RULE...]\n"
    "\n"
    "Prints the rule catalogue (oracles/rules.json, embedded at build time): one\n"
    "line per rule with its ID, severity, family and text. With RULE IDs, prints\n"
    "those rules in full: source, section, text and the project's decision.\n"
    "\n"
    "  --json  print the catalogue's JSON exactly as embedded\n"
    "\n"
    "Severities: MUST and SHOULD rules refuse a file (findings of severity\n"
    "\"error\"); warning rules are reported on files that are still read.\n"
    "\n"
    "exit: 0, or 2 for an unknown rule ID or flag\n";

namespace {

constexpr std::size_t kWidth = 80;

// Words of text filled to kWidth columns; lines after the first start with
// `indent` spaces, the first continues wherever the caller's text ended.
std::string Wrap(const std::string& text, std::size_t indent, std::size_t first_column) {
  std::string out;
  std::size_t column = first_column;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t space = text.find(' ', i);
    const std::size_t end = space == std::string::npos ? text.size() : space;
    const std::string word = text.substr(i, end - i);
    i = end + 1;
    if (word.empty()) continue;
    if (column > indent && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent || (column == indent && !out.empty() && out.back() != ' ')) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

void PrintFull(const qd::reports::RuleInfo& r) {
  std::printf("%s  (%s, %s)\n", r.id.c_str(), std::string(qd::reports::SeverityName(r.severity)).c_str(),
              r.family.c_str());
  std::printf("  source:   %s\n", Wrap(r.source, 12, 12).c_str());
  std::printf("  section:  %s\n", Wrap(r.section, 12, 12).c_str());
  std::printf("  text:     %s\n", Wrap(r.text, 12, 12).c_str());
  if (!r.decision.empty()) std::printf("  decision: %s\n", Wrap(r.decision, 12, 12).c_str());
}

}  // namespace

int RunRules(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"json", false}}, &args, &error)) return UsageError("rules", error);
  if (args.Has("json")) {
    if (!args.positional.empty()) return UsageError("rules", "--json prints the whole catalogue; give no RULE");
    const std::string_view json = qd::reports::CatalogueJson();
    return WriteOutput("", json, {}, &error) ? kExitOk : IoError("rules", error);
  }
  if (!args.positional.empty()) {
    for (const std::string& id : args.positional) {
      if (qd::reports::FindRule(id) == nullptr) return UsageError("rules", "no rule '" + id + "'");
    }
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
      if (i > 0) std::printf("\n");
      PrintFull(*qd::reports::FindRule(args.positional[i]));
    }
    return kExitOk;
  }
  std::string family;
  for (const qd::reports::RuleInfo& r : qd::reports::AllRules()) {
    if (r.family != family) {
      std::printf("%s%s\n", family.empty() ? "" : "\n", r.family.c_str());
      family = r.family;
    }
    std::printf("  %-8s %-7s %s\n", r.id.c_str(), std::string(qd::reports::SeverityName(r.severity)).c_str(),
                Wrap(r.text, 19, 19).c_str());
  }
  std::printf("\ncatalogue version %d, %zu rules. 'quantdiff rules ID' shows a rule in full.\n\n%s\n",
              qd::reports::CatalogueVersion(), qd::reports::AllRules().size(),
              Wrap("Check order: " + qd::reports::CheckOrder(), 0, 0).c_str());
  return kExitOk;
}

}  // namespace qd::cli
