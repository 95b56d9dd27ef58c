// ggml_st.cc: the GGUF-family safetensors reader: the config as a GGUF reader
// takes it (docs/ggml_safetensors.md section 2, the GPTQ reader's steps plus
// G1 / G2), detection (section 3), the layer checks L1..L7 (section 4) and
// the decoded output (section 5), blocks decoded by GgmlDecode.
#include "codecs/ggml_st.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "codecs/finding.h"
#include "codecs/layer_stream.h"
#include "codecs/safetensors.h"

namespace qd::codec {
namespace {

constexpr std::int64_t kHeaderOffset = 8;
constexpr std::int64_t kNoOffset = -1;
// Section 7: the block-vector layout's __metadata__ keys.
constexpr std::string_view kTypeKey = "ggml_type";
constexpr std::string_view kColsKey = "cols";

// Section 7, V2: cols is 1 to 19 ASCII digits (so it fits 64 bits).
bool ParseCols(std::string_view text, std::uint64_t* cols) {
  if (text.empty() || text.size() > 19) return false;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  *cols = value;
  return true;
}

// Section 2, G1: the nine aliases GPT-QModel writes and their ggml types.
struct Alias {
  std::string_view alias;
  std::string_view ggml_name;
};
constexpr std::array<Alias, 9> kAliases = {{{"q4_0", "q4_0"},
                                            {"q8_0", "q8_0"},
                                            {"q4_k", "q4_K"},
                                            {"q4_k_s", "q4_K"},
                                            {"q4_k_m", "q4_K"},
                                            {"q5_k", "q5_K"},
                                            {"q5_k_s", "q5_K"},
                                            {"q5_k_m", "q5_K"},
                                            {"q6_k", "q6_K"}}};
constexpr std::array<std::string_view, 4> kVariants = {"q_0", "q_k", "q_k_s", "q_k_m"};

// GPT-QModel's normalisation: ASCII lower case, '-' read as '_'.
std::string Normalised(const std::string& format) {
  std::string f = format;
  for (char& c : f) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '-') c = '_';
  }
  return f;
}

bool IsVariant(const std::string& f) {
  return std::find(kVariants.begin(), kVariants.end(), f) != kVariants.end();
}

// The alias section 2 builds: a variant with the bits spliced in, else the
// format itself.
std::string AliasOf(const std::string& format, int bits) {
  const std::string f = Normalised(format);
  if (!IsVariant(f)) return f;
  return "q" + std::to_string(bits) + f.substr(1);
}

// Where a block's F16 scale halves lie (section 4, L7).
struct ScaleHalf {
  const char* field;
  int at;
};
std::vector<ScaleHalf> ScaleHalvesOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: return {{"d", 0}, {"dmin", 2}};
    case GgmlType::kQ6_K: return {{"d", 208}};
    default: return {{"d", 0}};  // q4_0, q8_0
  }
}

// Section 3: a GGUF layer.
bool IsGgmlStLayer(const TensorTable& table, const QuantLayerPlan& plan) {
  return plan.member[kQweight] != kGptqNoTensor && plan.member[kQzeros] == kGptqNoTensor &&
         plan.member[kScales] == kGptqNoTensor && plan.member[kGidx] == kGptqNoTensor &&
         table[plan.member[kQweight]].dtype == Dtype::kU8;
}

class Checker {
 public:
  Checker(GgmlStResult* r, const std::string& file) : r_(r), file_(file) {}
  bool CheckSubtype(const GptqConfig& config);
  bool CheckLayer(const QuantLayerPlan& plan, GgmlStLayer* layer);
  bool CheckBlockVectors(std::string_view type_name, const std::string_view* cols_text);

 private:
  TableTensor T(std::size_t i) const { return r_->table[i]; }
  qd::Finding& Add(const char* rule, qd::Severity severity, std::string file, std::string_view tensor,
                   std::string field, std::int64_t offset, std::string message) {
    r_->findings.push_back(MakeFinding(rule, severity, std::move(file), std::string(tensor),
                                       std::move(field), offset, std::move(message)));
    if (severity == qd::Severity::kError) r_->refused = true;
    return r_->findings.back();
  }
  bool Error(const char* rule, std::string_view tensor, std::string field, std::string message) {
    Add(rule, qd::Severity::kError, file_, tensor, std::move(field), kHeaderOffset, std::move(message));
    return false;
  }
  bool CheckScales(const GgmlStLayer& layer);

