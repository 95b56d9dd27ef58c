// Generators for GGUF-family safetensors (rules GGST-*, and the config rules
// CFG-003 and CFG-005 such a file can break; docs/ggml_safetensors.md): one
// or two GPT-QModel GGUF linears whose rows are padded with zeros to the
// block size and encoded by the codec's block encoders (codec::GgmlEncode for
// q4_0 / q8_0, codec::GgmlEncodeWithinBound for the K-quants), the config as
// GPT-QModel's GGUFConfig writes it. Each violation starts from a valid draft
// and breaks one thing that every earlier step of section 4 lets pass.
// One instance in three is instead section 7's block-vector layout (ggml's
// reference vectors: `__metadata__.ggml_type`, U8 block tensors, optional
// `cols`), valid with any of the 12 block types or breaking GGST-001,
// GGST-003 (cols text, bytes_per_row, cols range) or GGST-104 there.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <span>
#include <string>
#include <vector>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_st.h"
#include "generators/generators.h"
#include "generators/tensor_list.h"

namespace qd::gen {
namespace {

using Json = nlohmann::ordered_json;
using codec::TensorWithBytes;

// The five subtypes: GPT-QModel's public variant, bits, and ggml's name.
struct Subtype {
  const char* variant;
  int bits;
  const char* ggml_name;
};
constexpr Subtype kSubtypes[] = {{"q_0", 4, "q4_0"},   {"q_0", 8, "q8_0"}, {"q_k_m", 4, "q4_K"},
                                 {"q_k_s", 5, "q5_K"}, {"q_k", 6, "q6_K"}};

TensorWithBytes Member(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                       std::vector<std::uint8_t> bytes) {
  TensorWithBytes t;
  t.spec.name = std::move(name);
  t.spec.dtype = std::move(dtype);
  t.spec.shape = std::move(shape);
  t.spec.byte_size = bytes.size();
  t.bytes = std::move(bytes);
  return t;
}

struct Draft {
  Subtype subtype = kSubtypes[0];
  const codec::GgmlTypeInfo* info = nullptr;
  std::vector<TensorWithBytes> tensors;
  Json config;

