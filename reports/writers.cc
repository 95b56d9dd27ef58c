#include "reports/writers.h"

#include <cstdarg>
#include <cstdio>

#include "reports/escape.h"
#include "reports/json_parts.h"
#include "reports/rules.h"

namespace qd::reports {
namespace {

const char* SeverityWord(qd::Severity s) {
  return s == qd::Severity::kError ? "error" : "warning";
}

Json PosOrNull(std::int64_t v) { return v < 0 ? Json(nullptr) : Json(v); }

std::string Plural(std::uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

}  // namespace

std::optional<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "text") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  if (name == "junit") return OutputFormat::kJUnit;
  if (name == "sarif") return OutputFormat::kSarif;
  if (name == "markdown") return OutputFormat::kMarkdown;
  if (name == "html") return OutputFormat::kHtml;
  return std::nullopt;
}

std::string_view OutputFormatNames() { return "text|json|junit|sarif|markdown|html"; }

std::string FindingLine(const qd::Finding& f) {
  std::string s = ForTerminal(f.rule) + " " + SeverityWord(f.severity);
  if (!f.tensor.empty()) s += " tensor=" + ForTerminal(f.tensor);
  if (!f.field.empty()) s += " field=" + ForTerminal(f.field);
  if (f.byte_offset >= 0) s += " offset=" + std::to_string(f.byte_offset);
  if (f.row >= 0) s += " row=" + std::to_string(f.row);
  if (f.block >= 0) s += " block=" + std::to_string(f.block);
  if (f.element >= 0) s += " element=" + std::to_string(f.element);
  if (!f.message.empty()) s += ": " + ForTerminal(f.message);
  return s;
}

// ---------------------------------------------------------------------------
// Text

std::string WriteText(const Report& report) {
  std::string out;
  for (const FileReport& file : report.files) {
    const std::string path = ForTerminal(file.path);
    if (file.codec && file.oracle) {
      out += path + ": [" + ForTerminal(file.format) + "] codec " + VerdictText(*file.codec) +
             "; oracle " + VerdictText(*file.oracle) +
             (file.divergence ? "" : " (agree)") + "\n";
    }
    for (const qd::Finding& f : file.findings) {
      out += ForTerminal(FindingFile(file, f)) + ": " + FindingLine(f) + "\n";
    }
    if (file.divergence) {
      out += path + ": " + ForTerminal(file.divergence->signature) + ": " +
             ForTerminal(file.divergence->detail) + "\n";
    }
    if (file.findings.empty() && !file.divergence && !file.codec) {
      out += path + ": ok [" + ForTerminal(file.format) +
             (file.note.empty() ? "" : "; " + ForTerminal(file.note)) + "]\n";
    }
  }
  const Summary s = Summarize(report);
  out += Plural(s.files, "file", "files") + ": " + std::to_string(s.refused) + " refused, " +
         Plural(s.errors, "error", "errors") + ", " + Plural(s.warnings, "warning", "warnings") +
         ", " + Plural(s.divergences, "divergence", "divergences") + "\n";
  if (!s.by_rule.empty()) {
    out += "by rule:";
    for (const auto& [rule, n] : s.by_rule) out += " " + ForTerminal(rule) + "=" + std::to_string(n);
    out += "\n";
  }
  return out;
}

// ---------------------------------------------------------------------------
// JSON

