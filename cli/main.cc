// quantdiff: differential testing of quantized weight files.
//
//   quantdiff check model.safetensors --report json
//   quantdiff campaign --seconds 60
//
// main() picks the verb and answers --help for all of them; each verb lives
// in its own file (check.cc, decode.cc, diff.cc, convert.cc, campaign.cc,
// export_vectors.cc, rules.cc) and returns the process exit code.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/common.h"
#include "reports/report.h"

namespace qd::cli {

const std::vector<Verb>& Verbs();  // the table, below

namespace {

const Verb* FindVerb(std::string_view name) {
  for (const Verb& v : Verbs()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

int RunHelp(const std::vector<std::string>& args);

constexpr std::string_view kHelpHelp =
    "usage: quantdiff help [VERB]\n"
    "\n"
    "Prints the list of verbs, or the full help of one verb.\n";

void PrintOverview(std::FILE* out) {
  std::fprintf(out,
               "quantdiff %s: differential testing of quantized LLM weight files.\n"
               "\n"
               "Each supported format is read twice, by the fast production codec and by a\n"
               "plain reference oracle written from the spec; every disagreement is a bug in\n"
               "one of them, and every refusal names a rule of the catalogue.\n"
               "\n"
               "usage: quantdiff VERB [ARGS...]\n"
               "\n"
               "verbs:\n",
               std::string(qd::reports::ToolVersion()).c_str());
  for (const Verb& v : Verbs()) {
    std::fprintf(out, "  %-15s %.*s\n", std::string(v.name).c_str(),
                 static_cast<int>(v.summary.size()), v.summary.data());
  }
  std::fprintf(out,
               "\n"
               "formats: %s\n"
               "exit codes: 0 conforming / no divergence, 1 violations or divergences found,\n"
               "            2 usage or I/O error\n"
               "\n"
               "Run 'quantdiff help VERB' or 'quantdiff VERB --help' for a verb's flags.\n",
               FormatNames().c_str());
}

// The verb's help with {formats} replaced by the registry's format names, so
// a `--format NAME` line lists every registered format.
void PrintVerbHelp(const Verb& verb) {
  constexpr std::string_view kFormatsSlot = "{formats}";
  std::string text(verb.help);
  for (std::size_t at = text.find(kFormatsSlot); at != std::string::npos; at = text.find(kFormatsSlot, at)) {
    const std::string names = FormatNames();
    text.replace(at, kFormatsSlot.size(), names);
    at += names.size();
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
}

int RunHelp(const std::vector<std::string>& args) {
  if (args.empty()) {
    PrintOverview(stdout);
    return kExitOk;
  }
  if (args.size() > 1) return UsageError("help", "takes at most one verb");
  const Verb* verb = FindVerb(args[0]);
  if (verb == nullptr) return UsageError("help", "unknown verb '" + args[0] + "'");
  PrintVerbHelp(*verb);
  return kExitOk;
}

bool AsksForHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    PrintOverview(stderr);
    return kExitUsage;
  }
  const std::string first = args[0];
  if (first == "--help" || first == "-h") {
    PrintOverview(stdout);
    return kExitOk;
  }
  if (first == "--version") {
    std::printf("quantdiff %s\n", std::string(qd::reports::ToolVersion()).c_str());
    return kExitOk;
  }
  const Verb* verb = FindVerb(first);
  if (verb == nullptr) {
    return UsageError("", (first.rfind("-", 0) == 0 ? "unknown flag '" : "unknown verb '") +
                              first + "'");
  }
  args.erase(args.begin());
  if (AsksForHelp(args)) {
    PrintVerbHelp(*verb);
    return kExitOk;
  }
  return verb->run(args);
}

}  // namespace

const std::vector<Verb>& Verbs() {
  static const std::vector<Verb> verbs = {
      {"check", "check files against the rules (codec, no decoding)", kCheckHelp, &RunCheck},
      {"decode", "decode a file to an F32 safetensors file", kDecodeHelp, &RunDecode},
      {"diff", "read files with codec and oracle and compare", kDiffHelp, &RunDiff},
      {"convert", "repack GPTQ / AWQ as gptq, gptq_v2, gptq_p, awq_gemm or awq_gemv; a torch .pt/.bin or model directory as safetensors",
       kConvertHelp, &RunConvert},
      {"campaign", "generate instances of every format and compare for N seconds",
       kCampaignHelp, &RunCampaign},
      {"export-vectors", "write Wycheproof-like test vectors per format",
       kExportVectorsHelp, &RunExportVectors},
      {"test-impl", "judge another implementation's reader by every vector (process protocol)",
       kTestImplHelp, &RunTestImpl},
      {"report-merge", "several implementations' test-impl results side by side (rules x implementations)",
       kReportMergeHelp, &RunReportMerge},
      {"rules", "print the rule catalogue", kRulesHelp, &RunRules},
      {"help", "print this overview or one verb's help", kHelpHelp, &RunHelp},
  };
  return verbs;
}

}  // namespace qd::cli

int main(int argc, char** argv) {
  // One malloc arena: `diff` runs the oracle on a second thread, and glibc
  // would reserve a 64 MiB arena for it, address space that counts against
  // the memory bound (README "Resources") for no gain (the two threads take
  // turns, stream_differ.h).
  mallopt(M_ARENA_MAX, 1);
  try {
    return qd::cli::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "quantdiff: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantdiff: internal error: %s\n", e.what());
  }
  return qd::cli::kExitUsage;
}
