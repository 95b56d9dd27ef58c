// Generators for AWQ checkpoints (rules AWQ-*, and the config rules CFG-003
// and CFG-005 an AWQ file can break; docs/awq.md): GEMM, GEMV, GEMV_FAST and
// LLM_AWQ (GEMV_FAST's layout with P.scaled_zeros, labelled format llm-awq
// or tagged backend: llm-awq; docs/awq.md section 4). Layers are packed with the
// codec's encoder (codec::AwqEncode) and written with
// codec::SerializeSafetensors; the config is one of the three shapes the
// upstream tools write (GPT-QModel quantize_config.json, AutoAWQ's
// config.json quantization_config, AutoAWQ's legacy w_bit / q_group_size
// payload). Each violation starts from a valid draft and breaks one thing,
// chosen so that every step before it in docs/awq.md section 5 passes.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codecs/awq.h"
#include "codecs/float16.h"
#include "generators/generators.h"
#include "generators/tensor_list.h"

namespace qd::gen {
namespace {

using Json = nlohmann::ordered_json;
using codec::TensorWithBytes;

std::vector<std::uint8_t> Le(const std::vector<std::int32_t>& words, int bytes_per_word) {
  std::vector<std::uint8_t> out;
  for (const std::int32_t w : words) {
    const std::uint32_t u = static_cast<std::uint32_t>(w);
    for (int b = 0; b < bytes_per_word; ++b) out.push_back(static_cast<std::uint8_t>(u >> (8 * b)));
  }
  return out;
}

TensorWithBytes Tensor(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                       std::vector<std::uint8_t> bytes) {
  TensorWithBytes t;
  t.spec = {std::move(name), std::move(dtype), std::move(shape), bytes.size()};
  t.bytes = std::move(bytes);
  return t;
}

// A random finite, non-zero half of moderate size, either sign (scales).
std::uint16_t SomeHalf(Rng& rng) {
  const std::uint16_t exponent = static_cast<std::uint16_t>(8 + Pick(rng, 10));  // 2^-7 .. 2^2
  const std::uint16_t sign = Coin(rng, 6) ? 0x8000u : 0u;
  return static_cast<std::uint16_t>(sign | (exponent << 10) | Pick(rng, 1024));
}

struct AwqDraft {
  std::string version = "gemm";  // gemm, gemv, gemv_fast or llm-awq
  std::int64_t k = 0, n = 0, group_size = 0;  // group_size as the config says (-1 allowed)
  bool sym = false;
  int style = 0;  // 0 GPT-QModel, 1 AutoAWQ config.json, 2 AutoAWQ legacy
  std::vector<TensorWithBytes> tensors;
  Json config;

  std::int64_t Group() const { return group_size == -1 ? k : group_size; }
  // GEMV_FAST's layout: its own and LLM_AWQ's (docs/awq.md section 4).
  bool Fast() const { return version == "gemv_fast" || version == "llm-awq"; }
  // The zero member's suffix: LLM_AWQ names it scaled_zeros.
  std::string Zeros() const { return version == "llm-awq" ? "scaled_zeros" : "qzeros"; }
  std::int64_t G() const { return k / Group(); }

  TensorWithBytes* Find(const std::string& name) { return FindTensor(tensors, name); }

