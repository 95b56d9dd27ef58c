// quantdiff check: the codec's rules on each file, nothing decoded.
#include <cstdio>

#include "codecs/mapped_file.h"
#include "cli/common.h"
#include "cli/model_dir_input.h"
#include "cli/progress_line.h"
#include "reports/escape.h"
#include "codecs/model_dir.h"
#include "harness/stream_differ.h"
#include "cli/decoded_output.h"
#include "reports/report.h"
#include "reports/writers.h"

namespace qd::cli {

extern const std::string_view kCheckHelp =
    "usage: quantdiff check PATH... [--report FORMAT] [--out FILE]\n"
    "                       [--format NAME] [--config CONFIG.json]\n"
    "                       [--jobs N] [--quiet]\n"
    "\n"
    "Checks each file against the rules of its format with the production codec,\n"
    "decoding nothing (a file larger than memory is checked through its mapping).\n"
    "The format is detected from the file unless --format names it.\n"
    "\n"
    "A PATH that is a directory is one model (docs/model_dir.md): its weight\n"
    "set found by name (model.safetensors, or shards and their\n"
    "model.safetensors.index.json, or pytorch_model.bin), the index checked\n"
    "against the shards (IDX-001..IDX-013), every shard's container rules, then\n"
    "the format's rules over all shards' tensors at once, with the configs\n"
    "inside the directory: a layer two shards hold is one layer. The shards are\n"
    "checked on --jobs threads (the report is the same for any number), and on a\n"
    "terminal a line on standard error shows the shards done.\n"
    "\n"
    "  --report FORMAT  text (default): one line per finding and a summary;\n"
    "                   json, junit (one testcase per file), sarif (2.1.0),\n"
    "                   markdown (a CI job summary) or html (one page: rules x\n"
    "                   files coloured by severity, each file's findings)\n"
    "  --out FILE       write the report to FILE instead of standard output\n"
    "  --format NAME    apply NAME's rules to every file; NAME is one of\n"
    "                   {formats}\n"
    "  --config FILE    the quantize config for every file (GPTQ); without it each\n"
    "                   file's config is looked up beside it: STEM.quantize_config.json,\n"
    "                   quantize_config.json, quant_config.json, config.json\n"
    "  --jobs N         check up to N shards of a directory at once (default: the\n"
    "                   number of cores)\n"
    "  --quiet          no progress line (it is shown only when standard error is\n"
    "                   a terminal)\n"
    "\n"
    "exit: 0 every file accepted (warnings allowed), 1 a file was refused,\n"
    "      2 usage error, unreadable file or unwritable --out\n";

namespace {

// A model directory as one input (docs/model_dir.md): its listing, the codec's
// directory reader on JOBS threads, one report entry. False (reported) on an
// I/O error.
bool CheckDirectory(const std::string& path, const ReportOptions& options, const DirRun& run,
                    ProgressLine* progress, qd::reports::Report* report,
                    std::vector<std::string>* inputs, bool* refused) {
  std::string error;
  ModelDirInput dir;
  if (!OpenModelDirForReport("check", path, options.forced != nullptr, &dir, inputs)) return false;
  qd::codec::ModelDirRead read;
  const qd::codec::ModelDirOptions dir_options =
      DirReadOptions("check", path, run, progress, "now the format's rules over all of them");
  std::optional<qd::Outcome> outcome = qd::harness::GuardedRead(
      [&] { return qd::codec::CheckModelDir(dir.Listing(), &read, dir_options); }, &error);
  progress->Clear();
  if (!outcome) {
    IoError("check", path + ": model directory codec failed: " + error);
    return false;
  }
  if (read.unsupported) {
    IoError("check", path + ": " + read.unsupported_why);
    return false;
  }
  *refused = *refused || outcome->refused;
  qd::reports::FileReport file = qd::reports::FromOutcome(path, read.format, *outcome);
  file.note = ModelDirNote(read);
  report->files.push_back(std::move(file));
  return true;
}

}  // namespace

int RunCheck(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  ReportOptions options;
  std::vector<FlagSpec> flags = kReportFlags;
  flags.insert(flags.end(), kDirRunFlags.begin(), kDirRunFlags.end());
  DirRun run;
  if (!ParseArgs(argv, flags, &args, &error) || !ParseReportOptions(args, &options, &error) ||
      !ParseDirRun(args, &run, &error)) {
    return UsageError("check", error);
  }
  if (args.positional.empty()) return UsageError("check", "no file given");
  ProgressLine progress(run.progress_where);
  // Refused before any work: --out may not name an input or a non-file.
  if (!options.out.empty() && !CheckOutputTarget(options.out, args.positional, &error)) {
    return IoError("check", error);
  }

  qd::reports::Report report{"check", {}};
  bool io_error = false;
  bool refused = false;
  // Everything read, so that --out can never name one of them.
  std::vector<std::string> inputs = args.positional;
  for (const std::string& path : args.positional) {
    if (IsDirectory(path)) {
      if (!CheckDirectory(path, options, run, &progress, &report, &inputs, &refused)) io_error = true;
      continue;
    }
    InputFile file;
    if (!OpenInput(path, &file, &error)) {
      IoError("check", "cannot read " + error);
      io_error = true;
      continue;
    }
    qd::harness::SideFiles side_files;
    if (!FindSideFiles(path, args.Get("config"), &side_files, &error)) {
      IoError("check", error);
      io_error = true;
      continue;
    }
    for (const qd::SideFile& side : side_files) inputs.push_back(side.name);
    const qd::ByteView bytes = file.View();
    const qd::harness::FormatEntry* format = nullptr;
    std::optional<qd::Outcome> outcome =
        CheckVerbOutcome(bytes, path, side_files, options.forced, &format, &error);
    if (!outcome) {
      IoError("check", path + ": " + error);
      io_error = true;
      continue;
    }
    refused = refused || outcome->refused;
    report.files.push_back(qd::reports::FromOutcome(path, std::string(format->name), *outcome));
  }
  if (!WriteOutput(options.out, qd::reports::Render(options.report, report), inputs,
                   &error)) {
    return IoError("check", error);
  }
  if (io_error) return kExitUsage;
  return refused ? kExitFound : kExitOk;
}

}  // namespace qd::cli