std::string WriteJson(const Report& report) {
  Json findings = Json::array();
  Json divergences = Json::array();
  Json verdicts = Json::array();
  bool any_verdict = false;
  for (const FileReport& file : report.files) {
    for (const qd::Finding& f : file.findings) {
      Json position = Json::object();
      position["byte_offset"] = PosOrNull(f.byte_offset);
      position["row"] = PosOrNull(f.row);
      position["block"] = PosOrNull(f.block);
      position["element"] = PosOrNull(f.element);
      Json j = Json::object();
      j["rule"] = Str(f.rule);
      j["severity"] = SeverityWord(f.severity);
      j["file"] = Str(FindingFile(file, f));
      if (FindingFile(file, f) != file.path) j["input"] = Str(file.path);
      j["tensor"] = StrOrNull(f.tensor);
      j["field"] = StrOrNull(f.field);
      j["position"] = std::move(position);
      j["message"] = Str(f.message);
      findings.push_back(std::move(j));
    }
    if (file.divergence) {
      Json d = Json::object();
      d["file"] = Str(file.path);
      d["signature"] = Str(file.divergence->signature);
      d["detail"] = Str(file.divergence->detail);
      divergences.push_back(std::move(d));
    }
    if (file.codec && file.oracle) {
      any_verdict = true;
      Json v = Json::object();
      v["file"] = Str(file.path);
      v["format"] = Str(file.format);
      if (!file.note.empty()) v["note"] = Str(file.note);
      v["codec"] = Str(VerdictText(*file.codec));
      v["oracle"] = Str(VerdictText(*file.oracle));
      verdicts.push_back(std::move(v));
    }
  }
  const Summary s = Summarize(report);
  Json by_rule = Json::object();
  for (const auto& [rule, n] : s.by_rule) by_rule[ValidUtf8(rule)] = n;
  Json summary = Json::object();
  summary["files"] = s.files;
  summary["refused"] = s.refused;
  summary["errors"] = s.errors;
  summary["warnings"] = s.warnings;
  summary["divergences"] = s.divergences;
  summary["by_rule"] = std::move(by_rule);
  Json doc = Json::object();
  doc["findings"] = std::move(findings);
  doc["summary"] = std::move(summary);
  doc["divergences"] = std::move(divergences);
  if (any_verdict) doc["verdicts"] = std::move(verdicts);
  return Dump(doc);
}

// ---------------------------------------------------------------------------
// JUnit XML

