// gptq.cc: the GPTQ reader: layer discovery and geometry (docs/gptq.md
// section 2), the layer checks L1..L10 in the documented order (section 3)
// and the decoded output (section 7). Config sources and C1..C11:
// gptq_config.cc; kernels: gptq_kernels.cc; packing: gptq_pack.cc.
#include "codecs/gptq.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "codecs/finding.h"
#include "codecs/float16.h"

namespace qd::codec {
namespace {

using U128 = unsigned __int128;  // shape arithmetic: exact for products of two u64

std::uint32_t LoadU32(const std::uint8_t* p) {  // little-endian, any host
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

std::uint16_t LoadU16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

// ---- layers ------------------------------------------------------------------

constexpr std::array<const char*, kMemberCount> kMemberNames = {"qweight", "qzeros", "scales",
                                                                "g_idx"};

using LayerPlan = QuantLayerPlan;

// name = prefix + suffix, split at the last '.' (the prefix keeps the dot).
std::pair<std::string_view, std::string_view> SplitName(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return {std::string_view(), name};
  return {name.substr(0, dot + 1), name.substr(dot + 1)};
}

int MemberOf(std::string_view suffix) {
  for (int m = 0; m < kMemberCount; ++m) {
    if (suffix == kMemberNames[m]) return m;
  }
  return -1;
}

}  // namespace

// The listed tensors of TABLE in storage order (docs/pt.md 6.4: (begin, end,
// name), a model directory's shard first): a safetensors table's own order.
std::vector<std::size_t> StorageOrder(const TensorTable& table) {
  std::vector<std::size_t> order;
  order.reserve(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].listed) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return table.InStorageOrder(a, b); });
  return order;
}

// Layers in anchor order (section 2), ORDER being the table's storage order.
std::vector<LayerPlan> DiscoverLayers(const TensorTable& table,
                                      const std::vector<std::size_t>& order) {
  std::unordered_map<std::string_view, std::size_t> index;  // prefix -> plans
  std::vector<LayerPlan> plans;
  for (std::size_t i : order) {
    const auto [prefix, suffix] = SplitName(table[i].name);
    const int m = MemberOf(suffix);
    if (m < 0) continue;
    auto [it, inserted] = index.emplace(prefix, plans.size());
    if (inserted) {
      plans.emplace_back();
      plans.back().prefix = std::string(prefix);
    }
    plans[it->second].member[m] = i;  // names are unique (ST-005, IDX-007)
  }
  if (plans.empty()) return plans;
  for (std::size_t i : order) {
    const auto [prefix, suffix] = SplitName(table[i].name);
    const auto it = index.find(prefix);
    if (it == index.end() || MemberOf(suffix) >= 0) continue;
    LayerPlan& plan = plans[it->second];
    if (suffix == "bias") {
      plan.bias = i;
    } else if (suffix == "weight") {
      plan.weight = i;
    } else {
      plan.siblings.push_back(i);
    }
  }
  std::vector<std::size_t> position(table.size(), 0);
  for (std::size_t p = 0; p < order.size(); ++p) position[order[p]] = p;
  for (LayerPlan& plan : plans) {
    for (std::size_t t : plan.member) {
      if (t != kGptqNoTensor) {
        plan.anchor = t;
        break;
      }
    }
  }
  std::sort(plans.begin(), plans.end(), [&](const LayerPlan& a, const LayerPlan& b) {
    return position[a.anchor] < position[b.anchor];
  });
  return plans;
}

namespace {

bool IsScaleDtype(Dtype d) { return d == Dtype::kF16 || d == Dtype::kBF16 || d == Dtype::kF32; }


// ---- the checks --------------------------------------------------------------

class Checker {
 public:
  Checker(GptqResult* result, const std::string& file) : r_(result), file_(file) {}

  qd::Finding& Add(std::string rule, qd::Severity severity, std::string file,
                   std::string_view tensor, std::string field, std::int64_t offset,
                   std::string message) {
    r_->findings.push_back(MakeFinding(std::move(rule), severity, std::move(file),
                                       std::string(tensor), std::move(field), offset,
                                       std::move(message)));
    if (severity == qd::Severity::kError) r_->refused = true;
    return r_->findings.back();
  }
  bool TensorError(std::string rule, std::string_view tensor, std::string field,
                   std::int64_t offset, std::string message) {
    Add(std::move(rule), qd::Severity::kError, file_, tensor, std::move(field), offset,
        std::move(message));
    return false;
  }

