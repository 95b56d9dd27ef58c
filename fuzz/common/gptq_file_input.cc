// gptq_file_input.cc: builds the file and config sources a gptq_file_diff
// input stands for.
#include "fuzz/common/gptq_file_input.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "codecs/safetensors.h"
#include "generators/generators.h"

namespace qd::fuzz {

// The name EntryIndex gives a missing entry under.
constexpr char kWho[] = "gptq_file_input";

const std::vector<std::string_view> kGptqDtypes = {
    "I32", "F32", "F16", "BF16", "U32", "I64", "F64", "U8", "I16", "U16", "I8", "BOOL", "Q4B32",
};

const std::vector<std::string_view> kGptqConfigKeys = {
    "method", "quant_method", "format", "checkpoint_format", "version", "bits", "w_bit", "wbits",
    "group_size", "q_group_size", "sym", "zero_point", "desc_act", "pack_dtype",
    "is_marlin_format", "dynamic", "damp_percent", "quantization_config",
};

const std::vector<std::string_view> kGptqJsonValues = {
    // strings
    "\"gptq\"", "\"gptq_v2\"", "\"gptq_p\"", "\"marlin\"", "\"GPTQ_V2\"", "\"GPTQ\"", "\"awq\"",
    "\"int32\"", "\"int16\"", "\"\"", "\"gptq\\u0000\"",
    // integers
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "16", "-1", "-2", "24", "32", "64", "128",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    // numbers that are not integers
    "4.0", "4e0", "-1.0", "1e400", "128.5", "-0",
    // other types
    "null", "true", "false", "{}", "[]", "\"4\"", "{\"-:lm_head\":{}}", "[4]",
};

const std::vector<std::string_view> kGptqTokens = {
    "{", "}", "[", "]", ",", ":", "\"", " ", "\\", "\\u0000", "\\ud800", std::string_view("\0", 1),
    "\xef\xbb\xbf", "\xff", "\xc0\x80", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    ",\"bits\":4", ",\"bits\":8", ",\"group_size\":-1", ",\"format\":\"gptq_v2\"",
    ",\"checkpoint_format\":\"marlin\"", ",\"is_marlin_format\":false", ",\"sym\":true",
    ",\"zero_point\":true", ",\"dynamic\":{\"x\":1}", ",\"version\":\"GPTQ\"", ",\"x\":1,\"x\":2",
    "1e400", "NaN", "-", "0", "4", "\"qweight\"", "\"qzeros\"", "\"scales\"", "\"g_idx\"",
    "\"I32\"", "\"F16\"", "\"F32\"", "\"BF16\"", ".weight", ".bias", ".qweight", "[1,", "[0,",
    "\"__metadata__\"",
};

const std::vector<std::string_view> kGptqSourceNames = {
    "quantize_config.json", "quant_config.json", "config.json", "input-gptq.quantize_config.json",
    "dir/quantize_config.json", "model/config.json", "catalogue.quantize_config.json",
    "config.json.bak",
};

std::uint32_t GptqWordValue(std::uint8_t d) {
  switch (d) {
    case 0: return 0;
    case 1: return 0xffffffffu;
    case 2: return 0x80000000u;
    case 3: return 0x7fffffffu;
    case 4: return 0x11111111u;
    case 5: return 0x88888888u;
    case 6: return 0x49249249u;  // 3-bit fields of 1
    default: return 0x01010101u * d;
  }
}

namespace {

using Json = nlohmann::ordered_json;

const char* const kFormatNames[] = {"gptq", "gptq_v2", "gptq_p"};

std::uint64_t ItemSize(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

std::uint64_t Count(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

struct Source {
  std::string name;
  Json top;
  bool nested = false;
  bool raw = false;
  std::string text;

  void Freeze() {
    if (!raw) {
      text = top.dump();
      raw = true;
    }
  }
  Json* Config() {
    if (raw) return nullptr;
    if (!nested) return &top;
    if (!top.contains("quantization_config") || !top["quantization_config"].is_object()) return nullptr;
    return &top["quantization_config"];
  }
  std::vector<std::uint8_t> Bytes() const {
    const std::string s = raw ? text : top.dump();
    return {s.begin(), s.end()};
  }
};

struct Draft {
  std::vector<codec::TensorWithBytes> tensors;
  std::vector<gen::GptqLayerParams> layers;
  std::vector<Source> sources;

  codec::TensorWithBytes* Find(const std::string& name) {
    for (auto& t : tensors) {
      if (t.spec.name == name) return &t;
    }
    return nullptr;
  }
};

const char* const kMembers[] = {"qweight", "qzeros", "scales", "g_idx", "bias"};

codec::TensorWithBytes* RoleTensor(Draft* d, std::uint8_t role) {
  const int member = role % 6;
  if (member == 5) return d->Find("model.norm.weight");
  const auto& layer = d->layers[(role / 6) % d->layers.size()];
  return d->Find(layer.prefix + kMembers[member]);
}

Json Spelled(const GptqFileTail& t, int bits, std::int64_t gs, std::mt19937_64& rng) {
  Json j = Json::object();
  if (!t.aliases) {
    j["bits"] = bits;
    j["group_size"] = gs;
    j["desc_act"] = t.g_idx_mode != 0;
    j["sym"] = true;
    j["quant_method"] = "gptq";
    j["checkpoint_format"] = kFormatNames[t.format];
    return j;
  }
  const char* method_keys[] = {"method", "quant_method"};
  const char* format_keys[] = {"format", "checkpoint_format", "version"};
  const char* bits_keys[] = {"bits", "w_bit", "wbits"};
  const char* group_keys[] = {"group_size", "q_group_size"};
  if (rng() % 3) j[method_keys[rng() % 2]] = "gptq";
  if (t.format != 0 || rng() % 2) {
    const char* k = format_keys[rng() % 3];
    std::string v = kFormatNames[t.format];
    if (std::string_view(k) == "version" && rng() % 2) {
      for (char& c : v) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    j[k] = v;
  }
  j[bits_keys[rng() % 3]] = bits;
  j[group_keys[rng() % 2]] = gs;
  if (rng() % 2) {
    j["zero_point"] = false;
  } else {
    j["sym"] = true;
  }
  if (rng() % 2) j["pack_dtype"] = "int32";
  if (rng() % 3 == 0) j["dynamic"] = nullptr;
  return j;
}

Draft Build(const GptqFileTail& t) {
  std::mt19937_64 rng(t.seed);
  Draft d;
  static const std::int64_t kGroups[] = {-1, 32, 128, 0, 24, 48, 100, 7};
  std::int64_t gs = kGroups[t.group_choice];
  if (gs == 0) gs = t.custom_group;
  int bits = t.bits;
  const int layer_count = t.second_layer && !t.bare ? 2 : 1;
  for (int i = 0; i < layer_count; ++i) {
    gen::GptqLayerParams p;
    p.prefix = t.bare ? "" : (i == 0 ? "model.layers.0.self_attn.q_proj." : "model.layers.0.mlp.down_proj.");
    p.format = t.format;
    p.bits = bits;
    p.in_features = 32 * (i == 0 ? t.k32 : 1 + (t.k32 % 3));
    p.out_features = 32 * (i == 0 ? t.n32 : 1 + (t.n32 % 2));
    p.group_size = gs;
    p.g_idx_mode = t.g_idx_mode;
    p.scales_dtype = t.scales_dtype;
    p.bias_dtype = t.bias ? t.scales_dtype : -1;
    p.zero_mode = t.zero_mode == 3 ? 0 : t.zero_mode;
    for (auto& tensor : gen::BuildGptqLayer(p, rng)) d.tensors.push_back(std::move(tensor));
    d.layers.push_back(p);
  }
  if (t.dense && !t.bare) {
    std::vector<std::uint8_t> norm(32);
    for (auto& b : norm) b = static_cast<std::uint8_t>(rng() & 0x3f);
    d.tensors.push_back({{"model.norm.weight", "F32", {8}, 0}, norm});
    d.tensors.push_back({{"model.embed_positions", "I32", {2}, 0}, std::vector<std::uint8_t>(8, 1)});
  }
  switch (t.order) {
    case 1: std::reverse(d.tensors.begin(), d.tensors.end()); break;
    case 2: std::rotate(d.tensors.begin(), d.tensors.begin() + 1, d.tensors.end()); break;
    case 3: std::shuffle(d.tensors.begin(), d.tensors.end(), rng); break;
    default: break;
  }
  auto plain = [&](std::string name) {
    Source s;
    s.name = std::move(name);
    s.top = Spelled(t, bits, gs, rng);
    return s;
  };
  auto nested = [&]() {
    Source s;
    s.name = "config.json";
    s.nested = true;
    s.top = Json{{"architectures", Json::array({"LlamaForCausalLM"})},
                 {"quantization_config", Spelled(t, bits, gs, rng)}};
    return s;
  };
  switch (t.sources) {
    case 0: d.sources.push_back(plain("quantize_config.json")); break;
    case 1: d.sources.push_back(nested()); break;
    case 2:
      d.sources.push_back(plain("input-gptq.quantize_config.json"));
      d.sources.push_back(nested());
      break;
    default:
      d.sources.push_back(plain("quantize_config.json"));
      d.sources.push_back(plain("quant_config.json"));
      break;
  }
  return d;
}

void Resize(codec::TensorWithBytes* t, std::size_t dim, std::int64_t delta) {
  if (t->spec.shape.empty()) return;
  dim %= t->spec.shape.size();
  const std::uint64_t es = ItemSize(t->spec.dtype);
  std::vector<std::uint64_t> shape = t->spec.shape;
  const std::int64_t now = static_cast<std::int64_t>(shape[dim]);
  const std::int64_t next = std::clamp<std::int64_t>(now + delta, 0, 1024);
  shape[dim] = static_cast<std::uint64_t>(next);
  if (Count(shape) * es > (1u << 20)) return;
  std::vector<std::uint8_t> bytes(Count(shape) * es);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = t->bytes.empty() ? 0 : t->bytes[i % t->bytes.size()];
  t->bytes = std::move(bytes);
  t->spec.shape = shape;
}

void ApplyDraftOp(Draft* d, GptqOp op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t e) {
  const std::uint16_t bc = static_cast<std::uint16_t>(b | (c << 8));
  switch (op) {
    case GptqOp::kDropTensor:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) {
        const std::string name = t->spec.name;
        std::erase_if(d->tensors, [&](const codec::TensorWithBytes& x) { return x.spec.name == name; });
      }
      break;
    case GptqOp::kTensorDtype:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) {
        t->spec.dtype = kGptqDtypes[b % kGptqDtypes.size()];
        const std::uint64_t n = Count(t->spec.shape) * ItemSize(t->spec.dtype);
        if (t->spec.dtype != "Q4B32" && n <= (1u << 20)) t->bytes.resize(n, 0x3c);
      }
      break;
    case GptqOp::kResizeDim:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) Resize(t, b, static_cast<std::int8_t>(c));
      break;
    case GptqOp::kReshape:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) {
        auto& s = t->spec.shape;
        const std::uint64_t n = Count(s);
        switch (b % 5) {
          case 0: s = {n}; break;
          case 1: s = {1, n}; break;
          case 2: s = {n, 1}; break;
          case 3: s.push_back(1); break;
          default: std::reverse(s.begin(), s.end()); break;
        }
      }
      break;
    case GptqOp::kSetWord:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) {
        const std::uint64_t es = ItemSize(t->spec.dtype);
        const std::uint64_t n = t->bytes.size() / es;
        if (n == 0) break;
        const std::uint32_t v = GptqWordValue(e);
        const std::uint64_t i = bc % n;
        for (std::uint64_t k = 0; k < es && k < 4; ++k) t->bytes[i * es + k] = static_cast<std::uint8_t>(v >> (8 * k));
      }
      break;
    case GptqOp::kSetSpecial:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) {
        static const std::uint32_t f16[] = {0x7c00, 0xfc00, 0x7e00, 0x8000, 0x0001, 0x7bff, 0x3c00, 0xbc00};
        static const std::uint32_t bf16[] = {0x7f80, 0xff80, 0x7fc0, 0x8000, 0x0001, 0x7f7f, 0x3f80, 0xbf80};
        static const std::uint32_t f32[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x80000000u,
                                            0x00000001u, 0x7f7fffffu, 0x3f800000u, 0xbf800000u};
        const std::uint64_t es = ItemSize(t->spec.dtype);
        const std::uint64_t n = t->bytes.size() / es;
        if (n == 0 || (es != 2 && es != 4)) break;
        const int s = e % kGptqFloatSpecials;
        const std::uint32_t v = es == 4 ? f32[s] : t->spec.dtype == "BF16" ? bf16[s] : f16[s];
        const std::uint64_t i = bc % n;
        for (std::uint64_t k = 0; k < es; ++k) t->bytes[i * es + k] = static_cast<std::uint8_t>(v >> (8 * k));
      }
      break;
    case GptqOp::kSetGidx: {
      const auto& layer = d->layers[a % d->layers.size()];
      codec::TensorWithBytes* t = d->Find(layer.prefix + "g_idx");
      if (t == nullptr || t->bytes.size() < 4) break;
      const std::int64_t G = layer.group_size == -1 ? 1 : (layer.in_features + layer.group_size - 1) / layer.group_size;
      std::int32_t v;
      switch (e) {
        case 0: v = -1; break;
        case 1: v = static_cast<std::int32_t>(G); break;
        case 2: v = static_cast<std::int32_t>(G - 1); break;
        case 3: v = std::numeric_limits<std::int32_t>::min(); break;
        case 4: v = std::numeric_limits<std::int32_t>::max(); break;
        default: v = e - 5; break;
      }
      const std::uint64_t i = bc % (t->bytes.size() / 4);
      for (int k = 0; k < 4; ++k) t->bytes[i * 4 + k] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(v) >> (8 * k));
      break;
    }
    case GptqOp::kAddTensor: {
      const auto& layer = d->layers[b % d->layers.size()];
      const std::string& P = layer.prefix;
      const std::uint64_t N = static_cast<std::uint64_t>(layer.out_features);
      switch (static_cast<GptqAdd>(a % static_cast<std::uint8_t>(GptqAdd::kCount))) {
        case GptqAdd::kDenseWeight:
          d->tensors.push_back({{P + "weight", "F16", {N, 4}, 0}, std::vector<std::uint8_t>(N * 8, 0x3c)});
          break;
        case GptqAdd::kSibling:
          d->tensors.push_back({{P + "perm", "I32", {2}, 0}, std::vector<std::uint8_t>(8, 0)});
          break;
        case GptqAdd::kLoneMember:
          d->tensors.push_back({{"model.layers.77.mlp.gate_proj.g_idx", "I32", {4}, 0},
                                std::vector<std::uint8_t>(16, 0)});
          break;
        case GptqAdd::kBias:
          d->tensors.push_back({{P + "bias", "F32", {N}, 0}, std::vector<std::uint8_t>(N * 4, 0x3f)});
          break;
        case GptqAdd::kBiasShort:
          d->tensors.push_back({{P + "bias", "F32", {N - 1}, 0}, std::vector<std::uint8_t>((N - 1) * 4, 0x3f)});
          break;
        case GptqAdd::kOrphanBias:
          d->tensors.push_back({{"x.bias", "F16", {3}, 0}, std::vector<std::uint8_t>(6, 0x3c)});
          break;
        default:
          d->tensors.push_back({{"model.rope.scale", "F64", {2}, 0}, std::vector<std::uint8_t>(16, 0x40)});
          break;
      }
      break;
    }
    case GptqOp::kRename:
      if (codec::TensorWithBytes* t = RoleTensor(d, a)) {
        std::string& name = t->spec.name;
        switch (b % 5) {
          case 0: name += "x"; break;
          case 1: name = "other." + name; break;
          case 2: {  // move into the other layer's prefix
            const auto& other = d->layers[(a / 6 + 1) % d->layers.size()];
            const std::size_t dot = name.rfind('.');
            name = other.prefix + (dot == std::string::npos ? name : name.substr(dot + 1));
            break;
          }
          case 3: {  // drop the prefix
            const std::size_t dot = name.rfind('.');
            if (dot != std::string::npos) name = name.substr(dot + 1);
            break;
          }
          default: name = name.substr(0, name.size() - 1); break;
        }
      }
      break;
    case GptqOp::kSwap:
      if (!d->tensors.empty()) {
        std::swap(d->tensors[a % d->tensors.size()], d->tensors[b % d->tensors.size()]);
      }
      break;
    case GptqOp::kCfgSet:
      if (!d->sources.empty()) {
        Source& s = d->sources[a % d->sources.size()];
        const std::string key(kGptqConfigKeys[b % kGptqConfigKeys.size()]);
        const std::string_view text = kGptqJsonValues[c % kGptqJsonValues.size()];
        const Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (value.is_discarded()) {
          // Not representable (1e400): spliced into the text after the first '{'.
          s.Freeze();
          const std::size_t brace = s.text.find('{');
          if (brace != std::string::npos) s.text.insert(brace + 1, "\"" + key + "\":" + std::string(text) + ",");
        } else if (s.nested && key == "quantization_config" && !s.raw) {
          s.top[key] = value;
        } else if (Json* j = s.Config()) {
          (*j)[key] = value;
        }
      }
      break;
    case GptqOp::kCfgDrop:
      if (!d->sources.empty()) {
        Source& s = d->sources[a % d->sources.size()];
        const std::string key(kGptqConfigKeys[b % kGptqConfigKeys.size()]);
        if (s.nested && key == "quantization_config" && !s.raw) {
          s.top.erase(key);
        } else if (Json* j = s.Config()) {
          j->erase(key);
        }
      }
      break;
    case GptqOp::kCfgSplice:
      if (!d->sources.empty()) {
        Source& s = d->sources[a % d->sources.size()];
        s.Freeze();
        const std::string_view token = kGptqTokens[b % kGptqTokens.size()];
        const std::size_t at = (c | (e << 8)) % (s.text.size() + 1);
        s.text.insert(at, token);
      }
      break;
    case GptqOp::kCfgSources:
      switch (a % 4) {
        case 0:
          if (!d->sources.empty()) d->sources.pop_back();
          break;
        case 1: {
          Source s;
          s.name = "config.json";
          s.nested = true;
          s.top = Json{{"model_type", "llama"}};
          d->sources.push_back(s);
          break;
        }
        case 2:
          if (d->sources.size() >= 2) std::swap(d->sources[0], d->sources[1]);
          break;
        default:
          if (!d->sources.empty()) {
            Source s = d->sources[0];
            s.name = kGptqSourceNames[b % kGptqSourceNames.size()];
            d->sources.push_back(s);
          }
          break;
      }
      break;
    default:
      break;
  }
}