  TensorWithBytes* Find(const std::string& name) { return FindTensor(tensors, name); }
  void Erase(const std::string& name) { RemoveTensor(tensors, name); }
  Generated Write(const std::string& rule, const std::string& what, bool with_config = true) const {
    Generated g;
    g.bytes = codec::SerializeSafetensors(tensors, nullptr);
    g.expected_rule = rule;
    g.description = what + " (GGUF " + subtype.ggml_name + ")";
    if (with_config) {
      const std::string text = config.dump(2);
      g.side_files.push_back({"quantize_config.json", std::vector<std::uint8_t>(text.begin(), text.end())});
    }
    return g;
  }
};

// A weight drawn from a few magnitudes, either sign.
float SomeWeight(Rng& rng) {
  const float magnitude = std::vector<float>{0.001f, 0.05f, 1.0f, 30.0f}[Pick(rng, 4)];
  const float u = static_cast<float>(Pick(rng, 2001)) / 1000.0f - 1.0f;
  return magnitude * u;
}

// Layer P: N rows of K weights, padded with zeros to whole blocks (docs/
// ggml_safetensors.md section 1) and encoded.
void AddLayer(Draft& d, const std::string& prefix, bool bias, Rng& rng) {
  const std::uint64_t qk = static_cast<std::uint64_t>(d.info->values);
  const std::uint64_t n = 1 + Pick(rng, 5);
  const std::uint64_t blocks = 1 + Pick(rng, qk == 32 ? 4 : 2);
  const std::uint64_t k = blocks * qk - Pick(rng, qk);  // in_features, the last block padded
  std::vector<float> weights(n * blocks * qk, 0.0f);
  for (std::uint64_t r = 0; r < n; ++r) {
    for (std::uint64_t c = 0; c < k; ++c) weights[r * blocks * qk + c] = SomeWeight(rng);
  }
  std::vector<std::uint8_t> qweight(n * blocks * static_cast<std::uint64_t>(d.info->bytes));
  if (!codec::GgmlEncode(d.info->type, weights.data(), n * blocks, qweight.data())) {
    codec::GgmlEncodeWithinBound(d.info->type, weights.data(), n * blocks, qweight.data());
  }
  d.tensors.push_back(Member(prefix + "qweight", "U8", {n, blocks * static_cast<std::uint64_t>(d.info->bytes)},
                             std::move(qweight)));
  if (bias) {
    std::vector<std::uint8_t> b;
    for (std::uint64_t i = 0; i < n; ++i) {
      b.push_back(static_cast<std::uint8_t>(Pick(rng, 256)));
      b.push_back(static_cast<std::uint8_t>(0x30 + Pick(rng, 16)));  // finite, 2^-3 .. 2^1
    }
    d.tensors.push_back(Member(prefix + "bias", "F16", {n}, std::move(b)));
  }
}

// A random valid draft with LAYERS layers (0: one or two); SUBTYPE picks one
// of kSubtypes (-1: any).
Draft MakeDraft(Rng& rng, int layers = 0, int subtype = -1) {
  Draft d;
  d.subtype = kSubtypes[subtype >= 0 ? static_cast<std::size_t>(subtype) : Pick(rng, 5)];
  d.info = codec::FindGgmlType(d.subtype.ggml_name);
  // GPT-QModel writes the public variant; the full alias ("q4_k_m") is read too.
  std::string format = d.subtype.variant;
  if (Coin(rng, 4)) format = "q" + std::to_string(d.subtype.bits) + format.substr(1);
  d.config = Json{{"bits", d.subtype.bits},     {"format", format},        {"method", "gguf"},
                  {"quant_method", "gguf"},     {"checkpoint_format", format}, {"pack_dtype", "int32"}};
  if (Coin(rng)) d.config["group_size"] = -1;
  if (Coin(rng)) {
    d.tensors.push_back(Member("model.embed_tokens.weight", "F32", {2}, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}));
  }
  const int count = layers != 0 ? layers : 1 + static_cast<int>(Pick(rng, 2));
  for (int i = 0; i < count; ++i) {
    AddLayer(d, "model.layers." + std::to_string(i) + ".self_attn.q_proj.", Coin(rng, 3), rng);
  }
  return d;
}

const std::string kP0 = "model.layers.0.self_attn.q_proj.";
const std::string kP1 = "model.layers.1.self_attn.q_proj.";

// ---- Section 7: the block-vector layout (ggml's reference vectors) ----
// `__metadata__.ggml_type` names the type; each U8 tensor is a block tensor
// [rows, bytes_per_row]; `cols` (optional) is K. No config is read.

struct BlockVectors {
  const codec::GgmlTypeInfo* info = nullptr;
  std::string type_name;                   // the ggml_type value written
  std::vector<std::string> cols;           // the cols value, if any (0 or 1 element)
  std::uint64_t padded = 0;                // Kp of the first block tensor
  std::vector<TensorWithBytes> tensors;

