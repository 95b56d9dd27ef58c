// gptq.cc: the oracle's GPTQ reader (formats "gptq" v1, "gptq_v2" and the
// planar "gptq_p") and its reference packer, written from docs/gptq.md (which
// cites spec 001 and spec 004). Nothing here is shared with codecs/.
//
// Sections (docs/gptq.md section numbers in brackets):
//   1. small helpers: loads, binary32 bits, 128-bit shape arithmetic
//   2. findings: oracles/gptq_internal.h (shared with gptq_config.cc)
//   3. config sources: parsing, CFG-001 / CFG-002 [1, 3 C1]: gptq_config.cc
//   4. the winning config: C2..C11 [3]: gptq_config.cc
//   5. layers: discovery and anchors [2]
//   6. layer checks L1..L10 [3]
//   7. unpacking: continuous and planar fields [4], zeros [5]
//   8. dequantization and the decoded output [6, 7]
//   9. StreamGptqTable (one file or a model directory's merged table),
//      StreamGptqFile, ReadGptqFile (CheckQuantConfigs: gptq_config.cc)
//  10. PackGptq [8]
#include "oracles/gptq.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/gptq_internal.h"
#include "oracles/merged_table.h"
#include "quantdiff/tensor_sink.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

using gptq_internal::Quote;
using gptq_internal::Reporter;
using gptq_internal::Settings;


// Shapes are up to 64 bits and the formulas of section 2 multiply them by 32:
// every shape computation is done in 128 bits, where it cannot overflow.
using Wide = __int128;

// ---------------------------------------------------------------------------
// Section 1: helpers (little-endian loads and binary32 bits: oracles/bytes.h).

// An infinity or a NaN: exponent bits all ones.
bool IsInfOrNan(float value) { return (BitsOfFloat(value) & 0x7F800000u) == 0x7F800000u; }

// mask(b) = 2^b - 1, for b in 1..32.
std::uint32_t Mask(int bits) {
  return bits >= 32 ? 0xFFFFFFFFu : ((static_cast<std::uint32_t>(1) << bits) - 1u);
}

// 8 + N_hdr + begin + j as a byte_offset, saturated at INT64_MAX (in a
// .pt table, docs/pt.md 6.4's offset of byte j).
std::int64_t DataOffset(const TableTensor& tensor, Wide j) {
  if (tensor.pt_tensor != nullptr) return tensor.ByteOffset(static_cast<std::uint64_t>(j));
  const Wide offset = static_cast<Wide>(tensor.data_start) + static_cast<Wide>(tensor.begin) + j;
  const Wide limit = static_cast<Wide>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(offset > limit ? limit : offset);
}

std::string WideToString(Wide value) {
  if (value == 0) return "0";
  const bool negative = value < 0;
  std::string digits;
  while (value != 0) {
    int digit = static_cast<int>(value % 10);
    if (digit < 0) digit = -digit;
    digits.insert(digits.begin(), static_cast<char>('0' + digit));
    value /= 10;
  }
  return negative ? "-" + digits : digits;
}

