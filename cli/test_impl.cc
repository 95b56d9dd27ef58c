// quantdiff test-impl: another implementation judged by quantdiff's vectors
// (issue 13, the process protocol).
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/common.h"
#include "cli/impl_process.h"
#include "cli/vector_folder.h"
#include "cli/vector_set.h"
#include "codecs/safetensors.h"
#include "generators/generators.h"
#include "reports/conformance.h"
#include "reports/writers.h"
#include "thirdparty/impl_module/module_loader.h"

namespace qd::cli {

extern const std::string_view kTestImplHelp =
    "usage: quantdiff test-impl --cmd 'PROGRAM ARGS {input} {output}' [--format LIST]\n"
    "                           [--only TCID] [--timeout SECONDS] [--jobs N]\n"
    "                           [--report FORMAT] [--out FILE] [--count N] [--seed S]\n"
    "                           [--vectors DIR]\n"
    "       quantdiff test-impl --module LIBRARY.so [the same options]\n"
    "\n"
    "Runs another implementation's reader on every vector `quantdiff export-vectors`\n"
    "writes (the same generators, count and seed, so tcIds match), or on the vectors\n"
    "of an exported folder (--vectors), and judges it.\n"
    "For each vector the command runs through /bin/sh with {input} replaced by\n"
    "the vector's file (its config files beside it, as in the export) and\n"
    "{output} by a fresh path where the implementation writes what it decoded, as\n"
    "F32 safetensors under the names `quantdiff decode` writes. It must:\n"
    "  exit 0 and write the output  for a valid or acceptable vector; the output\n"
    "                               must hold the oracle's tensors bit for bit\n"
    "  exit 1                       for an invalid vector (and for a valid one of a\n"
    "                               family quantdiff only recognises: REC-001); if a\n"
    "                               line of its standard error starts with a rule ID\n"
    "                               (after an optional 'FILE:') not followed by\n"
    "                               'warning', the first such must be the vector's\n"
    "                               refusing rule\n"
    "A model_dir vector is a directory (docs/model_dir.md): {input} is its folder.\n"
    "A vector that format detection gives to another format (a .gguf vector with\n"
    "a broken magic reads as safetensors) conforms when read as either.\n"
    "Anything else is reported per vector as what it is: accepted-invalid,\n"
    "refused-valid, other-rule, wrong-output (first differing tensor and element,\n"
    "both bit patterns), signed-zero (only -0.0 vs +0.0 differ), garbage (no\n"
    "output, or not an F32 safetensors file), crashed (a signal or another exit\n"
    "code) or hung (killed with its process group at the timeout).\n"
    "\n"
    "  --cmd TEMPLATE    the command; {input} and {output} are replaced by\n"
    "                    shell-quoted paths (both required)\n"
    "  --module LIBRARY  a reader module (interface/quantdiff/impl_module.h) run\n"
    "                    in this process instead of a command: its decode's\n"
    "                    accept (tensors), refuse (an optional rule ID) or\n"
    "                    failure is judged as exit 0 with an output, exit 1\n"
    "                    naming the rule, or a crash; a result that does not\n"
    "                    hold up (bad pointers, counts, names, rule IDs) is\n"
    "                    garbage. --timeout does not apply: a module that hangs\n"
    "                    or crashes takes quantdiff with it\n"
    "  --format LIST     comma-separated formats of {formats},\n"
    "                    model_dir for the directories (default: every format,\n"
    "                    and model_dir with --cmd)\n"
    "  --only TCID       one vector (with a single --format): the reproducer\n"
    "  --timeout SECONDS per run (default 10)\n"
    "  --jobs N          runs at once (default 1)\n"
    "  --report FORMAT   per rule ID, pass and fail counts and every failing\n"
    "                    vector with its reproducer, as text (default), json,\n"
    "                    junit (JUnit XML: a testsuite per format, a testcase\n"
    "                    per vector), sarif (SARIF 2.1.0: a result per vector\n"
    "                    under its rule), markdown (a CI job summary) or html\n"
    "                    (one self-contained page: rules x vectors coloured by\n"
    "                    outcome, each failure's expected and got bits)\n"
    "  --out FILE        write the report to FILE (default standard output)\n"
    "  --count N, --seed S  the vectors' generation (default 4 and 1, as\n"
    "                    export-vectors)\n"
    "  --pt-shape torch-1.13  build the pt vectors as torch 1.13's torch.save\n"
    "                    writes a state dict (protocol 2, the 6-item\n"
    "                    _rebuild_tensor_v2, requires_grad False on integer\n"
    "                    tensors, no float values), so torch 1.13 is judged on\n"
    "                    files it can read; the same models and tcIds otherwise\n"
    "  --vectors DIR     the vectors of DIR, as `export-vectors --out DIR` wrote them\n"
    "                    (every FORMAT.json there, or those --format names), judged by\n"
    "                    the results and expected outputs recorded there; a file whose\n"
    "                    SHA-256 differs from the JSON's is an I/O error\n"
    "\n"
    "Inputs and outputs live in a new folder under $TMPDIR (or /tmp), removed at\n"
    "the end.\n"
    "\n"
    "exit: 0 every vector conforms, 1 some do not, 2 usage error or I/O error\n";

namespace {

namespace fs = std::filesystem;

enum class Judgement {
  kPass,
  kAcceptedInvalid,
  kRefusedValid,
  kOtherRule,
  kWrongOutput,
  kSignedZero,
  kGarbage,
  kCrashed,
  kHung,
};

std::string_view JudgementName(Judgement j) {
  switch (j) {
    case Judgement::kPass: return "pass";
    case Judgement::kAcceptedInvalid: return "accepted-invalid";
    case Judgement::kRefusedValid: return "refused-valid";
    case Judgement::kOtherRule: return "other-rule";
    case Judgement::kWrongOutput: return "wrong-output";
    case Judgement::kSignedZero: return "signed-zero";
    case Judgement::kGarbage: return "garbage";
    case Judgement::kCrashed: return "crashed";
    case Judgement::kHung: return "hung";
  }
  return "?";
}

// Details are raw (they quote tensor names and the implementation's
// standard error); the report writers escape them for their medium.
struct Verdict {
  Verdict() = default;
  Verdict(Judgement j, std::string why, std::optional<qd::reports::FirstDifference> first = std::nullopt)
      : judgement(j), detail(std::move(why)), difference(std::move(first)) {}
  Judgement judgement = Judgement::kPass;
  std::string detail;
  std::optional<qd::reports::FirstDifference> difference;
};

struct Run {
  const qd::harness::FormatEntry* entry = nullptr;  // null for a directory vector
  std::string format;
  const TestVector* vector = nullptr;
  Verdict verdict;
  std::string expected;  // what the vector asks for, for the report
  std::string got;       // what the implementation did
};

// The rule a refusal names: the first line of standard error that starts
// with a rule ID (after an optional "FILE:" prefix, as quantdiff and
// compilers print) not followed by the word "warning"; "" when none does.
std::string StatedRule(const std::string& stderr_head) {
  std::istringstream lines(stderr_head);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, second, third;
    words >> first >> second >> third;
    if (!first.empty() && first.back() == ':') {
      first = second;
      second = third;
    }
    if (qd::impl::LooksLikeRuleId(first) && second != "warning") return first;
  }
  return "";
}

std::string FirstLine(const std::string& text) { return text.substr(0, std::min(text.find('\n'), std::size_t{200})); }

// What an implementation did with one vector, whichever way it ran (a
// command, or a module in-process), before it is judged against the vector.
enum class AnswerKind { kAccepted, kRefused, kCrashed, kHung, kGarbage };
struct Answer {
  AnswerKind kind = AnswerKind::kCrashed;
  std::string stated_rule;  // kRefused: the rule it named, "" when none
  std::string detail;       // why (crashed, hung, garbage), or what a refusal said
  std::vector<qd::DecodedTensor> tensors;  // kAccepted
  // kAccepted whose output cannot be read as tensors (a process's file):
  // the verdict, unless a refusal was expected.
  std::optional<Verdict> output_problem;
  std::string description;  // what it did, for the report
};

// The values of the largest expectation and a header's slack: no decode of
// the vector is larger, so a bigger output is garbage, not a memory bound
// broken here.
std::uint64_t ValueBound(const std::vector<Expectation>& wants) {
  std::uint64_t most = 0;
  for (const Expectation& want : wants) {
    std::uint64_t values = 0;
    for (const qd::DecodedTensor& t : want.tensors) values += t.values.size() + 64 + t.name.size() / 4;
    most = std::max(most, values);
  }
  return most + (1u << 18);
}

// A process's output file as tensors: F32 safetensors, nothing else.
std::optional<Verdict> ReadOutput(const std::string& path, std::uint64_t max_values,
                                  std::vector<qd::DecodedTensor>* tensors) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return Verdict{Judgement::kGarbage, "no output written"};
  if (fs::file_size(path, ec) > 4 * max_values) return Verdict{Judgement::kGarbage, "output larger than the expected tensors"};
  InputFile file;
  std::string error;
  if (!OpenInput(path, &file, &error)) return Verdict{Judgement::kGarbage, "output unreadable: " + error};
  const qd::codec::ContainerResult read = qd::codec::ReadContainer(file.View(), path);
  if (read.refused) {
    const std::string rule = read.findings.empty() ? "" : read.findings.back().rule;
    return Verdict{Judgement::kGarbage, "output is not a safetensors file (" + rule + ")"};
  }
  for (const qd::codec::TensorEntry& t : read.container.tensors) {
    if (t.dtype != qd::codec::Dtype::kF32) return Verdict{Judgement::kWrongOutput, "tensor " + std::string(t.name) + " is not F32"};
    qd::DecodedTensor& copy = tensors->emplace_back();
    copy.name = t.name;
    copy.shape = t.shape;
    std::uint64_t count = 1;
    for (const std::uint64_t d : t.shape) count *= d;
    copy.values.resize(count);
    // An empty tensor has no data pointer to copy from (memcpy of null is UB).
    if (count != 0) std::memcpy(copy.values.data(), read.container.Data(t), 4 * count);  // little-endian host
  }
  return std::nullopt;
}