  Generated Write(const std::string& rule, const std::string& what) const {
    codec::MetadataList metadata = {{"format", "ggml-reference-vector/v1"}, {"ggml_type", type_name}};
    for (const std::string& c : cols) metadata.push_back({"cols", c});
    Generated g;
    g.bytes = codec::SerializeSafetensors(tensors, &metadata);
    g.expected_rule = rule;
    g.description = what + " (ggml block vectors, " + std::string(info->name) + ")";
    return g;
  }
};

// ROWS rows of K weights (K within the last block) as the peer files hold
// them: `input` F32 [rows, K] and `blocks` U8 [rows, bytes_per_row], the
// blocks encoded by the codec's encoders or, one time in four (and for
// mxfp4, which has no encoder), bytes of any value: this layout has no
// GGST-004, the block decoders are total (docs/ggml_blocks.md 5.3).
// Sometimes a second block tensor of the same type follows.
BlockVectors MakeBlockVectors(Rng& rng, const codec::GgmlTypeInfo& info, bool with_cols) {
  BlockVectors d;
  d.info = &info;
  d.type_name = std::string(info.name);
  const std::uint64_t qk = static_cast<std::uint64_t>(info.values);
  const std::uint64_t block_bytes = static_cast<std::uint64_t>(info.bytes);
  const std::uint64_t rows = 1 + Pick(rng, 3);
  const std::uint64_t blocks = 1 + Pick(rng, qk == 32 ? 3 : 2);
  d.padded = blocks * qk;
  const std::uint64_t k = d.padded - Pick(rng, qk);
  std::vector<float> weights(rows * d.padded, 0.0f);
  std::vector<std::uint8_t> input;
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < k; ++c) {
      const float w = SomeWeight(rng);
      weights[r * d.padded + c] = w;
      const auto bits = std::bit_cast<std::uint32_t>(w);
      for (int b = 0; b < 4; ++b) input.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
    }
  }
  std::vector<std::uint8_t> bytes(rows * blocks * block_bytes);
  const bool any_bytes = Coin(rng, 4);
  if (any_bytes || (!codec::GgmlEncode(info.type, weights.data(), rows * blocks, bytes.data()) &&
                    !codec::GgmlEncodeWithinBound(info.type, weights.data(), rows * blocks, bytes.data()))) {
    for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(Pick(rng, 256));
  }
  d.tensors.push_back(Member("input", "F32", {rows, k}, std::move(input)));
  d.tensors.push_back(Member("blocks", "U8", {rows, blocks * block_bytes}, std::move(bytes)));
  if (Coin(rng, 3)) {
    // A second block tensor, one row of any bytes. Not named P.qweight: the
    // readers take that too, but `decode` refuses to write its F32 output,
    // which `check` would read as a GPTQ layer without a config (CFG-003).
    std::vector<std::uint8_t> more(blocks * block_bytes);
    for (std::uint8_t& b : more) b = static_cast<std::uint8_t>(Pick(rng, 256));
    d.tensors.push_back(Member("more_blocks", "U8", {1, blocks * block_bytes}, std::move(more)));
  }
  if (with_cols) d.cols.push_back(Coin(rng, 4) ? "0" + std::to_string(k) : std::to_string(k));
  return d;
}

const codec::GgmlTypeInfo& SomeBlockType(Rng& rng) {
  const std::span<const codec::GgmlTypeInfo> types = codec::GgmlTypes();
  return types[Pick(rng, types.size())];
}

// One section 7 rule broken, every earlier check passing.
Generated ViolateBlockVectors(const std::string& rule, Rng& rng) {
  const codec::GgmlTypeInfo& info = SomeBlockType(rng);
  BlockVectors d = MakeBlockVectors(rng, info, true);
  const std::uint64_t qk = static_cast<std::uint64_t>(info.values);
  TensorWithBytes& blocks = d.tensors[1];
  if (rule == "GGST-001") {  // V1: spelled otherwise than docs/ggml_blocks.md section 3
    d.type_name = std::vector<std::string>{"q4_k", "Q4_0", "q4_2", "iq2_xxs", "", "q8_0 "}[Pick(rng, 6)];
    return d.Write(rule, "ggml_type \"" + d.type_name + "\"");
  }
  if (rule == "GGST-104") {  // V3: a block tensor not of rank 2
    if (Coin(rng)) {
      blocks.spec.shape = {blocks.spec.shape[0] * blocks.spec.shape[1]};
    } else {
      blocks.spec.shape = {1, blocks.spec.shape[0], blocks.spec.shape[1]};
    }
    return d.Write(rule, "a block tensor of rank " + std::to_string(blocks.spec.shape.size()));
  }
  switch (Pick(rng, 3)) {
    case 0: {  // V2: cols not 1 to 19 ASCII digits
      d.cols[0] = std::vector<std::string>{"-32", " 32", "32.0", "", "0x20", "12345678901234567890", "+1"}[Pick(rng, 7)];
      return d.Write(rule, "cols \"" + d.cols[0] + "\"");
    }
    case 1: {  // V4: bytes_per_row 0 or not whole blocks
      const std::uint64_t rows = blocks.spec.shape[0];
      const std::uint64_t width = Coin(rng, 3) ? 0 : blocks.spec.shape[1] - 1 - Pick(rng, static_cast<std::uint64_t>(info.bytes) - 1);
      blocks.spec.shape[1] = width;
      blocks.bytes.resize(rows * width);
      blocks.spec.byte_size = blocks.bytes.size();
      return d.Write(rule, "bytes_per_row " + std::to_string(width));
    }
    default: {  // V5: cols outside Kp - QK < cols <= Kp
      const std::uint64_t cols = Coin(rng) ? d.padded - qk - Pick(rng, std::min<std::uint64_t>(d.padded - qk + 1, 3))
                                           : d.padded + 1 + Pick(rng, qk);
      d.cols[0] = std::to_string(cols);
      return d.Write(rule, "cols " + d.cols[0] + " for a padded row of " + std::to_string(d.padded));
    }
  }
}

