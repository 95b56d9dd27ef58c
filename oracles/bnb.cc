// bnb.cc: the oracle's bitsandbytes reader, decoder and reference 4-bit
// quantizer, written from docs/bnb.md, specs/000_0c91ab05e721f99e.txt and
// the peer vectors' README.md and TABLES.json.
//
// Sections:
//   1. binary32 helpers and the tables (TABLES.json, as bit patterns)
//   2. rounding to the restored dtype (float16, bfloat16: RNE)
//   3. findings
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
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
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

enum class RestoredDtype : std::uint8_t { kFloat16, kBFloat16, kFloat32 };

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
// Section 3: findings.

class Reporter {
 public:
  Reporter(qd::Outcome* outcome, const std::string& file) : outcome_(outcome), file_(file) {}

  // Appends an error (the last finding), marks the outcome refused and
  // returns false, so that a check can end with `return report.Error(...)`.
  bool Error(const char* rule, const std::string& tensor, const char* field,
             std::int64_t byte_offset, const std::string& message, std::int64_t block = -1,
             std::int64_t element = -1) {
    Add(rule, qd::Severity::kError, tensor, field, byte_offset, message, block, element);
    outcome_->refused = true;
    return false;
  }

  void Warning(const char* rule, const std::string& tensor, const char* field,
               std::int64_t byte_offset, const std::string& message, std::int64_t block = -1,
               std::int64_t element = -1) {
    Add(rule, qd::Severity::kWarning, tensor, field, byte_offset, message, block, element);
  }

 private:
  void Add(const char* rule, qd::Severity severity, const std::string& tensor, const char* field,
           std::int64_t byte_offset, const std::string& message, std::int64_t block,
           std::int64_t element) {
    qd::Finding finding = NewFinding(rule, severity, file_, tensor, field, byte_offset, message);
    finding.block = block;
    finding.element = element;
    outcome_->findings.push_back(finding);
  }

  qd::Outcome* outcome_;
  const std::string& file_;
};

// ---------------------------------------------------------------------------
// Section 4: the layers.

// One state that makes a weight W a layer: a tensor of the table, or
// (docs/pt.md 7.2) a list value of a .pt file.
enum class StateForm : std::uint8_t {
  kHf4,       // W.quant_state.bitsandbytes__T
  kGptq4,     // M.weight_quant_state, W = M.weight
  kInt8Hf,    // M.SCB, W = M.weight
  kInt8Gptq,  // M.weight_scb, W = M.weight
  kList,      // the value W.quant_state, a list or tuple (docs/pt.md 7.2)
};

struct StateClaim {
  std::string tensor;  // the state tensor's name (kList: the value's name, W.quant_state)
  StateForm form = StateForm::kHf4;
  std::string prefix;  // HF 4-bit and kList: W; the other forms: M (with its dot, maybe empty)
  std::string suffix;  // HF 4-bit: T
  std::uint32_t node = 0;  // kList: the list in BnbTable::values
};

enum class LayerKind : std::uint8_t { kFourBit, kBlockwise8, kInt8 };

struct Layer {
  LayerKind kind = LayerKind::kFourBit;
  std::string w;
  std::vector<StateClaim> claims;  // 4-bit and int8; several make the layer ambiguous
  // Sibling names in the table, whether the tensors exist or not (empty for
  // a list layer, whose pieces are items of the list).
  std::string absmax;
  std::string quant_map;
  std::string nested_absmax;
  std::string nested_quant_map;
  std::string scale;          // int8: M.SCB or M.weight_scb
  std::string weight_format;  // int8 HF: M.weight_format; empty otherwise
};

constexpr std::string_view kHfMarker = ".quant_state.bitsandbytes__";
constexpr std::string_view kBlockwise8Key = "bnb_blockwise8_quant_state";
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

// The table's tensors by name.
using TensorIndex = std::map<std::string, const BnbTensor*>;

TensorIndex IndexOf(const BnbTable& table) {
  TensorIndex index;
  for (const BnbTensor& tensor : table.tensors) index[tensor.name] = &tensor;
  return index;
}

