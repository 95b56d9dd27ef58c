// recognised.cc: valid and rule-targeted instances of the recognised
// families (docs/recognised.md): EXL3 (with its config's tensor_storage),
// VPTQ, QQQ, ParoQuant and BitBLAS (with its config's bitblas label) layers
// beside a dense tensor, and one violation generator per REC rule that
// breaks exactly that rule.
#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "generators/generators.h"

namespace qd::gen {
namespace {

using codec::TensorWithBytes;

struct Spec {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
};

// A file before it is written: tensors (bytes filled at Write), and for EXL3
// the tensor_storage description and how the config is named; for BitBLAS
// the storage dtype, bits and the config key that carries the label.
struct Draft {
  std::string family;
  std::string prefix;
  std::vector<Spec> tensors;
  bool config_nested = false;  // config.json's quantization_config, else quantize_config.json
  std::vector<std::uint8_t> config_override;  // non-empty: the config bytes as given
  bool no_config = false;
  // EXL3: the stored_tensors entries, by qualified name.
  std::map<std::string, Spec> stored;
  // BitBLAS: every layer shares them (one config).
  std::string storage_dtype;
  std::uint64_t bits = 0;
  std::string label_key;

  Spec* Find(const std::string& suffix) {
    for (Spec& s : tensors) {
      if (s.name == prefix + suffix) return &s;
    }
    return nullptr;
  }
  void Erase(const std::string& suffix) {
    std::erase_if(tensors, [&](const Spec& s) { return s.name == prefix + suffix; });
  }
};

std::uint64_t ItemSize(const std::string& dtype) {
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "I64" || dtype == "F64") return 8;
  return 1;
}

// Finite values in [0.5, 1) (either sign) for floating dtypes, any bits else.
std::vector<std::uint8_t> Bytes(const Spec& s, Rng& rng) {
  std::uint64_t n = 1;
  for (std::uint64_t d : s.shape) n *= d;
  const std::uint64_t size = ItemSize(s.dtype);
  std::vector<std::uint8_t> out(n * size);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t bits = rng();
    if (s.dtype == "F16") bits = 0x3800u | (bits & 0x83FFu);
    if (s.dtype == "BF16") bits = 0x3F00u | (bits & 0x807Fu);
    if (s.dtype == "F32") bits = 0x3F000000u | (bits & 0x807FFFFFu);
    for (std::uint64_t b = 0; b < size; ++b) out[i * size + b] = static_cast<std::uint8_t>(bits >> (8 * b));
  }
  return out;
}

const char* TorchName(const std::string& dtype) {
  static const std::map<std::string, const char*> names = {
      {"F16", "torch.float16"}, {"BF16", "bfloat16"}, {"F32", "torch.float32"},
      {"I16", "torch.int16"},   {"I32", "int32"},     {"I64", "torch.int64"}};
  return names.at(dtype);
}

std::uint64_t Between(Rng& rng, std::uint64_t lo, std::uint64_t hi) { return lo + Pick(rng, hi - lo + 1); }

