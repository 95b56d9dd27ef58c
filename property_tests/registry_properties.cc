// registry_properties.cc: every format of qd::harness::Formats(), every rule
// its generator can violate.
//
//  * A generated violation of a MUST rule is refused by codec_read,
//    codec_check and oracle_read with exactly that rule as the error; a
//    violation of a warning rule (severity per oracles/rules.json) is
//    accepted with that rule among the warnings. One GoogleTest per rule.
//  * Valid instances are accepted by both readers with no error, decode to
//    the same values.
//  * Valid and violating instances are detected as their generator's format
//    by the codec (DetectFormat) and by the oracle (OracleDetectFormat).
//  * Mutated instances of every format: codec and oracle agree, on the
//    detected format too, and the codec's check-only path reports what its
//    full read reports.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/differ.h"
#include "harness/registry.h"
#include "property_tests/gen/outcome_text.h"
#include "property_tests/gen/rc_gen.h"
#include "tests/safetensors_by_the_tests.h"

namespace {

using qd::harness::FormatEntry;

constexpr char kFile[] = "registry.safetensors";

// The catalogue's rules, oracles/rules.json.
const nlohmann::json& CatalogueRules() {
  static const nlohmann::json rules = [] {
    std::ifstream in(std::string(QD_SOURCE_DIR) + "/oracles/rules.json");
    const nlohmann::json catalogue = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (catalogue.is_object() && catalogue.contains("rules")) return catalogue["rules"];
    return nlohmann::json::array();
  }();
  return rules;
}

// rule ID -> "MUST" | "SHOULD" | "warning", from the catalogue.
const std::map<std::string, std::string>& Severities() {
  static const std::map<std::string, std::string> severities = [] {
    std::map<std::string, std::string> out;
    for (const auto& rule : CatalogueRules()) out[rule.value("id", "")] = rule.value("severity", "");
    return out;
  }();
  return severities;
}

using qdtest::ErrorCount;
using qdtest::Findings;

// "" when the outcome is what the rule's severity requires.
std::string Verdict(const qd::Outcome& o, const std::string& rule, bool is_warning) {
  if (is_warning) {
    bool warned = false;
    for (const qd::Finding& f : o.findings) {
      warned |= f.rule == rule && f.severity == qd::Severity::kWarning;
    }
    if (o.refused || ErrorCount(o) != 0 || !warned) {
      return "should accept with warning " + rule + ": " + Findings(o);
    }
    return "";
  }
  if (!o.refused || ErrorCount(o) != 1 || o.findings.back().severity != qd::Severity::kError ||
      o.findings.back().rule != rule) {
    return "should refuse with exactly " + rule + ": " + Findings(o);
  }
  return "";
}

// The format the Detection rules give a generated instance: its generator's,
// except that docs/pt.md 1.1 detects no torch file in PT-002's instances
// with bytes before the archive or shorter than a ZIP signature (they are
// read as plain safetensors; `--format pt` gives PT-002).
// docs/awq.md section 2: a layer with P.qweight and P.scales of one and the
// same rank-2 shape and no P.g_idx is an AWQ layer (GEMV's shapes can be
// GPTQ's with K / 8 groups), so a GPTQ-101 file missing g_idx there is AWQ.
// Read from the header by the tests' own parser.
bool HasGidxLessEqualShapes(const std::vector<std::uint8_t>& file) {
  const nlohmann::json header = qdtest::HeaderReadByTheTests(file);
  if (!header.is_object()) return false;
  for (const auto& [name, entry] : header.items()) {
    const std::size_t dot = name.rfind(".qweight");
    if (dot == std::string::npos || dot + 8 != name.size()) continue;
    const std::string p = name.substr(0, dot + 1);
    if (header.contains(p + "g_idx") || !header.contains(p + "scales")) continue;
    const nlohmann::json& a = entry["shape"];
    const nlohmann::json& b = header[p + "scales"]["shape"];
    if (a.size() == 2 && a == b) return true;
  }
  return false;
}

std::string_view ExpectedFormat(const FormatEntry& f, const qd::harness::Generated& g) {
  const std::vector<std::uint8_t>& b = g.bytes;
  const bool zip_signature = b.size() >= 4 && b[0] == 'P' && b[1] == 'K' &&
                             ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6));
  if (f.name == "pt" && g.expected_rule == "PT-002" && !zip_signature) return "safetensors";
  if (f.name == "gptq" && g.expected_rule == "GPTQ-101" && HasGidxLessEqualShapes(g.bytes)) return "awq";
  // Without the magic nothing claims a .gguf file (docs/gguf.md section 5).
  if (f.name == "gguf" && g.expected_rule == "GGUF-001") return "safetensors";
  return f.name;
}

