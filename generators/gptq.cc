// Generators for GPTQ checkpoints (rules GPTQ-*, CFG-*; docs/gptq.md).
// Layers are packed with the codec's encoder (codec::GptqEncode) and written
// with codec::SerializeSafetensors; the config sources are JSON objects
// spelled with every alias docs/gptq.md section 1 allows. Each violation
// starts from a valid draft and breaks one thing, chosen so that every step
// before it in docs/gptq.md section 3 (C1..C11, then L1..L10 per layer)
// passes.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/safetensors.h"
#include "generators/generators.h"

namespace qd::gen {
namespace {

using Json = nlohmann::ordered_json;


template <typename T>
T OneOf(Rng& rng, const std::vector<T>& options) {
  return options[Pick(rng, options.size())];
}

std::vector<std::uint8_t> WordsBytes(const std::vector<std::int32_t>& words) {
  std::vector<std::uint8_t> out(words.size() * 4);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto u = static_cast<std::uint32_t>(words[i]);
    for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<std::uint8_t>(u >> (8 * b));
  }
  return out;
}

const char* const kFormatNames[] = {"gptq", "gptq_v2", "gptq_p"};
const char* const kFloatDtypes[] = {"F16", "BF16", "F32"};

codec::GptqFormat FormatOf(int f) {
  return f == 0 ? codec::GptqFormat::kV1 : f == 1 ? codec::GptqFormat::kV2 : codec::GptqFormat::kPlanar;
}

std::int64_t NGroups(std::int64_t k, std::int64_t gs) { return gs == -1 ? 1 : (k + gs - 1) / gs; }

// One finite value of a float dtype as raw bits: normal, subnormal, zero,
// negative, largest finite.
std::uint32_t FiniteBits(int dtype, Rng& rng) {
  const std::uint32_t sign = Coin(rng, 3) ? 0u : 1u;
  switch (dtype) {
    case 0: {  // F16
      std::uint32_t h;
      switch (Pick(rng, 8)) {
        case 0: h = 0; break;
        case 1: h = 1 + static_cast<std::uint32_t>(Pick(rng, 0x3ff)); break;  // subnormal
        case 2: h = 0x7bff; break;
        default: h = 0x1c00 + static_cast<std::uint32_t>(Pick(rng, 0x2800)); break;  // ~2^-8..2^2
      }
      return h | (sign << 15);
    }
    case 1: {  // BF16
      std::uint32_t b;
      switch (Pick(rng, 8)) {
        case 0: b = 0; break;
        case 1: b = 1 + static_cast<std::uint32_t>(Pick(rng, 0x7f)); break;
        case 2: b = 0x7f7f; break;
        default: b = 0x3b80 + static_cast<std::uint32_t>(Pick(rng, 0x0500)); break;
      }
      return b | (sign << 15);
    }
    default: {  // F32
      std::uint32_t f;
      switch (Pick(rng, 8)) {
        case 0: f = 0; break;
        case 1: f = 1 + static_cast<std::uint32_t>(Pick(rng, 0x7fffff)); break;
        case 2: f = 0x7f7fffff; break;
        case 3: f = static_cast<std::uint32_t>(rng()) & 0x7f7fffffu; break;  // any finite
        default: f = 0x3b800000u + static_cast<std::uint32_t>(Pick(rng, 0x05000000u)); break;
      }
      return f | (sign << 31);
    }
  }
}

std::vector<std::uint8_t> FloatBytes(int dtype, std::uint64_t count, Rng& rng) {
  const int size = dtype == 2 ? 4 : 2;
  std::vector<std::uint8_t> out(count * size);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint32_t v = FiniteBits(dtype, rng);
    for (int b = 0; b < size; ++b) out[i * size + b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return out;
}

}  // namespace

std::vector<codec::TensorWithBytes> BuildGptqLayer(const GptqLayerParams& p, Rng& rng) {
  const std::int64_t K = p.in_features, N = p.out_features;
  const std::int64_t G = NGroups(K, p.group_size);
  const std::int32_t top = (1 << p.bits) - 1;
  std::vector<std::int32_t> codes(static_cast<std::size_t>(K * N));
  const bool edgy = Coin(rng, 4);
  for (auto& c : codes) {
    c = edgy && Coin(rng) ? (Coin(rng) ? 0 : top) : static_cast<std::int32_t>(Pick(rng, top + 1));
  }
  std::vector<std::int32_t> zeros(static_cast<std::size_t>(G * N));
  const std::int32_t lo = p.format == 0 ? 1 : 0;
  const std::int32_t hi = top;  // v1: 2^b only on request (zero_mode 2, GPTQ-107)
  for (auto& z : zeros) {
    switch (p.zero_mode) {
      case 1: z = lo; break;
      case 2: z = p.format == 0 ? top + 1 : top; break;
      default:
        z = edgy && Coin(rng) ? (Coin(rng) ? lo : hi)
                              : lo + static_cast<std::int32_t>(Pick(rng, hi - lo + 1));
    }
  }
  codec::GptqPacked packed;
  codec::GptqPackError error;
  codec::GptqEncode(FormatOf(p.format), p.bits, K, N, G, codes, zeros, &packed, &error);

  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k) {
    g_idx[k] = static_cast<std::int32_t>(p.group_size == -1 ? 0 : k / p.group_size);
  }
  if (p.g_idx_mode == 1) {
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
  } else if (p.g_idx_mode == 2) {
    for (auto& g : g_idx) g = static_cast<std::int32_t>(Pick(rng, static_cast<std::uint64_t>(G)));
  }

  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  std::vector<codec::TensorWithBytes> out;
  out.push_back({{p.prefix + "qweight", "I32", {u(K * p.bits / 32), u(N)}, 0}, WordsBytes(packed.qweight)});
  out.push_back({{p.prefix + "qzeros", "I32", {u(G), u(N * p.bits / 32)}, 0}, WordsBytes(packed.qzeros)});
  out.push_back({{p.prefix + "scales", kFloatDtypes[p.scales_dtype], {u(G), u(N)}, 0},
                 FloatBytes(p.scales_dtype, u(G * N), rng)});
  out.push_back({{p.prefix + "g_idx", "I32", {u(K)}, 0}, WordsBytes(g_idx)});
  if (p.bias_dtype >= 0) {
    out.push_back({{p.prefix + "bias", kFloatDtypes[p.bias_dtype], {u(N)}, 0},
                   FloatBytes(p.bias_dtype, u(N), rng)});
  }
  return out;
}

