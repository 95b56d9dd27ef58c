// bnb.cc: bitsandbytes layer discovery, checks (docs/bnb.md "Check order")
// and decoding. Kernels: bnb_kernels.cc; encoders: bnb_quantize.cc.
#include "codecs/bnb.h"
#include "codecs/finding.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "codecs/float16.h"
#include "codecs/strict_json.h"

namespace qd::codec {
namespace {

constexpr std::string_view kHfMarker = ".quant_state.bitsandbytes__";
constexpr std::string_view kGptqState = "weight_quant_state";
constexpr std::string_view kBlockwiseKey = "bnb_blockwise8_quant_state";

// A tensor whose name makes it the state of a layer, or (kList4bit) a .pt
// value `W.quant_state` holding the old QuantState list (docs/pt.md 7.2).
enum class StateForm : std::uint8_t { kHf4bit, kGptq4bit, kList4bit, kInt8Hf, kInt8Gptq };

struct StateTensor {
  StateForm form;
  std::size_t tensor;  // kBnbNoTensor for the list
  std::string prefix;  // HF and list: "W"; the others: "M." (possibly empty)
  std::string type;    // HF: the T of bitsandbytes__T
  std::uint32_t list = 0;  // kList4bit: the id BnbListStates::map knows it by
};

bool Is4bit(StateForm f) {
  return f == StateForm::kHf4bit || f == StateForm::kGptq4bit || f == StateForm::kList4bit;
}

using StateKeys = BnbStateKeys;

// "M.<suffix>" or "<suffix>": the prefix M. ("" for the bare suffix), or nullopt.
std::optional<std::string> PrefixBefore(std::string_view name, std::string_view suffix) {
  if (name == suffix) return std::string();
  if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix &&
      name[name.size() - suffix.size() - 1] == '.') {
    return std::string(name.substr(0, name.size() - suffix.size()));
  }
  return std::nullopt;
}

// Which state a tensor name stands for; the first form that matches wins.
std::optional<std::pair<std::string, StateTensor>> ClassifyState(const std::string& name,
                                                                 std::size_t index) {
  if (const std::size_t pos = name.find(kHfMarker); pos != std::string::npos) {
    std::string w = name.substr(0, pos);
    StateTensor s{StateForm::kHf4bit, index, w, name.substr(pos + kHfMarker.size())};
    return std::make_pair(std::move(w), std::move(s));
  }
  if (auto m = PrefixBefore(name, kGptqState)) {
    return std::make_pair(*m + "weight", StateTensor{StateForm::kGptq4bit, index, *m, {}});
  }
  if (auto m = PrefixBefore(name, "SCB")) {
    return std::make_pair(*m + "weight", StateTensor{StateForm::kInt8Hf, index, *m, {}});
  }
  if (auto m = PrefixBefore(name, "weight_scb")) {
    return std::make_pair(*m + "weight", StateTensor{StateForm::kInt8Gptq, index, *m, {}});
  }
  return std::nullopt;
}

bool IsPowerOfTwoIn(std::uint64_t v, std::uint64_t lo, std::uint64_t hi) {
  return v >= lo && v <= hi && std::has_single_bit(v);
}

std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

std::optional<BnbDtype> ParseBnbDtype(const std::string& s) {
  if (s == "float16") return BnbDtype::kFloat16;
  if (s == "bfloat16") return BnbDtype::kBfloat16;
  if (s == "float32") return BnbDtype::kFloat32;
  return std::nullopt;
}

// The quant_state keys the checks read (docs/bnb.md, BNB-101); any other
// member keeps only its key (a nested_* key still marks a nested state).
const std::vector<std::string_view> kStateKeys = {
    "quant_type", "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype", "nested_offset"};

bool IsUnsignedArray(const nlohmann::json& v) {
  if (!v.is_array()) return false;
  for (const nlohmann::json& e : v) {
    if (!e.is_number_unsigned()) return false;
  }
  return true;
}

// The optional nested keys have the right JSON types when present.
bool NestedKeyTypesOk(const nlohmann::json& o) {
  if (o.contains("nested_blocksize") && !o["nested_blocksize"].is_number_unsigned()) return false;
  if (o.contains("nested_dtype") && !o["nested_dtype"].is_string()) return false;
  if (o.contains("nested_offset") && !o["nested_offset"].is_number()) return false;
  return true;
}

bool HasNestedKey(const nlohmann::json& o) {
  for (auto it = o.begin(); it != o.end(); ++it) {
    if (it.key().rfind("nested_", 0) == 0) return true;
  }
  return false;
}

// The nested keys of a JSON state whose types NestedKeyTypesOk accepted.
void ReadNestedKeys(const nlohmann::json& o, StateKeys* keys) {
  keys->nested = HasNestedKey(o);
  if (o.contains("nested_blocksize")) keys->nested_blocksize = o["nested_blocksize"].get<std::uint64_t>();
  if (o.contains("nested_dtype")) keys->nested_dtype = o["nested_dtype"].get<std::string>();
  if (o.contains("nested_offset")) keys->nested_offset = o["nested_offset"].get<double>();
}

// A table's tensor indices sorted by name, for lookups by name at 4 bytes a
// tensor (a hash map of name copies cost about 80; issue 9, section 3). Of
// equal names the first index is found.
class NameIndex {
 public:
  NameIndex(const TensorTable& table, bool listed_only) : table_(&table) {
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (!listed_only || table[i].listed) order_.push_back(static_cast<std::uint32_t>(i));
    }
    std::stable_sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return table[a].name < table[b].name;
    });
  }
  std::size_t Find(std::string_view name) const {
    auto it = std::lower_bound(order_.begin(), order_.end(), name,
                               [&](std::uint32_t i, std::string_view n) { return (*table_)[i].name < n; });
    return it == order_.end() || (*table_)[*it].name != name ? kBnbNoTensor : *it;
  }

 private:
  const TensorTable* table_;
  std::vector<std::uint32_t> order_;
};

