// bnb.cc: the oracle's bitsandbytes reader, decoder and reference 4-bit
// quantizer, written from docs/bnb.md, specs/000_0c91ab05e721f99e.txt and
// the peer vectors' README.md and TABLES.json.
//
// Sections (5 to 8 are in oracles/bnb_checks.cc; the types and helpers the
// two units share are declared in oracles/bnb_internal.h):
//   1. binary32 helpers and the tables (TABLES.json, as bit patterns)
//   2. rounding to the restored dtype (float16, bfloat16: RNE)
//   3. findings (bnb_internal.h)
//   4. finding the layers (docs/bnb.md "Layers", docs/pt.md 7.2)
//   5. the quant_state JSON (BNB-101)
//   6. the 4-bit layer checks, steps 1..14; 6a the list layout's state
//      (docs/pt.md 7.3, 7.4 step 2) mapped onto the same QuantState
//   7. the 8-bit blockwise layer checks, steps 1..9
//   8. the int8 row-scaled layer checks, steps 1..3
//   9. decoding (docs/bnb.md "Decoding")
//  10. the tables (safetensors container, .pt tensor and value tables) and
//      the readers: StreamBnbTable, ReadBnbTable, StreamBnbFile, ReadBnbFile
//  11. the reference quantizer (default backend quantize_4bit)
//
// Every check runs over BnbTable / BnbTensor (bnb.h), never over a
// container directly, so a .pt file's table (docs/pt.md 6.4) meets exactly
// the checks a safetensors file meets.
#include "oracles/bnb.h"
#include "oracles/bnb_internal.h"
#include "oracles/bytes.h"
#include "oracles/finding.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "oracles/json.h"
#include "oracles/merged_table.h"
#include "quantdiff/tensor_sink.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace bnb_internal {

// byte_offset of header-level findings in a safetensors file (a .pt file
// uses ds of data.pkl instead, docs/pt.md 6.4: BnbTable::header_offset).
constexpr std::int64_t kSafetensorsHeaderOffset = 8;

// ---------------------------------------------------------------------------
// Section 1: binary32 helpers and the tables.

bool IsFinite(float value) { return (BitsOfFloat(value) & 0x7F800000u) != 0x7F800000u; }

float LoadF32(const std::uint8_t* p) { return FloatFromBits(LoadU32(p)); }

// get_4bit_type("nf4"), TABLES.json nf4.values[code].hex.
constexpr std::uint32_t kNf4Bits[16] = {
    0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f, 0xbdba7871, 0x00000000,
    0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a, 0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000};

// get_4bit_type("fp4"), TABLES.json fp4.values[code].hex: [0, 0.0625, 8, 12,
// 4, 6, 2, 3, -0, -0.0625, -8, -12, -4, -6, -2, -3] / 12, where the Python
// literal -0 is the integer 0, so code 8 is +0.0 (docs/bnb.md "FP4 code 8").
constexpr std::uint32_t kFp4Bits[16] = {
    0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000, 0x3eaaaaab, 0x3f000000, 0x3e2aaaab, 0x3e800000,
    0x00000000, 0xbbaaaaab, 0xbf2aaaab, 0xbf800000, 0xbeaaaaab, 0xbf000000, 0xbe2aaaab, 0xbe800000};

// TABLES.json constants.partial_block_absmax_floor: float32(1e-38).
constexpr std::uint32_t kAbsmaxFloorBits = 0x006ce3ee;

// TABLES.json constants.int8_dequant_scale: the binary32 nearest 1/127.
constexpr std::uint32_t kInt8ScaleBits = 0x3c010204;

// The table of quant_type, or nullptr.
const std::uint32_t* TableBits(std::string_view quant_type) {
  if (quant_type == "nf4") return kNf4Bits;
  if (quant_type == "fp4") return kFp4Bits;
  return nullptr;
}

bool IsPowerOfTwoInRange(std::uint64_t value, std::uint64_t low, std::uint64_t high) {
  return value >= low && value <= high && (value & (value - 1)) == 0;
}

