// ggml_st.cc: the oracle's GGUF-family safetensors reader, written from
// docs/ggml_safetensors.md. Config steps and layer discovery are the GPTQ
// oracle's (the page says they are the same steps); block decoding is
// oracles/ggml_blocks.cc. Nothing here is shared with codecs/.
#include "oracles/ggml_st.h"

#include <optional>
#include <string>
#include <string_view>

#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/ggml_blocks.h"
#include "oracles/gptq.h"
#include "oracles/merged_table.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

constexpr std::int64_t kHeaderOffset = 8;
constexpr std::int64_t kConfigOffset = -1;

// Section 2, G1's table: each alias with the bits it spells and its ggml type.
struct SubtypeRow {
  const char* alias;
  int bits;
  const char* ggml_type;
};
const SubtypeRow kSubtypes[] = {
    {"q4_0", 4, "q4_0"},   {"q8_0", 8, "q8_0"},   {"q4_k", 4, "q4_K"},
    {"q4_k_s", 4, "q4_K"}, {"q4_k_m", 4, "q4_K"}, {"q5_k", 5, "q5_K"},
    {"q5_k_s", 5, "q5_K"}, {"q5_k_m", 5, "q5_K"}, {"q6_k", 6, "q6_K"},
};

// Section 4, L7: the F16 scale halves of a block, by ggml type.
struct HalfPlace {
  const char* field;
  std::uint64_t byte;
};
std::vector<HalfPlace> HalvesOf(const std::string& type) {
  if (type == "q6_K") return {{"d", 208}};
  if (type == "q4_K" || type == "q5_K") return {{"d", 0}, {"dmin", 2}};
  return {{"d", 0}};
}

struct Report {
  qd::Outcome* outcome;
  const std::string& file;
  bool Error(const char* rule, const std::string& in_file, const std::string& tensor, const char* field,
             std::int64_t offset, const std::string& message) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kError, in_file, tensor, field, offset, message));
    outcome->refused = true;
    return false;
  }
  bool LayerError(const char* rule, const std::string& tensor, const char* field, const std::string& message) {
    return Error(rule, file, tensor, field, kHeaderOffset, message);
  }
};

// G1 and G2 on the winner's format and bits: the ggml type, or "" after a
// finding.
std::string Subtype(const QuantSettings& s, Report& report) {
  std::string f;
  for (char c : s.format) {
    if (c == '-') c = '_';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
    f.push_back(c);
  }
  const bool variant = f == "q_0" || f == "q_k" || f == "q_k_s" || f == "q_k_m";
  const std::string alias = variant ? "q" + std::to_string(s.bits) + f.substr(1) : f;
  for (const SubtypeRow& row : kSubtypes) {
    if (alias != row.alias) continue;
    if (!variant && row.bits != s.bits) {
      report.Error("GGST-002", s.source, "", "bits", kConfigOffset,
                   "format " + s.format + " spells " + std::to_string(row.bits) + " bits, the config says " +
                       std::to_string(s.bits));
      return "";
    }
    return row.ggml_type;
  }
  report.Error("GGST-001", s.source, "", "format", kConfigOffset,
               "format \"" + s.format + "\" and bits " + std::to_string(s.bits) +
                   " make no GGUF subtype GPT-QModel writes");
  return "";
}

struct Geometry {
  std::uint64_t rows = 0;
  std::uint64_t blocks = 0;  // per row
  std::uint64_t width = 0;   // decoded weights per row: the padded width, or section 7's cols
};