// The checks of one file: findings go to result; Error() stops the reader.
class Checker {
 public:
  Checker(BnbResult* result, const std::string& file, const BnbListStates& lists)
      : r_(result), file_(file), lists_(lists), by_name_(r_->table, /*listed_only=*/true) {}

  std::size_t Find(const std::string& name) const { return by_name_.Find(name); }
  TableTensor T(std::size_t i) const { return r_->table[i]; }
  std::int64_t DataOffset(std::size_t i, std::uint64_t k = 0) const {
    return r_->table.ByteOffset(i, k);
  }
  const std::uint8_t* Data(std::size_t i) const { return r_->table.Data(i); }
  // Header-level facts: 8 (safetensors) or ds of data.pkl (docs/pt.md 6.4).
  std::int64_t Header() const { return r_->table.header_offset(); }

  qd::Finding& Add(std::string rule, qd::Severity severity, std::string_view tensor,
                   std::string field, std::int64_t offset, std::string message) {
    r_->findings.push_back(MakeFinding(std::move(rule), severity, file_, std::string(tensor),
                                       std::move(field), offset, std::move(message)));
    if (severity == qd::Severity::kError) r_->refused = true;
    return r_->findings.back();
  }
  // Always false, so a check can `return Error(...)`.
  bool Error(std::string rule, std::string_view tensor, std::string field, std::int64_t offset,
             std::string message) {
    Add(std::move(rule), qd::Severity::kError, tensor, std::move(field), offset,
        std::move(message));
    return false;
  }

  // BNB-104: the first non-finite binary32 value of the listed tensors, visited
  // in storage order (begin, end, name). by_element: the index is an element
  // (maps), else a block.
  struct Statistic {
    std::size_t tensor;
    std::string field;
    bool by_element;
  };
  bool CheckFinite(std::vector<Statistic> stats) {
    std::sort(stats.begin(), stats.end(), [&](const Statistic& a, const Statistic& b) {
      return r_->table.InStorageOrder(a.tensor, b.tensor);
    });
    for (const Statistic& s : stats) {
      const std::uint8_t* p = Data(s.tensor);
      const std::uint64_t count = T(s.tensor).element_count;
      for (std::uint64_t k = 0; k < count; ++k) {
        std::uint32_t bits;
        std::memcpy(&bits, p + 4 * k, 4);
        if (!IsNonFiniteF32Bits(bits)) continue;
        qd::Finding& f = Add("BNB-104", qd::Severity::kError, T(s.tensor).name, s.field,
                             DataOffset(s.tensor, 4 * k),
                             s.field + " value " + std::to_string(k) + " is not finite");
        (s.by_element ? f.element : f.block) = static_cast<std::int64_t>(k);
        return false;
      }
    }
    return true;
  }

  // BNB-004 (docs/bnb.md 4-bit step 7, blockwise step 4): a nested layer has
  // nested_offset, nested_blocksize, nested_dtype float32 and both nested
  // tensors. State facts are reported at (keys.tensor, keys.at).
  bool CheckNestedState(const StateKeys& keys, const std::string& w, BnbLayer* layer) {
    if (!keys.nested_offset) {
      return Error("BNB-004", keys.tensor, "nested_offset", keys.at, "nested state without nested_offset");
    }
    if (!keys.nested_blocksize || !IsPowerOfTwoIn(*keys.nested_blocksize, 32, 4096)) {
      return Error("BNB-004", keys.tensor, "nested_blocksize", keys.at,
                   "nested_blocksize is missing or not a power of two 32..4096");
    }
    if (!keys.nested_dtype || *keys.nested_dtype != "float32") {
      return Error("BNB-004", keys.tensor, "nested_dtype", keys.at, "nested_dtype is not float32");
    }
    if (layer->nested_absmax == kBnbNoTensor) {
      return Error("BNB-004", w, "nested_absmax", Header(), "nested layer without nested_absmax");
    }
    if (layer->nested_quant_map == kBnbNoTensor) {
      return Error("BNB-004", w, "nested_quant_map", Header(),
                   "nested layer without nested_quant_map");
    }
    layer->nested_blocksize = *keys.nested_blocksize;
    layer->nested_offset = static_cast<float>(*keys.nested_offset);
    return true;
  }