void ApplyFileOp(std::vector<std::uint8_t>* file, GptqOp op, std::uint8_t a, std::uint8_t b,
                 std::uint8_t c, std::uint8_t e) {
  if (file->size() < 8) return;
  const std::uint64_t header = ReadPrefix(*file);
  const std::size_t text = static_cast<std::size_t>(std::min<std::uint64_t>(header, file->size() - 8));
  const std::uint16_t ab = static_cast<std::uint16_t>(a | (b << 8));
  switch (op) {
    case GptqOp::kHeaderByte:
      if (text > 0) (*file)[8 + ab % text] = c;
      break;
    case GptqOp::kDataByte: {
      const std::size_t start = 8 + text;
      if (file->size() > start) (*file)[start + ab % (file->size() - start)] = c;
      break;
    }
    case GptqOp::kTruncate:
      file->resize(file->size() - ab % (file->size() + 1));
      break;
    case GptqOp::kHeaderSplice: {
      const std::string_view token = kGptqTokens[a % kGptqTokens.size()];
      const std::size_t at = static_cast<std::uint16_t>(b | (c << 8)) % (text + 1);
      const std::size_t removed = std::min<std::size_t>(e % 8, text - at);
      file->erase(file->begin() + 8 + at, file->begin() + 8 + at + removed);
      file->insert(file->begin() + 8 + at, token.begin(), token.end());
      WritePrefix(file, text - removed + token.size());
      break;
    }
    case GptqOp::kFlipBit: {
      const std::uint32_t bit = a | (b << 8) | (c << 16) | (static_cast<std::uint32_t>(e) << 24);
      (*file)[(bit / 8) % file->size()] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      break;
    }
    default:
      break;
  }
}