// Section 7: the block-vector layout names its type (and K) in __metadata__.
const std::string* MetadataValue(const MergedTable& table, const std::string& key) {
  for (const auto& member : table.metadata) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

// Section 7, V1..V5 over the U8 tensors (in storage order: the table's
// order); *geometry gets one entry per tensor, width 0 for a tensor that is
// no block tensor.
bool CheckBlockTensors(const MergedTable& table, const std::string& type, const std::string* cols_text,
                       Report& report, std::vector<Geometry>* geometry) {
  const std::optional<GgmlBlockShape> shape = GgmlBlockShapeOf(type);
  if (!shape) {
    return report.LayerError("GGST-001", "", "ggml_type", "ggml_type " + type + " is not a decoded ggml type");
  }
  // V2: at most 19 decimal digits, nothing else.
  const bool cols_known = cols_text != nullptr;
  std::uint64_t cols = 0;
  if (cols_known) {
    bool digits = !cols_text->empty() && cols_text->size() <= 19;
    for (char c : *cols_text) digits = digits && c >= '0' && c <= '9';
    if (!digits) return report.LayerError("GGST-003", "", "cols", "cols " + *cols_text + " is no decimal number");
    cols = std::stoull(*cols_text);
  }
  const std::uint64_t weights = static_cast<std::uint64_t>(shape->weights_per_block);
  const std::uint64_t bytes = static_cast<std::uint64_t>(shape->bytes_per_block);
  geometry->assign(table.tensors.size(), Geometry{});
  for (std::size_t t = 0; t < table.tensors.size(); ++t) {
    const TableTensor& tensor = table.tensors[t];
    if (tensor.dtype != "U8") continue;
    if (tensor.shape.size() != 2) return report.LayerError("GGST-104", tensor.name, "shape", "blocks must be 2-D");
    if (tensor.shape[1] == 0 || tensor.shape[1] % bytes != 0) {
      return report.LayerError("GGST-003", tensor.name, "shape",
                               "a row of " + std::to_string(tensor.shape[1]) + " bytes is not whole " + type +
                                   " blocks");
    }
    Geometry& g = (*geometry)[t];
    g.rows = tensor.shape[0];
    g.blocks = tensor.shape[1] / bytes;
    g.width = g.blocks * weights;
    if (cols_known) {
      // V5: the padding is less than one block: Kp - QK < cols <= Kp.
      const bool pads_to_row = cols <= g.width && g.width - cols < weights;
      if (!pads_to_row) {
        return report.LayerError("GGST-003", tensor.name, "cols",
                                 "cols " + std::to_string(cols) + " does not round up to " +
                                     std::to_string(g.width));
      }
      g.width = cols;
    }
  }
  return true;
}

std::string SuffixOf(const std::string& name) { return name.substr(name.rfind('.') + 1); }

// L1..L7 for one layer.
bool CheckLayer(const TableTensors& tensors, const QuantLayer& layer, const std::string& type,
                Report& report, Geometry* geo) {
  if (layer.qweight < 0) {
    return report.LayerError("GGST-101", tensors[layer.anchor].name, "qweight",
                             layer.prefix + " has no qweight");
  }
  const int foreign[] = {layer.qzeros, layer.scales, layer.g_idx};
  const char* foreign_names[] = {"qzeros", "scales", "g_idx"};
  for (int i = 0; i < 3; ++i) {
    if (foreign[i] >= 0) {
      return report.LayerError("GGST-101", tensors[foreign[i]].name, foreign_names[i],
                               "a GGUF-family layer has no " + std::string(foreign_names[i]));
    }
  }
  if (layer.weight >= 0) {
    return report.LayerError("GGST-102", tensors[layer.weight].name, "weight",
                             "dense weight beside the layer " + layer.prefix);
  }
  for (int s : layer.siblings) {
    const std::string suffix = SuffixOf(tensors[s].name);
    report.outcome->findings.push_back(NewFinding("GGST-103", qd::Severity::kWarning, report.file,
                                                  tensors[s].name, suffix.c_str(), kHeaderOffset,
                                                  "unknown tensor beside layer " + layer.prefix));
  }
  const TableTensor& qweight = tensors[layer.qweight];
  if (qweight.dtype != "U8") return report.LayerError("GGST-104", qweight.name, "dtype", "qweight must be U8");
  if (qweight.shape.size() != 2) return report.LayerError("GGST-104", qweight.name, "shape", "qweight must be 2-D");
  if (layer.bias >= 0) {
    const TableTensor& bias = tensors[layer.bias];
    if (bias.dtype != "F16") return report.LayerError("GGST-104", bias.name, "dtype", "bias must be F16");
    if (bias.shape.size() != 1) return report.LayerError("GGST-104", bias.name, "shape", "bias must be 1-D");
  }
  const std::uint64_t block_bytes = static_cast<std::uint64_t>(GgmlBlockShapeOf(type)->bytes_per_block);
  const std::uint64_t row_bytes = qweight.shape[1];
  if (row_bytes == 0 || row_bytes % block_bytes != 0) {
    return report.LayerError("GGST-003", qweight.name, "shape",
                             "a row of " + std::to_string(row_bytes) + " bytes is not a whole, non-zero number of " +
                                 type + " blocks of " + std::to_string(block_bytes) + " bytes");
  }
  geo->rows = qweight.shape[0];
  geo->blocks = row_bytes / block_bytes;
  if (layer.bias >= 0 && tensors[layer.bias].shape[0] != geo->rows) {
    return report.LayerError("GGST-104", tensors[layer.bias].name, "shape", "bias length is not N");
  }
  const std::vector<HalfPlace> halves = HalvesOf(type);
  for (std::uint64_t n = 0; n < geo->rows; ++n) {
    for (std::uint64_t j = 0; j < geo->blocks; ++j) {
      for (const HalfPlace& half : halves) {
        const std::uint64_t at = n * row_bytes + j * block_bytes + half.byte;
        const std::uint16_t bits = LoadU16(qweight.data + at);
        const bool exponent_all_ones = ((bits >> 10) & 31) == 31;
        if (!exponent_all_ones) continue;
        report.Error("GGST-004", report.file, qweight.name, half.field,
                     static_cast<std::int64_t>(qweight.data_start + qweight.begin + at),
                     "block " + std::to_string(j) + " of row " + std::to_string(n) + " has a non-finite " +
                         half.field);
        report.outcome->findings.back().row = static_cast<std::int64_t>(n);
        report.outcome->findings.back().block = static_cast<std::int64_t>(j);
        return false;
      }
    }
  }
  return true;
}

bool IsGgufLayer(const TableTensors& tensors, const QuantLayer& layer) {
  return layer.qweight >= 0 && layer.qzeros < 0 && layer.scales < 0 && layer.g_idx < 0 &&
         tensors[layer.qweight].dtype == "U8";
}

}  // namespace