  // absmax is F32 (flat) or U8 (nested) (BNB-102) with one value per block
  // (count_rule: BNB-001 for 4-bit, BNB-107 for blockwise), then the nested
  // tensors' dtypes and sizes (BNB-004).
  bool CheckStatistics(const BnbLayer& layer, std::uint64_t nblocks, const char* count_rule) {
    const TableTensor& absmax = T(layer.absmax);
    if (absmax.dtype != (layer.nested ? Dtype::kU8 : Dtype::kF32)) {
      return Error("BNB-102", absmax.name, "absmax", Header(),
                   std::string("absmax is not ") + (layer.nested ? "U8 (nested)" : "F32"));
    }
    if (absmax.element_count != nblocks) {
      return Error(count_rule, absmax.name, "absmax", Header(),
                   "absmax has " + std::to_string(absmax.element_count) + " values, " +
                       std::to_string(nblocks) + " blocks");
    }
    if (!layer.nested) return true;
    const TableTensor& na = T(layer.nested_absmax);
    if (na.dtype != Dtype::kF32 || na.element_count != CeilDiv(nblocks, layer.nested_blocksize)) {
      return Error("BNB-004", na.name, "nested_absmax", Header(),
                   "nested_absmax is not F32 with one value per nested block");
    }
    const TableTensor& nq = T(layer.nested_quant_map);
    if (nq.dtype != Dtype::kF32 || nq.element_count != 256) {
      return Error("BNB-004", nq.name, "nested_quant_map", Header(),
                   "nested_quant_map is not F32 with 256 values");
    }
    return true;
  }

  bool Check4bit(const std::string& w, const std::vector<StateTensor>& states, BnbLayer* layer);
  bool CheckBlockwise8(const std::string& w, BnbLayer* layer);
  bool CheckInt8(const std::string& w, const std::vector<StateTensor>& states, BnbLayer* layer);

 private:
  // docs/bnb.md 4-bit step 2 for a JSON state tensor.
  bool ReadJsonState(const StateTensor& state, StateKeys* keys);
  // docs/pt.md 7.4 step 2 for a list (mapped by lists_.map): the keys, and
  // the pieces as value tensors of the table named W.quant_state[...].
  bool ReadListState(const StateTensor& state, const std::string& w, BnbListMapping* mapped,
                     BnbLayer* layer);

  BnbResult* r_;
  const std::string& file_;
  const BnbListStates& lists_;
  NameIndex by_name_;
};

bool Checker::ReadJsonState(const StateTensor& state, StateKeys* keys) {
  const TableTensor& st = T(state.tensor);
  if (st.dtype != Dtype::kU8 || st.shape.size() != 1) {
    return Error("BNB-101", st.name, "quant_state", Header(),
                 "the quant_state tensor is not U8 of rank 1");
  }
  keys->tensor = st.name;
  keys->at = DataOffset(state.tensor);
  const std::optional<nlohmann::json> parsed = ParseStrictJson(Data(state.tensor), st.byte_length, &kStateKeys);
  if (!parsed || !parsed->is_object()) {
    return Error("BNB-101", st.name, "quant_state", keys->at,
                 "the quant_state bytes are not strict JSON with an object on top");
  }
  const nlohmann::json& js = *parsed;
  const bool keys_ok = js.contains("quant_type") && js["quant_type"].is_string() &&
                       js.contains("blocksize") && js["blocksize"].is_number_unsigned() &&
                       js.contains("dtype") && js["dtype"].is_string() && js.contains("shape") &&
                       IsUnsignedArray(js["shape"]) && NestedKeyTypesOk(js);
  if (!keys_ok) {
    return Error("BNB-101", st.name, "quant_state", keys->at,
                 "a quant_state key is missing or of the wrong type");
  }
  keys->quant_type = js["quant_type"].get<std::string>();
  keys->blocksize = js["blocksize"].get<std::uint64_t>();
  keys->dtype = js["dtype"].get<std::string>();
  for (const nlohmann::json& d : js["shape"]) keys->shape.push_back(d.get<std::uint64_t>());
  ReadNestedKeys(js, keys);
  return true;
}

