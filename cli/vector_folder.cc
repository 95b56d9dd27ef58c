#include "cli/vector_folder.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "codecs/safetensors.h"

namespace qd::cli {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// The bytes of DIR/RELATIVE when its SHA-256 is SHA256.
bool ReadChecked(const fs::path& dir, const Json& relative, const Json& sha256,
                 std::vector<std::uint8_t>* bytes, std::string* error) {
  if (!relative.is_string()) return *error = "a test names no file", false;
  const fs::path path = dir / relative.get<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return *error = "cannot read " + path.string(), false;
  bytes->assign(std::istreambuf_iterator<char>(in), {});
  if (sha256.is_string() && Sha256Hex(bytes->data(), bytes->size()) != sha256.get<std::string>()) {
    return *error = path.string() + " changed since the export (its SHA-256 differs)", false;
  }
  return true;
}

// The tensors of an expected output: an F32 safetensors file as
// `quantdiff decode` writes it, tensors in file order.
bool ReadExpectedTensors(const std::vector<std::uint8_t>& bytes, const std::string& name,
                         std::vector<qd::DecodedTensor>* tensors, std::string* error) {
  const qd::codec::ContainerResult read = qd::codec::ReadContainer({bytes.data(), bytes.size()}, name);
  if (read.refused) return *error = name + " is not a safetensors file", false;
  for (const qd::codec::TensorEntry& t : read.container.tensors) {
    if (t.dtype != qd::codec::Dtype::kF32) return *error = name + ": tensor " + std::string(t.name) + " is not F32", false;
    qd::DecodedTensor d{std::string(t.name), t.shape, std::vector<float>(t.element_count)};
    if (t.element_count > 0) {
      std::memcpy(d.values.data(), read.container.Data(t), 4 * t.element_count);  // little-endian host
    }
    tensors->push_back(std::move(d));
  }
  return true;
}

// A directory vector's entries (export-vectors' "entries"): a regular one's
// bytes read from its path and checked, the others by their kind alone.
bool ReadEntries(const fs::path& dir, const Json& entries, TestVector* v, std::string* error) {
  static const std::map<std::string, qd::DirEntryKind> kKinds = {
      {"regular", qd::DirEntryKind::kRegular}, {"escaping", qd::DirEntryKind::kEscaping}, {"other", qd::DirEntryKind::kOther}};
  v->directory = true;
  for (const Json& e : entries.is_array() ? entries : Json::array()) {
    const auto kind = kKinds.find(e.is_object() ? e.value("kind", "") : "");
    if (kind == kKinds.end() || !e.contains("name") || !e["name"].is_string()) {
      return *error = "test " + std::to_string(v->tc_id) + ": an entry lacks its name or kind", false;
    }
    qd::gen::GeneratedDirFile& entry = v->dir_entries.emplace_back();
    entry.name = e["name"].get<std::string>();
    entry.kind = kind->second;
    if (entry.kind == qd::DirEntryKind::kRegular &&
        !ReadChecked(dir, e.value("path", Json()), e.value("sha256", Json()), &entry.bytes, error)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool LoadExportedVectors(const std::string& dir, std::string_view format, std::vector<TestVector>* out,
                         std::string* error) {
  const fs::path json_path = fs::path(dir) / (std::string(format) + ".json");
  std::ifstream in(json_path, std::ios::binary);
  if (!in) return *error = "cannot read " + json_path.string(), false;
  const Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("testGroups") || !doc["testGroups"].is_array()) {
    return *error = json_path.string() + " is not an export-vectors file", false;
  }
  for (const Json& group : doc["testGroups"]) {
    const std::string rule = group.value("rule", Json()).is_string() ? group["rule"].get<std::string>() : "";
    for (const Json& test : group.value("tests", Json::array())) {
      if (!test.is_object() || !test.contains("tcId") || !test["tcId"].is_number_unsigned() ||
          !test.contains("result") || !test.contains("flags") || !test["flags"].is_array()) {
        return *error = json_path.string() + ": a test lacks tcId, result or flags", false;
      }
      TestVector v;
      v.tc_id = test["tcId"].get<std::uint64_t>();
      v.rule = rule;
      v.file = test.value("file", "");
      v.comment = test.value("comment", "");
      if (test.contains("entries")) {
        if (!ReadEntries(dir, test["entries"], &v, error)) return false;
      } else if (!ReadChecked(dir, test.value("file", Json()), test.value("sha256", Json()), &v.bytes, error)) {
        return false;
      }
      for (const Json& config : test.value("configs", Json::array())) {
        qd::SideFile side{config.is_string() ? config.get<std::string>() : "", {}};
        if (!ReadChecked(dir, config, Json(), &side.bytes, error)) return false;
        v.side_files.push_back(std::move(side));
      }
      Expectation want;
      const std::string result = test["result"].is_string() ? test["result"].get<std::string>() : "";
      if (result == "invalid") {
        // Readers stop at the first error: the last flag refuses the file.
        if (test["flags"].empty() || !test["flags"].back().is_string()) {
          return *error = json_path.string() + ": invalid test " + std::to_string(v.tc_id) + " has no flag", false;
        }
        want.refusal_rule = test["flags"].back().get<std::string>();
      } else if (test.contains("decodeRefusal") && test["decodeRefusal"].is_string()) {
        want.refusal_rule = test["decodeRefusal"].get<std::string>();
      } else {
        const Json expected = test.value("expectedOutput", Json());
        if (!expected.is_object()) {
          return *error = json_path.string() + ": test " + std::to_string(v.tc_id) + " has no expectedOutput", false;
        }
        std::vector<std::uint8_t> bytes;
        if (!ReadChecked(dir, expected.value("file", Json()), expected.value("sha256", Json()), &bytes, error) ||
            !ReadExpectedTensors(bytes, expected.value("file", ""), &want.tensors, error)) {
          return false;
        }
        want.decoded_file.assign(bytes.begin(), bytes.end());
      }
      v.oracle.refused = result == "invalid";
      v.exported = std::move(want);
      out->push_back(std::move(v));
    }
  }
  return true;
}

}  // namespace qd::cli