std::string GptqConfigText(int format, int bits, std::int64_t group_size) {
  Json j;
  j["bits"] = bits;
  j["group_size"] = group_size;
  j["desc_act"] = false;
  j["sym"] = true;
  j["quant_method"] = "gptq";
  j["checkpoint_format"] = kFormatNames[format];
  return j.dump();
}

namespace {

// A config source: its name, and either a JSON object (the plain config, or
// the config.json top level holding quantization_config) or raw bytes.
struct Source {
  std::string name;
  Json top;
  bool nested = false;
  bool use_raw = false;
  std::string raw;
  std::string padding_before, padding_after;  // JSON whitespace around the value

  Json& Config() { return nested ? top["quantization_config"] : top; }
  std::vector<std::uint8_t> Bytes() const {
    const std::string text = use_raw ? raw : padding_before + top.dump() + padding_after;
    return {text.begin(), text.end()};
  }
};

struct LayerInfo {
  GptqLayerParams params;
  std::int64_t groups = 1;
};

struct Draft {
  int format = 0;
  int bits = 4;
  std::int64_t group_size = 128;
  bool sym = true;
  bool desc_act = false;
  std::vector<LayerInfo> layers;
  std::vector<codec::TensorWithBytes> tensors;
  std::vector<Source> sources;
  codec::MetadataList metadata = {{"format", "pt"}};

  codec::TensorWithBytes* Find(const std::string& name) {
    for (auto& t : tensors) {
      if (t.spec.name == name) return &t;
    }
    return nullptr;
  }
  void Remove(const std::string& name) {
    std::erase_if(tensors, [&](const codec::TensorWithBytes& t) { return t.spec.name == name; });
  }
  Json& Winner() { return sources.front().Config(); }