bool Checker::ReadListState(const StateTensor& state, const std::string& w, BnbListMapping* mapped,
                            BnbLayer* layer) {
  *mapped = lists_.map(&r_->table, state.list, w);
  layer->absmax = mapped->absmax;
  layer->quant_map = mapped->quant_map;
  layer->nested_absmax = mapped->nested_absmax;
  layer->nested_quant_map = mapped->nested_quant_map;
  if (mapped->refused) {
    return Error("BNB-101", mapped->keys.tensor, mapped->field, mapped->offset, mapped->message);
  }
  return true;
}

bool Checker::Check4bit(const std::string& w, const std::vector<StateTensor>& states,
                        BnbLayer* layer) {
  // 1. BNB-105: one state, W and its absmax present.
  if (states.size() > 1) {
    return Error("BNB-105", w, "quant_state", Header(),
                 std::to_string(states.size()) + " states name " + w);
  }
  const StateTensor& state = states.front();
  const bool hf = state.form == StateForm::kHf4bit;
  const bool list = state.form == StateForm::kList4bit;
  auto sibling = [&](std::string_view hf_suffix, std::string_view gptq_suffix) {
    return hf ? w + std::string(hf_suffix) : state.prefix + std::string(gptq_suffix);
  };
  layer->weight = Find(w);
  if (layer->weight == kBnbNoTensor) {
    return Error("BNB-105", w, "quant_state", Header(), "the packed weight is missing");
  }
  if (!list) {
    layer->absmax = Find(sibling(".absmax", "weight_absmax"));
    if (layer->absmax == kBnbNoTensor) {
      return Error("BNB-105", w, "quant_state", Header(), "the absmax tensor is missing");
    }
    layer->state = state.tensor;
    layer->quant_map = Find(sibling(".quant_map", "weight_quant_map"));
    layer->nested_absmax = Find(sibling(".nested_absmax", "weight_nested_absmax"));
    layer->nested_quant_map = Find(sibling(".nested_quant_map", "weight_nested_quant_map"));
  }

  // 2. BNB-101: strict JSON with the required keys, or a well-formed list.
  BnbListMapping mapped;
  if (list ? !ReadListState(state, w, &mapped, layer) : !ReadJsonState(state, &mapped.keys)) {
    return false;
  }
  const StateKeys& keys = mapped.keys;
  // 3, 4. BNB-001 / BNB-102: quant_type (no suffix to compare for the list).
  if (keys.quant_type != "nf4" && keys.quant_type != "fp4") {
    return Error("BNB-001", keys.tensor, "quant_type", keys.at,
                 "quant_type \"" + keys.quant_type + "\" is not nf4 or fp4");
  }
  if (hf && state.type != keys.quant_type) {
    return Error("BNB-102", keys.tensor, "quant_type", keys.at,
                 "the key says bitsandbytes__" + state.type + ", the JSON says " + keys.quant_type);
  }
  layer->quant_type = keys.quant_type == "nf4" ? Bnb4bitType::kNf4 : Bnb4bitType::kFp4;
  // 5. BNB-001: blocksize.
  if (!IsPowerOfTwoIn(keys.blocksize, 32, 4096)) {
    return Error("BNB-001", keys.tensor, "blocksize", keys.at,
                 "blocksize " + std::to_string(keys.blocksize) + " is not a power of two 32..4096");
  }
  layer->blocksize = keys.blocksize;
  // 6. BNB-103: dtype.
  const std::optional<BnbDtype> dtype = ParseBnbDtype(keys.dtype);
  if (!dtype) {
    return Error("BNB-103", keys.tensor, "dtype",
                 keys.at, "dtype \"" + keys.dtype + "\" is not float16, bfloat16 or float32");
  }
  layer->dtype = *dtype;
  // 7. BNB-004: a nested layer is complete. The list's own gaps first
  // (docs/pt.md 7.4 step 7): state2 without code, nested-of-nested.
  layer->nested = keys.nested || layer->nested_absmax != kBnbNoTensor ||
                  layer->nested_quant_map != kBnbNoTensor;
  if (mapped.state2_without_code) {
    return Error("BNB-004", keys.tensor, "nested_quant_map", keys.at,
                 "state2 is the 6-item docstring form: it has no code (nested_quant_map)");
  }
  if (mapped.nested_of_nested) {
    return Error("BNB-004", keys.tensor, "nested_blocksize", keys.at,
                 "state2 is itself nested: not part of the 4-bit layout");
  }
  if (layer->nested && !CheckNestedState(keys, w, layer)) return false;
  // 8. BNB-002: ceil(n / 2) packed bytes.
  std::uint64_t n = 1;
  bool overflow = false;
  for (std::uint64_t d : keys.shape) overflow |= __builtin_mul_overflow(n, d, &n);
  const TableTensor& packed = T(layer->weight);
  if (overflow || packed.byte_length != n / 2 + n % 2) {
    return Error("BNB-002", w, "weight", Header(),
                 "the packed weight has " + std::to_string(packed.byte_length) +
                     " bytes; shape needs " +
                     (overflow ? std::string("more than 2^64 elements") : std::to_string(n / 2 + n % 2)));
  }
  layer->n = n;
  const std::uint64_t nblocks = CeilDiv(n, layer->blocksize);
  // 9, 10, 11. absmax dtype and count, then the nested tensors.
  if (!CheckStatistics(*layer, nblocks, "BNB-001")) return false;
  // 12. BNB-102: an optional stored quant_map.
  if (layer->quant_map != kBnbNoTensor) {
    const TableTensor& qm = T(layer->quant_map);
    if (qm.dtype != Dtype::kF32 || qm.element_count != 16) {
      return Error("BNB-102", qm.name, "quant_map", Header(), "quant_map is not F32 with 16 values");
    }
  }
  // 13. BNB-104.
  std::vector<Statistic> stats;
  if (layer->nested) {
    stats.push_back({layer->nested_absmax, "nested_absmax", false});
    stats.push_back({layer->nested_quant_map, "nested_quant_map", true});
  } else {
    stats.push_back({layer->absmax, "absmax", false});
  }
  if (!CheckFinite(std::move(stats))) return false;
  // 14. BNB-106 (warning): the stored quant_map is not the table.
  if (layer->quant_map != kBnbNoTensor) {
    const std::array<float, 16>& table = Bnb4bitTable(layer->quant_type);
    const std::uint8_t* p = Data(layer->quant_map);
    for (std::uint64_t k = 0; k < 16; ++k) {
      std::uint32_t stored, expected = std::bit_cast<std::uint32_t>(table[k]);
      std::memcpy(&stored, p + 4 * k, 4);
      if (stored != expected) {
        Add("BNB-106", qd::Severity::kWarning, T(layer->quant_map).name, "quant_map",
            DataOffset(layer->quant_map, 4 * k),
            "stored quant_map differs from the " + keys.quant_type + " table at code " +
                std::to_string(k) + "; the table is used")
            .element = static_cast<std::int64_t>(k);
        break;
      }
    }
  }
  // Decoded shape: bnb returns the transpose when the packed tensor's first
  // dimension is 1 and shape has rank 2.
  layer->shape = keys.shape;
  if (!packed.shape.empty() && packed.shape[0] == 1 && layer->shape.size() == 2) {
    std::swap(layer->shape[0], layer->shape[1]);
    layer->transposed = true;
  }
  return true;
}