// "" when the codec and the oracle both detect the file with its side files
// as `format`.
std::string DetectedAs(qd::ByteView file, const qd::harness::SideFiles& side_files,
                       std::string_view format) {
  const std::string_view codec = qd::harness::DetectFormat(file, side_files).name;
  const std::string_view oracle = qd::harness::OracleDetectFormat(file, side_files).name;
  if (codec == format && oracle == format) return "";
  return "\n  generated as " + std::string(format) + ", detected as " + std::string(codec) +
         " by the codec, " + std::string(oracle) + " by the oracle";
}

struct RuleCase {
  std::string format;
  std::string rule;
};

std::vector<RuleCase> AllViolableRules() {
  std::vector<RuleCase> cases;
  for (const FormatEntry& f : qd::harness::Formats()) {
    for (const std::string& rule : f.violable_rules()) cases.push_back({std::string(f.name), rule});
  }
  return cases;
}

class RegistryViolation : public ::testing::TestWithParam<RuleCase> {};

TEST_P(RegistryViolation, RefusedWithThatRuleByCodecAndOracle) {
  const RuleCase& c = GetParam();
  const FormatEntry* format = qd::harness::FindFormat(c.format);
  ASSERT_NE(format, nullptr);
  const auto severity = Severities().find(c.rule);
  ASSERT_NE(severity, Severities().end()) << c.rule << " is not in oracles/rules.json";
  const bool is_warning = severity->second == "warning";
  const bool ok = rc::check(c.format + " violation of " + c.rule, [&](std::uint64_t seed) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = format->generate_violation(c.rule, rng);
    RC_ASSERT(g.expected_rule == c.rule);
    const qd::ByteView view{g.bytes.data(), g.bytes.size()};
    const qd::Outcome codec = format->codec_read(view, kFile, g.side_files);
    const qd::Outcome check = format->codec_check(view, kFile, g.side_files);
    const qd::Outcome oracle = format->oracle_read(view, kFile, g.side_files);
    std::string problems;
    for (const auto& [who, o] : {std::pair<const char*, const qd::Outcome*>{"codec_read", &codec},
                                 {"codec_check", &check},
                                 {"oracle_read", &oracle}}) {
      const std::string why = Verdict(*o, c.rule, is_warning);
      if (!why.empty()) problems += std::string("\n  ") + who + " " + why;
    }
    if (auto d = qd::harness::Compare(codec, oracle, format->name)) {
      problems += "\n  " + d->signature + ": " + d->detail;
    }
    problems += DetectedAs(view, g.side_files, ExpectedFormat(*format, g));
    if (!problems.empty()) {
      RC_FAIL(g.description + " (seed " + std::to_string(seed) + "; file " +
              qdtest::gen::ShowBytes(g.bytes, 200) + "):" + problems);
    }
  });
  EXPECT_TRUE(ok);
}