// ceil(a / b) for b > 0, without overflow.
std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// ---------------------------------------------------------------------------
// Section 2: the restored dtype. bnb's dequant returns the product rounded
// to dtype (round to nearest, ties to even); the oracle widens it back.


bool ParseRestoredDtype(std::string_view text, RestoredDtype* dtype) {
  if (text == "float16") {
    *dtype = RestoredDtype::kFloat16;
  } else if (text == "bfloat16") {
    *dtype = RestoredDtype::kBFloat16;
  } else if (text == "float32") {
    *dtype = RestoredDtype::kFloat32;
  } else {
    return false;
  }
  return true;
}

// binary32 -> binary16 bits, round to nearest even, overflow to infinity.
std::uint16_t FloatToHalfBits(float value) {
  const std::uint32_t bits = BitsOfFloat(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {
    // NaN: stays a quiet NaN, the top payload bits kept.
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude & 0x7FFFFFu) >> 13));
  }
  // 65520 = 0x477FF000 lies half way between 65504 (the largest binary16,
  // odd mantissa) and 65536: ties to even round it, and all above, to inf.
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {
    // Normal binary16 (>= 2^-14): rebias 127 -> 15, keep 10 of 23 bits.
    const std::uint32_t exponent = (magnitude >> 23) - 127 + 15;
    const std::uint32_t mantissa = magnitude & 0x7FFFFFu;
    std::uint32_t half = (exponent << 10) | (mantissa >> 13);
    const std::uint32_t rest = mantissa & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) half += 1;  // may carry
    return static_cast<std::uint16_t>(sign | half);
  }
  // Below 2^-14: a multiple of 2^-24. 2^-25 (0x33000000) and below round to
  // zero (the tie at 2^-25 goes to the even 0).
  if (magnitude <= 0x33000000u) return static_cast<std::uint16_t>(sign);
  // value = m * 2^(e - 150) with the hidden bit; in units of 2^-24 that is
  // m * 2^(e - 126), i.e. m >> (126 - e), with 14 <= 126 - e <= 24.
  const std::uint32_t e = magnitude >> 23;
  const std::uint32_t m = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - e;
  std::uint32_t half = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1);
  const std::uint32_t tie = 1u << (shift - 1);
  if (rest > tie || (rest == tie && (half & 1u) != 0)) half += 1;
  return static_cast<std::uint16_t>(sign | half);
}

