// peer_file.h: what the codec-side peer tests share: reading a peer file,
// keeping it in memory with its container view, reading a floating tensor
// the tests' own way, comparing binary32 values bit for bit, and the cases
// of a manifest.json as gtest parameters.
#ifndef QUANTDIFF_TESTS_PEER_PEER_FILE_H_
#define QUANTDIFF_TESTS_PEER_PEER_FILE_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "codecs/safetensors.h"
#include "property_tests/gen/half.h"
#include "tests/safetensors_by_the_tests.h"

namespace qdtest::peer {

inline std::vector<std::uint8_t> ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A peer safetensors file kept in memory with its container view.
struct File {
  std::vector<std::uint8_t> bytes;
  qd::codec::Container container;
  bool ok = false;

  qd::ByteView View() const { return {bytes.data(), bytes.size()}; }
  const qd::codec::TensorEntry* Find(const std::string& name) const {
    for (const auto& t : container.tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  std::vector<std::uint8_t> Raw(const std::string& name) const {
    const auto* t = Find(name);
    if (t == nullptr) return {};
    const std::uint8_t* p = container.Data(*t);
    return std::vector<std::uint8_t>(p, p + (t->end - t->begin));
  }
  // A floating tensor widened to binary32.
  std::vector<float> Floats(const std::string& name) const {
    const auto* t = Find(name);
    if (t == nullptr) return {};
    std::vector<float> v(t->element_count);
    if (!qd::codec::DecodeFloatTensor(container, *t, v.data())) return {};
    return v;
  }
  // An I32 tensor's values.
  std::vector<std::int32_t> Ints(const std::string& name) const {
    const auto* t = Find(name);
    if (t == nullptr || t->dtype != qd::codec::Dtype::kI32) return {};
    std::vector<std::int32_t> v(t->element_count);
    if (!v.empty()) std::memcpy(v.data(), container.Data(*t), v.size() * 4);
    return v;
  }
};

// A floating tensor of a safetensors file in binary32 as the tests read it,
// sharing nothing with the readers under test: the header parsed by
// tests/safetensors_by_the_tests.h and the values widened by property_tests/gen/half.h. Empty when the tensor is
// missing, out of the file, or not F16, BF16, F32 or F64.
inline std::vector<float> FloatsReadByTheTests(const std::vector<std::uint8_t>& file,
                                               const std::string& name) {
  const qdtest::RawTensor t = qdtest::TensorReadByTheTests(file, name);
  if (!t.found) return {};
  return qdtest::LittleEndianFloats(t.dtype, t.bytes.data(), t.bytes.size());
}

// ok is false when the file is missing or the container refuses it.
inline std::unique_ptr<File> LoadFile(const std::filesystem::path& path) {
  auto f = std::make_unique<File>();
  f->bytes = ReadBytes(path);
  qd::codec::ContainerResult r = qd::codec::ReadContainer(f->View(), path.string());
  f->ok = !r.refused && !f->bytes.empty();
  f->container = std::move(r.container);
  return f;
}

// "" when equal bit for bit, else where and how the two differ first.
inline std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  }
  std::size_t count = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i])) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return "";
  std::ostringstream s;
  s << count << " values differ; first at " << first << ": " << std::hexfloat << got[first]
    << " vs " << want[first];
  return s.str();
}

// One case of a manifest.json: its id and its whole entry.
struct Case {
  std::string id;
  nlohmann::json spec;
};

// The manifest's cases (none when it is missing or malformed), those keep()
// accepts when given.
template <typename Keep = bool (*)(const nlohmann::json&)>
std::vector<Case> LoadCases(const std::filesystem::path& manifest, Keep keep = nullptr) {
  std::ifstream in(manifest);
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<Case> cases;
  if (!m.is_object() || !m.contains("cases")) return cases;
  for (const nlohmann::json& c : m["cases"]) {
    if constexpr (!std::is_pointer_v<Keep>) {
      if (!keep(c)) continue;
    } else {
      if (keep != nullptr && !keep(c)) continue;
    }
    cases.push_back({c["id"].get<std::string>(), c});
  }
  return cases;
}

// gtest's name for a case: its id with every byte but [A-Za-z0-9] as '_'.
inline std::string CaseName(const testing::TestParamInfo<Case>& info) {
  std::string name = info.param.id;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

}  // namespace qdtest::peer

#endif  // QUANTDIFF_TESTS_PEER_PEER_FILE_H_