  Generated Write(const std::string& rule, const std::string& what, bool with_config = true) const {
    Generated g;
    g.bytes = codec::SerializeSafetensors(tensors, nullptr);
    g.expected_rule = rule;
    g.description = what + " (AWQ " + version + ", K " + std::to_string(k) + ", N " +
                    std::to_string(n) + ", group_size " + std::to_string(group_size) + ")";
    if (!with_config) return g;
    const std::string text = style == 1 ? Json{{"model_type", "llama"}, {"quantization_config", config}}.dump(2)
                                        : config.dump(2);
    const char* name = style == 0 ? "quantize_config.json" : style == 1 ? "config.json" : "quant_config.json";
    g.side_files.push_back({name, std::vector<std::uint8_t>(text.begin(), text.end())});
    return g;
  }
};

Json ConfigFor(const AwqDraft& d, Rng& rng) {
  // LLM_AWQ: GPT-QModel writes format llm-awq; AutoAWQ-style configs carry
  // the producer tag backend: llm-awq beside version gemv_fast (spec 004).
  const bool llm = d.version == "llm-awq";
  std::string v = llm && d.style != 0 ? "gemv_fast" : d.version;
  if (Coin(rng, 4)) {
    for (char& c : v) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);  // "GEMM"
  }
  Json config;
  switch (d.style) {
    case 0:
      config = Json{{"bits", 4},          {"group_size", d.group_size}, {"desc_act", false},
                    {"method", "awq"},    {"quant_method", "awq"},      {"format", d.version},
                    {"checkpoint_format", d.version}, {"pack_dtype", "int32"},
                    {"zero_point", !d.sym}, {"version", v}};
      break;
    case 1:
      config = Json{{"bits", 4}, {"group_size", d.group_size}, {"modules_to_not_convert", nullptr},
                    {"quant_method", "awq"}, {"version", v}, {"zero_point", !d.sym}};
      break;
    default:
      config = Json{{"zero_point", !d.sym}, {"q_group_size", d.group_size}, {"w_bit", 4},
                    {"version", v}, {"modules_to_not_convert", nullptr}};
      break;
  }
  if (llm && (d.style != 0 || Coin(rng))) config["backend"] = Coin(rng, 4) ? "LLM-AWQ" : "llm-awq";
  return config;
}

// One layer P of the draft's version: codes, zeros and scales drawn here,
// packed by the codec's encoder, scale and zero grids padded as section 4.
void AddLayer(AwqDraft& d, const std::string& prefix, bool bias, Rng& rng) {
  const std::int64_t K = d.k, N = d.n, G = d.G();
  std::vector<std::int32_t> codes(static_cast<std::size_t>(K * N)), zeros(static_cast<std::size_t>(G * N));
  for (auto& c : codes) c = static_cast<std::int32_t>(Pick(rng, 16));
  for (auto& z : zeros) z = d.sym ? 8 : static_cast<std::int32_t>(Pick(rng, 16));
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(G * N));
  for (auto& s : scales) s = SomeHalf(rng);
  const codec::AwqFormat format = d.version == "gemv" ? codec::AwqFormat::kGemv
                                  : d.Fast()             ? codec::AwqFormat::kGemvFast
                                                         : codec::AwqFormat::kGemm;
  codec::AwqPacked packed;
  std::string error;
  codec::AwqEncode(format, K, N, d.group_size, codes, zeros, &packed, &error);
  const std::int64_t Z = codec::AwqZerosWidth(K, d.Group());
  auto shape = [](const std::vector<std::int64_t>& s) {
    return std::vector<std::uint64_t>(s.begin(), s.end());
  };
  const bool fast = format == codec::AwqFormat::kGemvFast;
  d.tensors.push_back(Tensor(prefix + "qweight", fast ? "I16" : "I32", shape(packed.qweight_shape),
                             Le(packed.qweight, fast ? 2 : 4)));
  std::vector<std::int32_t> grid;  // scales (as half bits) in the stored layout
  std::vector<std::int32_t> scaled;  // GEMV_FAST qzeros: -(scale * zero) in half
  std::vector<std::uint64_t> grid_shape;
  switch (format) {
    case codec::AwqFormat::kGemm:
      grid.assign(scales.begin(), scales.end());
      grid_shape = {static_cast<std::uint64_t>(G), static_cast<std::uint64_t>(N)};
      break;
    case codec::AwqFormat::kGemv:
      grid.assign(static_cast<std::size_t>(N * 8 * Z), 0);
      for (std::int64_t g = 0; g < G; ++g)
        for (std::int64_t n = 0; n < N; ++n) grid[n * 8 * Z + g] = scales[g * N + n];
      grid_shape = {static_cast<std::uint64_t>(N), static_cast<std::uint64_t>(8 * Z)};
      break;
    case codec::AwqFormat::kGemvFast:
      grid.assign(static_cast<std::size_t>(8 * Z * N), 0);
      scaled.assign(grid.size(), 0);
      for (std::int64_t g = 0; g < G; ++g) {
        for (std::int64_t n = 0; n < N; ++n) {
          grid[g * N + n] = scales[g * N + n];
          const float product = codec::F16ToF32(scales[g * N + n]) * static_cast<float>(zeros[g * N + n]);
          scaled[g * N + n] = codec::F32ToF16(-product);
        }
      }
      grid_shape = {static_cast<std::uint64_t>(8 * Z), static_cast<std::uint64_t>(N)};
      break;
  }
  if (fast) {
    d.tensors.push_back(Tensor(prefix + d.Zeros(), "F16", grid_shape, Le(scaled, 2)));
  } else {
    d.tensors.push_back(Tensor(prefix + "qzeros", "I32", shape(packed.qzeros_shape), Le(packed.qzeros, 4)));
  }
  d.tensors.push_back(Tensor(prefix + "scales", "F16", grid_shape, Le(grid, 2)));
  if (bias) {
    std::vector<std::int32_t> b(static_cast<std::size_t>(N));
    for (auto& x : b) x = SomeHalf(rng);
    d.tensors.push_back(Tensor(prefix + "bias", "F16", {static_cast<std::uint64_t>(N)}, Le(b, 2)));
  }
}