// One layer of FAMILY under PREFIX, shapes by section 4 of the contract.
void AddLayer(Draft* d, const std::string& family, const std::string& p, Rng& rng) {
  auto add = [&](const std::string& suffix, const std::string& dtype, std::vector<std::uint64_t> shape) {
    d->tensors.push_back({p + suffix, dtype, std::move(shape)});
  };
  if (family == "exl3") {
    const std::uint64_t k = 16 * Between(rng, 1, 3), n = 16 * Between(rng, 1, 3);
    add("trellis", "I16", {k / 16, n / 16, 16 * Between(rng, 1, 4)});
    add("suh", "F16", {k});
    add("svh", "F16", {n});
    if (Coin(rng)) add("mcg", "I32", {});
    if (Coin(rng)) add("bias", "F16", {n});
    for (const Spec& s : d->tensors) {
      if (s.name.compare(0, p.size(), p) == 0) d->stored[s.name] = s;
    }
  } else if (family == "vptq") {
    const std::uint64_t groups = Between(rng, 1, 3), centroids = Between(rng, 2, 8), len = Between(rng, 1, 4);
    add("centroids.weight", Coin(rng) ? "F16" : "F32", {groups, centroids * len});
    add("indices", "I32", {groups, Between(rng, 1, 4), Between(rng, 1, 3)});
    if (Coin(rng)) add("res_centroids.weight", "F16", {groups, Between(rng, 1, 4) * len});
    if (Coin(rng)) {
      add("outlier_centroids.weight", "F16", {1, len * 2});
      add("outlier_indices", "I32", {Between(rng, 1, 4)});
    }
    if (Coin(rng)) {
      const std::uint64_t norm = Between(rng, 1, 8);
      add("weight_scale", "F16", {norm});
      add("weight_bias", "F16", {norm});
    }
    if (Coin(rng)) {
      // Two draws, one statement each: as arguments of one call their order
      // would be the compiler's (GCC and clang differ; corpus regeneration).
      const char* perm_dtype = Coin(rng) ? "I32" : "I64";
      add("perm", perm_dtype, {Between(rng, 1, 8)});
    }
    if (Coin(rng)) add("bias", "F16", {Between(rng, 1, 8)});
  } else if (family == "qqq") {
    const std::uint64_t k = 16 * Between(rng, 1, 8), n = Between(rng, 1, 8);
    add("B", "I32", {k / 16, 2 * n});
    add("s_channel", "F32", {1, n});
    if (Coin(rng)) {
      add("s_group", "F16", {0});
    } else {
      std::vector<std::uint64_t> divisors;
      for (std::uint64_t g = 1; g <= k; ++g) {
        if (k % g == 0) divisors.push_back(g);
      }
      add("s_group", "F16", {divisors[Pick(rng, divisors.size())], n});
    }
    if (Coin(rng)) add("bias", "F16", {n});
  } else if (family == "bitblas") {
    // scales [N, G], zeros [G, N*b/storage_bits] (spec 004 BITBLAS); qweight's
    // shape is BitBLAS's own: [N, K*b/storage_bits] here.
    const std::uint64_t storage_bits = 8 * ItemSize(d->storage_dtype);
    const std::uint64_t groups = Between(rng, 1, 3), k = groups * 32 * Between(rng, 1, 2);
    const std::uint64_t n = Between(rng, 1, 3) * 32 / d->bits;
    add("qweight", d->storage_dtype, {n, k * d->bits / storage_bits});
    add("scales", Coin(rng) ? "F16" : "BF16", {n, groups});
    const std::uint64_t zeros = Pick(rng, 4);  // none, qzeros, zeros, an empty qzeros
    if (zeros == 1 || zeros == 2) {
      add(zeros == 1 ? "qzeros" : "zeros", d->storage_dtype, {groups, n * d->bits / storage_bits});
    } else if (zeros == 3) {
      add("qzeros", d->storage_dtype, {0});
    }
    if (Coin(rng)) add("bias", "F16", {n});
  } else {  // paroquant
    const std::uint64_t groups = Between(rng, 1, 3), k = groups * Between(rng, 1, 4) * 8;
    const std::uint64_t words = Between(rng, 1, 3);
    add("qweight", "I32", {k, words});
    add("qzeros", "I32", {groups, words});
    add("scales", Coin(rng) ? "F16" : "BF16", {groups, words * 8});
    add("theta", "F32", {Between(rng, 1, 4), k / 2});
    add("pairs", "I16", {Between(rng, 1, 4), k});
    add("channel_scales", "F16", {1, k});
    if (Coin(rng)) add("bias", "F16", {words * 8});
  }
}

const std::vector<std::string>& FamilyNames() {
  static const std::vector<std::string> names = {"exl3", "vptq", "qqq", "paroquant", "bitblas"};
  return names;
}

Draft RandomDraft(Rng& rng, const std::string& family) {
  Draft d;
  d.family = family;
  if (family == "bitblas") {
    static const char* const kStorage[] = {"I8", "U8", "I16", "I32"};
    static const char* const kLabelKeys[] = {"format", "checkpoint_format", "quant_method", "method"};
    d.storage_dtype = kStorage[Pick(rng, 4)];
    d.bits = std::uint64_t{2} << Pick(rng, 3);  // 2, 4, 8: GPTQ_BITBLAS's bits
    d.label_key = kLabelKeys[Pick(rng, 4)];
  }
  const std::uint64_t layers = Between(rng, 1, 2);
  for (std::uint64_t i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".mlp.down_proj.";
    if (i == 0) d.prefix = p;
    AddLayer(&d, family, p, rng);
  }
  // Dense tensors of no layer: decoded as the container decodes them.
  d.tensors.push_back({"model.norm.weight", Coin(rng) ? "F32" : "F16", {Between(rng, 1, 16)}});
  if (Coin(rng)) d.tensors.push_back({"model.embed_tokens.weight", "BF16", {Between(rng, 1, 4), 8}});
  d.config_nested = Coin(rng);
  std::shuffle(d.tensors.begin(), d.tensors.end(), rng);
  return d;
}

// GPT-QModel's config of a BitBLAS export (spec 004: the GPTQ export
// family's keys, the label in one of the method or format keys).
nlohmann::json BitblasConfig(const Draft& d) {
  nlohmann::json q = {{"bits", d.bits}, {"group_size", -1}, {"desc_act", false}, {"sym", true}};
  if (d.label_key != "quant_method" && d.label_key != "method") q["quant_method"] = "gptq";
  q[d.label_key] = "bitblas";
  return q;
}

