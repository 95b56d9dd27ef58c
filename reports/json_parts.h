// json_parts.h: pieces the JSON and SARIF writers of every report share
// (writers.cc for check and diff, conformance.cc for test-impl). Internal to
// reports/: nlohmann_json is a private dependency of the library.
//
//   Json result = Json::object();
//   result["message"] = {{"text", Str(hostile_message)}};
//   return Dump(doc);
#ifndef QUANTDIFF_REPORTS_JSON_PARTS_H_
#define QUANTDIFF_REPORTS_JSON_PARTS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reports/rules.h"

namespace qd::reports {

using Json = nlohmann::ordered_json;

// Every string that reaches a JSON document is made valid UTF-8 first, so
// dump() never meets a byte it would throw on.
Json Str(std::string_view s);
Json StrOrNull(std::string_view s);
// The document, indented by two, with a final newline.
std::string Dump(const Json& doc);

// SARIF 2.1.0 (section 3.49 reportingDescriptor): one catalogue rule.
Json SarifRule(const RuleInfo& rule);
// A rule of quantdiff's own, not in the catalogue (QD-DIVERGENCE,
// QD-VALID), at level error.
Json SarifToolRule(std::string_view id, std::string_view name, std::string_view text);
// The catalogue as runs[0].tool.driver.rules, in catalogue order, so a
// rule's index there is its index in AllRules().
Json SarifCatalogueRules();
// Index of rule ID in AllRules(), -1 when the catalogue has none.
std::int64_t CatalogueIndex(std::string_view id);
// A result's locations (3.28): the file as a relative URI and, when known
// (>= 0), the byte offset.
Json SarifLocation(const std::string& path, std::int64_t byte_offset);
// The SARIF log around one run: $schema, version 2.1.0, the driver (name,
// version, RULES) and RESULTS; PROPERTIES added to the run unless null.
std::string SarifLog(Json rules, Json results, Json properties);

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_JSON_PARTS_H_
