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
#include "cli/embedded_files.h"
#include "cli/vector_bundle.h"
#include "cli/vector_set.h"
#include "generators/generators.h"
#include "reports/escape.h"
#include "reports/report.h"
#include "reports/rules.h"

namespace qd::cli {

extern const std::string_view kExportVectorsHelp =
    "usage: quantdiff export-vectors [--out DIR] [--count N] [--seed S] [--format NAME]\n"
    "       quantdiff export-vectors --gzip --out BUNDLE.tar.gz [--count N] [--seed S] [--format NAME]\n"
    "\n"
    "Writes portable test vectors in the shape of Wycheproof's: for every format\n"
    "DIR/<format>.json lists test groups (valid instances, one group per rule the\n"
    "generators can break, then the format's upstream findings) of tests {tcId,\n"
    "comment, file, result, flags, crc32, sha256, size, ...}, and\n"
    "DIR/<format>/<tcId>.safetensors (.pt, .gguf by format) holds each test's bytes.\n"
    "A test whose file comes with config files (GPTQ) is written as\n"
    "DIR/<format>/<tcId>/STEM.safetensors beside them, named so that config\n"
    "discovery there finds exactly them (docs/gptq.md section 1), listed under\n"
    "configs. The model directories (docs/model_dir.md, format model_dir) are\n"
    "folders DIR/model_dir/<tcId>/ whose entries the test lists (a subdirectory\n"
    "holds a file 'placeholder'; a link out of the folder points at\n"
    "DIR/model_dir/<tcId>.outside), with no crc32, sha256 or size of their own.\n"
    "result and flags are the ORACLE's reading of the file, never the\n"
    "codec's: \"valid\" (accepted, no finding), \"acceptable\" (accepted with\n"
    "warnings) or \"invalid\" (refused); flags are the rule IDs it reported. A valid\n"
    "or acceptable test carries expectedOutput: DIR/<format>/<tcId>.expected.safetensors,\n"
    "exactly the F32 safetensors `quantdiff decode` writes for it (the oracle's\n"
    "tensors), with its SHA-256, or decodeRefusal where decode refuses it (REC-001).\n"
    "notes explains every flag (bugType, description, effect); DIR/schema.json is\n"
    "the JSON Schema of the vector files. The same seed writes the same bytes, so\n"
    "the vectors can be committed and diffed.\n"
    "\n"
    "  --out DIR      output directory (default corpus/vectors). An earlier\n"
    "                 export's files there (those its FORMAT.json lists) are\n"
    "                 replaced; any other file in the way stops the export\n"
    "  --gzip         write the export as one gzip-compressed tar file, --out\n"
    "                 (required), instead of a folder: `tar -xzf` gives the folder\n"
    "  --count N      tests per group (default 4)\n"
    "  --seed S       generator seed (default 1)\n"
    "  --pt-shape torch-1.13  the pt files as torch 1.13's torch.save writes a state\n"
    "                 dict (test-impl --help; needs --out)\n"
    "  --format NAME  only this format; NAME is one of\n"
    "                 {formats}, model_dir\n"
    "\n"
    "exit: 0 written, 2 usage error or unwritable DIR\n";

namespace {

using Json = nlohmann::ordered_json;

// The schema every FORMAT.json of an export follows, written beside them.
constexpr std::string_view kSchemaName = "schema.json";
constexpr std::string_view kSchemaSource = "cli/vectors.schema.json";

struct FormatResult {
  std::uint64_t tests = 0;
  std::uint64_t relabelled = 0;  // the oracle reported another rule than targeted
};

// A file of the export, relative to its folder; FORMAT.json is the last of
// a format's files.
using ExportFile = BundleMember;

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
// that: the files (configs and expected outputs) its FORMAT.json names, then
// their tcId folders if they are left empty. A FORMAT.json that quantdiff did
// not write stops the export (exit 2): nothing of someone else's is replaced
// or removed.
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
    const std::filesystem::file_status status = std::filesystem::symlink_status(p, ignored);
    // A file, or a directory vector's link out of its folder (never followed).
    if (std::filesystem::is_regular_file(status) || std::filesystem::is_symlink(status)) {
      std::filesystem::remove(p, ignored);
    }
    // Its folders up to FORMAT/ (a directory vector's subdirectory sits in
    // the vector's folder).
    for (std::filesystem::path up = p.parent_path(); up != out_dir / format && up.has_relative_path();
         up = up.parent_path()) {
      folders.insert(up);
    }
  };
  for (const Json& group : doc["testGroups"]) {
    if (!group.is_object() || !group.contains("tests") || !group["tests"].is_array()) continue;
    for (const Json& test : group["tests"]) {
      if (!test.is_object()) continue;
      if (test.contains("file")) remove_listed(test["file"]);
      if (test.contains("configs") && test["configs"].is_array()) {
        for (const Json& c : test["configs"]) remove_listed(c);
      }
      if (test.contains("entries") && test["entries"].is_array()) {
        for (const Json& e : test["entries"]) {
          if (e.is_object() && e.contains("path")) remove_listed(e["path"]);
        }
      }
      if (test.contains("outside")) remove_listed(test["outside"]);
      if (test.contains("expectedOutput") && test["expectedOutput"].is_object() &&
          test["expectedOutput"].contains("file")) {
        remove_listed(test["expectedOutput"]["file"]);
      }
    }
  }
  // Deepest first (a set sorts a folder before what it holds).
  for (auto folder = folders.rbegin(); folder != folders.rend(); ++folder) {
    ::rmdir(folder->c_str());  // only when empty: anything else stays
  }
  return true;
}

