// catalogue_test.cc: oracles/rules.json is complete and every MUST rule is
// exercised.
//
//  * The catalogue parses; ids are unique and well formed; every rule has
//    its fields; severities are MUST, SHOULD or warning; each family is a
//    registry format owning the id's prefix.
//  * Every rule ID written as a string literal in codecs/, oracles/,
//    generators/ or harness/ is catalogued.
//  * Every MUST rule has a generator in the registry (the format owning its
//    prefix lists it in violable_rules()), and the generated files make BOTH
//    the codec and the oracle refuse with that rule. A MUST rule added to
//    rules.json without a generator fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/differ.h"
#include "harness/registry.h"

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = QD_SOURCE_DIR;
constexpr int kSeedsPerRule = 25;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct Rule {
  std::string id, family, severity;
  std::string kind;                    // "decode": a decoding rule that refuses nothing;
                                       // "convert": what `quantdiff convert` refuses to write
  std::vector<std::string> tested_by;  // for decode rules: the files that test them
};

class Catalogue : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string text = ReadFile(kRoot / "oracles" / "rules.json");
    json_ = new nlohmann::json(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false));
  }
  static void TearDownTestSuite() {
    delete json_;
    json_ = nullptr;
  }
  static const nlohmann::json& Json() { return *json_; }

  static std::vector<Rule> Rules() {
    std::vector<Rule> rules;
    if (!Json().is_object() || !Json().contains("rules") || !Json()["rules"].is_array()) return rules;
    for (const auto& r : Json()["rules"]) {
      if (!r.is_object()) continue;
      rules.push_back({r.value("id", ""), r.value("family", ""), r.value("severity", ""),
                       r.value("kind", ""), r.value("tested_by", std::vector<std::string>{})});
    }
    return rules;
  }

  static std::set<std::string> Ids() {
    std::set<std::string> ids;
    for (const Rule& r : Rules()) ids.insert(r.id);
    return ids;
  }

 private:
  static nlohmann::json* json_;
};

nlohmann::json* Catalogue::json_ = nullptr;

const std::regex& RuleIdPattern() {
  static const std::regex pattern("^[A-Z][A-Z0-9]*-[0-9]{3}$");  // FP8-001: a digit in the family
  return pattern;
}

std::string Prefix(const std::string& id) { return id.substr(0, id.find('-') + 1); }

const qd::harness::FormatEntry* OwnerOf(const std::string& id) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    if (f.OwnsRule(id)) return &f;
  }
  return nullptr;
}

TEST_F(Catalogue, ParsesWithRulesAndCheckOrder) {
  ASSERT_TRUE(Json().is_object()) << "oracles/rules.json is not a JSON object";
  ASSERT_TRUE(Json().contains("rules") && Json()["rules"].is_array());
  EXPECT_FALSE(Json()["rules"].empty());
  ASSERT_TRUE(Json().contains("check_order"));
  EXPECT_TRUE(Json()["check_order"].is_string());
}

TEST_F(Catalogue, EveryRuleHasItsFieldsAndAKnownSeverity) {
  ASSERT_TRUE(Json().is_object() && Json().contains("rules"));
  int index = 0;
  for (const auto& r : Json()["rules"]) {
    SCOPED_TRACE("rule #" + std::to_string(index++) + " " + r.dump().substr(0, 80));
    ASSERT_TRUE(r.is_object());
    for (const char* field : {"id", "family", "severity", "source", "section", "text"}) {
      ASSERT_TRUE(r.contains(field)) << "missing " << field;
      ASSERT_TRUE(r[field].is_string()) << field << " is not a string";
      EXPECT_FALSE(r[field].get<std::string>().empty()) << field << " is empty";
    }
    if (r.contains("decision")) {
      EXPECT_TRUE(r["decision"].is_string());
    }
    const std::string severity = r["severity"];
    EXPECT_TRUE(severity == "MUST" || severity == "SHOULD" || severity == "warning")
        << "severity " << severity;
    EXPECT_TRUE(std::regex_match(r["id"].get<std::string>(), RuleIdPattern()))
        << "id " << r["id"];
  }
}

TEST_F(Catalogue, IdsAreUnique) {
  std::map<std::string, int> seen;
  for (const Rule& r : Rules()) ++seen[r.id];
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id << " appears " << count << " times";
}

// The family names the registry format that owns the prefix ("ST-" ->
// "safetensors", "RBQ-" -> "rbq"), and every format's prefix has rules.
TEST_F(Catalogue, FamiliesAreRegistryFormats) {
  for (const Rule& r : Rules()) {
    if (qd::harness::ModelDirFormat().OwnsRule(r.id)) {
      EXPECT_EQ(r.family, qd::harness::ModelDirFormat().name) << r.id;
      continue;
    }
    const qd::harness::FormatEntry* owner = OwnerOf(r.id);
    ASSERT_NE(owner, nullptr) << r.id << ": no registry format owns prefix " << Prefix(r.id);
    EXPECT_EQ(r.family, owner->name) << r.id;
  }
  const std::vector<Rule> rules = Rules();
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    for (std::string_view prefix : f.rule_prefixes) {
      const bool has_rules = std::any_of(rules.begin(), rules.end(), [&](const Rule& r) {
        return Prefix(r.id) == prefix;
      });
      EXPECT_TRUE(has_rules) << f.name << " owns no catalogued rule with prefix " << prefix;
    }
  }
}