  Generated Write(std::string rule, std::string what) const {
    Generated g;
    g.bytes = codec::SerializeSafetensors(tensors, &metadata);
    g.expected_rule = std::move(rule);
    g.description = std::move(what);
    for (const Source& s : sources) g.side_files.push_back({s.name, s.Bytes()});
    return g;
  }
};

// The alias spellings of docs/gptq.md section 1.
const std::vector<std::string> kMethodKeys = {"method", "quant_method"};
const std::vector<std::string> kFormatKeys = {"format", "checkpoint_format", "version"};
const std::vector<std::string> kBitsKeys = {"bits", "w_bit", "wbits"};
const std::vector<std::string> kGroupKeys = {"group_size", "q_group_size"};

std::string RandomCase(std::string s, Rng& rng) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z' && Coin(rng)) c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

// Non-empty random subset of keys (at least one, in listed order).
std::vector<std::string> SomeKeys(const std::vector<std::string>& keys, Rng& rng) {
  std::vector<std::string> out;
  while (out.empty()) {
    for (const auto& k : keys) {
      if (Coin(rng)) out.push_back(k);
    }
  }
  return out;
}

// A config object for the draft's parameters, spelled at random.
Json MakeConfig(const Draft& d, Rng& rng, bool minimal = false) {
  Json j = Json::object();
  std::vector<std::pair<std::string, Json>> entries;
  // method: absent (defaults to gptq) or one or both aliases.
  if (!Coin(rng, 3)) {
    for (const auto& k : SomeKeys(kMethodKeys, rng)) entries.emplace_back(k, "gptq");
  }
  // format: v1 may be absent.
  if (d.format != 0 || !Coin(rng, 3)) {
    for (const auto& k : SomeKeys(kFormatKeys, rng)) {
      entries.emplace_back(k, k == "version" ? RandomCase(kFormatNames[d.format], rng)
                                             : std::string(kFormatNames[d.format]));
    }
  }
  for (const auto& k : SomeKeys(kBitsKeys, rng)) entries.emplace_back(k, d.bits);
  for (const auto& k : SomeKeys(kGroupKeys, rng)) entries.emplace_back(k, d.group_size);
  if (!minimal) {
    switch (Pick(rng, 4)) {
      case 0: entries.emplace_back("sym", d.sym); break;
      case 1: entries.emplace_back("zero_point", !d.sym); break;
      case 2:
        entries.emplace_back("sym", d.sym);
        entries.emplace_back("zero_point", !d.sym);
        break;
      default: break;
    }
    if (Coin(rng)) entries.emplace_back("desc_act", d.desc_act);
    if (Coin(rng, 4)) entries.emplace_back("pack_dtype", "int32");
    if (Coin(rng, 5)) entries.emplace_back("dynamic", Coin(rng) ? Json::object() : Json(nullptr));
    // null counts as absent, for any key of the table.
    if (Coin(rng, 4)) {
      const std::vector<std::string> nullable = {"w_bit", "q_group_size", "version", "sym",
                                                 "is_marlin_format", "pack_dtype", "method"};
      const std::string k = OneOf(rng, nullable);
      bool taken = false;
      for (const auto& e : entries) taken = taken || e.first == k;
      if (!taken) entries.emplace_back(k, nullptr);
    }
    // Keys the reader ignores.
    if (Coin(rng)) entries.emplace_back("damp_percent", 0.01);
    if (Coin(rng, 3)) entries.emplace_back("true_sequential", true);
    if (Coin(rng, 3)) entries.emplace_back("static_groups", false);
    if (Coin(rng, 4)) entries.emplace_back("model_name_or_path", "/models/x");
    if (Coin(rng, 4)) {
      entries.emplace_back("meta", Json{{"quantizer", Json::array({"gptqmodel:1.0"})},
                                        {"damp_auto_increment", 0.0025}});
    }
  }
  std::shuffle(entries.begin(), entries.end(), rng);
  for (auto& [k, v] : entries) j[k] = v;
  return j;
}

Source PlainSource(std::string name, Json config) {
  Source s;
  s.name = std::move(name);
  s.top = std::move(config);
  return s;
}

Source NestedSource(Json config, Rng& rng) {
  Source s;
  s.name = Coin(rng, 3) ? "model/config.json" : "config.json";
  s.nested = true;
  Json top = Json::object();
  if (Coin(rng)) top["architectures"] = Json::array({"LlamaForCausalLM"});
  if (Coin(rng)) top["hidden_size"] = 4096;
  // Config keys outside quantization_config are not read.
  if (Coin(rng, 3)) top["bits"] = "ignored";
  top["quantization_config"] = std::move(config);
  if (Coin(rng)) top["torch_dtype"] = "float16";
  s.top = std::move(top);
  return s;
}

std::string PlainName(Rng& rng) {
  switch (Pick(rng, 4)) {
    case 0: return "quantize_config.json";
    case 1: return "quant_config.json";
    case 2: return "catalogue.quantize_config.json";
    default: return "dir/quantize_config.json";
  }
}

// A plain source (config file) for d's parameters. The config is drawn
// before the name, so every compiler makes the same bytes.
Source RandomPlainSource(const Draft& d, Rng& rng) {
  Json config = MakeConfig(d, rng);
  std::string name = PlainName(rng);
  return PlainSource(std::move(name), std::move(config));
}

const std::vector<std::string> kModules = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                           "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                           "mlp.down_proj"};

struct DraftOptions {
  int format = -1;  // -1: any
  int bits = -1;
  std::int64_t group_size = 0;  // 0: any
  int sources = 0;              // 0: any (1 or 2), else exactly
  bool flooded_zero = false;    // allow v1 zero 2^b (GPTQ-107 warning)
  bool plain_winner = false;    // the first source is plain (not config.json)
  int layers = 0;               // 0: any
};

Draft MakeDraft(Rng& rng, const DraftOptions& o = {}) {
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

// Erase every key of a group from a config.
void EraseGroup(Json& j, const std::vector<std::string>& keys) {
  for (const auto& k : keys) j.erase(k);
}

const LayerInfo& SomeLayer(const Draft& d, Rng& rng) { return d.layers[Pick(rng, d.layers.size())]; }

std::uint64_t ElementSize(const std::string& dtype) {
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "U8" || dtype == "I8" || dtype == "BOOL") return 1;
  return 4;
}

// Reshape a 2-D tensor to [rows, cols] keeping the first min(...) bytes of
// each row and padding with copies of the row's bytes.
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

}  // namespace

Generated GptqValid(Rng& rng) {
  DraftOptions o;
  o.flooded_zero = true;
  Draft d = MakeDraft(rng, o);
  return d.Write("", "valid " + std::string(kFormatNames[d.format]) + " file, " +
                         std::to_string(d.bits) + " bits, group_size " + std::to_string(d.group_size) +
                         ", " + std::to_string(d.layers.size()) + " layer(s), " +
                         std::to_string(d.sources.size()) + " config source(s)");
}

