// pt_flatten.cc: the oracle's state dict (docs/pt.md section 6): the root
// dict flattened into the tensor and value tables (6.1) within section 3's
// output bound, the walk of every value (6.2), and the value table as text
// and as a graph. See pt_model.h.
#include <cstdio>
#include <cstring>

#include "oracles/pt_model.h"

namespace qd::oracle::pt_internal {
namespace {

class Flattener {
 public:
  Flattener(Report& report, const Model& model, std::uint64_t pkl_start, std::uint64_t file_size)
      : report_(report), model_(model), offset_(pkl_start),
        budget_(static_cast<u128>(file_size) + kOutputSlack) {}

  bool Flatten(std::uint32_t dict_node, const std::string& prefix, std::uint64_t depth);
  // Section 6.2, after the whole root is flattened: every value entry in
  // table order.
  bool WalkValues();

  std::vector<TableEntry> table;

 private:
  bool Fail(const char* rule, const char* field, const std::string& message,
            const std::string& tensor = std::string()) {
    return report_.Refuse(rule, field, offset_, message, tensor);
  }
  bool Visit(std::uint64_t depth) {
    visits_ += 1;
    if (visits_ > kMaxNodes) return Fail("PT-012", "depth", "more than 1048576 nodes visited");
    if (depth > kMaxDepth) return Fail("PT-012", "depth", "nesting deeper than 64");
    return true;
  }
  // One item of a flattened dict (section 6.1: every item is one visit).
  bool Count() {
    visits_ += 1;
    if (visits_ > kMaxNodes) return Fail("PT-012", "depth", "more than 1048576 nodes visited");
    return true;
  }
  bool Spend(u128 bytes) {
    used_ += bytes;
    if (used_ > budget_) return Fail("PT-012", "container", "flattened names and tensor bytes exceed file size + 2^26");
    return true;
  }
  bool Walk(std::uint32_t node, std::uint64_t depth);

  Report& report_;
  const Model& model_;
  std::uint64_t offset_;
  u128 budget_;
  u128 used_ = 0;
  std::uint64_t visits_ = 0;
  std::set<std::string> names_;
};

bool Flattener::Walk(std::uint32_t node, std::uint64_t depth) {
  if (!Visit(depth)) return false;
  const Node& n = model_.nodes[node];
  if (n.kind == Kind::kTuple || n.kind == Kind::kList) {
    for (const std::uint32_t item : model_.seqs[n.a]) {
      if (!Walk(item, depth + 1)) return false;
    }
  } else if (n.kind == Kind::kDict) {
    const Dict& dict = model_.dicts[n.a];
    for (const auto& item : dict.items) {
      if (!Walk(item.second, depth + 1)) return false;
    }
    if (dict.attrs >= 0 && !Walk(static_cast<std::uint32_t>(dict.attrs), depth + 1)) return false;
  }
  return true;
}

bool Flattener::Flatten(std::uint32_t dict_node, const std::string& prefix, std::uint64_t depth) {
  if (depth > kMaxDepth) return Fail("PT-012", "depth", "dicts nested deeper than 64");
  const Dict& dict = model_.dicts[model_.nodes[dict_node].a];
  for (const auto& item : dict.items) {
    if (!Count()) return false;  // every item of a flattened dict is one visit
    const Node& key = model_.nodes[item.first];
    std::string text;
    if (key.kind == Kind::kStr) {
      text = std::string(model_.Str(item.first));
    } else {
      text = std::to_string(key.a);
    }
    if (text.empty()) return Fail("PT-017", "key", "empty dict key");
    const std::string name = prefix + text;
    const Node& value = model_.nodes[item.second];
    if (value.kind == Kind::kDict) {
      if (!Flatten(item.second, name + ".", depth + 1)) return false;
      continue;
    }
    if (names_.count(name) != 0) return Fail("PT-017", "key", "two flattened names collide", name);
    names_.insert(name);
    // Section 3: a table entry's name bytes, then a tensor's C-order bytes.
    if (!Spend(name.size())) return false;
    TableEntry entry;
    entry.name = name;
    entry.node = item.second;
    entry.is_tensor = value.kind == Kind::kTensor;
    entry.depth = depth + 1;
    if (entry.is_tensor) {
      const Tensor& tensor = model_.tensors[value.a];
      const Storage& storage = model_.storages[tensor.storage];
      if (!Spend(static_cast<u128>(tensor.numel) * kDtypes[storage.dtype].item_size)) return false;
    }
    table.push_back(std::move(entry));
  }
  return true;
}

bool Flattener::WalkValues() {
  for (const TableEntry& entry : table) {
    if (!entry.is_tensor && !Walk(entry.node, entry.depth)) return false;
  }
  return true;
}

}  // namespace

bool FlattenTable(Report& report, const Model& model, std::uint64_t pkl_start,
                  std::uint64_t file_size, std::uint32_t root, std::vector<TableEntry>* table) {
  Flattener flattener(report, model, pkl_start, file_size);
  const bool ok = flattener.Flatten(root, "", 1) && flattener.WalkValues();
  *table = std::move(flattener.table);
  return ok;
}

// The value table's text form (pt.h).
void Render(const Model& model, std::uint32_t node, std::string* out) {
  if (out->size() >= kRenderCap) return;
  const Node& n = model.nodes[node];
  switch (n.kind) {
    case Kind::kNone:
      *out += "None";
      break;
    case Kind::kBool:
      *out += n.a != 0 ? "True" : "False";
      break;
    case Kind::kInt:
      *out += std::to_string(n.a);
      break;
    case Kind::kFloat: {
      double value = 0.0;
      std::memcpy(&value, &n.b, sizeof value);
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%.17g", value);
      *out += buffer;
      break;
    }
    case Kind::kStr: {
      *out += '\'';
      for (const char ch : model.Str(node)) {
        if (ch == '\\' || ch == '\'') *out += '\\';
        *out += ch;
        if (out->size() >= kRenderCap) return;
      }
      *out += '\'';
      break;
    }
    case Kind::kTuple:
    case Kind::kList: {
      const std::vector<std::uint32_t>& items = model.seqs[n.a];
      *out += n.kind == Kind::kTuple ? '(' : '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += ", ";
        Render(model, items[i], out);
        if (out->size() >= kRenderCap) return;
      }
      if (n.kind == Kind::kTuple && items.size() == 1) *out += ',';
      *out += n.kind == Kind::kTuple ? ')' : ']';
      break;
    }
    case Kind::kDict: {
      const Dict& dict = model.dicts[n.a];
      if (dict.ordered) *out += "OrderedDict(";
      *out += '{';
      for (std::size_t i = 0; i < dict.items.size(); ++i) {
        if (i > 0) *out += ", ";
        Render(model, dict.items[i].first, out);
        *out += ": ";
        Render(model, dict.items[i].second, out);
        if (out->size() >= kRenderCap) return;
      }
      *out += '}';
      if (dict.attrs >= 0) {
        *out += " attrs=";
        Render(model, static_cast<std::uint32_t>(dict.attrs), out);
      }
      if (dict.ordered) *out += ')';
      break;
    }
    case Kind::kSize: {
      *out += "torch.Size([";
      const std::vector<std::int64_t>& values = model.sizes[n.a];
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (i > 0) *out += ", ";
        *out += std::to_string(values[i]);
      }
      *out += "])";
      break;
    }
    case Kind::kToken:
      *out += TokenText(static_cast<int>(n.a));
      break;
    case Kind::kStorage: {
      const Storage& storage = model.storages[n.a];
      *out += std::string("storage(") + kDtypes[storage.dtype].code + ", '" + storage.key + "', " +
              std::to_string(storage.numel) + ")";
      break;
    }
    case Kind::kTensor: {
      const Tensor& tensor = model.tensors[n.a];
      *out += std::string("tensor(") + kDtypes[model.storages[tensor.storage].dtype].code + ", [";
      for (std::size_t i = 0; i < tensor.size.size(); ++i) {
        if (i > 0) *out += ", ";
        *out += std::to_string(tensor.size[i]);
      }
      *out += "])";
      break;
    }
  }
}

