// bnb_checks.cc: the oracle's bitsandbytes layer checks, written from
// docs/bnb.md ("Check order") and docs/pt.md 7.3, 7.4: the quant_state JSON,
// the list layout's state, and the 4-bit, 8-bit blockwise and int8
// row-scaled steps. Split out of oracles/bnb.cc along the contract's
// sections; finding the layers, decoding, the readers and the reference
// quantizer stay there. Nothing here is shared with codecs/.
//
// Sections (numbered as in oracles/bnb.cc's plan):
//   5. the quant_state JSON (BNB-101)
//   6. the 4-bit layer checks, steps 1..14; 6a the list layout's state
//      (docs/pt.md 7.3, 7.4 step 2) mapped onto the same QuantState
//   7. the 8-bit blockwise layer checks, steps 1..9
//   8. the int8 row-scaled layer checks, steps 1..3
// The types they share with bnb.cc are in oracles/bnb_internal.h.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/bnb_internal.h"
#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/json.h"

namespace qd::oracle::bnb_internal {
namespace {

// ---------------------------------------------------------------------------
// Section 5: the quant_state JSON (BNB-101).

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

}  // namespace

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

}  // namespace qd::oracle::bnb_internal
