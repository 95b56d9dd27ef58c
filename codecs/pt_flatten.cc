// pt_flatten.cc: the state dict (docs/pt.md section 6): flattening the root
// dict into the tensor and value tables (6.1) under the output bound of
// section 3, the walk of every value (6.2), and lookups in the tables.
// See pt_reader.h.
#include <string>
#include <utility>
#include <vector>

#include "codecs/pt_reader.h"

namespace qd::codec::pt_internal {

// ---- section 6 ----
bool Reader::Flatten(std::uint32_t dict, const std::string& prefix, u64 depth) {
  const u64 ds = r_.pickle_begin;
  if (depth > kMaxDepth) {
    Error("PT-012", "depth", ds, "dicts nested deeper than 64");
    return false;
  }
  const std::size_t count = N(dict).items.size();
  for (std::size_t k = 0; k < count; k += 2) {
    if (++visits_ > kMaxVisits) {
      Error("PT-012", "depth", ds, "more than 1048576 nodes visited");
      return false;
    }
    const std::uint32_t key = N(dict).items[k], value = N(dict).items[k + 1];
    std::string text = N(key).kind == PtKind::kStr ? N(key).text : std::to_string(N(key).integer);
    if (text.empty()) {
      Error("PT-017", "key", ds, "empty dict key");
      return false;
    }
    std::string name = prefix + text;
    const PtKind kind = N(value).kind;
    if (kind == PtKind::kDict) {
      if (!Flatten(value, name + ".", depth + 1)) return false;
      continue;
    }
    if (!names_.insert(name).second) {
      Error("PT-017", "key", ds, "two flattened names collide", name);
      return false;
    }
    // Section 3: names' bytes plus tensors' C-order bytes within n + 2^26.
    output_ += name.size();
    if (output_ > output_limit_) {
      Error("PT-012", "container", ds, "flattened names and tensors exceed the output bound");
      return false;
    }
    if (kind == PtKind::kTensor) {
      const PtTensor& view = r_.all_tensors[N(value).tensor];
      output_ += static_cast<u128>(view.numel) * PtItemSize(view.dtype);
      if (output_ > output_limit_) {
        Error("PT-012", "container", ds, "flattened names and tensors exceed the output bound");
        return false;
      }
      // The entry names the view by index: a tensor under many names is held once.
      r_.tensors.push_back({std::move(name), N(value).tensor});
    } else {
      r_.values.emplace_back(std::move(name), value);
      value_depths_.push_back(depth + 1);
    }
  }
  return true;
}


bool Reader::WalkValue(std::uint32_t node, u64 depth) {
  // Iterative depth-first walk: (node, depth) pairs, children pushed in reverse.
  std::vector<std::pair<std::uint32_t, u64>> todo;
  todo.emplace_back(node, depth);
  const u64 ds = r_.pickle_begin;
  while (!todo.empty()) {
    const auto [i, d] = todo.back();
    todo.pop_back();
    if (++visits_ > kMaxVisits) {
      Error("PT-012", "depth", ds, "more than 1048576 nodes visited");
      return false;
    }
    if (d > kMaxDepth) {
      Error("PT-012", "depth", ds, "values nested deeper than 64");
      return false;
    }
    const PtNode& x = N(i);
    if (x.kind == PtKind::kTuple || x.kind == PtKind::kList) {
      for (std::size_t k = x.items.size(); k-- > 0;) todo.emplace_back(x.items[k], d + 1);
    } else if (x.kind == PtKind::kDict) {
      if (x.attributes != kPtNoNode) todo.emplace_back(x.attributes, d + 1);
      for (std::size_t k = x.items.size(); k >= 2; k -= 2) todo.emplace_back(x.items[k - 1], d + 1);
    }
  }
  return true;
}

}  // namespace qd::codec::pt_internal

namespace qd::codec {

const PtNode* PtResult::Value(std::string_view name) const {
  for (const auto& [n, node] : values) {
    if (n == name) return &nodes[node];
  }
  return nullptr;
}

const PtTensor* PtResult::Tensor(std::string_view name) const {
  for (const PtTableEntry& e : tensors) {
    if (e.name == name) return &all_tensors[e.tensor];
  }
  return nullptr;
}

const PtNode* PtResult::Item(const PtNode& dict, std::string_view key) const {
  if (dict.kind != PtKind::kDict) return nullptr;
  for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const PtNode& kn = nodes[dict.items[k]];
    if (kn.kind == PtKind::kStr && kn.text == key) return &nodes[dict.items[k + 1]];
  }
  return nullptr;
}

}  // namespace qd::codec