// A random valid draft with LAYERS layers (0: one or two).
AwqDraft MakeDraft(Rng& rng, int layers = 0, const std::string& version = "") {
  AwqDraft d;
  d.version = !version.empty() ? version
                               : std::vector<std::string>{"gemm", "gemv", "gemv_fast", "llm-awq"}[Pick(rng, 4)];
  const std::vector<std::int64_t> sizes = {-1, 32, 64, 128};
  d.group_size = sizes[Pick(rng, sizes.size())];
  const std::int64_t groups = 1 + static_cast<std::int64_t>(Pick(rng, 4));
  d.k = d.group_size == -1 ? 64 * (1 + static_cast<std::int64_t>(Pick(rng, 3))) : d.group_size * groups;
  if (d.Fast() && d.k % 64 != 0) d.k *= 2;
  d.n = d.version == "gemm" ? 8 * (1 + static_cast<std::int64_t>(Pick(rng, 4)))
        : d.Fast() ? 4 * (1 + static_cast<std::int64_t>(Pick(rng, 6)))
                                   : 1 + static_cast<std::int64_t>(Pick(rng, 24));
  d.sym = Coin(rng, 3);
  d.style = static_cast<int>(Pick(rng, 3));
  d.config = ConfigFor(d, rng);
  if (Coin(rng)) {
    std::vector<std::uint16_t> dense(16);
    for (auto& x : dense) x = SomeHalf(rng);
    d.tensors.push_back(Tensor("model.embed_tokens.weight", "F16", {4, 4},
                               Le(std::vector<std::int32_t>(dense.begin(), dense.end()), 2)));
  }
  const int count = layers != 0 ? layers : 1 + static_cast<int>(Pick(rng, 2));
  for (int i = 0; i < count; ++i) {
    AddLayer(d, "model.layers." + std::to_string(i) + ".mlp.up_proj.", Coin(rng, 3), rng);
  }
  return d;
}

const std::string kP = "model.layers.0.mlp.up_proj.";

void SetHalf(TensorWithBytes* t, std::size_t element, std::uint16_t bits) {
  t->bytes[2 * element] = static_cast<std::uint8_t>(bits);
  t->bytes[2 * element + 1] = static_cast<std::uint8_t>(bits >> 8);
}

