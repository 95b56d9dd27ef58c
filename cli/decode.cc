// quantdiff decode: a file decoded by the codec, written as F32 safetensors.
#include <bit>
#include <exception>
#include <utility>
#include <vector>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "codecs/mapped_file.h"
#include "codecs/safetensors.h"
#include "cli/common.h"
#include "cli/model_dir_input.h"
#include "cli/progress_line.h"
#include "codecs/model_dir.h"
#include "codecs/recognised.h"
#include "cli/decoded_output.h"
#include "reports/escape.h"
#include "reports/writers.h"

namespace qd::cli {

extern const std::string_view kDecodeHelp =
    "usage: quantdiff decode FILE --out OUT.safetensors [--format NAME] [--config CONFIG.json]\n"
    "       quantdiff decode DIR --out OUT.safetensors [--jobs N] [--quiet]\n"
    "\n"
    "A DIR is one model (docs/model_dir.md): every shard's tensors decoded\n"
    "together, written to the one OUT file, one tensor at a time. Its shards\n"
    "are checked on --jobs threads (the output is the same for any number), and\n"
    "on a terminal a line on standard error shows the shards checked, then the\n"
    "tensors written.\n"
    "\n"
    "Decodes FILE with the production codec of its format and writes every\n"
    "decoded tensor as F32, under its name and with its logical shape (a Q4B32 or\n"
    "Q8B32 matrix becomes [rows, columns], a GPTQ layer P.qweight/qzeros/scales/\n"
    "g_idx becomes P.weight [out_features, in_features]), to a plain safetensors\n"
    "file. Tensors\n"
    "the format does not decode to floating point (integer dtypes) are left out.\n"
    "A file of a family quantdiff only recognises (EXL3, VPTQ, QQQ, ParoQuant:\n"
    "docs/recognised.md) is checked and refused with REC-001, nothing written.\n"
    "Warnings are printed to standard error.\n"
    "\n"
    "The output is written to a new temporary file beside OUT and renamed over\n"
    "OUT only when it is whole and `quantdiff check OUT` would accept it (a\n"
    "decoded name a safetensors header cannot hold, such as __metadata__, is a\n"
    "finding); nothing else is ever removed or overwritten. OUT may not be the\n"
    "input (through any path or link) nor an existing non-regular file; - writes\n"
    "to standard output (unverified). An input truncated while it is read ends\n"
    "with exit 2.\n"
    "\n"
    "  --out FILE     the safetensors file to write (required; - for standard output)\n"
    "  --format NAME  read FILE as NAME instead of detecting; NAME is one of\n"
    "                 {formats}\n"
    "  --config FILE  FILE's quantize config (GPTQ); without it the config is looked\n"
    "                 up beside FILE: STEM.quantize_config.json, quantize_config.json,\n"
    "                 quant_config.json, then config.json's quantization_config\n"
    "  --jobs N       check up to N shards of a DIR at once (default: the number\n"
    "                 of cores)\n"
    "  --quiet        no progress line (it is shown only when standard error is a\n"
    "                 terminal)\n"
    "\n"
    "exit: 0 written, 1 FILE refused or its output would fail check (the\n"
    "      findings on standard error, nothing written), 2 usage error,\n"
    "      unreadable FILE, or --out unwritable or not allowed\n";

namespace {

// The decoded tensors as they pass to the output: "decode DIR: tensor i/n
// (name)" on the progress line, then everything handed on to INNER.
class ProgressSink : public TensorSink {
 public:
  ProgressSink(TensorSink& inner, ProgressLine* progress, const std::string& path)
      : inner_(inner), progress_(progress), shown_("decode " + qd::reports::ForTerminal(path) + ": ") {}
  using TensorSink::Plan;
  bool Plan(const TensorPlan& tensors) override {
    // Names are kept only for a line that is shown (a copy of every name
    // otherwise costs memory for nothing, issue 9 section 3); with none kept
    // Take shows nothing.
    if (progress_->enabled()) names_.Keep(tensors);
    return inner_.Plan(tensors);
  }
  bool Take(const TensorChunk& chunk) override {
    if (chunk.tensor != shown_tensor_ && chunk.tensor < names_.size()) {
      shown_tensor_ = chunk.tensor;
      progress_->Show(shown_ + "tensor " + std::to_string(chunk.tensor + 1) + "/" +
                          std::to_string(names_.size()) + " (" +
                          qd::reports::ForTerminal(names_[chunk.tensor]) + ")",
                      false);
    }
    return inner_.Take(chunk);
  }

