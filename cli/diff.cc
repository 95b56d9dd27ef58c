// quantdiff diff: codec and oracle on each file, compared.
#include <cstdio>

#include "codecs/mapped_file.h"
#include "cli/common.h"
#include "cli/model_dir_input.h"
#include "cli/progress_line.h"
#include "harness/model_dir_differ.h"
#include "harness/differ.h"
#include "harness/stream_differ.h"
#include "reports/report.h"
#include "reports/writers.h"

namespace qd::cli {

extern const std::string_view kDiffHelp =
    "usage: quantdiff diff PATH... [--report FORMAT] [--out FILE]\n"
    "                      [--format NAME] [--config CONFIG.json]\n"
    "                      [--jobs N] [--quiet]\n"
    "\n"
    "Reads each file with the production codec and with the reference oracle of\n"
    "its format, then compares them: the format each side detects first, then\n"
    "the verdict, then every field but the message of every finding, then every\n"
    "decoded value bit for bit. Prints each side's verdict, the oracle's findings\n"
    "and any divergence with its signature, e.g. DIFF:rbq:bytes:value, or\n"
    "DIFF:safetensors:detect:safetensors!=bnb when the codec reads as plain\n"
    "safetensors a file the oracle finds a bitsandbytes layer in (the codec's\n"
    "format's readers still run and are reported).\n"
    "\n"
    "A PATH that is a directory is one model (docs/model_dir.md): its weight set\n"
    "(model.safetensors, or shards and model.safetensors.index.json, or\n"
    "pytorch_model.bin), index and configs are read by both sides' directory\n"
    "readers and compared the same way (signatures DIFF:model_dir:...). The\n"
    "codec checks its shards on --jobs threads (the report is the same for any\n"
    "number), and on a terminal a line on standard error shows the shards done.\n"
    "\n"
    "  --report FORMAT  text (default), json, junit, sarif, markdown or html\n"
    "  --out FILE       write the report to FILE instead of standard output\n"
    "  --format NAME    read every file as NAME (no detection, so none is\n"
    "                   compared); NAME is one of\n"
    "                   {formats}\n"
    "  --config FILE    the quantize config for every file (GPTQ); without it each\n"
    "                   file's config is looked up beside it: STEM.quantize_config.json,\n"
    "                   quantize_config.json, quant_config.json, config.json\n"
    "  --jobs N         read up to N shards of a directory at once on the codec's\n"
    "                   side (default: the number of cores)\n"
    "  --quiet          no progress line (it is shown only when standard error is\n"
    "                   a terminal)\n"
    "\n"
    "exit: 0 codec and oracle agree on every file (whatever the verdict),\n"
    "      1 a divergence, 2 usage error, unreadable file or unwritable --out\n";

namespace {

// A model directory as one input (docs/model_dir.md): both directory readers
// on its listing, compared. False (reported) on an I/O error.
bool DiffDirectory(const std::string& path, const ReportOptions& options, const DirRun& run,
                   ProgressLine* progress, qd::reports::Report* report,
                   std::vector<std::string>* inputs, bool* diverged) {
  ModelDirInput dir;
  if (!OpenModelDirForReport("diff", path, options.forced != nullptr, &dir, inputs)) return false;
  const qd::harness::DirDiff d = qd::harness::DiffModelDir(
      dir.Listing(), DirReadOptions("diff", path, run, progress, "now both readers' format rules"));
  progress->Clear();
  // Neither side reads the set yet: no verdict (one side alone is a divergence).
  if (d.codec_read.unsupported && d.oracle_unsupported) {
    IoError("diff", path + ": " + d.codec_read.unsupported_why);
    return false;
  }
  if (d.streamed.out_of_memory) {
    IoError("diff", path + ": out of memory while reading it");
    return false;
  }
  qd::reports::FileReport r;
  r.path = path;
  r.format = d.codec_read.format;
  if (d.streamed.oracle) {
    r = qd::reports::FromOutcome(path, d.codec_read.format, *d.streamed.oracle);
    r.oracle = qd::reports::VerdictOf(*d.streamed.oracle);
  }
  if (d.streamed.codec) r.codec = qd::reports::VerdictOf(*d.streamed.codec);
  r.note = ModelDirNote(d.codec_read);
  r.divergence = d.streamed.divergence;
  *diverged = *diverged || r.divergence.has_value();
  report->files.push_back(std::move(r));
  return true;
}

}  // namespace

int RunDiff(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  ReportOptions options;
  std::vector<FlagSpec> flags = kReportFlags;
  flags.insert(flags.end(), kDirRunFlags.begin(), kDirRunFlags.end());
  DirRun run;
  if (!ParseArgs(argv, flags, &args, &error) || !ParseReportOptions(args, &options, &error) ||
      !ParseDirRun(args, &run, &error)) {
    return UsageError("diff", error);
  }
  if (args.positional.empty()) return UsageError("diff", "no file given");
  ProgressLine progress(run.progress_where);
  // Refused before any work: --out may not name an input or a non-file.
  if (!options.out.empty() && !CheckOutputTarget(options.out, args.positional, &error)) {
    return IoError("diff", error);
  }

  qd::reports::Report report{"diff", {}};
  bool io_error = false;
  bool diverged = false;
  // Everything read, so that --out can never name one of them.
  std::vector<std::string> inputs = args.positional;
  for (const std::string& path : args.positional) {
    if (IsDirectory(path)) {
      if (!DiffDirectory(path, options, run, &progress, &report, &inputs, &diverged)) io_error = true;
      continue;
    }
    InputFile file;
    if (!OpenInput(path, &file, &error)) {
      IoError("diff", "cannot read " + error);
      io_error = true;
      continue;
    }
    qd::harness::SideFiles side_files;
    if (!FindSideFiles(path, args.Get("config"), &side_files, &error)) {
      IoError("diff", error);
      io_error = true;
      continue;
    }
    for (const qd::SideFile& side : side_files) inputs.push_back(side.name);
    const qd::ByteView bytes = file.View();
    const qd::harness::FormatEntry& format =
        options.forced ? *options.forced : qd::harness::DetectFormat(bytes, side_files);
    const std::string name(format.name);
    // Which readers run is itself an answer both sides give (README "Which
    // format a file is"); a difference outranks whatever the readers say.
    const std::optional<qd::harness::Divergence> detection =
        options.forced ? std::nullopt
                       : qd::harness::CompareDetection(
                             format.name, qd::harness::OracleDetectFormat(bytes, side_files).name, name);
    // Both readers stream and are compared chunk by chunk (README "Resources").
    const qd::harness::StreamedDiff diff =
        qd::harness::DiffStreams(format, bytes, path, side_files);
    if (diff.out_of_memory) {  // the machine's limit, not a difference between the readers
      IoError("diff", path + ": out of memory while reading it");
      io_error = true;
      continue;
    }
    // A reader that throws diverges from one that returns, whatever it says.
    qd::reports::FileReport r;
    r.path = path;
    r.format = name;
    if (diff.oracle) {
      r = qd::reports::FromOutcome(path, name, *diff.oracle);
      r.oracle = qd::reports::VerdictOf(*diff.oracle);
    }
    if (diff.codec) r.codec = qd::reports::VerdictOf(*diff.codec);
    r.divergence = diff.divergence;
    if (detection) r.divergence = detection;
    diverged = diverged || r.divergence.has_value();
    report.files.push_back(std::move(r));
  }
  if (!WriteOutput(options.out, qd::reports::Render(options.report, report), inputs,
                   &error)) {
    return IoError("diff", error);
  }
  if (io_error) return kExitUsage;
  return diverged ? kExitFound : kExitOk;
}

}  // namespace qd::cli