// The tensors against the oracle's: same names, shapes, bits.
Verdict CompareTensors(const std::vector<qd::DecodedTensor>& got_tensors, const std::vector<qd::DecodedTensor>& expected) {
  std::map<std::string_view, const qd::DecodedTensor*> written;
  for (const qd::DecodedTensor& t : got_tensors) {
    // A module may name a tensor twice (a safetensors output cannot).
    if (!written.emplace(t.name, &t).second) return {Judgement::kWrongOutput, "tensor " + t.name + " twice"};
  }
  bool signed_zero_only = false;
  Verdict first_zero;
  for (const qd::DecodedTensor& want : expected) {
    const auto found = written.find(want.name);
    if (found == written.end()) return {Judgement::kWrongOutput, "tensor " + want.name + " missing"};
    const qd::DecodedTensor& got = *found->second;
    written.erase(found);
    if (!(got.shape == want.shape)) {
      return {Judgement::kWrongOutput, "tensor " + want.name + " has another shape"};
    }
    for (std::size_t i = 0; i < want.values.size(); ++i) {
      std::uint32_t want_bits, got_bits;
      std::memcpy(&want_bits, &want.values[i], 4);
      std::memcpy(&got_bits, &got.values[i], 4);
      if (want_bits == got_bits) continue;
      const std::string where = "tensor " + want.name + " element " +
                                std::to_string(i) + ": expected " + qd::reports::Hex32(want_bits) + ", got " +
                                qd::reports::Hex32(got_bits);
      const qd::reports::FirstDifference difference{want.name, i, want_bits, got_bits};
      if (((want_bits | got_bits) & 0x7fffffffu) == 0) {
        if (!signed_zero_only) first_zero = {Judgement::kSignedZero, where, difference};
        signed_zero_only = true;
        continue;
      }
      return {Judgement::kWrongOutput, where, difference};
    }
  }
  if (!written.empty()) {
    return {Judgement::kWrongOutput, "unexpected tensor " + std::string(written.begin()->first)};
  }
  if (signed_zero_only) return first_zero;
  return {};
}

