// model_dir_input.cc: docs/model_dir.md section 1, gathered from the file
// system. The kinds are facts of the file system, decided once here so both
// readers judge the same listing.
#include "cli/model_dir_input.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>

#include "reports/escape.h"

namespace qd::cli {
namespace {

namespace fs = std::filesystem;


// True when the canonical PATH lies below the canonical directory ROOT.
bool Inside(const fs::path& path, const fs::path& root) {
  const std::string p = path.string();
  const std::string r = root.string() + "/";
  return p.compare(0, r.size(), r) == 0;
}

qd::DirEntryKind KindOf(const fs::directory_entry& entry, const fs::path& root) {
  std::error_code ec;
  const fs::file_status own = entry.symlink_status(ec);
  if (ec) return qd::DirEntryKind::kOther;
  if (!fs::is_symlink(own)) {
    return fs::is_regular_file(own) ? qd::DirEntryKind::kRegular : qd::DirEntryKind::kOther;
  }
  const fs::path target = fs::canonical(entry.path(), ec);
  if (ec) return qd::DirEntryKind::kOther;  // dangling, or a loop
  if (!Inside(target, root)) return qd::DirEntryKind::kEscaping;
  return fs::is_regular_file(target, ec) ? qd::DirEntryKind::kRegular : qd::DirEntryKind::kOther;
}

bool IsConfigName(const std::string& name) {
  return name == "config.json" || name == "quantize_config.json" || name == "quant_config.json" ||
         name.ends_with(".quantize_config.json");
}

}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool OpenModelDir(const std::string& dir, ModelDirInput* input, std::string* error) {
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) {
    *error = dir + ": " + ec.message();
    return false;
  }
  qd::ModelDirListing& listing = input->listing_;
  listing.dir = dir;
  listing.prefix = dir.ends_with("/") ? dir : dir + "/";
  fs::directory_iterator it(root, ec);
  if (ec) {
    *error = dir + ": " + ec.message();
    return false;
  }
  for (const fs::directory_entry& entry : it) {
    listing.entries.push_back({entry.path().filename().string(), KindOf(entry, root), {}});
  }
  std::sort(listing.entries.begin(), listing.entries.end(),
            [](const qd::DirEntry& a, const qd::DirEntry& b) { return a.name < b.name; });
  for (qd::DirEntry& e : listing.entries) {
    const bool read = e.name.ends_with(".safetensors") || e.name.ends_with(".bin") ||
                      e.name.ends_with(".json");
    if (e.kind != qd::DirEntryKind::kRegular || !read) continue;
    const std::string path = listing.prefix + e.name;
    auto file = std::make_unique<InputFile>();
    if (!OpenInput(path, file.get(), error)) return false;
    e.bytes = file->View();
    const std::uint64_t limit = e.name.ends_with(".index.json") ? kMaxIndexBytes
                                : IsConfigName(e.name)          ? kMaxSideFileBytes
                                                                : UINT64_MAX;
    if (e.bytes.size > limit) {
      *error = path + ": " + std::to_string(e.bytes.size) + " bytes is too large for " +
               (limit == kMaxIndexBytes ? "an index" : "a config file") + " (at most " +
               std::to_string(limit) + ")";
      return false;
    }
    input->files_.push_back(std::move(file));
  }
  return true;
}

void AppendEntryPaths(const ModelDirInput& dir, std::vector<std::string>* inputs) {
  for (const qd::DirEntry& e : dir.Listing().entries) inputs->push_back(dir.Listing().prefix + e.name);
}

bool OpenModelDirForReport(std::string_view verb, const std::string& path, bool format_forced,
                           ModelDirInput* dir, std::vector<std::string>* inputs) {
  if (format_forced) {
    IoError(verb, path + ": --format applies to files; a directory's format is detected");
    return false;
  }
  std::string error;
  if (!OpenModelDir(path, dir, &error)) {
    IoError(verb, "cannot read " + error);
    return false;
  }
  AppendEntryPaths(*dir, inputs);
  return true;
}

std::string ModelDirNote(const qd::codec::ModelDirRead& read) {
  std::string note = !read.indexed     ? std::string("1 weight file")
                     : read.shards == 1 ? std::string("1 shard")
                                        : std::to_string(read.shards) + " shards";
  if (!read.total_size_convention.empty()) {
    note += ", total_size counts " + read.total_size_convention;
  }
  return note;
}

bool ParseDirRun(const Args& args, DirRun* run, std::string* error) {
  // The cores by default (hardware_concurrency may not know: then 1).
  run->jobs = std::max(1u, std::thread::hardware_concurrency());
  if (const std::optional<std::string> text = args.Get("jobs")) {
    std::uint64_t n = 0;
    if (!ParseUint(*text, &n) || n == 0 || n > 1024) {
      *error = "--jobs takes a number of threads from 1 to 1024";
      return false;
    }
    run->jobs = static_cast<unsigned>(n);
  }
  run->progress_where = args.Has("quiet") ? ProgressLine::kNowhere : ProgressLine::kTerminalOnly;
  return true;
}

qd::codec::ModelDirOptions DirReadOptions(std::string_view verb, const std::string& path,
                                          const DirRun& run, ProgressLine* progress,
                                          const std::string& after) {
  qd::codec::ModelDirOptions options;
  options.jobs = run.jobs;
  const std::string shown = std::string(verb) + " " + qd::reports::ForTerminal(path) + ": ";
  options.progress = [progress, shown, after](std::size_t done, std::size_t total,
                                              const std::string& shard) {
    progress->Show(shown + std::to_string(done) + "/" + std::to_string(total) + " shards" +
                       (done < total ? " (" + qd::reports::ForTerminal(shard) + ")" : ", " + after),
                   false);
  };
  return options;
}

}  // namespace qd::cli
