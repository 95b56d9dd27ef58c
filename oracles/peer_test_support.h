// peer_test_support.h: what the oracle-side peer tests share (reading a peer
// file, the manifests through the oracle's own JSON parser, finding a
// decoded tensor, printing an outcome). Test code only; like the oracles it
// includes nothing from codecs/.
#ifndef QUANTDIFF_ORACLES_PEER_TEST_SUPPORT_H_
#define QUANTDIFF_ORACLES_PEER_TEST_SUPPORT_H_

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "oracles/json.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::peer_test {

using Bytes = std::vector<std::uint8_t>;

inline Bytes ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline qd::ByteView View(const Bytes& bytes) { return qd::ByteView{bytes.data(), bytes.size()}; }

inline std::uint32_t Bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// A JSON document read with the oracle's parser; ok is false when the file
// is missing or not a strict JSON object.
struct Json {
  JsonDocument document;
  bool ok = false;
};

inline Json LoadJson(const std::string& path) {
  Json json;
  const Bytes bytes = ReadBytes(path);
  JsonError error;
  json.ok = ParseStrictJsonObject(bytes.data(), bytes.size(), &json.document, &error);
  return json;
}

// object's member key as a string ("" when absent or not a string).
inline std::string StringMember(const JsonDocument& d, std::uint32_t object, const char* key) {
  if (object == kNoNode) return "";
  const std::uint32_t node = d.FindMember(object, key);
  if (node == kNoNode || d.nodes[node].kind != JsonKind::kString) return "";
  return std::string(d.Text(node));
}

// object's member key as an unsigned integer (0 when absent or not one).
inline std::uint64_t IntegerMember(const JsonDocument& d, std::uint32_t object, const char* key) {
  if (object == kNoNode) return 0;
  const std::uint32_t node = d.FindMember(object, key);
  std::uint64_t value = 0;
  if (node == kNoNode || !JsonToUint64(d, node, &value)) return 0;
  return value;
}

inline const qd::DecodedTensor* FindDecoded(const qd::Outcome& outcome, const std::string& name) {
  for (const qd::DecodedTensor& tensor : outcome.tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

// "" when every tensor of WANT is in GOT's tensors with its shape and the
// bits of every value; otherwise the first tensor that is not, and why.
inline std::string FirstTensorNotHeld(const qd::Outcome& got,
                                      const std::vector<qd::DecodedTensor>& want) {
  for (const qd::DecodedTensor& tensor : want) {
    const qd::DecodedTensor* held = FindDecoded(got, tensor.name);
    if (held == nullptr) return tensor.name + ": missing";
    if (held->shape != tensor.shape) return tensor.name + ": another shape";
    if (held->values.size() != tensor.values.size()) return tensor.name + ": another value count";
    for (std::size_t i = 0; i < tensor.values.size(); ++i) {
      if (Bits(held->values[i]) != Bits(tensor.values[i])) {
        return tensor.name + ": value " + std::to_string(i) + " differs in its bits";
      }
    }
  }
  return "";
}

// The verdict and every finding with all its fields, for failure messages.
inline std::string Describe(const qd::Outcome& outcome) {
  std::ostringstream text;
  text << (outcome.refused ? "refused" : "accepted");
  for (const qd::Finding& f : outcome.findings) {
    text << "\n  " << f.rule << (f.severity == qd::Severity::kError ? " error" : " warning")
         << " file=" << f.file << " tensor=" << f.tensor << " field=" << f.field
         << " byte_offset=" << f.byte_offset << " row=" << f.row << " block=" << f.block
         << " element=" << f.element << ": " << f.message;
  }
  return text.str();
}

// Safetensors files read with the oracle's own container reader.

struct RawTensor {
  std::string dtype;
  std::vector<std::uint64_t> shape;
  Bytes bytes;
  std::int64_t data_offset = 0;  // absolute offset of the first data byte
};

inline bool ReadRawTensor(const Bytes& file, const std::string& name, RawTensor* out) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(View(file), "peer", &outcome, &container)) return false;
  for (const ContainerTensor& tensor : container.tensors) {
    if (tensor.name != name) continue;
    const std::uint8_t* begin = file.data() + container.data_start + tensor.begin;
    out->dtype = tensor.dtype;
    out->shape = tensor.shape;
    out->bytes.assign(begin, begin + (tensor.end - tensor.begin));
    out->data_offset = static_cast<std::int64_t>(container.data_start + tensor.begin);
    return true;
  }
  return false;
}

inline std::vector<std::int32_t> Words(const RawTensor& tensor) {
  std::vector<std::int32_t> words(tensor.bytes.size() / 4);
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::uint32_t value = 0;
    for (int b = 3; b >= 0; --b) value = (value << 8) | tensor.bytes[4 * i + b];
    words[i] = static_cast<std::int32_t>(value);
  }
  return words;
}

inline std::vector<float> Floats(const RawTensor& tensor) {
  std::vector<float> values(tensor.bytes.size() / 4);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | tensor.bytes[4 * i + b];
    std::memcpy(&values[i], &bits, sizeof bits);
  }
  return values;
}

// The first index whose bits differ, or -1 (sizes differing: 0).
inline std::int64_t FirstBitDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (Bits(a[i]) != Bits(b[i])) return static_cast<std::int64_t>(i);
  }
  return -1;
}

template <typename T>
std::int64_t FirstDifference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<std::int64_t>(i);
  }
  return -1;
}

}  // namespace qd::oracle::peer_test

#endif  // QUANTDIFF_ORACLES_PEER_TEST_SUPPORT_H_