// The vector's own reading first. A file detection gives to another format
// (a .gguf vector with a broken magic reads as safetensors) may also be
// read as that format: a reader dedicated to the vector's format and one
// that detects are both right (docs: README "Which format a file is").
std::vector<Expectation> Expectations(const qd::harness::FormatEntry* format, const TestVector& v) {
  std::vector<Expectation> out = {v.exported ? *v.exported : VectorExpectation(format, v)};
  if (v.directory) return out;  // a directory is one reading: no detection
  const qd::harness::FormatEntry& detected =
      qd::harness::OracleDetectFormat(qd::ByteView{v.bytes.data(), v.bytes.size()}, v.side_files);
  if (detected.name != format->name) {
    std::string error;
    const std::optional<qd::Outcome> other =
        SafeRead(detected.oracle_read, qd::ByteView{v.bytes.data(), v.bytes.size()}, v.file, v.side_files, &error);
    if (other) out.push_back(ExpectationOf(detected, *other, v));
  }
  return out;
}

// "refuse with ST-004" or "accept and decode 2 tensors (96 values)"; a
// second reading named by its reader.
std::string DescribeExpectations(const std::vector<Expectation>& wants) {
  std::string text;
  for (const Expectation& want : wants) {
    if (!text.empty()) text += "; or, read as " + std::string(want.reader) + ", ";
    if (!want.refusal_rule.empty()) {
      text += "refuse with " + want.refusal_rule;
      continue;
    }
    std::size_t values = 0;
    for (const qd::DecodedTensor& t : want.tensors) values += t.values.size();
    text += "accept and decode " + std::to_string(want.tensors.size()) +
            (want.tensors.size() == 1 ? " tensor (" : " tensors (") + std::to_string(values) +
            (values == 1 ? " value)" : " values)");
  }
  return text;
}