namespace {

// ---- violations by rule ---------------------------------------------------

// What a layer rule's builder starts from (kLayerRules).
struct LayerCase {
  Draft d;
  const LayerInfo* layer = nullptr;  // one of d.layers
};

std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }

Generated ViolateCfg001(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Source& s = d.sources[Pick(rng, d.sources.size())];
  if (s.nested && Coin(rng)) {
    s.top["quantization_config"] = OneOf<Json>(rng, {Json(4), Json("gptq"), Json::array(), Json(true)});
    return d.Write(r, s.name + ": quantization_config is not an object");
  }
  const std::string text = s.top.dump();
  std::string bad;
  std::string what;
  switch (Pick(rng, 11)) {
    case 0: bad = text + ","; what = "trailing comma"; break;
    case 1: bad = text.substr(0, text.size() - 1); what = "unterminated object"; break;
    case 2: bad = "\xEF\xBB\xBF" + text; what = "byte order mark"; break;
    case 3: bad = "{\"x\":1,\"x\":1," + text.substr(1); what = "duplicate key"; break;
    case 4: bad = "[" + text + "]"; what = "top level is an array"; break;
    case 5: bad = "{\"damp_percent\":NaN," + text.substr(1); what = "NaN literal"; break;
    case 6: bad = "{\"damp_percent\":1e400," + text.substr(1); what = "number overflows binary64"; break;
    case 7: bad = "{\"name\":\"\xff\"," + text.substr(1); what = "invalid UTF-8"; break;
    case 8:
      bad = "{\"deep\":" + std::string(80, '[') + std::string(80, ']') + "," + text.substr(1);
      what = "nesting deeper than 64";
      break;
    case 9: bad = "{'bits':4}"; what = "single quotes"; break;
    default: bad = ""; what = "empty file"; break;
  }
  s.use_raw = true;
  s.raw = bad;
  return d.Write(r, s.name + " is not strict JSON (" + what + ")");
}

Generated ViolateCfg002(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Source& s = d.sources[Pick(rng, d.sources.size())];
  struct Bad {
    const char* key;
    std::vector<const char*> values;
  };
  const std::vector<Bad> bad = {
      {"method", {"4", "true", "[\"gptq\"]"}},
      {"quant_method", {"{}", "1.5"}},
      {"format", {"2", "false"}},
      {"checkpoint_format", {"[]", "0"}},
      {"version", {"1", "{\"v\":2}"}},
      {"bits", {"\"4\"", "4.0", "4e0", "true", "[4]", "9223372036854775808"}},
      {"w_bit", {"4.5", "\"8\""}},
      {"wbits", {"-4e0", "null1"}},
      {"group_size", {"128.0", "\"128\"", "-1.0", "1e2"}},
      {"q_group_size", {"false", "-9223372036854775809"}},
      {"sym", {"\"true\"", "1", "0"}},
      {"zero_point", {"\"false\"", "[]"}},
      {"desc_act", {"0", "\"no\""}},
      {"pack_dtype", {"32", "true"}},
      {"is_marlin_format", {"\"false\"", "0"}},
      {"dynamic", {"[]", "\"x\"", "1", "true"}},
  };
  const Bad& b = bad[Pick(rng, bad.size())];
  std::string value = OneOf(rng, b.values);
  if (value == std::string("null1")) value = "[null]";
  s.Config()[b.key] = Json::parse(value);
  return d.Write(r, s.name + ": " + b.key + " = " + value + " has the wrong JSON type");
}

Generated ViolateCfg003(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng, {.sources = 1});
  switch (Pick(rng, 3)) {
    case 0: d.sources.clear(); return d.Write(r, "no config source");
    case 1:
      d.sources = {NestedSource(Json(nullptr), rng)};
      return d.Write(r, "config.json with quantization_config null only");
    default:
      d.sources = {NestedSource(Json::object(), rng)};
      d.sources[0].top.erase("quantization_config");
      return d.Write(r, "config.json without quantization_config only");
  }
}

Generated ViolateGptq005(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const int v = static_cast<int>(Pick(rng, 5));
  if (v == 4) {
    w["is_marlin_format"] = true;
  } else {
    const char* keys[] = {"method", "quant_method", "format", "checkpoint_format"};
    w[keys[v]] = "marlin";
  }
  return d.Write(r, "winning config says marlin");
}

Generated ViolateCfg101(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  d.Winner()["is_marlin_format"] = false;
  return d.Write(r, "winning config has is_marlin_format false");
}