Generated Violate(const std::string& rule, Rng& rng) {
  if (rule == "AWQ-001") {
    AwqDraft d = MakeDraft(rng);
    d.config[d.style == 2 ? "w_bit" : "bits"] = std::vector<int>{2, 3, 8}[Pick(rng, 3)];
    return d.Write(rule, "bits is not 4");
  }
  if (rule == "AWQ-002") {
    const std::string version = Coin(rng) ? "gemv_fast" : "llm-awq";
    AwqDraft d = MakeDraft(rng, 1, version);
    TensorWithBytes* q = d.Find(kP + "qweight");
    q->spec.shape[1] += 32;  // K no longer a multiple of 64
    q->bytes.resize(2 * q->spec.shape[0] * q->spec.shape[1]);
    q->spec.byte_size = q->bytes.size();
    return d.Write(rule, version + " in_features not a multiple of 64");
  }
  if (rule == "AWQ-003" || rule == "AWQ-004") {
    // AWQ-003 also on LLM_AWQ's scaled_zeros grid [8Z, N].
    const std::string version = rule == "AWQ-003" && Coin(rng, 3) ? "llm-awq" : "gemm";
    AwqDraft d = MakeDraft(rng, 1, version);
    TensorWithBytes* t = d.Find(kP + (rule == "AWQ-003" ? d.Zeros() : "scales"));
    const std::size_t row = t->bytes.size() / t->spec.shape[0];
    t->spec.shape[0] += 1;
    t->bytes.resize(t->bytes.size() + row);
    t->spec.byte_size = t->bytes.size();
    return d.Write(rule, rule == "AWQ-003" ? d.Zeros() + " has an extra row" : "scales has an extra row");
  }
  if (rule == "AWQ-005") {
    AwqDraft d = MakeDraft(rng, 1, Coin(rng) ? "gemm" : "gemv");
    if (d.version == "gemv") {
      d.config[d.style == 2 ? "q_group_size" : "group_size"] = 16;  // no zeros width for 16
      return d.Write(rule, "gemv group size 16 has no zeros width");
    }
    d.config[d.style == 2 ? "q_group_size" : "group_size"] = d.k + 1;  // does not divide K
    return d.Write(rule, "group_size does not divide in_features");
  }
  if (rule == "AWQ-006") {
    const std::string version = std::vector<std::string>{"gemv", "gemv_fast", "llm-awq"}[Pick(rng, 3)];
    AwqDraft d = MakeDraft(rng, 1, version);
    // MakeDraft's G is at most 8 and below 8Z: there is a padding slot.
    const std::int64_t Z2 = codec::AwqZerosWidth(d.k, d.Group());
    const std::int64_t G2 = d.G();
    const std::int64_t slot = G2 + static_cast<std::int64_t>(Pick(rng, static_cast<std::uint64_t>(8 * Z2 - G2)));
    const std::int64_t n = static_cast<std::int64_t>(Pick(rng, static_cast<std::uint64_t>(d.n)));
    // GEMV_FAST, LLM_AWQ: the padding row of the scaled zeros or of the scales.
    const bool in_zeros = d.Fast() && Coin(rng);
    TensorWithBytes* s = d.Find(kP + (in_zeros ? d.Zeros() : "scales"));
    if (d.version == "gemv") {
      SetHalf(s, static_cast<std::size_t>(n * 8 * Z2 + slot), 0x3c00);
    } else {
      SetHalf(s, static_cast<std::size_t>(slot * d.n + n), 0x3c00);
    }
    return d.Write(rule, std::string("a padding ") + (in_zeros ? "scaled zero" : "scale") + " slot is 1.0");
  }
  if (rule == "AWQ-101") {
    switch (Pick(rng, 3)) {
      case 0: {
        // LLM_AWQ tensors (scaled_zeros) labelled gemv_fast: qzeros is missing.
        AwqDraft d = MakeDraft(rng, 1, "llm-awq");
        d.version = "gemv_fast";
        d.config = ConfigFor(d, rng);
        return d.Write(rule, "scaled_zeros labelled gemv_fast: qzeros is missing");
      }
      case 1: {
        // GEMV_FAST tensors (qzeros) labelled llm-awq: scaled_zeros is missing.
        AwqDraft d = MakeDraft(rng, 1, "gemv_fast");
        d.version = "llm-awq";
        d.config = ConfigFor(d, rng);
        return d.Write(rule, "qzeros labelled llm-awq: scaled_zeros is missing");
      }
      default: {
        AwqDraft d = MakeDraft(rng, 1);
        // The zero member: a layer without scales (and without an I16
        // qweight) is no AWQ layer by detection (docs/awq.md section 2).
        const std::string gone = kP + d.Zeros();
        RemoveTensor(d.tensors, gone);
        return d.Write(rule, gone + " is missing");
      }
    }
  }
  if (rule == "AWQ-102") {
    AwqDraft d = MakeDraft(rng, 1);
    d.tensors.push_back(Tensor(kP + "weight", "F16", {2}, {0, 0x3c, 0, 0x3c}));
    return d.Write(rule, "a dense weight beside the layer");
  }
  if (rule == "AWQ-103") {
    AwqDraft d = MakeDraft(rng, 2);
    d.tensors.push_back(Tensor("model.layers.1.mlp.up_proj.g_idx", "I32", {1}, {0, 0, 0, 0}));
    return d.Write(rule, "the second layer carries a GPTQ g_idx");
  }
  if (rule == "AWQ-104") {
    if (Coin(rng, 3)) {
      // LLM_AWQ: a P.qzeros beside P.scaled_zeros is no member. It is
      // I32, as AWQ's packed zeros are: read as an ordinary tensor it is
      // then not decoded, so decode's output holds no "qzeros" name that
      // `check` would read as a GPTQ layer without its config (issue 9
      // section 2: what decode writes, check accepts).
      AwqDraft d = MakeDraft(rng, 1, "llm-awq");
      TensorWithBytes copy = *d.Find(kP + "scaled_zeros");
      copy.spec.name = kP + "qzeros";
      copy.spec.dtype = "I32";
      copy.bytes.resize(copy.bytes.size() / 4 * 4);
      copy.spec.byte_size = copy.bytes.size();
      copy.spec.shape = {copy.bytes.size() / 4};
      d.tensors.push_back(std::move(copy));
      return d.Write(rule, "qzeros beside an LLM_AWQ layer's scaled_zeros");
    }
    AwqDraft d = MakeDraft(rng, 1);
    d.tensors.push_back(Tensor(kP + std::vector<std::string>{"perm", "wf", "extra"}[Pick(rng, 3)], "I32",
                               {1}, {1, 0, 0, 0}));
    return d.Write(rule, "an unknown sibling of the layer");
  }
  if (rule == "AWQ-105") {
    if (Coin(rng, 3)) {
      AwqDraft d = MakeDraft(rng, 1, "llm-awq");
      d.Find(kP + "scaled_zeros")->spec.dtype = "BF16";  // GEMV_FAST's scaled zeros are F16
      return d.Write(rule, "scaled_zeros is BF16");
    }
    AwqDraft d = MakeDraft(rng, 1, "gemm");
    d.Find(kP + "qzeros")->spec.dtype = "F32";
    return d.Write(rule, "qzeros is F32");
  }
  if (rule == "AWQ-106") {
    AwqDraft d = MakeDraft(rng, 1);
    TensorWithBytes* s = d.Find(kP + "scales");
    const std::int64_t g = static_cast<std::int64_t>(Pick(rng, static_cast<std::uint64_t>(d.G())));
    const std::int64_t n = static_cast<std::int64_t>(Pick(rng, static_cast<std::uint64_t>(d.n)));
    const std::size_t at = d.version == "gemv" ? static_cast<std::size_t>(n * s->spec.shape[1] + g)
                                               : static_cast<std::size_t>(g * d.n + n);
    // GEMV_FAST, LLM_AWQ: a real group's scaled zero instead, sometimes.
    const bool in_zeros = d.Fast() && Coin(rng);
    SetHalf(in_zeros ? d.Find(kP + d.Zeros()) : s, at, Coin(rng) ? 0x7c00 : 0x7e00);
    return d.Write(rule, std::string("a ") + (in_zeros ? "scaled zero" : "scale") + " is an infinity or a NaN");
  }
  if (rule == "CFG-003") {
    return MakeDraft(rng).Write(rule, "no config source", false);
  }
  if (rule == "CFG-005") {
    AwqDraft d = MakeDraft(rng);
    d.config.erase("backend");  // the llm-awq tag would force method awq (docs/awq.md 3)
    d.config[d.style == 0 ? "method" : "quant_method"] = "gptq";
    if (d.style == 0) d.config["quant_method"] = "gptq";
    return d.Write(rule, "AWQ tensors labelled method gptq");
  }
  return MakeDraft(rng).Write("", "unknown rule " + rule + ": a valid file");
}

}  // namespace

Generated AwqValid(Rng& rng) {
  const AwqDraft d = MakeDraft(rng);
  return d.Write("", "valid file, config style " + std::to_string(d.style));
}

std::vector<std::string> AwqViolableRules() {
  return {"AWQ-001", "AWQ-002", "AWQ-003", "AWQ-004", "AWQ-005", "AWQ-006", "AWQ-101",
          "AWQ-102", "AWQ-103", "AWQ-104", "AWQ-105", "AWQ-106", "CFG-003", "CFG-005"};
}

Generated AwqViolation(std::string_view rule, Rng& rng) { return Violate(std::string(rule), rng); }

}  // namespace qd::gen