// What the process did: "exit 1 naming ST-004", "exit 0 with an output",
// "killed by signal 11", with the first line of its standard error.
std::string DescribeProcess(const ProcessResult& r, const std::string& output_path) {
  std::string text;
  switch (r.end) {
    case ProcessEnd::kTimedOut: return "no answer before the timeout (killed)";
    case ProcessEnd::kSignalled: text = "killed by signal " + std::to_string(r.signal); break;
    case ProcessEnd::kNotStarted: return "not started: " + r.start_error;
    case ProcessEnd::kExited: text = "exit " + std::to_string(r.exit_code); break;
  }
  if (r.end == ProcessEnd::kExited && r.exit_code == 1) {
    const std::string stated = StatedRule(r.stderr_head);
    text += stated.empty() ? " naming no rule" : " naming " + stated;
  }
  if (r.end == ProcessEnd::kExited && r.exit_code == 0) {
    std::error_code ec;
    text += fs::exists(fs::symlink_status(output_path, ec)) ? " with an output" : " without an output";
  }
  const std::string line = FirstLine(r.stderr_head);
  return line.empty() ? text : text + "; stderr: " + line;
}

// The process protocol: exit 0 and an output, exit 1 (a rule on standard
// error), anything else.
Answer AnswerOfProcess(const ProcessResult& r, const std::string& output_path, std::uint64_t max_values) {
  Answer answer;
  answer.description = DescribeProcess(r, output_path);
  switch (r.end) {
    case ProcessEnd::kTimedOut: answer.kind = AnswerKind::kHung, answer.detail = "killed at the timeout"; return answer;
    case ProcessEnd::kSignalled: answer.detail = "signal " + std::to_string(r.signal); return answer;
    case ProcessEnd::kNotStarted: answer.detail = "not started: " + r.start_error; return answer;
    case ProcessEnd::kExited: break;
  }
  const std::string said = FirstLine(r.stderr_head);
  if (r.exit_code == 1) {
    answer.kind = AnswerKind::kRefused;
    answer.stated_rule = StatedRule(r.stderr_head);
    answer.detail = said;
  } else if (r.exit_code != 0) {
    answer.detail = "exit " + std::to_string(r.exit_code) + (said.empty() ? "" : ": " + said);
  } else {
    answer.kind = AnswerKind::kAccepted;
    answer.output_problem = ReadOutput(output_path, max_values, &answer.tensors);
  }
  return answer;
}

