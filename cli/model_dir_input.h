// model_dir_input.h: a model directory gathered into the listing both
// readers get (docs/model_dir.md section 1), with its files mapped.
//
//   ModelDirInput input;
//   std::string error;
//   if (!OpenModelDir("models/llama-gptq", &input, &error)) return IoError("check", error);
//   qd::codec::StreamModelDir(input.Listing(), sink, &read);
#ifndef QUANTDIFF_CLI_MODEL_DIR_INPUT_H_
#define QUANTDIFF_CLI_MODEL_DIR_INPUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common.h"
#include "cli/progress_line.h"
#include "codecs/model_dir.h"
#include "quantdiff/plain_data.h"

namespace qd::cli {

// An index above this is an I/O error (exit 2), as a config above
// kMaxSideFileBytes is: both readers hold the index as a JSON tree. The
// largest public indexes (hundreds of shards, mixture-of-experts models) are
// under 10 MB.
inline constexpr std::uint64_t kMaxIndexBytes = 16ull << 20;

class ModelDirInput {
 public:
  const qd::ModelDirListing& Listing() const { return listing_; }

 private:
  friend bool OpenModelDir(const std::string& dir, ModelDirInput* input, std::string* error);
  qd::ModelDirListing listing_;
  std::vector<std::unique_ptr<InputFile>> files_;
};

// True when PATH names a directory (following a symbolic link).
bool IsDirectory(const std::string& path);

// Lists DIR: every entry directly in it, sorted by name, with its kind; the
// regular entries whose names the contract reads (*.safetensors, *.bin,
// *.json) mapped. False with *error when DIR cannot be listed, a file cannot
// be mapped, or an index or config is larger than its limit.
bool OpenModelDir(const std::string& dir, ModelDirInput* input, std::string* error);

// Adds the path of every entry of DIR to INPUTS: what --out may never name.
void AppendEntryPaths(const ModelDirInput& dir, std::vector<std::string>* inputs);

// What `check` and `diff` do first with a directory PATH: --format refused
// (a directory's format is detected), the listing opened, its entries added
// to INPUTS. False when it reported (as VERB) an error: exit 2.
bool OpenModelDirForReport(std::string_view verb, const std::string& path, bool format_forced,
                           ModelDirInput* dir, std::vector<std::string>* inputs);

// The flags of a verb that reads directories on threads with a progress
// line: --jobs N, --quiet.
inline const std::vector<FlagSpec> kDirRunFlags = {{"jobs", true}, {"quiet", false}};

// How VERB reads a directory: --jobs (default: the cores; false with
// *error for a value outside 1..1024), and the progress line, shown on a
// terminal only and never with --quiet.
struct DirRun {
  unsigned jobs = 1;
  ProgressLine::Where progress_where = ProgressLine::kTerminalOnly;
};
bool ParseDirRun(const Args& args, DirRun* run, std::string* error);

// The directory reader's options for VERB on PATH: RUN's jobs, and shard
// progress shown on PROGRESS as "VERB PATH: k/n shards (name)", then
// "n/n shards, " + AFTER once every shard is read.
qd::codec::ModelDirOptions DirReadOptions(std::string_view verb, const std::string& path,
                                          const DirRun& run, ProgressLine* progress,
                                          const std::string& after);

// What a report says of a directory besides its verdict: "2 shards,
// total_size counts tensor bytes".
std::string ModelDirNote(const qd::codec::ModelDirRead& read);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_MODEL_DIR_INPUT_H_