Generated Violate(const std::string& rule, Rng& rng) {
  // One time in three, a rule section 7 also checks is broken in that layout.
  if ((rule == "GGST-001" || rule == "GGST-003" || rule == "GGST-104") && Coin(rng, 3)) {
    return ViolateBlockVectors(rule, rng);
  }
  if (rule == "GGST-001") {
    Draft d = MakeDraft(rng);
    const std::vector<std::pair<const char*, int>> unknown = {{"q_0", 5}, {"q_k", 8}, {"q2_k", 2}, {"iq4_nl", 4}, {"q_1", 4}};
    const auto& [format, bits] = unknown[Pick(rng, unknown.size())];
    d.config["format"] = format;
    d.config["checkpoint_format"] = format;
    d.config["bits"] = bits;
    return d.Write(rule, std::string("format ") + format + " with bits " + std::to_string(bits));
  }
  if (rule == "GGST-002") {
    Draft d = MakeDraft(rng);
    const std::string alias = "q" + std::to_string(d.subtype.bits) + std::string(d.subtype.variant).substr(1);
    d.config["format"] = alias;
    d.config["checkpoint_format"] = alias;
    d.config["bits"] = d.subtype.bits == 4 ? 5 : 4;
    return d.Write(rule, "format " + alias + " with other bits");
  }
  if (rule == "GGST-003") {
    Draft d = MakeDraft(rng, 1);
    TensorWithBytes* q = d.Find(kP0 + "qweight");
    q->spec.shape[1] += 1 + Pick(rng, static_cast<std::uint64_t>(d.info->bytes) - 1);
    q->bytes.resize(q->spec.shape[0] * q->spec.shape[1]);
    q->spec.byte_size = q->bytes.size();
    return d.Write(rule, "rows are not whole blocks");
  }
  if (rule == "GGST-004") {
    Draft d = MakeDraft(rng, 1);
    TensorWithBytes* q = d.Find(kP0 + "qweight");
    const std::uint64_t blocks = q->spec.shape[0] * q->spec.shape[1] / static_cast<std::uint64_t>(d.info->bytes);
    const bool has_dmin = d.info->type == codec::GgmlType::kQ4_K || d.info->type == codec::GgmlType::kQ5_K;
    const std::uint64_t at = Pick(rng, blocks) * static_cast<std::uint64_t>(d.info->bytes) +
                             (d.info->type == codec::GgmlType::kQ6_K ? 208 : has_dmin && Coin(rng) ? 2 : 0);
    const std::uint16_t half = std::vector<std::uint16_t>{0x7c00, 0xfc00, 0x7e00, 0x7d01}[Pick(rng, 4)];
    q->bytes[at] = static_cast<std::uint8_t>(half);
    q->bytes[at + 1] = static_cast<std::uint8_t>(half >> 8);
    return d.Write(rule, "a block scale half is an infinity or a NaN");
  }
  if (rule == "GGST-101") {
    Draft d = MakeDraft(rng, 1);
    // The first layer stays a GGUF layer (detection, section 3).
    const std::string suffix = std::vector<std::string>{"qzeros", "scales", "g_idx"}[Pick(rng, 3)];
    if (Coin(rng)) {
      AddLayer(d, kP1, false, rng);
      d.tensors.push_back(Member(kP1 + suffix, "I32", {1}, {0, 0, 0, 0}));
      return d.Write(rule, "the second layer has " + suffix);
    }
    d.tensors.push_back(Member(kP1 + suffix, "I32", {1}, {0, 0, 0, 0}));
    return d.Write(rule, "a second layer has " + suffix + " and no qweight");
  }
  if (rule == "GGST-102") {
    Draft d = MakeDraft(rng, 1);
    d.tensors.push_back(Member(kP0 + "weight", "F16", {2}, {0, 0x3c, 0, 0x3c}));
    return d.Write(rule, "a dense weight beside the layer");
  }
  if (rule == "GGST-103") {
    Draft d = MakeDraft(rng, 1);
    d.tensors.push_back(Member(kP0 + std::vector<std::string>{"perm", "ggml_type", "extra"}[Pick(rng, 3)], "I32",
                               {1}, {1, 0, 0, 0}));
    return d.Write(rule, "an unknown sibling of the layer");
  }
  if (rule == "GGST-104") {
    Draft d = MakeDraft(rng, 2);
    switch (Pick(rng, 4)) {
      case 0:
        d.Find(kP1 + "qweight")->spec.dtype = "I8";  // layer 0 keeps the file GGUF-family
        return d.Write(rule, "the second qweight is I8");
      case 1: {
        TensorWithBytes* q = d.Find(kP0 + "qweight");
        q->spec.shape = {1, q->spec.shape[0], q->spec.shape[1]};
        return d.Write(rule, "qweight of rank 3");
      }
      case 2: {
        d.Erase(kP0 + "bias");
        const std::uint64_t n = d.Find(kP0 + "qweight")->spec.shape[0];
        d.tensors.push_back(Member(kP0 + "bias", "F32", {n}, std::vector<std::uint8_t>(4 * n, 0)));
        return d.Write(rule, "an F32 bias");
      }
      default: {
        d.Erase(kP0 + "bias");
        const std::uint64_t n = d.Find(kP0 + "qweight")->spec.shape[0] + 1;
        d.tensors.push_back(Member(kP0 + "bias", "F16", {n}, std::vector<std::uint8_t>(2 * n, 0)));
        return d.Write(rule, "a bias one longer than N");
      }
    }
  }
  if (rule == "CFG-003") return MakeDraft(rng).Write(rule, "no config source", false);
  if (rule == "CFG-005") {
    Draft d = MakeDraft(rng);
    d.config["method"] = "gptq";
    d.config["quant_method"] = "gptq";
    return d.Write(rule, "GGUF layers labelled method gptq");
  }
  return MakeDraft(rng).Write("", "unknown rule " + rule + ": a valid file");
}

}  // namespace