// binary32 -> bfloat16 -> binary32, round to nearest even; NaN stays NaN.
float RoundToBFloat16(float value) {
  std::uint32_t bits = BitsOfFloat(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return FloatFromBits((bits | 0x00400000u) & 0xFFFF0000u);
  const std::uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7FFFu + lsb;  // infinity stays infinity; the largest values round to it
  return FloatFromBits(bits & 0xFFFF0000u);
}

float RoundToDtype(float value, RestoredDtype dtype) {
  switch (dtype) {
    case RestoredDtype::kFloat16:
      return HalfToFloat(FloatToHalfBits(value));
    case RestoredDtype::kBFloat16:
      return RoundToBFloat16(value);
    case RestoredDtype::kFloat32:
      break;
  }
  return value;
}

// ---------------------------------------------------------------------------
// Section 3: findings (the Reporter): oracles/bnb_internal.h.


// ---------------------------------------------------------------------------
// Section 4: the layers.


constexpr std::string_view kHfMarker = ".quant_state.bitsandbytes__";
constexpr std::string_view kListSuffix = ".quant_state";

// name is `suffix` itself or ends with "." + suffix; *prefix is the part
// before suffix (empty, or ending in the dot).
bool MatchesSuffix(const std::string& name, std::string_view suffix, std::string* prefix) {
  if (name.size() < suffix.size()) return false;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  const std::size_t cut = name.size() - suffix.size();
  if (cut != 0 && name[cut - 1] != '.') return false;
  *prefix = name.substr(0, cut);
  return true;
}

// The names that make their prefix + "weight" a layer (docs/bnb.md
// "Layers"), besides the HF marker.
struct StateSuffix {
  std::string_view suffix;
  StateForm form;
};
constexpr StateSuffix kStateSuffixes[] = {
    {"weight_quant_state", StateForm::kGptq4},
    {"SCB", StateForm::kInt8Hf},
    {"weight_scb", StateForm::kInt8Gptq},
};

// NAME claims a layer by itself: it carries the HF marker or ends in a
// state suffix.
bool NamesAState(const std::string& name) {
  std::string prefix;
  if (name.find(kHfMarker) != std::string::npos) return true;
  for (const StateSuffix& s : kStateSuffixes) {
    if (MatchesSuffix(name, s.suffix, &prefix)) return true;
  }
  return false;
}

// The list counts as a 4-bit state (docs/pt.md 7.2).
bool IsFourBitForm(StateForm form) {
  return form == StateForm::kHf4 || form == StateForm::kGptq4 || form == StateForm::kList;
}

// Fills the sibling names of a 4-bit or int8 layer from its first claim.
void NameSiblings(Layer* layer) {
  const StateClaim& claim = layer->claims.front();
  switch (claim.form) {
    case StateForm::kHf4:
      layer->absmax = layer->w + ".absmax";
      layer->quant_map = layer->w + ".quant_map";
      layer->nested_absmax = layer->w + ".nested_absmax";
      layer->nested_quant_map = layer->w + ".nested_quant_map";
      break;
    case StateForm::kGptq4:
      layer->absmax = claim.prefix + "weight_absmax";
      layer->quant_map = claim.prefix + "weight_quant_map";
      layer->nested_absmax = claim.prefix + "weight_nested_absmax";
      layer->nested_quant_map = claim.prefix + "weight_nested_quant_map";
      break;
    case StateForm::kInt8Hf:
      layer->scale = claim.tensor;
      layer->weight_format = claim.prefix + "weight_format";
      break;
    case StateForm::kInt8Gptq:
      layer->scale = claim.tensor;
      break;
    case StateForm::kList:
      // docs/pt.md 7.3: the pieces are the list's items; table tensors named
      // W.absmax, W.nested_absmax etc. are not consulted.
      break;
  }
}


TensorIndex IndexOf(const BnbTable& table) {
  TensorIndex index;
  index.reserve(table.tensors.size());
  for (const BnbTensor& tensor : table.tensors) index.push_back(&tensor);
  // Stable: of two tensors of one name, the later in the table answers.
  std::stable_sort(index.begin(), index.end(),
                   [](const BnbTensor* a, const BnbTensor* b) { return a->name < b->name; });
  return index;
}

const BnbTensor* Find(const TensorIndex& index, const std::string& name) {
  const auto after = std::upper_bound(index.begin(), index.end(), name,
                                      [](const std::string& n, const BnbTensor* t) { return n < t->name; });
  if (after == index.begin() || (*(after - 1))->name != name) return nullptr;
  return *(after - 1);
}

const std::string* FindMetadata(const BnbTable& table, std::string_view key) {
  for (const auto& [name, value] : table.metadata) {
    if (name == key) return &value;
  }
  return nullptr;
}

// docs/bnb.md "Layers": 4-bit layers (HF, GPT-QModel, and docs/pt.md 7.2's
// list states), int8 row-scaled layers (HF, GPT-QModel), then 8-bit
// blockwise layers; sorted by W.
std::vector<Layer> FindLayers(const BnbTable& table, const TensorIndex& index) {
  std::map<std::string, std::vector<StateClaim>> claims_by_w;
  for (const BnbTensor& tensor : table.tensors) {
    const std::string& name = tensor.name;
    std::string prefix;
    const std::size_t marker = name.find(kHfMarker);
    if (marker != std::string::npos) {
      StateClaim claim;
      claim.tensor = name;
      claim.form = StateForm::kHf4;
      claim.prefix = name.substr(0, marker);
      claim.suffix = name.substr(marker + kHfMarker.size());
      claims_by_w[claim.prefix].push_back(claim);
    }
    for (const StateSuffix& s : kStateSuffixes) {
      if (MatchesSuffix(name, s.suffix, &prefix)) {
        claims_by_w[prefix + "weight"].push_back({name, s.form, prefix, "", 0});
      }
    }
  }
  // docs/pt.md 7.2: the list is one more state of W beside the tensors.
  for (const BnbListState& list : table.lists) {
    StateClaim claim;
    claim.tensor = list.w + std::string(kListSuffix);
    claim.form = StateForm::kList;
    claim.prefix = list.w;
    claim.node = list.node;
    claims_by_w[list.w].push_back(claim);
  }

  std::vector<Layer> layers;
  for (auto& [w, claims] : claims_by_w) {
    Layer layer;
    layer.w = w;
    // A 4-bit claim makes a 4-bit layer; the first 4-bit claim names the
    // siblings (any second claim is refused as BNB-105 before they matter).
    std::stable_partition(claims.begin(), claims.end(),
                          [](const StateClaim& c) { return IsFourBitForm(c.form); });
    layer.kind = IsFourBitForm(claims.front().form) ? LayerKind::kFourBit : LayerKind::kInt8;
    layer.claims = claims;
    NameSiblings(&layer);
    layers.push_back(layer);
  }

  if (FindMetadata(table, kBlockwise8Key) != nullptr) {
    for (const BnbTensor& tensor : table.tensors) {
      const std::string& w = tensor.name;
      if (claims_by_w.count(w) != 0) continue;  // a 4-bit or int8 layer's W
      if (Find(index, w + ".absmax") == nullptr || Find(index, w + ".quant_map") == nullptr)
        continue;
      Layer layer;
      layer.kind = LayerKind::kBlockwise8;
      layer.w = w;
      layer.absmax = w + ".absmax";
      layer.quant_map = w + ".quant_map";
      layer.nested_absmax = w + ".nested_absmax";
      layer.nested_quant_map = w + ".nested_quant_map";
      layers.push_back(layer);
    }
  }
  std::sort(layers.begin(), layers.end(), [](const Layer& a, const Layer& b) { return a.w < b.w; });
  return layers;
}

// The names of the table tensors a layer consists of (existing or not). A
// list layer's only table tensor is W (docs/pt.md 7.3).
void AddMembers(const Layer& layer, std::set<std::string>* members) {
  members->insert(layer.w);
  for (const StateClaim& claim : layer.claims) {
    if (claim.form != StateForm::kList) members->insert(claim.tensor);
  }
  for (const std::string* name : {&layer.absmax, &layer.quant_map, &layer.nested_absmax,
                                  &layer.nested_quant_map, &layer.scale, &layer.weight_format}) {
    if (!name->empty()) members->insert(*name);
  }
}
// ---------------------------------------------------------------------------
// Sections 5 to 8: the quant_state JSON and the layer checks: bnb_checks.cc.

}  // namespace bnb_internal

