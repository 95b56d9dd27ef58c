// Generators for Q4B32 / Q8B32 files (rules RBQ-*). Weights are quantized
// with the codec's encoder and written with the codec's writer; every
// violation breaks one thing in an otherwise valid file.
#include <cmath>
#include <cstring>

#include "codecs/rbq.h"
#include "codecs/safetensors.h"
#include "generators/generators.h"

namespace qd::gen {
namespace {



const char* DtypeName(int bits) { return bits == 4 ? "Q4B32" : "Q8B32"; }

codec::MetadataList RbqMetadata(int bits) {
  return {{"block", "32"},
          {"format", bits == 4 ? "rabbit-q4b32" : "rabbit-q8b32"},
          {"scale", "f16"}};
}

codec::TensorWithBytes QuantizedTensor(int bits, const std::string& name,
                                       std::uint64_t rows, std::uint64_t columns,
                                       float magnitude, Rng& rng) {
  const std::vector<float> w = RandomWeights(rows * columns, magnitude, rng);
  codec::TensorWithBytes t;
  t.spec = {name, DtypeName(bits), {rows, columns}, 0};
  qd::Finding error;
  codec::RbqQuantize(bits, w.data(), rows, columns, &t.bytes, &error);
  return t;
}

codec::TensorWithBytes FloatTensor(const std::string& name,
                                   std::vector<std::uint64_t> shape, Rng& rng) {
  std::uint64_t count = 1;
  for (std::uint64_t d : shape) count *= d;
  const std::vector<float> w = RandomWeights(count, 1.0f, rng);
  codec::TensorWithBytes t;
  t.spec = {name, "F32", std::move(shape), 0};
  t.bytes.resize(count * 4);
  std::memcpy(t.bytes.data(), w.data(), t.bytes.size());
  return t;
}

struct Parts {
  std::vector<codec::TensorWithBytes> tensors;
  codec::MetadataList metadata;
};

// The tensors and metadata of a valid file with these parameters.
Parts PartsFor(const RbqFileParams& p, Rng& rng) {
  Parts parts;
  for (int i = 0; i < p.tensor_count; ++i) {
    parts.tensors.push_back(QuantizedTensor(
        p.bits, "layers." + std::to_string(i) + ".weight", p.rows, p.columns, p.magnitude, rng));
  }
  if (p.with_norm) parts.tensors.push_back(FloatTensor("norm.weight", {p.columns}, rng));
  parts.metadata = RbqMetadata(p.bits);
  return parts;
}

Parts RandomParts(Rng& rng, RbqFileParams* params_out = nullptr) {
  RbqFileParams p;
  p.bits = Pick(rng, 2) == 0 ? 4 : 8;
  p.rows = 1 + Pick(rng, 4);
  p.columns = 32 * (1 + Pick(rng, 3));
  p.tensor_count = 1 + static_cast<int>(Pick(rng, 2));
  p.with_norm = Pick(rng, 2) == 0;
  p.magnitude = std::ldexp(1.0f, static_cast<int>(Pick(rng, 20)) - 12);
  if (params_out) *params_out = p;
  return PartsFor(p, rng);
}

Generated Make(const Parts& parts, std::string rule, std::string what) {
  return Generated{codec::SerializeSafetensors(parts.tensors, &parts.metadata),
                   std::move(rule), std::move(what), {}};
}

void SetMeta(codec::MetadataList* m, const std::string& key, const std::string& value) {
  for (auto& [k, v] : *m) {
    if (k == key) {
      v = value;
      return;
    }
  }
  m->emplace_back(key, value);
}

}  // namespace

std::vector<float> RandomWeights(std::uint64_t count, float magnitude, Rng& rng) {
  std::normal_distribution<float> normal(0.0f, magnitude);
  std::vector<float> w(count);
  const int style = static_cast<int>(Pick(rng, 6));
  for (std::uint64_t i = 0; i < count; ++i) {
    float v = normal(rng);
    switch (style) {
      case 1: if (Pick(rng, 3) == 0) v = 0.0f; break;            // sparse
      case 2: if ((i / 32) % 2 == 0) v = 0.0f; break;            // all-zero blocks
      case 3: if (Pick(rng, 40) == 0) v *= 64.0f; break;         // outliers
      case 4: v = std::ldexp(v, -22); break;                     // near f16 underflow
      case 5: v = static_cast<float>(static_cast<int>(Pick(rng, 15)) - 7); break;  // integers
      default: break;
    }
    w[i] = v;
  }
  return w;
}

std::vector<std::uint8_t> BuildRbqFile(const RbqFileParams& p, Rng& rng) {
  const Parts parts = PartsFor(p, rng);
  return codec::SerializeSafetensors(parts.tensors, &parts.metadata);
}

Generated RbqValid(Rng& rng) {
  return Make(RandomParts(rng), "", "valid Q4B32/Q8B32 file");
}

std::vector<std::string> RbqViolableRules() {
  return {"RBQ-001", "RBQ-002", "RBQ-003", "RBQ-004", "RBQ-005", "RBQ-101"};
}

Generated RbqViolation(std::string_view rule, Rng& rng) {
  RbqFileParams p;
  Parts parts = RandomParts(rng, &p);
  const std::string r(rule);
  if (r == "RBQ-001") {
    parts.tensors.push_back(QuantizedTensor(12 - p.bits, "mixed.weight", 1, 32, 1.0f, rng));
    return Make(parts, r, "Q4B32 and Q8B32 in one file");
  }
  if (r == "RBQ-002") {
    switch (Pick(rng, 5)) {
      case 0: {
        auto file = codec::SerializeSafetensors(parts.tensors, nullptr);
        return Generated{file, r, "no __metadata__", {}};
      }
      case 1: SetMeta(&parts.metadata, "format", p.bits == 4 ? "rabbit-q8b32" : "rabbit-q4b32"); break;
      case 2: SetMeta(&parts.metadata, "block", "64"); break;
      case 3: SetMeta(&parts.metadata, "scale", "bf16"); break;
      default: parts.metadata.erase(parts.metadata.begin()); break;  // drops "block"
    }
    return Make(parts, r, "__metadata__ does not declare the width");
  }
  if (r == "RBQ-003") {
    codec::TensorWithBytes& t = parts.tensors[0];
    if (Pick(rng, 2) == 0) {
      t.spec.shape = {p.rows, p.columns / 32, 32};  // three-dimensional
    } else {
      t.spec.shape = {p.rows * p.columns / 16, 16};  // columns not a multiple of 32
    }
    return Make(parts, r, "block tensor shape is not [rows, 32k]");
  }
  if (r == "RBQ-004") {
    codec::TensorWithBytes& t = parts.tensors[0];
    if (Pick(rng, 2) == 0) {
      t.bytes.resize(t.bytes.size() + 1 + Pick(rng, 40), 0);
    } else {
      t.bytes.resize(t.bytes.size() - 1 - Pick(rng, t.bytes.size()));
    }
    return Make(parts, r, "byte length disagrees with the shape");
  }
  if (r == "RBQ-005") {
    codec::TensorWithBytes& t = parts.tensors[Pick(rng, p.tensor_count)];
    const std::uint64_t blocks = t.bytes.size() / codec::RbqBlockBytes(p.bits);
    const std::uint64_t b = Pick(rng, blocks);
    static const std::uint16_t kNonFinite[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff};
    const std::uint16_t bad = kNonFinite[Pick(rng, std::size(kNonFinite))];
    std::uint8_t* scale = t.bytes.data() + b * codec::RbqBlockBytes(p.bits);
    scale[0] = static_cast<std::uint8_t>(bad & 0xff);
    scale[1] = static_cast<std::uint8_t>(bad >> 8);
    return Make(parts, r, "a block scale is infinite or NaN");
  }
  if (r == "RBQ-101") {
    parts.tensors.push_back(FloatTensor("lm_head.weight", {2, p.columns}, rng));
    return Make(parts, r, "two-dimensional F32 tensor beside block tensors (warning)");
  }
  return Make(parts, "", "unknown rule " + r + ": valid file");
}

}  // namespace qd::gen
