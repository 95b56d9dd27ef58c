// rules.h: the rule catalogue (oracles/rules.json), embedded at build time.
//
// Every report names rules by ID; this is where a writer finds the rule's
// family, severity and text. The JSON is compiled into the library (see
// embed_rules.cmake), so the quantdiff binary needs no file at run time and
// always reports the catalogue it was built with.
//
//   if (const qd::reports::RuleInfo* r = qd::reports::FindRule("RBQ-005")) {
//     std::printf("%s (%s): %s\n", r->id.c_str(), r->section.c_str(), r->text.c_str());
//   }
#ifndef QUANTDIFF_REPORTS_RULES_H_
#define QUANTDIFF_REPORTS_RULES_H_

#include <string>
#include <string_view>
#include <vector>

namespace qd::reports {

// The catalogue's severity column: MUST and SHOULD rules are errors (the
// reader refuses the file), "warning" rules are advisories.
enum class RuleSeverity { kMust, kShould, kWarning };

struct RuleInfo {
  std::string id;        // "ST-004"
  std::string family;    // "safetensors", "rbq"
  RuleSeverity severity = RuleSeverity::kMust;
  std::string source;    // where the rule comes from
  std::string section;   // the section of the source
  std::string text;      // what violates the rule
  std::string decision;  // the project's reading of the source; may be empty
};

// "MUST", "SHOULD" or "warning", as the catalogue spells it.
std::string_view SeverityName(RuleSeverity severity);
// True for MUST and SHOULD rules: a violation refuses the file.
bool IsErrorRule(const RuleInfo& rule);

// Every rule in catalogue order. Parsed once, on first use.
const std::vector<RuleInfo>& AllRules();
// nullptr when the catalogue has no such rule.
const RuleInfo* FindRule(std::string_view id);
// The catalogue's check_order paragraph and version.
const std::string& CheckOrder();
int CatalogueVersion();
// The embedded rules.json, byte for byte.
std::string_view CatalogueJson();

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_RULES_H_
