// awq.cc: the oracle's AWQ reader and reference packer, written from
// docs/awq.md. The config steps and the layer discovery are the GPTQ
// oracle's (docs/awq.md sections 2 and 3 say they are the same steps);
// nothing here is shared with codecs/.
//
// Sections (docs/awq.md section numbers in brackets):
//   1. findings and small helpers
//   2. detection [2]
//   3. where codes and zeros live [4]
//   4. the layer checks A1..A11 [5]
//   5. unpacking and dequantization [6], the decoded output [7]
//   6. PackAwq [8]
#include "oracles/awq.h"

#include <algorithm>
#include <string_view>

#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/gptq.h"
#include "oracles/merged_table.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

using Wide = __int128;  // shapes times 8: no overflow in 128 bits


// ---------------------------------------------------------------------------
// Section 1: findings and helpers.

struct Report {
  qd::Outcome* outcome;
  const std::string& file;

  bool Error(const char* rule, const std::string& tensor, const char* field, std::int64_t offset,
             const std::string& message, std::int64_t row = -1, std::int64_t element = -1) {
    qd::Finding f = NewFinding(rule, qd::Severity::kError, file, tensor, field, offset, message);
    f.row = row;
    f.element = element;
    outcome->findings.push_back(f);
    outcome->refused = true;
    return false;
  }
  // A header-level fact of TENSOR (byte_offset 8, in a .pt table ds of data.pkl).
  void Warning(const char* rule, const TableTensor& tensor, const char* field,
               const std::string& message) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kWarning, file, tensor.name, field,
                                           tensor.header_offset, message));
  }
};

std::string WideText(Wide v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

std::int64_t ByteOffsetOf(const TableTensor& t, std::uint64_t j) { return t.ByteOffset(j); }

// Z: the padded group-slot count of docs/awq.md section 4 (0: none exists).
std::int64_t ZerosWidth(std::int64_t k, std::int64_t group_size) {
  std::int64_t multiplier;
  if (group_size >= 128) {
    multiplier = 1;
  } else if (group_size == 64) {
    multiplier = 2;
  } else if (group_size == 32) {
    multiplier = 4;
  } else {
    return 0;
  }
  const std::int64_t groups = k / group_size;
  const std::int64_t words = groups / 8 + (groups % 8 != 0 ? 1 : 0);  // ceil(groups / 8)
  const std::int64_t rounded = words / multiplier + (words % multiplier != 0 ? 1 : 0);
  return rounded * multiplier;
}

// ---------------------------------------------------------------------------
// Section 2: detection.

bool LayerLooksAwq(const TableTensors& tensors, const QuantLayer& layer) {
  if (layer.qweight < 0 || layer.g_idx >= 0) return false;
  const TableTensor& qweight = tensors[static_cast<std::size_t>(layer.qweight)];
  if (qweight.dtype == "I16") return true;
  if (layer.scales < 0) return false;  // nothing to tell it from GPTQ by
  const TableTensor& scales = tensors[static_cast<std::size_t>(layer.scales)];
  if (qweight.shape.size() != 2 || scales.shape.size() != 2) return false;
  // GPTQ's pair: qweight [K*b/32, N] beside scales [G, N].
  const bool same_columns = qweight.shape[1] == scales.shape[1];
  const bool same_rows = qweight.shape[0] == scales.shape[0];
  return !(same_columns && !same_rows);
}

// ---------------------------------------------------------------------------
// Section 3: where code (k, n) and zero (g, n) live.

// GEMV_FAST: the place of each k of a 64-code chunk, built by running the
// packer's steps on indexes: within each 32-block, reshape (4, 4, 2) and swap
// the first two axes; then, within each 8-code group, reshape (4, 2) and
// swap (the 0,2,4,6,1,3,5,7 order). packed[j] = original k (j, k in 0..31).
std::vector<int> FastBlockOrder() {
  std::vector<int> first(32);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 2; ++c) first[a * 8 + b * 2 + c] = b * 8 + a * 2 + c;
  std::vector<int> second(32);
  for (int a = 0; a < 4; ++a)
    for (int c = 0; c < 2; ++c)
      for (int b = 0; b < 4; ++b) second[a * 8 + c * 4 + b] = first[a * 8 + b * 2 + c];
  return second;
}

struct Place {
  std::uint64_t word;  // element index in qweight
  unsigned shift;      // bit position of the nibble
};