 private:
  TensorSink& inner_;
  ProgressLine* progress_;
  std::string shown_;
  PlanNames names_;
  std::size_t shown_tensor_ = static_cast<std::size_t>(-1);
};

}  // namespace

int RunDecode(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  std::vector<FlagSpec> flags = {{"out", true}, {"format", true}, kConfigFlag};
  flags.insert(flags.end(), kDirRunFlags.begin(), kDirRunFlags.end());
  DirRun run;
  if (!ParseArgs(argv, flags, &args, &error) || !ParseDirRun(args, &run, &error)) {
    return UsageError("decode", error);
  }
  if (args.positional.size() != 1) return UsageError("decode", "give exactly one FILE");
  const std::optional<std::string> out = args.Get("out");
  if (!out || out->empty()) return UsageError("decode", "--out OUT.safetensors is required");
  const qd::harness::FormatEntry* forced = nullptr;
  if (auto name = args.Get("format")) {
    forced = FormatByName(*name, &error);
    if (forced == nullptr) return UsageError("decode", error);
  }

  const std::string& path = args.positional[0];
  const bool directory = IsDirectory(path);
  if (directory && (forced != nullptr || args.Get("config"))) {
    return UsageError("decode", "--format and --config apply to a file; a directory names its own");
  }
  // A file: its mapping and the configs beside it; a directory: its listing
  // (docs/model_dir.md), configs inside.
  InputFile file;
  ModelDirInput dir;
  qd::harness::SideFiles side_files;
  std::vector<std::string> inputs = {path};
  if (directory) {
    if (!OpenModelDir(path, &dir, &error)) return IoError("decode", "cannot read " + error);
    AppendEntryPaths(dir, &inputs);
  } else {
    if (!OpenInput(path, &file, &error)) return IoError("decode", "cannot read " + error);
    if (!FindSideFiles(path, args.Get("config"), &side_files, &error)) return IoError("decode", error);
    for (const qd::SideFile& side : side_files) inputs.push_back(side.name);
  }
  if (!CheckOutputTarget(*out, inputs, &error)) return IoError("decode", error);
  const qd::ByteView bytes = file.View();
  const qd::harness::FormatEntry* format =
      directory ? nullptr : forced ? forced : &qd::harness::DetectFormat(bytes, side_files);

  OutputFile output;
  if (!output.Open(*out, inputs, &error)) return IoError("decode", error);
  SafetensorsF32Sink sink([&output](const void* data, std::size_t size) {
    return output.Write(data, size);
  }, *out);
  std::optional<qd::Outcome> outcome;
  qd::codec::ModelDirRead dir_read;
  ProgressLine progress(directory ? run.progress_where : ProgressLine::kNowhere);
  ProgressSink progress_sink(sink, &progress, path);
  try {
    // A recognised format (docs/recognised.md 0) is checked, never decoded:
    // its refusal, REC-001, stands in for the stream.
    outcome = directory ? qd::codec::StreamModelDir(
                              dir.Listing(), progress_sink, &dir_read, qd::codec::BestKernel(),
                              DirReadOptions("decode", path, run, &progress, "now decoding"))
              : format->decode_refusal ? format->decode_refusal(bytes, path, side_files)
                                       : format->codec_stream(bytes, path, side_files, sink);
  } catch (const std::exception& e) {  // allocation failure on a huge tensor
    error = e.what();
  }
  progress.Clear();
  const std::string format_name = directory ? dir_read.format : std::string(format->name);
  if (!outcome) {
    return IoError("decode", path + ": " + format_name + " codec failed: " + error);
  }
  if (dir_read.unsupported) return IoError("decode", path + ": " + dir_read.unsupported_why);
  if (directory && dir_read.format == "recognised" && !outcome->refused) {
    // The same refusal for a directory of a recognised family: what was
    // streamed stays in the temporary file, which is never committed.
    outcome->findings.push_back(qd::codec::RecognisedNotDecoded(outcome->findings, path));
    outcome->refused = true;
  }
  PrintFindings(path, outcome->findings);
  if (outcome->refused) {
    std::fprintf(stderr, "quantdiff decode: %s refused by the %s codec; nothing written\n",
                 qd::reports::ForTerminal(path).c_str(), format_name.c_str());
    return kExitFound;
  }
  if (sink.finding()) {
    PrintFindings(*out, {*sink.finding()});
    return kExitFound;
  }
  if (*out != kStandardOutput) {
    // What quantdiff writes, it must accept: the file as `check OUT` will
    // read it, configs found beside OUT included (issue 9 section 2).
    // The input is read to its end by now: its pages need not stay
    // resident beside the output's (issue 9 section 3).
    file.ReleasePages();
    const int verdict = VerifyWrittenAsCheckWould(output.temporary_path(), *out, &error);
    if (verdict == kExitUsage) return IoError("decode", error);
    if (verdict != kExitOk) return verdict;
  }
  if (!output.Commit(&error)) return IoError("decode", error);
  std::fprintf(stderr, "quantdiff decode: %s [%s] -> %s: %llu tensors, %llu values as F32\n",
               qd::reports::ForTerminal(path).c_str(), format_name.c_str(),
               qd::reports::ForTerminal(*out).c_str(),
               static_cast<unsigned long long>(sink.tensors()),
               static_cast<unsigned long long>(sink.values()));
  return kExitOk;
}

}  // namespace qd::cli