  bool CheckLayer(const LayerPlan& plan, GptqLayer* layer);

 private:
  TableTensor T(std::size_t i) const { return r_->table[i]; }
  std::int64_t DataOffset(std::size_t i, std::uint64_t j) const {
    return r_->table.ByteOffset(i, j);
  }
  const std::uint8_t* Data(std::size_t i) const { return r_->table.Data(i); }
  // Where a finding about a header-level fact of T points (8; in a .pt
  // table ds of data.pkl, docs/pt.md 6.4).
  std::int64_t Header(const TableTensor& t) const { return r_->table.HeaderOffset(t); }

  bool CheckGidxValues(const LayerPlan& plan, std::uint64_t groups);
  bool CheckScaleValues(const LayerPlan& plan, std::uint64_t n);
  void WarnFloodedZero(const LayerPlan& plan, std::uint64_t groups, std::uint64_t n, int bits);

  GptqResult* r_;
  const std::string& file_;
};

// L8, values: the first g_idx outside 0..G-1.
bool Checker::CheckGidxValues(const LayerPlan& plan, std::uint64_t groups) {
  const std::size_t t = plan.member[kGidx];
  const std::uint8_t* p = Data(t);
  const std::uint64_t count = T(t).element_count;
  const std::int64_t g_max = groups > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                                 ? std::numeric_limits<std::int64_t>::max()
                                 : static_cast<std::int64_t>(groups);
  for (std::uint64_t k = 0; k < count; ++k) {
    const std::int64_t g = static_cast<std::int32_t>(LoadU32(p + 4 * k));
    if (g < 0 || g >= g_max) {
      qd::Finding& f = Add("GPTQ-004", qd::Severity::kError, file_, T(t).name, "g_idx",
                           DataOffset(t, 4 * k),
                           "g_idx[" + std::to_string(k) + "] = " + std::to_string(g) +
                               " selects no group of " + std::to_string(groups));
      f.element = static_cast<std::int64_t>(k);
      return false;
    }
  }
  return true;
}

// L9: the first scale that is an infinity or a NaN.
bool Checker::CheckScaleValues(const LayerPlan& plan, std::uint64_t n) {
  const std::size_t t = plan.member[kScales];
  const std::uint8_t* p = Data(t);
  const std::uint64_t count = T(t).element_count;
  std::uint64_t bad = count;
  switch (T(t).dtype) {
    case Dtype::kF32:
      for (std::uint64_t i = 0; i < count; ++i) {
        if (IsNonFiniteF32Bits(static_cast<std::uint32_t>(LoadU32(p + 4 * i)))) {
          bad = i;
          break;
        }
      }
      break;
    case Dtype::kF16:
      for (std::uint64_t i = 0; i < count; ++i) {
        if ((LoadU16(p + 2 * i) & 0x7c00u) == 0x7c00u) {
          bad = i;
          break;
        }
      }
      break;
    default:  // BF16 (L4 passed)
      for (std::uint64_t i = 0; i < count; ++i) {
        if ((LoadU16(p + 2 * i) & 0x7f80u) == 0x7f80u) {
          bad = i;
          break;
        }
      }
      break;
  }
  if (bad == count) return true;
  const std::uint64_t size = InfoOf(T(t).dtype).bits / 8;
  qd::Finding& f = Add("GPTQ-106", qd::Severity::kError, file_, T(t).name, "scales",
                       DataOffset(t, bad * size),
                       "scale (" + std::to_string(bad / n) + ", " + std::to_string(bad % n) +
                           ") is an infinity or a NaN");
  f.row = static_cast<std::int64_t>(bad / n);
  f.element = static_cast<std::int64_t>(bad % n);
  return false;
}

// L10 (format gptq): the first zero field equal to mask(b), continuous layout.
void Checker::WarnFloodedZero(const LayerPlan& plan, std::uint64_t groups, std::uint64_t n,
                              int bits) {
  const std::size_t t = plan.member[kQzeros];
  const std::uint8_t* p = Data(t);
  const std::uint64_t words = n / 32 * static_cast<std::uint64_t>(bits);  // per row
  const std::uint32_t mask = (1u << bits) - 1u;
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::uint8_t* row = p + 4 * g * words;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t s = i * static_cast<std::uint64_t>(bits);
      const std::uint64_t w = s / 32;
      const unsigned o = static_cast<unsigned>(s % 32);
      std::uint32_t field = LoadU32(row + 4 * w) >> o;
      if (o + static_cast<unsigned>(bits) > 32) field |= LoadU32(row + 4 * (w + 1)) << (32 - o);
      if ((field & mask) != mask) continue;
      qd::Finding& f = Add("GPTQ-107", qd::Severity::kWarning, file_, T(t).name, "qzeros",
                           DataOffset(t, 4 * (g * words + w)),
                           "v1 zero field (" + std::to_string(g) + ", " + std::to_string(i) +
                               ") is 2^bits-1: zero point 2^bits (an underflowed zero 0)");
      f.row = static_cast<std::int64_t>(g);
      f.element = static_cast<std::int64_t>(i);
      return;
    }
  }
}