namespace {

// Sections 1 to 4 above and the layer checks of bnb_checks.cc are in
// bnb_internal; the decoding and the readers below use them as they did when
// this was one unit.
using namespace bnb_internal;

// ---------------------------------------------------------------------------
// Section 9: decoding.

// absmax_eff[b]: the stored F32 absmax, or (nested)
// fl(fl(nested_quant_map[code] * nested_absmax[b / nested_blocksize]) + fl32(nested_offset)),
// two binary32 roundings, never fused. Worked out per block as the values
// need it, so a layer's decode holds no table of them.
class EffectiveAbsmax {
 public:
  EffectiveAbsmax(const Context& ctx, const LayerPlan& plan)
      : absmax_(ctx.Data(*plan.absmax)),
        nested_(plan.nested),
        nested_blocksize_(plan.state.nested_blocksize) {
    if (!nested_) return;
    nested_absmax_ = ctx.Data(*plan.nested_absmax);
    nested_quant_map_ = ctx.Data(*plan.nested_quant_map);
    offset_ = static_cast<float>(plan.state.nested_offset);  // binary64 -> binary32, RNE
  }
  float operator()(std::uint64_t b) const {
    if (!nested_) return LoadF32(absmax_ + 4 * b);
    const std::uint8_t code = absmax_[b];
    const float q = LoadF32(nested_quant_map_ + 4 * static_cast<std::uint64_t>(code));
    const float scale = LoadF32(nested_absmax_ + 4 * (b / nested_blocksize_));
    const float product = q * scale;  // rounded to binary32
    return product + offset_;         // rounded to binary32
  }

