// quantdiff export-vectors: Wycheproof-like test vectors per format.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/vector_set.h"
#include "reports/escape.h"
#include "reports/report.h"
#include "reports/rules.h"

namespace qd::cli {

extern const std::string_view kExportVectorsHelp =
    "usage: quantdiff export-vectors [--out DIR] [--count N] [--seed S] [--format NAME]\n"
    "\n"
    "Writes portable test vectors in the shape of Wycheproof's: for every format\n"
    "DIR/<format>.json lists test groups (valid instances, then one group per\n"
    "rule the generators can break) of tests {tcId, comment, file, result,\n"
    "flags, crc32, size}, and DIR/<format>/<tcId>.safetensors (.pt for torch\n"
    "files) holds each test's bytes. A test whose file comes with config files\n"
    "(GPTQ) is written as DIR/<format>/<tcId>/STEM.safetensors beside them, named\n"
    "so that config discovery there finds exactly them (docs/gptq.md section 1),\n"
    "listed under configs. result and flags are the ORACLE's reading of the\n"
    "file, never the codec's: \"valid\" (accepted, no finding), \"acceptable\" (accepted with\n"
    "warnings) or \"invalid\" (refused); flags are the rule IDs it reported, and\n"
    "notes maps each flag to the catalogue's text. The same seed writes the same\n"
    "bytes, so the vectors can be committed and diffed.\n"
    "\n"
    "  --out DIR      output directory (default corpus/vectors). An earlier\n"
    "                 export's files there (those its FORMAT.json lists) are\n"
    "                 replaced; any other file in the way stops the export\n"
    "  --count N      tests per group (default 4)\n"
    "  --seed S       generator seed (default 1)\n"
    "  --format NAME  only this format (rbq, bnb, recognised, gptq, pt, safetensors)\n"
    "\n"
    "exit: 0 written, 2 usage error or unwritable DIR\n";

namespace {

using Json = nlohmann::ordered_json;

struct FormatResult {
  std::uint64_t tests = 0;
  std::uint64_t relabelled = 0;  // the oracle reported another rule than targeted
};

// A path an earlier export's JSON may name: relative, under FORMAT/, with no
// "." or ".." step, so a crafted JSON cannot point the removal elsewhere.
bool IsOwnVectorPath(const std::string& relative, const std::string& format) {
  if (relative.rfind(format + "/", 0) != 0) return false;
  for (const auto& part : std::filesystem::path(relative)) {
    if (part == "." || part == ".." || part.empty()) return false;
  }
  return true;
}

// Removes what the earlier export in DIR wrote for this format, and only
// that: the files (and configs) its FORMAT.json names, then their tcId
// folders if they are left empty. A FORMAT.json that quantdiff did not write
// stops the export (exit 2): nothing of someone else's is replaced or removed.
bool RemoveEarlierExport(const std::filesystem::path& out_dir, const std::string& format,
                         std::string* error) {
  const std::filesystem::path json_path = out_dir / (format + ".json");
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(json_path, ec))) return true;
  std::ifstream in(json_path, std::ios::binary);
  const Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  const bool ours = doc.is_object() && doc.contains("generatorVersion") &&
                    doc["generatorVersion"].is_string() &&
                    doc["generatorVersion"].get<std::string>().rfind("quantdiff ", 0) == 0 &&
                    doc.contains("testGroups") && doc["testGroups"].is_array();
  if (!ours) {
    *error = "refusing to replace " + json_path.string() +
             ": it was not written by quantdiff export-vectors (choose another --out)";
    return false;
  }
  std::set<std::filesystem::path> folders;
  auto remove_listed = [&](const Json& name) {
    if (!name.is_string() || !IsOwnVectorPath(name.get<std::string>(), format)) return;
    const std::filesystem::path p = out_dir / name.get<std::string>();
    std::error_code ignored;
    if (std::filesystem::is_regular_file(std::filesystem::symlink_status(p, ignored))) {
      std::filesystem::remove(p, ignored);
    }
    if (p.parent_path() != out_dir / format) folders.insert(p.parent_path());
  };
  for (const Json& group : doc["testGroups"]) {
    if (!group.is_object() || !group.contains("tests") || !group["tests"].is_array()) continue;
    for (const Json& test : group["tests"]) {
      if (!test.is_object()) continue;
      if (test.contains("file")) remove_listed(test["file"]);
      if (test.contains("configs") && test["configs"].is_array()) {
        for (const Json& c : test["configs"]) remove_listed(c);
      }
    }
  }
  for (const std::filesystem::path& folder : folders) {
    ::rmdir(folder.c_str());  // only when empty: anything else stays
  }
  return true;
}

