// bnb_internal.h: what the two units of the bitsandbytes oracle share and
// nothing else (not part of the oracle's interface; include it from
// oracles/bnb.cc and oracles/bnb_checks.cc only). It exists because the
// layer checks (bnb_checks.cc: docs/bnb.md "Check order", the quant_state
// JSON and the list layout's state) run on the layers that bnb.cc finds and
// hand bnb.cc the plans it decodes: the layer, state and plan types, the
// findings reporter and the few helpers both sides call are declared here
// once instead of living in two anonymous namespaces as two copies.
#ifndef QUANTDIFF_ORACLES_BNB_INTERNAL_H_
#define QUANTDIFF_ORACLES_BNB_INTERNAL_H_

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/finding.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::bnb_internal {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// Section 1 (bnb.cc): binary32 helpers and the tables.
bool IsFinite(float value);
float LoadF32(const std::uint8_t* p);
const std::uint32_t* TableBits(std::string_view quant_type);
bool IsPowerOfTwoInRange(std::uint64_t value, std::uint64_t low, std::uint64_t high);
std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b);

// Section 2 (bnb.cc): the restored dtype.
enum class RestoredDtype : std::uint8_t { kFloat16, kBFloat16, kFloat32 };
bool ParseRestoredDtype(std::string_view text, RestoredDtype* dtype);

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

// Section 4 (bnb.cc): the layers.

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

constexpr std::string_view kBlockwise8Key = "bnb_blockwise8_quant_state";

// The table's tensors sorted by name (8 bytes a tensor, not a tree node
// holding a copy of its name: issue 9, section 3); Find looks one up.
using TensorIndex = std::vector<const BnbTensor*>;

const BnbTensor* Find(const TensorIndex& index, const std::string& name);
const std::string* FindMetadata(const BnbTable& table, std::string_view key);

// Section 5 (bnb_checks.cc): the quant_state JSON (BNB-101).

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

// Shared by the checks and the decoding: the table and its tensors.

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

// Sections 6, 7 and 8 (bnb_checks.cc): the layer checks; each returns false
// at its first error and fills *plan for an accepted layer.
bool CheckFourBitLayer(const Context& ctx, const Layer& layer, Reporter& report, LayerPlan* plan);
bool CheckBlockwise8Layer(const Context& ctx, const Layer& layer, Reporter& report,
                          LayerPlan* plan);
bool CheckInt8Layer(const Context& ctx, const Layer& layer, Reporter& report, LayerPlan* plan);

}  // namespace qd::oracle::bnb_internal

#endif  // QUANTDIFF_ORACLES_BNB_INTERNAL_H_