// ---- rule IDs used in the sources -------------------------------------------

// The contents of every string literal of a C++ text, comments skipped.
std::vector<std::pair<int, std::string>> StringLiterals(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  int line = 1;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const std::size_t end = text.find("*/", i + 2);
      const std::size_t stop = end == std::string::npos ? text.size() : end + 2;
      line += static_cast<int>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i),
                                          text.begin() + static_cast<std::ptrdiff_t>(stop), '\n'));
      i = stop;
    } else if (c == '\'') {  // a character literal (or a digit separator: harmless)
      i += 1;
      while (i < text.size() && text[i] != '\'' && text[i] != '\n') i += text[i] == '\\' ? 2 : 1;
      ++i;
    } else if (c == '"') {
      std::string literal;
      ++i;
      while (i < text.size() && text[i] != '"' && text[i] != '\n') {
        if (text[i] == '\\' && i + 1 < text.size()) {
          literal += text[i + 1];
          i += 2;
        } else {
          literal += text[i++];
        }
      }
      ++i;
      out.emplace_back(line, literal);
    } else {
      ++i;
    }
  }
  return out;
}

TEST(CatalogueScanner, FindsLiteralsOutsideComments) {
  const auto found = StringLiterals("a(\"RBQ-005\"); // \"ST-999\"\n/* \"ST-998\" */ b = \"x ST-003 y\";\n");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].second, "RBQ-005");
  EXPECT_EQ(found[1].second, "x ST-003 y");
  EXPECT_EQ(found[1].first, 2);
}

struct LiteralId {
  std::string file;
  int line;
  std::string id;
};

// Rule IDs written inside string literals of the C++ sources under dir.
std::vector<LiteralId> RuleIdsIn(const std::string& dir) {
  static const std::regex kIdInText(R"(\b[A-Z][A-Z0-9]*-[0-9]{3}\b)");
  std::vector<LiteralId> out;
  if (!fs::exists(kRoot / dir)) return out;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / dir)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".cpp" && ext != ".hpp")) {
      continue;
    }
    for (const auto& [line, literal] : StringLiterals(ReadFile(entry.path()))) {
      for (auto it = std::sregex_iterator(literal.begin(), literal.end(), kIdInText);
           it != std::sregex_iterator(); ++it) {
        out.push_back({fs::relative(entry.path(), kRoot).string(), line, it->str()});
      }
    }
  }
  return out;
}

TEST_F(Catalogue, EveryRuleIdInTheSourcesIsCatalogued) {
  const std::set<std::string> ids = Ids();
  ASSERT_FALSE(ids.empty());
  int found = 0;
  for (const char* dir : {"codecs", "oracles", "generators", "harness"}) {
    ASSERT_TRUE(fs::exists(kRoot / dir)) << dir;
    for (const LiteralId& use : RuleIdsIn(dir)) {
      ++found;
      EXPECT_TRUE(ids.count(use.id))
          << use.file << ":" << use.line << ": rule " << use.id << " is not in oracles/rules.json";
    }
  }
  EXPECT_GT(found, 0) << "the scan found no rule ID at all";
}

// Both readers name every catalogued rule somewhere (a rule no source emits
// is a check nobody makes).
TEST_F(Catalogue, EveryCataloguedRuleIsEmittedByCodecAndOracle) {
  for (const char* dir : {"codecs", "oracles"}) {
    std::set<std::string> used;
    for (const LiteralId& use : RuleIdsIn(dir)) {
      const bool test_file = use.file.size() >= 8 && use.file.compare(use.file.size() - 8, 8, "_test.cc") == 0;
      if (!test_file) used.insert(use.id);
    }
    for (const Rule& r : Rules()) {
      // A decoding rule refuses nothing and a conversion rule refuses a
      // conversion, not a file: no reader's finding names either.
      if (r.kind == "decode" || r.kind == "convert") continue;
      EXPECT_TRUE(used.count(r.id)) << r.id << " appears in no string literal under " << dir << "/";
    }
  }
}

// ---- every MUST rule is triggered --------------------------------------------

std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) s += " | " + qd::harness::Describe(f);
  return s;
}

bool RefusedWith(const qd::Outcome& o, const std::string& rule) {
  return o.refused && !o.findings.empty() && o.findings.back().severity == qd::Severity::kError &&
         o.findings.back().rule == rule;
}

bool WarnedWith(const qd::Outcome& o, const std::string& rule) {
  if (o.refused) return false;
  for (const qd::Finding& f : o.findings) {
    if (f.rule == rule && f.severity == qd::Severity::kWarning) return true;
  }
  return false;
}

