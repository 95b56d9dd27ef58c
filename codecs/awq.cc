// awq.cc: the AWQ reader: detection (docs/awq.md section 2), the config
// (section 3, the GPTQ reader's steps as an AWQ reader takes them), the layer
// checks A1..A11 in the documented order (section 5) and the decoded output
// (section 7). Kernels and packing: awq_pack.cc.
#include "codecs/awq.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "codecs/finding.h"
#include "codecs/float16.h"
#include "codecs/layer_stream.h"
#include "codecs/safetensors.h"

namespace qd::codec {
namespace {

using U128 = unsigned __int128;  // shape arithmetic: exact for the products below


std::uint16_t Half(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

std::string ToText(U128 v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return s;
}

bool IsAwqScaleDtype(Dtype d) { return d == Dtype::kF16 || d == Dtype::kBF16 || d == Dtype::kF32; }

// Section 2: the tensors of a layer say AWQ: P+qweight present, no P+g_idx,
// and either an I16 qweight, or qweight and scales of rank 2 that are not the
// GPTQ shape pair (equal columns, different rows).
bool IsAwqLayer(const TensorTable& table, const QuantLayerPlan& plan) {
  if (plan.member[kQweight] == kGptqNoTensor || plan.member[kGidx] != kGptqNoTensor) return false;
  const TableTensor qweight = table[plan.member[kQweight]];
  if (qweight.dtype == Dtype::kI16) return true;
  if (plan.member[kScales] == kGptqNoTensor) return false;
  const TableTensor scales = table[plan.member[kScales]];
  if (qweight.shape.size() != 2 || scales.shape.size() != 2) return false;
  const bool gptq_pair = qweight.shape[1] == scales.shape[1] && qweight.shape[0] != scales.shape[0];
  return !gptq_pair;
}

AwqFormat FormatOf(const std::string& name) {
  if (name == "gemv") return AwqFormat::kGemv;
  if (name == "gemv_fast" || name == "llm-awq") return AwqFormat::kGemvFast;
  return AwqFormat::kGemm;
}

class LayerChecker {
 public:
  LayerChecker(AwqResult* r, const std::string& file) : r_(r), file_(file) {}
  bool Check(const QuantLayerPlan& plan, AwqLayer* layer);

 private:
  TableTensor T(std::size_t i) const { return r_->table[i]; }
  qd::Finding& Add(const char* rule, qd::Severity severity, std::string_view tensor,
                   std::string field, std::int64_t offset, std::string message) {
    r_->findings.push_back(MakeFinding(rule, severity, file_, std::string(tensor),
                                       std::move(field), offset, std::move(message)));
    if (severity == qd::Severity::kError) r_->refused = true;
    return r_->findings.back();
  }
  // A header-level fact of TENSOR: byte_offset 8, in a .pt table ds of
  // data.pkl (docs/pt.md 6.4).
  bool Error(const char* rule, const TableTensor& tensor, std::string field, std::string message) {
    Add(rule, qd::Severity::kError, tensor.name, std::move(field), r_->table.HeaderOffset(tensor),
        std::move(message));
    return false;
  }
  // A value finding at (row, element) of TENSOR's data byte j.
  bool ValueError(const char* rule, std::size_t tensor, const char* field, std::uint64_t j,
                  std::uint64_t row, std::uint64_t element, std::string message) {
    qd::Finding& f = Add(rule, qd::Severity::kError, T(tensor).name, field,
                         r_->table.ByteOffset(tensor, j), std::move(message));
    f.row = static_cast<std::int64_t>(row);
    f.element = static_cast<std::int64_t>(element);
    return false;
  }
  bool CheckFinite(std::size_t tensor, const char* field, std::uint64_t rows, std::uint64_t cols,
                   bool real_rows_first, std::uint64_t real);
  bool CheckPadding(const AwqLayer& layer);

  AwqResult* r_;
  const std::string& file_;
};

bool IsNonFinite(Dtype dtype, const std::uint8_t* p) {
  if (dtype == Dtype::kF32) {
    const std::uint32_t bits = static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                               (static_cast<std::uint32_t>(p[2]) << 16) |
                               (static_cast<std::uint32_t>(p[3]) << 24);
    return IsNonFiniteF32Bits(bits);
  }
  const std::uint16_t h = Half(p);
  return dtype == Dtype::kF16 ? (h & 0x7c00u) == 0x7c00u : (h & 0x7f80u) == 0x7f80u;
}

// A10 on a [rows, cols] grid whose first REAL rows (REAL_ROWS_FIRST) or
// columns hold groups: the first non-finite value in storage order.
bool LayerChecker::CheckFinite(std::size_t tensor, const char* field, std::uint64_t rows,
                               std::uint64_t cols, bool real_rows_first, std::uint64_t real) {
  const TableTensor t = T(tensor);
  const std::uint64_t size = InfoOf(t.dtype).bits / 8;
  const std::uint8_t* data = r_->table.Data(tensor);
  // Only the real groups' region; an empty region is skipped whole (a
  // dimension may be huge when the other is 0).
  const std::uint64_t row_end = real_rows_first ? std::min(rows, real) : rows;
  const std::uint64_t col_end = real_rows_first ? cols : std::min(cols, real);
  if (row_end == 0 || col_end == 0) return true;
  for (std::uint64_t i = 0; i < row_end; ++i) {
    for (std::uint64_t c = 0; c < col_end; ++c) {
      const std::uint64_t e = i * cols + c;
      if (IsNonFinite(t.dtype, data + e * size)) {
        return ValueError("AWQ-106", tensor, field, e * size, i, c,
                          std::string(field) + " (" + std::to_string(i) + ", " + std::to_string(c) +
                              ") is an infinity or a NaN");
      }
    }
  }
  return true;
}

// A11 AWQ-006: padding group slots (GEMV, GEMV_FAST) hold zero bits.
bool LayerChecker::CheckPadding(const AwqLayer& l) {
  const std::uint64_t N = static_cast<std::uint64_t>(l.out_features);
  const std::uint64_t G = static_cast<std::uint64_t>(l.groups);
  const std::uint64_t slots = 8 * static_cast<std::uint64_t>(l.zeros_width);
  const std::uint8_t* qz = r_->table.Data(l.qzeros);
  const std::uint8_t* sc = r_->table.Data(l.scales);
  const std::uint64_t ssize = InfoOf(T(l.scales).dtype).bits / 8;
  if (slots <= G || N == 0) return true;  // no padding slot
  if (r_->format == AwqFormat::kGemv) {
    const std::uint64_t Z = static_cast<std::uint64_t>(l.zeros_width);
    for (std::uint64_t n = 0; n < N; ++n) {
      for (std::uint64_t g = G; g < slots; ++g) {
        const std::uint64_t j = 4 * (n * Z + g / 8);
        const std::uint32_t word = static_cast<std::uint32_t>(qz[j]) | (static_cast<std::uint32_t>(qz[j + 1]) << 8) |
                                   (static_cast<std::uint32_t>(qz[j + 2]) << 16) |
                                   (static_cast<std::uint32_t>(qz[j + 3]) << 24);
        if (((word >> (4 * (g % 8))) & 0xFu) != 0) {
          return ValueError("AWQ-006", l.qzeros, "qzeros", j, n, g,
                            "padding zero slot " + std::to_string(g) + " of row " + std::to_string(n) +
                                " is not 0 (the layer has " + std::to_string(G) + " groups)");
        }
      }
    }
    for (std::uint64_t n = 0; n < N; ++n) {
      for (std::uint64_t g = G; g < slots; ++g) {
        const std::uint64_t e = n * slots + g;
        for (std::uint64_t b = 0; b < ssize; ++b) {
          if (sc[e * ssize + b] != 0) {
            return ValueError("AWQ-006", l.scales, "scales", e * ssize, n, g,
                              "padding scale slot " + std::to_string(g) + " of row " +
                                  std::to_string(n) + " is not +0.0");
          }
        }
      }
    }
    return true;
  }
  // GEMV_FAST: rows G..8Z-1 of qzeros, then of scales (both F16).
  const std::array<std::pair<std::size_t, const char*>, 2> grids = {
      {{l.qzeros, r_->llm_awq ? "scaled_zeros" : "qzeros"}, {l.scales, "scales"}}};
  for (const auto& [tensor, field] : grids) {
    const std::uint8_t* data = tensor == l.qzeros ? qz : sc;
    for (std::uint64_t g = G; g < slots; ++g) {
      for (std::uint64_t n = 0; n < N; ++n) {
        if (Half(data + 2 * (g * N + n)) != 0) {
          return ValueError("AWQ-006", tensor, field, 2 * (g * N + n), g, n,
                            std::string("padding ") + field + " row " + std::to_string(g) +
                                " is not +0.0 (the layer has " + std::to_string(G) + " groups)");
        }
      }
    }
  }
  return true;
}

// A1..A11 for one layer (docs/awq.md section 5).
bool LayerChecker::Check(const QuantLayerPlan& discovered, AwqLayer* layer) {
  // LLM_AWQ names its zero member scaled_zeros (docs/awq.md section 4): that
  // sibling takes the qzeros slot, and a P.qzeros there is an unknown sibling.
  const char* zeros = r_->llm_awq ? "scaled_zeros" : "qzeros";
  QuantLayerPlan plan = discovered;
  if (r_->llm_awq) {
    std::size_t named = kGptqNoTensor;
    for (std::size_t s : plan.siblings) {
      if (T(s).name == plan.prefix + "scaled_zeros") named = s;
    }
    std::erase(plan.siblings, named);
    if (plan.member[kQzeros] != kGptqNoTensor) {
      plan.siblings.push_back(plan.member[kQzeros]);
      std::sort(plan.siblings.begin(), plan.siblings.end(),
                [&](std::size_t a, std::size_t b) { return r_->table.InStorageOrder(a, b); });
    }
    plan.member[kQzeros] = named;
  }
  const std::array<const char*, 3> kRequired = {"qweight", zeros, "scales"};
  // A1 AWQ-101.
  for (int m = 0; m < 3; ++m) {
    if (plan.member[m] == kGptqNoTensor) {
      return Error("AWQ-101", T(plan.anchor), kRequired[m], "layer " + plan.prefix + " has no " + kRequired[m]);
    }
  }
  // A2 AWQ-103: GPTQ's g_idx in a file read as AWQ.
  if (plan.member[kGidx] != kGptqNoTensor) {
    return Error("AWQ-103", T(plan.member[kGidx]), "g_idx",
                 "layer " + plan.prefix + " has g_idx, a GPTQ member: a GPTQ layer in a file read as AWQ");
  }
  // A3 AWQ-102.
  if (plan.weight != kGptqNoTensor) {
    return Error("AWQ-102", T(plan.weight), "weight",
                 "a dense weight lies beside the quantized layer " + plan.prefix);
  }
  // A4 AWQ-104 (warning).
  for (std::size_t s : plan.siblings) {
    const std::string_view name = T(s).name;
    Add("AWQ-104", qd::Severity::kWarning, name, std::string(name.substr(name.rfind('.') + 1)),
        r_->table.HeaderOffset(T(s)), "unknown tensor beside layer " + plan.prefix + "; read as an ordinary tensor");
  }
  // A5 AWQ-105: dtypes, then ranks.
  const AwqFormat format = r_->format;
  const bool fast = format == AwqFormat::kGemvFast;
  struct Want {
    std::size_t tensor;
    int kind;  // 0: the word dtype, 1: a scale dtype, 2: the scaled-zero dtype
    std::size_t rank;
  };
  const std::array<Want, 4> wants = {{{plan.member[kQweight], 0, 2},
                                      {plan.member[kQzeros], fast ? 2 : 0, 2},
                                      {plan.member[kScales], fast ? 2 : 1, 2},
                                      {plan.bias, 1, 1}}};
  for (const Want& want : wants) {
    if (want.tensor == kGptqNoTensor) continue;
    const TableTensor e = T(want.tensor);
    const Dtype word = fast ? Dtype::kI16 : Dtype::kI32;
    const bool ok = want.kind == 0 ? e.dtype == word
                    : want.kind == 1 ? IsAwqScaleDtype(e.dtype)
                                     : e.dtype == Dtype::kF16;
    if (!ok) {
      static constexpr std::array<const char*, 3> kWanted = {"the word dtype", "F16, BF16 or F32", "F16"};
      return Error("AWQ-105", e, "dtype",
                   std::string(e.name) + " has dtype " + std::string(InfoOf(e.dtype).name) +
                       ", not " + (want.kind == 0 ? (fast ? "I16" : "I32") : kWanted[want.kind]) +
                       " (format " + AwqFormatName(format) + ")");
    }
    if (e.shape.size() != want.rank) {
      return Error("AWQ-105", e, "shape",
                   std::string(e.name) + " has rank " + std::to_string(e.shape.size()) + ", not " +
                       std::to_string(want.rank));
    }
  }
  const TableTensor qweight = T(plan.member[kQweight]);
  const TableTensor qzeros = T(plan.member[kQzeros]);
  const TableTensor scales = T(plan.member[kScales]);
  // A6 geometry and AWQ-002.
  U128 K = 0, N = 0;
  switch (format) {
    case AwqFormat::kGemm: K = qweight.shape[0]; N = static_cast<U128>(qweight.shape[1]) * 8; break;
    case AwqFormat::kGemv: N = qweight.shape[0]; K = static_cast<U128>(qweight.shape[1]) * 8; break;
    case AwqFormat::kGemvFast: N = static_cast<U128>(qweight.shape[0]) * 4; K = qweight.shape[1]; break;
  }
  constexpr U128 kInt64Limit = static_cast<U128>(1) << 63;
  if (K >= kInt64Limit || N >= kInt64Limit) {
    return Error("AWQ-002", qweight, "shape", "in_features " + ToText(K) + " or out_features " +
                                                       ToText(N) + " does not fit int64");
  }
  if (fast && K % 64 != 0) {
    return Error("AWQ-002", qweight, "shape",
                 "in_features " + ToText(K) + " is not a multiple of 64 (gemv_fast)");
  }
  // A7 AWQ-005: group geometry.
  const std::int64_t gs = r_->config.group_size;
  if (gs != -1 && K % static_cast<U128>(gs) != 0) {
    return Error("AWQ-005", qweight, "group_size",
                 "in_features " + ToText(K) + " is not a multiple of group_size " + std::to_string(gs));
  }
  const U128 G = gs == -1 ? 1 : K / static_cast<U128>(gs);
  const U128 gs_eff = gs == -1 ? K : static_cast<U128>(gs);
  U128 Z = 0;
  if (format != AwqFormat::kGemm) {
    Z = static_cast<U128>(AwqZerosWidth(static_cast<std::int64_t>(K), static_cast<std::int64_t>(
                                                                          gs_eff >= kInt64Limit ? 0 : gs_eff)));
    if (Z == 0 && G != 0) {
      return Error("AWQ-005", qweight, "group_size",
                   "group size " + ToText(gs_eff) + " is not 32, 64 or at least 128 (format " +
                       AwqFormatName(format) + " has no zeros width for it)");
    }
  }
  // A8 AWQ-003: qzeros; A9 AWQ-004: scales, then bias.
  U128 zr = 0, zc = 0, sr = 0, scol = 0;
  switch (format) {
    case AwqFormat::kGemm: zr = G; zc = N / 8; sr = G; scol = N; break;
    case AwqFormat::kGemv: zr = N; zc = Z; sr = N; scol = 8 * Z; break;
    case AwqFormat::kGemvFast: zr = 8 * Z; zc = N; sr = 8 * Z; scol = N; break;
  }
  if (qzeros.shape[0] != zr || qzeros.shape[1] != zc) {
    return Error("AWQ-003", qzeros, "shape",
                 "qzeros is not [" + ToText(zr) + ", " + ToText(zc) + "] (format " + AwqFormatName(format) + ")");
  }
  if (scales.shape[0] != sr || scales.shape[1] != scol) {
    return Error("AWQ-004", scales, "shape",
                 "scales is not [" + ToText(sr) + ", " + ToText(scol) + "] (format " + AwqFormatName(format) + ")");
  }
  if (plan.bias != kGptqNoTensor && T(plan.bias).shape[0] != N) {
    return Error("AWQ-004", T(plan.bias), "shape", "bias is not [" + ToText(N) + "]");
  }
  layer->prefix = plan.prefix;
  layer->qweight = plan.member[kQweight];
  layer->qzeros = plan.member[kQzeros];
  layer->scales = plan.member[kScales];
  layer->bias = plan.bias;
  layer->in_features = static_cast<std::int64_t>(K);
  layer->out_features = static_cast<std::int64_t>(N);
  layer->groups = static_cast<std::int64_t>(G);
  layer->group_size = G == 0 ? 0 : static_cast<std::int64_t>(K / G);
  layer->zeros_width = static_cast<std::int64_t>(Z);
  // A10 AWQ-106: scales (real groups), then GEMV_FAST's scaled zeros.
  const std::uint64_t g64 = static_cast<std::uint64_t>(G);
  switch (format) {
    case AwqFormat::kGemm:
      if (!CheckFinite(layer->scales, "scales", scales.shape[0], scales.shape[1], true, g64)) return false;
      break;
    case AwqFormat::kGemv:
      if (!CheckFinite(layer->scales, "scales", scales.shape[0], scales.shape[1], false, g64)) return false;
      break;
    case AwqFormat::kGemvFast:
      if (!CheckFinite(layer->scales, "scales", scales.shape[0], scales.shape[1], true, g64)) return false;
      if (!CheckFinite(layer->qzeros, zeros, qzeros.shape[0], qzeros.shape[1], true, g64)) return false;
      break;
  }
  // A11 AWQ-006.
  return format == AwqFormat::kGemm || CheckPadding(*layer);
}

}  // namespace

const char* AwqFormatName(AwqFormat format) {
  switch (format) {
    case AwqFormat::kGemm: return "gemm";
    case AwqFormat::kGemv: return "gemv";
    case AwqFormat::kGemvFast: return "gemv_fast";
  }
  return "gemm";
}

AwqResult ReadAwq(qd::ByteView file, const std::string& file_name,
                  const std::vector<qd::SideFile>& configs) {
  ContainerResult container = ReadContainer(file, file_name);
  if (container.refused) {
    AwqResult result;
    result.refused = true;
    result.findings = std::move(container.findings);
    return result;
  }
  return ReadAwqTable(TensorTable::FromContainer(std::move(container.container)), file_name,
                      configs, std::move(container.findings));
}

AwqResult ReadAwqTable(TensorTable table, const std::string& file_name,
                       const std::vector<qd::SideFile>& configs,
                       std::vector<qd::Finding> container_findings) {
  AwqResult result;
  result.findings = std::move(container_findings);
  result.table = std::move(table);
  // Section 3: the config steps as an AWQ reader takes them.
  if (!ReadQuantConfig(QuantFamily::kAwq, configs, file_name, &result.findings, &result.config)) {
    result.refused = true;
    return result;
  }
  result.format = FormatOf(result.config.format_name);
  result.llm_awq = result.config.format_name == "llm-awq";
  LayerChecker checker(&result, file_name);
  for (const QuantLayerPlan& plan : DiscoverLayers(result.table, StorageOrder(result.table))) {
    AwqLayer layer;
    if (!checker.Check(plan, &layer)) {
      result.layers.clear();
      return result;
    }
    result.layers.push_back(std::move(layer));
  }
  return result;
}

bool HasAwqLayer(const TensorTable& table) {
  for (const QuantLayerPlan& plan : DiscoverLayers(table, StorageOrder(table))) {
    if (IsAwqLayer(table, plan)) return true;
  }
  return false;
}

bool ClaimsAwq(const ClaimInput& input) {
  const TensorTable* table = input.Get();
  return table != nullptr && HasAwqLayer(*table);
}

AwqLayerView ViewOf(const AwqResult& result, const AwqLayer& layer) {
  AwqLayerView v;
  v.format = result.format;
  v.in_features = layer.in_features;
  v.out_features = layer.out_features;
  v.groups = layer.groups;
  v.group_size = layer.group_size;
  v.zeros_width = layer.zeros_width;
  v.qweight = result.table.Data(layer.qweight);
  v.qzeros = result.table.Data(layer.qzeros);
  v.scales = result.table.Data(layer.scales);
  v.scales_dtype = result.table[layer.scales].dtype;
  return v;
}

void StreamAwqLayers(const AwqResult& r, TensorSink& sink) {
  // Section 7: a layer's scales and qzeros are consumed by its weight.
  std::vector<LayerOutput> outputs;
  std::vector<bool> consumed(r.table.size(), false);
  for (const AwqLayer& layer : r.layers) {
    outputs.push_back({layer.qweight, layer.prefix + "weight", static_cast<std::uint64_t>(layer.out_features),
                       static_cast<std::uint64_t>(layer.in_features)});
    consumed[layer.scales] = true;
    consumed[layer.qzeros] = true;
  }
  StreamLayersAndFloats(r.table, outputs, consumed, sink,
                        [&](std::size_t l, std::uint64_t row, std::uint64_t count, float* out) {
                          AwqDequantizeRows(ViewOf(r, r.layers[l]), static_cast<std::int64_t>(row),
                                            static_cast<std::int64_t>(row + count), out);
                        });
}

qd::Outcome StreamAwqFile(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, TensorSink& sink) {
  AwqResult r = ReadAwq(file, file_name, configs);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (!r.refused) StreamAwqLayers(r, sink);
  return outcome;
}

qd::Outcome DecodeAwqFile(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs) {
  return CollectStream(
      [&](TensorSink& sink) { return StreamAwqFile(file, file_name, configs, sink); });
}

}  // namespace qd::codec