GptqCase RawCase(const std::uint8_t* data, std::size_t size) {
  GptqCase c;
  std::size_t at = 0;
  const int n = size > 0 ? data[at++] % 4 : 0;
  for (int i = 0; i < n && at + 3 <= size; ++i) {
    qd::SideFile s;
    s.name = std::string(kGptqSourceNames[data[at] % kGptqSourceNames.size()]);
    const std::size_t len = std::min<std::size_t>(data[at + 1] | (data[at + 2] << 8), size - at - 3);
    at += 3;
    s.bytes.assign(data + at, data + at + len);
    at += len;
    c.configs.push_back(std::move(s));
  }
  c.file.assign(data + at, data + size);
  return c;
}

}  // namespace

GptqFileTail DecodeGptqFileTail(const std::uint8_t* t) {
  GptqFileTail g;
  g.raw = (t[0] & 0x0f) == 0x0f;
  g.format = ((t[0] >> 4) & 3) % 3;
  g.scales_dtype = ((t[0] >> 6) & 3) % 3;
  const int sel = t[1] & 7;
  g.bits = g.format == 2 ? 2 + sel % 7 : std::array<int, 4>{2, 3, 4, 8}[sel % 4];
  g.g_idx_mode = ((t[1] >> 3) & 3) % 3;
  g.bias = (t[1] & 0x20) != 0;
  g.second_layer = (t[1] & 0x40) != 0;
  g.dense = (t[1] & 0x80) != 0;
  g.k32 = 1 + (t[2] & 7);
  g.n32 = 1 + ((t[2] >> 3) & 3);
  g.group_choice = t[2] >> 5;
  g.custom_group = 1 + t[3];
  g.zero_mode = t[4] & 3;
  g.sources = (t[4] >> 2) & 3;
  g.aliases = (t[4] & 0x10) != 0;
  g.bare = (t[4] & 0x80) != 0;
  g.order = t[5] & 3;
  g.seed = static_cast<std::uint32_t>(t[6] | (t[7] << 8) | (t[8] << 16)) | (static_cast<std::uint32_t>(t[9]) << 24);
  return g;
}