  GgmlStResult* r_;
  const std::string& file_;
};

// G1 GGST-001, G2 GGST-002.
bool Checker::CheckSubtype(const GptqConfig& config) {
  const std::string f = Normalised(config.format_name);
  r_->type = GgmlStTypeOf(config.format_name, config.bits);
  if (r_->type == nullptr) {
    Add("GGST-001", qd::Severity::kError, config.source, "", "format", kNoOffset,
        "format \"" + config.format_name + "\" with bits " + std::to_string(config.bits) +
            " names no GGUF subtype GPT-QModel writes");
    return false;
  }
  if (!IsVariant(f) && f[1] - '0' != config.bits) {
    r_->type = nullptr;
    Add("GGST-002", qd::Severity::kError, config.source, "", "bits", kNoOffset,
        "bits " + std::to_string(config.bits) + " disagrees with format \"" + config.format_name + "\"");
    return false;
  }
  return true;
}

// L7 GGST-004: the first non-finite scale half in storage order.
bool Checker::CheckScales(const GgmlStLayer& layer) {
  const GgmlTypeInfo& info = *r_->type;
  const std::vector<ScaleHalf> halves = ScaleHalvesOf(info.type);
  const std::uint8_t* data = r_->table.Data(layer.qweight);
  const std::uint64_t bytes = static_cast<std::uint64_t>(info.bytes);
  const std::uint64_t row_bytes = layer.blocks_per_row * bytes;
  for (std::uint64_t n = 0; n < layer.rows; ++n) {
    for (std::uint64_t j = 0; j < layer.blocks_per_row; ++j) {
      for (const ScaleHalf& half : halves) {
        const std::uint64_t at = n * row_bytes + j * bytes + static_cast<std::uint64_t>(half.at);
        const std::uint16_t h = static_cast<std::uint16_t>(data[at] | (data[at + 1] << 8));
        if ((h & 0x7c00u) != 0x7c00u) continue;
        qd::Finding& f = Add("GGST-004", qd::Severity::kError, file_, T(layer.qweight).name, half.field,
                             r_->table.ByteOffset(layer.qweight, at),
                             std::string("scale ") + half.field + " of row " + std::to_string(n) + " block " +
                                 std::to_string(j) + " is an infinity or a NaN");
        f.row = static_cast<std::int64_t>(n);
        f.block = static_cast<std::int64_t>(j);
        return false;
      }
    }
  }
  return true;
}

