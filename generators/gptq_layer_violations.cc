// gptq_layer_violations.cc: GPTQ checkpoints with one layer that breaks one
// rule each of docs/gptq.md section 3's layer steps (L1..L10: GPTQ-002..004,
// GPTQ-101..107), the config and every earlier step passing. Each builder
// gets a valid draft (gptq_model.cc) and one of its layers and breaks one
// thing.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "generators/gptq_model.h"

namespace qd::gen::gptq_gen {
namespace {

std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }

// docs/awq.md section 2: with g_idx gone, rank-2 qweight and scales that are
// not GPTQ's shape pair (equal columns, different rows) make an AWQ layer.
bool LooksLikeAwqWithoutGIdx(Draft& d, const std::string& prefix) {
  const codec::TensorWithBytes* qweight = d.Find(prefix + "qweight");
  const codec::TensorWithBytes* scales = d.Find(prefix + "scales");
  if (qweight == nullptr || scales == nullptr) return false;
  const std::vector<std::uint64_t>& q = qweight->spec.shape;
  const std::vector<std::uint64_t>& s = scales->spec.shape;
  if (q.size() != 2 || s.size() != 2) return false;
  return !(q[1] == s[1] && q[0] != s[0]);
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
  if (std::string(member) == "g_idx" && LooksLikeAwqWithoutGIdx(d, P)) {
    // Without g_idx this layer would be an AWQ layer by docs/awq.md
    // section 2's detection (qweight rows = scales rows, e.g. K 128, 4 bits,
    // group size 8): the file would be read as AWQ, not refused by GPTQ-101.
    member = "qzeros";
  }
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

// In the order GptqViolableRules lists them (see LayerRule).
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

std::span<const LayerRule> LayerRules() { return kLayerRules; }

}  // namespace qd::gen::gptq_gen
