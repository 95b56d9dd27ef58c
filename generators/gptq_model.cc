// gptq_model.cc: the GPTQ generator's valid draft (one or two layers, dense
// tensors beside them, one or two agreeing config sources; docs/gptq.md
// sections 1 and 2), its safetensors file, and the tensor edits violations
// make to it. See gptq_model.h.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "generators/gptq_model.h"
#include "generators/tensor_list.h"

namespace qd::gen::gptq_gen {
namespace {

const std::vector<std::string> kModules = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                           "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                           "mlp.down_proj"};

}  // namespace

codec::TensorWithBytes* Draft::Find(const std::string& name) { return FindTensor(tensors, name); }

void Draft::Remove(const std::string& name) { RemoveTensor(tensors, name); }

Generated Draft::Write(std::string rule, std::string what) const {
  Generated g;
  g.bytes = codec::SerializeSafetensors(tensors, &metadata);
  g.expected_rule = std::move(rule);
  g.description = std::move(what);
  for (const Source& s : sources) g.side_files.push_back({s.name, s.Bytes()});
  return g;
}

Draft MakeDraft(Rng& rng, const DraftOptions& o) {
  Draft d;
  d.format = o.format >= 0 ? o.format : static_cast<int>(Pick(rng, 3));
  if (o.bits > 0) {
    d.bits = o.bits;
  } else if (d.format == 2) {
    d.bits = 2 + static_cast<int>(Pick(rng, 7));
  } else {
    d.bits = OneOf<int>(rng, {2, 3, 4, 8});
  }
  d.sym = Coin(rng);
  d.desc_act = Coin(rng);
  const int layer_count = o.layers > 0 ? o.layers : 1 + static_cast<int>(Pick(rng, 2));
  std::vector<std::int64_t> ks, ns;
  for (int i = 0; i < layer_count; ++i) {
    ks.push_back(32 * (1 + static_cast<std::int64_t>(Pick(rng, i == 0 ? 8 : 4))));
    ns.push_back(32 * (1 + static_cast<std::int64_t>(Pick(rng, 4))));
  }
  if (o.group_size != 0) {
    d.group_size = o.group_size;
  } else {
    switch (Pick(rng, 6)) {
      case 0: d.group_size = -1; break;
      case 1: d.group_size = OneOf<std::int64_t>(rng, {32, 64, 128}); break;
      case 2: d.group_size = 1 + static_cast<std::int64_t>(Pick(rng, 300)); break;  // maybe > K
      case 3: d.group_size = OneOf<std::int64_t>(rng, {24, 40, 48, 96, 100}); break;  // partial last group
      case 4: d.group_size = 1 + static_cast<std::int64_t>(Pick(rng, 8)); break;  // many groups
      default: d.group_size = 128; break;
    }
  }
  const int scales_dtype = static_cast<int>(Pick(rng, 3));
  const int bias_dtype = Coin(rng, 3) ? static_cast<int>(Pick(rng, 3)) : -1;
  const int g_idx_mode = static_cast<int>(Pick(rng, 3));
  const bool bare = layer_count == 1 && Coin(rng, 12);
  const std::uint64_t base_layer = Pick(rng, 30);
  std::vector<codec::TensorWithBytes> all;
  for (int i = 0; i < layer_count; ++i) {
    LayerInfo info;
    GptqLayerParams& p = info.params;
    p.prefix = bare ? std::string() :
               "model.layers." + std::to_string(base_layer + i) + "." + OneOf(rng, kModules) + ".";
    if (i == 1 && p.prefix == d.layers[0].params.prefix) p.prefix = "model.layers.99.mlp.up_proj.";
    p.format = d.format;
    p.bits = d.bits;
    p.in_features = ks[i];
    p.out_features = ns[i];
    p.group_size = d.group_size;
    p.g_idx_mode = Coin(rng, 4) ? static_cast<int>(Pick(rng, 3)) : g_idx_mode;
    p.scales_dtype = Coin(rng, 5) ? static_cast<int>(Pick(rng, 3)) : scales_dtype;
    p.bias_dtype = bias_dtype;
    p.zero_mode = Coin(rng, 8) ? 1 : 0;
    if (o.flooded_zero && d.format == 0 && Coin(rng, 10)) p.zero_mode = 2;
    info.groups = NGroups(p.in_features, p.group_size);
    for (auto& t : BuildGptqLayer(p, rng)) all.push_back(std::move(t));
    d.layers.push_back(info);
  }
  // Dense tensors beside the layers.
  if (!bare && Coin(rng, 3)) {
    all.push_back({{"model.norm.weight", "F32", {8}, 0}, FloatBytes(2, 8, rng)});
  }
  if (!bare && Coin(rng, 4)) {
    all.push_back({{"lm_head.weight", Coin(rng) ? "F16" : "BF16", {2, 16}, 0},
                   FloatBytes(Coin(rng) ? 0 : 1, 32, rng)});
  }
  if (!bare && Coin(rng, 6)) {  // an integer tensor outside any layer: left out of the decode
    all.push_back({{"model.rotary.inv_freq_idx", "I32", {4}, 0}, WordsBytes({0, 1, 2, 3})});
  }
  if (!bare && Coin(rng, 6)) {  // a bias without a layer is an ordinary tensor
    all.push_back({{"model.layers.0.input_layernorm.bias", "F16", {4}, 0}, FloatBytes(0, 4, rng)});
  }
  if (Coin(rng, 3)) std::shuffle(all.begin(), all.end(), rng);
  d.tensors = std::move(all);
  if (Coin(rng, 4)) {  // AutoGPTQ's metadata keys: never read (not a config source)
    d.metadata.emplace_back("gptq_bits", "7");
    d.metadata.emplace_back("gptq_checkpoint_format", "marlin");
  }

  // Config sources: a plain one, or config.json alone, or a plain one plus
  // an agreeing config.json.
  const int count = o.sources > 0 ? o.sources : 1 + static_cast<int>(Pick(rng, 2));
  if (count == 1) {
    if (!o.plain_winner && Coin(rng, 4)) {
      d.sources.push_back(NestedSource(MakeConfig(d, rng), rng));
    } else {
      d.sources.push_back(RandomPlainSource(d, rng));
    }
  } else {
    d.sources.push_back(RandomPlainSource(d, rng));
    Json other = MakeConfig(d, rng);
    // Agreeing sym / desc_act (disagreement is CFG-102).
    Json& w = d.Winner();
    for (const char* k : {"sym", "desc_act"}) {
      if (w.contains(k) && !w[k].is_null() && other.contains(k) && !other[k].is_null()) other[k] = w[k];
    }
    if (w.contains("zero_point") && !w["zero_point"].is_null() &&
        (!w.contains("sym") || w["sym"].is_null()) && other.contains("sym") && !other["sym"].is_null()) {
      other["sym"] = !w["zero_point"].get<bool>();
    }
    if (Coin(rng, 3)) {
      d.sources.push_back(PlainSource(d.sources[0].name == "quant_config.json" ? "quantize_config.json"
                                                                                 : "quant_config.json",
                                      other));
    } else {
      d.sources.push_back(NestedSource(other, rng));
    }
  }
  for (Source& s : d.sources) {
    if (Coin(rng, 6)) s.padding_before = OneOf<std::string>(rng, {" ", "\n", "\t\r\n "});
    if (Coin(rng, 6)) s.padding_after = OneOf<std::string>(rng, {"\n", "  ", "\r\n"});
  }
  return d;
}

const LayerInfo& SomeLayer(const Draft& d, Rng& rng) { return d.layers[Pick(rng, d.layers.size())]; }

std::uint64_t ElementSize(const std::string& dtype) {
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "U8" || dtype == "I8" || dtype == "BOOL") return 1;
  return 4;
}