// Writes one vector file; a file already at PATH is not ours (the earlier
// export's files are gone by now) and is never replaced.
bool WriteNewVectorFile(const std::filesystem::path& path, const std::uint8_t* data,
                        std::size_t size, std::string* error) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    *error = "refusing to replace " + path.string() +
             ": it exists and is not listed by the earlier export's JSON";
    return false;
  }
  return WriteFileAtomic(path.string(), {reinterpret_cast<const char*>(data), size}, {}, error);
}

bool ExportFormat(const qd::harness::FormatEntry& format, const std::string& out_dir,
                  std::uint64_t count, std::uint64_t seed, FormatResult* result,
                  std::string* error) {
  const std::string name(format.name);
  const std::filesystem::path files_dir = std::filesystem::path(out_dir) / name;
  std::error_code ec;
  std::filesystem::create_directories(files_dir, ec);
  if (ec) {
    *error = "cannot create " + files_dir.string() + ": " + ec.message();
    return false;
  }
  if (!RemoveEarlierExport(out_dir, name, error)) return false;
  std::vector<TestVector> vectors;
  if (!BuildVectors(format, count, seed, &vectors, error)) return false;

  std::set<std::string> flags_used;
  Json variant_notes = Json::object();  // variant flag -> what the variant is
  Json test_groups = Json::array();
  for (std::size_t first = 0; first < vectors.size();) {
    const std::string& rule = vectors[first].rule;
    Json tests = Json::array();
    std::size_t i = first;
    for (; i < vectors.size() && vectors[i].rule == rule; ++i) {
      const TestVector& v = vectors[i];
      Json configs = Json::array();
      if (!v.side_files.empty()) {
        const std::filesystem::path folder = (std::filesystem::path(out_dir) / v.file).parent_path();
        std::filesystem::create_directories(folder, ec);
        if (ec) {
          *error = "cannot create " + folder.string() + ": " + ec.message();
          return false;
        }
      }
      for (const qd::SideFile& side : v.side_files) {
        configs.push_back(side.name);
        if (!WriteNewVectorFile(std::filesystem::path(out_dir) / side.name, side.bytes.data(),
                                side.bytes.size(), error)) {
          return false;
        }
      }
      Json flags = Json::array();
      for (const qd::Finding& f : v.oracle.findings) {
        flags.push_back(qd::reports::ValidUtf8(f.rule));
        flags_used.insert(f.rule);
      }
      if (v.relabelled) ++result->relabelled;
      if (!WriteNewVectorFile(std::filesystem::path(out_dir) / v.file, v.bytes.data(),
                              v.bytes.size(), error)) {
        return false;
      }
      Json test = Json::object();
      test["tcId"] = v.tc_id;
      test["comment"] = qd::reports::ValidUtf8(v.comment);
      test["file"] = v.file;
      if (!configs.empty()) test["configs"] = std::move(configs);
      test["result"] = ResultOf(v.oracle);
      test["flags"] = std::move(flags);
      if (!v.variants.empty()) {
        Json variants = Json::array();
        for (const qd::harness::VariantFlag& variant : v.variants) {
          variants.push_back(variant.flag);
          variant_notes[variant.flag] = variant.note;
        }
        test["variantFlags"] = std::move(variants);
      }
      test["crc32"] = Crc32Hex(v.bytes.data(), v.bytes.size());
      test["size"] = v.bytes.size();
      tests.push_back(std::move(test));
    }
    first = i;
    Json group = Json::object();
    group["rule"] = rule.empty() ? Json(nullptr) : Json(rule);
    group["type"] = rule.empty() ? "ValidFile" : "RuleViolation";
    if (const qd::reports::RuleInfo* info = qd::reports::FindRule(rule)) {
      group["severity"] = std::string(qd::reports::SeverityName(info->severity));
    }
    group["tests"] = std::move(tests);
    test_groups.push_back(std::move(group));
  }
  const std::uint64_t tc_id = vectors.size();

  Json notes = Json::object();
  for (const std::string& flag : flags_used) {
    const qd::reports::RuleInfo* info = qd::reports::FindRule(flag);
    notes[qd::reports::ValidUtf8(flag)] = info ? info->text : "not in the rule catalogue";
  }
  Json doc = Json::object();
  doc["algorithm"] = name;
  doc["generatorVersion"] = "quantdiff " + std::string(qd::reports::ToolVersion());
  doc["numberOfTests"] = tc_id;
  doc["header"] = Json::array(
      {"Generated by quantdiff export-vectors --seed " + std::to_string(seed) + " --count " +
           std::to_string(count) + ".",
       "result and flags are the reference oracle's reading of each file; a reader conforms "
       "when it refuses every invalid file with the first flag that is an error rule, and "
       "accepts every valid and acceptable one.",
       "file is relative to this JSON file's folder; crc32 is zlib's CRC-32 of its bytes.",
       "variantFlags name documented upstream variants that apply to a valid file (see notes): "
       "a reader that follows such a variant differs from the vector there without being "
       "wrong."});
  for (const auto& [flag, note] : variant_notes.items()) notes[flag] = note;
  doc["notes"] = std::move(notes);
  doc["testGroups"] = std::move(test_groups);
  result->tests = tc_id;
  const std::string json = doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  return WriteFileAtomic((std::filesystem::path(out_dir) / (name + ".json")).string(), json, {},
                         error);
}

}  // namespace