Generated ViolateCfg004(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  switch (Pick(rng, 4)) {
    case 0: {
      EraseGroup(w, kMethodKeys);
      const bool first_gptq = Coin(rng);
      w["method"] = first_gptq ? "gptq" : "awq";
      w["quant_method"] = first_gptq ? "awq" : "gptq";
      return d.Write(r, "method and quant_method disagree");
    }
    case 1: {
      EraseGroup(w, kFormatKeys);
      const int a = static_cast<int>(Pick(rng, 3));
      const int b = (a + 1 + static_cast<int>(Pick(rng, 2))) % 3;
      std::vector<std::string> keys = kFormatKeys;
      std::shuffle(keys.begin(), keys.end(), rng);
      w[keys[0]] = keys[0] == "version" ? RandomCase(kFormatNames[a], rng) : kFormatNames[a];
      w[keys[1]] = keys[1] == "version" ? RandomCase(kFormatNames[b], rng) : kFormatNames[b];
      return d.Write(r, "format aliases disagree");
    }
    case 2: {
      EraseGroup(w, kBitsKeys);
      std::vector<std::string> keys = kBitsKeys;
      std::shuffle(keys.begin(), keys.end(), rng);
      w[keys[0]] = d.bits;
      w[keys[1]] = d.bits == 8 ? 4 : 8;
      return d.Write(r, "bits aliases disagree");
    }
    default:
      EraseGroup(w, kGroupKeys);
      w["group_size"] = d.group_size;
      w["q_group_size"] = d.group_size == 64 ? 128 : 64;
      if (Coin(rng)) std::swap(w["group_size"], w["q_group_size"]);
      return d.Write(r, "group_size and q_group_size disagree");
  }
}

Generated ViolateCfg102(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  if (Coin(rng) || d.sources.size() < 2) {
    Json& w = d.Winner();
    const bool v = Coin(rng);
    w["sym"] = v;
    w["zero_point"] = v;
    return d.Write(r, "sym and zero_point say the same value");
  }
  Json& w = d.Winner();
  Json& other = d.sources[1].Config();
  const char* key = Coin(rng) ? "sym" : "desc_act";
  const bool v = Coin(rng);
  w.erase("zero_point");
  other.erase("zero_point");
  w[key] = v;
  other[key] = !v;
  return d.Write(r, std::string("config sources disagree on ") + key);
}

Generated ViolateCfg005(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  if (Coin(rng)) {
    EraseGroup(w, kMethodKeys);
    w[OneOf(rng, kMethodKeys)] = OneOf<std::string>(rng, {"awq", "GPTQ", "bitsandbytes", "", "gptq "});
    return d.Write(r, "method is not gptq");
  }
  EraseGroup(w, kFormatKeys);
  const std::string key = OneOf(rng, kFormatKeys);
  w[key] = key == "version" ? OneOf<std::string>(rng, {"GEMM", "gemv", "gptq-v2", "v2"})
                            : OneOf<std::string>(rng, {"gptq_v3", "GPTQ", "awq", "gptq_marlin", "bitblas"});
  return d.Write(r, "format is not gptq, gptq_v2 or gptq_p");
}

Generated ViolateCfg006(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const auto& keys = Coin(rng) ? kBitsKeys : kGroupKeys;
  EraseGroup(w, keys);
  if (Coin(rng)) w[OneOf(rng, keys)] = nullptr;
  return d.Write(r, "winning config lacks " + keys[0]);
}

Generated ViolateCfg007(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const std::int64_t gs =
      OneOf<std::int64_t>(rng, {0, -2, -128, std::numeric_limits<std::int64_t>::min()});
  bool any = false;
  for (const auto& k : kGroupKeys) {
    if (w.contains(k) && !w[k].is_null()) {
      w[k] = gs;
      any = true;
    }
  }
  if (!any) w["group_size"] = gs;
  return d.Write(r, "group_size " + std::to_string(gs));
}

Generated ViolateGptq001(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const int bits = d.format == 2 ? OneOf<int>(rng, {0, 1, 9, 16, 32, -1})
                                 : OneOf<int>(rng, {0, 1, 5, 6, 7, 9, 16, -4});
  bool any = false;
  for (const auto& k : kBitsKeys) {
    if (w.contains(k) && !w[k].is_null()) {
      w[k] = bits;
      any = true;
    }
  }
  if (!any) w["bits"] = bits;
  return d.Write(r, std::string(kFormatNames[d.format]) + " with bits " + std::to_string(bits));
}

Generated ViolateCfg008(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  d.Winner()["pack_dtype"] = OneOf<std::string>(rng, {"int16", "int8", "int64", "uint32", "INT32", ""});
  return d.Write(r, "pack_dtype is not int32");
}

Generated ViolateCfg009(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  d.Winner()["dynamic"] = Coin(rng) ? Json{{"-:.*lm_head", Json::object()}}
                                    : Json{{"+:.*down_proj.*", Json{{"bits", 8}}}};
  return d.Write(r, "dynamic is a non-empty object");
}

