#include "cli/vector_set.h"

#include <filesystem>
#include <string_view>
#include <utility>

#include "cli/common.h"
#include "cli/decoded_output.h"
#include "cli/upstream_vectors.h"

namespace qd::cli {
namespace {

std::uint64_t Fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

Expectation DecodedExpectation(std::string_view reader, const qd::Outcome& oracle);

}  // namespace

std::string_view DirVectorFormat() { return qd::harness::ModelDirFormat().name; }

std::string ResultOf(const qd::Outcome& oracle) {
  if (oracle.refused) return "invalid";
  for (const qd::Finding& f : oracle.findings) {
    if (f.severity == qd::Severity::kWarning) return "acceptable";
  }
  return "valid";
}

std::string RefusingRule(const qd::Outcome& oracle) {
  if (!oracle.refused) return "";
  for (const qd::Finding& f : oracle.findings) {
    if (f.severity == qd::Severity::kError) return f.rule;
  }
  return "";
}

Expectation ExpectationOf(const qd::harness::FormatEntry& reader, const qd::Outcome& oracle,
                          const TestVector& v) {
  if (oracle.refused) return {RefusingRule(oracle), {}, {}, reader.name};
  if (reader.decode_refusal != nullptr) {
    const qd::Outcome refusal =
        reader.decode_refusal(qd::ByteView{v.bytes.data(), v.bytes.size()}, v.file, v.side_files);
    if (refusal.refused) return {RefusingRule(refusal), {}, {}, reader.name};
  }
  return DecodedExpectation(reader.name, oracle);
}

Expectation DirExpectationOf(const qd::Outcome& oracle) {
  if (oracle.refused) return {RefusingRule(oracle), {}, {}, DirVectorFormat()};
  return DecodedExpectation(DirVectorFormat(), oracle);
}

Expectation VectorExpectation(const qd::harness::FormatEntry* format, const TestVector& v) {
  return v.directory ? DirExpectationOf(v.oracle) : ExpectationOf(*format, v.oracle, v);
}

namespace {

// The file `quantdiff decode` writes from the accepted ORACLE's tensors: the
// same writer, fed the oracle's values in plan order; its refusal where a
// name cannot be written (ST-004..006).
Expectation DecodedExpectation(std::string_view reader, const qd::Outcome& oracle) {
  Expectation want{"", oracle.tensors, {}, reader};
  SafetensorsF32Sink sink(
      [&want](const void* data, std::size_t size) {
        want.decoded_file.append(static_cast<const char*>(data), size);
        return true;
      },
      "decoded.safetensors");
  std::vector<qd::TensorInfo> plan;
  for (const qd::DecodedTensor& t : oracle.tensors) plan.push_back({t.name, t.shape});
  if (!sink.Plan(plan)) return {sink.finding() ? sink.finding()->rule : "", {}, {}, reader};
  for (std::size_t i = 0; i < oracle.tensors.size(); ++i) {
    sink.Take({i, 0, oracle.tensors[i].values.data(), oracle.tensors[i].values.size()});
  }
  return want;
}

// V's comment (DESCRIPTION) and relabelled flag from the oracle's reading:
// as generated, a valid instance is accepted and a violation refused by its
// rule, or (a warning rule) accepted with it.
void Label(const std::string& rule, const std::string& description, TestVector* v) {
  bool as_generated = !v->oracle.refused;
  if (!rule.empty()) {
    as_generated = RefusingRule(v->oracle) == rule;
    for (const qd::Finding& f : v->oracle.findings) {
      if (!v->oracle.refused && f.rule == rule) as_generated = true;
    }
  }
  v->comment = description;
  if (!as_generated) {
    v->relabelled = true;
    v->comment += " (generated for " + (rule.empty() ? std::string("a valid file") : rule) +
                  "; the oracle reads it otherwise)";
  }
}

// Vector number TC_ID of FORMAT from G (built for RULE, "" valid): its file
// name in the export, its side files as config discovery beside that name
// finds them, and the oracle's reading. False with *error when the oracle
// throws (a bug of quantdiff, not of the file).
bool MakeVector(const qd::harness::FormatEntry& format, const std::string& rule,
                const qd::harness::Generated& g, std::uint64_t tc_id, TestVector* v,
                std::string* error) {
  const std::string name(format.name);
  v->tc_id = tc_id;
  v->rule = rule;
  // A file that comes with side files (a GPTQ config) gets a folder,
  // FORMAT/ID/, with the file and its configs under their own names
  // (config.json is read nested). The file is named so that config
  // discovery beside it (FindSideFiles) finds exactly those configs, and
  // the oracle is given them in discovery order: a reader that looks up
  // the folder as `quantdiff check` does reads what the oracle read.
  const std::string id = std::to_string(tc_id);
  if (g.side_files.empty()) {
    v->file = name + "/" + id + std::string(format.file_extension);
  } else {
    constexpr std::string_view kStemConfig = ".quantize_config.json";
    std::string stem = "model";
    for (const qd::SideFile& side : g.side_files) {
      const std::string base = std::filesystem::path(side.name).filename().string();
      if (base.size() > kStemConfig.size() &&
          base.compare(base.size() - kStemConfig.size(), kStemConfig.size(), kStemConfig) == 0) {
        stem = base.substr(0, base.size() - kStemConfig.size());
      }
    }
    v->file = name + "/" + id + "/" + stem + ".safetensors";
    for (const std::string& candidate : SideFileCandidates(v->file)) {
      for (const qd::SideFile& side : g.side_files) {
        if (name + "/" + id + "/" + std::filesystem::path(side.name).filename().string() == candidate) {
          v->side_files.push_back({candidate, side.bytes});
        }
      }
    }
  }
  v->bytes = g.bytes;
  std::string read_error;
  const std::optional<qd::Outcome> oracle =
      SafeRead(format.oracle_read, qd::ByteView{v->bytes.data(), v->bytes.size()}, v->file,
               v->side_files, &read_error);
  if (!oracle) {
    *error = name + " oracle failed on test " + id + ": " + read_error;
    return false;
  }
  v->oracle = *oracle;
  Label(rule, g.description, v);
  if (format.variants != nullptr && !v->oracle.refused) {
    v->variants = format.variants(qd::ByteView{v->bytes.data(), v->bytes.size()});
  }
  return true;
}

}  // namespace

bool BuildVectors(const qd::harness::FormatEntry& format, std::uint64_t count, std::uint64_t seed,
                  std::vector<TestVector>* out, std::string* error) {
  const std::string name(format.name);
  qd::harness::Rng rng(Mix(seed ^ Fnv1a(name)));
  std::vector<std::string> groups = {""};
  for (const std::string& r : format.violable_rules()) groups.push_back(r);

  const std::vector<qd::harness::Generated> fixed =
      format.fixed_instances != nullptr ? format.fixed_instances() : std::vector<qd::harness::Generated>{};
  std::uint64_t tc_id = 0;
  for (const std::string& rule : groups) {
    for (std::uint64_t k = 0; k < count; ++k) {
      const qd::harness::Generated g =
          rule.empty() ? format.generate_valid(rng) : format.generate_violation(rule, rng);
      TestVector v;
      if (!MakeVector(format, rule, g, ++tc_id, &v, error)) return false;
      out->push_back(std::move(v));
    }
    for (const qd::harness::Generated& g : fixed) {  // the format's fixed instances of this group
      if (g.expected_rule != rule) continue;
      TestVector v;
      if (!MakeVector(format, rule, g, ++tc_id, &v, error)) return false;
      out->push_back(std::move(v));
    }
  }
  // The upstream findings last, so the generated vectors keep their tcIds.
  for (const UpstreamVector& u : UpstreamVectors()) {
    if (u.format != format.name) continue;
    qd::harness::Generated g;
    g.bytes = u.Bytes();
    g.description = std::string(u.description);
    TestVector v;
    if (!MakeVector(format, std::string(u.rule), g, ++tc_id, &v, error)) return false;
    v.upstream.push_back({std::string(u.flag), std::string(u.upstream_does)});
    out->push_back(std::move(v));
  }
  return true;
}

namespace {

// Directory vector TC_ID from G (built for RULE, "" valid), read by the
// directory oracle as FilesOf lays it out. An empty directory gets a
// placeholder file (git keeps no empty folder): not a weight name, so the
// directory still holds no weight set (IDX-001, docs/model_dir.md 2).
bool MakeDirVector(const qd::harness::DirFormatEntry& format, const std::string& rule, qd::gen::GeneratedDir g,
                   std::uint64_t tc_id, TestVector* v, std::string* error) {
  v->tc_id = tc_id;
  v->rule = rule;
  v->directory = true;
  v->file = std::string(format.name) + "/" + std::to_string(tc_id);
  if (g.files.empty()) g.files.push_back({"placeholder", qd::DirEntryKind::kRegular, {}});
  try {
    v->oracle = format.oracle_read(g.Listing(v->file));
  } catch (const std::exception& e) {
    *error = std::string(format.name) + " oracle failed on test " + std::to_string(tc_id) + ": " + e.what();
    return false;
  }
  Label(rule, g.description, v);
  v->dir_entries = std::move(g.files);
  return true;
}

std::string AsText(const std::vector<std::uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

std::vector<BundleMember> FilesOf(const TestVector& v) {
  std::vector<BundleMember> files;
  if (!v.directory) {
    files.push_back({v.file, AsText(v.bytes)});
    for (const qd::SideFile& side : v.side_files) files.push_back({side.name, AsText(side.bytes)});
    return files;
  }
  const std::string outside = std::to_string(v.tc_id) + ".outside";
  bool links_out = false;
  for (const qd::gen::GeneratedDirFile& e : v.dir_entries) {
    const std::string path = v.file + "/" + e.name;
    switch (e.kind) {
      case qd::DirEntryKind::kRegular: files.push_back({path, AsText(e.bytes)}); break;
      case qd::DirEntryKind::kOther: files.push_back({path + "/placeholder", ""}); break;
      case qd::DirEntryKind::kEscaping:
        files.push_back({path, "", "../" + outside});
        links_out = true;
        break;
    }
  }
  if (links_out) {
    files.insert(files.begin(), {std::string(DirVectorFormat()) + "/" + outside,
                                 "a file outside the directory of vector " + std::to_string(v.tc_id) +
                                     ", which its links out of it name\n"});
  }
  return files;
}

bool BuildDirVectors(std::uint64_t count, std::uint64_t seed, std::vector<TestVector>* out, std::string* error) {
  const qd::harness::DirFormatEntry& format = qd::harness::ModelDirFormat();
  qd::harness::Rng rng(Mix(seed ^ Fnv1a(format.name)));
  std::vector<std::string> groups = {""};
  for (const std::string& r : format.violable_rules()) groups.push_back(r);
  std::uint64_t tc_id = 0;
  for (const std::string& rule : groups) {
    for (std::uint64_t k = 0; k < count; ++k) {
      qd::gen::GeneratedDir g = rule.empty() ? format.generate_valid(rng) : format.generate_violation(rule, rng);
      TestVector v;
      if (!MakeDirVector(format, rule, std::move(g), ++tc_id, &v, error)) return false;
      out->push_back(std::move(v));
    }
  }
  return true;
}

}  // namespace qd::cli
