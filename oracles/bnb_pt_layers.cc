// bnb_pt_layers.cc: docs/pt.md section 8 step 8 and section 7, joining
// oracles/pt.h and oracles/bnb.h. See bnb_pt_layers.h.
#include "oracles/bnb_pt_layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include "oracles/finding.h"
#include "oracles/safetensors.h"
#include "oracles/pt_quant_layers.h"

namespace qd::oracle {
namespace {

constexpr std::string_view kListSuffix = ".quant_state";  // docs/pt.md 7.2
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// Product of the dimensions: section 5.1 bounds the numel of every tensor
// the reader accepted by 2^63 - 1, so the product cannot overflow.
std::uint64_t Numel(const std::vector<std::uint64_t>& shape) {
  std::uint64_t count = 1;
  for (const std::uint64_t dimension : shape) count *= dimension;
  return count;
}

// An empty tensor's bytes are still a valid pointer (JSON of 0 bytes).
const std::uint8_t* NonNull(const std::vector<std::uint8_t>& bytes) {
  static const std::uint8_t kNothing = 0;
  return bytes.empty() ? &kNothing : bytes.data();
}

// A .pt tensor (table entry or value) seen as a BnbTensor: docs/pt.md 6.4.
// bytes: the materialised C-order bytes when given, else materialised on
// first use (a tensor inside a value). shape and layout are the table's or
// the value graph's, which outlive the BnbTable: the closures keep pointers
// to them, not copies (one table entry costs no copy of its layout).
BnbTensor PtTensor(qd::ByteView file, const std::string& name, const std::string& dtype,
                   const std::vector<std::uint64_t>& shape, const PtTensorLayout& layout,
                   const std::vector<std::uint8_t>* materialised) {
  BnbTensor tensor;
  tensor.name = name;
  tensor.dtype = dtype;
  tensor.shape = shape;
  const std::vector<std::uint64_t>* shape_at = &shape;
  const PtTensorLayout* layout_at = &layout;
  const std::uint64_t count = Numel(shape);
  tensor.element_count = count;
  const std::uint64_t isz = layout.item_size == 0 ? 1 : layout.item_size;
  tensor.byte_length = count > kU64Max / isz ? kU64Max : count * isz;
  tensor.begin = layout.begin;
  tensor.end = layout.end;
  if (materialised != nullptr) {
    tensor.bytes = [materialised]() { return NonNull(*materialised); };
  } else {
    auto cache = std::make_shared<std::vector<std::uint8_t>>();
    auto ready = std::make_shared<bool>(false);
    tensor.bytes = [file, shape_at, layout_at, cache, ready]() {
      if (!*ready) {
        *cache = PtTensorCOrderBytes(file, *shape_at, *layout_at);
        *ready = true;
      }
      return NonNull(*cache);
    };
  }
  tensor.byte_offset = [shape_at, layout_at](std::uint64_t k) {
    return static_cast<std::int64_t>(PtByteOffset(*shape_at, *layout_at, k));
  };
  return tensor;
}

// ---------------------------------------------------------------------------
// Section 7: the list layout's state (7.3 and 7.4 step 2).

bool IsSequence(const PtValueNode& node) {
  return node.kind == PtValueKind::kTuple || node.kind == PtValueKind::kList;
}

// docs/pt.md 7.3: "int" is an int value >= 0 (a bool is not an int).
bool IsListInt(const PtValueNode& node) {
  return node.kind == PtValueKind::kInt && node.integer >= 0;
}

// S[1]: a Size, tuple or list of ints.
bool ListShape(const PtValueGraph& graph, const PtValueNode& node,
               std::vector<std::uint64_t>* shape) {
  shape->clear();
  if (node.kind == PtValueKind::kSize) {
    for (const std::int64_t value : node.ints) {
      if (value < 0) return false;
      shape->push_back(static_cast<std::uint64_t>(value));
    }
    return true;
  }
  if (!IsSequence(node)) return false;
  for (const std::uint32_t item : node.items) {
    if (!IsListInt(graph.nodes[item])) return false;
    shape->push_back(static_cast<std::uint64_t>(graph.nodes[item].integer));
  }
  return true;
}

// 7.4 step 2 (BNB-101 a, b, c, the first failure wins) for the list at
// `list` named list_name (W.quant_state): the QuantState of 7.3's table, the
// pieces (7.3: W.quant_state[i], W.quant_state[4][0], W.quant_state[4][1][j])
// and the facts step 7 checks.
BnbListMapping MapListState(qd::ByteView file, const PtValueGraph& graph, std::int64_t header,
                            std::uint32_t list, const std::string& list_name) {
  BnbListMapping m;
  const auto node = [&graph](std::uint32_t index) -> const PtValueNode& {
    return graph.nodes[index];
  };
  const auto fail = [&m](const char* field, std::int64_t offset, std::string message) {
    m.refused = true;
    m.field = field;
    m.offset = offset;
    m.message = std::move(message);
    return std::move(m);
  };
  const auto piece = [&](std::uint32_t index, const std::string& name) {
    const PtValueNode& value = node(index);
    return std::make_unique<BnbTensor>(
        PtTensor(file, name, value.dtype, value.shape, value.layout, nullptr));
  };
  const std::vector<std::uint32_t>& s = node(list).items;

  // a. (field quant_state) the outer list's items.
  if (s.size() != 6 && s.size() != 7) {
    return fail("quant_state", header,
                "the list state has " + std::to_string(s.size()) + " items, 6 or 7 are needed");
  }
  if (node(s[0]).kind != PtValueKind::kTensor) {
    return fail("quant_state", header, "item 0 (absmax) of the list state is not a tensor");
  }
  std::vector<std::uint64_t> shape;
  if (!ListShape(graph, node(s[1]), &shape)) {
    return fail("quant_state", header,
                "item 1 (shape) of the list state is not a Size, tuple or list of ints");
  }
  if (node(s[2]).kind != PtValueKind::kDtype) {
    return fail("quant_state", header, "item 2 (dtype) of the list state is not a dtype");
  }
  if (!IsListInt(node(s[3]))) {
    return fail("quant_state", header, "item 3 (blocksize) of the list state is not an int");
  }
  const PtValueNode& s4 = node(s[4]);
  const bool nested = s4.kind != PtValueKind::kNone;
  if (nested && (!IsSequence(s4) || s4.items.size() != 2)) {
    return fail("quant_state", header,
                "item 4 of the list state is neither None nor [offset, state2]");
  }
  if (node(s[5]).kind != PtValueKind::kStr) {
    return fail("quant_state", header, "item 5 (quant_type) of the list state is not a str");
  }
  if (s.size() == 7 && node(s[6]).kind != PtValueKind::kTensor) {
    return fail("quant_state", header, "item 6 (quant_map) of the list state is not a tensor");
  }
  m.quant_type = node(s[5]).text;
  m.blocksize = static_cast<std::uint64_t>(node(s[3]).integer);
  m.dtype = node(s[2]).text;
  m.shape = shape;
  m.absmax = piece(s[0], list_name + "[0]");
  if (s.size() == 7) m.quant_map = piece(s[6], list_name + "[6]");
  m.nested = nested;
  if (!nested) return m;

  // b. (field nested_offset) a floating tensor of one element or a float,
  // finite in binary32.
  const std::uint32_t offset_node = s4.items[0];
  const PtValueNode& offset = node(offset_node);
  if (offset.kind == PtValueKind::kTensor && IsFloatDtype(offset.dtype) && Numel(offset.shape) == 1) {
    m.offset_tensor = piece(offset_node, list_name + "[4][0]");
    // Converted to binary32 as docs/pt.md 6.3 does (F64 rounded to even).
    const float value = FloatElement(m.offset_tensor->dtype, m.offset_tensor->bytes(), 0);
    if (!std::isfinite(value)) {
      // A value of a piece tensor is at fault: its element offset (7.4).
      return fail("nested_offset", m.offset_tensor->byte_offset(0),
                  "the nested offset W.quant_state[4][0] is not finite in binary32");
    }
    m.nested_offset = static_cast<double>(value);  // exact; decoding narrows it back
  } else if (offset.kind == PtValueKind::kFloat) {
    // Rounded to binary32 at decoding, as docs/bnb.md's fl32 of the JSON number.
    if (!std::isfinite(static_cast<float>(offset.number))) {
      return fail("nested_offset", header,
                  "the nested offset W.quant_state[4][0] is not finite in binary32");
    }
    m.nested_offset = offset.number;
  } else {
    return fail("nested_offset", header,
                "the nested offset W.quant_state[4][0] is neither a floating tensor of one "
                "element nor a float");
  }

  // c. (field quant_state) state2: quantize_blockwise's 7 items, or the
  // docstring's 6 (refused at step 7: it has no code).
  const PtValueNode& state2 = node(s4.items[1]);
  if (!IsSequence(state2) || (state2.items.size() != 6 && state2.items.size() != 7)) {
    return fail("quant_state", header,
                "state2 (item 4[1]) of the list state is not a list or tuple of 6 or 7 items");
  }
  if (state2.items.size() == 6) {
    m.short_state2 = true;
    return m;
  }
  const std::vector<std::uint32_t>& t = state2.items;
  if (node(t[0]).kind != PtValueKind::kTensor || node(t[1]).kind != PtValueKind::kTensor ||
      !IsListInt(node(t[2])) || node(t[3]).kind != PtValueKind::kBool ||
      node(t[4]).kind != PtValueKind::kDtype) {
    return fail("quant_state", header,
                "state2 (item 4[1]) of the list state is not [absmax tensor, code tensor, "
                "blocksize int, nested bool, dtype, offset, state2]");
  }
  m.nested_blocksize = static_cast<std::uint64_t>(node(t[2]).integer);
  m.nested_dtype = node(t[4]).text;
  m.nested_absmax = piece(t[0], list_name + "[4][1][0]");
  m.nested_quant_map = piece(t[1], list_name + "[4][1][1]");
  m.nested_of_nested = node(t[3]).integer != 0 || node(t[5]).kind != PtValueKind::kNone ||
                       node(t[6]).kind != PtValueKind::kNone;
  return m;
}

// docs/pt.md 7.2: the value entries the bitsandbytes list layout looks at
// (W.quant_state, W non-empty, a list or tuple). Without a caller asking
// for the whole graph only these are exported.
bool IsListStateCandidate(const std::string& name, bool is_sequence) {
  return is_sequence && name.size() > kListSuffix.size() &&
         name.compare(name.size() - kListSuffix.size(), kListSuffix.size(), kListSuffix) == 0;
}

// ---------------------------------------------------------------------------
// Section 8: ReadPtFile.

// Section 6.3's output, tensor by tensor in 6.4's order, a view a chunk of
// kChunkValues elements at a time (never a whole broadcast view in memory).
bool StreamPtTable(qd::ByteView file, const std::vector<PtTensorBytes>& table, qd::TensorSink& sink) {
  const std::vector<std::size_t> order = PtDecodedOrder(table);
  std::vector<qd::TensorInfo> plan;
  plan.reserve(order.size());
  for (const std::size_t i : order) plan.push_back({table[i].name, table[i].shape});
  if (!sink.Plan(plan)) return false;
  for (std::size_t index = 0; index < order.size(); ++index) {
    const PtTensorBytes& tensor = table[order[index]];
    const bool more = qd::StreamRows(sink, index, Numel(tensor.shape), 1,
                                     [&](std::uint64_t first, std::uint64_t count, float* out) {
                                       PtDecodeRange(file, tensor, first, count, out);
                                     });
    if (!more) return false;
  }
  return true;
}

qd::Outcome StreamPtFileUnguarded(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink,
                                  const std::vector<qd::SideFile>& configs, std::string* format,
                                  std::vector<PtTensorBytes>* tensors_out,
                                  std::vector<PtValueEntry>* values_out, PtValueGraph* graph_out) {
  PtTables tables;
  // Unless the caller asks for the table's bytes, a tensor is read through
  // its layout: a broadcast view never exists whole. One of at most
  // kHeldBytes is held all the same: cheaper than the closures that read it
  // later (BnbTableFromPt).
  constexpr std::uint64_t kHeldBytes = 256;
  qd::Outcome outcome = ReadPtTables(file, file_name, values_out != nullptr,
                                     graph_out != nullptr ? nullptr : IsListStateCandidate, &tables,
                                     tensors_out != nullptr ? UINT64_MAX : kHeldBytes);
  if (outcome.refused) return outcome;  // steps 1..7
  // Step 8 (6.4, 7): the bitsandbytes readers on the tensor table. Their
  // findings follow the PT warnings; a file with a layer decodes as
  // docs/bnb.md says, any other as section 6.3 says.
  const BnbTable bnb = BnbTableFromPt(file, tables.pickle_start, tables.tensors, tables.graph);
  if (StreamBnbTable(bnb, file_name, &outcome, sink)) {
    // docs/bnb.md's output, chunk by chunk, once every check has passed.
    if (outcome.refused) return outcome;  // the tables are given on accept only
  } else {
    // Section 6.5: with configs, GPTQ or AWQ layers are read by their readers.
    MergedTable quant_table;
    std::string quant_format;
    if (StreamPtQuantShards({{file, &tables}}, file_name, configs, &outcome, sink, &quant_format,
                            &quant_table)) {
      if (format != nullptr) *format = quant_format;
      if (outcome.refused) return outcome;
    } else {
      StreamPtTable(file, tables.tensors, sink);
    }
  }
  if (tensors_out != nullptr) *tensors_out = std::move(tables.tensors);
  if (values_out != nullptr) *values_out = std::move(tables.values);
  if (graph_out != nullptr) *graph_out = std::move(tables.graph);
  return outcome;
}

// StreamPtFileUnguarded with std::bad_alloc (the output of an accepted file
// that does not fit in memory) as PT-012; nothing escapes.
qd::Outcome StreamPtFileGuarded(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink,
                                const std::vector<qd::SideFile>& configs, std::string* format,
                                std::vector<PtTensorBytes>* tensors, std::vector<PtValueEntry>* values,
                                PtValueGraph* graph) {
  if (tensors != nullptr) tensors->clear();
  if (values != nullptr) values->clear();
  if (graph != nullptr) *graph = PtValueGraph();
  try {
    return StreamPtFileUnguarded(file, file_name, sink, configs, format, tensors, values, graph);
  } catch (...) {
    qd::Outcome outcome;
    outcome.refused = true;
    outcome.findings.push_back(NewFinding("PT-012", qd::Severity::kError, file_name, std::string(),
                                          "container", 0, "out of memory"));
    if (tensors != nullptr) tensors->clear();
    if (values != nullptr) values->clear();
    if (graph != nullptr) *graph = PtValueGraph();
    return outcome;
  }
}

}  // namespace

BnbTable BnbTableFromPt(qd::ByteView file, std::int64_t pickle_start,
                        const std::vector<PtTensorBytes>& tensors, const PtValueGraph& graph) {
  BnbTable table;
  table.header_offset = pickle_start;  // docs/pt.md 6.4: header-level facts point at data.pkl
  table.tensors.reserve(tensors.size());
  for (const PtTensorBytes& source : tensors) {
    // A table read without its bytes (ReadPtTables' materialise) reads them
    // on first use, as a tensor inside a value does.
    const std::uint64_t isz = source.layout.item_size == 0 ? 1 : source.layout.item_size;
    const bool held = source.bytes.size() == Numel(source.shape) * isz;
    table.tensors.push_back(PtTensor(file, source.name, source.dtype, source.shape, source.layout,
                                     held ? &source.bytes : nullptr));
  }
  std::sort(table.tensors.begin(), table.tensors.end(), [](const BnbTensor& a, const BnbTensor& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  // docs/pt.md 7.2: a value entry W.quant_state (W non-empty) that is a
  // list or tuple is a list-layout layer of W.
  for (const PtValueRoot& entry : graph.entries) {
    if (!IsListStateCandidate(entry.name, IsSequence(graph.nodes[entry.node]))) continue;
    table.lists.push_back({entry.name.substr(0, entry.name.size() - kListSuffix.size()), entry.node});
  }
  table.map_list = [file, &graph, pickle_start](std::uint32_t node, const std::string& list_name) {
    return MapListState(file, graph, pickle_start, node, list_name);
  };
  return table;
}

qd::Outcome StreamPtFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink,
                         const std::vector<qd::SideFile>& configs, std::string* format) {
  return StreamPtFileGuarded(file, file_name, sink, configs, format, nullptr, nullptr, nullptr);
}

qd::Outcome ReadPtFile(qd::ByteView file, const std::string& file_name,
                       std::vector<PtTensorBytes>* tensors, std::vector<PtValueEntry>* values,
                       PtValueGraph* graph) {
  // The stream, collected.
  std::vector<qd::DecodedTensor> decoded;
  qd::CollectingSink sink(&decoded);
  qd::Outcome outcome = StreamPtFileGuarded(file, file_name, sink, {}, nullptr, tensors, values, graph);
  if (!outcome.refused) outcome.tensors = std::move(decoded);
  return outcome;
}

}  // namespace qd::oracle