// A module's decode (thirdparty/impl_module/module_loader.h): its answer
// as the loader checked it.
Answer AnswerOfModule(qd::impl::ModuleAnswer m) {
  Answer answer;
  const std::string said = m.problem.empty() ? "" : ": " + FirstLine(m.problem);
  switch (m.end) {
    case qd::impl::ModuleEnd::kGarbage:
      answer.kind = AnswerKind::kGarbage;
      answer.detail = m.problem;
      answer.description = "garbage: " + FirstLine(m.problem);
      return answer;
    case qd::impl::ModuleEnd::kFailed:
      answer.detail = "the module failed" + said;
      answer.description = "failed" + said;
      return answer;
    case qd::impl::ModuleEnd::kAnswered: break;
  }
  if (m.outcome.refused) {
    answer.kind = AnswerKind::kRefused;
    answer.stated_rule = m.outcome.findings.back().rule;
    answer.detail = FirstLine(m.problem);
    answer.description = (answer.stated_rule.empty() ? "refused naming no rule" : "refused naming " + answer.stated_rule) + said;
    return answer;
  }
  answer.kind = AnswerKind::kAccepted;
  answer.tensors = std::move(m.outcome.tensors);
  answer.description = "accepted with " + std::to_string(answer.tensors.size()) +
                       (answer.tensors.size() == 1 ? " tensor" : " tensors");
  return answer;
}

Verdict Judge(const Expectation& want, const Answer& answer) {
  const bool expect_refusal = !want.refusal_rule.empty();
  switch (answer.kind) {
    case AnswerKind::kHung: return {Judgement::kHung, answer.detail};
    case AnswerKind::kCrashed: return {Judgement::kCrashed, answer.detail};
    case AnswerKind::kGarbage: return {Judgement::kGarbage, answer.detail};
    case AnswerKind::kRefused:
      if (!expect_refusal) return {Judgement::kRefusedValid, answer.detail};
      if (!answer.stated_rule.empty() && answer.stated_rule != want.refusal_rule) {
        return {Judgement::kOtherRule, "refused with " + answer.stated_rule + ", expected " + want.refusal_rule};
      }
      return {};
    case AnswerKind::kAccepted: break;
  }
  if (expect_refusal) return {Judgement::kAcceptedInvalid, "expected refusal with " + want.refusal_rule};
  if (answer.output_problem) return *answer.output_problem;
  return CompareTensors(answer.tensors, want.tensors);
}

// Passes when some expectation passes; else what the first one says.
Verdict JudgeAll(const std::vector<Expectation>& wants, const Answer& answer) {
  Verdict first = Judge(wants.front(), answer);
  for (std::size_t i = 1; i < wants.size() && first.judgement != Judgement::kPass; ++i) {
    if (Judge(wants[i], answer).judgement == Judgement::kPass) return {};
  }
  return first;
}

std::string Substitute(const std::string& templ, const std::string& input, const std::string& output) {
  std::string command;
  for (std::size_t i = 0; i < templ.size();) {
    if (templ.compare(i, 7, "{input}") == 0) {
      command += ShellQuote(input);
      i += 7;
    } else if (templ.compare(i, 8, "{output}") == 0) {
      command += ShellQuote(output);
      i += 8;
    } else {
      command += templ[i++];
    }
  }
  return command;
}