// GEMV_FAST code (k, n) of a layer with K inputs: rows 4r..4r+3 share qweight
// row r; after the block order, the four rows' 64-code chunks are laid one
// after the other (row q's at 64q) and regrouped four at a time into words.
Place FastPlace(std::uint64_t k, std::uint64_t n, std::uint64_t K, const std::vector<int>& order) {
  std::uint64_t j = 0;  // the packed position of k inside its 32-block
  while (static_cast<std::uint64_t>(order[j]) != k % 32) ++j;
  const std::uint64_t packed = k / 32 * 32 + j;
  const std::uint64_t chunk = packed / 64;
  const std::uint64_t flat = (n % 4) * 64 + packed % 64;  // in the 4 x 64 chunk
  return {(n / 4) * K + chunk * 64 + flat / 4, static_cast<unsigned>(4 * (flat % 4))};
}

// GEMM: column n of an 8-column word sits in the nibble i whose order entry
// [0, 2, 4, 6, 1, 3, 5, 7][i] is n % 8.
unsigned GemmShift(std::uint64_t n) {
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  unsigned i = 0;
  while (static_cast<std::uint64_t>(order[i]) != n % 8) ++i;
  return 4 * i;
}

// ---------------------------------------------------------------------------
// Section 4: the layer checks.

struct Geometry {
  std::uint64_t k = 0, n = 0, g = 0, z = 0, group = 0;
};

bool IsScaleType(const std::string& d) { return d == "F16" || d == "BF16" || d == "F32"; }

std::uint64_t Bytes(const std::string& dtype) { return dtype == "F32" ? 4 : 2; }

bool NonFinite(const TableTensor& t, std::uint64_t i) {
  if (t.dtype == "F32") return (LoadU32(t.data + 4 * i) & 0x7F800000u) == 0x7F800000u;
  const std::uint16_t h = LoadU16(t.data + 2 * i);
  if (t.dtype == "BF16") return (h & 0x7F80u) == 0x7F80u;
  return (h & 0x7C00u) == 0x7C00u;
}