std::vector<std::uint8_t> ConfigBytes(const Draft& d) {
  if (d.family == "bitblas") {
    const nlohmann::json q = BitblasConfig(d);
    const std::string text = (d.config_nested ? nlohmann::json{{"quantization_config", q}} : q).dump();
    return {text.begin(), text.end()};
  }
  nlohmann::json storage = nlohmann::json::object();
  for (const auto& [name, s] : d.stored) {
    const std::string module = name.substr(0, name.rfind('.'));
    storage[module]["stored_tensors"][name] = {{"shape", s.shape}, {"torch_dtype", TorchName(s.dtype)}};
  }
  nlohmann::json q = {{"quant_method", "exl3"}, {"format", "exl3"}, {"bits_per_weight", 4.0},
                      {"tensor_storage", storage}};
  const nlohmann::json config = d.config_nested ? nlohmann::json{{"quantization_config", q}} : q;
  const std::string text = config.dump();
  return {text.begin(), text.end()};
}

Generated Write(const Draft& d, const std::string& rule, const std::string& what, Rng& rng) {
  std::vector<TensorWithBytes> tensors;
  for (const Spec& s : d.tensors) {
    std::uint64_t n = ItemSize(s.dtype);
    for (std::uint64_t x : s.shape) n *= x;
    tensors.push_back({{s.name, s.dtype, s.shape, n}, Bytes(s, rng)});
  }
  const codec::MetadataList metadata = {{"format", "pt"}};
  Generated g{codec::SerializeSafetensors(tensors, &metadata), rule,
              d.family + ": " + what, {}};
  if ((d.family == "exl3" || d.family == "bitblas") && !d.no_config) {
    g.side_files.push_back({d.config_nested ? "config.json" : "quantize_config.json",
                            d.config_override.empty() ? ConfigBytes(d) : d.config_override});
  }
  return g;
}

std::string Text(const nlohmann::json& j) { return j.dump(); }
std::vector<std::uint8_t> Utf8(const std::string& s) { return {s.begin(), s.end()}; }

