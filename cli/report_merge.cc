// quantdiff report-merge: several test-impl JSON reports side by side, rules
// x implementations (issue 13 item 5).
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "reports/conformance.h"

namespace qd::cli {

extern const std::string_view kReportMergeHelp =
    "usage: quantdiff report-merge [NAME=]REPORT.json... [--report text|html] [--out FILE]\n"
    "\n"
    "Puts the results of several implementations side by side: each REPORT.json\n"
    "is what `quantdiff test-impl --report json` wrote for one implementation\n"
    "(a command or a module), named NAME (default: the file's name without .json).\n"
    "Rows are the rule groups of every format any of them ran (valid, then each\n"
    "rule), columns the implementations; each cell holds that implementation's\n"
    "passing and failing vectors of the group, coloured all pass, some fail, all\n"
    "fail or not run. Each failing vector's details stay in its own report.\n"
    "\n"
    "  --report FORMAT  text (default) or html (one self-contained page, the\n"
    "                   matrix as table #impl-matrix)\n"
    "  --out FILE       write it to FILE (default standard output)\n"
    "\n"
    "exit: 0 written, 2 usage error or a report that cannot be read\n";

namespace {

using Json = nlohmann::json;

// One column from a test-impl JSON report at PATH; false with *error when it
// is not one (no command, vectors, failed and groups of the shape test-impl writes).
bool ReadResults(const std::string& name, const std::string& path, qd::reports::ImplementationResults* out,
                 std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return *error = "cannot read " + path, false;
  const Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  const bool shaped = doc.is_object() && doc.contains("command") && doc["command"].is_string() &&
                      doc.contains("vectors") && doc["vectors"].is_number_unsigned() && doc.contains("failed") &&
                      doc["failed"].is_number_unsigned() && doc.contains("groups") && doc["groups"].is_array();
  if (!shaped) return *error = path + " is not a `quantdiff test-impl --report json` report", false;
  out->name = name;
  out->command = doc["command"].get<std::string>();
  out->vectors = doc["vectors"].get<std::uint64_t>();
  out->failed = doc["failed"].get<std::uint64_t>();
  for (const Json& g : doc["groups"]) {
    const bool group_shaped = g.is_object() && g.contains("format") && g["format"].is_string() &&
                              g.contains("rule") && (g["rule"].is_string() || g["rule"].is_null()) &&
                              g.contains("pass") && g["pass"].is_number_unsigned() && g.contains("fail") &&
                              g["fail"].is_number_unsigned();
    if (!group_shaped) return *error = path + ": a group lacks format, rule, pass or fail", false;
    const std::string group = g["rule"].is_null() ? "valid" : g["rule"].get<std::string>();
    out->groups[{g["format"].get<std::string>(), group}] = {g["pass"].get<std::uint64_t>(),
                                                            g["fail"].get<std::uint64_t>()};
  }
  return true;
}

}  // namespace

int RunReportMerge(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"report", true}, {"out", true}}, &args, &error)) return UsageError("report-merge", error);
  if (args.positional.empty()) return UsageError("report-merge", "needs one or more test-impl JSON reports");
  const std::string format = args.Get("report").value_or("text");
  if (format != "text" && format != "html") {
    return UsageError("report-merge", "--report takes text or html, got '" + format + "'");
  }
  std::vector<qd::reports::ImplementationResults> implementations;
  for (const std::string& given : args.positional) {
    // NAME=PATH, unless the whole argument names a file: the first '=' after
    // which a file is named (a name or a path may hold '=').
    std::string path = given;
    std::string name = std::filesystem::path(given).stem().string();
    for (std::size_t eq = given.find('='); eq != std::string::npos && !std::filesystem::exists(given);
         eq = given.find('=', eq + 1)) {
      if (eq > 0 && std::filesystem::exists(given.substr(eq + 1))) {
        path = given.substr(eq + 1);
        name = given.substr(0, eq);
        break;
      }
    }
    if (!ReadResults(name, path, &implementations.emplace_back(), &error)) return IoError("report-merge", error);
  }
  const std::string doc = format == "html" ? qd::reports::ComparisonHtml(implementations)
                                           : qd::reports::ComparisonText(implementations);
  if (!WriteOutput(args.Get("out").value_or(""), doc, {}, &error)) return IoError("report-merge", error);
  return kExitOk;
}

}  // namespace qd::cli