Generated ViolateCfg010(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng, {.sources = 2});
  Json& w = d.Winner();
  Json& other = d.sources[1].Config();
  switch (Pick(rng, 4)) {
    case 0:
      EraseGroup(other, kMethodKeys);
      other[OneOf(rng, kMethodKeys)] = OneOf<std::string>(rng, {"awq", "marlin", "GPTQ"});
      return d.Write(r, "the other source's method differs");
    case 1: {
      // Both spell the format out; the other says another one (or defaults
      // to gptq where the winner is v2 / planar).
      EraseGroup(other, kFormatKeys);
      if (d.format != 0 && Coin(rng)) return d.Write(r, "the other source's format defaults to gptq");
      const int f = (d.format + 1 + static_cast<int>(Pick(rng, 2))) % 3;
      other[OneOf(rng, kFormatKeys)] = kFormatNames[f];
      return d.Write(r, "the other source's format differs");
    }
    case 2:
      EraseGroup(other, kBitsKeys);
      other[OneOf(rng, kBitsKeys)] = d.bits == 4 ? 8 : 4;
      return d.Write(r, "the other source's bits differ");
    default: {
      EraseGroup(other, kGroupKeys);
      const std::int64_t gs = d.group_size == 128 ? 64 : 128;
      other[OneOf(rng, kGroupKeys)] = gs;
      (void)w;
      return d.Write(r, "the other source's group_size differs");
    }
  }
}

Generated ViolateGptq101(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const std::string& P = c.layer->params.prefix;
  if (Coin(rng, 4)) {
    const char* member = OneOf<const char*>(rng, {"qzeros", "scales", "g_idx", "qweight"});
    d.tensors.push_back({{"model.layers.77.mlp.gate_proj." + std::string(member), "I32", {2, 4}, 0},
                         std::vector<std::uint8_t>(32, 0)});
    return d.Write(r, std::string("a lone ") + member + " makes an incomplete layer");
  }
  const char* member = OneOf<const char*>(rng, {"qweight", "qzeros", "scales", "g_idx"});
  d.Remove(P + member);
  return d.Write(r, std::string("layer without ") + member);
}

Generated ViolateGptq102(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const GptqLayerParams& p = c.layer->params;
  const std::string& P = c.layer->params.prefix;
  d.tensors.push_back({{P + "weight", "F16", {u(p.out_features), 4}, 0},
                       FloatBytes(0, u(p.out_features) * 4, rng)});
  if (Coin(rng)) std::shuffle(d.tensors.begin(), d.tensors.end(), rng);
  return d.Write(r, "dense weight beside the layer");
}

Generated ViolateGptq103(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const std::string& P = c.layer->params.prefix;
  const std::string x = OneOf<std::string>(rng, {"perm", "wf", "qweight_t", "scales2", "g_idx_inv",
                                                  "zeros", "bias_", "Weight"});
  if (Coin(rng)) {
    d.tensors.push_back({{P + x, "F32", {3}, 0}, FloatBytes(2, 3, rng)});
  } else {
    d.tensors.push_back({{P + x, "I32", {2}, 0}, WordsBytes({7, -7})});
  }
  if (Coin(rng)) std::shuffle(d.tensors.begin(), d.tensors.end(), rng);
  return d.Write(r, "unknown sibling " + P + x);
}

Generated ViolateGptq104(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const GptqLayerParams& p = c.layer->params;
  const std::string& P = c.layer->params.prefix;
  const std::vector<std::string> members = p.bias_dtype >= 0
      ? std::vector<std::string>{"qweight", "qzeros", "scales", "g_idx", "bias"}
      : std::vector<std::string>{"qweight", "qzeros", "scales", "g_idx"};
  const std::string member = OneOf(rng, members);
  codec::TensorWithBytes* t = d.Find(P + member);
  const bool dtype = Coin(rng);
  if (dtype) {
    const std::uint64_t es = ElementSize(t->spec.dtype);
    std::vector<std::string> same_size;
    if (member == "scales" || member == "bias") {
      same_size = es == 2 ? std::vector<std::string>{"I16", "U16"} : std::vector<std::string>{"I32", "U32"};
    } else {
      same_size = {"F32", "U32"};
    }
    if (Coin(rng, 3)) {  // a wider dtype: F64 / I64 with the values widened
      const std::string wide = member == "scales" || member == "bias" ? "F64" : "I64";
      t->spec.dtype = wide;
      std::vector<std::uint8_t> bytes(t->bytes.size() / es * 8, 0);
      for (std::size_t i = 0; i < t->bytes.size() / es; ++i) bytes[8 * i] = t->bytes[es * i];
      t->bytes = std::move(bytes);
    } else {
      t->spec.dtype = OneOf(rng, same_size);
    }
    return d.Write(r, P + member + " has dtype " + t->spec.dtype);
  }
  std::vector<std::uint64_t> shape = t->spec.shape;
  std::uint64_t count = 1;
  for (auto s : shape) count *= s;
  if (shape.size() == 1) {
    shape = Coin(rng) ? std::vector<std::uint64_t>{count, 1} : std::vector<std::uint64_t>{1, count};
  } else {
    switch (Pick(rng, 3)) {
      case 0: shape = {count}; break;
      case 1: shape = {1, shape[0], shape[1]}; break;
      default: shape = {shape[0], shape[1], 1}; break;
    }
  }
  t->spec.shape = shape;
  return d.Write(r, P + member + " has rank " + std::to_string(shape.size()));
}