Generated GgmlStValid(Rng& rng) {
  if (Coin(rng, 3)) {
    const codec::GgmlTypeInfo& info = SomeBlockType(rng);
    const bool with_cols = Coin(rng);
    return MakeBlockVectors(rng, info, with_cols).Write("", with_cols ? "valid, cols" : "valid, no cols");
  }
  return MakeDraft(rng).Write("", "valid file");
}

Generated GgmlStBlockVectorsValid(Rng& rng, std::string_view type, bool with_cols) {
  const codec::GgmlTypeInfo* info = codec::FindGgmlType(type);
  if (info == nullptr) info = &codec::GgmlTypes()[0];
  return MakeBlockVectors(rng, *info, with_cols).Write("", with_cols ? "valid, cols" : "valid, no cols");
}

std::vector<std::string> GgmlStBlockVectorsViolableRules() { return {"GGST-001", "GGST-003", "GGST-104"}; }

Generated GgmlStBlockVectorsViolation(std::string_view rule, Rng& rng) {
  return ViolateBlockVectors(std::string(rule), rng);
}

std::vector<Generated> GgmlStFixedInstances() {
  std::vector<Generated> out;
  Rng rng(12);
  for (const codec::GgmlTypeInfo& type : codec::GgmlTypes()) {
    for (const bool with_cols : {false, true}) out.push_back(GgmlStBlockVectorsValid(rng, type.name, with_cols));
  }
  for (const std::string& rule : GgmlStBlockVectorsViolableRules()) {
    for (int i = 0; i < 2; ++i) out.push_back(ViolateBlockVectors(rule, rng));
  }
  return out;
}

std::vector<std::string> GgmlStViolableRules() {
  return {"GGST-001", "GGST-002", "GGST-003", "GGST-004", "GGST-101", "GGST-102",
          "GGST-103", "GGST-104", "CFG-003",  "CFG-005"};
}

Generated GgmlStViolation(std::string_view rule, Rng& rng) { return Violate(std::string(rule), rng); }

}  // namespace qd::gen