INSTANTIATE_TEST_SUITE_P(
    AllFormats, RegistryViolation, ::testing::ValuesIn(AllViolableRules()),
    [](const ::testing::TestParamInfo<RuleCase>& info) {
      std::string name = info.param.format + "_" + info.param.rule;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

}  // namespace

// Every catalogued rule that refuses or warns a file (all but kinds "decode",
// which refuse nothing, and "convert", which refuse a conversion) is one its
// format's generator can violate, so each is
// reached by RegistryViolation below, warnings included.
TEST(RegistryProperties, EveryRefusingOrWarningRuleIsGenerated) {
  ASSERT_FALSE(CatalogueRules().empty());
  for (const auto& rule : CatalogueRules()) {
    const std::string id = rule.value("id", "");
    // Decoding rules refuse nothing; conversion rules (docs/awq.md section
    // 11) refuse a conversion, not a file: no generator reaches either.
    if (rule.value("kind", "") == "decode" || rule.value("kind", "") == "convert") continue;
    // The IDX- rules belong to the directory entry, whose generator makes
    // directories (model_dir_properties runs them on both readers).
    if (qd::harness::ModelDirFormat().OwnsRule(id)) {
      const std::vector<std::string> violable = qd::harness::ModelDirFormat().violable_rules();
      EXPECT_NE(std::find(violable.begin(), violable.end(), id), violable.end()) << id;
      continue;
    }
    const FormatEntry* owner = nullptr;
    for (const FormatEntry& f : qd::harness::Formats()) {
      if (f.OwnsRule(id)) owner = &f;
    }
    ASSERT_NE(owner, nullptr) << id;
    const std::vector<std::string> violable = owner->violable_rules();
    EXPECT_NE(std::find(violable.begin(), violable.end(), id), violable.end())
        << id << " (" << rule.value("severity", "") << ") is not reached by " << owner->name
        << "'s generate_violation";
  }
}

// Every rule a generator says it can violate is in the catalogue and reached
// by the format: its ID starts with one of the format's rule_prefixes, or
// with a hosted prefix another format owns (pt lists BNB-* rules: the
// bitsandbytes readers run on a .pt tensor table, docs/pt.md 6.4).
TEST(RegistryProperties, ViolableRulesAreCataloguedAndReached) {
  for (const FormatEntry& f : qd::harness::Formats()) {
    EXPECT_FALSE(f.violable_rules().empty()) << f.name;
    for (const std::string& rule : f.violable_rules()) {
      EXPECT_TRUE(Severities().count(rule)) << f.name << ": " << rule << " is not catalogued";
      EXPECT_TRUE(f.ReachesRule(rule)) << f.name << " generates " << rule;
    }
    for (std::string_view prefix : f.hosted_prefixes) {
      const bool owned_elsewhere = std::any_of(
          qd::harness::Formats().begin(), qd::harness::Formats().end(), [&](const FormatEntry& other) {
            return other.name != f.name && std::find(other.rule_prefixes.begin(), other.rule_prefixes.end(),
                                                     prefix) != other.rule_prefixes.end();
          });
      EXPECT_TRUE(owned_elsewhere) << f.name << " hosts " << prefix << ", which no other format owns";
    }
  }
}

// Valid instances: both readers accept with no error finding and agree on
// every decoded value; the format claims its own instances.
RC_GTEST_PROP(RegistryProperties, ValidInstancesAcceptedByBoth, (std::uint64_t seed)) {
  for (const FormatEntry& f : qd::harness::Formats()) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = f.generate_valid(rng);
    RC_ASSERT(g.expected_rule.empty());
    const qd::ByteView view{g.bytes.data(), g.bytes.size()};
    const qd::Outcome codec = f.codec_read(view, kFile, g.side_files);
    const qd::Outcome check = f.codec_check(view, kFile, g.side_files);
    const qd::Outcome oracle = f.oracle_read(view, kFile, g.side_files);
    for (const auto& [who, o] : {std::pair<const char*, const qd::Outcome*>{"codec_read", &codec},
                                 {"codec_check", &check},
                                 {"oracle_read", &oracle}}) {
      if (o->refused || ErrorCount(*o) != 0) {
        RC_FAIL(std::string(f.name) + " " + who + " refused a valid instance (" + g.description +
                "): " + Findings(*o));
      }
    }
    if (auto d = qd::harness::Compare(codec, oracle, f.name)) RC_FAIL(d->signature + ": " + d->detail);
    RC_ASSERT(f.claims(view, g.side_files));
    RC_ASSERT(f.oracle_claims(view, g.side_files));
    const std::string detected = DetectedAs(view, g.side_files, f.name);
    if (!detected.empty()) RC_FAIL(g.description + ":" + detected);
  }
}

