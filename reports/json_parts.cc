#include "reports/json_parts.h"

#include "reports/escape.h"
#include "reports/report.h"

namespace qd::reports {

Json Str(std::string_view s) { return Json(ValidUtf8(s)); }
Json StrOrNull(std::string_view s) { return s.empty() ? Json(nullptr) : Str(s); }

std::string Dump(const Json& doc) {
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Json SarifRule(const RuleInfo& r) {
  Json rule = Json::object();
  rule["id"] = Str(r.id);
  rule["name"] = Str(r.family + "/" + r.id);
  rule["shortDescription"] = {{"text", Str(r.text)}};
  std::string full = r.text;
  if (!r.decision.empty()) full += " Decision: " + r.decision;
  rule["fullDescription"] = {{"text", Str(full)}};
  rule["defaultConfiguration"] = {{"level", IsErrorRule(r) ? "error" : "warning"}};
  rule["properties"] = {{"family", Str(r.family)},
                        {"severity", std::string(SeverityName(r.severity))},
                        {"source", Str(r.source)},
                        {"section", Str(r.section)}};
  return rule;
}

Json SarifToolRule(std::string_view id, std::string_view name, std::string_view text) {
  Json rule = Json::object();
  rule["id"] = std::string(id);
  rule["name"] = std::string(name);
  rule["shortDescription"] = {{"text", std::string(text)}};
  rule["defaultConfiguration"] = {{"level", "error"}};
  return rule;
}

Json SarifCatalogueRules() {
  Json rules = Json::array();
  for (const RuleInfo& r : AllRules()) rules.push_back(SarifRule(r));
  return rules;
}

std::int64_t CatalogueIndex(std::string_view id) {
  const std::vector<RuleInfo>& catalogue = AllRules();
  for (std::size_t i = 0; i < catalogue.size(); ++i) {
    if (catalogue[i].id == id) return static_cast<std::int64_t>(i);
  }
  return -1;
}

Json SarifLocation(const std::string& path, std::int64_t byte_offset) {
  Json physical = Json::object();
  physical["artifactLocation"] = {{"uri", PathToUri(path)}};
  if (byte_offset >= 0) physical["region"] = {{"byteOffset", byte_offset}};
  return Json::array({{{"physicalLocation", std::move(physical)}}});
}

std::string SarifLog(Json rules, Json results, Json properties) {
  Json driver = Json::object();
  driver["name"] = "quantdiff";
  driver["version"] = std::string(ToolVersion());
  driver["semanticVersion"] = std::string(ToolVersion());
  driver["rules"] = std::move(rules);
  Json run = Json::object();
  run["tool"] = {{"driver", std::move(driver)}};
  run["results"] = std::move(results);
  if (!properties.is_null()) run["properties"] = std::move(properties);
  Json doc = Json::object();
  doc["$schema"] = "https://json.schemastore.org/sarif-2.1.0.json";
  doc["version"] = "2.1.0";
  doc["runs"] = Json::array({std::move(run)});
  return Dump(doc);
}

}  // namespace qd::reports