void Resize2D(codec::TensorWithBytes* t, std::uint64_t rows, std::uint64_t cols) {
  const std::uint64_t es = ElementSize(t->spec.dtype);
  const std::uint64_t old_rows = t->spec.shape[0], old_cols = t->spec.shape[1];
  std::vector<std::uint8_t> out(rows * cols * es);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < cols; ++c) {
      const std::uint64_t sr = old_rows == 0 ? 0 : r % old_rows, sc = old_cols == 0 ? 0 : c % old_cols;
      for (std::uint64_t b = 0; b < es; ++b) {
        out[(r * cols + c) * es + b] =
            old_rows && old_cols ? t->bytes[(sr * old_cols + sc) * es + b] : 0x11;
      }
    }
  }
  t->bytes = std::move(out);
  t->spec.shape = {rows, cols};
}

void Resize1D(codec::TensorWithBytes* t, std::uint64_t n) {
  const std::uint64_t es = ElementSize(t->spec.dtype);
  const std::uint64_t old = t->spec.shape[0];
  std::vector<std::uint8_t> out(n * es);
  for (std::uint64_t i = 0; i < n * es; ++i) out[i] = old ? t->bytes[i % (old * es)] : 0;
  t->bytes = std::move(out);
  t->spec.shape = {n};
}

void SetI32(codec::TensorWithBytes* t, std::uint64_t index, std::int32_t v) {
  const auto u = static_cast<std::uint32_t>(v);
  for (int b = 0; b < 4; ++b) t->bytes[4 * index + b] = static_cast<std::uint8_t>(u >> (8 * b));
}

}  // namespace qd::gen::gptq_gen