std::array<std::uint8_t, kGptqFileTailSize> EncodeGptqFileTail(const GptqFileTail& g) {
  std::array<std::uint8_t, kGptqFileTailSize> t{};
  int sel = 0;
  if (g.format == 2) {
    sel = std::clamp(g.bits, 2, 8) - 2;
  } else {
    sel = g.bits == 2 ? 0 : g.bits == 3 ? 1 : g.bits == 8 ? 3 : 2;
  }
  t[0] = static_cast<std::uint8_t>((g.raw ? 0x0f : 0) | (g.format << 4) | (g.scales_dtype << 6));
  t[1] = static_cast<std::uint8_t>(sel | (g.g_idx_mode << 3) | (g.bias ? 0x20 : 0) |
                                   (g.second_layer ? 0x40 : 0) | (g.dense ? 0x80 : 0));
  t[2] = static_cast<std::uint8_t>((g.k32 - 1) | ((g.n32 - 1) << 3) | (g.group_choice << 5));
  t[3] = static_cast<std::uint8_t>(g.custom_group - 1);
  t[4] = static_cast<std::uint8_t>(g.zero_mode | (g.sources << 2) | (g.aliases ? 0x10 : 0) |
                                   (g.bare ? 0x80 : 0));
  t[5] = static_cast<std::uint8_t>(g.order);
  for (int i = 0; i < 4; ++i) t[6 + i] = static_cast<std::uint8_t>(g.seed >> (8 * i));
  return t;
}