struct Options {
  std::string command_template;
  std::string module_path;  // --module: a reader module instead of a command
  qd::reports::OutputFormat report = qd::reports::OutputFormat::kText;
  double timeout = 10;
  std::uint64_t jobs = 1;
  std::uint64_t count = 4;
  std::uint64_t seed = 1;
  std::optional<std::uint64_t> only;
  std::vector<const qd::harness::FormatEntry*> formats;
  std::string out;
  bool explicit_formats = false;  // --format given
  bool model_dir = false;         // the directory vectors too (--format model_dir, or no --format)
  std::string vectors_dir;  // --vectors: an exported folder instead of the built-in set
  bool torch113 = false;    // --pt-shape torch-1.13 (generators.h SetPtTorch113Shape)
};

std::string Reproducer(const Options& o, const Run& run) {
  std::string line = "quantdiff test-impl " +
                     (o.module_path.empty() ? "--cmd " + ShellQuote(o.command_template)
                                            : "--module " + ShellQuote(o.module_path)) +
                     " --format " + run.format + " --only " + std::to_string(run.vector->tc_id);
  if (!o.vectors_dir.empty()) line += " --vectors " + ShellQuote(o.vectors_dir);
  if (o.count != 4) line += " --count " + std::to_string(o.count);
  if (o.seed != 1) line += " --seed " + std::to_string(o.seed);
  if (o.torch113) line += " --pt-shape torch-1.13";
  return line;
}

bool ParseOptions(const std::vector<std::string>& argv, Options* o, std::string* error) {
  Args args;
  if (!ParseArgs(argv, {{"cmd", true}, {"module", true}, {"format", true}, {"only", true}, {"timeout", true},
                        {"jobs", true}, {"report", true}, {"out", true}, {"count", true},
                        {"seed", true}, {"vectors", true}, {"pt-shape", true}},
                 &args, error)) {
    return false;
  }
  if (!args.positional.empty()) return *error = "takes no file arguments (got '" + args.positional[0] + "')", false;
  o->vectors_dir = args.Get("vectors").value_or("");
  if (args.Has("vectors") && o->vectors_dir.empty()) return *error = "--vectors needs a folder", false;
  if (!o->vectors_dir.empty() && (args.Has("count") || args.Has("seed") || args.Has("pt-shape"))) {
    return *error = "--count, --seed and --pt-shape make the built-in vectors; an exported folder has its own", false;
  }
  if (auto shape = args.Get("pt-shape")) {
    if (*shape != "torch-1.13" && *shape != "default") {
      return *error = "--pt-shape takes torch-1.13 or default, got '" + *shape + "'", false;
    }
    o->torch113 = *shape == "torch-1.13";
  }
  const std::optional<std::string> cmd = args.Get("cmd");
  o->module_path = args.Get("module").value_or("");
  if (cmd && args.Has("module")) return *error = "--cmd and --module are two ways to run a reader: give one", false;
  if (args.Has("module") && o->module_path.empty()) return *error = "--module needs a shared library", false;
  if (o->module_path.empty() &&
      (!cmd || cmd->find("{input}") == std::string::npos || cmd->find("{output}") == std::string::npos)) {
    return *error = "--cmd needs a command holding {input} and {output} (or --module LIBRARY.so)", false;
  }
  o->command_template = cmd.value_or("");
  if (auto s = args.Get("timeout"); s && (!ParseSeconds(*s, &o->timeout) || o->timeout <= 0 || o->timeout > 86400)) {
    return *error = "--timeout needs seconds above 0 and at most 86400, got '" + *s + "'", false;
  }
  if (auto s = args.Get("jobs"); s && (!ParseUint(*s, &o->jobs) || o->jobs == 0 || o->jobs > 256)) {
    return *error = "--jobs needs an integer from 1 to 256, got '" + *s + "'", false;
  }
  if (auto s = args.Get("count"); s && (!ParseUint(*s, &o->count) || o->count == 0 || o->count > 100000)) {
    return *error = "--count needs an integer from 1 to 100000, got '" + *s + "'", false;
  }
  if (auto s = args.Get("seed"); s && !ParseUint(*s, &o->seed)) {
    return *error = "--seed needs an unsigned 64-bit integer, got '" + *s + "'", false;
  }
  if (auto s = args.Get("report")) {
    const std::optional<qd::reports::OutputFormat> format = qd::reports::ParseOutputFormat(*s);
    if (!format) return *error = "--report takes " + std::string(qd::reports::OutputFormatNames()) + ", got '" + *s + "'", false;
    o->report = *format;
  }
  o->out = args.Get("out").value_or("");
  o->explicit_formats = args.Has("format");
  if (auto list = args.Get("format")) {
    // model_dir names the directory vectors, not a registry format.
    std::string files;
    std::stringstream names(*list);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == DirVectorFormat()) {
        o->model_dir = true;
      } else {
        files += (files.empty() ? "" : ",") + name;
      }
    }
    if (!files.empty() || !o->model_dir) {
      o->formats = ParseFormatList(files, error);
      if (o->formats.empty()) return false;
    }
  } else {
    for (const qd::harness::FormatEntry& f : qd::harness::Formats()) o->formats.push_back(&f);
    // A module reads one file (impl_module.h): directories are for commands.
    o->model_dir = o->module_path.empty();
  }
  if (o->model_dir && !o->module_path.empty()) {
    return *error = "--module reads files: the model_dir vectors (directories) need --cmd", false;
  }
  if (auto s = args.Get("only")) {
    std::uint64_t id = 0;
    if (!ParseUint(*s, &id) || id == 0) return *error = "--only needs a tcId (1, 2, ...), got '" + *s + "'", false;
    if (o->formats.size() + (o->model_dir ? 1 : 0) != 1) return *error = "--only needs exactly one --format", false;
    o->only = id;
  }
  return true;
}

}  // namespace