// One violation per rule, from a valid draft of a family the rule applies to.
Generated Violate(std::string_view rule, Rng& rng) {
  const std::string r(rule);
  if (r == "REC-002") {
    static const std::map<std::string, std::vector<std::string>> required = {
        {"exl3", {"trellis"}},
        {"vptq", {"centroids.weight", "indices", "outlier_centroids.weight", "outlier_indices"}},
        {"qqq", {"B", "s_channel", "s_group"}},
        {"paroquant", {"qweight", "qzeros", "scales", "theta", "pairs", "channel_scales"}},
        {"bitblas", {"qweight", "scales"}}};
    const std::string family = FamilyNames()[Pick(rng, FamilyNames().size())];
    Draft d = RandomDraft(rng, family);
    const auto& options = required.at(family);
    const std::string drop = options[Pick(rng, options.size())];
    if (drop.rfind("outlier", 0) == 0) {  // the pair with one half missing
      d.Erase("outlier_centroids.weight");
      d.Erase("outlier_indices");
      const bool keep_indices = drop == "outlier_centroids.weight";
      d.tensors.push_back(keep_indices ? Spec{d.prefix + "outlier_indices", "I32", {3}}
                                       : Spec{d.prefix + "outlier_centroids.weight", "F16", {1, 2}});
    } else {
      d.Erase(drop);
    }
    return Write(d, r, "without " + d.prefix + drop, rng);
  }
  if (r == "REC-003") {
    const std::string family = FamilyNames()[1 + Pick(rng, FamilyNames().size() - 1)];
    Draft d = RandomDraft(rng, family);
    static const std::map<std::string, std::vector<std::pair<std::string, std::string>>> bad_dtype = {
        {"vptq", {{"centroids.weight", "I32"}, {"indices", "I64"}}},
        {"qqq", {{"B", "U8"}, {"s_channel", "F16"}, {"s_group", "F32"}}},
        {"paroquant", {{"qweight", "I16"}, {"scales", "I32"}}},
        {"bitblas", {{"qweight", "F16"}, {"scales", "I32"}, {"scales", "U8"}}}};
    const auto& options = bad_dtype.at(family);
    const auto& [suffix, dtype] = options[Pick(rng, options.size())];
    Spec* s = d.Find(suffix);
    std::uint64_t elements = 1;
    for (std::uint64_t x : s->shape) elements *= x;
    // An empty s_group and BitBLAS's qweight have any rank (section 4): only
    // their dtype can be wrong.
    if (Coin(rng) || elements == 0 || (family == "bitblas" && suffix == "qweight")) {
      s->dtype = dtype;
      return Write(d, r, suffix + " as " + dtype, rng);
    }
    s->shape.push_back(1);  // one rank more, same values
    return Write(d, r, suffix + " with rank " + std::to_string(s->shape.size()), rng);
  }
  if (r == "REC-004") {
    const std::string family = FamilyNames()[1 + Pick(rng, FamilyNames().size() - 1)];
    Draft d = RandomDraft(rng, family);
    if (family == "bitblas") {  // N or G zero: the one equation every layer has
      const std::size_t dim = Pick(rng, 2);
      d.Find("scales")->shape[dim] = 0;
      return Write(d, r, "scales.shape[" + std::to_string(dim) + "] zero", rng);
    }
    static const std::map<std::string, std::vector<std::pair<std::string, std::size_t>>> dims = {
        {"vptq", {{"indices", 0}}},
        {"qqq", {{"B", 1}, {"s_channel", 0}, {"s_channel", 1}}},
        {"paroquant", {{"scales", 1}, {"qzeros", 0}, {"qzeros", 1}}}};
    const auto& options = dims.at(family);
    const auto& [suffix, dim] = options[Pick(rng, options.size())];
    d.Find(suffix)->shape[dim] += 1;
    return Write(d, r, suffix + ".shape[" + std::to_string(dim) + "] one more", rng);
  }
  if (r == "REC-005") {
    Draft d = RandomDraft(rng, "qqq");
    d.tensors.push_back({d.prefix + "g_idx", "I32", {d.Find("B")->shape[0] * 16}});
    return Write(d, r, "QQQ with g_idx", rng);
  }
  if (r == "REC-006") {
    Draft d = RandomDraft(rng, "exl3");
    const std::uint64_t how = Pick(rng, 6);
    const std::string name = d.stored.begin()->first;
    nlohmann::json bad = nlohmann::json::object();
    if (how == 0) {
      d.no_config = true;
    } else if (how == 1) {
      d.config_override = Utf8("{\"tensor_storage\": {}, \"tensor_storage\": {}}");
    } else if (how == 2) {
      d.config_override = Utf8(d.config_nested ? "{\"quantization_config\": [1]}" : "{\"bits\": 4}");
    } else if (how == 3) {
      bad["tensor_storage"]["m"] = {{"stored_tensors", nlohmann::json::array()}};
    } else if (how == 4) {
      bad["tensor_storage"]["m"]["stored_tensors"][name] = {{"shape", nlohmann::json::array({1.5})}, {"torch_dtype", "int16"}};
    } else {
      bad["tensor_storage"]["m"]["stored_tensors"][name] = {{"shape", nlohmann::json::array({1})}, {"torch_dtype", 16}};
    }
    if (how >= 3) {
      d.config_override = Utf8(Text(d.config_nested ? nlohmann::json{{"quantization_config", bad}} : bad));
    }
    return Write(d, r, "tensor_storage broken (" + std::to_string(how) + ")", rng);
  }
  if (r == "REC-007") {
    Draft d = RandomDraft(rng, "exl3");
    auto it = d.stored.begin();
    std::advance(it, Pick(rng, d.stored.size()));
    const std::uint64_t how = Pick(rng, 4);
    if (how == 0) {
      d.stored[d.prefix + "sv"] = {d.prefix + "sv", "F16", {4}};  // not in the file
    } else if (how == 1) {
      it->second.shape.push_back(1);
    } else if (how == 2) {
      it->second.dtype = it->second.dtype == "I32" ? "I64" : "I32";
    } else {
      d.stored.erase(it);
    }
    return Write(d, r, "tensor_storage disagrees (" + std::to_string(how) + ")", rng);
  }
  if (r == "REC-008") {
    Draft d = RandomDraft(rng, "bitblas");
    d.Erase("qzeros");
    d.Erase("zeros");
    const std::vector<std::uint64_t> scales = d.Find("scales")->shape;
    const std::uint64_t width = scales[0] * d.bits / (8 * ItemSize(d.storage_dtype));
    d.tensors.push_back({d.prefix + "qzeros", d.storage_dtype, {scales[1], width}});
    d.tensors.push_back({d.prefix + "zeros", d.storage_dtype, {scales[1], width}});
    return Write(d, r, "qzeros and its alias zeros both stored", rng);
  }
  // REC-101: every accepted file warns with it.
  return Write(RandomDraft(rng, FamilyNames()[Pick(rng, FamilyNames().size())]), r, "valid", rng);
}

}  // namespace

Generated RecognisedValid(Rng& rng) {
  return Write(RandomDraft(rng, FamilyNames()[Pick(rng, FamilyNames().size())]), "", "valid", rng);
}

std::vector<std::string> RecognisedViolableRules() {
  return {"REC-002", "REC-003", "REC-004", "REC-005", "REC-006", "REC-007", "REC-008", "REC-101"};
}

Generated RecognisedViolation(std::string_view rule, Rng& rng) { return Violate(rule, rng); }

}  // namespace qd::gen