bool Checker::CheckBlockwise8(const std::string& w, BnbLayer* layer) {
  const std::string field = std::string(kBlockwiseKey);
  layer->weight = Find(w);
  layer->absmax = Find(w + ".absmax");
  layer->quant_map = Find(w + ".quant_map");
  layer->nested_absmax = Find(w + ".nested_absmax");
  layer->nested_quant_map = Find(w + ".nested_quant_map");
  // 1. BNB-101: the metadata state.
  const std::string_view* text = r_->table.Metadata(kBlockwiseKey);
  const std::optional<nlohmann::json> parsed =
      text != nullptr ? ParseStrictJson(*text, &kStateKeys) : std::optional<nlohmann::json>();
  if (!parsed || !parsed->is_object()) {
    return Error("BNB-101", "", field, Header(),
                 "the blockwise8 state is not strict JSON with an object on top");
  }
  const nlohmann::json& js = *parsed;
  const bool shape_ok = !js.contains("shape") || js["shape"].is_null() || IsUnsignedArray(js["shape"]);
  if (!js.contains("blocksize") || !js["blocksize"].is_number_unsigned() || !js.contains("dtype") ||
      !js["dtype"].is_string() || !shape_ok || !NestedKeyTypesOk(js)) {
    return Error("BNB-101", "", field, Header(),
                 "a blockwise8 state key is missing or of the wrong type");
  }
  // 2. BNB-107: blocksize.
  const std::uint64_t blocksize = js["blocksize"].get<std::uint64_t>();
  if (!IsPowerOfTwoIn(blocksize, 32, 4096)) {
    return Error("BNB-107", "", "blocksize", Header(),
                 "blocksize " + std::to_string(blocksize) + " is not a power of two 32..4096");
  }
  layer->blocksize = blocksize;
  // 3. BNB-103: dtype.
  const std::optional<BnbDtype> dtype = ParseBnbDtype(js["dtype"].get<std::string>());
  if (!dtype) {
    return Error("BNB-103", "", "dtype", Header(),
                 "dtype \"" + js["dtype"].get<std::string>() + "\" is not float16, bfloat16 or float32");
  }
  layer->dtype = *dtype;
  // 4. BNB-004: nested state complete.
  StateKeys keys;
  keys.at = Header();  // tensor "": the state lives in __metadata__
  ReadNestedKeys(js, &keys);
  layer->nested = keys.nested || layer->nested_absmax != kBnbNoTensor ||
                  layer->nested_quant_map != kBnbNoTensor;
  if (layer->nested && !CheckNestedState(keys, w, layer)) return false;
  // 5. BNB-107: the codes and the map.
  const TableTensor& codes = T(layer->weight);
  if (codes.dtype != Dtype::kU8) {
    return Error("BNB-107", w, "weight", Header(), "the 8-bit codes are not U8");
  }
  const TableTensor& map = T(layer->quant_map);
  if (map.dtype != Dtype::kF32 || map.element_count != 256) {
    return Error("BNB-107", map.name, "quant_map", Header(), "quant_map is not F32 with 256 values");
  }
  // 6. BNB-102: a declared shape is the codes' shape.
  if (js.contains("shape") && !js["shape"].is_null()) {
    std::vector<std::uint64_t> declared;
    for (const nlohmann::json& d : js["shape"]) declared.push_back(d.get<std::uint64_t>());
    if (declared != codes.shape) {
      return Error("BNB-102", w, "shape", Header(), "the state's shape differs from the codes' shape");
    }
  }
  layer->n = codes.element_count;
  layer->shape = codes.shape;
  const std::uint64_t nblocks = CeilDiv(layer->n, blocksize);
  // 7, 8. absmax dtype (BNB-102) and count (BNB-107), then the nested tensors.
  if (!CheckStatistics(*layer, nblocks, "BNB-107")) return false;
  // 9. BNB-104.
  std::vector<Statistic> stats = {{layer->quant_map, "quant_map", true}};
  if (layer->nested) {
    stats.push_back({layer->nested_absmax, "nested_absmax", false});
    stats.push_back({layer->nested_quant_map, "nested_quant_map", true});
  } else {
    stats.push_back({layer->absmax, "absmax", false});
  }
  return CheckFinite(std::move(stats));
}