int RunTestImpl(const std::vector<std::string>& argv) {
  Options o;
  std::string error;
  if (!ParseOptions(argv, &o, &error)) return UsageError("test-impl", error);

  // The .pt files as torch 1.13 writes them, for this run's vectors only.
  qd::gen::SetPtTorch113Shape(o.torch113);
  // By format name (the report's order; a format named twice runs once),
  // each with its registry entry.
  std::map<std::string, std::pair<const qd::harness::FormatEntry*, std::vector<TestVector>>> vectors;
  std::vector<Run> runs;
  for (const qd::harness::FormatEntry* f : o.formats) {
    auto& [entry, list] = vectors[std::string(f->name)];
    if (entry != nullptr) continue;
    entry = f;
    if (o.vectors_dir.empty()) {
      if (!BuildVectors(*f, o.count, o.seed, &list, &error)) return IoError("test-impl", error);
    } else if (o.explicit_formats || fs::exists(fs::path(o.vectors_dir) / (std::string(f->name) + ".json"))) {
      // Every format of the folder, or each one asked for (a missing JSON is then an error).
      if (!LoadExportedVectors(o.vectors_dir, f->name, &list, &error)) return IoError("test-impl", error);
    }
  }
  if (o.model_dir) {
    // The directory vectors, under their own name and no registry entry.
    auto& [entry, list] = vectors[std::string(DirVectorFormat())];
    const bool exported = fs::exists(fs::path(o.vectors_dir) / (std::string(DirVectorFormat()) + ".json"));
    if (o.vectors_dir.empty()) {
      if (!BuildDirVectors(o.count, o.seed, &list, &error)) return IoError("test-impl", error);
    } else if (o.explicit_formats || exported) {
      if (!LoadExportedVectors(o.vectors_dir, DirVectorFormat(), &list, &error)) return IoError("test-impl", error);
    }
  }
  qd::gen::SetPtTorch113Shape(false);
  for (const auto& [format, built] : vectors) {
    for (const TestVector& v : built.second) {
      if (!o.only || *o.only == v.tc_id) runs.push_back({built.first, format, &v, {}, {}, {}});
    }
  }
  if (runs.empty() && !o.only) return IoError("test-impl", "no FORMAT.json of an export in " + o.vectors_dir);
  if (runs.empty()) return UsageError("test-impl", "no vector has that tcId");

  // A module is opened once and runs in this process; a command runs per
  // vector in a scratch folder: each vector's files under scratch/in/, as the
  // export lays them out; each run's output and standard error under
  // scratch/run/FORMAT-ID.
  std::optional<qd::impl::Module> module;
  std::string implementation = o.command_template;
  fs::path scratch;
  if (!o.module_path.empty()) {
    std::optional<qd::impl::Module> opened = qd::impl::Module::Open(o.module_path, &error);
    if (!opened) return IoError("test-impl", error);
    module.emplace(std::move(*opened));
    implementation = "module " + module->name() + " " + module->version() + " (" + o.module_path + ")";
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string scratch_template =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/quantdiff-test-impl.XXXXXX";
    if (::mkdtemp(scratch_template.data()) == nullptr) {
      return IoError("test-impl", "cannot create a folder under " + fs::path(scratch_template).parent_path().string() +
                                      ": " + std::strerror(errno));
    }
    scratch = scratch_template;
  }

  std::atomic<std::size_t> next{0};
  std::atomic<bool> io_failed{false};
  // The command's answer on V, or nullopt when its files could not be written.
  auto run_command = [&](const Run& run, std::uint64_t max_values) -> std::optional<Answer> {
    const TestVector& v = *run.vector;
    const fs::path input = scratch / "in" / v.file;
    const fs::path run_dir = scratch / "run" / (run.format + "-" + std::to_string(v.tc_id));
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    bool written = !ec;
    std::string write_error;
    for (const BundleMember& m : FilesOf(v)) written = written && WriteNewMember((scratch / "in").string(), m, &write_error);
    if (!written) return std::nullopt;
    const std::string output = (run_dir / "output.safetensors").string();
    const ProcessResult r =
        RunBounded(Substitute(o.command_template, input.string(), output), o.timeout, (run_dir / "stderr").string());
    if (r.end == ProcessEnd::kNotStarted) return std::nullopt;
    return AnswerOfProcess(r, output, max_values);
  };
  auto work = [&] {
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      Run& run = runs[i];
      const TestVector& v = *run.vector;
      const std::vector<Expectation> wants = Expectations(run.entry, v);
      std::optional<Answer> answer;
      if (module) {
        answer = AnswerOfModule(
            module->Decode(qd::ByteView{v.bytes.data(), v.bytes.size()}, v.file, v.side_files, ValueBound(wants)));
      } else {
        answer = run_command(run, ValueBound(wants));
      }
      if (!answer) {
        io_failed = true;
        continue;
      }
      run.verdict = JudgeAll(wants, *answer);
      run.expected = DescribeExpectations(wants);
      run.got = answer->description;
    }
  };
  std::vector<std::thread> workers;
  for (std::uint64_t j = 1; j < std::min<std::uint64_t>(o.jobs, runs.size()); ++j) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  if (!scratch.empty()) {
    std::error_code ec;
    fs::remove_all(scratch, ec);  // the folder this run created, links inside it not followed
  }
  if (io_failed) return IoError("test-impl", "could not write the vectors or start /bin/sh under " + scratch.string());

  qd::reports::ConformanceReport report{implementation, {}};
  for (const Run& r : runs) {
    report.runs.push_back({r.format, r.vector->tc_id, r.vector->rule, r.vector->file, r.expected, r.got,
                           std::string(JudgementName(r.verdict.judgement)), r.verdict.detail, r.verdict.difference,
                           Reproducer(o, r)});
  }
  if (!WriteOutput(o.out, qd::reports::RenderConformance(o.report, report), {}, &error)) return IoError("test-impl", error);
  const bool conforms = std::all_of(runs.begin(), runs.end(), [](const Run& r) { return r.verdict.judgement == Judgement::kPass; });
  return conforms ? kExitOk : kExitFound;
}

}  // namespace qd::cli