 private:
  const std::uint8_t* absmax_;
  bool nested_;
  std::uint64_t nested_blocksize_;
  const std::uint8_t* nested_absmax_ = nullptr;
  const std::uint8_t* nested_quant_map_ = nullptr;
  float offset_ = 0.0f;
};

// bnb's compatibility transpose: a packed weight with first dimension 1 and
// a rank-2 shape come back as out.t().
bool IsTransposed(const LayerPlan& plan) {
  return !plan.w->shape.empty() && plan.w->shape[0] == 1 && plan.state.shape.size() == 2;
}

// The decoded shape of an accepted layer's W.
std::vector<std::uint64_t> DecodedShape(const LayerPlan& plan) {
  if (plan.layer->kind != LayerKind::kFourBit) return plan.w->shape;
  const std::vector<std::uint64_t>& shape = plan.state.shape;
  return IsTransposed(plan) ? std::vector<std::uint64_t>{shape[1], shape[0]} : shape;
}

bool StreamFourBit(const Context& ctx, const LayerPlan& plan, std::size_t index,
                   qd::TensorSink& sink) {
  const std::uint8_t* packed = ctx.Data(*plan.w);  // raw bytes, whatever the storage dtype
  const std::uint32_t* table = TableBits(plan.state.quant_type);
  const EffectiveAbsmax absmax(ctx, plan);
  // Element i of bnb's flat output, before any transpose.
  const auto element = [&](std::uint64_t i) {
    const std::uint8_t byte = packed[i / 2];
    // BNB-002: element 2j is the high nibble of byte j, 2j + 1 the low one.
    const int code = (i % 2 == 0) ? (byte >> 4) : (byte & 0x0F);
    const float v = FloatFromBits(table[code]);  // BNB-003: the table, not quant_map
    const float product = v * absmax(i / plan.state.blocksize);
    return RoundToDtype(product, plan.dtype);
  };
  // Every element decodes on its own, so even the transposed layout streams
  // without the whole tensor: value (c, r) of out.t() [cols, rows] is
  // element r * cols + c of the flat output.
  const bool transposed = IsTransposed(plan);
  const std::uint64_t rows = transposed ? plan.state.shape[0] : 0;
  const std::uint64_t cols = transposed ? plan.state.shape[1] : 0;
  return StreamRows(sink, index, plan.n, 1, [&](std::uint64_t first, std::uint64_t count, float* out) {
    for (std::uint64_t o = first; o < first + count; ++o) {
      out[o - first] = element(transposed ? (o % rows) * cols + o / rows : o);
    }
  });
}

bool StreamBlockwise8(const Context& ctx, const LayerPlan& plan, std::size_t index,
                      qd::TensorSink& sink) {
  const std::uint8_t* codes = ctx.Data(*plan.w);
  const std::uint8_t* quant_map = ctx.Data(*plan.quant_map);
  const EffectiveAbsmax absmax(ctx, plan);
  return StreamRows(sink, index, plan.n, 1, [&](std::uint64_t first, std::uint64_t count, float* out) {
    for (std::uint64_t i = first; i < first + count; ++i) {
      const float v = LoadF32(quant_map + 4 * static_cast<std::uint64_t>(codes[i]));
      const float product = v * absmax(i / plan.state.blocksize);
      out[i - first] = RoundToDtype(product, plan.dtype);
    }
  });
}

bool StreamInt8(const Context& ctx, const LayerPlan& plan, std::size_t index, qd::TensorSink& sink) {
  const BnbTensor& w = *plan.w;
  const std::uint8_t* q = ctx.Data(w);
  const std::uint8_t* scb = ctx.Data(*plan.scale);
  const float inverse = FloatFromBits(kInt8ScaleBits);
  const std::uint64_t cols = w.shape[1];
  return StreamRows(sink, index, w.shape[0], cols, [&](std::uint64_t first, std::uint64_t count, float* out) {
    for (std::uint64_t r = first; r < first + count; ++r) {
      const float scale = LoadF32(scb + 4 * r);
      for (std::uint64_t c = 0; c < cols; ++c) {
        const float value = static_cast<float>(static_cast<std::int8_t>(q[r * cols + c]));
        const float scaled = value * scale;                  // rounded to binary32
        out[(r - first) * cols + c] = scaled * inverse;      // rounded to binary32
      }
    }
  });
}

bool StreamLayer(const Context& ctx, const LayerPlan& plan, std::size_t index, qd::TensorSink& sink) {
  switch (plan.layer->kind) {
    case LayerKind::kFourBit:
      return StreamFourBit(ctx, plan, index, sink);
    case LayerKind::kBlockwise8:
      return StreamBlockwise8(ctx, plan, index, sink);
    case LayerKind::kInt8:
      return StreamInt8(ctx, plan, index, sink);
  }
  return false;
}

// One tensor of the decoded output: an accepted layer's W, or a floating
// table tensor of no layer (to binary32, F64 rounded to even).
struct Output {
  std::string name;
  std::vector<std::uint64_t> shape;
  const LayerPlan* layer = nullptr;
  const BnbTensor* loose = nullptr;
};

}  // namespace