Generated ViolateGptq002(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const GptqLayerParams& p = c.layer->params;
  const std::string& P = c.layer->params.prefix;
  // qweight rows off by d, 1 <= d < bits: Kq is then undefined or not a
  // multiple of 32, so K is Kg (the true K) with the wrong row count, or
  // Kq itself fails the multiple of 32.
  codec::TensorWithBytes* t = d.Find(P + "qweight");
  const std::uint64_t rows = t->spec.shape[0];
  const std::uint64_t delta = 1 + Pick(rng, static_cast<std::uint64_t>(p.bits - 1));
  const std::uint64_t new_rows = Coin(rng) ? rows + delta : rows - delta;
  Resize2D(t, new_rows, t->spec.shape[1]);
  return d.Write(r, "qweight has " + std::to_string(new_rows) + " rows instead of " +
                        std::to_string(rows));
}

Generated ViolateGptq003(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const std::string& P = c.layer->params.prefix;
  codec::TensorWithBytes* z = d.Find(P + "qzeros");
  const std::uint64_t rows = z->spec.shape[0], cols = z->spec.shape[1];
  switch (Pick(rng, 3)) {
    case 0: {
      const std::uint64_t new_rows = rows > 1 && Coin(rng) ? rows - 1 : rows + 1;
      Resize2D(z, new_rows, cols);
      return d.Write(r, "qzeros has " + std::to_string(new_rows) + " rows, G " + std::to_string(rows));
    }
    case 1: {
      const std::uint64_t new_cols = cols > 1 && Coin(rng) ? cols - 1 : cols + 1 + Pick(rng, 3);
      Resize2D(z, rows, new_cols);
      return d.Write(r, "qzeros has " + std::to_string(new_cols) + " columns");
    }
    default: {  // out_features not a multiple of 32
      codec::TensorWithBytes* q = d.Find(P + "qweight");
      const std::uint64_t n = q->spec.shape[1] - 16;
      Resize2D(q, q->spec.shape[0], n);
      return d.Write(r, "out_features " + std::to_string(n) + " is not a multiple of 32");
    }
  }
}

Generated ViolateGptq105(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const GptqLayerParams& p = c.layer->params;
  const std::string& P = c.layer->params.prefix;
  codec::TensorWithBytes* s = d.Find(P + "scales");
  const std::uint64_t rows = s->spec.shape[0], cols = s->spec.shape[1];
  switch (Pick(rng, 4)) {
    case 0: {
      const std::uint64_t n = rows > 1 && Coin(rng) ? rows - 1 : rows + 1;
      Resize2D(s, n, cols);
      return d.Write(r, "scales has " + std::to_string(n) + " rows, G " + std::to_string(rows));
    }
    case 1: {
      const std::uint64_t n = Coin(rng) ? cols - 1 : cols + 1;
      Resize2D(s, rows, n);
      return d.Write(r, "scales has " + std::to_string(n) + " columns");
    }
    case 2:
      if (rows != cols) {
        s->spec.shape = {cols, rows};
        return d.Write(r, "scales stored transposed");
      }
      [[fallthrough]];
    default: {
      codec::TensorWithBytes* b = d.Find(P + "bias");
      if (b == nullptr) {
        d.tensors.push_back({{P + "bias", "F32", {u(p.out_features) + 1}, 0},
                             FloatBytes(2, u(p.out_features) + 1, rng)});
        return d.Write(r, "bias has N + 1 values");
      }
      const std::uint64_t n = Coin(rng) ? b->spec.shape[0] - 1 : b->spec.shape[0] + 1;
      Resize1D(b, n);
      return d.Write(r, "bias has " + std::to_string(n) + " values");
    }
  }
}

Generated ViolateGptq004(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const LayerInfo& layer = *c.layer;
  const GptqLayerParams& p = c.layer->params;
  const std::string& P = c.layer->params.prefix;
  codec::TensorWithBytes* g = d.Find(P + "g_idx");
  if (Coin(rng)) {
    const std::uint64_t k = g->spec.shape[0];
    const std::uint64_t delta = 1 + Pick(rng, 40);
    const std::uint64_t n = Coin(rng) && k > delta ? k - delta : k + delta;
    Resize1D(g, n);
    return d.Write(r, "g_idx has " + std::to_string(n) + " entries, K " + std::to_string(k));
  }
  const std::int64_t G = layer.groups;
  const std::int32_t bad = OneOf<std::int32_t>(
      rng, {-1, static_cast<std::int32_t>(G), static_cast<std::int32_t>(G + 7),
            std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()});
  const std::uint64_t k = Pick(rng, u(p.in_features));
  SetI32(g, k, bad);
  return d.Write(r, "g_idx[" + std::to_string(k) + "] = " + std::to_string(bad) + " with G " +
                        std::to_string(G));
}