const BnbTensor* Find(const TensorIndex& index, const std::string& name) {
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
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
    if (MatchesSuffix(name, "weight_quant_state", &prefix)) {
      claims_by_w[prefix + "weight"].push_back({name, StateForm::kGptq4, prefix, "", 0});
    }
    if (MatchesSuffix(name, "SCB", &prefix)) {
      claims_by_w[prefix + "weight"].push_back({name, StateForm::kInt8Hf, prefix, "", 0});
    }
    if (MatchesSuffix(name, "weight_scb", &prefix)) {
      claims_by_w[prefix + "weight"].push_back({name, StateForm::kInt8Gptq, prefix, "", 0});
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
// Section 5: the quant_state JSON (BNB-101).

struct QuantState {
  std::string quant_type;
  std::uint64_t blocksize = 0;
  std::string dtype;
  bool has_shape = false;  // 8-bit blockwise: a non-null shape
  std::vector<std::uint64_t> shape;
  bool has_nested_key = false;  // any key that begins with "nested_"
  bool has_nested_blocksize = false;
  std::uint64_t nested_blocksize = 0;
  bool has_nested_dtype = false;
  std::string nested_dtype;
  bool has_nested_offset = false;
  double nested_offset = 0.0;
};

// Reads a JSON array of integers.
bool ReadIntegerArray(const JsonDocument& document, std::uint32_t node,
                      std::vector<std::uint64_t>* values) {
  if (document.nodes[node].kind != JsonKind::kArray) return false;
  values->clear();
  for (std::uint32_t item = document.nodes[node].first_child; item != kNoNode;
       item = document.nodes[item].next_sibling) {
    std::uint64_t value = 0;
    if (!JsonToUint64(document, item, &value)) return false;
    values->push_back(value);
  }
  return true;
}

// Parses a quant_state text. four_bit: quant_type and shape are required
// (the packed 4-bit state); otherwise (the 8-bit blockwise metadata)
// quant_type is ignored and shape may be absent or null. On failure
// *problem says why (BNB-101).
bool ParseQuantState(const std::uint8_t* bytes, std::size_t size, bool four_bit, QuantState* state,
                     std::string* problem) {
  // The members read below; any other keeps its key only (a nested_* key
  // still marks the state nested), so memory follows the keys, not the text.
  static const std::vector<std::string_view> kRead = {
      "quant_type", "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype",
      "nested_offset"};
  JsonDocument document;
  JsonError error;
  if (!ParseStrictJsonObject(bytes, size, &document, &error, &kRead)) {
    *problem = "the quant_state is not strict JSON with an object on top (byte " +
               std::to_string(error.position) + ": " + error.what + ")";
    return false;
  }
  std::string duplicate;
  if (FindDuplicateKey(document, &duplicate)) {
    *problem = "the quant_state key \"" + duplicate + "\" appears twice in one object";
    return false;
  }
  const auto member = [&](const char* key) { return document.FindMember(0, key); };
  const auto is_string = [&](std::uint32_t node) {
    return document.nodes[node].kind == JsonKind::kString;
  };

  if (four_bit) {
    const std::uint32_t quant_type = member("quant_type");
    if (quant_type == kNoNode || !is_string(quant_type)) {
      *problem = "quant_type is missing or not a string";
      return false;
    }
    state->quant_type = std::string(document.Text(quant_type));
  }
  const std::uint32_t blocksize = member("blocksize");
  if (blocksize == kNoNode || !JsonToUint64(document, blocksize, &state->blocksize)) {
    *problem = "blocksize is missing or not an integer";
    return false;
  }
  const std::uint32_t dtype = member("dtype");
  if (dtype == kNoNode || !is_string(dtype)) {
    *problem = "dtype is missing or not a string";
    return false;
  }
  state->dtype = std::string(document.Text(dtype));
  const std::uint32_t shape = member("shape");
  if (four_bit) {
    if (shape == kNoNode || !ReadIntegerArray(document, shape, &state->shape)) {
      *problem = "shape is missing or not an array of integers";
      return false;
    }
    state->has_shape = true;
  } else if (shape != kNoNode && document.nodes[shape].kind != JsonKind::kNull) {
    if (!ReadIntegerArray(document, shape, &state->shape)) {
      *problem = "shape is neither null nor an array of integers";
      return false;
    }
    state->has_shape = true;
  }

  const std::uint32_t nested_blocksize = member("nested_blocksize");
  if (nested_blocksize != kNoNode) {
    if (!JsonToUint64(document, nested_blocksize, &state->nested_blocksize)) {
      *problem = "nested_blocksize is not an integer";
      return false;
    }
    state->has_nested_blocksize = true;
  }
  const std::uint32_t nested_dtype = member("nested_dtype");
  if (nested_dtype != kNoNode) {
    if (!is_string(nested_dtype)) {
      *problem = "nested_dtype is not a string";
      return false;
    }
    state->nested_dtype = std::string(document.Text(nested_dtype));
    state->has_nested_dtype = true;
  }
  const std::uint32_t nested_offset = member("nested_offset");
  if (nested_offset != kNoNode) {
    if (!JsonToDouble(document, nested_offset, &state->nested_offset)) {
      *problem = "nested_offset is not a number";
      return false;
    }
    state->has_nested_offset = true;
  }
  for (std::uint32_t child = document.nodes[0].first_child; child != kNoNode;
       child = document.nodes[child].next_sibling) {
    if (document.Key(child).substr(0, 7) == "nested_") state->has_nested_key = true;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Shared by the checks: the table and its tensors.

struct Context {
  const BnbTable* table = nullptr;
  const TensorIndex* index = nullptr;
  // byte_offset of header-level findings: 8 (safetensors) or ds of data.pkl (.pt).
  std::int64_t header = 8;

  const BnbTensor* Tensor(const std::string& name) const { return Find(*index, name); }
  // The C-order bytes; called only once dtype and element count are checked.
  const std::uint8_t* Data(const BnbTensor& tensor) const { return tensor.bytes(); }
  // The finding offset of byte k of the tensor's bytes.
  std::int64_t Offset(const BnbTensor& tensor, std::uint64_t k) const {
    return tensor.byte_offset(k);
  }
};

// What the checks resolved and an accepted layer needs for decoding. The
// tensor pointers point into the table, or (list layout) into pieces.
struct LayerPlan {
  const Layer* layer = nullptr;
  QuantState state;
  RestoredDtype dtype = RestoredDtype::kFloat32;
  bool nested = false;
  std::uint64_t n = 0;
  const BnbTensor* w = nullptr;
  const BnbTensor* absmax = nullptr;
  const BnbTensor* quant_map = nullptr;  // optional for 4-bit layers
  const BnbTensor* nested_absmax = nullptr;
  const BnbTensor* nested_quant_map = nullptr;
  const BnbTensor* scale = nullptr;  // int8
  // The tensors inside a list state (docs/pt.md 7.3), owned here.
  std::vector<std::unique_ptr<BnbTensor>> pieces;
};

bool IsF32(const BnbTensor& tensor) { return tensor.dtype == "F32"; }

std::string ShapeText(const std::vector<std::uint64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// Product of the dimensions; false when it overflows 64 bits.
bool ElementCount(const std::vector<std::uint64_t>& shape, std::uint64_t* n) {
  *n = 1;
  for (const std::uint64_t dimension : shape) {
    if (dimension != 0 && *n > kU64Max / dimension) return false;
    *n *= dimension;
  }
  return true;
}

// BNB-004 (JSON part, 4-bit step 7 / 8-bit step 4): a nested layer has
// nested_offset, a nested_blocksize that is a power of two 32..4096,
// nested_dtype float32 and both nested tensors. state_tensor and
// state_offset locate the state (the JSON text, or the list of docs/pt.md
// 7.4, which always has the offset, the dtype and both tensors by step 7).
bool CheckNestedPieces(const Context& ctx, const Layer& layer, const LayerPlan& plan,
                       const std::string& state_tensor, std::int64_t state_offset,
                       Reporter& report) {
  const QuantState& state = plan.state;
  if (!state.has_nested_offset) {
    return report.Error("BNB-004", state_tensor, "nested_offset", state_offset,
                        "the nested layer's quant_state has no nested_offset");
  }
  if (!state.has_nested_blocksize) {
    return report.Error("BNB-004", state_tensor, "nested_blocksize", state_offset,
                        "the nested layer's quant_state has no nested_blocksize");
  }
  if (!IsPowerOfTwoInRange(state.nested_blocksize, 32, 4096)) {
    return report.Error("BNB-004", state_tensor, "nested_blocksize", state_offset,
                        "nested_blocksize " + std::to_string(state.nested_blocksize) +
                            " is not a power of two from 32 to 4096");
  }
  if (!state.has_nested_dtype) {
    return report.Error("BNB-004", state_tensor, "nested_dtype", state_offset,
                        "the nested layer's quant_state has no nested_dtype");
  }
  if (state.nested_dtype != "float32") {
    return report.Error("BNB-004", state_tensor, "nested_dtype", state_offset,
                        "nested_dtype \"" + state.nested_dtype + "\" is not float32");
  }
  if (plan.nested_absmax == nullptr) {
    return report.Error("BNB-004", layer.w, "nested_absmax", ctx.header,
                        "the nested layer has no tensor " + layer.nested_absmax);
  }
  if (plan.nested_quant_map == nullptr) {
    return report.Error("BNB-004", layer.w, "nested_quant_map", ctx.header,
                        "the nested layer has no tensor " + layer.nested_quant_map);
  }
  return true;
}

// BNB-004 (tensor part, 4-bit step 11 / 8-bit step 8).
bool CheckNestedTensors(const Context& ctx, const LayerPlan& plan, std::uint64_t nblocks,
                        Reporter& report) {
  const BnbTensor& nested_absmax = *plan.nested_absmax;
  const std::uint64_t want = CeilDiv(nblocks, plan.state.nested_blocksize);
  if (!IsF32(nested_absmax) || nested_absmax.element_count != want) {
    return report.Error("BNB-004", nested_absmax.name, "nested_absmax", ctx.header,
                        "nested_absmax is " + nested_absmax.dtype + " with " +
                            std::to_string(nested_absmax.element_count) + " elements, F32 with " +
                            std::to_string(want) + " is needed");
  }
  const BnbTensor& nested_quant_map = *plan.nested_quant_map;
  if (!IsF32(nested_quant_map) || nested_quant_map.element_count != 256) {
    return report.Error("BNB-004", nested_quant_map.name, "nested_quant_map", ctx.header,
                        "nested_quant_map is " + nested_quant_map.dtype + " with " +
                            std::to_string(nested_quant_map.element_count) +
                            " elements, F32 with 256 is needed");
  }
  return true;
}

// BNB-104 over the values of an F32 tensor; block_index chooses whether the
// index is reported as block or element.
bool CheckFinite(const Context& ctx, const BnbTensor& tensor, const char* field, bool block_index,
                 Reporter& report) {
  const std::uint8_t* data = ctx.Data(tensor);
  for (std::uint64_t k = 0; k < tensor.element_count; ++k) {
    if (IsFinite(LoadF32(data + 4 * k))) continue;
    const std::int64_t index = static_cast<std::int64_t>(k);
    return report.Error("BNB-104", tensor.name, field, ctx.Offset(tensor, 4 * k),
                        std::string(field) + " value " + std::to_string(k) + " is not finite",
                        block_index ? index : -1, block_index ? -1 : index);
  }
  return true;
}

// BNB-104 over the flat absmax (when not nested), nested_absmax and
// nested_quant_map, plus the 8-bit quant_map when one is given: the first
// non-finite value in storage order, i.e. the tensors visited by data
// offset (docs/bnb.md 4-bit step 13, blockwise step 9), ties by end, then
// name bytes (docs/pt.md 6.4: two views of one storage can start alike).
bool CheckStatisticsFinite(const Context& ctx, const LayerPlan& plan, Reporter& report,
                           const BnbTensor* blockwise_quant_map = nullptr) {
  struct Statistic {
    const BnbTensor* tensor;
    const char* field;
    bool by_block;  // the index names a block (absmax) or an element (maps)
  };
  std::vector<Statistic> stats;
  if (!plan.nested) {
    stats.push_back({plan.absmax, "absmax", true});
  } else {
    stats.push_back({plan.nested_absmax, "nested_absmax", true});
    stats.push_back({plan.nested_quant_map, "nested_quant_map", false});
  }
  if (blockwise_quant_map != nullptr) stats.push_back({blockwise_quant_map, "quant_map", false});
  std::sort(stats.begin(), stats.end(), [](const Statistic& a, const Statistic& b) {
    if (a.tensor->shard != b.tensor->shard) return a.tensor->shard < b.tensor->shard;
    if (a.tensor->begin != b.tensor->begin) return a.tensor->begin < b.tensor->begin;
    if (a.tensor->end != b.tensor->end) return a.tensor->end < b.tensor->end;
    return a.tensor->name < b.tensor->name;
  });
  for (const Statistic& s : stats) {
    if (!CheckFinite(ctx, *s.tensor, s.field, s.by_block, report)) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 6a: the list layout's state (docs/pt.md 7.3 and 7.4 step 2),
// mapped by the container's side (BnbTable::map_list) onto the QuantState
// the JSON text fills, so that the 4-bit steps 3..14 below run once for both.

// What the list says beyond QuantState, for 7.4 step 7.
struct ListExtras {
  bool short_state2 = false;      // the docstring's 6-item state2: it has no code
  bool nested_of_nested = false;  // nested2 True, or offset2 / state2b not None
};

// A piece of the list, owned by the plan from now on (null stays null).
const BnbTensor* KeepPiece(std::unique_ptr<BnbTensor> piece, LayerPlan* plan) {
  if (piece == nullptr) return nullptr;
  plan->pieces.push_back(std::move(piece));
  return plan->pieces.back().get();
}

// 7.4 step 2 (BNB-101 a, b, c, the first failure wins); fills plan->state,
// the pieces and *extras.
bool ParseListState(const Context& ctx, const StateClaim& claim, LayerPlan* plan,
                    ListExtras* extras, Reporter& report) {
  BnbListMapping mapped = ctx.table->map_list(claim.node, claim.tensor);
  plan->absmax = KeepPiece(std::move(mapped.absmax), plan);
  plan->quant_map = KeepPiece(std::move(mapped.quant_map), plan);
  KeepPiece(std::move(mapped.offset_tensor), plan);
  plan->nested_absmax = KeepPiece(std::move(mapped.nested_absmax), plan);
  plan->nested_quant_map = KeepPiece(std::move(mapped.nested_quant_map), plan);
  if (mapped.refused) {
    return report.Error("BNB-101", claim.tensor, mapped.field.c_str(), mapped.offset, mapped.message);
  }
  QuantState& state = plan->state;
  state.quant_type = mapped.quant_type;
  state.blocksize = mapped.blocksize;
  state.dtype = mapped.dtype;
  state.has_shape = true;
  state.shape = mapped.shape;
  plan->nested = mapped.nested;  // 7.3: nested exactly when S[4] is not None
  if (!mapped.nested) return true;
  state.nested_offset = *mapped.nested_offset;
  state.has_nested_offset = true;
  state.has_nested_key = true;
  extras->short_state2 = mapped.short_state2;
  if (mapped.nested_blocksize) {
    state.nested_blocksize = *mapped.nested_blocksize;
    state.has_nested_blocksize = true;
  }
  if (mapped.nested_dtype) {
    state.nested_dtype = *mapped.nested_dtype;
    state.has_nested_dtype = true;
  }
  extras->nested_of_nested = mapped.nested_of_nested;
  return true;
}

// ---------------------------------------------------------------------------
// Section 6: the 4-bit layer, docs/bnb.md "4-bit layer" steps 1..14 (and
// docs/pt.md 7.4 for a list state).

bool CheckFourBitLayer(const Context& ctx, const Layer& layer, Reporter& report, LayerPlan* plan) {
  // Step 1, BNB-105: one state, W (and, with a state tensor, absmax) present.
  if (layer.claims.size() > 1) {
    return report.Error("BNB-105", layer.w, "quant_state", ctx.header,
                        "two states name the weight " + layer.w + ": " + layer.claims[0].tensor +
                            " and " + layer.claims[1].tensor);
  }
  const StateClaim& claim = layer.claims.front();
  const bool list = claim.form == StateForm::kList;
  plan->w = ctx.Tensor(layer.w);
  if (plan->w == nullptr) {
    return report.Error("BNB-105", layer.w, "quant_state", ctx.header,
                        (list ? "the list state " : "the state tensor ") + claim.tensor +
                            " names a weight that is missing");
  }
  const BnbTensor& w = *plan->w;
  QuantState& state = plan->state;
  std::string state_name;      // the tensor findings about the state name
  std::int64_t state_offset;   // and their byte_offset
  ListExtras extras;
  if (list) {
    // Step 2, BNB-101: the list's items (docs/pt.md 7.4 step 2).
    state_name = claim.tensor;
    state_offset = ctx.header;
    if (!ParseListState(ctx, claim, plan, &extras, report)) return false;
  } else {
    plan->absmax = ctx.Tensor(layer.absmax);
    if (plan->absmax == nullptr) {
      return report.Error("BNB-105", layer.w, "quant_state", ctx.header,
                          "the layer has no absmax tensor " + layer.absmax);
    }
    // Step 2, BNB-101: a U8 rank-1 tensor of strict JSON with the keys typed.
    const BnbTensor& state_tensor = *ctx.Tensor(claim.tensor);
    if (state_tensor.dtype != "U8" || state_tensor.shape.size() != 1) {
      return report.Error("BNB-101", state_tensor.name, "quant_state", ctx.header,
                          "the state tensor is " + state_tensor.dtype + " of rank " +
                              std::to_string(state_tensor.shape.size()) + ", not U8 of rank 1");
    }
    state_name = state_tensor.name;
    state_offset = ctx.Offset(state_tensor, 0);
    std::string problem;
    if (!ParseQuantState(ctx.Data(state_tensor), state_tensor.byte_length, true, &state,
                         &problem)) {
      return report.Error("BNB-101", state_name, "quant_state", state_offset, problem);
    }
    plan->quant_map = ctx.Tensor(layer.quant_map);
    plan->nested_absmax = ctx.Tensor(layer.nested_absmax);
    plan->nested_quant_map = ctx.Tensor(layer.nested_quant_map);
    plan->nested = state.has_nested_key || plan->nested_absmax != nullptr ||
                   plan->nested_quant_map != nullptr;
  }

  // Step 3, BNB-001: quant_type.
  if (TableBits(state.quant_type) == nullptr) {
    return report.Error("BNB-001", state_name, "quant_type", state_offset,
                        "quant_type \"" + state.quant_type + "\" is not nf4 or fp4");
  }
  // Step 4, BNB-102: the HF key suffix agrees with quant_type (a list has no suffix).
  if (claim.form == StateForm::kHf4 && claim.suffix != state.quant_type) {
    return report.Error(
        "BNB-102", state_name, "quant_type", state_offset,
        "the key says bitsandbytes__" + claim.suffix + ", quant_type is " + state.quant_type);
  }
  // Step 5, BNB-001: blocksize.
  if (!IsPowerOfTwoInRange(state.blocksize, 32, 4096)) {
    return report.Error(
        "BNB-001", state_name, "blocksize", state_offset,
        "blocksize " + std::to_string(state.blocksize) + " is not a power of two from 32 to 4096");
  }
  // Step 6, BNB-103: dtype.
  if (!ParseRestoredDtype(state.dtype, &plan->dtype)) {
    return report.Error("BNB-103", state_name, "dtype", state_offset,
                        "dtype \"" + state.dtype + "\" is not float16, bfloat16 or float32");
  }
  // Step 7, BNB-004: a nested layer is complete. A list's state2 must be
  // quantize_blockwise's own, not nested again (docs/pt.md 7.4 step 7).
  if (plan->nested) {
    if (extras.short_state2) {
      return report.Error("BNB-004", state_name, "nested_quant_map", state_offset,
                          "state2 has 6 items: it has no code (nested_quant_map)");
    }
    if (extras.nested_of_nested) {
      return report.Error("BNB-004", state_name, "nested_blocksize", state_offset,
                          "state2 is nested again (nested2 True, or offset2 / state2 not None)");
    }
    if (!CheckNestedPieces(ctx, layer, *plan, state_name, state_offset, report)) return false;
  }
  // Step 8, BNB-002: the packed weight is ceil(n / 2) bytes.
  std::uint64_t n = 0;
  const bool counted = ElementCount(state.shape, &n);
  if (!counted || w.byte_length != CeilDiv(n, 2)) {
    return report.Error(
        "BNB-002", layer.w, "weight", ctx.header,
        !counted ? "the element count of shape " + ShapeText(state.shape) + " overflows 64 bits"
                 : "the packed weight is " + std::to_string(w.byte_length) + " bytes, shape " +
                       ShapeText(state.shape) + " needs " + std::to_string(CeilDiv(n, 2)));
  }
  plan->n = n;
  // Step 9, BNB-102: absmax dtype.
  const BnbTensor& absmax = *plan->absmax;
  const char* absmax_dtype = plan->nested ? "U8" : "F32";
  if (absmax.dtype != absmax_dtype) {
    return report.Error("BNB-102", absmax.name, "absmax", ctx.header,
                        "absmax is " + absmax.dtype + ", a " +
                            (plan->nested ? std::string("nested") : std::string("flat")) +
                            " layer needs " + absmax_dtype);
  }
  // Step 10, BNB-001: one absmax per block.
  const std::uint64_t nblocks = CeilDiv(n, state.blocksize);
  if (absmax.element_count != nblocks) {
    return report.Error("BNB-001", absmax.name, "absmax", ctx.header,
                        "absmax has " + std::to_string(absmax.element_count) + " elements, ceil(" +
                            std::to_string(n) + " / " + std::to_string(state.blocksize) +
                            ") = " + std::to_string(nblocks) + " are needed");
  }
  // Step 11, BNB-004: the nested tensors.
  if (plan->nested && !CheckNestedTensors(ctx, *plan, nblocks, report)) return false;
  // Step 12, BNB-102: a stored quant_map is F32[16].
  const BnbTensor* quant_map = plan->quant_map;
  if (quant_map != nullptr && (!IsF32(*quant_map) || quant_map->element_count != 16)) {
    return report.Error("BNB-102", quant_map->name, "quant_map", ctx.header,
                        "quant_map is " + quant_map->dtype + " with " +
                            std::to_string(quant_map->element_count) +
                            " elements, not F32 with 16");
  }
  // Step 13, BNB-104: finite statistics.
  if (!CheckStatisticsFinite(ctx, *plan, report)) return false;
  // Step 14, BNB-106 (warning): the stored quant_map is the table.
  if (quant_map != nullptr) {
    const std::uint32_t* table = TableBits(state.quant_type);
    const std::uint8_t* data = ctx.Data(*quant_map);
    for (std::uint64_t k = 0; k < 16; ++k) {
      const std::uint32_t stored = LoadU32(data + 4 * k);
      if (stored == table[k]) continue;
      report.Warning("BNB-106", quant_map->name, "quant_map", ctx.Offset(*quant_map, 4 * k),
                     "the stored quant_map differs from the " + state.quant_type +
                         " table at code " + std::to_string(k) + "; it is ignored",
                     -1, static_cast<std::int64_t>(k));
      break;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 7: the 8-bit blockwise layer, docs/bnb.md steps 1..9. The JSON is
// __metadata__["bnb_blockwise8_quant_state"]: its findings name no tensor.
// (Only a safetensors container has __metadata__, docs/pt.md 6.4.)

bool CheckBlockwise8Layer(const Context& ctx, const Layer& layer, Reporter& report,
                          LayerPlan* plan) {
  const std::string& text = *FindMetadata(*ctx.table, kBlockwise8Key);
  QuantState& state = plan->state;
  std::string problem;
  // Step 1, BNB-101.
  if (!ParseQuantState(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), false,
                       &state, &problem)) {
    return report.Error("BNB-101", "", "bnb_blockwise8_quant_state", ctx.header, problem);
  }
  // Step 2, BNB-107: blocksize.
  if (!IsPowerOfTwoInRange(state.blocksize, 32, 4096)) {
    return report.Error(
        "BNB-107", "", "blocksize", ctx.header,
        "blocksize " + std::to_string(state.blocksize) + " is not a power of two from 32 to 4096");
  }
  // Step 3, BNB-103: dtype.
  if (!ParseRestoredDtype(state.dtype, &plan->dtype)) {
    return report.Error("BNB-103", "", "dtype", ctx.header,
                        "dtype \"" + state.dtype + "\" is not float16, bfloat16 or float32");
  }
  // Step 4, BNB-004: a nested layer is complete.
  plan->nested_absmax = ctx.Tensor(layer.nested_absmax);
  plan->nested_quant_map = ctx.Tensor(layer.nested_quant_map);
  plan->nested = state.has_nested_key || plan->nested_absmax != nullptr ||
                 plan->nested_quant_map != nullptr;
  if (plan->nested && !CheckNestedPieces(ctx, layer, *plan, "", ctx.header, report)) {
    return false;
  }
  // Step 5, BNB-107: U8 codes and an F32[256] quant_map (FindLayers saw
  // W, absmax and quant_map).
  plan->w = ctx.Tensor(layer.w);
  const BnbTensor& w = *plan->w;
  if (w.dtype != "U8") {
    return report.Error("BNB-107", w.name, "weight", ctx.header,
                        "the 8-bit codes are " + w.dtype + ", not U8");
  }
  plan->quant_map = ctx.Tensor(layer.quant_map);
  const BnbTensor& quant_map = *plan->quant_map;
  if (!IsF32(quant_map) || quant_map.element_count != 256) {
    return report.Error("BNB-107", quant_map.name, "quant_map", ctx.header,
                        "quant_map is " + quant_map.dtype + " with " +
                            std::to_string(quant_map.element_count) +
                            " elements, not F32 with 256");
  }
  // Step 6, BNB-102: a non-null shape is W's shape.
  if (state.has_shape && state.shape != w.shape) {
    return report.Error("BNB-102", w.name, "shape", ctx.header,
                        "the quant_state shape " + ShapeText(state.shape) +
                            " differs from the codes' shape " + ShapeText(w.shape));
  }
  plan->n = w.element_count;
  // Step 7: absmax dtype (BNB-102) and count (BNB-107).
  plan->absmax = ctx.Tensor(layer.absmax);
  const BnbTensor& absmax = *plan->absmax;
  const char* absmax_dtype = plan->nested ? "U8" : "F32";
  if (absmax.dtype != absmax_dtype) {
    return report.Error("BNB-102", absmax.name, "absmax", ctx.header,
                        "absmax is " + absmax.dtype + ", a " +
                            (plan->nested ? std::string("nested") : std::string("flat")) +
                            " layer needs " + absmax_dtype);
  }
  const std::uint64_t nblocks = CeilDiv(plan->n, state.blocksize);
  if (absmax.element_count != nblocks) {
    return report.Error("BNB-107", absmax.name, "absmax", ctx.header,
                        "absmax has " + std::to_string(absmax.element_count) + " elements, ceil(" +
                            std::to_string(plan->n) + " / " + std::to_string(state.blocksize) +
                            ") = " + std::to_string(nblocks) + " are needed");
  }
  // Step 8, BNB-004: the nested tensors.
  if (plan->nested && !CheckNestedTensors(ctx, *plan, nblocks, report)) return false;
  // Step 9, BNB-104: absmax / nested statistics and the quant_map, in storage order.
  return CheckStatisticsFinite(ctx, *plan, report, &quant_map);
}

// ---------------------------------------------------------------------------
// Section 8: the int8 row-scaled layer, docs/bnb.md steps 1..3.

bool CheckInt8Layer(const Context& ctx, const Layer& layer, Reporter& report, LayerPlan* plan) {
  // Step 1, BNB-105: W present (and named by one scale tensor only).
  if (layer.claims.size() > 1) {
    return report.Error("BNB-105", layer.w, "weight", ctx.header,
                        "two scale tensors name the weight " + layer.w + ": " +
                            layer.claims[0].tensor + " and " + layer.claims[1].tensor);
  }
  plan->w = ctx.Tensor(layer.w);
  if (plan->w == nullptr) {
    return report.Error("BNB-105", layer.w, "weight", ctx.header,
                        "the scale tensor " + layer.scale + " names a weight that is missing");
  }
  const BnbTensor& w = *plan->w;
  // Step 2, BNB-108: I8 rank-2 weight, F32 scale per row, row-major format.
  if (w.dtype != "I8" || w.shape.size() != 2) {
    return report.Error("BNB-108", w.name, "weight", ctx.header,
                        "the int8 weight is " + w.dtype + " of rank " +
                            std::to_string(w.shape.size()) + ", not I8 of rank 2");
  }
  plan->scale = ctx.Tensor(layer.scale);
  const BnbTensor& scale = *plan->scale;
  if (!IsF32(scale) || scale.element_count != w.shape[0]) {
    return report.Error("BNB-108", scale.name, "SCB", ctx.header,
                        "the scale is " + scale.dtype + " with " +
                            std::to_string(scale.element_count) + " elements, F32 with " +
                            std::to_string(w.shape[0]) + " (one per row) is needed");
  }
  const BnbTensor* format =
      layer.weight_format.empty() ? nullptr : ctx.Tensor(layer.weight_format);
  if (format != nullptr) {
    if (format->dtype != "U8" || format->element_count != 1) {
      return report.Error("BNB-108", format->name, "weight_format", ctx.header,
                          "weight_format is " + format->dtype + " with " +
                              std::to_string(format->element_count) + " elements, not one U8");
    }
    const std::uint8_t value = ctx.Data(*format)[0];
    if (value != 0) {
      return report.Error(
          "BNB-108", format->name, "weight_format", ctx.Offset(*format, 0),
          "weight_format is " + std::to_string(value) + ", only 0 (row-major) is read");
    }
  }
  // Step 3, BNB-104: finite scales.
  return CheckFinite(ctx, scale, "SCB", false, report);
}

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

BnbTable BnbTableFromMerged(const MergedTable& merged) {
  BnbTable table;
  table.header_offset = kSafetensorsHeaderOffset;
  table.has_metadata = merged.has_metadata;
  table.metadata = merged.metadata;
  for (const TableTensor& source : merged.tensors) {
    BnbTensor tensor;
    tensor.name = source.name;
    tensor.dtype = source.dtype;
    tensor.shape = source.shape;
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

BnbTable BnbTableFromContainer(qd::ByteView file, const Container& container) {
  return BnbTableFromMerged(TableOfFile(file, container));
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

bool IsBnbFile(qd::ByteView file) {
  qd::Outcome container_findings;
  Container container;
  if (!CheckContainer(file, "", &container_findings, &container)) return false;
  return HasBnbLayer(BnbTableFromContainer(file, container));
}

bool HasBnbLayer(const BnbTable& table) { return !FindLayers(table, IndexOf(table)).empty(); }

}  // namespace qd::oracle