// ---------------------------------------------------------------------------
// Section 10: the tables and the readers.

BnbTable BnbTableFromMerged(MergedTable merged) {
  BnbTable table;
  table.header_offset = kSafetensorsHeaderOffset;
  table.has_metadata = merged.has_metadata;
  table.metadata = std::move(merged.metadata);
  table.tensors.reserve(merged.tensors.size());  // sized once: no reallocation peak
  for (TableTensor& source : merged.tensors) {
    BnbTensor tensor;
    tensor.name = std::move(source.name);
    tensor.dtype = std::move(source.dtype);
    tensor.shape = std::move(source.shape);
    tensor.element_count = source.element_count;
    tensor.byte_length = source.end - source.begin;
    tensor.shard = source.shard;
    tensor.begin = source.begin;
    tensor.end = source.end;
    // In place: byte k of the data is at 8 + N + begin + k of its shard.
    const std::uint64_t at = source.data_start + source.begin;
    const std::uint8_t* data = source.data;
    tensor.bytes = [data]() { return data; };
    tensor.byte_offset = [at](std::uint64_t k) { return static_cast<std::int64_t>(at + k); };
    table.tensors.push_back(std::move(tensor));
  }
  return table;
}

BnbTable BnbTableFromContainer(qd::ByteView file, Container container) {
  return BnbTableFromMerged(TableOfFile(file, std::move(container)));
}