Generated ViolateGptq106(const std::string& r, LayerCase& c, Rng& rng) {
  Draft& d = c.d;
  const LayerInfo& layer = *c.layer;
  const GptqLayerParams& p = c.layer->params;
  const std::string& P = c.layer->params.prefix;
  codec::TensorWithBytes* s = d.Find(P + "scales");
  const std::uint64_t count = u(layer.groups * p.out_features);
  const std::uint64_t i = Pick(rng, count);
  const std::uint64_t es = ElementSize(s->spec.dtype);
  std::uint32_t v;
  if (s->spec.dtype == "F16") {
    v = OneOf<std::uint32_t>(rng, {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff});
  } else if (s->spec.dtype == "BF16") {
    v = OneOf<std::uint32_t>(rng, {0x7f80, 0xff80, 0x7fc0, 0x7f81});
  } else {
    v = OneOf<std::uint32_t>(rng, {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu});
  }
  for (std::uint64_t b = 0; b < es; ++b) s->bytes[i * es + b] = static_cast<std::uint8_t>(v >> (8 * b));
  return d.Write(r, "scale " + std::to_string(i) + " is not finite");
}

Generated ViolateGptq107(const std::string& r, LayerCase&, Rng& rng) {  // its own v1 draft
  Draft v1 = MakeDraft(rng, {.format = 0});
  const LayerInfo& l = SomeLayer(v1, rng);
  codec::TensorWithBytes* qz = v1.Find(l.params.prefix + "qzeros");
  const std::uint64_t c = qz->spec.shape[1];
  const std::uint64_t g = Pick(rng, qz->spec.shape[0]);
  const std::int64_t n = static_cast<std::int64_t>(Pick(rng, u(l.params.out_features)));
  // Field n of qzeros row g (continuous layout, bit n * b of the row
  // stream): every bit set, so the decoded zero is 2^b.
  for (int b = 0; b < l.params.bits; ++b) {
    const std::int64_t bit = n * l.params.bits + b;
    const std::uint64_t word = g * c + static_cast<std::uint64_t>(bit / 32);
    qz->bytes[4 * word + static_cast<std::uint64_t>((bit % 32) / 8)] |=
        static_cast<std::uint8_t>(1u << (bit % 8));
  }
  return v1.Write(r, "v1 zero field (" + std::to_string(g) + ", " + std::to_string(n) +
                         ") is mask(b): zero 2^b");
}

// Rules -> builders, in the order GptqViolableRules lists them. A config
// rule's builder makes its own draft; a layer rule's builder gets one valid
// draft and one of its layers, drawn (MakeDraft, then SomeLayer) before it runs.
struct ConfigRule {
  const char* rule;
  Generated (*build)(const std::string& r, Rng& rng);
};
constexpr ConfigRule kConfigRules[] = {
    {"CFG-001", &ViolateCfg001},
    {"CFG-002", &ViolateCfg002},
    {"CFG-003", &ViolateCfg003},
    {"GPTQ-005", &ViolateGptq005},
    {"CFG-101", &ViolateCfg101},
    {"CFG-004", &ViolateCfg004},
    {"CFG-102", &ViolateCfg102},
    {"CFG-005", &ViolateCfg005},
    {"CFG-006", &ViolateCfg006},
    {"CFG-007", &ViolateCfg007},
    {"GPTQ-001", &ViolateGptq001},
    {"CFG-008", &ViolateCfg008},
    {"CFG-009", &ViolateCfg009},
    {"CFG-010", &ViolateCfg010},
};
struct LayerRule {
  const char* rule;
  Generated (*build)(const std::string& r, LayerCase& c, Rng& rng);
};
constexpr LayerRule kLayerRules[] = {
    {"GPTQ-101", &ViolateGptq101},
    {"GPTQ-102", &ViolateGptq102},
    {"GPTQ-103", &ViolateGptq103},
    {"GPTQ-104", &ViolateGptq104},
    {"GPTQ-002", &ViolateGptq002},
    {"GPTQ-003", &ViolateGptq003},
    {"GPTQ-105", &ViolateGptq105},
    {"GPTQ-004", &ViolateGptq004},
    {"GPTQ-106", &ViolateGptq106},
    {"GPTQ-107", &ViolateGptq107},
};

}  // namespace

std::vector<std::string> GptqViolableRules() {
  std::vector<std::string> rules;
  for (const ConfigRule& c : kConfigRules) rules.emplace_back(c.rule);
  for (const LayerRule& l : kLayerRules) rules.emplace_back(l.rule);
  return rules;
}

Generated GptqViolation(std::string_view rule, Rng& rng) {
  const std::string r(rule);
  for (const ConfigRule& c : kConfigRules) {
    if (r == c.rule) return c.build(r, rng);
  }
  LayerCase c{MakeDraft(rng)};
  c.layer = &SomeLayer(c.d, rng);
  for (const LayerRule& l : kLayerRules) {
    if (r == l.rule) return l.build(r, c, rng);
  }
  return c.d.Write("", "unknown rule " + r + ": a valid file");
}

}  // namespace qd::gen
