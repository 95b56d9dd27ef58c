#include "reports/rules.h"

#include <nlohmann/json.hpp>

namespace qd::reports {
namespace internal {
extern const std::string_view kRulesJson;  // rules_embedded.cc (generated)
}  // namespace internal

namespace {

struct Catalogue {
  int version = 0;
  std::string check_order;
  std::vector<RuleInfo> rules;
};

std::string StringField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

RuleSeverity ParseSeverity(const std::string& text) {
  if (text == "warning") return RuleSeverity::kWarning;
  if (text == "SHOULD") return RuleSeverity::kShould;
  return RuleSeverity::kMust;
}

Catalogue Parse() {
  Catalogue catalogue;
  // The build embeds the file verbatim; a malformed catalogue yields an
  // empty one rather than an exception (reports_test checks it parses).
  const nlohmann::json doc = nlohmann::json::parse(
      internal::kRulesJson.begin(), internal::kRulesJson.end(), nullptr,
      /*allow_exceptions=*/false);
  if (!doc.is_object()) return catalogue;
  if (auto v = doc.find("catalogue_version"); v != doc.end() && v->is_number_integer()) {
    catalogue.version = v->get<int>();
  }
  catalogue.check_order = StringField(doc, "check_order");
  auto rules = doc.find("rules");
  if (rules == doc.end() || !rules->is_array()) return catalogue;
  for (const nlohmann::json& r : *rules) {
    if (!r.is_object()) continue;
    RuleInfo info;
    info.id = StringField(r, "id");
    if (info.id.empty()) continue;
    info.family = StringField(r, "family");
    info.severity = ParseSeverity(StringField(r, "severity"));
    info.source = StringField(r, "source");
    info.section = StringField(r, "section");
    info.text = StringField(r, "text");
    info.decision = StringField(r, "decision");
    catalogue.rules.push_back(std::move(info));
  }
  return catalogue;
}

const Catalogue& Get() {
  static const Catalogue catalogue = Parse();
  return catalogue;
}

}  // namespace

std::string_view SeverityName(RuleSeverity severity) {
  switch (severity) {
    case RuleSeverity::kMust: return "MUST";
    case RuleSeverity::kShould: return "SHOULD";
    case RuleSeverity::kWarning: return "warning";
  }
  return "MUST";
}

bool IsErrorRule(const RuleInfo& rule) { return rule.severity != RuleSeverity::kWarning; }

const std::vector<RuleInfo>& AllRules() { return Get().rules; }

const RuleInfo* FindRule(std::string_view id) {
  for (const RuleInfo& r : Get().rules) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

const std::string& CheckOrder() { return Get().check_order; }
int CatalogueVersion() { return Get().version; }
std::string_view CatalogueJson() { return internal::kRulesJson; }

}  // namespace qd::reports