// The same for a model-directory rule: the directory generator's instances
// (docs/model_dir.md) refused with the rule by both directory readers.
void ExpectDirectoryGeneratorRefusedByBothSides(const std::string& id) {
  const qd::harness::DirFormatEntry& dir = qd::harness::ModelDirFormat();
  const std::vector<std::string> violable = dir.violable_rules();
  if (std::find(violable.begin(), violable.end(), id) == violable.end()) {
    ADD_FAILURE() << "MUST rule " << id << " has no directory generator in violable_rules()";
    return;
  }
  for (int seed = 1; seed <= kSeedsPerRule; ++seed) {
    qd::harness::Rng rng(static_cast<std::uint64_t>(seed));
    const qd::gen::GeneratedDir g = dir.generate_violation(id, rng);
    const qd::ModelDirListing listing = g.Listing();
    const qd::Outcome codec = dir.codec_read(listing);
    const qd::Outcome oracle = dir.oracle_read(listing);
    EXPECT_TRUE(RefusedWith(codec, id))
        << "seed " << seed << " (" << g.description << "): codec " << Findings(codec);
    EXPECT_TRUE(RefusedWith(oracle, id))
        << "seed " << seed << " (" << g.description << "): oracle " << Findings(oracle);
  }
}

TEST_F(Catalogue, EveryMustRuleHasAGeneratorThatBothSidesRefuse) {
  int must_rules = 0;
  for (const Rule& r : Rules()) {
    if (r.severity != "MUST") continue;
    ++must_rules;
    SCOPED_TRACE(r.id);
    if (r.kind == "decode" || r.kind == "convert") {
      // A decoding rule refuses nothing, a conversion rule no file; decoy
      // vectors and conversion tests test them instead, and the catalogue
      // names the test files, which must exist.
      EXPECT_FALSE(r.tested_by.empty()) << r.id << " is a " << r.kind << " rule without tested_by";
      for (const std::string& file : r.tested_by) {
        EXPECT_TRUE(fs::exists(kRoot / file)) << r.id << ": tested_by " << file << " does not exist";
      }
      continue;
    }
    if (qd::harness::ModelDirFormat().OwnsRule(r.id)) {
      ExpectDirectoryGeneratorRefusedByBothSides(r.id);
      continue;
    }
    const qd::harness::FormatEntry* owner = OwnerOf(r.id);
    ASSERT_NE(owner, nullptr) << "no registry format owns " << r.id;
    const std::vector<std::string> violable = owner->violable_rules();
    if (std::find(violable.begin(), violable.end(), r.id) == violable.end()) {
      ADD_FAILURE() << "MUST rule " << r.id << " has no test that triggers it: format "
                    << owner->name << " lists no generator for it in violable_rules()";
      continue;
    }
    for (int seed = 1; seed <= kSeedsPerRule; ++seed) {
      qd::harness::Rng rng(static_cast<std::uint64_t>(seed));
      const qd::harness::Generated g = owner->generate_violation(r.id, rng);
      const qd::ByteView view{g.bytes.data(), g.bytes.size()};
      const qd::Outcome codec = owner->codec_read(view, "catalogue.safetensors", g.side_files);
      const qd::Outcome oracle = owner->oracle_read(view, "catalogue.safetensors", g.side_files);
      EXPECT_TRUE(RefusedWith(codec, r.id))
          << "seed " << seed << " (" << g.description << "): codec " << Findings(codec);
      EXPECT_TRUE(RefusedWith(oracle, r.id))
          << "seed " << seed << " (" << g.description << "): oracle " << Findings(oracle);
    }
  }
  EXPECT_GT(must_rules, 0);
}

// Warning rules with a generator: both sides accept and warn.
TEST_F(Catalogue, WarningRulesWithAGeneratorWarnOnBothSides) {
  for (const Rule& r : Rules()) {
    if (r.severity != "warning") continue;
    SCOPED_TRACE(r.id);
    const qd::harness::FormatEntry* owner = OwnerOf(r.id);
    ASSERT_NE(owner, nullptr);
    const std::vector<std::string> violable = owner->violable_rules();
    if (std::find(violable.begin(), violable.end(), r.id) == violable.end()) continue;
    for (int seed = 1; seed <= kSeedsPerRule; ++seed) {
      qd::harness::Rng rng(static_cast<std::uint64_t>(seed));
      const qd::harness::Generated g = owner->generate_violation(r.id, rng);
      const qd::ByteView view{g.bytes.data(), g.bytes.size()};
      const qd::Outcome codec = owner->codec_read(view, "catalogue.safetensors", g.side_files);
      const qd::Outcome oracle = owner->oracle_read(view, "catalogue.safetensors", g.side_files);
      EXPECT_TRUE(WarnedWith(codec, r.id)) << "seed " << seed << ": codec " << Findings(codec);
      EXPECT_TRUE(WarnedWith(oracle, r.id)) << "seed " << seed << ": oracle " << Findings(oracle);
    }
  }
}

}  // namespace