bool StreamBnbTable(const BnbTable& table, const std::string& file_name, qd::Outcome* outcome,
                    qd::TensorSink& sink) {
  const TensorIndex index = IndexOf(table);
  const std::vector<Layer> layers = FindLayers(table, index);
  if (layers.empty()) return false;

  Context ctx;
  ctx.table = &table;
  ctx.index = &index;
  ctx.header = table.header_offset;
  Reporter report(outcome, file_name);
  std::vector<LayerPlan> plans(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = layers[i];
    plans[i].layer = &layer;
    bool accepted = false;
    switch (layer.kind) {
      case LayerKind::kFourBit:
        accepted = CheckFourBitLayer(ctx, layer, report, &plans[i]);
        break;
      case LayerKind::kBlockwise8:
        accepted = CheckBlockwise8Layer(ctx, layer, report, &plans[i]);
        break;
      case LayerKind::kInt8:
        accepted = CheckInt8Layer(ctx, layer, report, &plans[i]);
        break;
    }
    if (!accepted) return true;
  }

  // The output sorted by name bytes: planned in that order, then decoded in
  // that order.
  std::set<std::string> members;
  for (const Layer& layer : layers) AddMembers(layer, &members);
  std::vector<Output> output;
  for (const LayerPlan& plan : plans) output.push_back({plan.layer->w, DecodedShape(plan), &plan, nullptr});
  for (const BnbTensor& tensor : table.tensors) {
    if (members.count(tensor.name) != 0 || !IsFloatDtype(tensor.dtype)) continue;
    output.push_back({tensor.name, tensor.shape, nullptr, &tensor});
  }
  std::sort(output.begin(), output.end(),
            [](const Output& a, const Output& b) { return a.name < b.name; });
  std::vector<qd::TensorInfo> plan;
  for (const Output& tensor : output) plan.push_back({tensor.name, tensor.shape});
  if (!sink.Plan(plan)) return true;
  for (std::size_t i = 0; i < output.size(); ++i) {
    const Output& tensor = output[i];
    const bool more = tensor.layer != nullptr
                          ? StreamLayer(ctx, *tensor.layer, i, sink)
                          : StreamFloatElements(tensor.loose->dtype, tensor.loose->bytes(),
                                                tensor.loose->element_count, i, sink);
    if (!more) break;
  }
  return true;
}

bool ReadBnbTable(const BnbTable& table, const std::string& file_name, qd::Outcome* outcome) {
  qd::CollectingSink sink(&outcome->tensors);
  return StreamBnbTable(table, file_name, outcome, sink);
}

qd::Outcome StreamBnbFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;
  const BnbTable table = BnbTableFromContainer(file, container);
  if (StreamBnbTable(table, file_name, &outcome, sink)) return outcome;
  StreamFloatTensors(file, container, sink);  // not a bitsandbytes file: what ReadSafetensors decodes
  return outcome;
}

qd::Outcome ReadBnbFile(qd::ByteView file, const std::string& file_name) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamBnbFile(file, file_name, sink); });
}

// ---------------------------------------------------------------------------
// Section 11: the 4-bit tables and the reference quantizer.

bool Bnb4bitTable(const std::string& quant_type, float table[16]) {
  const std::uint32_t* bits = TableBits(quant_type);
  if (bits == nullptr) return false;
  for (int code = 0; code < 16; ++code) table[code] = FloatFromBits(bits[code]);
  return true;
}

bool Bnb4bitBounds(const std::string& quant_type, float bounds[15], int sorted_codes[16]) {
  float table[16];
  if (!Bnb4bitTable(quant_type, table)) return false;
  int order[16];
  for (int code = 0; code < 16; ++code) order[code] = code;
  // A stable argsort: FP4's two +0.0 entries keep code order (0, then 8).
  std::stable_sort(order, order + 16, [&](int a, int b) { return table[a] < table[b]; });
  for (int i = 0; i < 16; ++i) sorted_codes[i] = order[i];
  for (int i = 0; i < 15; ++i) {
    const float sum = table[order[i]] + table[order[i + 1]];  // rounded to binary32
    bounds[i] = sum / 2.0f;
  }
  return true;
}