bool Checker::CheckInt8(const std::string& w, const std::vector<StateTensor>& states,
                        BnbLayer* layer) {
  // 1. BNB-105: W present (and named by one scale tensor only).
  if (states.size() > 1) {
    return Error("BNB-105", w, "weight", Header(),
                 std::to_string(states.size()) + " scale tensors name " + w);
  }
  const StateTensor& state = states.front();
  layer->scale = state.tensor;
  layer->weight = Find(w);
  if (layer->weight == kBnbNoTensor) {
    return Error("BNB-105", w, "weight", Header(), "the int8 weight is missing");
  }
  if (state.form == StateForm::kInt8Hf) layer->weight_format = Find(state.prefix + "weight_format");
  // 2. BNB-108: shapes and dtypes.
  const TableTensor& wt = T(layer->weight);
  if (wt.dtype != Dtype::kI8 || wt.shape.size() != 2) {
    return Error("BNB-108", w, "weight", Header(), "the int8 weight is not I8 of rank 2");
  }
  layer->rows = wt.shape[0];
  layer->columns = wt.shape[1];
  const TableTensor& scb = T(layer->scale);
  if (scb.dtype != Dtype::kF32 || scb.element_count != layer->rows) {
    return Error("BNB-108", scb.name, "SCB", Header(), "the row scale is not F32 with one value per row");
  }
  if (layer->weight_format != kBnbNoTensor) {
    const TableTensor& wf = T(layer->weight_format);
    if (wf.dtype != Dtype::kU8 || wf.element_count != 1) {
      return Error("BNB-108", wf.name, "weight_format", Header(),
                   "weight_format is not a single U8");
    }
    if (Data(layer->weight_format)[0] != 0) {
      return Error("BNB-108", wf.name, "weight_format", DataOffset(layer->weight_format),
                   "weight_format " + std::to_string(Data(layer->weight_format)[0]) +
                       " is not 0 (row-major)");
    }
  }
  // 3. BNB-104: finite scales (element = row).
  if (!CheckFinite({{layer->scale, "SCB", true}})) return false;
  layer->n = wt.element_count;
  layer->shape = wt.shape;
  return true;
}

// One layer to check: the states that name its W, and whether W is
// blockwise8 (docs/bnb.md section 2).
struct LayerPlan {
  std::vector<StateTensor> states;
  bool blockwise8 = false;
};
using LayerPlans = std::vector<std::pair<std::string, LayerPlan>>;