// Instances of every format with mutated headers (length prefix kept in step
// or not) and flipped data bytes (block scales and payloads for RBQ): the
// codec agrees with the oracle, and codec_check's findings are codec_read's.
RC_GTEST_PROP(RegistryProperties, CodecAgreesWithOracleOnMutatedInstances, (std::uint64_t seed)) {
  const auto mutations = *qdtest::gen::Mutations(4);
  const bool fix_length = *rc::gen::weightedElement<bool>({{4, true}, {1, false}});
  const auto data_flips = *rc::gen::resize(
      4, rc::gen::container<std::vector<std::pair<std::uint32_t, std::uint8_t>>>(
             rc::gen::pair(rc::gen::arbitrary<std::uint32_t>(), rc::gen::arbitrary<std::uint8_t>())));
  for (const FormatEntry& f : qd::harness::Formats()) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = f.generate_valid(rng);
    std::vector<std::uint8_t> file = g.bytes;
    std::uint64_t n = 0;
    for (int i = file.size() >= 8 ? 7 : -1; i >= 0; --i) n = n * 256 + file[i];
    if (file.size() >= 8 && n <= file.size() - 8) {
      const std::uint64_t data_start = 8 + n;
      if (file.size() > data_start) {
        for (const auto& [where, value] : data_flips) {
          file[data_start + where % (file.size() - data_start)] ^= value;
        }
      }
      file = qdtest::gen::MutateHeader(file, mutations, fix_length);
    } else {
      // Not a safetensors layout (a torch .pt ZIP): the same mutations on the
      // bytes themselves (flip, set, insert; the structural kinds erase).
      for (const auto& [where, value] : data_flips) {
        if (!file.empty()) file[where % file.size()] ^= value;
      }
      for (const qdtest::gen::Mutation& m : mutations) {
        const std::size_t at = file.empty() ? 0 : m.where % file.size();
        if (m.kind == 0 && !file.empty()) {
          file[at] ^= static_cast<std::uint8_t>(1u << (m.value % 8));
        } else if (m.kind == 1 && !file.empty()) {
          file[at] = m.value;
        } else if (m.kind <= 3) {
          file.insert(file.begin() + static_cast<std::ptrdiff_t>(m.where % (file.size() + 1)), m.length, m.value);
        } else if (!file.empty()) {
          file.erase(file.begin() + static_cast<std::ptrdiff_t>(at),
                     file.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(file.size(), at + m.length)));
        }
      }
    }
    const qd::ByteView view{file.data(), file.size()};
    const qd::Outcome codec = f.codec_read(view, kFile, g.side_files);
    const qd::Outcome check = f.codec_check(view, kFile, g.side_files);
    const qd::Outcome oracle = f.oracle_read(view, kFile, g.side_files);
    if (f.name == "rbq") {  // how deep the inputs reach
      RC_TAG(codec.refused ? codec.findings.back().rule : std::string("accepted"));
    }
    if (auto d = qd::harness::Compare(codec, oracle, f.name)) {
      RC_FAIL(d->signature + "\n" + d->detail + "\nfile: " + qdtest::gen::ShowBytes(file) +
              "\ncodec:  " + Findings(codec) + "\noracle: " + Findings(oracle));
    }
    if (auto d = qd::harness::CompareDetection(qd::harness::DetectFormat(view, g.side_files).name,
                                               qd::harness::OracleDetectFormat(view, g.side_files).name, f.name)) {
      RC_FAIL(d->signature + "\n" + d->detail + "\nfile: " + qdtest::gen::ShowBytes(file));
    }
    RC_ASSERT(check.refused == codec.refused);
    RC_ASSERT(check.findings.size() == codec.findings.size());
    for (std::size_t i = 0; i < check.findings.size(); ++i) {
      RC_ASSERT(check.findings[i].rule == codec.findings[i].rule);
      RC_ASSERT(check.findings[i].severity == codec.findings[i].severity);
    }
  }
}