std::uint8_t GptqKeyIndex(std::string_view key) { return EntryIndex(kGptqConfigKeys, key, kWho); }
std::uint8_t GptqJsonValueIndex(std::string_view value) { return EntryIndex(kGptqJsonValues, value, kWho); }
std::uint8_t GptqTokenIndex(std::string_view token) { return EntryIndex(kGptqTokens, token, kWho); }
std::uint8_t GptqDtypeIndex(std::string_view dtype) { return EntryIndex(kGptqDtypes, dtype, kWho); }
std::uint8_t GptqSourceNameIndex(std::string_view name) { return EntryIndex(kGptqSourceNames, name, kWho); }

GptqOpWriter& GptqOpWriter::Op(GptqOp op, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  out_.Record(static_cast<std::uint8_t>(op), a, b, c, d);
  return *this;
}
GptqOpWriter& GptqOpWriter::DropTensor(GptqRole role, int layer) {
  return Op(GptqOp::kDropTensor, static_cast<std::uint8_t>(static_cast<int>(role) + 6 * layer));
}
GptqOpWriter& GptqOpWriter::SetWord(GptqRole role, int layer, std::uint16_t element, std::uint8_t value) {
  return Op(GptqOp::kSetWord, static_cast<std::uint8_t>(static_cast<int>(role) + 6 * layer),
            static_cast<std::uint8_t>(element & 0xff), static_cast<std::uint8_t>(element >> 8), value);
}
GptqOpWriter& GptqOpWriter::SetSpecial(GptqRole role, int layer, std::uint16_t element, std::uint8_t special) {
  return Op(GptqOp::kSetSpecial, static_cast<std::uint8_t>(static_cast<int>(role) + 6 * layer),
            static_cast<std::uint8_t>(element & 0xff), static_cast<std::uint8_t>(element >> 8), special);
}
GptqOpWriter& GptqOpWriter::SetGidx(int layer, std::uint16_t k, std::uint8_t mode) {
  return Op(GptqOp::kSetGidx, static_cast<std::uint8_t>(layer), static_cast<std::uint8_t>(k & 0xff),
            static_cast<std::uint8_t>(k >> 8), mode);
}
GptqOpWriter& GptqOpWriter::AddTensor(GptqAdd what, int layer) {
  return Op(GptqOp::kAddTensor, static_cast<std::uint8_t>(what), static_cast<std::uint8_t>(layer));
}
GptqOpWriter& GptqOpWriter::CfgSet(int source, std::string_view key, std::string_view json_value) {
  return Op(GptqOp::kCfgSet, static_cast<std::uint8_t>(source), GptqKeyIndex(key), GptqJsonValueIndex(json_value));
}
GptqOpWriter& GptqOpWriter::CfgDrop(int source, std::string_view key) {
  return Op(GptqOp::kCfgDrop, static_cast<std::uint8_t>(source), GptqKeyIndex(key));
}
GptqOpWriter& GptqOpWriter::CfgSplice(int source, std::string_view token, std::uint16_t position) {
  return Op(GptqOp::kCfgSplice, static_cast<std::uint8_t>(source), GptqTokenIndex(token),
            static_cast<std::uint8_t>(position & 0xff), static_cast<std::uint8_t>(position >> 8));
}
std::vector<std::uint8_t> GptqOpWriter::Finish(const GptqFileTail& tail) const {
  return out_.Finish(EncodeGptqFileTail(tail));
}

