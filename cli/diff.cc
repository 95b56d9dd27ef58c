// quantdiff diff: codec and oracle on each file, compared.
#include <cstdio>

#include "codecs/mapped_file.h"
#include "cli/common.h"
#include "harness/differ.h"
#include "reports/report.h"
#include "reports/writers.h"

namespace qd::cli {

extern const std::string_view kDiffHelp =
    "usage: quantdiff diff PATH... [--report json|text|junit|sarif] [--out FILE]\n"
    "                      [--format NAME] [--config CONFIG.json]\n"
    "\n"
    "Reads each file with the production codec and with the reference oracle of\n"
    "its format, then compares them: verdict first, then the rule of every\n"
    "finding, then every decoded value bit for bit. Prints each side's verdict,\n"
    "the oracle's findings and any divergence with its signature, e.g.\n"
    "DIFF:rbq:bytes:value.\n"
    "\n"
    "  --report FORMAT  text (default), json, junit or sarif\n"
    "  --out FILE       write the report to FILE instead of standard output\n"
    "  --format NAME    read every file as NAME (rbq, bnb, gptq, pt, safetensors)\n"
    "  --config FILE    the quantize config for every file (GPTQ); without it each\n"
    "                   file's config is looked up beside it: STEM.quantize_config.json,\n"
    "                   quantize_config.json, quant_config.json, config.json\n"
    "\n"
    "exit: 0 codec and oracle agree on every file (whatever the verdict),\n"
    "      1 a divergence, 2 usage error, unreadable file or unwritable --out\n";

int RunDiff(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  ReportOptions options;
  if (!ParseArgs(argv, kReportFlags, &args, &error) ||
      !ParseReportOptions(args, &options, &error)) {
    return UsageError("diff", error);
  }
  if (args.positional.empty()) return UsageError("diff", "no file given");

  qd::reports::Report report{"diff", {}};
  bool io_error = false;
  bool diverged = false;
  for (const std::string& path : args.positional) {
    qd::codec::MappedFile file;
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
    const qd::ByteView bytes = file.View();
    const qd::harness::FormatEntry& format =
        options.forced ? *options.forced : qd::harness::DetectFormat(bytes);
    const std::string name(format.name);
    std::string codec_error;
    std::string oracle_error;
    bool out_of_memory = false;
    std::optional<qd::Outcome> codec =
        SafeRead(format.codec_read, bytes, path, side_files, &codec_error, &out_of_memory);
    std::optional<qd::Outcome> oracle =
        SafeRead(format.oracle_read, bytes, path, side_files, &oracle_error, &out_of_memory);
    if (out_of_memory) {  // the machine's limit, not a difference between the readers
      IoError("diff", path + ": out of memory while reading it (codec and oracle each hold its "
                             "whole decode)");
      io_error = true;
      continue;
    }
    qd::reports::FileReport r;
    if (codec && oracle) {
      r = qd::reports::FromOutcome(path, name, *oracle);
      r.codec = qd::reports::VerdictOf(*codec);
      r.oracle = qd::reports::VerdictOf(*oracle);
      r.divergence = qd::harness::Compare(*codec, *oracle, name);
    } else {
      // A reader that throws diverges from one that returns, whatever it says.
      r.path = path;
      r.format = name;
      if (oracle) {
        r = qd::reports::FromOutcome(path, name, *oracle);
        r.oracle = qd::reports::VerdictOf(*oracle);
      }
      if (codec) r.codec = qd::reports::VerdictOf(*codec);
      const std::string side = codec ? "oracle" : "codec";
      r.divergence = qd::harness::Divergence{
          "DIFF:" + name + ":exception:" + side,
          (codec ? oracle_error : codec_error) + (codec || oracle ? "" : "; oracle " + oracle_error)};
    }
    diverged = diverged || r.divergence.has_value();
    report.files.push_back(std::move(r));
  }
  if (!WriteOutput(options.out, qd::reports::Render(options.report, report), &error)) {
    return IoError("diff", error);
  }
  if (io_error) return kExitUsage;
  return diverged ? kExitFound : kExitOk;
}

}  // namespace qd::cli
