// quantdiff convert DIR --to safetensors: a torch model directory as a new
// safetensors model directory (docs/model_dir.md section 7). The input is
// read as `check DIR` reads it (nothing executed, docs/pt.md 4), each shard
// is written as `convert IN.bin` writes one file (cli/convert_pt.h), and the
// whole directory is checked as `check OUTDIR` will read it before it is
// renamed into place (issue 9 section 2).
#include "cli/convert_dir.h"

#include <cstdio>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/convert_pt.h"
#include "cli/model_dir_input.h"
#include "cli/output_file.h"
#include "codecs/model_dir.h"
#include "codecs/pt.h"
#include "harness/registry.h"
#include "harness/stream_differ.h"
#include "reports/escape.h"

namespace qd::cli {
namespace {

constexpr std::string_view kVerb = "convert";
constexpr std::string_view kTorchWeightSuffix = ".bin";
constexpr std::string_view kStemConfigSuffix = ".quantize_config.json";
// The index Hugging Face writes beside safetensors shards (docs/model_dir.md 2).
constexpr std::string_view kIndexName = "model.safetensors.index.json";

std::string Shown(const std::string& path) { return qd::reports::ForTerminal(path); }

// The directory reader's verdict on the directory at LISTING_DIR: nullopt
// (reported, exit 2) when it failed or cannot read the set yet.
std::optional<qd::Outcome> CheckDir(const ModelDirInput& dir, const std::string& shown_dir,
                                    qd::codec::ModelDirRead* read) {
  std::string error;
  std::optional<qd::Outcome> outcome = qd::harness::GuardedRead(
      [&] { return qd::codec::CheckModelDir(dir.Listing(), read); }, &error);
  if (!outcome) {
    IoError(kVerb, shown_dir + ": model directory codec failed: " + error);
    return std::nullopt;
  }
  if (read->unsupported) {
    IoError(kVerb, shown_dir + ": " + read->unsupported_why);
    return std::nullopt;
  }
  return outcome;
}

// What is written, shard by shard, and what the summary line counts.
struct DirConversion {
  nlohmann::json weight_map = nlohmann::json::object();
  std::uint64_t tensor_bytes = 0;
  std::size_t tensors = 0;
  std::size_t metadata = 0;
};

// Shard RANK of the input (NAME in DIR) converted into OUTPUT_DIR. 0, 1 or 2
// as RunConvertDir.
int ConvertShard(const ModelDirInput& dir, const std::string& name, std::size_t rank,
                 std::size_t count, const std::string& out, const OutputDirectory& output_dir,
                 const std::vector<std::string>& inputs, DirConversion* conversion) {
  const std::string path = dir.Listing().prefix + name;
  qd::ByteView bytes;
  for (const qd::DirEntry& e : dir.Listing().entries) {
    if (e.name == name) bytes = e.bytes;
  }
  if (!qd::codec::ClaimsPt(bytes)) {
    return UsageError(kVerb, path + " is not a torch .pt/.bin file (docs/pt.md 1.1); "
                                    "--to safetensors converts only those");
  }
  const qd::codec::PtResult read = qd::codec::ReadPt(bytes, path);
  if (read.refused) {  // the directory reader accepted it: not expected
    PrintFindings(path, read.findings);
    std::fprintf(stderr, "quantdiff convert: %s refused by the pt codec; nothing written\n",
                 Shown(path).c_str());
    return kExitFound;
  }
  const std::string shard = SafetensorsShardName(rank, count);
  OutputFile output;
  PtWritten written;
  std::string error;
  const int wrote = WritePtAsSafetensors(read, bytes, out + "/" + shard, output_dir.PathOf(shard),
                                         inputs, &output, &written, &error);
  if (wrote == kExitUsage) return IoError(kVerb, error);
  if (wrote != kExitOk) return wrote;
  if (!output.Commit(&error)) return IoError(kVerb, error);
  for (const qd::codec::PtTableEntry& t : read.tensors) conversion->weight_map[t.name] = shard;
  conversion->tensor_bytes += written.bytes;
  conversion->tensors += written.tensors;
  conversion->metadata += written.metadata;
  return kExitOk;
}

// `check OUTDIR` on the directory being built, its findings naming OUT.
int VerifyDirAsCheckWould(const OutputDirectory& output_dir, const std::string& out) {
  ModelDirInput written;
  std::string error;
  if (!OpenModelDir(output_dir.temporary_path(), &written, &error)) {
    return IoError(kVerb, "cannot read back " + error);
  }
  qd::codec::ModelDirRead read;
  std::optional<qd::Outcome> outcome = CheckDir(written, out, &read);
  if (!outcome) return kExitUsage;
  if (!outcome->refused) return kExitOk;
  const std::string& temporary = output_dir.temporary_path();
  for (qd::Finding& f : outcome->findings) {
    if (f.file.compare(0, temporary.size(), temporary) == 0) f.file = out + f.file.substr(temporary.size());
  }
  PrintFindings(out, outcome->findings);
  std::fprintf(stderr,
               "quantdiff: %s would be refused by `quantdiff check` (read as %s); nothing written\n",
               Shown(out).c_str(), read.format.empty() ? "a model directory" : read.format.c_str());
  return kExitFound;
}

}  // namespace

std::string SafetensorsShardName(std::size_t rank, std::size_t count) {
  if (count == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", rank + 1, count);
  return name;
}

std::string ConvertedConfigName(const std::string& name) {
  if (name != "quantize_config.json" && std::string_view(name).ends_with(kStemConfigSuffix)) {
    return "model" + std::string(kStemConfigSuffix);
  }
  return name;
}

int RunConvertDir(const std::string& dir, const std::string& out) {
  std::string error;
  if (out == kStandardOutput) {
    return UsageError(kVerb, "--out - is not possible for a directory: give a new directory name");
  }
  if (!CheckNewDirectoryTarget(out, &error)) return IoError(kVerb, error);
  ModelDirInput input;
  if (!OpenModelDir(dir, &input, &error)) return IoError(kVerb, "cannot read " + error);

  // DIR as `check DIR` reads it (IDX- rules, every shard's PT- rules, the
  // format's rules over all shards); a refusal writes nothing.
  qd::codec::ModelDirRead read;
  const std::optional<qd::Outcome> checked = CheckDir(input, dir, &read);
  if (!checked) return kExitUsage;
  PrintFindings(dir, checked->findings);
  if (checked->refused) {
    std::fprintf(stderr, "quantdiff convert: %s refused (as `quantdiff check` reads it); nothing written\n",
                 Shown(dir).c_str());
    return kExitFound;
  }
  for (const std::string& name : read.weight_files) {
    if (!std::string_view(name).ends_with(kTorchWeightSuffix)) {
      return UsageError(kVerb, dir + " holds safetensors weights (" + name +
                                   "); --to safetensors converts torch directories "
                                   "(pytorch_model.bin, or pytorch_model.bin.index.json and its shards)");
    }
  }

  std::vector<std::string> inputs;
  AppendEntryPaths(input, &inputs);
  OutputDirectory output_dir;
  if (!output_dir.Open(out, &error)) return IoError(kVerb, error);
  const std::string shown_out = out.size() > 1 && out.back() == '/' ? out.substr(0, out.size() - 1) : out;
  DirConversion conversion;
  const std::size_t count = read.weight_files.size();
  for (std::size_t rank = 0; rank < count; ++rank) {
    const int verdict = ConvertShard(input, read.weight_files[rank], rank, count, shown_out,
                                     output_dir, inputs, &conversion);
    if (verdict != kExitOk) return verdict;
  }
  // Several shards get Hugging Face's index: total_size in its convention,
  // the tensors' data bytes (docs/model_dir.md 3 step 8).
  if (count > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", conversion.tensor_bytes}}},
                                  {"weight_map", conversion.weight_map}};
    if (!WriteFileAtomic(output_dir.PathOf(std::string(kIndexName)), index.dump(2) + "\n", inputs,
                         &error)) {
      return IoError(kVerb, error);
    }
  }
  for (const std::string& name : read.config_files) {
    for (const qd::DirEntry& e : input.Listing().entries) {
      if (e.name != name) continue;
      const std::string_view bytes(reinterpret_cast<const char*>(e.bytes.data), e.bytes.size);
      if (!WriteFileAtomic(output_dir.PathOf(ConvertedConfigName(name)), bytes, inputs, &error)) {
        return IoError(kVerb, error);
      }
    }
  }

  const int verdict = VerifyDirAsCheckWould(output_dir, shown_out);
  if (verdict != kExitOk) return verdict;
  if (!output_dir.Commit(&error)) return IoError(kVerb, error);
  std::fprintf(stderr,
               "quantdiff convert: %s [pt, %zu weight file%s] -> %s [safetensors, %zu shard%s%s, "
               "%zu config%s]: %zu tensors (%llu bytes) verbatim, %zu metadata entries\n",
               Shown(dir).c_str(), count, count == 1 ? "" : "s", Shown(shown_out).c_str(), count,
               count == 1 ? "" : "s", count > 1 ? " and its index" : "", read.config_files.size(),
               read.config_files.size() == 1 ? "" : "s", conversion.tensors,
               static_cast<unsigned long long>(conversion.tensor_bytes), conversion.metadata);
  return kExitOk;
}

}  // namespace qd::cli