bool Checker::CheckLayer(const QuantLayerPlan& plan, GgmlStLayer* layer) {
  layer->prefix = plan.prefix;
  // L1 GGST-101: qweight present, no GPTQ / AWQ member.
  if (plan.member[kQweight] == kGptqNoTensor) {
    return Error("GGST-101", T(plan.anchor).name, "qweight", "layer " + plan.prefix + " has no qweight");
  }
  static constexpr std::array<const char*, kMemberCount> kNames = {"qweight", "qzeros", "scales", "g_idx"};
  for (int m = kQzeros; m < kMemberCount; ++m) {
    if (plan.member[m] != kGptqNoTensor) {
      return Error("GGST-101", T(plan.member[m]).name, kNames[m],
                   "layer " + plan.prefix + " has " + kNames[m] + ", not a member of a GGUF-family layer");
    }
  }
  // L2 GGST-102.
  if (plan.weight != kGptqNoTensor) {
    return Error("GGST-102", T(plan.weight).name, "weight",
                 "a dense weight lies beside the quantized layer " + plan.prefix);
  }
  // L3 GGST-103 (warning).
  for (std::size_t s : plan.siblings) {
    const std::string_view name = T(s).name;
    Add("GGST-103", qd::Severity::kWarning, file_, name, std::string(name.substr(name.rfind('.') + 1)),
        kHeaderOffset, "unknown tensor beside layer " + plan.prefix + "; read as an ordinary tensor");
  }
  // L4 GGST-104: dtypes, then ranks.
  const TableTensor qweight = T(plan.member[kQweight]);
  if (qweight.dtype != Dtype::kU8) return Error("GGST-104", qweight.name, "dtype", "qweight is not U8");
  if (qweight.shape.size() != 2) return Error("GGST-104", qweight.name, "shape", "qweight is not of rank 2");
  if (plan.bias != kGptqNoTensor) {
    const TableTensor bias = T(plan.bias);
    if (bias.dtype != Dtype::kF16) return Error("GGST-104", bias.name, "dtype", "bias is not F16");
    if (bias.shape.size() != 1) return Error("GGST-104", bias.name, "shape", "bias is not of rank 1");
  }
  // L5 GGST-003: whole, non-zero blocks per row.
  const std::uint64_t bytes = static_cast<std::uint64_t>(r_->type->bytes);
  const std::uint64_t bytes_per_row = qweight.shape[1];
  if (bytes_per_row == 0 || bytes_per_row % bytes != 0) {
    return Error("GGST-003", qweight.name, "shape",
                 "bytes_per_row " + std::to_string(bytes_per_row) + " is not a positive multiple of " +
                     std::to_string(bytes) + ", the " + std::string(r_->type->name) + " block size");
  }
  layer->qweight = plan.member[kQweight];
  layer->output = plan.prefix + "weight";
  layer->rows = qweight.shape[0];
  layer->blocks_per_row = bytes_per_row / bytes;
  layer->cols = layer->blocks_per_row * static_cast<std::uint64_t>(r_->type->values);
  // L6 GGST-104: bias length.
  if (plan.bias != kGptqNoTensor) {
    const TableTensor bias = T(plan.bias);
    if (bias.shape[0] != layer->rows) {
      return Error("GGST-104", bias.name, "shape",
                   "bias has " + std::to_string(bias.shape[0]) + " values for " +
                       std::to_string(layer->rows) + " rows");
    }
    layer->bias = plan.bias;
  }
  // L7 GGST-004.
  return CheckScales(*layer);
}

// Section 7, V1..V5: every U8 tensor is a block tensor of the metadata's
// type; no config, no layers, no GGST-004.
bool Checker::CheckBlockVectors(std::string_view type_name, const std::string_view* cols_text) {
  r_->type = FindGgmlType(type_name);
  if (r_->type == nullptr) {
    return Error("GGST-001", "", "ggml_type",
                 "__metadata__ ggml_type \"" + std::string(type_name) + "\" names no ggml type quantdiff decodes");
  }
  std::uint64_t cols = 0;
  if (cols_text != nullptr && !ParseCols(*cols_text, &cols)) {
    return Error("GGST-003", "", "cols", "__metadata__ cols \"" + std::string(*cols_text) + "\" is not a decimal count");
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(r_->type->bytes);
  const std::uint64_t values = static_cast<std::uint64_t>(r_->type->values);
  for (const std::size_t i : StorageOrder(r_->table)) {
    const TableTensor blocks = T(i);
    if (blocks.dtype != Dtype::kU8) continue;
    if (blocks.shape.size() != 2) return Error("GGST-104", blocks.name, "shape", "a block tensor is not of rank 2");
    const std::uint64_t bytes_per_row = blocks.shape[1];
    if (bytes_per_row == 0 || bytes_per_row % bytes != 0) {
      return Error("GGST-003", blocks.name, "shape",
                   "bytes_per_row " + std::to_string(bytes_per_row) + " is not a positive multiple of " +
                       std::to_string(bytes) + ", the " + std::string(r_->type->name) + " block size");
    }
    GgmlStLayer layer;
    layer.output = std::string(blocks.name);
    layer.qweight = i;
    layer.rows = blocks.shape[0];
    layer.blocks_per_row = bytes_per_row / bytes;
    layer.cols = layer.blocks_per_row * values;
    if (cols_text != nullptr) {
      // V5: K pads to exactly this row's blocks (Kp - QK < K <= Kp).
      if (cols > layer.cols || cols + values <= layer.cols) {
        return Error("GGST-003", blocks.name, "cols",
                     "cols " + std::to_string(cols) + " does not pad to the row's " + std::to_string(layer.cols) +
                         " weights");
      }
      layer.cols = cols;
    }
    r_->layers.push_back(std::move(layer));
  }
  return true;
}

// Sections 5 and 7, blocks decoded row by row by GgmlDecode; a row whose K
// is known (section 7's cols) is decoded whole and cut to its first K weights.
void StreamLayers(const GgmlStResult& r, TensorSink& sink, Kernel kernel) {
  const std::uint64_t per_block = static_cast<std::uint64_t>(r.type->values);
  const std::uint64_t block_bytes = static_cast<std::uint64_t>(r.type->bytes);
  std::vector<LayerOutput> outputs;
  for (const GgmlStLayer& layer : r.layers) outputs.push_back({layer.qweight, layer.output, layer.rows, layer.cols});
  std::vector<float> padded_row;
  StreamLayersAndFloats(r.table, outputs, {}, sink,
                        [&](std::size_t l, std::uint64_t row, std::uint64_t count, float* out) {
                          const GgmlStLayer& layer = r.layers[l];
                          const std::uint64_t row_bytes = layer.blocks_per_row * block_bytes;
                          const std::uint64_t padded = layer.blocks_per_row * per_block;
                          const std::uint8_t* data = r.table.Data(layer.qweight);
                          for (std::uint64_t n = 0; n < count; ++n) {
                            const std::uint8_t* blocks = data + (row + n) * row_bytes;
                            float* row_out = out + n * layer.cols;
                            if (layer.cols == padded) {
                              GgmlDecode(r.type->type, blocks, layer.blocks_per_row, row_out, kernel);
                              continue;
                            }
                            padded_row.resize(padded);
                            GgmlDecode(r.type->type, blocks, layer.blocks_per_row, padded_row.data(), kernel);
                            std::copy_n(padded_row.begin(), layer.cols, row_out);
                          }
                        });
}

}  // namespace