// ZEROS: the zero member's name, qzeros, or LLM_AWQ's scaled_zeros.
bool CheckLayer(const TableTensors& tensors, const QuantLayer& layer,
                const QuantSettings& settings, const char* zeros, Report& report, Geometry* out) {
  auto at = [&](int i) -> const TableTensor& { return tensors[static_cast<std::size_t>(i)]; };
  const std::string& p = layer.prefix;
  const std::string& version = settings.format;
  const bool fast = version == "gemv_fast";
  // A1 AWQ-101: qweight, qzeros, scales present.
  const struct {
    int index;
    const char* suffix;
  } required[] = {{layer.qweight, "qweight"}, {layer.qzeros, zeros}, {layer.scales, "scales"}};
  for (const auto& r : required) {
    if (r.index < 0) {
      return report.Error("AWQ-101", at(layer.anchor).name, r.suffix, at(layer.anchor).header_offset,
                          "the layer " + p + " lacks " + p + r.suffix);
    }
  }
  // A2 AWQ-103: a g_idx makes it a GPTQ layer.
  if (layer.g_idx >= 0) {
    return report.Error("AWQ-103", at(layer.g_idx).name, "g_idx", at(layer.g_idx).header_offset,
                        "the layer " + p + " carries g_idx: GPTQ tensors in a file read as AWQ");
  }
  // A3 AWQ-102.
  if (layer.weight >= 0) {
    return report.Error("AWQ-102", at(layer.weight).name, "weight", at(layer.weight).header_offset,
                        "a dense " + p + "weight stands beside the quantized layer");
  }
  // A4 AWQ-104, warnings.
  for (const int s : layer.siblings) {
    const std::string& name = at(s).name;
    const std::string suffix = name.substr(name.rfind('.') + 1);
    report.Warning("AWQ-104", at(s), suffix.c_str(),
                   "the tensor is not a member of the layer " + p + "; it is read as it is");
  }
  // A5 AWQ-105: dtypes, then ranks.
  const std::string word = fast ? "I16" : "I32";
  const struct {
    int index;
    bool ok;
    const char* wanted;
    std::size_t rank;
  } members[] = {
      {layer.qweight, at(layer.qweight).dtype == word, fast ? "I16" : "I32", 2},
      {layer.qzeros, fast ? at(layer.qzeros).dtype == "F16" : at(layer.qzeros).dtype == "I32",
       fast ? "F16" : "I32", 2},
      {layer.scales, fast ? at(layer.scales).dtype == "F16" : IsScaleType(at(layer.scales).dtype),
       fast ? "F16" : "F16, BF16 or F32", 2},
      {layer.bias, layer.bias < 0 || IsScaleType(at(layer.bias).dtype), "F16, BF16 or F32", 1},
  };
  for (const auto& m : members) {
    if (m.index < 0) continue;
    if (!m.ok) {
      return report.Error("AWQ-105", at(m.index).name, "dtype", at(m.index).header_offset,
                          at(m.index).name + " is " + at(m.index).dtype + " where version " +
                              version + " wants " + m.wanted);
    }
    if (at(m.index).shape.size() != m.rank) {
      return report.Error("AWQ-105", at(m.index).name, "shape", at(m.index).header_offset,
                          at(m.index).name + " has " + std::to_string(at(m.index).shape.size()) +
                              " dimensions, not " + std::to_string(m.rank));
    }
  }
  const TableTensor& qweight = at(layer.qweight);
  const TableTensor& qzeros = at(layer.qzeros);
  const TableTensor& scales = at(layer.scales);
  // A6 AWQ-002: K and N from qweight.
  Wide K, N;
  if (version == "gemm") {
    K = qweight.shape[0];
    N = static_cast<Wide>(qweight.shape[1]) * 8;
  } else if (version == "gemv") {
    N = qweight.shape[0];
    K = static_cast<Wide>(qweight.shape[1]) * 8;
  } else {
    N = static_cast<Wide>(qweight.shape[0]) * 4;
    K = qweight.shape[1];
  }
  const Wide limit = static_cast<Wide>(1) << 63;
  if (K >= limit || N >= limit) {
    return report.Error("AWQ-002", qweight.name, "shape", qweight.header_offset,
                        "qweight gives in_features " + WideText(K) + " and out_features " +
                            WideText(N) + ", beyond int64");
  }
  if (fast && K % 64 != 0) {
    return report.Error("AWQ-002", qweight.name, "shape", qweight.header_offset,
                        "gemv_fast needs in_features in multiples of 64, not " + WideText(K));
  }
  // A7 AWQ-005: groups.
  const std::int64_t gs = settings.group_size;
  if (gs != -1 && K % gs != 0) {
    return report.Error("AWQ-005", qweight.name, "group_size", qweight.header_offset,
                        "group_size " + std::to_string(gs) + " does not divide in_features " +
                            WideText(K));
  }
  const Wide G = gs == -1 ? 1 : K / gs;
  const std::int64_t group = gs == -1 ? static_cast<std::int64_t>(K) : gs;
  Wide Z = 0;
  if (version != "gemm") {
    Z = ZerosWidth(static_cast<std::int64_t>(K), group);
    if (Z == 0 && G != 0) {
      return report.Error("AWQ-005", qweight.name, "group_size", qweight.header_offset,
                          "version " + version + " has no zeros width for group size " +
                              std::to_string(group) + " (32, 64 or >= 128)");
    }
  }
  // A8 AWQ-003, A9 AWQ-004.
  Wide want_z[2], want_s[2];
  if (version == "gemm") {
    want_z[0] = G, want_z[1] = N / 8, want_s[0] = G, want_s[1] = N;
  } else if (version == "gemv") {
    want_z[0] = N, want_z[1] = Z, want_s[0] = N, want_s[1] = 8 * Z;
  } else {
    want_z[0] = 8 * Z, want_z[1] = N, want_s[0] = 8 * Z, want_s[1] = N;
  }
  if (qzeros.shape[0] != want_z[0] || qzeros.shape[1] != want_z[1]) {
    return report.Error("AWQ-003", qzeros.name, "shape", qzeros.header_offset,
                        "qzeros should be [" + WideText(want_z[0]) + ", " + WideText(want_z[1]) +
                            "] for version " + version);
  }
  if (scales.shape[0] != want_s[0] || scales.shape[1] != want_s[1]) {
    return report.Error("AWQ-004", scales.name, "shape", scales.header_offset,
                        "scales should be [" + WideText(want_s[0]) + ", " + WideText(want_s[1]) +
                            "] for version " + version);
  }
  if (layer.bias >= 0 && at(layer.bias).shape[0] != N) {
    return report.Error("AWQ-004", at(layer.bias).name, "shape", at(layer.bias).header_offset,
                        "bias should be [" + WideText(N) + "]");
  }
  out->k = static_cast<std::uint64_t>(K);
  out->n = static_cast<std::uint64_t>(N);
  out->g = static_cast<std::uint64_t>(G);
  out->z = static_cast<std::uint64_t>(Z);
  out->group = static_cast<std::uint64_t>(group);
  const std::uint64_t g_count = out->g;
  // A10 AWQ-106: the real groups' scales in storage order, then GEMV_FAST's
  // scaled zeros.
  const std::vector<const TableTensor*> grids =
      fast ? std::vector<const TableTensor*>{&scales, &qzeros} : std::vector<const TableTensor*>{&scales};
  for (const TableTensor* grid : grids) {
    const std::uint64_t rows = grid->shape[0], cols = grid->shape[1];
    // The real groups: GEMV's first G columns, else the first G rows.
    const std::uint64_t real_rows = version == "gemv" ? rows : std::min(rows, g_count);
    const std::uint64_t real_cols = version == "gemv" ? std::min(cols, g_count) : cols;
    if (real_rows == 0 || real_cols == 0) continue;  // nothing (a huge empty grid too)
    for (std::uint64_t r = 0; r < real_rows; ++r) {
      for (std::uint64_t c = 0; c < real_cols; ++c) {
        if (NonFinite(*grid, r * cols + c)) {
          const char* field = grid == &scales ? "scales" : zeros;
          return report.Error("AWQ-106", grid->name, field,
                              ByteOffsetOf(*grid, (r * cols + c) * Bytes(grid->dtype)),
                              std::string(field) + " element (" + std::to_string(r) + ", " +
                                  std::to_string(c) + ") is not finite",
                              static_cast<std::int64_t>(r), static_cast<std::int64_t>(c));
        }
      }
    }
  }
  // A11 AWQ-006: padding slots are zero bits (none when 8Z = G or N = 0).
  if (8 * out->z <= g_count || out->n == 0) return true;
  if (version == "gemv") {
    for (std::uint64_t n = 0; n < out->n; ++n) {
      for (std::uint64_t g = g_count; g < 8 * out->z; ++g) {
        const std::uint64_t w = n * out->z + g / 8;
        if (((LoadU32(qzeros.data + 4 * w) >> (4 * (g % 8))) & 0xFu) != 0) {
          return report.Error("AWQ-006", qzeros.name, "qzeros", ByteOffsetOf(qzeros, 4 * w),
                              "zero slot " + std::to_string(g) + " of row " + std::to_string(n) +
                                  " is padding and must be 0",
                              static_cast<std::int64_t>(n), static_cast<std::int64_t>(g));
        }
      }
    }
    const std::uint64_t size = Bytes(scales.dtype);
    for (std::uint64_t n = 0; n < out->n; ++n) {
      for (std::uint64_t g = g_count; g < 8 * out->z; ++g) {
        const std::uint64_t e = n * 8 * out->z + g;
        const std::uint32_t bits = size == 4 ? LoadU32(scales.data + 4 * e) : LoadU16(scales.data + 2 * e);
        if (bits != 0) {
          return report.Error("AWQ-006", scales.name, "scales", ByteOffsetOf(scales, e * size),
                              "scale slot " + std::to_string(g) + " of row " + std::to_string(n) +
                                  " is padding and must be +0.0",
                              static_cast<std::int64_t>(n), static_cast<std::int64_t>(g));
        }
      }
    }
  } else if (fast) {
    for (const TableTensor* grid : {&qzeros, &scales}) {
      for (std::uint64_t g = g_count; g < 8 * out->z; ++g) {
        for (std::uint64_t n = 0; n < out->n; ++n) {
          if (LoadU16(grid->data + 2 * (g * out->n + n)) != 0) {
            const char* field = grid == &scales ? "scales" : zeros;
            return report.Error("AWQ-006", grid->name, field,
                                ByteOffsetOf(*grid, 2 * (g * out->n + n)),
                                std::string(field) + " row " + std::to_string(g) +
                                    " is padding and must be +0.0",
                                static_cast<std::int64_t>(g), static_cast<std::int64_t>(n));
          }
        }
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 5: unpacking, dequantization, the decoded output.

// Codes [K][N], integer zeros or scaled zeros [G][N], scales [G][N] (binary32).
struct Unpacked {
  AwqLayerCodes codes;
  std::vector<float> scales;
};

Unpacked Unpack(const TableTensors& tensors, const QuantLayer& layer,
                const std::string& version, const Geometry& geo) {
  const TableTensor& qweight = tensors[static_cast<std::size_t>(layer.qweight)];
  const TableTensor& qzeros = tensors[static_cast<std::size_t>(layer.qzeros)];
  const TableTensor& scales = tensors[static_cast<std::size_t>(layer.scales)];
  const std::uint64_t K = geo.k, N = geo.n, G = geo.g, Z = geo.z;
  Unpacked u;
  u.codes.prefix = layer.prefix;
  u.codes.in_features = static_cast<std::int64_t>(K);
  u.codes.out_features = static_cast<std::int64_t>(N);
  u.codes.groups = static_cast<std::int64_t>(G);
  if (K * N == 0 && G * N == 0) return u;  // nothing to unpack (K or G may be huge)
  u.codes.codes.assign(K * N, 0);
  u.scales.assign(G * N, 0.0f);
  const std::vector<int> order = FastBlockOrder();
  for (std::uint64_t k = 0; k < K; ++k) {
    for (std::uint64_t n = 0; n < N; ++n) {
      std::uint32_t field;
      if (version == "gemm") {
        field = LoadU32(qweight.data + 4 * (k * (N / 8) + n / 8)) >> GemmShift(n);
      } else if (version == "gemv") {
        field = LoadU32(qweight.data + 4 * (n * (K / 8) + k / 8)) >> (4 * (k % 8));
      } else {
        const Place place = FastPlace(k, n, K, order);
        field = static_cast<std::uint32_t>(LoadU16(qweight.data + 2 * place.word)) >> place.shift;
      }
      u.codes.codes[k * N + n] = static_cast<std::int32_t>(field & 0xFu);
    }
  }
  for (std::uint64_t g = 0; g < G; ++g) {
    for (std::uint64_t n = 0; n < N; ++n) {
      if (version == "gemm") {
        u.scales[g * N + n] = FloatElement(scales.dtype, scales.data, g * N + n);
        const std::uint32_t w = LoadU32(qzeros.data + 4 * (g * (N / 8) + n / 8)) >> GemmShift(n);
        u.codes.zeros.push_back(static_cast<std::int32_t>(w & 0xFu));
      } else if (version == "gemv") {
        u.scales[g * N + n] = FloatElement(scales.dtype, scales.data, n * 8 * Z + g);
        const std::uint32_t w = LoadU32(qzeros.data + 4 * (n * Z + g / 8)) >> (4 * (g % 8));
        u.codes.zeros.push_back(static_cast<std::int32_t>(w & 0xFu));
      } else {
        u.scales[g * N + n] = HalfToFloat(LoadU16(scales.data + 2 * (g * N + n)));
        u.codes.scaled_zeros.push_back(HalfToFloat(LoadU16(qzeros.data + 2 * (g * N + n))));
      }
    }
  }
  return u;
}

// Row n of the weight: (c - z) * s, or for gemv_fast c * s + scaled zero,
// each operation one binary32 rounding (section 6).
void DequantRow(const Unpacked& u, const std::string& version, const Geometry& geo,
                std::uint64_t n, float* row) {
  const std::uint64_t N = geo.n;
  for (std::uint64_t k = 0; k < geo.k; ++k) {
    const std::uint64_t g = k / geo.group;
    const std::int32_t c = u.codes.codes[k * N + n];
    const float s = u.scales[g * N + n];
    if (version == "gemv_fast") {
      const float product = static_cast<float>(c) * s;
      const float sum = product + u.codes.scaled_zeros[g * N + n];
      row[k] = sum;
    } else {
      const float d = static_cast<float>(c - u.codes.zeros[g * N + n]);
      const float product = d * s;
      row[k] = product;
    }
  }
}

}  // namespace

bool StreamAwqTable(const MergedTable& table, const std::string& file_name,
                    const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                    qd::TensorSink& sink, std::vector<AwqLayerCodes>* layers) {
  QuantSettings settings;
  if (!CheckQuantConfigs("awq", configs, file_name, outcome, &settings)) return false;
  Report report{outcome, file_name};
  const TableTensors& tensors = table.tensors;
  std::vector<QuantLayer> found = FindQuantLayers(tensors);
  // LLM_AWQ (docs/awq.md section 4) is GEMV_FAST's layout with the scaled
  // zeros in P.scaled_zeros: that tensor is the layer's zero member, and a
  // P.qzeros beside it is a tensor of no member.
  const char* zeros = "qzeros";
  if (settings.format == "llm-awq") {
    zeros = "scaled_zeros";
    settings.format = "gemv_fast";
    for (QuantLayer& layer : found) {
      int scaled = -1;
      std::vector<int> others;
      for (const int s : layer.siblings) {
        if (tensors[static_cast<std::size_t>(s)].name == layer.prefix + "scaled_zeros") {
          scaled = s;
        } else {
          others.push_back(s);
        }
      }
      if (layer.qzeros >= 0) others.push_back(layer.qzeros);
      std::sort(others.begin(), others.end());
      layer.siblings = others;
      layer.qzeros = scaled;
    }
  }
  std::vector<Geometry> geometry(found.size());
  for (std::size_t l = 0; l < found.size(); ++l) {
    if (!CheckLayer(tensors, found[l], settings, zeros, report, &geometry[l])) return false;
  }
  // Section 7: a layer's weight where its qweight is; its scales and qzeros
  // are consumed; every other floating tensor widened; other integers left out.
  std::vector<int> layer_at(tensors.size(), -1);
  std::vector<bool> consumed(tensors.size(), false);
  for (std::size_t l = 0; l < found.size(); ++l) {
    layer_at[static_cast<std::size_t>(found[l].qweight)] = static_cast<int>(l);
    consumed[static_cast<std::size_t>(found[l].scales)] = true;
    consumed[static_cast<std::size_t>(found[l].qzeros)] = true;
  }
  std::vector<std::size_t> decoded;
  std::vector<qd::TensorInfo> plan;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (layer_at[t] >= 0) {
      const Geometry& geo = geometry[static_cast<std::size_t>(layer_at[t])];
      plan.push_back({found[static_cast<std::size_t>(layer_at[t])].prefix + "weight", {geo.n, geo.k}});
    } else if (!consumed[t] && IsFloatDtype(tensors[t].dtype)) {
      plan.push_back({tensors[t].name, tensors[t].shape});
    } else {
      continue;
    }
    decoded.push_back(t);
  }
  if (layers != nullptr) {
    layers->clear();
    for (std::size_t l = 0; l < found.size(); ++l) {
      layers->push_back(Unpack(tensors, found[l], settings.format, geometry[l]).codes);
    }
  }
  if (!sink.Plan(plan)) return true;
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const TableTensor& tensor = tensors[decoded[i]];
    const int l = layer_at[decoded[i]];
    bool more;
    if (l < 0) {
      more = StreamFloatElements(tensor.dtype, tensor.data, tensor.element_count, i, sink);
    } else {
      const Geometry& geo = geometry[static_cast<std::size_t>(l)];
      const Unpacked u = Unpack(tensors, found[static_cast<std::size_t>(l)], settings.format, geo);
      more = StreamRows(sink, i, geo.n, geo.k, [&](std::uint64_t first, std::uint64_t count, float* out) {
        for (std::uint64_t n = first; n < first + count; ++n) {
          DequantRow(u, settings.format, geo, n, out + (n - first) * geo.k);
        }
      });
    }
    if (!more) break;
  }
  return true;
}

qd::Outcome StreamAwqFile(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, qd::TensorSink& sink,
                          std::vector<AwqLayerCodes>* layers) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;
  StreamAwqTable(TableOfFile(file, std::move(container)), file_name, configs, &outcome, sink, layers);
  return outcome;
}

