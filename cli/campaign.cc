// quantdiff campaign: generate instances of every format for a while, read
// each with codec and oracle, and record every disagreement.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <system_error>

#include "cli/common.h"
#include "cli/module_compare.h"
#include "cli/progress_line.h"
#include "harness/differ.h"
#include "reports/escape.h"
#include "reports/report.h"
#include "reports/rules.h"
#include "reports/writers.h"
#include "thirdparty/impl_module/module_loader.h"

namespace qd::cli {

extern const std::string_view kCampaignHelp =
    "usage: quantdiff campaign [--seconds N] [--seed S] [--out DIR] [--format NAME]\n"
    "                          [--instances N] [--module LIBRARY.so[=FORMAT,...]]...\n"
    "\n"
    "Generates instances of every registered format for N seconds: in turn a\n"
    "valid instance and an instance built to break one rule, round-robin over\n"
    "the rules the generators can break. Each instance is read by the codec and\n"
    "by the oracle, and two things are checked:\n"
    "  divergence           the two readers disagree (verdict, rule IDs and\n"
    "                       positions, or any decoded value bit for bit)\n"
    "  expectation failure  a reader's verdict is not the one the instance was\n"
    "                       generated for: a valid instance must be accepted, an\n"
    "                       instance for error rule R refused with R, one for\n"
    "                       warning rule R accepted with R among the warnings\n"
    "The bytes of the first instances of every signature are saved under\n"
    "DIR/divergences/ and DIR/expectation-failures/ as\n"
    "<signature>-<crc32>.safetensors (.pt for torch files; an instance that\n"
    "comes with config files is the folder <signature>-<crc32>/ holding\n"
    "model.safetensors beside them); `quantdiff diff FILE` replays one.\n"
    "With --module, every instance of a format the module is given is also\n"
    "decoded by the module (interface/quantdiff/impl_module.h) and compared with\n"
    "what `quantdiff decode` makes of the oracle's reading, as test-impl judges:\n"
    "verdict, stated rule, every tensor bit for bit. Its divergences are counted\n"
    "and saved like the codec's, under DIFF:<format>:module:<name>:<kind>:<part>.\n"
    "A progress line goes to standard error about once a second; Ctrl-C stops\n"
    "early and still writes the summary.\n"
    "\n"
    "  --seconds N    how long to run (default 60; decimals allowed)\n"
    "  --seed S       campaign seed (default: random, printed); instance i uses\n"
    "                 a seed derived from S and i, so a run repeats exactly\n"
    "  --out DIR      where to write summary.txt, report.json and the saved\n"
    "                 instances (default ./campaign-out); a folder that exists\n"
    "                 must be empty or an earlier campaign's (it holds the marker\n"
    "                 file .quantdiff-campaign), so nothing else is overwritten\n"
    "  --format NAME  only this format (repeat with commas: a,b); NAME is one of\n"
    "                 {formats}\n"
    "  --instances N  stop after N instances even if time remains\n"
    "  --module LIBRARY.so[=FORMAT,...]\n"
    "                 a reader module run in-process on the instances of the\n"
    "                 formats named (default: every format of the run); repeat\n"
    "                 for several modules\n"
    "\n"
    "exit: 0 no divergence and no expectation failure, 1 otherwise,\n"
    "      2 usage error or unwritable --out\n";

namespace {

constexpr std::size_t kSavedPerSignature = 5;

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct FormatState {
  const qd::harness::FormatEntry* entry = nullptr;
  std::vector<std::string> rules;  // violable
  std::uint64_t step = 0;
};

std::string Sanitise(std::string_view signature) {
  std::string out;
  for (const char c : signature) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    out.push_back(keep ? c : '-');
  }
  if (out.size() > 120) out.resize(120);
  return out;
}

// "" when the outcome is what an instance generated for `rule` must get,
// else a short word for what it got instead ("accepted", "refused-ST-011").
std::string Miss(const qd::Outcome& o, const std::string& rule, bool warning_rule) {
  const qd::reports::Verdict v = qd::reports::VerdictOf(o);
  const std::string refused = "refused-" + (v.error_rule.empty() ? "no-rule" : v.error_rule);
  if (rule.empty()) return v.refused ? refused : "";
  if (warning_rule) {
    if (v.refused) return refused;
    for (const std::string& w : v.warning_rules) {
      if (w == rule) return "";
    }
    return "accepted-without-" + rule;
  }
  if (!v.refused) return "accepted";
  return v.error_rule == rule ? "" : refused;
}

class Campaign {
 public:
  Campaign(std::string out_dir, std::uint64_t seed, double seconds)
      : out_dir_(std::move(out_dir)) {
    stats_.seed = seed;
    stats_.seconds = seconds;
    stats_.out_dir = out_dir_;
  }