const std::vector<std::uint8_t>& GptqConfigDiffFile(int which) {
  static const std::vector<std::vector<std::uint8_t>> files = [] {
    std::vector<std::vector<std::uint8_t>> out;
    for (int w = 0; w < 4; ++w) {
      std::mt19937_64 rng(0x6a7 + w);
      std::vector<codec::TensorWithBytes> tensors;
      auto add = [&](const gen::GptqLayerParams& p) {
        for (auto& t : gen::BuildGptqLayer(p, rng)) tensors.push_back(std::move(t));
      };
      gen::GptqLayerParams p;
      switch (w) {
        case 0:
          p.format = 0, p.bits = 4, p.in_features = 64, p.out_features = 32, p.group_size = 32;
          add(p);
          break;
        case 1:
          p.format = 1, p.bits = 3, p.in_features = 96, p.out_features = 64, p.group_size = -1;
          p.g_idx_mode = 1, p.scales_dtype = 1;
          add(p);
          break;
        case 2:
          p.format = 2, p.bits = 5, p.in_features = 64, p.out_features = 32, p.group_size = 48;
          p.scales_dtype = 2;
          add(p);
          p.prefix = "model.layers.1.mlp.up_proj.";
          p.g_idx_mode = 2;
          add(p);
          break;
        default:
          p.format = 0, p.bits = 8, p.in_features = 128, p.out_features = 32, p.group_size = 128;
          p.bias_dtype = 0;
          add(p);
          break;
      }
      const codec::MetadataList metadata = {{"format", "pt"}};
      out.push_back(codec::SerializeSafetensors(tensors, &metadata));
    }
    return out;
  }();
  return files[static_cast<std::size_t>(which) % files.size()];
}