// The layers of TENSORS and LISTS by W, in order of first mention.
LayerPlans PlanLayers(const TensorTable& tensors, const BnbListStates& lists) {
  LayerPlans plans;
  std::unordered_map<std::string, std::size_t> plan_of;
  auto plan_for = [&](const std::string& w) -> LayerPlan& {
    auto [it, inserted] = plan_of.emplace(w, plans.size());
    if (inserted) plans.emplace_back(w, LayerPlan{});
    return plans[it->second].second;
  };
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (auto claim = ClassifyState(std::string(tensors[i].name), i)) {
      plan_for(claim->first).states.push_back(std::move(claim->second));
    }
  }
  // docs/pt.md 7.2: the QuantState lists the container found.
  for (const auto& [w, list] : lists.lists) {
    StateTensor state{StateForm::kList4bit, kBnbNoTensor, w, {}};
    state.list = list;
    plan_for(w).states.push_back(std::move(state));
  }
  if (tensors.Metadata(kBlockwiseKey) != nullptr) {
    const NameIndex names(tensors, /*listed_only=*/false);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::string w(tensors[i].name);
      if (names.Find(w + ".absmax") == kBnbNoTensor || names.Find(w + ".quant_map") == kBnbNoTensor) {
        continue;
      }
      if (plan_of.count(w) != 0) continue;  // a 4-bit or int8 layer's W
      plan_for(w).blockwise8 = true;
    }
  }
  return plans;
}

}  // namespace

bool HasBnbLayer(const TensorTable& table) { return !PlanLayers(table, {}).empty(); }

BnbResult ReadBnb(qd::ByteView file, const std::string& file_name) {
  ContainerResult container = ReadContainer(file, file_name);
  if (container.refused) return BnbResult::Refusal(std::move(container.findings));
  return ReadBnbTable(TensorTable::FromContainer(std::move(container.container)), file_name,
                      std::move(container.findings));
}

BnbResult ReadBnbTable(TensorTable table, const std::string& file_name,
                       std::vector<qd::Finding> container_findings, const BnbListStates& lists) {
  BnbResult result;
  result.findings = std::move(container_findings);
  result.table = std::move(table);
  const TensorTable& tensors = result.table;
  LayerPlans plans = PlanLayers(tensors, lists);
  result.is_bnb = !plans.empty();
  if (!result.is_bnb) return result;
  std::sort(plans.begin(), plans.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  Checker checker(&result, file_name, lists);
  for (const auto& [w, plan] : plans) {
    BnbLayer layer;
    layer.name = w;
    bool ok;
    if (plan.blockwise8) {
      layer.kind = BnbLayerKind::kBlockwise8;
      ok = checker.CheckBlockwise8(w, &layer);
    } else if (std::any_of(plan.states.begin(), plan.states.end(),
                           [](const StateTensor& s) { return Is4bit(s.form); })) {
      layer.kind = BnbLayerKind::k4bit;
      ok = checker.Check4bit(w, plan.states, &layer);
    } else {
      layer.kind = BnbLayerKind::kInt8Rows;
      ok = checker.CheckInt8(w, plan.states, &layer);
    }
    if (!ok) {
      result.layers.clear();
      return result;
    }
    result.layers.push_back(std::move(layer));
  }
  // Members: every table tensor a layer uses (value tensors are never output).
  std::vector<bool> member(tensors.size(), false);
  for (const BnbLayer& layer : result.layers) {
    for (std::size_t i : {layer.weight, layer.state, layer.absmax, layer.quant_map,
                          layer.nested_absmax, layer.nested_quant_map, layer.scale,
                          layer.weight_format}) {
      if (i != kBnbNoTensor) member[i] = true;
    }
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!member[i] && tensors[i].listed && IsFloatDtype(tensors[i].dtype)) {
      result.plain_float_tensors.push_back(i);
    }
  }
  std::sort(result.plain_float_tensors.begin(), result.plain_float_tensors.end(),
            [&](std::size_t a, std::size_t b) { return tensors[a].name < tensors[b].name; });
  return result;
}