const GgmlTypeInfo* GgmlStTypeOf(const std::string& format, int bits) {
  const std::string alias = AliasOf(format, bits);
  for (const Alias& a : kAliases) {
    if (a.alias == alias) return FindGgmlType(a.ggml_name);
  }
  return nullptr;
}

GgmlStResult ReadGgmlSt(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs) {
  GgmlStResult result;
  ContainerResult container = ReadContainer(file, file_name);
  result.findings = std::move(container.findings);
  if (container.refused) {
    result.refused = true;
    return result;
  }
  result.table = TensorTable::FromContainer(std::move(container.container));
  if (const std::string_view* type_name = result.table.Metadata(kTypeKey)) {
    Checker checker(&result, file_name);
    if (!checker.CheckBlockVectors(*type_name, result.table.Metadata(kColsKey))) result.layers.clear();
    return result;
  }
  // Section 2: the config steps as a GGUF reader takes them, then G1 / G2.
  GptqConfig config;
  if (!ReadQuantConfig(QuantFamily::kGguf, configs, file_name, &result.findings, &config)) {
    result.refused = true;
    return result;
  }
  Checker checker(&result, file_name);
  if (!checker.CheckSubtype(config)) return result;
  for (const QuantLayerPlan& plan : DiscoverLayers(result.table, StorageOrder(result.table))) {
    GgmlStLayer layer;
    if (!checker.CheckLayer(plan, &layer)) {
      result.layers.clear();
      return result;
    }
    result.layers.push_back(std::move(layer));
  }
  return result;
}

bool ClaimsGgmlSt(const ClaimInput& input) {
  const TensorTable* table = input.Get();
  if (table == nullptr) return false;
  if (table->Metadata(kTypeKey) != nullptr) return true;
  for (const QuantLayerPlan& plan : DiscoverLayers(*table, StorageOrder(*table))) {
    if (IsGgmlStLayer(*table, plan)) return true;
  }
  return false;
}

qd::Outcome StreamGgmlStFile(qd::ByteView file, const std::string& file_name,
                             const std::vector<qd::SideFile>& configs, TensorSink& sink, Kernel kernel) {
  GgmlStResult r = ReadGgmlSt(file, file_name, configs);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (!r.refused) StreamLayers(r, sink, kernel);
  return outcome;
}

qd::Outcome DecodeGgmlStFile(qd::ByteView file, const std::string& file_name,
                             const std::vector<qd::SideFile>& configs, Kernel kernel) {
  return CollectStream(
      [&](TensorSink& sink) { return StreamGgmlStFile(file, file_name, configs, sink, kernel); });
}

}  // namespace qd::codec
