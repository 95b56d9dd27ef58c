// Generators for FP8 weight checkpoints (rules FP8-*; docs/fp8.md): one or
// two layers P.weight (an FP8 dtype, every code finite) beside
// P.weight_scale_inv F32 as a scalar, per row or per block, an optional F16
// bias, and the config as GPT-QModel's quantize_config.json, a config.json
// quantization_config, both (as save_quantized writes them; the second may
// give fewer keys) or none, where the tensors say it all.
// Each violation starts from a valid draft and breaks one thing, chosen so
// that every step before it in docs/fp8.md section 5 passes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codecs/float16.h"
#include "codecs/fp8.h"
#include "generators/generators.h"
#include "generators/tensor_list.h"

namespace qd::gen {
namespace {

using Json = nlohmann::ordered_json;
using codec::Fp8Subtype;
using codec::TensorWithBytes;

const char* const kDtypes[] = {"F8_E4M3", "F8_E4M3", "F8_E5M2", "F8_E5M2", "F8_E8M0"};
const char* const kScalings[] = {"tensor", "row", "block"};

TensorWithBytes Tensor(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                       std::vector<std::uint8_t> bytes) {
  const std::uint64_t size = bytes.size();
  return TensorWithBytes{{std::move(name), std::move(dtype), std::move(shape), size}, std::move(bytes)};
}

void PutF32(std::vector<std::uint8_t>* out, std::size_t at, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  for (int b = 0; b < 4; ++b) (*out)[at + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(bits >> (8 * b));
}

// A finite, non-zero inverse scale: mostly 2^-8 .. 2^8 with a random
// significand, sometimes negative, sometimes a subnormal (whose quotients
// may overflow to infinity: still one division, docs/fp8.md section 6).
float SomeInverseScale(Rng& rng) {
  const int exponent = static_cast<int>(Pick(rng, 17)) - 8;
  float v = std::ldexp(1.0f + static_cast<float>(Pick(rng, 1u << 20)) / static_cast<float>(1u << 20), exponent);
  if (Coin(rng, 16)) v = std::ldexp(1.0f, -140);
  return Coin(rng, 8) ? -v : v;
}

struct Fp8Draft {
  Fp8Subtype subtype = Fp8Subtype::kE4M3Fn;
  int scaling = 0;  // 0 tensor, 1 row, 2 block
  std::uint64_t n = 0, k = 0, br = 0, bc = 0;
  int style = 0;  // 0 quantize_config.json, 1 config.json, 2 no config, 3 both
  std::vector<TensorWithBytes> tensors;
  Json config;
  // Style 3: config.json's quantization_config is the config without these
  // keys, then with these members set (a disagreement, CFG-010).
  std::vector<std::string> second_drops;
  Json second_sets = Json::object();

  TensorWithBytes* Find(const std::string& name) { return FindTensor(tensors, name); }
  void Erase(const std::string& name) { RemoveTensor(tensors, name); }

  Generated Write(const std::string& rule, const std::string& what) const {
    Generated g;
    g.bytes = codec::SerializeSafetensors(tensors, nullptr);
    g.expected_rule = rule;
    g.description = what + " (FP8 " + codec::Fp8SubtypeName(subtype) + ", " + kScalings[scaling] + ", N " +
                    std::to_string(n) + ", K " + std::to_string(k) + ")";
    if (style == 2) return g;
    auto side = [&](const char* name, const Json& quantization) {
      const std::string text =
          std::string(name) == "config.json"
              ? Json{{"model_type", "llama"}, {"quantization_config", quantization}}.dump(2)
              : quantization.dump(2);
      g.side_files.push_back({name, std::vector<std::uint8_t>(text.begin(), text.end())});
    };
    if (style != 1) side("quantize_config.json", config);
    if (style == 1) side("config.json", config);
    if (style == 3) {
      Json second = config;
      for (const std::string& key : second_drops) second.erase(key);
      for (const auto& [key, value] : second_sets.items()) second[key] = value;
      side("config.json", second);
    }
    return g;
  }
};

// One layer P: finite codes, inverse scales of the draft's scaling, bias maybe.
void AddLayer(Fp8Draft& d, const std::string& prefix, Rng& rng) {
  std::vector<std::uint8_t> codes(d.n * d.k);
  for (auto& c : codes) {
    do {
      c = static_cast<std::uint8_t>(Pick(rng, 256));
    } while (codec::Fp8CodeIsNonFinite(d.subtype, c));
  }
  d.tensors.push_back(Tensor(prefix + "weight", kDtypes[static_cast<int>(d.subtype)], {d.n, d.k}, codes));
  std::vector<std::uint64_t> shape;
  if (d.scaling == 1) shape = {d.n};
  if (d.scaling == 2) shape = {(d.n + d.br - 1) / d.br, (d.k + d.bc - 1) / d.bc};
  std::uint64_t count = 1;
  for (std::uint64_t s : shape) count *= s;
  std::vector<std::uint8_t> scales(4 * count);
  for (std::uint64_t i = 0; i < count; ++i) PutF32(&scales, 4 * i, SomeInverseScale(rng));
  d.tensors.push_back(Tensor(prefix + "weight_scale_inv", "F32", shape, scales));
  if (Coin(rng, 3)) {
    std::vector<std::uint8_t> bias(2 * d.n);
    for (std::uint64_t i = 0; i < d.n; ++i) {
      const std::uint16_t h = codec::F32ToF16(static_cast<float>(static_cast<int>(Pick(rng, 64)) - 32) / 16.0f);
      bias[2 * i] = static_cast<std::uint8_t>(h);
      bias[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
    }
    d.tensors.push_back(Tensor(prefix + "bias", "F16", {d.n}, bias));
  }
}

// A random valid draft (block sizes dividing the shape) with LAYERS layers
// (0: one or two) and scaling SCALING (-1: any).
Fp8Draft MakeDraft(Rng& rng, int layers = 0, int scaling = -1) {
  Fp8Draft d;
  d.subtype = static_cast<Fp8Subtype>(Pick(rng, codec::kFp8SubtypeCount));
  d.scaling = scaling >= 0 ? scaling : static_cast<int>(Pick(rng, 3));
  d.br = 1 + Pick(rng, 4);
  d.bc = 1 + Pick(rng, 8);
  d.n = d.br * (1 + Pick(rng, 6));
  d.k = d.bc * (1 + Pick(rng, 6));
  // Without a config the tensors must say everything: no fnuz, no blocks.
  const bool needs_config = d.scaling == 2 || d.subtype == Fp8Subtype::kE4M3Fnuz ||
                            d.subtype == Fp8Subtype::kE5M2Fnuz;
  const int style = static_cast<int>(Pick(rng, needs_config ? 3 : 4));
  d.style = needs_config && style == 2 ? 3 : style;
  d.config = Json{{"bits", 8},
                  {"group_size", -1},
                  {"method", "fp8"},
                  {"quant_method", "fp8"},
                  {"format", codec::Fp8SubtypeName(d.subtype)},
                  {"checkpoint_format", codec::Fp8SubtypeName(d.subtype)},
                  {"weight_scale_method", kScalings[d.scaling]},
                  {"weight_block_size", d.scaling == 2 ? Json{d.br, d.bc} : Json(nullptr)},
                  {"weight_scale_semantics", "inverse"}};
  // A second source may give fewer keys (the format's pair, the scaling's
  // pair: a block method keeps its size, K7); what it gives agrees (docs/fp8.md 3, K8).
  if (d.style == 3) {
    for (const char* key : {"format", "weight_scale_method"}) {
      if (!Coin(rng, 3)) continue;
      d.second_drops.push_back(key);
      d.second_drops.push_back(std::string(key) == "format" ? "checkpoint_format" : "weight_block_size");
    }
  }
  if (Coin(rng)) {
    std::vector<std::uint8_t> dense(2 * 16);
    for (std::size_t i = 0; i < dense.size(); i += 2) dense[i + 1] = static_cast<std::uint8_t>(0x30 + Pick(rng, 16));
    d.tensors.push_back(Tensor("model.embed_tokens.weight", "F16", {4, 4}, dense));
  }
  const int count = layers != 0 ? layers : 1 + static_cast<int>(Pick(rng, 2));
  for (int i = 0; i < count; ++i) AddLayer(d, "model.layers." + std::to_string(i) + ".mlp.up_proj.", rng);
  return d;
}

const std::string kP = "model.layers.0.mlp.up_proj.";

// The draft's config made present (quantize_config.json) when it had none.
void NeedConfig(Fp8Draft& d) {
  if (d.style == 2) d.style = 0;
}

Generated Violate(const std::string& rule, Rng& rng) {
  if (rule == "FP8-001") {
    Fp8Draft d = MakeDraft(rng);
    NeedConfig(d);
    switch (Pick(rng, 6)) {
      case 0: d.config["method"] = "gptq"; return d.Write(rule, "method gptq");
      case 1: d.config["format"] = "int4"; return d.Write(rule, "format int4");
      case 2: d.config["weight_scale_semantics"] = "direct"; return d.Write(rule, "semantics direct");
      case 3: d.config["weight_scale_method"] = "channel"; return d.Write(rule, "scale method channel");
      case 4: d.config["weight_block_size"] = Json{0, 128}; return d.Write(rule, "block size 0");
      default:
        d.config["weight_scale_method"] = "block";
        d.config["weight_block_size"] = nullptr;
        return d.Write(rule, "block method without a block size");
    }
  }
  if (rule == "CFG-010") {
    // Both sources, config.json's quantization_config giving another value
    // of one key the winner (quantize_config.json) reads (docs/fp8.md 3, K8).
    Fp8Draft d = MakeDraft(rng);
    d.style = 3;
    d.second_drops.clear();
    switch (Pick(rng, 3)) {
      case 0: {
        const int other = (static_cast<int>(d.subtype) + 1 + static_cast<int>(Pick(rng, 4))) % codec::kFp8SubtypeCount;
        const char* name = codec::Fp8SubtypeName(static_cast<Fp8Subtype>(other));
        d.second_sets = Json{{"format", name}, {"checkpoint_format", name}};
        return d.Write(rule, "the sources disagree on format");
      }
      case 1: {
        const int other = (d.scaling + 1 + static_cast<int>(Pick(rng, 2))) % 3;
        d.second_sets = Json{{"weight_scale_method", kScalings[other]}};
        if (other == 2) d.second_sets["weight_block_size"] = Json{d.br, d.bc};
        return d.Write(rule, "the sources disagree on weight_scale_method");
      }
      default:
        d.second_sets = Json{{"weight_block_size", Json{d.br + 1, d.bc}}};
        if (d.scaling != 2) d.second_sets["weight_scale_method"] = nullptr;
        return d.Write(rule, "the sources disagree on weight_block_size");
    }
  }
  if (rule == "FP8-002") {
    // Two layers, the second incomplete: the first one's weight_scale_inv
    // keeps the file FP8 by detection (docs/fp8.md section 2).
    Fp8Draft d = MakeDraft(rng, 2);
    const bool weight = Coin(rng);
    d.Erase("model.layers.1.mlp.up_proj." + std::string(weight ? "weight" : "weight_scale_inv"));
    return d.Write(rule, weight ? "weight missing" : "weight_scale_inv missing");
  }
  if (rule == "FP8-003") {
    Fp8Draft d = MakeDraft(rng, 1);
    TensorWithBytes* s = d.Find(kP + "weight_scale_inv");
    switch (Pick(rng, 3)) {
      case 0:
        d.Find(kP + "weight")->spec.dtype = Coin(rng) ? "I8" : "U8";
        return d.Write(rule, "weight is not an FP8 dtype");
      case 1: {
        // E8M0 scales: the spec's weight_scale_inv is FP32 (docs/fp8.md 4).
        s->spec.dtype = "F8_E8M0";
        s->bytes.assign(s->bytes.size() / 4, 127);
        s->spec.byte_size = s->bytes.size();
        return d.Write(rule, "weight_scale_inv is F8_E8M0");
      }
      default:
        NeedConfig(d);
        d.config["format"] = d.subtype == Fp8Subtype::kE5M2 ? "float8_e4m3fn" : "float8_e5m2";
        if (d.subtype == Fp8Subtype::kE5M2Fnuz) d.config["format"] = "e8m0";
        return d.Write(rule, "the config's format is not the weight's dtype");
    }
  }
  if (rule == "FP8-004") {
    Fp8Draft d = MakeDraft(rng, 1, static_cast<int>(Pick(rng, 3)));
    TensorWithBytes* s = d.Find(kP + "weight_scale_inv");
    if (d.scaling == 0) {
      NeedConfig(d);
      d.config["weight_scale_method"] = "row";
      return d.Write(rule, "tensor scale, config says row");
    }
    s->spec.shape[0] += 1;
    const std::uint64_t row = d.scaling == 1 ? 4 : 4 * s->spec.shape[1];
    s->bytes.resize(s->bytes.size() + row, 0x3f);
    s->spec.byte_size = s->bytes.size();
    return d.Write(rule, "weight_scale_inv has an extra row");
  }
  if (rule == "FP8-005") {
    Fp8Draft d = MakeDraft(rng, 1, 2);
    d.config["weight_scale_method"] = nullptr;
    d.config["weight_block_size"] = nullptr;
    if (Coin(rng)) d.style = 2;
    return d.Write(rule, "block scales without a block size");
  }
  if (rule == "FP8-006") {
    Fp8Draft d = MakeDraft(rng, 1);
    TensorWithBytes* s = d.Find(kP + "weight_scale_inv");
    const std::size_t at = 4 * Pick(rng, s->bytes.size() / 4);
    const float bad[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    PutF32(&s->bytes, at, bad[Pick(rng, 5)]);
    return d.Write(rule, "an inverse scale is zero or not finite");
  }
  if (rule == "FP8-007") {
    Fp8Draft d = MakeDraft(rng, 1);
    TensorWithBytes* w = d.Find(kP + "weight");
    std::vector<std::uint8_t> bad;
    for (int c = 0; c < 256; ++c) {
      if (codec::Fp8CodeIsNonFinite(d.subtype, static_cast<std::uint8_t>(c))) bad.push_back(static_cast<std::uint8_t>(c));
    }
    w->bytes[Pick(rng, w->bytes.size())] = bad[Pick(rng, bad.size())];
    return d.Write(rule, "a NaN code in the weight");
  }
  if (rule == "FP8-101") {
    Fp8Draft d = MakeDraft(rng, 0, 2);
    // Grow every weight by one column or row: the last block is partial and
    // the scale grid, [ceil(N/br), ceil(K/bc)], grows with it when br, bc > 1.
    d.br = std::max<std::uint64_t>(d.br, 2);
    d.bc = std::max<std::uint64_t>(d.bc, 2);
    d.config["weight_block_size"] = Json{d.br, d.bc};
    const std::uint64_t blocks = 1 + Pick(rng, 3);  // draws in sequence: no operand order left to the compiler
    d.n = d.br * blocks + (Coin(rng) ? 1 : 0);
    d.k = d.bc * (1 + Pick(rng, 3)) + 1;
    d.tensors.clear();
    AddLayer(d, kP, rng);
    return d.Write(rule, "block size does not divide the weight");
  }
  // Not an FP8 rule: a valid file (the registry only asks for listed rules).
  Fp8Draft d = MakeDraft(rng);
  return d.Write("", rule + " is not an FP8 rule; a valid file");
}

}  // namespace

std::vector<std::string> Fp8ViolableRules() {
  return {"FP8-001", "FP8-002", "FP8-003", "FP8-004", "FP8-005", "FP8-006", "FP8-007", "FP8-101", "CFG-010"};
}

Generated Fp8Violation(std::string_view rule, Rng& rng) { return Violate(std::string(rule), rng); }

Generated Fp8Valid(Rng& rng) {
  Fp8Draft d = MakeDraft(rng);
  static const char* const kStyles[] = {"quantize_config.json", "config.json", "no config",
                                        "quantize_config.json and config.json"};
  return d.Write("", std::string("valid file, ") + kStyles[d.style]);
}

}  // namespace qd::gen
