// bnb_pt_layers.cc: the bitsandbytes readers on a .pt file's tensor table
// and the QuantState list mapping (docs/pt.md 6.4, 7). See bnb_pt_layers.h.
#include "codecs/bnb_pt_layers.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/float16.h"
#include "codecs/pt.h"
#include "codecs/pt_quant_layers.h"
#include "codecs/tensor_table.h"

namespace qd::codec {
namespace {

constexpr std::string_view kListState = ".quant_state";  // docs/pt.md 7.2

// Value-model predicates of docs/pt.md 7.3 ("int" is >= 0; a bool is no int).
bool IsIndex(const PtNode& n) { return n.kind == PtKind::kInt && n.integer >= 0; }
bool IsSequence(const PtNode& n) { return n.kind == PtKind::kList || n.kind == PtKind::kTuple; }
bool IsDtypeToken(const PtNode& n) {
  return n.kind == PtKind::kToken && n.token == PtTokenKind::kDtype;
}

// docs/pt.md 7.4 step 2 for the list at node `list` of W: the keys (7.3's
// table), and the pieces as value tensors of the table named
// W.quant_state[...], added in the order met; or the first BNB-101.
BnbListMapping MapQuantStateList(TensorTable* table, std::uint32_t list, const std::string& w) {
  BnbListMapping m;
  BnbStateKeys* keys = &m.keys;
  const PtResult& p = *table->pickle();
  const std::string name = w + std::string(kListState);
  keys->tensor = name;
  keys->at = table->header_offset();  // the list has no bytes of its own (docs/pt.md 7.4)
  auto refuse = [&](const char* field, std::string why, std::int64_t offset) {
    m.refused = true;
    m.field = field;
    m.offset = offset;
    m.message = std::move(why);
    return m;
  };
  auto item = [&](const PtNode& seq, std::size_t k) -> const PtNode& { return p.Node(seq.items[k]); };
  // a. The outer list, item by item (docs/pt.md 7.3's table).
  const PtNode& s = p.Node(list);
  if (s.items.size() != 6 && s.items.size() != 7) {
    return refuse("quant_state",
                  "the QuantState list has " + std::to_string(s.items.size()) + " items, not 6 or 7",
                  keys->at);
  }
  const PtNode& shape = item(s, 1);
  const bool shape_ok = (shape.kind == PtKind::kSize || IsSequence(shape)) &&
                        std::all_of(shape.items.begin(), shape.items.end(),
                                    [&](std::uint32_t d) { return IsIndex(p.Node(d)); });
  const PtNode& nested = item(s, 4);
  const char* wrong = item(s, 0).kind != PtKind::kTensor       ? "item 0 (absmax) is not a tensor"
                      : !shape_ok                              ? "item 1 (shape) is not a list of ints"
                      : !IsDtypeToken(item(s, 2))              ? "item 2 (dtype) is not a dtype"
                      : !IsIndex(item(s, 3))                   ? "item 3 (blocksize) is not an int"
                      : !(nested.kind == PtKind::kNone || (IsSequence(nested) && nested.items.size() == 2))
                          ? "item 4 is neither None nor [offset, state2]"
                      : item(s, 5).kind != PtKind::kStr        ? "item 5 (quant_type) is not a str"
                      : s.items.size() == 7 && item(s, 6).kind != PtKind::kTensor
                          ? "item 6 (quant_map) is not a tensor"
                          : nullptr;
  if (wrong != nullptr) {
    return refuse("quant_state", std::string("QuantState list: ") + wrong, keys->at);
  }
  for (std::uint32_t d : shape.items) keys->shape.push_back(static_cast<std::uint64_t>(p.Node(d).integer));
  keys->dtype = item(s, 2).text;
  keys->blocksize = static_cast<std::uint64_t>(item(s, 3).integer);
  keys->quant_type = item(s, 5).text;
  keys->nested = nested.kind != PtKind::kNone;
  m.absmax = table->AddValueTensor(item(s, 0).tensor, name + "[0]");
  if (s.items.size() == 7) m.quant_map = table->AddValueTensor(item(s, 6).tensor, name + "[6]");
  if (!keys->nested) return m;
  // b. The offset: a floating tensor of one value or a float, finite as binary32.
  const PtNode& offset = item(nested, 0);
  float value = 0.0f;
  bool offset_ok = false;
  std::int64_t value_at = keys->at;  // a non-finite tensor value: that value's offset (7.4)
  if (offset.kind == PtKind::kFloat) {
    value = static_cast<float>(offset.real);
    offset_ok = true;
  } else if (offset.kind == PtKind::kTensor) {
    const PtTensor& t = p.all_tensors[offset.tensor];
    offset_ok = IsFloatDtype(t.dtype) && t.numel == 1 && DecodePtTensor(t, &value);
    if (offset_ok) value_at = static_cast<std::int64_t>(PtElementOffset(t, 0));
  }
  if (!offset_ok) {
    return refuse("nested_offset", "the nested offset is neither a float nor a one-value float tensor",
                  keys->at);
  }
  if (IsNonFiniteF32Bits(std::bit_cast<std::uint32_t>(value))) {
    return refuse("nested_offset", "the nested offset is not finite as binary32", value_at);
  }
  keys->nested_offset = value;
  // c. state2: quantize_blockwise's 7-item list, or the docstring's 6 items.
  const PtNode& state2 = item(nested, 1);
  if (!IsSequence(state2) || (state2.items.size() != 6 && state2.items.size() != 7)) {
    return refuse("quant_state", "the nested state2 is not a list of 6 or 7 items", keys->at);
  }
  if (state2.items.size() == 6) {
    m.state2_without_code = true;
    return m;
  }
  if (item(state2, 0).kind != PtKind::kTensor || item(state2, 1).kind != PtKind::kTensor ||
      !IsIndex(item(state2, 2)) || item(state2, 3).kind != PtKind::kBool ||
      !IsDtypeToken(item(state2, 4))) {
    return refuse("quant_state", "state2 is not [absmax, code, blocksize, nested, dtype, offset, state2]",
                  keys->at);
  }
  keys->nested_blocksize = static_cast<std::uint64_t>(item(state2, 2).integer);
  keys->nested_dtype = item(state2, 4).text;
  m.nested_of_nested = item(state2, 3).boolean || item(state2, 5).kind != PtKind::kNone ||
                       item(state2, 6).kind != PtKind::kNone;
  m.nested_absmax = table->AddValueTensor(item(state2, 0).tensor, name + "[4][1][0]");
  m.nested_quant_map = table->AddValueTensor(item(state2, 1).tensor, name + "[4][1][1]");
  return m;
}

// docs/pt.md 7.2: a value `W.quant_state` (W non-empty) that is a list or
// tuple is the old QuantState list of W; in value table order.
BnbListStates FindQuantStateLists(const PtResult& pickle) {
  BnbListStates states;
  states.map = MapQuantStateList;
  for (const auto& [name, node] : pickle.values) {
    if (name.size() <= kListState.size() ||
        name.compare(name.size() - kListState.size(), kListState.size(), kListState) != 0 ||
        !IsSequence(pickle.Node(node))) {
      continue;
    }
    states.lists.emplace_back(name.substr(0, name.size() - kListState.size()), node);
  }
  return states;
}

}  // namespace

BnbResult ReadPtLayers(qd::ByteView file, const std::string& file_name) {
  PtResult pickle = ReadPt(file, file_name);
  if (pickle.refused) return BnbResult::Refusal(std::move(pickle.findings));
  return ReadPtTableLayers(std::move(pickle), file_name);
}

BnbResult ReadPtTableLayers(PtResult pickle, const std::string& file_name) {
  std::vector<qd::Finding> warnings = std::move(pickle.findings);
  const BnbListStates lists = FindQuantStateLists(pickle);
  return ReadBnbTable(TensorTable::FromPt(std::move(pickle)), file_name, std::move(warnings), lists);
}

qd::Outcome StreamPtFile(qd::ByteView file, const std::string& file_name, TensorSink& sink,
                         const std::vector<qd::SideFile>& configs, std::string* format) {
  BnbResult r = ReadPtLayers(file, file_name);
  PtQuantLayers quant;
  if (!r.refused && !r.is_bnb &&
      ReadPtQuantLayers(r.table, file_name, configs, &r.findings, &quant)) {
    // Section 6.5: GPTQ or AWQ layers, read with the configs.
    if (format != nullptr) *format = quant.format();
    qd::Outcome outcome{quant.refused(), std::move(quant.findings()), {}};
    if (!outcome.refused) StreamPtQuantLayers(quant, sink);
    return outcome;
  }
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (r.refused) return outcome;
  if (r.is_bnb) {
    StreamBnbLayers(r, sink);
    return outcome;
  }
  // Section 6.3: the table's floating tensors in 6.4's order.
  r.table.StreamFloats(sink);
  return outcome;
}

qd::Outcome CheckPtFile(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs) {
  DecliningSink declining;
  return StreamPtFile(file, file_name, declining, configs);
}

qd::Outcome DecodePtFile(qd::ByteView file, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs) {
  return CollectStream([&](TensorSink& sink) { return StreamPtFile(file, file_name, sink, configs); });
}

}  // namespace qd::codec
