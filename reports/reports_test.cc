// reports_test.cc: the embedded catalogue and the writers' document shapes.
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/conformance.h"
#include "reports/escape.h"
#include "reports/report.h"
#include "reports/rules.h"
#include "reports/writers.h"

namespace qd::reports {
namespace {

TEST(Rules, CatalogueIsEmbeddedAndComplete) {
  const nlohmann::json doc = nlohmann::json::parse(CatalogueJson());
  ASSERT_EQ(AllRules().size(), doc["rules"].size());
  for (int i = 1; i <= 13; ++i) {
    char id[8];
    std::snprintf(id, sizeof id, "ST-%03d", i);
    const RuleInfo* r = FindRule(id);
    ASSERT_NE(r, nullptr) << id;
    EXPECT_EQ(r->family, "safetensors");
    EXPECT_TRUE(IsErrorRule(*r)) << id;
    EXPECT_FALSE(r->text.empty());
  }
  for (int i = 1; i <= 5; ++i) {
    const RuleInfo* r = FindRule("RBQ-00" + std::to_string(i));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->family, "rbq");
    EXPECT_EQ(r->severity, RuleSeverity::kMust);
  }
  for (const char* id : {"ST-101", "ST-102", "RBQ-101"}) {
    ASSERT_NE(FindRule(id), nullptr) << id;
    EXPECT_EQ(FindRule(id)->severity, RuleSeverity::kWarning) << id;
  }
  EXPECT_EQ(FindRule("ST-999"), nullptr);
  EXPECT_EQ(FindRule(""), nullptr);
  EXPECT_FALSE(CheckOrder().empty());
  EXPECT_GE(CatalogueVersion(), 1);
}

TEST(Escape, Utf8) {
  EXPECT_EQ(ValidUtf8("plain"), "plain");
  EXPECT_EQ(ValidUtf8("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(ValidUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(ValidUtf8("\xc0\x80"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong NUL
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
  EXPECT_EQ(ValidUtf8("\xf4\x90\x80\x80").find("\xf4"), std::string::npos);  // > U+10FFFF
  EXPECT_EQ(ValidUtf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");  // truncated
  EXPECT_EQ(ValidUtf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

TEST(Escape, Terminal) {
  EXPECT_EQ(ForTerminal("w.0"), "w.0");
  EXPECT_EQ(ForTerminal("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(ForTerminal("a\\b"), "a\\\\b");
  EXPECT_EQ(ForTerminal("\xff"), "\\xff");
  EXPECT_EQ(ForTerminal("\xc2\x9b"), "\\xc2\\x9b");  // C1 CSI
  EXPECT_EQ(ForTerminal("\xc3\xa9"), "\xc3\xa9");
}

TEST(Escape, XmlAndUri) {
  EXPECT_EQ(ForXml("<a & \"b\">'"), "&lt;a &amp; &quot;b&quot;&gt;&apos;");
  EXPECT_EQ(ForXml(std::string("x\0y", 3)), "x\xef\xbf\xbdy");
  EXPECT_EQ(ForXml("\xef\xbf\xbf"), "\xef\xbf\xbd");  // U+FFFF
  EXPECT_EQ(PathToUri("dir/a b%.safetensors"), "dir/a%20b%25.safetensors");
}

TEST(Escape, Markdown) {
  EXPECT_EQ(ForMarkdown("w.0"), "w\\.0");
  EXPECT_EQ(ForMarkdown("a|b*c_<d>`e[f](g)"), "a\\|b\\*c\\_\\<d\\>\\`e\\[f\\]\\(g\\)");
  EXPECT_EQ(ForMarkdown("x\ny\tz"), "x y z");  // a table row stays one line
  EXPECT_EQ(ForMarkdown(std::string("x\0", 2)), "x\xef\xbf\xbd");
  EXPECT_EQ(ForMarkdown("\xff"), "\xef\xbf\xbd");
  // The fence outgrows any backtick run inside, so the text cannot close it.
  EXPECT_EQ(MarkdownCodeBlock("ls", "sh"), "```sh\nls\n```\n");
  EXPECT_EQ(MarkdownCodeBlock("a ```` b"), "`````\na ```` b\n`````\n");
  EXPECT_EQ(MarkdownCodeBlock("a\x1b[31m"), "```\na\xef\xbf\xbd[31m\n```\n");
}

Report SampleReport() {
  Report report{"check", {}};
  FileReport bad;
  bad.path = "bad.safetensors";
  bad.format = "rbq";
  bad.refused = true;
  qd::Finding warn;
  warn.rule = "ST-102";
  warn.severity = qd::Severity::kWarning;
  warn.field = "header";
  warn.byte_offset = 8;
  warn.message = "not padded";
  qd::Finding err;
  err.rule = "RBQ-005";
  err.tensor = "w\x1b";
  err.field = "scale";
  err.byte_offset = 120;
  err.row = 1;
  err.block = 2;
  err.message = "scale is <inf>";
  bad.findings = {warn, err};
  report.files.push_back(bad);
  FileReport good;
  good.path = "good.safetensors";
  good.format = "safetensors";
  report.files.push_back(good);
  FileReport diverged;
  diverged.path = "d.safetensors";
  diverged.format = "rbq";
  diverged.divergence = qd::harness::Divergence{"DIFF:rbq:bytes:value", "element 3"};
  report.files.push_back(diverged);
  return report;
}

TEST(Writers, JsonShape) {
  const nlohmann::json doc = nlohmann::json::parse(WriteJson(SampleReport()));
  ASSERT_EQ(doc["findings"].size(), 2u);
  const nlohmann::json& w = doc["findings"][0];
  EXPECT_EQ(w["rule"], "ST-102");
  EXPECT_EQ(w["severity"], "warning");
  EXPECT_EQ(w["file"], "bad.safetensors");
  EXPECT_TRUE(w["tensor"].is_null());
  EXPECT_EQ(w["position"]["byte_offset"], 8);
  EXPECT_TRUE(w["position"]["row"].is_null());
  EXPECT_TRUE(w["position"]["block"].is_null());
  EXPECT_TRUE(w["position"]["element"].is_null());
  const nlohmann::json& e = doc["findings"][1];
  EXPECT_EQ(e["severity"], "error");
  EXPECT_EQ(e["tensor"], "w\x1b");
  EXPECT_EQ(e["position"]["row"], 1);
  EXPECT_EQ(e["position"]["block"], 2);
  const nlohmann::json& s = doc["summary"];
  EXPECT_EQ(s["files"], 3);
  EXPECT_EQ(s["refused"], 1);
  EXPECT_EQ(s["errors"], 1);
  EXPECT_EQ(s["warnings"], 1);
  EXPECT_EQ(s["divergences"], 1);
  EXPECT_EQ(s["by_rule"]["RBQ-005"], 1);
  EXPECT_EQ(s["by_rule"]["ST-102"], 1);
  ASSERT_EQ(doc["divergences"].size(), 1u);
  EXPECT_EQ(doc["divergences"][0]["signature"], "DIFF:rbq:bytes:value");
  EXPECT_EQ(doc["divergences"][0]["file"], "d.safetensors");
  EXPECT_FALSE(doc.contains("verdicts"));
}

// A config finding (CFG-*) names its config source; every writer reports it
// against that file, and JSON keeps the file that was read as "input".
TEST(Writers, FindingsAboutAConfigNameTheConfig) {
  Report report{"check", {}};
  FileReport model;
  model.path = "m/model.safetensors";
  model.format = "gptq";
  model.refused = true;
  qd::Finding f;
  f.rule = "CFG-010";
  f.file = "m/quantize_config.json";
  f.field = "bits";
  f.message = "bits 4 here, 8 in m/config.json";
  model.findings = {f};
  report.files.push_back(model);

  const nlohmann::json doc = nlohmann::json::parse(WriteJson(report));
  ASSERT_EQ(doc["findings"].size(), 1u);
  EXPECT_EQ(doc["findings"][0]["file"], "m/quantize_config.json");
  EXPECT_EQ(doc["findings"][0]["input"], "m/model.safetensors");
  const nlohmann::json sarif = nlohmann::json::parse(WriteSarif(report));
  EXPECT_EQ(sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
                 ["artifactLocation"]["uri"],
            "m/quantize_config.json");
  EXPECT_EQ(WriteText(report).rfind("m/quantize_config.json: CFG-010 error field=bits", 0), 0u)
      << WriteText(report);
  EXPECT_NE(WriteJUnit(report).find("m/quantize_config.json: CFG-010"), std::string::npos);
}

TEST(Writers, JsonSurvivesInvalidUtf8) {
  Report report{"check", {}};
  FileReport f;
  f.path = "x\xff.safetensors";
  f.format = "safetensors";
  qd::Finding finding;
  finding.rule = "ST-004";
  finding.message = "bad \xc0 byte";
  f.findings = {finding};
  report.files.push_back(f);
  nlohmann::json json_doc;
  nlohmann::json sarif_doc;
  EXPECT_NO_THROW(json_doc = nlohmann::json::parse(WriteJson(report)));
  EXPECT_NO_THROW(sarif_doc = nlohmann::json::parse(WriteSarif(report)));
  EXPECT_TRUE(json_doc.is_object());
  EXPECT_TRUE(sarif_doc.is_object());
}

TEST(Writers, Text) {
  const std::string text = WriteText(SampleReport());
  EXPECT_NE(text.find("bad.safetensors: RBQ-005 error tensor=w\\x1b field=scale offset=120 "
                      "row=1 block=2: scale is <inf>\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("good.safetensors: ok [safetensors]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d.safetensors: DIFF:rbq:bytes:value: element 3\n"), std::string::npos);
  EXPECT_NE(text.find("3 files: 1 refused, 1 error, 1 warning, 1 divergence\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST(Writers, JUnit) {
  const std::string xml = WriteJUnit(SampleReport());
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  EXPECT_NE(xml.find("tests=\"3\" failures=\"2\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure type=\"RBQ-005\""), std::string::npos);
  EXPECT_NE(xml.find("scale is &lt;inf&gt;"), std::string::npos);
  EXPECT_NE(xml.find("<testcase classname=\"quantdiff.check.safetensors\" name=\"good.safetensors\"/>"),
            std::string::npos)
      << xml;
  EXPECT_EQ(xml.find('\x1b'), std::string::npos);
}

TEST(Writers, Sarif) {
  const nlohmann::json doc = nlohmann::json::parse(WriteSarif(SampleReport()));
  EXPECT_EQ(doc["version"], "2.1.0");
  const nlohmann::json& run = doc["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "quantdiff");
  EXPECT_EQ(run["tool"]["driver"]["rules"].size(), AllRules().size() + 1);
  ASSERT_EQ(run["results"].size(), 3u);
  const nlohmann::json& r = run["results"][1];
  EXPECT_EQ(r["ruleId"], "RBQ-005");
  EXPECT_EQ(r["level"], "error");
  const int index = r["ruleIndex"];
  EXPECT_EQ(run["tool"]["driver"]["rules"][index]["id"], "RBQ-005");
  const nlohmann::json& loc = r["locations"][0]["physicalLocation"];
  EXPECT_EQ(loc["artifactLocation"]["uri"], "bad.safetensors");
  EXPECT_EQ(loc["region"]["byteOffset"], 120);
  EXPECT_EQ(run["results"][0]["level"], "warning");
  EXPECT_FALSE(run["results"][2]["locations"][0]["physicalLocation"].contains("region"));
}

TEST(Writers, CampaignDocuments) {
  CampaignStats s;
  s.seed = 7;
  s.instances = 10;
  s.divergences = 1;
  s.out_dir = "out";
  FormatCounts f;
  f.name = "rbq";
  f.instances = 10;
  f.by_rule["valid"].instances = 5;
  f.by_rule["RBQ-005"].instances = 5;
  s.formats.push_back(f);
  Problem p;
  p.signature = "DIFF:rbq:bytes:value";
  p.format = "rbq";
  p.count = 1;
  p.saved = {"divergences/DIFF-rbq-bytes-value-00000000.safetensors"};
  s.problems.push_back(p);
  const nlohmann::json doc = nlohmann::json::parse(CampaignJson(s));
  EXPECT_EQ(doc["instances"], 10);
  EXPECT_EQ(doc["formats"]["rbq"]["by_rule"]["RBQ-005"]["instances"], 5);
  EXPECT_EQ(doc["divergence_signatures"][0]["signature"], "DIFF:rbq:bytes:value");
  EXPECT_TRUE(doc["divergence_signatures"][0]["rule"].is_null());
  const std::string text = CampaignText(s);
  EXPECT_NE(text.find("DIFF:rbq:bytes:value"), std::string::npos);
  EXPECT_NE(text.find("saved: out/divergences/"), std::string::npos);
}

// A failing vector whose tensor name, file and quoted standard error are
// hostile: every writer keeps them text of its medium.
ConformanceReport HostileConformance() {
  ConformanceReport report{"reader {input} {output} # </pre><script>alert(0)</script>", {}};
  VectorRun pass{"rbq", 5, "RBQ-001", "rbq/5.safetensors", "refuse with RBQ-001", "exit 1 naming RBQ-001",
                 std::string(kPassOutcome), "", std::nullopt, "quantdiff test-impl --only 5"};
  VectorRun fail{"rbq", 1, "", "rbq/1<u>.safetensors", "accept and decode 1 tensor (2 values)",
                 "exit 0 with an output; stderr: <img src=x onerror=alert(1)>", "wrong-output",
                 "tensor </code><script>alert(2)</script>|x element 1: expected 0x3f800000, got 0xbf800000",
                 FirstDifference{"</code><script>alert(2)</script>|x\x1b[2J", 1, 0x3f800000u, 0xbf800000u},
                 "quantdiff test-impl --only 1"};
  report.runs = {pass, fail};
  return report;
}

TEST(Writers, ConformanceKeepsHostileNamesText) {
  const ConformanceReport report = HostileConformance();
  const std::string html = RenderConformance(OutputFormat::kHtml, report);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<u>"), std::string::npos);
  EXPECT_NE(html.find("&lt;/code&gt;&lt;script&gt;alert(2)&lt;/script&gt;|x\xef\xbf\xbd[2J"), std::string::npos);
  // Both bit patterns: 1.0 and -1.0 differ in the sign bit alone, marked.
  EXPECT_NE(html.find("0x3f800000"), std::string::npos);
  EXPECT_NE(html.find("0xbf800000"), std::string::npos);
  EXPECT_EQ(html.find("<i class=\"d\">") , html.find("<i class=\"d\">0</i>"));  // expected's sign bit
  std::size_t marked = 0;
  for (std::size_t at = html.find("<i class=\"d\">"); at != std::string::npos; at = html.find("<i class=\"d\">", at + 1)) ++marked;
  EXPECT_EQ(marked, 2u);  // one bit, in each of the two rows

  const std::string md = RenderConformance(OutputFormat::kMarkdown, report);
  EXPECT_NE(md.find("\\<img src\\=x onerror\\=alert\\(1\\)\\>"), std::string::npos) << md;
  EXPECT_NE(md.find("| **FAIL** | rbq | valid | 0 | 1 |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| pass | rbq | RBQ\\-001 | 1 | 0 |\n"), std::string::npos) << md;

  const std::string xml = RenderConformance(OutputFormat::kJUnit, report);
  EXPECT_EQ(xml.find("<script"), std::string::npos);
  EXPECT_EQ(xml.find("<img"), std::string::npos);
  EXPECT_NE(xml.find("name=\"tcId 1 rbq/1&lt;u&gt;.safetensors\""), std::string::npos) << xml;

  const nlohmann::json sarif = nlohmann::json::parse(RenderConformance(OutputFormat::kSarif, report));
  const nlohmann::json& results = sarif["runs"][0]["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["kind"], "pass");
  EXPECT_EQ(results[1]["ruleId"], "QD-VALID");
  EXPECT_EQ(results[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "rbq/1%3Cu%3E.safetensors");
  EXPECT_EQ(results[1]["properties"]["difference"]["got_value"], "-1");

  const std::string text = RenderConformance(OutputFormat::kText, report);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);  // the tensor name's escape written as \x1b
  EXPECT_NE(text.find("\\x1b[2J"), std::string::npos);
}

}  // namespace
}  // namespace qd::reports