std::string ToString(U128 v) {
  if (v == 0) return "0";
  std::string s;
  for (; v != 0; v /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  return s;
}

std::int64_t Saturated(U128 v) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  return v > static_cast<U128>(kMax) ? kMax : static_cast<std::int64_t>(v);
}

// L1..L10 for one layer.
bool Checker::CheckLayer(const LayerPlan& plan, GptqLayer* layer) {
  const std::string anchor(T(plan.anchor).name);
  // L1 GPTQ-101.
  for (int m = 0; m < kMemberCount; ++m) {
    if (plan.member[m] == kGptqNoTensor) {
      return TensorError("GPTQ-101", anchor, kMemberNames[m],
                         Header(T(plan.anchor)), "layer " + plan.prefix + " has no " + kMemberNames[m]);
    }
  }
  // L2 GPTQ-102.
  if (plan.weight != kGptqNoTensor) {
    return TensorError("GPTQ-102", T(plan.weight).name, "weight", Header(T(plan.weight)),
                       "a dense weight lies beside the quantized layer " + plan.prefix);
  }
  // L3 GPTQ-103.
  for (std::size_t s : plan.siblings) {
    Add("GPTQ-103", qd::Severity::kWarning, file_, T(s).name,
        std::string(SplitName(T(s).name).second), Header(T(s)),
        "unknown tensor beside layer " + plan.prefix + "; read as an ordinary tensor");
  }
  // L4 GPTQ-104.
  struct Want {
    std::size_t tensor;
    bool is_float;
    std::size_t rank;
  };
  const std::array<Want, 5> wants = {{{plan.member[kQweight], false, 2},
                                      {plan.member[kQzeros], false, 2},
                                      {plan.member[kScales], true, 2},
                                      {plan.member[kGidx], false, 1},
                                      {plan.bias, true, 1}}};
  for (const Want& want : wants) {
    if (want.tensor == kGptqNoTensor) continue;
    const TableTensor& e = T(want.tensor);
    if (want.is_float ? !IsScaleDtype(e.dtype) : e.dtype != Dtype::kI32) {
      return TensorError("GPTQ-104", e.name, "dtype", Header(e),
                         std::string(e.name) + " has dtype " + std::string(InfoOf(e.dtype).name) +
                             (want.is_float ? ", not F16, BF16 or F32" : ", not I32"));
    }
    if (e.shape.size() != want.rank) {
      return TensorError("GPTQ-104", e.name, "shape", Header(e),
                         std::string(e.name) + " has rank " + std::to_string(e.shape.size()) + ", not " +
                             std::to_string(want.rank));
    }
  }
  const TableTensor& qweight = T(plan.member[kQweight]);
  const TableTensor& qzeros = T(plan.member[kQzeros]);
  const TableTensor& scales = T(plan.member[kScales]);
  const TableTensor& g_idx = T(plan.member[kGidx]);
  const U128 b = static_cast<U128>(r_->config.bits);
  const std::int64_t gs = r_->config.group_size;
  auto n_groups = [&](U128 k) -> U128 {
    if (gs == -1) return 1;
    const U128 g = static_cast<U128>(gs);
    return k / g + (k % g != 0 ? 1 : 0);
  };
  // Geometry (section 2).
  const U128 n = qweight.shape[1];
  const U128 rows = qweight.shape[0];
  const bool kq_defined = (rows * 32) % b == 0;
  const U128 kq = rows * 32 / b;
  const U128 k = kq_defined && n_groups(kq) == scales.shape[0] ? kq : static_cast<U128>(g_idx.shape[0]);
  const U128 groups = n_groups(k);
  // L5 GPTQ-002.
  if (k % 32 != 0 || rows != k / 32 * b) {
    return TensorError("GPTQ-002", qweight.name, "shape", Header(qweight),
                       "qweight rows " + std::to_string(qweight.shape[0]) +
                           " do not fit in_features " + ToString(k) +
                           " at " + std::to_string(r_->config.bits) + " bits (in_features must be a multiple of 32)");
  }
  // L6 GPTQ-003.
  if (n % 32 != 0 || qzeros.shape[0] != groups || qzeros.shape[1] != n / 32 * b) {
    return TensorError("GPTQ-003", qzeros.name, "shape", Header(qzeros),
                       "qzeros is not [groups, out_features / 32 * bits] (out_features " +
                           std::to_string(qweight.shape[1]) + " must be a multiple of 32)");
  }
  // L7 GPTQ-105.
  if (scales.shape[0] != groups || scales.shape[1] != n) {
    return TensorError("GPTQ-105", scales.name, "shape", Header(scales),
                       "scales is not [groups, out_features]");
  }
  if (plan.bias != kGptqNoTensor && T(plan.bias).shape[0] != n) {
    return TensorError("GPTQ-105", T(plan.bias).name, "shape", Header(T(plan.bias)),
                       "bias is not [out_features]");
  }
  // L8 GPTQ-004.
  if (g_idx.shape[0] != k) {
    return TensorError("GPTQ-004", g_idx.name, "shape", Header(g_idx),
                       "g_idx has " + std::to_string(g_idx.shape[0]) + " entries for in_features " + ToString(k));
  }
  // From here k = g_idx.shape[0] (a u64), groups <= max(k, 1), n = qweight.shape[1].
  const std::uint64_t k64 = static_cast<std::uint64_t>(k);
  const std::uint64_t groups64 = static_cast<std::uint64_t>(groups);
  const std::uint64_t n64 = qweight.shape[1];
  if (!CheckGidxValues(plan, groups64)) return false;
  // L9 GPTQ-106.
  if (!CheckScaleValues(plan, n64)) return false;
  // L10 GPTQ-107.
  if (r_->config.format == GptqFormat::kV1) WarnFloodedZero(plan, groups64, n64, r_->config.bits);

  layer->prefix = plan.prefix;
  layer->qweight = plan.member[kQweight];
  layer->qzeros = plan.member[kQzeros];
  layer->scales = plan.member[kScales];
  layer->g_idx = plan.member[kGidx];
  layer->bias = plan.bias;
  layer->in_features = static_cast<std::int64_t>(k64);
  layer->out_features = Saturated(n64);  // > int64 only when K = 0 (no data)
  layer->groups = static_cast<std::int64_t>(groups64);
  return true;
}

}  // namespace