  void AddFormat(const qd::harness::FormatEntry& f) {
    FormatState s;
    s.entry = &f;
    s.rules = f.violable_rules();
    states_.push_back(std::move(s));
    qd::reports::FormatCounts counts;
    counts.name = std::string(f.name);
    stats_.formats.push_back(std::move(counts));
  }

  // MODULE decodes every instance of FORMATS (registry names) from now on.
  void AddModule(qd::impl::Module module, std::vector<std::string> formats) {
    qd::reports::ModuleCounts counts;
    counts.name = module.name();
    counts.version = module.version();
    counts.path = module.path();
    counts.formats = std::move(formats);
    stats_.modules.push_back(std::move(counts));
    modules_.push_back(std::move(module));
  }

  void Run(double seconds, std::uint64_t max_instances) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    Clock::time_point next_progress = start + std::chrono::seconds(1);
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
    std::uint64_t i = 0;
    while (g_stop == 0 && (max_instances == 0 || i < max_instances)) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      if (now >= next_progress) {
        stats_.elapsed = std::chrono::duration<double>(now - start).count();
        Progress(false);
        next_progress += std::chrono::seconds(1);
        if (next_progress < now) next_progress = now + std::chrono::seconds(1);
      }
      const std::size_t f = static_cast<std::size_t>(i % states_.size());
      RunOne(i, f);
      ++i;
    }
    stats_.elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    Progress(true);
  }

  const qd::reports::CampaignStats& stats() const { return stats_; }
  bool interrupted() const { return g_stop != 0; }

 private:
  void RunOne(std::uint64_t index, std::size_t f) {
    FormatState& state = states_[f];
    const qd::harness::FormatEntry& format = *state.entry;
    const std::uint64_t slot = state.step++;
    // Slots cycle: a valid instance, a violation (walking the violable
    // rules), a mutant (a valid instance with random bytes overwritten, which
    // no generator labels: codec and oracle need only agree on it).
    std::string rule;
    const bool mutant = slot % 3 == 2;
    if (slot % 3 == 1 && !state.rules.empty()) rule = state.rules[(slot / 3) % state.rules.size()];
    const qd::reports::RuleInfo* info = rule.empty() ? nullptr : qd::reports::FindRule(rule);
    const bool warning_rule = info != nullptr && !qd::reports::IsErrorRule(*info);
    const std::uint64_t instance_seed = Mix(stats_.seed ^ Mix(index));

    qd::reports::FormatCounts& counts = stats_.formats[f];
    qd::reports::RuleCounts& rule_counts =
        counts.by_rule[mutant ? "mutant" : rule.empty() ? "valid" : rule];
    ++stats_.instances;
    ++counts.instances;
    ++rule_counts.instances;
    (mutant ? counts.mutants : rule.empty() ? counts.valid : counts.violations)++;

    Instance in{format, rule, index, instance_seed, {}};
    qd::harness::Rng rng(instance_seed);
    try {
      in.generated = rule.empty() ? format.generate_valid(rng) : format.generate_violation(rule, rng);
    } catch (const std::exception& e) {
      Record(qd::reports::Problem::Kind::kExpectation,
             "EXPECT:" + std::string(format.name) + ":" + RuleKey(rule) + ":generator:exception",
             std::string("the generator threw: ") + e.what(), in, counts, rule_counts);
      return;
    }
    if (in.generated.expected_rule != rule) {
      Record(qd::reports::Problem::Kind::kExpectation,
             "EXPECT:" + std::string(format.name) + ":" + RuleKey(rule) + ":generator:labelled-" +
                 RuleKey(in.generated.expected_rule),
             "asked for " + RuleKey(rule) + ", the generator labelled its instance " +
                 RuleKey(in.generated.expected_rule),
             in, counts, rule_counts);
    }

    if (mutant) Mutate(&in.generated, rng);

    const qd::ByteView bytes{in.generated.bytes.data(), in.generated.bytes.size()};
    // Both sides detect the instance's format (a mutant may leave its
    // generator's format; they must still agree).
    if (auto d = qd::harness::CompareDetection(qd::harness::DetectFormat(bytes, in.generated.side_files).name,
                                               qd::harness::OracleDetectFormat(bytes, in.generated.side_files).name,
                                               format.name)) {
      Record(qd::reports::Problem::Kind::kDivergence, d->signature,
             d->detail + " [" + in.generated.description + "]", in, counts, rule_counts);
    }
    const std::string name = "instance-" + std::to_string(index) + std::string(format.file_extension);
    std::string codec_error;
    std::string oracle_error;
    const std::optional<qd::Outcome> codec = SafeRead(format.codec_read, bytes, name, in.generated.side_files, &codec_error);
    const std::optional<qd::Outcome> oracle = SafeRead(format.oracle_read, bytes, name, in.generated.side_files, &oracle_error);
    if (!codec || !oracle) {
      const std::string side = !codec && !oracle ? "both" : !codec ? "codec" : "oracle";
      Record(qd::reports::Problem::Kind::kDivergence,
             "DIFF:" + std::string(format.name) + ":exception:" + side,
             (!codec ? "codec: " + codec_error + " " : "") + (!oracle ? "oracle: " + oracle_error : ""),
             in, counts, rule_counts);
      return;
    }
    if (auto d = qd::harness::Compare(*codec, *oracle, format.name)) {
      Record(qd::reports::Problem::Kind::kDivergence, d->signature,
             d->detail + " [" + in.generated.description + "]", in, counts, rule_counts);
    }
    for (std::size_t m = 0; m < modules_.size(); ++m) {
      qd::reports::ModuleCounts& module_counts = stats_.modules[m];
      const std::vector<std::string>& given = module_counts.formats;
      if (std::find(given.begin(), given.end(), format.name) == given.end()) continue;
      ++module_counts.decodes;
      if (auto d = CompareModule(modules_[m], format, bytes, name, in.generated.side_files, *oracle)) {
        ++module_counts.divergences;
        Record(qd::reports::Problem::Kind::kDivergence, d->signature,
               d->detail + " [" + in.generated.description + "]", in, counts, rule_counts);
      }
    }
    if (mutant) return;  // no expectation: a mutant may be valid or not
    const std::string codec_miss = Miss(*codec, rule, warning_rule);
    const std::string oracle_miss = Miss(*oracle, rule, warning_rule);
    if (!codec_miss.empty() || !oracle_miss.empty()) {
      std::string what;
      if (codec_miss == oracle_miss) {
        what = "both:" + codec_miss;
      } else {
        if (!codec_miss.empty()) what = "codec:" + codec_miss;
        if (!oracle_miss.empty()) what += (what.empty() ? "" : "/") + ("oracle:" + oracle_miss);
      }
      std::string detail = "generated " + in.generated.description + "; codec " +
                           qd::reports::VerdictText(qd::reports::VerdictOf(*codec)) + "; oracle " +
                           qd::reports::VerdictText(qd::reports::VerdictOf(*oracle));
      for (const qd::Finding& finding : oracle->findings) {
        if (finding.severity == qd::Severity::kError) {
          detail += "; oracle says " + qd::harness::Describe(finding);
        }
      }
      Record(qd::reports::Problem::Kind::kExpectation,
             "EXPECT:" + std::string(format.name) + ":" + RuleKey(rule) + ":" + what, detail, in,
             counts, rule_counts);
    }
  }

  // Overwrites 1..8 bytes, mostly in the first 8 + header bytes where the
  // readers' decisions are made, sometimes anywhere (scales, codes).
  static void Mutate(qd::harness::Generated* g, qd::harness::Rng& rng) {
    std::vector<std::uint8_t>& b = g->bytes;
    g->expected_rule.clear();
    g->description = "mutant of " + g->description;
    if (b.empty()) return;
    std::uint64_t header_end = b.size();
    if (b.size() >= 8) {
      std::uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | b[static_cast<std::size_t>(i)];
      header_end = std::min<std::uint64_t>(b.size(), 8 + std::min<std::uint64_t>(n, b.size()));
    }
    static constexpr std::uint8_t kInteresting[] = {0, 0xff, 0x7f, 0x80, '"', ',', ':', '[', ']',
                                                    '{', '}', '0', '9', '-', 'e', '\\', 0x7c, 0xfc};
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const bool in_header = rng() % 4 != 0;
      const std::uint64_t span = in_header ? header_end : b.size();
      const std::size_t at = static_cast<std::size_t>(rng() % span);
      b[at] = rng() % 2 == 0 ? static_cast<std::uint8_t>(rng())
                             : kInteresting[rng() % std::size(kInteresting)];
    }
  }

  struct Instance {
    const qd::harness::FormatEntry& format;
    std::string rule;
    std::uint64_t index;
    std::uint64_t seed;
    qd::harness::Generated generated;
  };

  static std::string RuleKey(const std::string& rule) { return rule.empty() ? "valid" : rule; }

  // Counts the instance once per kind, groups by signature and saves the
  // first few instances of every signature.
  void Record(qd::reports::Problem::Kind kind, const std::string& signature,
              const std::string& detail, const Instance& in, qd::reports::FormatCounts& counts,
              qd::reports::RuleCounts& rule_counts) {
    const bool divergence = kind == qd::reports::Problem::Kind::kDivergence;
    std::uint64_t& last = divergence ? last_divergence_ : last_expectation_;
    if (last != in.index + 1) {  // an instance counts once per kind
      last = in.index + 1;
      if (divergence) {
        ++stats_.divergences;
        ++counts.divergences;
        ++rule_counts.divergences;
      } else {
        ++stats_.expectation_failures;
        ++counts.expectation_failures;
        ++rule_counts.expectation_failures;
      }
    }
    auto [it, is_new] = index_.try_emplace(signature, stats_.problems.size());
    if (is_new) {
      qd::reports::Problem p;
      p.kind = kind;
      p.signature = signature;
      p.format = std::string(in.format.name);
      p.rule = in.rule;
      p.first_instance = in.index;
      p.first_seed = in.seed;
      p.detail = detail;
      stats_.problems.push_back(std::move(p));
    }
    qd::reports::Problem& p = stats_.problems[it->second];
    ++p.count;
    std::string saved;
    if (p.saved.size() < kSavedPerSignature) {
      saved = Save(divergence ? "divergences" : "expectation-failures", signature, in.generated,
                   in.format.file_extension);
      if (!saved.empty() && std::find(p.saved.begin(), p.saved.end(), saved) == p.saved.end()) {
        p.saved.push_back(saved);
      }
    }
    if (is_new) {
      progress_.Clear();
      std::fprintf(stderr, "new %s %s\n    %s\n",
                   divergence ? "divergence" : "expectation failure",
                   qd::reports::ForTerminal(signature).c_str(),
                   qd::reports::ForTerminal(detail).c_str());
      if (!saved.empty()) {
        std::fprintf(stderr, "    saved %s\n",
                     qd::reports::ForTerminal(out_dir_ + "/" + saved).c_str());
      }
    }
  }

  // Writes the bytes once under DIR/<sub>/<signature>-<crc32>.safetensors;
  // an instance with side files (a GPTQ config) becomes the folder
  // DIR/<sub>/<signature>-<crc32>/ holding model.safetensors beside its
  // configs, the layout `quantdiff diff` looks them up in. Returns the path
  // of the file relative to DIR, or "" when it could not be written.
  std::string Save(const std::string& sub, const std::string& signature,
                   const qd::harness::Generated& generated, std::string_view extension) {
    const std::vector<std::uint8_t>& bytes = generated.bytes;
    const std::string base = sub + "/" + Sanitise(signature) + "-" + Crc32Hex(bytes.data(), bytes.size());
    const std::string folder = generated.side_files.empty() ? sub : base;
    const std::string relative =
        generated.side_files.empty() ? base + std::string(extension) : base + "/model.safetensors";
    std::error_code ec;
    std::filesystem::create_directories(out_dir_ + "/" + folder, ec);
    std::string error;
    bool ok = WriteFileAtomic(out_dir_ + "/" + relative,
                              {reinterpret_cast<const char*>(bytes.data()), bytes.size()}, {},
                              &error);
    for (const qd::SideFile& side : generated.side_files) {
      if (!ok) break;
      const std::string name = std::filesystem::path(side.name).filename().string();
      ok = WriteFileAtomic(out_dir_ + "/" + folder + "/" + name,
                           {reinterpret_cast<const char*>(side.bytes.data()), side.bytes.size()},
                           {}, &error);
    }
    if (!ok) {
      progress_.Clear();
      std::fprintf(stderr, "quantdiff campaign: %s\n", error.c_str());
      return "";
    }
    return relative;
  }

  void Progress(bool final) {
    std::string line = "[" + std::to_string(static_cast<long long>(stats_.elapsed)) + "s] " +
                       std::to_string(stats_.instances) + " instances, " +
                       std::to_string(stats_.divergences) + " divergences, " +
                       std::to_string(stats_.expectation_failures) + " expectation failures,";
    for (std::size_t f = 0; f < stats_.formats.size(); ++f) {
      line += (f == 0 ? " " : " / ") + stats_.formats[f].name + " " +
              std::to_string(stats_.formats[f].instances);
    }
    progress_.Show(line, final);
  }

  std::string out_dir_;
  qd::reports::CampaignStats stats_;
  std::vector<FormatState> states_;
  std::vector<qd::impl::Module> modules_;  // stats_.modules counts them, index for index
  std::map<std::string, std::size_t> index_;  // signature -> stats_.problems
  std::uint64_t last_divergence_ = 0;   // index + 1 of the last counted instance
  std::uint64_t last_expectation_ = 0;
  ProgressLine progress_{ProgressLine::kAlways};
};

}  // namespace