int RunExportVectors(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"out", true}, {"count", true}, {"seed", true}, {"format", true}},
                 &args, &error)) {
    return UsageError("export-vectors", error);
  }
  if (!args.positional.empty()) {
    return UsageError("export-vectors", "takes no file arguments (got '" + args.positional[0] + "')");
  }
  std::uint64_t count = 4;
  if (auto s = args.Get("count"); s && (!ParseUint(*s, &count) || count == 0 || count > 100000)) {
    return UsageError("export-vectors", "--count needs an integer from 1 to 100000, got '" + *s + "'");
  }
  std::uint64_t seed = 1;
  if (auto s = args.Get("seed"); s && !ParseUint(*s, &seed)) {
    return UsageError("export-vectors", "--seed needs an unsigned 64-bit integer, got '" + *s + "'");
  }
  std::vector<const qd::harness::FormatEntry*> formats;
  if (auto name = args.Get("format")) {
    const qd::harness::FormatEntry* f = FormatByName(*name, &error);
    if (f == nullptr) return UsageError("export-vectors", error);
    formats.push_back(f);
  } else {
    for (const qd::harness::FormatEntry& f : qd::harness::Formats()) formats.push_back(&f);
  }
  const std::string out_dir = args.Get("out").value_or("corpus/vectors");
  if (out_dir.empty()) return UsageError("export-vectors", "--out needs a directory name");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir)) {
    return IoError("export-vectors", "cannot create " + out_dir + ": " +
                                         (ec ? ec.message() : std::string("not a directory")));
  }
  for (const qd::harness::FormatEntry* f : formats) {
    FormatResult result;
    if (!ExportFormat(*f, out_dir, count, seed, &result, &error)) {
      return IoError("export-vectors", error);
    }
    std::printf("%s/%.*s.json: %llu tests in %s/%.*s/\n", qd::reports::ForTerminal(out_dir).c_str(),
                static_cast<int>(f->name.size()), f->name.data(),
                static_cast<unsigned long long>(result.tests),
                qd::reports::ForTerminal(out_dir).c_str(), static_cast<int>(f->name.size()),
                f->name.data());
    if (result.relabelled > 0) {
      std::fprintf(stderr,
                   "quantdiff export-vectors: %llu %.*s tests are not read by the oracle as "
                   "generated (see their comments)\n",
                   static_cast<unsigned long long>(result.relabelled),
                   static_cast<int>(f->name.size()), f->name.data());
    }
  }
  return kExitOk;
}

}  // namespace qd::cli