GptqResult ReadGptq(qd::ByteView file, const std::string& file_name,
                    const std::vector<qd::SideFile>& configs) {
  ContainerResult container = ReadContainer(file, file_name);
  if (container.refused) return ContainerRefusal<GptqResult>(std::move(container.findings));
  return ReadGptqTable(TensorTable::FromContainer(std::move(container.container)), file_name,
                       configs, std::move(container.findings));
}

GptqResult ReadGptqTable(TensorTable table, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs,
                         std::vector<qd::Finding> container_findings) {
  GptqResult result;
  result.findings = std::move(container_findings);
  result.table = std::move(table);
  const std::vector<LayerPlan> plans = DiscoverLayers(result.table, StorageOrder(result.table));
  result.is_gptq = !plans.empty();

  // C1..C11: the config sources (gptq_config.cc).
  if (!ReadQuantConfig(QuantFamily::kGptq, configs, file_name, &result.findings, &result.config)) {
    result.refused = true;
    return result;
  }
  Checker checker(&result, file_name);
  for (const LayerPlan& plan : plans) {
    GptqLayer layer;
    if (!checker.CheckLayer(plan, &layer)) {
      result.layers.clear();
      return result;
    }
    result.layers.push_back(std::move(layer));
  }
  return result;
}

bool HasGptqLayer(const TensorTable& table) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    const TableTensor t = table[i];
    if (t.listed && MemberOf(SplitName(t.name).second) >= 0) return true;
  }
  return false;
}