std::uint32_t GraphExport::Add(std::uint32_t node) {
  const auto done = done_.find(node);
  if (done != done_.end()) return done->second;
  const std::uint32_t index = static_cast<std::uint32_t>(graph_->nodes.size());
  graph_->nodes.emplace_back();
  done_[node] = index;
  PtValueNode out;  // filled here, stored after the children (nodes may move)
  const Node& n = model_.nodes[node];
  switch (n.kind) {
    case Kind::kNone:
      out.kind = PtValueKind::kNone;
      break;
    case Kind::kBool:
      out.kind = PtValueKind::kBool;
      out.integer = n.a;
      break;
    case Kind::kInt:
      out.kind = PtValueKind::kInt;
      out.integer = n.a;
      break;
    case Kind::kFloat:
      out.kind = PtValueKind::kFloat;
      std::memcpy(&out.number, &n.b, sizeof out.number);
      break;
    case Kind::kStr:
      out.kind = PtValueKind::kStr;
      out.text = std::string(model_.Str(node));
      break;
    case Kind::kTuple:
    case Kind::kList:
      out.kind = n.kind == Kind::kTuple ? PtValueKind::kTuple : PtValueKind::kList;
      for (const std::uint32_t item : model_.seqs[n.a]) out.items.push_back(Add(item));
      break;
    case Kind::kDict: {
      const Dict& dict = model_.dicts[n.a];
      out.kind = PtValueKind::kDict;
      out.ordered = dict.ordered;
      for (const auto& item : dict.items) {
        out.items.push_back(Add(item.first));
        out.items.push_back(Add(item.second));
      }
      if (dict.attrs >= 0) out.attrs = Add(static_cast<std::uint32_t>(dict.attrs));
      break;
    }
    case Kind::kSize:
      out.kind = PtValueKind::kSize;
      out.ints = model_.sizes[n.a];
      break;
    case Kind::kToken: {
      const int token = static_cast<int>(n.a);
      out.kind = token >= kDtypeBase ? PtValueKind::kDtype : PtValueKind::kToken;
      out.text = TokenText(token);
      break;
    }
    case Kind::kStorage: {
      const Storage& storage = model_.storages[n.a];
      out.kind = PtValueKind::kStorage;
      out.dtype = kDtypes[storage.dtype].code;
      out.text = storage.key;
      out.integer = storage.numel;
      break;
    }
    case Kind::kTensor: {
      const Tensor& tensor = model_.tensors[n.a];
      out.kind = PtValueKind::kTensor;
      out.dtype = kDtypes[model_.storages[tensor.storage].dtype].code;
      out.shape = ShapeOf(tensor);
      out.layout = LayoutOf(model_, tensor, big_endian_);
      break;
    }
  }
  graph_->nodes[index] = std::move(out);
  return index;
}

}  // namespace qd::oracle::pt_internal
