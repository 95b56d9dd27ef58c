// report.h: what quantdiff found, independent of how it is printed.
//
// A Report is one FileReport per file a command looked at; a CampaignStats
// is what `quantdiff campaign` counted. The writers (writers.h) turn either
// into text, JSON, JUnit XML or SARIF, so every front end prints the same
// facts the same way.
//
//   qd::reports::Report report{"check", {}};
//   report.files.push_back(qd::reports::FromOutcome(path, "rbq", outcome));
//   std::fputs(qd::reports::Render(qd::reports::OutputFormat::kJson, report).c_str(), stdout);
#ifndef QUANTDIFF_REPORTS_REPORT_H_
#define QUANTDIFF_REPORTS_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/differ.h"
#include "quantdiff/plain_data.h"

namespace qd::reports {

// The project version the tool was built as, e.g. "0.1.0".
std::string_view ToolVersion();

// One reader's verdict on a file, as `diff` prints it for each side.
struct Verdict {
  bool refused = false;
  std::string error_rule;                  // the refusing rule, "" if accepted
  std::vector<std::string> warning_rules;  // in finding order
};
Verdict VerdictOf(const qd::Outcome& outcome);
// "accepted", "accepted with warnings ST-102", "refused ST-004".
std::string VerdictText(const Verdict& verdict);

struct FileReport {
  std::string path;    // as given on the command line
  std::string format;  // registry name: "rbq", "safetensors"
  // What else the reading found, for people: "2 shards, total_size counts
  // tensor bytes" for a model directory; empty for a file.
  std::string note;
  bool refused = false;
  std::vector<qd::Finding> findings;  // the reading that counts (codec for
                                      // check, oracle for diff)
  std::optional<qd::harness::Divergence> divergence;
  // Set by `diff`: what each reader made of the file.
  std::optional<Verdict> codec;
  std::optional<Verdict> oracle;
};

// path/format/refused/findings from one reader's outcome.
FileReport FromOutcome(std::string path, std::string format, const qd::Outcome& outcome);

// The file a finding is about: the config source for a CFG-* finding, else
// the file the command read (which readers also put in Finding::file).
const std::string& FindingFile(const FileReport& file, const qd::Finding& finding);

struct Report {
  std::string command;  // "check", "diff": names the JUnit suite
  std::vector<FileReport> files;
};

struct Summary {
  std::uint64_t files = 0;
  std::uint64_t refused = 0;      // files refused
  std::uint64_t errors = 0;       // error findings
  std::uint64_t warnings = 0;     // warning findings
  std::uint64_t divergences = 0;  // files whose readers disagree
  std::map<std::string, std::uint64_t> by_rule;  // findings per rule ID
};
Summary Summarize(const Report& report);

// ---------------------------------------------------------------------------
// The campaign: instances generated per format and rule, and every distinct
// problem (a divergence or an expectation failure) grouped by signature.

struct RuleCounts {
  std::uint64_t instances = 0;
  std::uint64_t divergences = 0;
  std::uint64_t expectation_failures = 0;
};

struct FormatCounts {
  std::string name;
  std::uint64_t instances = 0;
  std::uint64_t valid = 0;       // instances generated valid
  std::uint64_t violations = 0;  // instances generated to break a rule
  std::uint64_t mutants = 0;     // valid instances with random bytes overwritten
  std::uint64_t divergences = 0;
  std::uint64_t expectation_failures = 0;
  // Keyed by rule ID; valid instances under "valid", mutants under "mutant".
  std::map<std::string, RuleCounts> by_rule;
};

struct Problem {
  enum class Kind { kDivergence, kExpectation };
  Kind kind = Kind::kDivergence;
  std::string signature;  // "DIFF:rbq:bytes:value", "EXPECT:rbq:RBQ-004:codec:accepted"
  std::string format;
  std::string rule;         // the rule the instance was generated for; "" valid
  std::uint64_t count = 0;  // instances with this signature
  std::uint64_t first_instance = 0;  // index of the first, from 0
  std::uint64_t first_seed = 0;      // generator seed of the first
  std::string detail;       // of the first instance
  std::vector<std::string> saved;  // instance files written, relative to out_dir
};

// A reader module run beside codec and oracle (campaign --module,
// interface/quantdiff/impl_module.h).
struct ModuleCounts {
  std::string name;     // the module's own name
  std::string version;  // and version
  std::string path;     // the library as given
  std::vector<std::string> formats;  // the formats it was given instances of
  std::uint64_t decodes = 0;      // instances it decoded
  std::uint64_t divergences = 0;  // of those, instances it diverged on
};

struct CampaignStats {
  std::uint64_t seed = 0;
  double seconds = 0;  // requested
  double elapsed = 0;  // actual
  std::string out_dir;
  std::uint64_t instances = 0;
  std::uint64_t divergences = 0;           // instances
  std::uint64_t expectation_failures = 0;  // instances
  std::vector<FormatCounts> formats;
  std::vector<ModuleCounts> modules;
  std::vector<Problem> problems;  // in order of first appearance
};

}  // namespace qd::reports

#endif  // QUANTDIFF_REPORTS_REPORT_H_