bool ClaimsGptq(const ClaimInput& input) {
  const TensorTable* table = input.Get();
  if (table == nullptr) return false;
  for (std::size_t i = 0; i < table->size(); ++i) {
    if (MemberOf(SplitName((*table)[i].name).second) >= 0) return true;
  }
  return false;
}

GptqLayerView ViewOf(const GptqResult& result, const GptqLayer& layer) {
  const TensorTable& t = result.table;
  GptqLayerView v;
  v.format = result.config.format;
  v.bits = result.config.bits;
  v.in_features = layer.in_features;
  v.out_features = layer.out_features;
  v.groups = layer.groups;
  v.qweight = t.Data(layer.qweight);
  v.qzeros = t.Data(layer.qzeros);
  v.scales = t.Data(layer.scales);
  v.scales_dtype = t[layer.scales].dtype;
  v.g_idx = t.Data(layer.g_idx);
  return v;
}

void StreamGptqLayers(const GptqResult& r, TensorSink& sink, Kernel kernel) {
  const TensorTable& t = r.table;
  // Section 7: storage order; a layer's weight stands where its qweight is,
  // its scales are consumed, every other floating tensor (bias included) is
  // widened, integer tensors outside layers are left out.
  constexpr std::size_t kPlain = kGptqNoTensor;
  std::vector<std::size_t> layer_at(t.size(), kPlain);  // qweight -> layer
  std::vector<bool> consumed(t.size(), false);
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    layer_at[r.layers[l].qweight] = l;
    consumed[r.layers[l].scales] = true;
  }
  struct Item {
    std::size_t tensor;
    std::size_t layer;  // kPlain for a floating tensor
  };
  std::vector<Item> items;
  std::vector<TensorInfo> plan;
  for (std::size_t i : StorageOrder(t)) {
    const TableTensor& e = t[i];
    if (layer_at[i] != kPlain) {
      const GptqLayer& layer = r.layers[layer_at[i]];
      items.push_back({i, layer_at[i]});
      plan.push_back({layer.prefix + "weight",
                      {e.shape[1], static_cast<std::uint64_t>(layer.in_features)}});
    } else if (!consumed[i] && IsFloatDtype(e.dtype)) {
      items.push_back({i, kPlain});
      plan.push_back({std::string(e.name), e.shape});
    }
  }
  if (!sink.Plan(plan)) return;
  for (std::size_t j = 0; j < items.size(); ++j) {
    if (items[j].layer == kPlain) {
      if (!t.StreamFloat(items[j].tensor, j, sink)) break;
      continue;
    }
    // The weight [N, K] a few output rows at a time (GptqDequantizeRows).
    const GptqLayerView view = ViewOf(r, r.layers[items[j].layer]);
    const bool more = StreamRows(sink, j, plan[j].shape[0], plan[j].shape[1],
                                 [&](std::uint64_t row, std::uint64_t count, float* out) {
                                   GptqDequantizeRows(view, static_cast<std::int64_t>(row),
                                                      static_cast<std::int64_t>(row + count), out,
                                                      kernel);
                                 });
    if (!more) break;
  }
}

qd::Outcome StreamGptqFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, TensorSink& sink,
                           Kernel kernel) {
  GptqResult r = ReadGptq(file, file_name, configs);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (!r.refused) StreamGptqLayers(r, sink, kernel);
  return outcome;
}

qd::Outcome DecodeGptqFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, Kernel kernel) {
  return CollectStream(
      [&](TensorSink& sink) { return StreamGptqFile(file, file_name, configs, sink, kernel); });
}

}  // namespace qd::codec