// Wycheproof's notes: what a flag means, which kind of bug a reader that
// fails the test has (bugType), and what that bug does (effect). A rule's
// description is the catalogue's text (and decision); its bugType follows
// from its severity: an error rule a reader does not check, a warning a
// reader must tolerate, a decode refusal (REC-001) a reader must not decode
// past.
Json RuleNote(const std::string& id) {
  const qd::reports::RuleInfo* info = qd::reports::FindRule(id);
  Json note = Json::object();
  if (info == nullptr) {
    note["bugType"] = "MISSING_CHECK";
    note["description"] = "not in the rule catalogue";
    note["effect"] = "unknown";
    return note;
  }
  std::string description = info->text;
  if (!info->decision.empty()) description += " Decision: " + info->decision;
  const std::string severity(qd::reports::SeverityName(info->severity));
  if (!qd::reports::IsErrorRule(*info)) {
    note["bugType"] = "EDGE_CASE";
    note["effect"] =
        "The file is valid: a reader must accept it and decode the expected output; reporting "
        "this warning is optional. A reader that refuses it rejects a file the format allows.";
  } else if (info->family == "recognised" && id == "REC-001") {
    note["bugType"] = "UNDEFINED_DECODE";
    note["effect"] =
        "The spec does not fix this family's arithmetic bit by bit: a reader that decodes it "
        "writes values nobody can check; `quantdiff decode` refuses it (decodeRefusal).";
  } else {
    note["bugType"] = "MISSING_CHECK";
    note["effect"] =
        "A reader that accepts the file skips a " + severity +
        " check: it reads bytes the format gives no meaning (out-of-bounds or overlapping "
        "reads, values taken from the wrong bytes, or a crash) or decodes a model other than "
        "the one written. A conforming reader refuses it, naming " + id + ".";
  }
  note["description"] = description;
  note["source"] = info->source + ", " + info->section;
  // The keys in one order whatever branch set them.
  return Json{{"bugType", note["bugType"]}, {"description", note["description"]},
              {"effect", note["effect"]}, {"source", note["source"]}};
}

Json VariantNote(const qd::harness::VariantFlag& variant) {
  return Json{{"bugType", "KNOWN_VARIANT"},
              {"description", variant.note},
              {"effect",
               "A reader that follows this documented upstream variant decodes other values at "
               "the places the description names, without being wrong by its upstream; the "
               "expected output follows the contract."}};
}

Json UpstreamNote(const qd::harness::VariantFlag& upstream) {
  return Json{{"bugType", "KNOWN_UPSTREAM_BUG"},
              {"description", upstream.note},
              {"effect",
               "A reader with the same mistake as the upstream reader fails this test; the "
               "expected result is the contract's (result, flags, expectedOutput)."}};
}