std::string WriteJUnit(const Report& report) {
  std::string cases;
  std::uint64_t failed = 0;
  for (const FileReport& file : report.files) {
    std::string body;
    std::string out_text;
    for (const qd::Finding& f : file.findings) {
      if (f.severity == qd::Severity::kError) {
        body += "      <failure type=\"" + ForXml(f.rule) + "\" message=\"" +
                ForXml(f.rule + ": " + f.message) + "\">" +
                ForXml(FindingFile(file, f) + ": " + FindingLine(f)) + "</failure>\n";
      } else {
        out_text += FindingFile(file, f) + ": " + FindingLine(f) + "\n";
      }
    }
    if (file.divergence) {
      body += "      <failure type=\"" + ForXml(file.divergence->signature) +
              "\" message=\"" + ForXml(file.divergence->signature) + "\">" +
              ForXml(file.divergence->detail) + "</failure>\n";
    }
    if (file.codec && file.oracle) {
      out_text += "codec " + VerdictText(*file.codec) + "; oracle " +
                  VerdictText(*file.oracle) + "\n";
    }
    if (!out_text.empty()) body += "      <system-out>" + ForXml(out_text) + "</system-out>\n";
    if (body.find("<failure") != std::string::npos) ++failed;
    cases += "    <testcase classname=\"quantdiff." + ForXml(report.command) + "." +
             ForXml(file.format) + "\" name=\"" + ForXml(file.path) + "\"";
    cases += body.empty() ? "/>\n" : ">\n" + body + "    </testcase>\n";
  }
  const std::string n = std::to_string(report.files.size());
  const std::string f = std::to_string(failed);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"quantdiff\" tests=\"" + n + "\" failures=\"" + f +
         "\" errors=\"0\">\n";
  out += "  <testsuite name=\"quantdiff " + ForXml(report.command) + "\" tests=\"" + n +
         "\" failures=\"" + f + "\" errors=\"0\" skipped=\"0\">\n";
  out += cases;
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

// ---------------------------------------------------------------------------
// SARIF 2.1.0

namespace {

constexpr std::string_view kDivergenceRule = "QD-DIVERGENCE";

}  // namespace

std::string WriteSarif(const Report& report) {
  Json rules = SarifCatalogueRules();
  rules.push_back(SarifToolRule(kDivergenceRule, "quantdiff/divergence",
                                "The production codec and the reference oracle disagree on the file."));

  Json results = Json::array();
  for (const FileReport& file : report.files) {
    for (const qd::Finding& f : file.findings) {
      Json result = Json::object();
      result["ruleId"] = Str(f.rule);
      if (const std::int64_t i = CatalogueIndex(f.rule); i >= 0) result["ruleIndex"] = i;
      result["level"] = f.severity == qd::Severity::kError ? "error" : "warning";
      result["message"] = {{"text", Str(f.message.empty() ? f.rule : f.message)}};
      result["locations"] = SarifLocation(FindingFile(file, f), f.byte_offset);
      Json props = Json::object();
      props["format"] = Str(file.format);
      if (!f.tensor.empty()) props["tensor"] = Str(f.tensor);
      if (!f.field.empty()) props["field"] = Str(f.field);
      if (f.row >= 0) props["row"] = f.row;
      if (f.block >= 0) props["block"] = f.block;
      if (f.element >= 0) props["element"] = f.element;
      result["properties"] = std::move(props);
      results.push_back(std::move(result));
    }
    if (file.divergence) {
      Json result = Json::object();
      result["ruleId"] = std::string(kDivergenceRule);
      result["ruleIndex"] = static_cast<std::int64_t>(AllRules().size());
      result["level"] = "error";
      result["message"] = {
          {"text", Str(file.divergence->signature + ": " + file.divergence->detail)}};
      result["locations"] = SarifLocation(file.path, -1);
      result["properties"] = {{"format", Str(file.format)},
                              {"signature", Str(file.divergence->signature)}};
      results.push_back(std::move(result));
    }
  }

  return SarifLog(std::move(rules), std::move(results), nullptr);
}

std::string Render(OutputFormat format, const Report& report) {
  switch (format) {
    case OutputFormat::kText: return WriteText(report);
    case OutputFormat::kJson: return WriteJson(report);
    case OutputFormat::kJUnit: return WriteJUnit(report);
    case OutputFormat::kSarif: return WriteSarif(report);
    case OutputFormat::kMarkdown: return WriteMarkdown(report);
    case OutputFormat::kHtml: return WriteHtml(report);
  }
  return WriteText(report);
}

// ---------------------------------------------------------------------------
// Campaign

namespace {

std::string ProblemKind(Problem::Kind kind) {
  return kind == Problem::Kind::kDivergence ? "divergence" : "expectation failure";
}

}  // namespace

std::string CampaignText(const CampaignStats& s) {
  using ull = unsigned long long;
  std::string out;
  const double rate = s.elapsed > 0 ? static_cast<double>(s.instances) / s.elapsed : 0;
  out += Format("quantdiff campaign: %llu instances in %.1f s (%.0f/s), seed %llu\n",
                static_cast<ull>(s.instances), s.elapsed, rate, static_cast<ull>(s.seed));
  std::string formats;
  for (const FormatCounts& f : s.formats) formats += (formats.empty() ? "" : ",") + f.name;
  out += Format("repeat with: quantdiff campaign --seed %llu --instances %llu --format %s\n",
                static_cast<ull>(s.seed), static_cast<ull>(s.instances),
                ForTerminal(formats).c_str());
  out += "\n";
  const char* row = "  %-20s %10llu %10llu %10llu %10llu %12llu %13llu\n";
  out += Format("  %-20s %10s %10s %10s %10s %12s %13s\n", "format", "instances", "valid",
                "violations", "mutants", "divergences", "expect-fails");
  for (const FormatCounts& f : s.formats) {
    out += Format(row, ForTerminal(f.name).c_str(), static_cast<ull>(f.instances),
                  static_cast<ull>(f.valid), static_cast<ull>(f.violations),
                  static_cast<ull>(f.mutants), static_cast<ull>(f.divergences),
                  static_cast<ull>(f.expectation_failures));
  }
  for (const FormatCounts& f : s.formats) {
    out += "\n";
    out += Format("  %-20s %10s %12s %13s\n", (ForTerminal(f.name) + " by rule").c_str(),
                  "instances", "divergences", "expect-fails");
    const auto line = [&](const std::string& rule, const RuleCounts& c) {
      out += Format("    %-18s %10llu %12llu %13llu\n", ForTerminal(rule).c_str(),
                    static_cast<ull>(c.instances), static_cast<ull>(c.divergences),
                    static_cast<ull>(c.expectation_failures));
    };
    if (auto it = f.by_rule.find("valid"); it != f.by_rule.end()) line("valid", it->second);
    for (const auto& [rule, c] : f.by_rule) {
      if (rule != "valid") line(rule, c);
    }
  }
  if (!s.modules.empty()) {
    out += "\n";
    out += Format("  %-28s %10s %12s  %s\n", "module", "decodes", "divergences", "formats, library");
    for (const ModuleCounts& m : s.modules) {
      std::string formats;
      for (const std::string& f : m.formats) formats += (formats.empty() ? "" : ",") + f;
      out += Format("  %-28s %10llu %12llu  %s, %s\n", ForTerminal(m.name + " " + m.version).c_str(),
                    static_cast<ull>(m.decodes), static_cast<ull>(m.divergences), ForTerminal(formats).c_str(),
                    ForTerminal(m.path).c_str());
    }
  }
  out += "\n";
  if (s.problems.empty()) {
    out += s.modules.empty() ? "OK: no divergences and no expectation failures. Codec and oracle agreed on every\n"
                               "instance, and every instance got the verdict it was generated for.\n"
                             : "OK: no divergences and no expectation failures. Codec, oracle and every module\n"
                               "agreed on every instance, and every instance got the verdict it was generated for.\n";
    return out;
  }
  out += Format("FAILED: %s with a divergence, %s with an expectation failure; %s:\n",
                Plural(s.divergences, "instance", "instances").c_str(),
                Plural(s.expectation_failures, "instance", "instances").c_str(),
                Plural(s.problems.size(), "distinct signature", "distinct signatures").c_str());
  for (const Problem& p : s.problems) {
    out += "\n  " + ForTerminal(p.signature) + "  (" + ProblemKind(p.kind) + ", " +
           Plural(p.count, "instance", "instances") + ")\n";
    out += "    generated: " + ForTerminal(p.format) + " " +
           (p.rule.empty() ? std::string("valid") : "violating " + ForTerminal(p.rule)) +
           Format(", first at instance %llu (generator seed %llu)\n",
                  static_cast<ull>(p.first_instance), static_cast<ull>(p.first_seed));
    out += "    detail: " + ForTerminal(p.detail) + "\n";
    for (const std::string& saved : p.saved) {
      out += "    saved: " + ForTerminal(s.out_dir + "/" + saved) + "\n";
    }
    if (!p.saved.empty()) {
      out += "    replay: quantdiff diff " + ForTerminal(s.out_dir + "/" + p.saved.front()) + "\n";
    }
  }
  return out;
}

std::string CampaignJson(const CampaignStats& s) {
  Json formats = Json::object();
  for (const FormatCounts& f : s.formats) {
    Json by_rule = Json::object();
    for (const auto& [rule, c] : f.by_rule) {
      by_rule[ValidUtf8(rule)] = {{"instances", c.instances},
                                  {"divergences", c.divergences},
                                  {"expectation_failures", c.expectation_failures}};
    }
    Json j = Json::object();
    j["instances"] = f.instances;
    j["valid"] = f.valid;
    j["violations"] = f.violations;
    j["mutants"] = f.mutants;
    j["divergences"] = f.divergences;
    j["expectation_failures"] = f.expectation_failures;
    j["by_rule"] = std::move(by_rule);
    formats[ValidUtf8(f.name)] = std::move(j);
  }
  Json modules = Json::array();
  for (const ModuleCounts& m : s.modules) {
    Json j = Json::object();
    j["name"] = Str(m.name);
    j["version"] = Str(m.version);
    j["path"] = Str(m.path);
    Json names = Json::array();
    for (const std::string& f : m.formats) names.push_back(Str(f));
    j["formats"] = std::move(names);
    j["decodes"] = m.decodes;
    j["divergences"] = m.divergences;
    modules.push_back(std::move(j));
  }
  Json divergences = Json::array();
  Json failures = Json::array();
  for (const Problem& p : s.problems) {
    Json j = Json::object();
    j["signature"] = Str(p.signature);
    j["format"] = Str(p.format);
    j["rule"] = StrOrNull(p.rule);
    j["count"] = p.count;
    j["first_instance"] = p.first_instance;
    j["first_seed"] = p.first_seed;
    j["detail"] = Str(p.detail);
    Json saved = Json::array();
    for (const std::string& file : p.saved) saved.push_back(Str(file));
    j["files"] = std::move(saved);
    (p.kind == Problem::Kind::kDivergence ? divergences : failures).push_back(std::move(j));
  }
  Json doc = Json::object();
  doc["tool"] = "quantdiff";
  doc["version"] = std::string(ToolVersion());
  doc["seed"] = s.seed;
  doc["seconds"] = s.seconds;
  doc["elapsed_seconds"] = s.elapsed;
  doc["instances"] = s.instances;
  doc["divergences"] = s.divergences;
  doc["expectation_failures"] = s.expectation_failures;
  doc["formats"] = std::move(formats);
  doc["modules"] = std::move(modules);
  doc["divergence_signatures"] = std::move(divergences);
  doc["expectation_failure_signatures"] = std::move(failures);
  return Dump(doc);
}

}  // namespace qd::reports