namespace {

// The file that marks a folder as a campaign's output: summary.txt and
// report.json are replaced on every run, so they are only written into a
// folder that is new, empty, or marked by an earlier campaign.
constexpr std::string_view kCampaignMarker = ".quantdiff-campaign";

bool AdoptOutputFolder(const std::string& dir, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    *error = "refusing to use " + dir + " as --out: it exists and is not a directory";
    return false;
  }
  const fs::path marker = fs::path(dir) / kCampaignMarker;
  if (fs::exists(status) && !fs::exists(fs::symlink_status(marker, ec)) &&
      !fs::is_empty(dir, ec)) {
    *error = "refusing to write into " + dir +
             ": it holds files and is not a quantdiff campaign folder (no " +
             std::string(kCampaignMarker) + "); give a new or empty folder";
    return false;
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    *error = "cannot create " + dir + ": " + (ec ? ec.message() : std::string("not a directory"));
    return false;
  }
  if (!fs::exists(fs::symlink_status(marker, ec))) {
    return WriteFileAtomic(marker.string(),
                           "This folder holds the output of `quantdiff campaign`; a later "
                           "campaign may replace summary.txt and report.json here.\n",
                           {}, error);
  }
  return true;
}

}  // namespace

int RunCampaign(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv,
                 {{"seconds", true}, {"seed", true}, {"out", true}, {"format", true},
                  {"instances", true}, {"module", true}},
                 &args, &error)) {
    return UsageError("campaign", error);
  }
  if (!args.positional.empty()) {
    return UsageError("campaign", "takes no file arguments (got '" + args.positional[0] + "')");
  }
  double seconds = 60;
  if (auto s = args.Get("seconds"); s && !ParseSeconds(*s, &seconds)) {
    return UsageError("campaign", "--seconds needs a non-negative number, got '" + *s + "'");
  }
  std::uint64_t seed = 0;
  if (auto s = args.Get("seed")) {
    if (!ParseUint(*s, &seed)) {
      return UsageError("campaign", "--seed needs an unsigned 64-bit integer, got '" + *s + "'");
    }
  } else {
    std::random_device device;
    seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  std::uint64_t max_instances = 0;
  if (auto s = args.Get("instances"); s && (!ParseUint(*s, &max_instances) || max_instances == 0)) {
    return UsageError("campaign", "--instances needs a positive integer, got '" + *s + "'");
  }
  std::vector<const qd::harness::FormatEntry*> formats;
  if (auto names = args.Get("format")) {
    formats = ParseFormatList(*names, &error);
    if (formats.empty()) return UsageError("campaign", error);
  } else {
    for (const qd::harness::FormatEntry& f : qd::harness::Formats()) formats.push_back(&f);
  }
  // Each --module LIBRARY[=FORMAT,...]: opened now, so a module that does
  // not load is a usage error before anything is written.
  std::vector<std::pair<qd::impl::Module, std::vector<std::string>>> modules;
  for (const std::string& given : args.GetAll("module")) {
    const std::size_t eq = given.rfind('=');
    const std::string path = given.substr(0, eq);
    std::vector<std::string> module_formats;
    if (eq == std::string::npos) {
      for (const qd::harness::FormatEntry* f : formats) module_formats.emplace_back(f->name);
    } else {
      const std::vector<const qd::harness::FormatEntry*> named = ParseFormatList(given.substr(eq + 1), &error);
      if (named.empty()) return UsageError("campaign", "--module " + given + ": " + error);
      for (const qd::harness::FormatEntry* f : named) {
        if (std::find(formats.begin(), formats.end(), f) == formats.end()) {
          return UsageError("campaign", "--module " + given + ": the run has no format " + std::string(f->name));
        }
        module_formats.emplace_back(f->name);
      }
    }
    std::optional<qd::impl::Module> module = qd::impl::Module::Open(path, &error);
    if (!module) return UsageError("campaign", "--module " + path + ": " + error);
    modules.emplace_back(std::move(*module), std::move(module_formats));
  }
  const std::string out_dir = args.Get("out").value_or("campaign-out");
  if (out_dir.empty()) return UsageError("campaign", "--out needs a directory name");
  if (!AdoptOutputFolder(out_dir, &error)) return IoError("campaign", error);
  // Fail now rather than after the run if the summary cannot be written.
  if (!WriteFileAtomic(out_dir + "/summary.txt", "quantdiff campaign running\n", {}, &error)) {
    return IoError("campaign", error);
  }

  Campaign campaign(out_dir, seed, seconds);
  std::string names;
  for (const qd::harness::FormatEntry* f : formats) {
    campaign.AddFormat(*f);
    names += (names.empty() ? "" : ", ") + std::string(f->name);
  }
  for (auto& [module, module_formats] : modules) {
    names += ", module " + module.name();
    campaign.AddModule(std::move(module), std::move(module_formats));
  }
  std::fprintf(stderr, "quantdiff campaign: %s for %g s, seed %llu, output in %s/\n",
               names.c_str(), seconds, static_cast<unsigned long long>(seed),
               qd::reports::ForTerminal(out_dir).c_str());
  g_stop = 0;
  auto previous_int = std::signal(SIGINT, OnSignal);
  auto previous_term = std::signal(SIGTERM, OnSignal);
  campaign.Run(seconds, max_instances);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  if (campaign.interrupted()) std::fprintf(stderr, "quantdiff campaign: interrupted, stopping\n");

  const qd::reports::CampaignStats& stats = campaign.stats();
  const std::string text = qd::reports::CampaignText(stats);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  bool written = WriteFileAtomic(out_dir + "/summary.txt", text, {}, &error);
  if (written) {
    written = WriteFileAtomic(out_dir + "/report.json", qd::reports::CampaignJson(stats), {}, &error);
  }
  if (!written) return IoError("campaign", error);
  std::fprintf(stderr, "quantdiff campaign: wrote %s/summary.txt and %s/report.json\n",
               qd::reports::ForTerminal(out_dir).c_str(), qd::reports::ForTerminal(out_dir).c_str());
  return stats.divergences > 0 || stats.expectation_failures > 0 ? kExitFound : kExitOk;
}

}  // namespace qd::cli