qd::Outcome StreamGgmlStFile(qd::ByteView file, const std::string& file_name,
                             const std::vector<qd::SideFile>& configs, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;
  const MergedTable table = TableOfFile(file, std::move(container));
  Report report{&outcome, file_name};
  const TableTensors& tensors = table.tensors;
  // Per tensor: its decoded geometry (width 0: not blocks) and name.
  std::vector<Geometry> blocks_of(tensors.size());
  std::vector<std::string> decoded_name(tensors.size());
  std::string type;
  if (const std::string* type_name = MetadataValue(table, "ggml_type")) {
    type = *type_name;
    if (!CheckBlockTensors(table, type, MetadataValue(table, "cols"), report, &blocks_of)) return outcome;
    for (std::size_t t = 0; t < tensors.size(); ++t) decoded_name[t] = tensors[t].name;
  } else {
    QuantSettings settings;
    if (!CheckQuantConfigs("gguf", configs, file_name, &outcome, &settings)) return outcome;
    type = Subtype(settings, report);
    if (type.empty()) return outcome;
    const std::uint64_t weights = static_cast<std::uint64_t>(GgmlBlockShapeOf(type)->weights_per_block);
    for (const QuantLayer& layer : FindQuantLayers(tensors)) {
      Geometry g;
      if (!CheckLayer(tensors, layer, type, report, &g)) return outcome;
      g.width = g.blocks * weights;
      blocks_of[layer.qweight] = g;
      decoded_name[layer.qweight] = layer.prefix + "weight";
    }
  }
  // Sections 5 and 7: in storage order, the decoded blocks where their
  // tensor is, floating tensors widened, other integer tensors left out.
  std::vector<std::size_t> order;
  std::vector<qd::TensorInfo> plan;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (blocks_of[t].width > 0) {
      plan.push_back({decoded_name[t], {blocks_of[t].rows, blocks_of[t].width}});
    } else if (IsFloatDtype(tensors[t].dtype)) {
      plan.push_back({tensors[t].name, tensors[t].shape});
    } else {
      continue;
    }
    order.push_back(t);
  }
  if (!sink.Plan(plan)) return outcome;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TableTensor& tensor = tensors[order[i]];
    bool more;
    const Geometry& g = blocks_of[order[i]];
    if (g.width == 0) {
      more = StreamFloatElements(tensor.dtype, tensor.data, tensor.element_count, i, sink);
    } else {
      // The whole padded row is decoded; its first `width` weights are kept.
      const std::uint64_t row_bytes = tensor.shape[1];
      more = StreamRows(sink, i, g.rows, g.width, [&](std::uint64_t first, std::uint64_t count, float* out) {
        for (std::uint64_t n = first; n < first + count; ++n) {
          const std::vector<std::uint8_t> row(tensor.data + n * row_bytes, tensor.data + (n + 1) * row_bytes);
          std::vector<float> values;
          DecodeGgmlBlocks(type, row, &values);
          for (std::uint64_t k = 0; k < g.width; ++k) out[(n - first) * g.width + k] = values[k];
        }
      });
    }
    if (!more) break;
  }
  return outcome;
}

qd::Outcome ReadGgmlStFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamGgmlStFile(file, file_name, configs, sink); });
}

bool IsGgmlStFile(const ClaimInput& input) {
  const MergedTable* table = input.Get();
  if (table == nullptr) return false;
  if (MetadataValue(*table, "ggml_type") != nullptr) return true;
  for (const QuantLayer& layer : FindQuantLayers(table->tensors)) {
    if (IsGgufLayer(table->tensors, layer)) return true;
  }
  return false;
}

}  // namespace qd::oracle