qd::Outcome ReadAwqFile(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs,
                        std::vector<AwqLayerCodes>* layers) {
  return CollectStream(
      [&](qd::TensorSink& sink) { return StreamAwqFile(file, file_name, configs, sink, layers); });
}

bool HasAwqLayer(const MergedTable& table) {
  for (const QuantLayer& layer : FindQuantLayers(table.tensors)) {
    if (LayerLooksAwq(table.tensors, layer)) return true;
  }
  return false;
}

bool IsAwqFile(const ClaimInput& input) {
  const MergedTable* table = input.Get();
  return table != nullptr && HasAwqLayer(*table);
}

// ---------------------------------------------------------------------------
// Section 6: PackAwq (docs/awq.md section 8), the placements of section 3
// used forwards.

bool PackAwq(const std::string& format, std::int64_t in_features, std::int64_t out_features,
             std::int64_t group_size, const std::vector<std::int32_t>& codes,
             const std::vector<std::int32_t>& zeros, std::vector<std::int32_t>* qweight,
             std::vector<std::int32_t>* qzeros, std::string* error) {
  const std::int64_t K = in_features, N = out_features;
  const std::int64_t group = group_size == -1 ? K : group_size;
  const bool fast = format == "gemv_fast";
  if (format != "gemm" && format != "gemv" && !fast) {
    *error = "the format \"" + format + "\" is not gemm, gemv or gemv_fast";
    return false;
  }
  if (K < 0 || N < 0 || group <= 0 || K % group != 0) {
    *error = "in_features must be a multiple of the group size";
    return false;
  }
  const std::int64_t G = K / group;
  const std::int64_t Z = format == "gemm" ? 0 : ZerosWidth(K, group);
  const bool shape_ok = format == "gemm" ? N % 8 == 0
                        : format == "gemv" ? K % 8 == 0 && (Z != 0 || G == 0)
                                           : N % 4 == 0 && K % 64 == 0 && (Z != 0 || G == 0);
  if (!shape_ok || codes.size() != static_cast<std::size_t>(K * N) ||
      (!fast && zeros.size() != static_cast<std::size_t>(G * N))) {
    *error = "the shapes do not fit version " + format;
    return false;
  }
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] < 0 || codes[i] > 15) {
      *error = "a code is outside 0..15 at (" + std::to_string(i / static_cast<std::size_t>(N)) + ", " +
               std::to_string(i % static_cast<std::size_t>(N)) + ")";
      return false;
    }
  }
  for (std::size_t i = 0; !fast && i < zeros.size(); ++i) {
    if (zeros[i] < 0 || zeros[i] > 15) {
      *error = "a zero point is outside 0..15 at (" + std::to_string(i / static_cast<std::size_t>(N)) +
               ", " + std::to_string(i % static_cast<std::size_t>(N)) + ")";
      return false;
    }
  }
  const std::uint64_t uK = static_cast<std::uint64_t>(K), uN = static_cast<std::uint64_t>(N);
  std::vector<std::uint32_t> words(static_cast<std::size_t>(K * N / (fast ? 4 : 8)), 0u);
  std::vector<std::uint32_t> zero_words(static_cast<std::size_t>(format == "gemm" ? G * N / 8 : fast ? 0 : N * Z), 0u);
  const std::vector<int> order = FastBlockOrder();
  for (std::uint64_t k = 0; k < uK; ++k) {
    for (std::uint64_t n = 0; n < uN; ++n) {
      const std::uint32_t v = static_cast<std::uint32_t>(codes[k * uN + n]);
      if (format == "gemm") {
        words[k * (uN / 8) + n / 8] |= v << GemmShift(n);
      } else if (format == "gemv") {
        words[n * (uK / 8) + k / 8] |= v << (4 * (k % 8));
      } else {
        const Place place = FastPlace(k, n, uK, order);
        words[place.word] |= v << place.shift;
      }
    }
  }
  for (std::uint64_t g = 0; !fast && g < static_cast<std::uint64_t>(G); ++g) {
    for (std::uint64_t n = 0; n < uN; ++n) {
      const std::uint32_t v = static_cast<std::uint32_t>(zeros[g * uN + n]);
      if (format == "gemm") {
        zero_words[g * (uN / 8) + n / 8] |= v << GemmShift(n);
      } else {
        zero_words[n * static_cast<std::uint64_t>(Z) + g / 8] |= v << (4 * (g % 8));
      }
    }
  }
  qweight->clear();
  for (const std::uint32_t w : words) {
    qweight->push_back(fast ? static_cast<std::int16_t>(static_cast<std::uint16_t>(w))
                            : static_cast<std::int32_t>(w));
  }
  qzeros->clear();
  for (const std::uint32_t w : zero_words) qzeros->push_back(static_cast<std::int32_t>(w));
  return true;
}

}  // namespace qd::oracle