std::vector<std::uint8_t> GptqRawInput(const std::vector<qd::SideFile>& sources,
                                       const std::vector<std::uint8_t>& file) {
  std::vector<std::uint8_t> out;
  out.push_back(static_cast<std::uint8_t>(sources.size()));
  for (const qd::SideFile& s : sources) {
    out.push_back(GptqSourceNameIndex(s.name));
    out.push_back(static_cast<std::uint8_t>(s.bytes.size() & 0xff));
    out.push_back(static_cast<std::uint8_t>(s.bytes.size() >> 8));
    out.insert(out.end(), s.bytes.begin(), s.bytes.end());
  }
  out.insert(out.end(), file.begin(), file.end());
  GptqFileTail raw;
  raw.raw = true;
  const auto tail = EncodeGptqFileTail(raw);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

GptqCase GptqRawCase(const std::uint8_t* data, std::size_t size) { return RawCase(data, size); }

GptqCase GptqCaseFromInput(const std::uint8_t* data, std::size_t size) {
  if (size < kGptqFileTailSize) return RawCase(data, size);
  const std::uint8_t* tail_bytes = data + size - kGptqFileTailSize;
  const GptqFileTail tail = DecodeGptqFileTail(tail_bytes);
  const std::size_t body = size - kGptqFileTailSize;
  if (tail.raw) return RawCase(data, body);

  Draft d = Build(tail);
  constexpr std::size_t kMaxOps = 32;
  struct Parsed {
    GptqOp op;
    std::uint8_t a, b, c, e;
  };
  std::vector<Parsed> ops;
  InputReader in(data, body);
  while (!in.empty() && ops.size() < kMaxOps) {
    Parsed p;
    p.op = static_cast<GptqOp>(in.U8() % static_cast<std::uint8_t>(GptqOp::kCount));
    p.a = in.U8();
    p.b = in.U8();
    p.c = in.U8();
    p.e = in.U8();
    ops.push_back(p);
  }
  for (const Parsed& p : ops) {
    if (p.op < GptqOp::kHeaderByte) ApplyDraftOp(&d, p.op, p.a, p.b, p.c, p.e);
  }
  GptqCase c;
  const codec::MetadataList metadata = {{"format", "pt"}};
  c.file = codec::SerializeSafetensors(d.tensors, &metadata);
  for (const Parsed& p : ops) {
    if (p.op >= GptqOp::kHeaderByte) ApplyFileOp(&c.file, p.op, p.a, p.b, p.c, p.e);
  }
  for (const Source& s : d.sources) c.configs.push_back({s.name, s.Bytes()});
  return c;
}

}  // namespace qd::fuzz