bool QuantizeBnb4bit(const std::string& quant_type, int blocksize, const std::string& dtype,
                     const float* input, std::uint64_t n, std::vector<std::uint8_t>* packed,
                     std::vector<float>* absmax, qd::Finding* error) {
  const auto refuse = [&](const char* rule, const char* field, std::int64_t element,
                          const std::string& message) {
    *error = qd::Finding();
    error->rule = rule;
    error->field = field;
    error->element = element;
    error->message = message;
    return false;
  };
  float bounds[15];
  int sorted_codes[16];
  if (!Bnb4bitBounds(quant_type, bounds, sorted_codes)) {
    return refuse("BNB-001", "quant_type", -1,
                  "quant_type \"" + quant_type + "\" is not nf4 or fp4");
  }
  if (blocksize < 32 || !IsPowerOfTwoInRange(static_cast<std::uint64_t>(blocksize), 32, 4096)) {
    return refuse(
        "BNB-001", "blocksize", -1,
        "blocksize " + std::to_string(blocksize) + " is not a power of two from 32 to 4096");
  }
  RestoredDtype restored = RestoredDtype::kFloat32;
  if (!ParseRestoredDtype(dtype, &restored)) {
    return refuse("BNB-103", "dtype", -1,
                  "dtype \"" + dtype + "\" is not float16, bfloat16 or float32");
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    if (!IsFinite(input[i])) {
      return refuse("BNB-104", "input", static_cast<std::int64_t>(i),
                    "input value " + std::to_string(i) + " is not finite");
    }
  }

  // code = the code at sorted position (number of bounds strictly below s).
  const auto code_of = [&](float scaled) {
    int below = 0;
    for (int k = 0; k < 15; ++k) {
      if (bounds[k] < scaled) ++below;
    }
    return sorted_codes[below];
  };

  const std::uint64_t size = static_cast<std::uint64_t>(blocksize);
  const std::uint64_t nblocks = CeilDiv(n, size);
  const bool has_partial = n % size != 0;
  const float floor = FloatFromBits(kAbsmaxFloorBits);
  absmax->assign(nblocks, 0.0f);
  std::vector<int> codes(n);
  for (std::uint64_t b = 0; b < nblocks; ++b) {
    const std::uint64_t begin = b * size;
    const std::uint64_t end = std::min(n, begin + size);
    float block_max = 0.0f;
    for (std::uint64_t i = begin; i < end; ++i) {
      const float magnitude = FloatFromBits(BitsOfFloat(input[i]) & 0x7FFFFFFFu);
      if (magnitude > block_max) block_max = magnitude;
    }
    // Scaling uses max(absmax, 1e-38); only the partial last block stores it.
    const float clamped = block_max < floor ? floor : block_max;
    const bool partial = has_partial && b + 1 == nblocks;
    (*absmax)[b] = partial ? clamped : block_max;
    const float reciprocal = 1.0f / clamped;  // rounded to binary32
    for (std::uint64_t i = begin; i < end; ++i) {
      // Full blocks: fl(x * fl(1 / a)); the partial block: fl(x / a). The
      // peer vectors tell the two apart (see bnb_oracle_test.cc).
      float scaled = partial ? input[i] / clamped : input[i] * reciprocal;
      if (scaled < -1.0f) scaled = -1.0f;
      if (scaled > 1.0f) scaled = 1.0f;
      codes[i] = code_of(scaled);
    }
  }
  const int pad = code_of(0.0f);
  packed->assign(CeilDiv(n, 2), 0);
  for (std::uint64_t j = 0; j < packed->size(); ++j) {
    const int high = codes[2 * j];
    const int low = 2 * j + 1 < n ? codes[2 * j + 1] : pad;
    (*packed)[j] = static_cast<std::uint8_t>((high << 4) | low);
  }
  return true;
}

bool IsBnbFile(const ClaimInput& input) {
  const MergedTable* table = input.Get();
  if (table == nullptr) return false;
  // FindLayers finds a layer only where a name carries a state or the
  // metadata holds the blockwise-8 key; without either the answer is no,
  // and the bitsandbytes table (a copy of the shared one, about 330 bytes an
  // entry) is not built for it: the detection of every safetensors file
  // passes here (issue 9, section 3).
  const bool may_hold_layer =
      std::any_of(table->metadata.begin(), table->metadata.end(),
                  [](const auto& member) { return member.first == kBlockwise8Key; }) ||
      std::any_of(table->tensors.begin(), table->tensors.end(),
                  [](const TableTensor& t) { return NamesAState(t.name); });
  return may_hold_layer && HasBnbLayer(BnbTableFromMerged(*table));
}

bool HasBnbLayer(const BnbTable& table) { return !FindLayers(table, IndexOf(table)).empty(); }

}  // namespace qd::oracle