bool StreamBnbLayers(const BnbResult& r, TensorSink& sink, Kernel kernel) {
  const TensorTable& c = r.table;
  auto floats = [&](std::size_t i) {
    std::vector<float> v(c[i].element_count);
    if (!v.empty()) std::memcpy(v.data(), c.Data(i), v.size() * 4);
    return v;
  };
  // The per-block scales of a flat or nested layer.
  auto block_scales = [&](const BnbLayer& layer, std::uint64_t nblocks) {
    if (!layer.nested) return floats(layer.absmax);
    std::vector<float> eff(nblocks);
    const std::vector<float> map = floats(layer.nested_quant_map);
    const std::vector<float> nested = floats(layer.nested_absmax);
    BnbNestedAbsmax(c.Data(layer.absmax), nblocks, map.data(), nested.data(),
                    layer.nested_blocksize, layer.nested_offset, eff.data());
    return eff;
  };
  // Layer W handed to the sink as tensor number INDEX in chunks of whole
  // blocks (whole rows for int8), so one chunk of values is held at a time.
  // A transposed 4-bit layer is the exception: its output rows gather from
  // every block, so it is decoded whole and then cut.
  auto stream_layer = [&](const BnbLayer& layer, std::size_t index) {
    const std::uint8_t* data = c.Data(layer.weight);
    switch (layer.kind) {
      case BnbLayerKind::k4bit: {
        const std::vector<float> scales = block_scales(layer, CeilDiv(layer.n, layer.blocksize));
        if (layer.transposed) {  // decoded [c, r] holds the transpose of the [r, c] values
          std::vector<float> values(layer.n);
          BnbDequantize4bit(layer.quant_type, data, layer.n, scales.data(), layer.blocksize,
                            layer.dtype, values.data(), kernel);
          const std::uint64_t rows = layer.shape[1];
          const std::uint64_t columns = layer.shape[0];
          std::vector<float> transposed(values.size());
          for (std::uint64_t i = 0; i < rows; ++i) {
            for (std::uint64_t j = 0; j < columns; ++j) {
              transposed[j * rows + i] = values[i * columns + j];
            }
          }
          return TakeWhole(sink, index, transposed);
        }
        // Chunks start at multiples of kChunkValues = 2^20, and the
        // blocksize is a power of two up to 4096 (BNB-001): every chunk
        // starts on a byte of the packed codes and on a block.
        return StreamRows(sink, index, layer.n, 1,
                          [&](std::uint64_t first, std::uint64_t count, float* out) {
                            BnbDequantize4bit(layer.quant_type, data + first / 2, count,
                                              scales.data() + first / layer.blocksize,
                                              layer.blocksize, layer.dtype, out, kernel);
                          });
      }
      case BnbLayerKind::kBlockwise8: {
        const std::vector<float> scales = block_scales(layer, CeilDiv(layer.n, layer.blocksize));
        const std::vector<float> map = floats(layer.quant_map);
        // As above: chunks start on a block (power-of-two blocksize).
        return StreamRows(sink, index, layer.n, 1,
                          [&](std::uint64_t first, std::uint64_t count, float* out) {
                            BnbDequantizeBlockwise8(data + first, count, map.data(),
                                                    scales.data() + first / layer.blocksize,
                                                    layer.blocksize, layer.dtype, out, kernel);
                          });
      }
      case BnbLayerKind::kInt8Rows: {
        const std::vector<float> scb = floats(layer.scale);
        return StreamRows(sink, index, layer.rows, layer.columns,
                          [&](std::uint64_t row, std::uint64_t count, float* out) {
                            BnbDequantizeInt8Rows(
                                reinterpret_cast<const std::int8_t*>(data) + row * layer.columns,
                                count, layer.columns, scb.data() + row, out, kernel);
                          });
      }
    }
    return false;
  };
  // Every layer's W and every floating tensor of no layer, by name bytes.
  struct Item {
    std::string_view name;
    Shape shape;
    const BnbLayer* layer;  // null: the plain tensor below
    std::size_t plain = 0;
  };
  std::vector<Item> items;
  for (const BnbLayer& layer : r.layers) {
    items.push_back({layer.name, Shape(layer.shape.data(), layer.shape.size()), &layer});
  }
  for (std::size_t i : r.plain_float_tensors) items.push_back({c[i].name, c[i].shape, nullptr, i});
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.name < b.name; });
  std::vector<TensorInfo> plan;
  for (const Item& item : items) plan.push_back({std::string(item.name), item.shape});
  if (!sink.Plan(plan)) return false;
  for (std::size_t index = 0; index < items.size(); ++index) {
    const Item& item = items[index];
    if (item.layer != nullptr) {
      if (!stream_layer(*item.layer, index)) return false;
    } else if (!c.StreamFloat(item.plain, index, sink)) {
      return false;
    }
  }
  return true;
}

qd::Outcome StreamBnbFile(qd::ByteView file, const std::string& file_name, TensorSink& sink,
                          Kernel kernel) {
  BnbResult r = ReadBnb(file, file_name);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (r.refused) return outcome;
  if (r.is_bnb) {
    StreamBnbLayers(r, sink, kernel);
  } else {
    r.table.StreamFloats(sink);
  }
  return outcome;
}

qd::Outcome DecodeBnbFile(qd::ByteView file, const std::string& file_name, Kernel kernel) {
  return CollectStream([&](TensorSink& sink) { return StreamBnbFile(file, file_name, sink, kernel); });
}


bool BnbUsesFp4Code8(const BnbResult& result) {
  for (const BnbLayer& layer : result.layers) {
    if (layer.kind != BnbLayerKind::k4bit || layer.quant_type != Bnb4bitType::kFp4) continue;
    const std::uint8_t* packed = result.table.Data(layer.weight);
    for (std::uint64_t i = 0; i < layer.n; ++i) {
      const int code = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 0x0f;
      if (code == 8) return true;
    }
  }
  return false;
}

}  // namespace qd::codec