std::string ShapeToString(const std::vector<std::uint64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// ---------------------------------------------------------------------------
// Section 5: layers (docs/gptq.md section 2).

// P and the suffix of a tensor name, split at its last '.'.
// A name P + x split at its last dot: P with the dot, and x (P is empty
// when there is no dot). Views into NAME.
struct NameParts {
  std::string_view prefix;
  std::string_view suffix;
};
NameParts SplitName(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return {std::string_view(), name};
  return {name.substr(0, dot + 1), name.substr(dot + 1)};
}

bool IsQuantMember(std::string_view suffix) {
  return suffix == "qweight" || suffix == "qzeros" || suffix == "scales" || suffix == "g_idx";
}

using Layer = QuantLayer;

// Every layer, in anchor order. The tensors are already sorted by (shard,
// begin, end, name) (docs/model_dir.md 4: one file is one shard), so anchor
// order is the order of the anchors' indexes.
std::vector<Layer> FindLayers(const TableTensors& tensors) {
  const int count = static_cast<int>(tensors.size());
  // The prefixes that own a quantized member. Names are split where they
  // are read, twice, rather than kept split: a copy of every prefix and
  // suffix cost 64 bytes a tensor at the peak of detection (issue 9,
  // section 3).
  std::vector<Layer> layers;
  std::map<std::string, std::size_t, std::less<>> by_prefix;
  for (int i = 0; i < count; ++i) {
    const NameParts parts = SplitName(tensors[i].name);
    if (!IsQuantMember(parts.suffix) || by_prefix.count(parts.prefix) != 0) continue;
    by_prefix.emplace(std::string(parts.prefix), layers.size());
    Layer layer;
    layer.prefix = std::string(parts.prefix);
    layers.push_back(layer);
  }
  // Every tensor P+x of a layer P, in table order.
  for (int i = 0; i < count; ++i) {
    const NameParts parts = SplitName(tensors[i].name);
    const auto found = by_prefix.find(parts.prefix);
    if (found == by_prefix.end()) continue;
    Layer& layer = layers[found->second];
    const std::string_view suffix = parts.suffix;
    if (suffix == "qweight")
      layer.qweight = i;
    else if (suffix == "qzeros")
      layer.qzeros = i;
    else if (suffix == "scales")
      layer.scales = i;
    else if (suffix == "g_idx")
      layer.g_idx = i;
    else if (suffix == "bias")
      layer.bias = i;
    else if (suffix == "weight")
      layer.weight = i;
    else
      layer.siblings.push_back(i);
  }
  // The anchor: qweight, else the first present of qzeros, scales, g_idx.
  for (Layer& layer : layers) {
    for (const int candidate : {layer.qweight, layer.qzeros, layer.scales, layer.g_idx}) {
      if (candidate >= 0) {
        layer.anchor = candidate;
        break;
      }
    }
  }
  std::sort(layers.begin(), layers.end(),
            [](const Layer& a, const Layer& b) { return a.anchor < b.anchor; });
  return layers;
}

// The geometry of an accepted layer (section 2).
// Accepted: g_idx holds K elements, so K is bounded by the file size; G * N
// and K * N are element counts of scales and qweight whenever G > 0, K > 0.
// N alone may be huge when K = G = 0 (nothing is then iterated over N).
struct Geometry {
  std::uint64_t k = 0;  // in_features
  std::uint64_t n = 0;  // out_features
  std::uint64_t g = 0;  // number of groups
};

Wide GroupCount(Wide k, std::int64_t group_size) {
  if (group_size == -1) return 1;
  return (k + group_size - 1) / group_size;  // ceil(k / gs), k >= 0
}

// ---------------------------------------------------------------------------
// Section 6: the layer checks L1..L10.

struct LayerContext {
  const TableTensors& tensors;
  const std::string& file_name;
  const Settings& settings;
};

const TableTensor& TensorAt(const LayerContext& ctx, int index) {
  return ctx.tensors[static_cast<std::size_t>(index)];
}

// F16, BF16 or F32 scale element `index` widened to binary32.
float LoadScale(const TableTensor& tensor, std::uint64_t index) {
  const std::uint8_t* data = tensor.data;
  if (tensor.dtype == "F32") return FloatFromBits(LoadU32(data + 4 * index));
  if (tensor.dtype == "F16") return HalfToFloat(LoadU16(data + 2 * index));
  // BF16: the top 16 bits of a binary32.
  return FloatFromBits(static_cast<std::uint32_t>(LoadU16(data + 2 * index)) << 16);
}

std::uint64_t DtypeSize(const std::string& dtype) { return dtype == "F32" ? 4 : 2; }

// I32 element `index` of a tensor, as u32.
std::uint32_t LoadWord(const TableTensor& tensor, std::uint64_t index) {
  return LoadU32(tensor.data + 4 * index);
}

// The zero field (g, n) of a layer, section 4 (forward declaration).
std::uint32_t ZeroField(const LayerContext& ctx, const TableTensor& qzeros,
                        const Geometry& geometry, std::uint64_t g, std::uint64_t n);

bool CheckLayer(const LayerContext& ctx, const Layer& layer, Reporter& report,
                Geometry* geometry) {
  const std::string& file = ctx.file_name;
  const std::string& p = layer.prefix;
  const int b = ctx.settings.bits;

  // L1 GPTQ-101: every required member is present.
  const struct {
    int index;
    const char* suffix;
  } required[] = {{layer.qweight, "qweight"},
                  {layer.qzeros, "qzeros"},
                  {layer.scales, "scales"},
                  {layer.g_idx, "g_idx"}};
  for (const auto& member : required) {
    if (member.index < 0) {
      return report.Error("GPTQ-101", file, TensorAt(ctx, layer.anchor).name, member.suffix,
                          TensorAt(ctx, layer.anchor).header_offset,
                          "the layer " + Quote(p) + " has no " + p + member.suffix + " tensor");
    }
  }
  // L2 GPTQ-102: a dense weight beside the quantized layer.
  if (layer.weight >= 0) {
    return report.Error("GPTQ-102", file, TensorAt(ctx, layer.weight).name, "weight",
                        TensorAt(ctx, layer.weight).header_offset,
                        "a dense " + p + "weight lies beside the quantized layer " + Quote(p));
  }
  // L3 GPTQ-103: unknown siblings, read as ordinary tensors.
  for (const int sibling : layer.siblings) {
    const std::string suffix(SplitName(TensorAt(ctx, sibling).name).suffix);
    report.Warning("GPTQ-103", file, TensorAt(ctx, sibling).name, suffix,
                   TensorAt(ctx, sibling).header_offset,
                   "the tensor " + TensorAt(ctx, sibling).name +
                       " beside the layer is not a GPTQ member; it is read as an ordinary tensor");
  }
  // L4 GPTQ-104: dtype, then rank, member by member.
  const struct {
    int index;
    bool is_float;  // F16, BF16, F32; else I32
    std::size_t rank;
  } members[] = {{layer.qweight, false, 2},
                 {layer.qzeros, false, 2},
                 {layer.scales, true, 2},
                 {layer.g_idx, false, 1},
                 {layer.bias, true, 1}};
  for (const auto& member : members) {
    if (member.index < 0) continue;  // only the bias is optional
    const TableTensor& tensor = TensorAt(ctx, member.index);
    const bool dtype_ok = member.is_float ? (tensor.dtype == "F16" || tensor.dtype == "BF16" ||
                                             tensor.dtype == "F32")
                                          : tensor.dtype == "I32";
    if (!dtype_ok) {
      return report.Error("GPTQ-104", file, tensor.name, "dtype", tensor.header_offset,
                          tensor.name + " has dtype " + tensor.dtype + ", expected " +
                              (member.is_float ? "F16, BF16 or F32" : "I32"));
    }
    if (tensor.shape.size() != member.rank) {
      return report.Error("GPTQ-104", file, tensor.name, "shape", tensor.header_offset,
                          tensor.name + " has rank " + std::to_string(tensor.shape.size()) +
                              ", expected " + std::to_string(member.rank));
    }
  }

  const TableTensor& qweight = TensorAt(ctx, layer.qweight);
  const TableTensor& qzeros = TensorAt(ctx, layer.qzeros);
  const TableTensor& scales = TensorAt(ctx, layer.scales);
  const TableTensor& g_idx = TensorAt(ctx, layer.g_idx);

  // Geometry (section 2), in 128 bits.
  const Wide rows = static_cast<Wide>(qweight.shape[0]);
  const Wide n = static_cast<Wide>(qweight.shape[1]);
  const bool kq_defined = (rows * 32) % b == 0;
  const Wide kq = kq_defined ? rows * 32 / b : 0;
  const Wide kg = static_cast<Wide>(g_idx.shape[0]);
  const Wide k = (kq_defined && GroupCount(kq, ctx.settings.group_size) ==
                                    static_cast<Wide>(scales.shape[0]))
                     ? kq
                     : kg;
  const Wide g = GroupCount(k, ctx.settings.group_size);

  // L5 GPTQ-002: qweight is [K / 32 * b, N] with K a multiple of 32.
  if (k % 32 != 0 || rows != k / 32 * b) {
    return report.Error("GPTQ-002", file, qweight.name, "shape", qweight.header_offset,
                        qweight.name + " has shape " + ShapeToString(qweight.shape) +
                            ", which does not hold in_features " + WideToString(k) + " at " +
                            std::to_string(b) + " bits (a multiple of 32 is needed)");
  }
  // L6 GPTQ-003: qzeros is [G, N / 32 * b] with N a multiple of 32.
  if (n % 32 != 0 || static_cast<Wide>(qzeros.shape[0]) != g ||
      static_cast<Wide>(qzeros.shape[1]) != n / 32 * b) {
    return report.Error("GPTQ-003", file, qzeros.name, "shape", qzeros.header_offset,
                        qzeros.name + " has shape " + ShapeToString(qzeros.shape) + ", expected [" +
                            WideToString(g) + ", " + WideToString(n) + " / 32 * " +
                            std::to_string(b) + "] with out_features " + WideToString(n) +
                            " a multiple of 32");
  }
  // L7 GPTQ-105: scales [G, N], then bias [N].
  if (static_cast<Wide>(scales.shape[0]) != g || static_cast<Wide>(scales.shape[1]) != n) {
    return report.Error("GPTQ-105", file, scales.name, "shape", scales.header_offset,
                        scales.name + " has shape " + ShapeToString(scales.shape) +
                            ", expected [" + WideToString(g) + ", " + WideToString(n) + "]");
  }
  if (layer.bias >= 0 && static_cast<Wide>(TensorAt(ctx, layer.bias).shape[0]) != n) {
    const TableTensor& bias = TensorAt(ctx, layer.bias);
    return report.Error("GPTQ-105", file, bias.name, "shape", bias.header_offset,
                        bias.name + " has shape " + ShapeToString(bias.shape) + ", expected [" +
                            WideToString(n) + "]");
  }
  // L8 GPTQ-004: g_idx has K entries, each selecting an existing group.
  if (kg != k) {
    return report.Error("GPTQ-004", file, g_idx.name, "shape", g_idx.header_offset,
                        g_idx.name + " has " + WideToString(kg) + " entries, in_features is " +
                            WideToString(k));
  }
  // From here K is bounded by the file size (g_idx holds K elements), and
  // G * N whenever G > 0 (scales holds G * N elements).
  geometry->k = static_cast<std::uint64_t>(k);
  geometry->n = static_cast<std::uint64_t>(n);
  geometry->g = static_cast<std::uint64_t>(g);
  const std::int64_t groups = static_cast<std::int64_t>(g);  // g <= k + 1
  for (std::uint64_t kk = 0; kk < geometry->k; ++kk) {
    const std::int32_t group = static_cast<std::int32_t>(LoadWord(g_idx, kk));
    if (group < 0 || group >= groups) {
      return report.Error("GPTQ-004", file, g_idx.name, "g_idx",
                          DataOffset(g_idx, static_cast<Wide>(4) * kk),
                          g_idx.name + "[" + std::to_string(kk) + "] is " +
                              std::to_string(group) + ", not a group in 0.." +
                              std::to_string(groups - 1),
                          -1, static_cast<std::int64_t>(kk));
    }
  }
  // L9 GPTQ-106: the first infinite or NaN scale in storage order.
  for (std::uint64_t gg = 0; gg < geometry->g; ++gg) {
    for (std::uint64_t nn = 0; nn < geometry->n; ++nn) {
      const std::uint64_t index = gg * geometry->n + nn;
      if (IsInfOrNan(LoadScale(scales, index))) {
        return report.Error(
            "GPTQ-106", file, scales.name, "scales",
            DataOffset(scales,
                       static_cast<Wide>(index) * static_cast<Wide>(DtypeSize(scales.dtype))),
            scales.name + "[" + std::to_string(gg) + "][" + std::to_string(nn) +
                "] is an infinity or a NaN",
            static_cast<std::int64_t>(gg), static_cast<std::int64_t>(nn));
      }
    }
  }
  // L10 GPTQ-107 (v1 only): the first zero field equal to mask(b).
  if (ctx.settings.format == "gptq") {
    const std::uint64_t words_per_row = geometry->n / 32 * static_cast<std::uint64_t>(b);
    for (std::uint64_t gg = 0; gg < geometry->g; ++gg) {
      for (std::uint64_t nn = 0; nn < geometry->n; ++nn) {
        if (ZeroField(ctx, qzeros, *geometry, gg, nn) != Mask(b)) continue;
        // The word holding the field's lowest bit.
        const Wide j = static_cast<Wide>(4) *
                       (static_cast<Wide>(gg) * words_per_row + (static_cast<Wide>(nn) * b) / 32);
        report.Warning("GPTQ-107", file, qzeros.name, "qzeros",
                       DataOffset(qzeros, j),
                       "the v1 zero field (" + std::to_string(gg) + ", " + std::to_string(nn) +
                           ") is " + std::to_string(Mask(b)) + ", so the zero point is 2^" +
                           std::to_string(b) +
                           ", outside the code range (the pack of a zero point 0 underflowed)",
                       static_cast<std::int64_t>(gg), static_cast<std::int64_t>(nn));
        return true;  // at most one per layer
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 7: unpacking (docs/gptq.md sections 4 and 5).

// A bit stream over 32-bit words: word(j) of the stream.
struct Stream {
  const std::uint8_t* base = nullptr;  // data of the tensor
  std::uint64_t first = 0;             // element index of stream word 0
  std::uint64_t stride = 1;            // elements between stream words
  std::uint32_t Word(std::uint64_t j) const { return LoadU32(base + 4 * (first + j * stride)); }
};

// Continuous layout: field i starts at bit s = i * b of the stream.
std::uint32_t ContinuousField(const Stream& stream, std::uint64_t i, int b) {
  const std::uint64_t s = i * static_cast<std::uint64_t>(b);
  const std::uint64_t w = s / 32;
  const std::uint32_t o = static_cast<std::uint32_t>(s % 32);
  std::uint32_t value = stream.Word(w) >> o;
  if (o + static_cast<std::uint32_t>(b) > 32) value |= stream.Word(w + 1) << (32 - o);
  return value & Mask(b);
}

// The planes of a planar field, low first (section 4).
std::vector<int> Planes(int b) {
  switch (b) {
    case 2:
      return {2};
    case 3:
      return {2, 1};
    case 4:
      return {4};
    case 5:
      return {4, 1};
    case 6:
      return {4, 2};
    case 7:
      return {4, 2, 1};
    case 8:
      return {8};
    default:
      return {};
  }
}

// Planar layout: blocks of 32 fields over b words, plane by plane.
std::uint32_t PlanarField(const Stream& stream, std::uint64_t i, int b) {
  const std::uint64_t block = i / 32;
  const std::uint64_t t = i % 32;
  std::uint32_t value = 0;
  int offset = 0;  // W_j
  for (const int p : Planes(b)) {
    const std::uint64_t per_word = 32 / static_cast<std::uint64_t>(p);
    const std::uint64_t word = block * static_cast<std::uint64_t>(b) +
                               static_cast<std::uint64_t>(offset) + t / per_word;
    const std::uint32_t shift = static_cast<std::uint32_t>((t % per_word) * static_cast<std::uint64_t>(p));
    const std::uint32_t part = (stream.Word(word) >> shift) & Mask(p);
    value |= part << offset;
    offset += p;
  }
  return value;
}

std::uint32_t Field(const std::string& format, const Stream& stream, std::uint64_t i, int b) {
  return format == "gptq_p" ? PlanarField(stream, i, b) : ContinuousField(stream, i, b);
}

std::uint32_t ZeroField(const LayerContext& ctx, const TableTensor& qzeros,
                        const Geometry& geometry, std::uint64_t g, std::uint64_t n) {
  // Row g of qzeros is one stream along the row: C = N / 32 * b words.
  const std::uint64_t words_per_row = geometry.n / 32 * static_cast<std::uint64_t>(ctx.settings.bits);
  Stream stream;
  stream.base = qzeros.data;
  stream.first = g * words_per_row;
  stream.stride = 1;
  return Field(ctx.settings.format, stream, n, ctx.settings.bits);
}

// code(k, n): field k of qweight column n (a stream down the rows: word j
// is qweight[j][n]).
std::uint32_t CodeField(const LayerContext& ctx, const TableTensor& qweight,
                        const Geometry& geometry, std::uint64_t k, std::uint64_t n) {
  Stream stream;
  stream.base = qweight.data;
  stream.first = n;
  stream.stride = geometry.n;
  return Field(ctx.settings.format, stream, k, ctx.settings.bits);
}

// zero(g, n), section 5: v1 adds 1 without masking; v2 and planar do not.
std::int32_t ZeroPoint(const LayerContext& ctx, const TableTensor& qzeros,
                       const Geometry& geometry, std::uint64_t g, std::uint64_t n) {
  const std::uint32_t field = ZeroField(ctx, qzeros, geometry, g, n);
  if (ctx.settings.format == "gptq") return static_cast<std::int32_t>(field) + 1;
  return static_cast<std::int32_t>(field);
}

// ---------------------------------------------------------------------------
// Section 8: dequantization and the decoded output (sections 6, 7).

// An accepted layer's codes [K][N] and zero points [G][N] (what ReadGptqFile
// gives a caller that asks for them).
void LayerCodes(const LayerContext& ctx, const Layer& layer, const Geometry& geometry,
                GptqLayerCodes* codes) {
  const TableTensor& qweight = TensorAt(ctx, layer.qweight);
  const TableTensor& qzeros = TensorAt(ctx, layer.qzeros);
  const std::uint64_t K = geometry.k;
  const std::uint64_t N = geometry.n;
  const std::uint64_t G = geometry.g;
  codes->prefix = layer.prefix;
  codes->in_features = static_cast<std::int64_t>(K);
  codes->out_features = static_cast<std::int64_t>(N);  // N < 2^63 unless K = G = 0
  codes->groups = static_cast<std::int64_t>(G);
  if (N == 0) return;  // no column: nothing to unpack

  // G > 0 here means scales holds G * N elements, so the sizes are bounded.
  codes->zeros.resize(static_cast<std::size_t>(G * N));
  for (std::uint64_t g = 0; g < G; ++g) {
    for (std::uint64_t n = 0; n < N; ++n) {
      codes->zeros[g * N + n] = ZeroPoint(ctx, qzeros, geometry, g, n);
    }
  }
  if (K == 0) return;  // K > 0 means qweight holds K * b / 32 * N elements
  codes->codes.resize(static_cast<std::size_t>(K * N));
  for (std::uint64_t k = 0; k < K; ++k) {
    for (std::uint64_t n = 0; n < N; ++n) {
      codes->codes[k * N + n] = static_cast<std::int32_t>(CodeField(ctx, qweight, geometry, k, n));
    }
  }
}

// Hands an accepted layer's P+weight [N, K] to SINK as tensor number INDEX,
// a few rows n at a time; row n is output feature n over every k.
bool StreamLayerWeight(const LayerContext& ctx, const Layer& layer, const Geometry& geometry,
                       std::size_t index, qd::TensorSink& sink) {
  const TableTensor& qweight = TensorAt(ctx, layer.qweight);
  const TableTensor& qzeros = TensorAt(ctx, layer.qzeros);
  const TableTensor& scales = TensorAt(ctx, layer.scales);
  const TableTensor& g_idx = TensorAt(ctx, layer.g_idx);
  const std::uint64_t K = geometry.k;
  const std::uint64_t N = geometry.n;
  const std::uint64_t G = geometry.g;
  // K = 0 or N = 0: no value, no chunk (N alone may be huge when K = G = 0;
  // StreamRows then iterates over nothing). Otherwise G <= K, so a row's
  // zero points take no more room than the row.
  std::vector<std::int32_t> zeros;
  return StreamRows(sink, index, N, K, [&](std::uint64_t first_row, std::uint64_t count, float* out) {
    for (std::uint64_t n = first_row; n < first_row + count; ++n) {
      zeros.resize(static_cast<std::size_t>(G));
      for (std::uint64_t g = 0; g < G; ++g) zeros[g] = ZeroPoint(ctx, qzeros, geometry, g, n);
      float* row = out + (n - first_row) * K;
      for (std::uint64_t k = 0; k < K; ++k) {
        // g = g_idx[k], checked to be in 0..G-1 by L8.
        const std::uint64_t g =
            static_cast<std::uint64_t>(static_cast<std::int32_t>(LoadWord(g_idx, k)));
        // 1. c and z, integers; c - z in -256..255.
        const std::int32_t c = static_cast<std::int32_t>(CodeField(ctx, qweight, geometry, k, n));
        const std::int32_t z = zeros[g];
        // 2. d = (float)(c - z): exact; 0 gives +0.0.
        const float d = static_cast<float>(c - z);
        // 3. s = scales[g][n] widened to binary32.
        const float s = LoadScale(scales, g * N + n);
        // 4. one binary32 multiplication, round to nearest even.
        const float product = d * s;
        row[k] = product;
      }
    }
  });
}

}  // namespace

// ---------------------------------------------------------------------------
// Section 9: StreamGptqTable, StreamGptqFile, ReadGptqFile.

bool StreamGptqTable(const MergedTable& table, const std::string& file_name,
                     const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                     qd::TensorSink& sink, std::vector<GptqLayerCodes>* layers) {
  Reporter report(outcome);
  Settings settings;
  if (!CheckQuantConfigs("gptq", configs, file_name, outcome, &settings)) return false;

  // L1..L10, layer by layer in anchor order.
  const TableTensors& tensors = table.tensors;
  const std::vector<Layer> found = FindLayers(tensors);
  const LayerContext ctx{tensors, file_name, settings};
  std::vector<Geometry> geometries;
  for (const Layer& layer : found) {
    Geometry geometry;
    if (!CheckLayer(ctx, layer, report, &geometry)) return false;
    geometries.push_back(geometry);
  }

  // Section 7: the outcome's tensors in table order of their source: a
  // layer's P+weight at its qweight, every other floating tensor (biases
  // included) widened; a layer's scales are consumed by its weight, integer
  // tensors outside layers are left out.
  std::vector<int> layer_of_qweight(tensors.size(), -1);
  std::vector<bool> is_layer_scales(tensors.size(), false);
  for (std::size_t l = 0; l < found.size(); ++l) {
    layer_of_qweight[static_cast<std::size_t>(found[l].qweight)] = static_cast<int>(l);
    is_layer_scales[static_cast<std::size_t>(found[l].scales)] = true;
  }
  std::vector<std::size_t> decoded;
  std::vector<qd::TensorInfo> plan;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const TableTensor& tensor = tensors[t];
    const int l = layer_of_qweight[t];
    if (l >= 0) {
      const Geometry& geometry = geometries[static_cast<std::size_t>(l)];
      plan.push_back({found[static_cast<std::size_t>(l)].prefix + "weight", {geometry.n, geometry.k}});
    } else if (IsFloatDtype(tensor.dtype) && !is_layer_scales[t]) {
      plan.push_back({tensor.name, tensor.shape});
    } else {
      continue;
    }
    decoded.push_back(t);
  }
  if (layers != nullptr) {
    layers->assign(found.size(), GptqLayerCodes());
    for (std::size_t l = 0; l < found.size(); ++l) LayerCodes(ctx, found[l], geometries[l], &(*layers)[l]);
  }
  if (!sink.Plan(plan)) return true;
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const TableTensor& tensor = tensors[decoded[i]];
    const int l = layer_of_qweight[decoded[i]];
    const bool more =
        l >= 0 ? StreamLayerWeight(ctx, found[static_cast<std::size_t>(l)],
                                   geometries[static_cast<std::size_t>(l)], i, sink)
               : StreamFloatElements(tensor.dtype, tensor.data, tensor.element_count, i, sink);
    if (!more) break;
  }
  return true;
}

qd::Outcome StreamGptqFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, qd::TensorSink& sink,
                           std::vector<GptqLayerCodes>* layers) {
  qd::Outcome outcome;
  Container container;
  // The container rules first.
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;
  StreamGptqTable(TableOfFile(file, std::move(container)), file_name, configs, &outcome, sink, layers);
  return outcome;
}

qd::Outcome ReadGptqFile(qd::ByteView file, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs,
                         std::vector<GptqLayerCodes>* layers) {
  return CollectStream([&](qd::TensorSink& sink) {
    return StreamGptqFile(file, file_name, configs, sink, layers);
  });
}

// ---------------------------------------------------------------------------
// Section 10: PackGptq (docs/gptq.md section 8). Written from section 8's
// OR-in formulas; it shares no unpacking code with the reader above.

bool PackGptq(const std::string& format, int bits, std::int64_t in_features,
              std::int64_t out_features, std::int64_t groups,
              const std::vector<std::int32_t>& codes, const std::vector<std::int32_t>& zeros,
              std::vector<std::int32_t>* qweight, std::vector<std::int32_t>* qzeros,
              std::string* error) {
  const std::int64_t K = in_features;
  const std::int64_t N = out_features;
  const std::int64_t G = groups;
  const int b = bits;
  // 1. b allowed for the format (C8).
  if (format != "gptq" && format != "gptq_v2" && format != "gptq_p") {
    *error = "the format \"" + format + "\" is not gptq, gptq_v2 or gptq_p";
    return false;
  }
  const bool allowed = format == "gptq_p" ? (b >= 2 && b <= 8)
                                          : (b == 2 || b == 3 || b == 4 || b == 8);
  if (!allowed) {
    *error = "bits " + std::to_string(b) + " is not allowed for format " + format;
    return false;
  }
  // 2. K and N multiples of 32 (and the arrays as large as they say).
  if (K < 0 || N < 0 || K % 32 != 0 || N % 32 != 0) {
    *error = "in_features " + std::to_string(K) + " and out_features " + std::to_string(N) +
             " must be non-negative multiples of 32";
    return false;
  }
  if (G < 0 || (N != 0 && K > std::numeric_limits<std::int64_t>::max() / N) ||
      (N != 0 && G > std::numeric_limits<std::int64_t>::max() / N) ||
      static_cast<std::uint64_t>(K * N) != codes.size() ||
      static_cast<std::uint64_t>(G * N) != zeros.size()) {
    *error = "codes must hold in_features * out_features values and zeros groups * out_features";
    return false;
  }
  // 3. every code in 0..mask(b), first offending (k, n) in row-major order.
  const std::int64_t max_code = (static_cast<std::int64_t>(1) << b) - 1;
  for (std::int64_t k = 0; k < K; ++k) {
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t v = codes[static_cast<std::size_t>(k * N + n)];
      if (v < 0 || v > max_code) {
        *error = "code (" + std::to_string(k) + ", " + std::to_string(n) + ") is " +
                 std::to_string(v) + ", outside 0.." + std::to_string(max_code);
        return false;
      }
    }
  }
  // 4. every zero in 1..2^b (gptq) or 0..mask(b), first offending (g, n).
  const bool v1 = format == "gptq";
  const std::int64_t low = v1 ? 1 : 0;
  const std::int64_t high = v1 ? max_code + 1 : max_code;
  for (std::int64_t g = 0; g < G; ++g) {
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t v = zeros[static_cast<std::size_t>(g * N + n)];
      if (v < low || v > high) {
        *error = "zero point (" + std::to_string(g) + ", " + std::to_string(n) + ") is " +
                 std::to_string(v) + ", outside " + std::to_string(low) + ".." +
                 std::to_string(high) + (v1 && v == 0 ? " (a v1 zero 0 underflows)" : "");
        return false;
      }
    }
  }

  // The words start at 0; fields are ORed in. `put` ORs value v as field i
  // of the stream whose word j is words[first + j * stride].
  const bool planar = format == "gptq_p";
  std::vector<int> planes;  // widths p_j, low first
  if (planar) {
    if (b == 2) planes = {2};
    if (b == 3) planes = {2, 1};
    if (b == 4) planes = {4};
    if (b == 5) planes = {4, 1};
    if (b == 6) planes = {4, 2};
    if (b == 7) planes = {4, 2, 1};
    if (b == 8) planes = {8};
  }
  auto put = [&](std::vector<std::uint32_t>& words, std::int64_t first, std::int64_t stride,
                 std::int64_t i, std::uint32_t v) {
    auto word = [&](std::int64_t j) -> std::uint32_t& {
      return words[static_cast<std::size_t>(first + j * stride)];
    };
    if (!planar) {
      const std::int64_t s = i * b;
      const std::int64_t w = s / 32;
      const int o = static_cast<int>(s % 32);
      word(w) |= static_cast<std::uint32_t>((static_cast<std::uint64_t>(v) << o) & 0xFFFFFFFFu);
      if (o + b > 32) word(w + 1) |= v >> (32 - o);
      return;
    }
    const std::int64_t t = i % 32;
    int offset = 0;  // W_j
    for (const int p : planes) {
      const std::int64_t per_word = 32 / p;
      const std::uint32_t part = (v >> offset) & ((1u << p) - 1u);
      word((i / 32) * b + offset + t / per_word) |= part << ((t % per_word) * p);
      offset += p;
    }
  };

  const std::int64_t weight_rows = K / 32 * b;  // K * b / 32
  const std::int64_t zero_cols = N / 32 * b;    // N * b / 32
  std::vector<std::uint32_t> weight_words(static_cast<std::size_t>(weight_rows * N), 0u);
  std::vector<std::uint32_t> zero_words(static_cast<std::size_t>(G * zero_cols), 0u);
  for (std::int64_t k = 0; k < K; ++k) {
    for (std::int64_t n = 0; n < N; ++n) {
      // Column n is a stream down the rows: word j at (j, n).
      put(weight_words, n, N, k, static_cast<std::uint32_t>(codes[static_cast<std::size_t>(k * N + n)]));
    }
  }
  for (std::int64_t g = 0; g < G; ++g) {
    for (std::int64_t n = 0; n < N; ++n) {
      // Row g is a stream along the row; the stored field is zero - 1 (v1).
      const std::int32_t zero = zeros[static_cast<std::size_t>(g * N + n)];
      put(zero_words, g * zero_cols, 1, n, static_cast<std::uint32_t>(v1 ? zero - 1 : zero));
    }
  }
  qweight->assign(weight_words.size(), 0);
  for (std::size_t i = 0; i < weight_words.size(); ++i) {
    (*qweight)[i] = static_cast<std::int32_t>(weight_words[i]);
  }
  qzeros->assign(zero_words.size(), 0);
  for (std::size_t i = 0; i < zero_words.size(); ++i) {
    (*qzeros)[i] = static_cast<std::int32_t>(zero_words[i]);
  }
  return true;
}

bool IsGptqFile(const ClaimInput& input) {
  const MergedTable* table = input.Get();
  return table != nullptr && HasGptqLayer(*table);
}

bool HasGptqLayer(const MergedTable& table) { return !FindLayers(table.tensors).empty(); }

std::vector<QuantLayer> FindQuantLayers(const TableTensors& tensors) {
  return FindLayers(tensors);
}

}  // namespace qd::oracle