// TEST[KEY] = the flags of FLAGS, each explained in NOTES by NOTE_OF; no
// key for none.
void PutNamedFlags(const std::vector<qd::harness::VariantFlag>& flags, const char* key,
                   Json (*note_of)(const qd::harness::VariantFlag&), Json* test,
                   std::map<std::string, Json>* notes) {
  if (flags.empty()) return;
  Json names = Json::array();
  for (const qd::harness::VariantFlag& flag : flags) {
    names.push_back(flag.flag);
    (*notes)[flag.flag] = note_of(flag);
  }
  (*test)[key] = std::move(names);
}

// A directory vector's entries as its test lists them: name, kind and the
// path written for it (cli/vector_set.h FilesOf), with a regular entry's
// size and SHA-256 and a link's target.
Json EntriesJson(const TestVector& v) {
  Json entries = Json::array();
  for (const qd::gen::GeneratedDirFile& e : v.dir_entries) {
    Json entry = Json::object();
    entry["name"] = qd::reports::ValidUtf8(e.name);
    const std::string path = v.file + "/" + e.name;
    switch (e.kind) {
      case qd::DirEntryKind::kRegular:
        entry["kind"] = "regular";
        entry["path"] = path;
        entry["size"] = e.bytes.size();
        entry["sha256"] = Sha256Hex(e.bytes.data(), e.bytes.size());
        break;
      case qd::DirEntryKind::kOther:
        entry["kind"] = "other";
        entry["path"] = path + "/placeholder";
        break;
      case qd::DirEntryKind::kEscaping:
        entry["kind"] = "escaping";
        entry["path"] = path;
        entry["target"] = "../" + std::to_string(v.tc_id) + ".outside";
        break;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// The test object of V (its files appended to FILES) and the flags it names.
// FORMAT is V's format (null for a directory vector).
Json TestJson(const qd::harness::FormatEntry* format, const TestVector& v,
              std::vector<ExportFile>* files, std::map<std::string, Json>* notes) {
  Json test = Json::object();
  test["tcId"] = v.tc_id;
  test["comment"] = qd::reports::ValidUtf8(v.comment);
  test["file"] = v.file;
  const std::vector<BundleMember> written = FilesOf(v);
  files->insert(files->end(), written.begin(), written.end());
  if (v.directory) {
    test["entries"] = EntriesJson(v);
    if (!written.empty() && written.front().path.ends_with(".outside")) test["outside"] = written.front().path;
  }
  if (!v.side_files.empty()) {
    Json configs = Json::array();
    for (const qd::SideFile& side : v.side_files) configs.push_back(side.name);
    test["configs"] = std::move(configs);
  }
  test["result"] = ResultOf(v.oracle);
  Json flags = Json::array();
  for (const qd::Finding& f : v.oracle.findings) {
    flags.push_back(qd::reports::ValidUtf8(f.rule));
    (*notes)[qd::reports::ValidUtf8(f.rule)] = RuleNote(f.rule);
  }
  test["flags"] = std::move(flags);
  PutNamedFlags(v.variants, "variantFlags", VariantNote, &test, notes);
  PutNamedFlags(v.upstream, "upstreamFlags", UpstreamNote, &test, notes);
  if (!v.directory) {
    test["crc32"] = Crc32Hex(v.bytes.data(), v.bytes.size());
    test["sha256"] = Sha256Hex(v.bytes.data(), v.bytes.size());
    test["size"] = v.bytes.size();
  }
  if (!v.oracle.refused) {
    // What `quantdiff decode` writes for it: the oracle's tensors as the
    // decode writer lays them out, or decode's refusal.
    const Expectation want = VectorExpectation(format, v);
    if (!want.refusal_rule.empty()) {
      test["decodeRefusal"] = want.refusal_rule;
      (*notes)[want.refusal_rule] = RuleNote(want.refusal_rule);
    } else {
      const std::string id = std::to_string(v.tc_id);
      const std::string expected = std::string(want.reader) + "/" + id + ".expected.safetensors";
      const auto* data = reinterpret_cast<const std::uint8_t*>(want.decoded_file.data());
      test["expectedOutput"] = Json{{"file", expected},
                                    {"size", want.decoded_file.size()},
                                    {"sha256", Sha256Hex(data, want.decoded_file.size())}};
      files->push_back({expected, want.decoded_file});
    }
  }
  return test;
}

// Every file of FORMAT's export, FORMAT.json last; FORMAT null: the
// directory vectors (model_dir).
bool BuildFormatExport(const qd::harness::FormatEntry* format, std::uint64_t count,
                       std::uint64_t seed, std::vector<ExportFile>* files, FormatResult* result,
                       std::string* error) {
  const std::string name(format != nullptr ? format->name : DirVectorFormat());
  std::vector<TestVector> vectors;
  if (format != nullptr ? !BuildVectors(*format, count, seed, &vectors, error)
                        : !BuildDirVectors(count, seed, &vectors, error)) {
    return false;
  }

  std::map<std::string, Json> notes;  // sorted by flag
  Json test_groups = Json::array();
  for (std::size_t first = 0; first < vectors.size();) {
    const std::string& rule = vectors[first].rule;
    const bool upstream = !vectors[first].upstream.empty();
    Json tests = Json::array();
    std::size_t i = first;
    for (; i < vectors.size() && vectors[i].rule == rule && vectors[i].upstream.empty() == !upstream;
         ++i) {
      if (vectors[i].relabelled) ++result->relabelled;
      tests.push_back(TestJson(format, vectors[i], files, &notes));
    }
    first = i;
    Json group = Json::object();
    group["rule"] = rule.empty() ? Json(nullptr) : Json(rule);
    group["type"] = upstream ? "UpstreamFinding" : rule.empty() ? "ValidFile" : "RuleViolation";
    if (const qd::reports::RuleInfo* info = qd::reports::FindRule(rule)) {
      group["severity"] = std::string(qd::reports::SeverityName(info->severity));
    }
    group["tests"] = std::move(tests);
    test_groups.push_back(std::move(group));
  }

  Json doc = Json::object();
  doc["algorithm"] = name;
  doc["schema"] = std::string(kSchemaName);
  doc["generatorVersion"] = "quantdiff " + std::string(qd::reports::ToolVersion());
  doc["numberOfTests"] = vectors.size();
  doc["header"] = Json::array(
      {"Generated by quantdiff export-vectors --seed " + std::to_string(seed) + " --count " +
           std::to_string(count) + ".",
       "result and flags are the reference oracle's reading of each file; a reader conforms "
       "when it refuses every invalid file with the first flag that is an error rule, and "
       "accepts every valid and acceptable one.",
       "A valid or acceptable test's expectedOutput is the F32 safetensors file `quantdiff "
       "decode` writes for it (the oracle's tensors); a conforming decoder's output holds the "
       "same tensors bit for bit. decodeRefusal names the rule decode refuses it with instead.",
       "Paths are relative to this JSON file's folder; crc32 is zlib's CRC-32 and sha256 the "
       "SHA-256 of the file's bytes.",
       "variantFlags name documented upstream variants that apply to a valid file, upstreamFlags "
       "what a known upstream reader does with an upstream finding (see notes): a reader that "
       "follows a variant differs from the vector there without being wrong."});
  Json notes_json = Json::object();
  for (auto& [flag, note] : notes) notes_json[flag] = std::move(note);
  doc["notes"] = std::move(notes_json);
  doc["testGroups"] = std::move(test_groups);
  result->tests = vectors.size();
  files->push_back({name + ".json", doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"});
  return true;
}

std::string SchemaText() {
  const EmbeddedFile* schema = FindEmbeddedFile(kSchemaSource);
  return schema == nullptr ? std::string()
                           : std::string(reinterpret_cast<const char*>(schema->data), schema->size);
}

// Writes FORMAT's files into OUT_DIR after removing its earlier export
// there; FORMAT.json (the last file) replaces the earlier one.
bool WriteFormatFolder(const std::filesystem::path& out_dir, const std::string& format,
                       const std::vector<ExportFile>& files, std::string* error) {
  if (!RemoveEarlierExport(out_dir, format, error)) return false;
  for (std::size_t i = 0; i + 1 < files.size(); ++i) {
    // A file already there is not ours (the earlier export's are gone by now).
    if (!WriteNewMember(out_dir, files[i], error)) return false;
  }
  return WriteFileAtomic((out_dir / files.back().path).string(), files.back().bytes, {}, error);
}

// schema.json beside the vector files, replacing only an earlier export's
// (a JSON Schema whose $id is quantdiff's).
bool WriteSchema(const std::filesystem::path& out_dir, const std::string& schema,
                 std::string* error) {
  const std::filesystem::path path = out_dir / kSchemaName;
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    std::ifstream in(path, std::ios::binary);
    const Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
    const bool ours = doc.is_object() && doc.contains("$id") && doc["$id"].is_string() &&
                      doc["$id"].get<std::string>().find("quantdiff") != std::string::npos;
    if (!ours) {
      *error = "refusing to replace " + path.string() +
               ": it was not written by quantdiff export-vectors (choose another --out)";
      return false;
    }
  }
  return WriteFileAtomic(path.string(), schema, {}, error);
}

// A format's name; the directory vectors' for null.
std::string_view FormatName(const qd::harness::FormatEntry* f) { return f != nullptr ? f->name : DirVectorFormat(); }

void PrintExported(const std::string& where, std::string_view format, const FormatResult& result) {
  std::printf("%s/%.*s.json: %llu tests\n", qd::reports::ForTerminal(where).c_str(),
              static_cast<int>(format.size()), format.data(),
              static_cast<unsigned long long>(result.tests));
  if (result.relabelled > 0) {
    std::fprintf(stderr,
                 "quantdiff export-vectors: %llu %.*s tests are not read by the oracle as "
                 "generated (see their comments)\n",
                 static_cast<unsigned long long>(result.relabelled),
                 static_cast<int>(format.size()), format.data());
  }
}

}  // namespace

int RunExportVectors(const std::vector<std::string>& argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argv, {{"out", true}, {"count", true}, {"seed", true}, {"format", true},
                        {"gzip", false}, {"pt-shape", true}},
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
  // The formats, then the model directories (null: the directory vectors).
  std::vector<const qd::harness::FormatEntry*> formats;
  if (auto name = args.Get("format"); name && *name == DirVectorFormat()) {
    formats.push_back(nullptr);
  } else if (name) {
    const qd::harness::FormatEntry* f = FormatByName(*name, &error);
    if (f == nullptr) return UsageError("export-vectors", error);
    formats.push_back(f);
  } else {
    for (const qd::harness::FormatEntry& f : qd::harness::Formats()) formats.push_back(&f);
    formats.push_back(nullptr);
  }
  if (auto shape = args.Get("pt-shape")) {
    if (*shape != "torch-1.13" && *shape != "default") {
      return UsageError("export-vectors", "--pt-shape takes torch-1.13 or default, got '" + *shape + "'");
    }
    // The committed corpus/vectors are the default shape: another goes elsewhere.
    if (*shape == "torch-1.13" && !args.Get("out")) return UsageError("export-vectors", "--pt-shape torch-1.13 needs --out");
    qd::gen::SetPtTorch113Shape(*shape == "torch-1.13");
  }
  const bool gzip = args.Has("gzip");
  if (gzip && !args.Get("out")) return UsageError("export-vectors", "--gzip needs --out BUNDLE.tar.gz");
  const std::string out = args.Get("out").value_or("corpus/vectors");
  if (out.empty()) return UsageError("export-vectors", "--out needs a name");
  const std::string schema = SchemaText();
  if (schema.empty()) return IoError("export-vectors", "the vectors' JSON Schema was not built in");

  if (gzip) {
    std::vector<ExportFile> members = {{std::string(kSchemaName), schema}};
    for (const qd::harness::FormatEntry* f : formats) {
      FormatResult result;
      if (!BuildFormatExport(f, count, seed, &members, &result, &error)) {
        return IoError("export-vectors", error);
      }
      PrintExported(out, FormatName(f), result);
    }
    std::string bundle;
    if (!GzipTarBundle(members, &bundle, &error) || !WriteOutput(out, bundle, {}, &error)) {
      return IoError("export-vectors", error);
    }
    return kExitOk;
  }
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !std::filesystem::is_directory(out)) {
    return IoError("export-vectors", "cannot create " + out + ": " +
                                         (ec ? ec.message() : std::string("not a directory")));
  }
  if (!WriteSchema(out, schema, &error)) return IoError("export-vectors", error);
  for (const qd::harness::FormatEntry* f : formats) {
    FormatResult result;
    std::vector<ExportFile> files;
    if (!BuildFormatExport(f, count, seed, &files, &result, &error) ||
        !WriteFormatFolder(out, std::string(FormatName(f)), files, &error)) {
      return IoError("export-vectors", error);
    }
    PrintExported(out, FormatName(f), result);
  }
  return kExitOk;
}

}  // namespace qd::cli
