// pt_pickle.cc: the oracle's opcode walk of data.pkl (docs/pt.md 4.1, 4.3,
// 4.4, 4.5, 4.6) and the tensors it rebuilds (5.1). Every opcode of the
// subset has one handler in an opcode -> handler table; an opcode with none
// is PT-013. Nothing is imported, called or unpickled. See pt_model.h.
#include <array>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "oracles/bytes.h"
#include "oracles/json.h"
#include "oracles/pt_model.h"

namespace qd::oracle::pt_internal {
namespace {

bool IsCallableToken(int token) { return token >= 0 && token <= 3; }

// -1 when (module, name) is not allow-listed (4.3).
int LookupGlobal(std::string_view module, std::string_view name) {
  if (module == "collections" && name == "OrderedDict") return kOrderedDict;
  if (module == "torch._utils" && name == "_rebuild_tensor_v2") return kRebuildTensorV2;
  if (module == "torch._utils" && name == "_rebuild_parameter") return kRebuildParameter;
  if (module == "torch") {
    if (name == "Size") return kTorchSize;
    for (int i = 0; i < 10; ++i) {
      if (name == kDtypes[i].storage_class) return kStorageBase + i;
      if (name == kDtypes[i].torch_name) return kDtypeBase + i;
    }
  }
  return -1;
}

}  // namespace

std::string TokenText(int token) {
  if (token == kOrderedDict) return "collections.OrderedDict";
  if (token == kRebuildTensorV2) return "torch._utils._rebuild_tensor_v2";
  if (token == kRebuildParameter) return "torch._utils._rebuild_parameter";
  if (token == kTorchSize) return "torch.Size";
  if (token >= kDtypeBase) return kDtypes[token - kDtypeBase].torch_name;
  return std::string("torch.") + kDtypes[token - kStorageBase].storage_class;
}

namespace {

// ---------------------------------------------------------------------------
// The opcode walk.

class Walker {
 public:
  Walker(qd::ByteView file, Report& report, const Records& records, Model* model)
      : f_(file.data), report_(report), records_(records), model_(model),
        ds_(records.pkl_start), size_(records.pkl_size) {}

  // The root node on success.
  bool Run(std::uint32_t* root);

  std::set<std::string> named;  // storage keys named by a persistent ID

 private:
  bool Fail(const char* rule, const char* field, const std::string& message) {
    return report_.Refuse(rule, field, ds_ + op_, message);
  }
  bool Malformed(const std::string& message) { return Fail("PT-013", "opcode", message); }
  bool Need(std::uint64_t n) {
    if (size_ - pos_ < n) return Malformed("truncated operand");
    return true;
  }
  // docs/pt.md 4.4: every push makes a new value except BINGET's (Get),
  // counted after the stack limit.
  bool Push(std::uint32_t node, bool new_value = true) {
    if (saved_ + stack_.size() + 1 > kMaxStack) return Fail("PT-012", "stack", "too many stack items");
    if (new_value && !ValueMade()) return false;
    stack_.push_back(node);
    return true;
  }
  bool ValueMade() {
    ++values_made_;
    if (values_made_ > kMaxValuesMade) return Fail("PT-012", "container", "more than 2^21 values created");
    return true;
  }
  std::uint32_t Pop() {
    const std::uint32_t node = stack_.back();
    stack_.pop_back();
    return node;
  }
  bool PopMark(std::vector<std::uint32_t>* items) {
    if (marks_.empty()) return Malformed("no open mark");
    *items = std::move(stack_);
    stack_ = std::move(marks_.back());
    marks_.pop_back();
    saved_ -= stack_.size();
    return true;
  }
  bool Memo(std::uint64_t index) {
    if (stack_.empty()) return Malformed("memo put on an empty stack");
    if (memo_.find(index) == memo_.end() && memo_.size() >= kMaxMemo) {
      return Fail("PT-012", "memo", "too many memo entries");
    }
    memo_[index] = stack_.back();
    return true;
  }
  // The little-endian memo index of `width` bytes at pos_.
  bool MemoIndex(std::uint64_t width, std::uint64_t* index) {
    if (!Need(width)) return false;
    *index = width == 1 ? f_[ds_ + pos_] : LoadU32(f_ + ds_ + pos_);
    pos_ += width;
    return true;
  }
  bool Get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) return Malformed("memo index not set");
    return Push(it->second, /*new_value=*/false);
  }
  bool String(std::uint64_t length_bytes);
  bool GlobalLine(std::string* line);
  bool PushGlobal(std::string_view module, std::string_view name);
  bool AddItem(std::uint32_t dict, std::uint32_t key, std::uint32_t value);
  bool Append(std::uint32_t list, std::uint32_t value);
  bool Reduce();
  bool RebuildTensor(const std::vector<std::uint32_t>& args, std::uint32_t* result);
  bool Build();
  bool PersistentId();

  // One opcode's handler (4.1): the opcode byte is read, pos_ is at its
  // operand. False after a finding; STOP sets root_found_.
  using Handler = bool (Walker::*)(std::uint8_t op);
  using HandlerTable = std::array<Handler, 256>;
  static const HandlerTable& Handlers();

  bool Proto(std::uint8_t op);
  bool Frame(std::uint8_t op);
  bool Mark(std::uint8_t op);
  bool EmptyTuple(std::uint8_t op);
  bool EmptyList(std::uint8_t op);
  bool EmptyDict(std::uint8_t op);
  bool Tuple(std::uint8_t op);
  bool TupleN(std::uint8_t op);
  bool NoneValue(std::uint8_t op);
  bool NewBool(std::uint8_t op);
  bool BinInt1(std::uint8_t op);
  bool BinInt2(std::uint8_t op);
  bool BinInt(std::uint8_t op);
  bool Long1(std::uint8_t op);
  bool BinFloat(std::uint8_t op);
  bool Unicode(std::uint8_t op);
  bool Put(std::uint8_t op);
  bool Memoize(std::uint8_t op);
  bool GetOp(std::uint8_t op);
  bool Global(std::uint8_t op);
  bool StackGlobal(std::uint8_t op);
  bool ReduceOp(std::uint8_t op);
  bool BuildOp(std::uint8_t op);
  bool BinPersId(std::uint8_t op);
  bool SetItem(std::uint8_t op);
  bool SetItems(std::uint8_t op);
  bool AppendOp(std::uint8_t op);
  bool Appends(std::uint8_t op);
  bool NamesCallable(std::uint8_t op);
  bool Stop(std::uint8_t op);

  const std::uint8_t* f_;
  Report& report_;
  const Records& records_;
  Model* model_;
  std::uint64_t ds_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;  // relative to ds_
  std::uint64_t op_ = 0;   // position of the current opcode
  bool first_op_ = true;   // the opcode being read is data.pkl's first
  bool root_found_ = false;  // STOP accepted, root_ set
  std::uint32_t root_ = 0;
  std::vector<std::uint32_t> stack_;
  std::vector<std::vector<std::uint32_t>> marks_;
  std::uint64_t saved_ = 0;  // items in the stacks saved by marks
  std::uint64_t size_ints_ = 0;  // ints held by torch.Size values so far (4.4)
  std::uint64_t values_made_ = 0;  // values created by opcodes so far (4.4)
  std::map<std::uint64_t, std::uint32_t> memo_;
  std::map<std::string, std::pair<int, std::int64_t>> storage_keys_;  // key -> (dtype, numel)
};

bool Walker::String(std::uint64_t length_bytes) {
  if (!Need(length_bytes)) return false;
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < length_bytes; ++i) n |= static_cast<std::uint64_t>(f_[ds_ + pos_ + i]) << (8 * i);
  pos_ += length_bytes;
  if (n > kMaxString) return Fail("PT-012", "string", "string longer than 1048576 bytes");
  if (!Need(n)) return false;
  std::size_t bad = 0;
  if (!IsStrictUtf8(f_ + ds_ + pos_, n, &bad)) return Malformed("string is not strict UTF-8");
  const std::uint32_t node = model_->Add(Kind::kStr, static_cast<std::int64_t>(ds_ + pos_), n);
  pos_ += n;
  return Push(node);
}

bool Walker::GlobalLine(std::string* line) {
  line->clear();
  for (std::uint64_t i = 0; i < 257; ++i) {
    if (pos_ + i >= size_) return Malformed("GLOBAL line without newline");
    const std::uint8_t b = f_[ds_ + pos_ + i];
    if (b == '\n') {
      pos_ += i + 1;
      return true;
    }
    if (b < 0x20 || b > 0x7E) return Malformed("GLOBAL line byte outside 0x20..0x7E");
    line->push_back(static_cast<char>(b));
  }
  return Malformed("GLOBAL line without newline within 257 bytes");
}

bool Walker::PushGlobal(std::string_view module, std::string_view name) {
  const int token = LookupGlobal(module, name);
  if (token < 0) {
    return Fail("PT-011", "global",
                "global outside the allow-list: " + std::string(module) + "." + std::string(name));
  }
  return Push(model_->Add(Kind::kToken, token, 0));
}

bool Walker::AddItem(std::uint32_t dict_node, std::uint32_t key, std::uint32_t value) {
  const Node& k = model_->nodes[key];
  if (k.kind != Kind::kStr && k.kind != Kind::kInt) return Fail("PT-017", "key", "dict key is not str or int");
  KeyRef ref;
  ref.is_str = k.kind == Kind::kStr;
  if (ref.is_str) {
    ref.offset = static_cast<std::uint64_t>(k.a);
    ref.length = k.b;
  } else {
    ref.integer = k.a;
  }
  Dict& dict = model_->dicts[model_->nodes[dict_node].a];
  if (dict.keys.count(ref) != 0) return Fail("PT-017", "key", "repeated dict key");
  if (dict.items.size() >= kMaxItems) return Fail("PT-012", "container", "too many items in one dict");
  dict.keys.insert(ref);
  dict.items.emplace_back(key, value);
  return true;
}

bool Walker::Append(std::uint32_t list, std::uint32_t value) {
  std::vector<std::uint32_t>& items = model_->seqs[model_->nodes[list].a];
  if (items.size() >= kMaxItems) return Fail("PT-012", "container", "too many items in one list");
  items.push_back(value);
  return true;
}

bool Walker::RebuildTensor(const std::vector<std::uint32_t>& t, std::uint32_t* result) {
  const Model& m = *model_;
  Tensor tensor;
  bool ok = (t.size() == 6 || t.size() == 7) && m.nodes[t[0]].kind == Kind::kStorage &&
            m.nodes[t[1]].kind == Kind::kInt && m.IntSequence(t[2], &tensor.size) &&
            m.IntSequence(t[3], &tensor.stride) && m.nodes[t[4]].kind == Kind::kBool &&
            m.IsEmptyDict(t[5]);
  if (ok && t.size() == 7) ok = m.nodes[t[6]].kind == Kind::kNone || m.IsEmptyDict(t[6]);
  if (!ok) return Fail("PT-014", "args", "_rebuild_tensor_v2 arguments of the wrong form");
  tensor.storage = static_cast<std::uint32_t>(m.nodes[t[0]].a);
  tensor.offset = m.nodes[t[1]].a;
  const Storage& storage = m.storages[tensor.storage];
  if (tensor.size.size() != tensor.stride.size() || tensor.size.size() > kMaxRank) {
    return Fail("PT-016", "shape", "size and stride ranks differ or rank above 64");
  }
  bool negative = tensor.offset < 0;
  for (std::size_t k = 0; k < tensor.size.size(); ++k) {
    negative = negative || tensor.size[k] < 0 || tensor.stride[k] < 0;
  }
  if (negative) return Fail("PT-016", "shape", "negative storage offset, size or stride");
  u128 numel = 1;
  for (const std::int64_t s : tensor.size) {
    numel *= static_cast<u128>(s);
    if (numel > static_cast<u128>(INT64_MAX)) return Fail("PT-016", "shape", "element count overflows");
  }
  const u128 limit = static_cast<u128>(storage.numel);
  if (numel > 0) {
    u128 last = static_cast<u128>(tensor.offset);
    bool inside = last < limit;
    for (std::size_t k = 0; inside && k < tensor.size.size(); ++k) {
      last += static_cast<u128>(tensor.size[k] - 1) * static_cast<u128>(tensor.stride[k]);
      inside = last < limit;
    }
    if (!inside) return Fail("PT-016", "storage_offset", "view beyond its storage");
  } else if (static_cast<u128>(tensor.offset) > limit) {
    return Fail("PT-016", "storage_offset", "storage offset beyond its storage");
  }
  tensor.numel = static_cast<std::uint64_t>(numel);
  model_->tensors.push_back(std::move(tensor));
  *result = model_->Add(Kind::kTensor, static_cast<std::int64_t>(model_->tensors.size() - 1), 0);
  return true;
}

bool Walker::Reduce() {
  if (stack_.size() < 2) return Malformed("stack underflow");
  const std::uint32_t args = Pop();
  const Node& callable = model_->nodes[stack_.back()];
  if (callable.kind != Kind::kToken || !IsCallableToken(static_cast<int>(callable.a))) {
    return Fail("PT-011", "reduce", "REDUCE of something that is not an allowed callable");
  }
  if (model_->nodes[args].kind != Kind::kTuple) return Fail("PT-014", "args", "REDUCE arguments are not a tuple");
  const std::vector<std::uint32_t> t = model_->seqs[model_->nodes[args].a];
  std::uint32_t result = 0;
  switch (static_cast<int>(callable.a)) {
    case kOrderedDict:
      if (!t.empty()) return Fail("PT-014", "args", "OrderedDict takes ()");
      result = model_->AddDict(true);
      break;
    case kRebuildTensorV2:
      if (!RebuildTensor(t, &result)) return false;
      break;
    case kRebuildParameter:
      if (t.size() != 3 || model_->nodes[t[0]].kind != Kind::kTensor ||
          model_->nodes[t[1]].kind != Kind::kBool || !model_->IsEmptyDict(t[2])) {
        return Fail("PT-014", "args", "_rebuild_parameter takes (tensor, bool, empty dict)");
      }
      result = t[0];
      break;
    default: {  // kTorchSize
      std::vector<std::int64_t> values;
      if (t.size() != 1 || !model_->IntSequence(t[0], &values)) {
        return Fail("PT-014", "args", "torch.Size takes (tuple of ints,)");
      }
      // docs/pt.md 4.4: all torch.Size values of a file hold at most 2^20 ints.
      size_ints_ += values.size();
      if (size_ints_ > kMaxItems) return Fail("PT-012", "container", "too many torch.Size items in the file");
      model_->sizes.push_back(std::move(values));
      result = model_->Add(Kind::kSize, static_cast<std::int64_t>(model_->sizes.size() - 1), 0);
      break;
    }
  }
  if (!ValueMade()) return false;  // the REDUCE result (4.4)
  stack_.back() = result;
  return true;
}

bool Walker::Build() {
  if (stack_.size() < 2) return Malformed("stack underflow");
  const std::uint32_t state = Pop();
  const Node& target = model_->nodes[stack_.back()];
  if (target.kind != Kind::kDict || !model_->dicts[target.a].ordered) {
    return Fail("PT-011", "build", "BUILD on something other than an ordered dict");
  }
  Dict& dict = model_->dicts[target.a];
  bool ok = !dict.built && model_->nodes[state].kind == Kind::kDict &&
            !model_->dicts[model_->nodes[state].a].ordered;
  if (ok) {
    const Dict& s = model_->dicts[model_->nodes[state].a];
    for (const auto& item : s.items) ok = ok && model_->nodes[item.first].kind == Kind::kStr;
  }
  if (!ok) return Fail("PT-014", "args", "BUILD state is not a plain dict of str keys, or a second BUILD");
  dict.built = true;
  dict.attrs = state;
  return true;
}

bool Walker::PersistentId() {
  if (stack_.empty()) return Malformed("stack underflow");
  const std::uint32_t pid = Pop();
  const Model& m = *model_;
  bool ok = m.nodes[pid].kind == Kind::kTuple && m.seqs[m.nodes[pid].a].size() == 5;
  std::vector<std::uint32_t> t;
  if (ok) t = m.seqs[m.nodes[pid].a];
  ok = ok && m.nodes[t[0]].kind == Kind::kStr && m.Str(t[0]) == "storage";
  ok = ok && m.nodes[t[1]].kind == Kind::kToken && m.nodes[t[1]].a >= kStorageBase &&
       m.nodes[t[1]].a < kStorageBase + 10;
  ok = ok && m.nodes[t[2]].kind == Kind::kStr && m.nodes[t[2]].b >= 1 && m.nodes[t[2]].b <= 64;
  if (ok) {
    for (const char ch : m.Str(t[2])) {
      const bool word = (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
      ok = ok && word;
    }
  }
  ok = ok && m.nodes[t[3]].kind == Kind::kStr && m.nodes[t[4]].kind == Kind::kInt && m.nodes[t[4]].a >= 0;
  if (!ok) return Fail("PT-015", "persistent_id", "persistent ID is not a storage ID");
  Storage storage;
  storage.dtype = static_cast<int>(m.nodes[t[1]].a - kStorageBase);
  storage.key = std::string(m.Str(t[2]));
  storage.numel = m.nodes[t[4]].a;
  const auto record = records_.by_name.find("data/" + storage.key);
  if (record == records_.by_name.end()) return Fail("PT-015", "storage", "no record data/" + storage.key);
  const auto earlier = storage_keys_.find(storage.key);
  if (earlier != storage_keys_.end() &&
      (earlier->second.first != storage.dtype || earlier->second.second != storage.numel)) {
    return Fail("PT-015", "storage", "storage key reused with another dtype or numel");
  }
  if (static_cast<u128>(storage.numel) * kDtypes[storage.dtype].item_size != record->second.size) {
    return Fail("PT-015", "storage", "storage record length is not numel * item size");
  }
  storage_keys_[storage.key] = std::make_pair(storage.dtype, storage.numel);
  named.insert(storage.key);
  storage.data_start = record->second.data_start;
  model_->storages.push_back(std::move(storage));
  return Push(model_->Add(Kind::kStorage, static_cast<std::int64_t>(model_->storages.size() - 1), 0));
}

// ---------------------------------------------------------------------------
// The opcode handlers, one per opcode of 4.1 (or per family sharing a form).

bool Walker::Proto(std::uint8_t) {
  if (!first_op_) return Malformed("PROTO after the first opcode");
  if (!Need(1)) return false;
  const std::uint8_t v = f_[ds_ + pos_];
  pos_ += 1;
  if (v < 2 || v > 5) return Malformed("protocol outside 2..5");
  return true;
}

bool Walker::Frame(std::uint8_t) {
  if (!Need(8)) return false;
  const std::uint64_t len = LoadU64(f_ + ds_ + pos_);
  pos_ += 8;
  if (len > size_ - pos_) return Malformed("FRAME longer than the bytes left");
  return true;
}

bool Walker::Mark(std::uint8_t) {
  if (marks_.size() >= kMaxMarks) return Fail("PT-012", "marks", "more than 256 open marks");
  saved_ += stack_.size();
  marks_.push_back(std::move(stack_));
  stack_.clear();
  return true;
}

bool Walker::EmptyTuple(std::uint8_t) { return Push(model_->AddSeq(Kind::kTuple, {})); }

bool Walker::EmptyList(std::uint8_t) { return Push(model_->AddSeq(Kind::kList, {})); }

bool Walker::EmptyDict(std::uint8_t) { return Push(model_->AddDict(false)); }

bool Walker::Tuple(std::uint8_t) {
  std::vector<std::uint32_t> items;
  if (!PopMark(&items)) return false;
  return Push(model_->AddSeq(Kind::kTuple, std::move(items)));
}

// TUPLE1, TUPLE2, TUPLE3.
bool Walker::TupleN(std::uint8_t op) {
  const std::size_t k = static_cast<std::size_t>(op - 0x84);
  if (stack_.size() < k) return Malformed("stack underflow");
  std::vector<std::uint32_t> items(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
  stack_.resize(stack_.size() - k);
  return Push(model_->AddSeq(Kind::kTuple, std::move(items)));
}

bool Walker::NoneValue(std::uint8_t) { return Push(model_->Add(Kind::kNone, 0, 0)); }

// NEWTRUE, NEWFALSE.
bool Walker::NewBool(std::uint8_t op) { return Push(model_->Add(Kind::kBool, op == 0x88 ? 1 : 0, 0)); }

bool Walker::BinInt1(std::uint8_t) {
  if (!Need(1)) return false;
  pos_ += 1;
  return Push(model_->Add(Kind::kInt, f_[ds_ + pos_ - 1], 0));
}

bool Walker::BinInt2(std::uint8_t) {
  if (!Need(2)) return false;
  pos_ += 2;
  return Push(model_->Add(Kind::kInt, LoadU16(f_ + ds_ + pos_ - 2), 0));
}

bool Walker::BinInt(std::uint8_t) {
  if (!Need(4)) return false;
  const std::uint32_t raw = LoadU32(f_ + ds_ + pos_);
  pos_ += 4;
  const std::int64_t value = raw >= 0x80000000u ? static_cast<std::int64_t>(raw) - 4294967296LL
                                                : static_cast<std::int64_t>(raw);
  return Push(model_->Add(Kind::kInt, value, 0));
}

bool Walker::Long1(std::uint8_t) {
  if (!Need(1)) return false;
  const std::uint64_t n = f_[ds_ + pos_];
  pos_ += 1;
  if (n > kMaxLong) return Fail("PT-012", "integer", "LONG1 longer than 8 bytes");
  if (!Need(n)) return false;
  std::uint64_t bits = 0;
  for (std::uint64_t i = 0; i < n; ++i) bits |= static_cast<std::uint64_t>(f_[ds_ + pos_ + i]) << (8 * i);
  if (n > 0 && n < 8 && (f_[ds_ + pos_ + n - 1] & 0x80) != 0) bits |= ~std::uint64_t{0} << (8 * n);
  pos_ += n;
  std::int64_t value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return Push(model_->Add(Kind::kInt, value, 0));
}

// Big-endian binary64.
bool Walker::BinFloat(std::uint8_t) {
  if (!Need(8)) return false;
  std::uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = (bits << 8) | f_[ds_ + pos_ + i];
  pos_ += 8;
  return Push(model_->Add(Kind::kFloat, 0, bits));
}

// SHORT_BINUNICODE (1-byte length), BINUNICODE (4), BINUNICODE8 (8).
bool Walker::Unicode(std::uint8_t op) { return String(op == 0x8C ? 1 : op == 0x58 ? 4 : 8); }

// BINPUT, LONG_BINPUT: a 1- or 4-byte memo index.
bool Walker::Put(std::uint8_t op) {
  std::uint64_t index = 0;
  return MemoIndex(op == 0x71 ? 1 : 4, &index) && Memo(index);
}

bool Walker::Memoize(std::uint8_t) { return Memo(memo_.size()); }

// BINGET, LONG_BINGET: a 1- or 4-byte memo index.
bool Walker::GetOp(std::uint8_t op) {
  std::uint64_t index = 0;
  return MemoIndex(op == 0x68 ? 1 : 4, &index) && Get(index);
}

bool Walker::Global(std::uint8_t) {
  std::string module;
  std::string name;
  if (!GlobalLine(&module) || !GlobalLine(&name)) return false;
  return PushGlobal(module, name);
}

bool Walker::StackGlobal(std::uint8_t) {
  if (stack_.size() < 2) return Malformed("stack underflow");
  const std::uint32_t name = Pop();
  const std::uint32_t module = Pop();
  if (model_->nodes[name].kind != Kind::kStr || model_->nodes[module].kind != Kind::kStr) {
    return Malformed("STACK_GLOBAL operands are not str");
  }
  return PushGlobal(model_->Str(module), model_->Str(name));
}

bool Walker::ReduceOp(std::uint8_t) { return Reduce(); }

bool Walker::BuildOp(std::uint8_t) { return Build(); }

bool Walker::BinPersId(std::uint8_t) { return PersistentId(); }

bool Walker::SetItem(std::uint8_t) {
  if (stack_.size() < 3) return Malformed("stack underflow");
  const std::uint32_t value = Pop();
  const std::uint32_t key = Pop();
  if (model_->nodes[stack_.back()].kind != Kind::kDict) return Malformed("SETITEM on something other than a dict");
  return AddItem(stack_.back(), key, value);
}

bool Walker::SetItems(std::uint8_t) {
  std::vector<std::uint32_t> items;
  if (!PopMark(&items)) return false;
  if (stack_.empty()) return Malformed("stack underflow");
  if (items.size() % 2 != 0) return Malformed("SETITEMS with an odd count");
  if (model_->nodes[stack_.back()].kind != Kind::kDict) return Malformed("SETITEMS on something other than a dict");
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!AddItem(stack_.back(), items[i], items[i + 1])) return false;
  }
  return true;
}

bool Walker::AppendOp(std::uint8_t) {
  if (stack_.size() < 2) return Malformed("stack underflow");
  const std::uint32_t value = Pop();
  if (model_->nodes[stack_.back()].kind != Kind::kList) return Malformed("APPEND on something other than a list");
  return Append(stack_.back(), value);
}

bool Walker::Appends(std::uint8_t) {
  std::vector<std::uint32_t> items;
  if (!PopMark(&items)) return false;
  if (stack_.empty()) return Malformed("stack underflow");
  if (model_->nodes[stack_.back()].kind != Kind::kList) return Malformed("APPENDS on something other than a list");
  for (const std::uint32_t item : items) {
    if (!Append(stack_.back(), item)) return false;
  }
  return true;
}

// NEWOBJ, NEWOBJ_EX, INST, OBJ, EXT1, EXT2, EXT4 (4.3).
bool Walker::NamesCallable(std::uint8_t) {
  return Fail("PT-011", "opcode", "opcode that constructs or names a callable");
}

// 4.6.
bool Walker::Stop(std::uint8_t) {
  if (!marks_.empty()) return Malformed("STOP with an open mark");
  if (stack_.size() != 1) return Malformed("STOP with other than exactly one value");
  if (pos_ < size_) {
    op_ = pos_;
    return Malformed("bytes after STOP");
  }
  if (model_->nodes[stack_[0]].kind != Kind::kDict) return Fail("PT-017", "root", "the root is not a dict");
  root_ = stack_[0];
  root_found_ = true;
  return true;
}

// 4.1: the subset, opcode by opcode.
const Walker::HandlerTable& Walker::Handlers() {
  static const HandlerTable table = [] {
    HandlerTable t{};  // no handler: outside the subset
    const std::pair<std::uint8_t, Handler> rows[] = {
        {0x80, &Walker::Proto},      {0x95, &Walker::Frame},       {0x28, &Walker::Mark},
        {0x29, &Walker::EmptyTuple}, {0x5D, &Walker::EmptyList},   {0x7D, &Walker::EmptyDict},
        {0x74, &Walker::Tuple},      {0x85, &Walker::TupleN},      {0x86, &Walker::TupleN},
        {0x87, &Walker::TupleN},     {0x4E, &Walker::NoneValue},   {0x88, &Walker::NewBool},
        {0x89, &Walker::NewBool},    {0x4B, &Walker::BinInt1},     {0x4D, &Walker::BinInt2},
        {0x4A, &Walker::BinInt},     {0x8A, &Walker::Long1},       {0x47, &Walker::BinFloat},
        {0x58, &Walker::Unicode},    {0x8C, &Walker::Unicode},     {0x8D, &Walker::Unicode},
        {0x71, &Walker::Put},        {0x72, &Walker::Put},         {0x94, &Walker::Memoize},
        {0x68, &Walker::GetOp},      {0x6A, &Walker::GetOp},       {0x63, &Walker::Global},
        {0x93, &Walker::StackGlobal}, {0x52, &Walker::ReduceOp},   {0x62, &Walker::BuildOp},
        {0x51, &Walker::BinPersId},  {0x73, &Walker::SetItem},     {0x75, &Walker::SetItems},
        {0x61, &Walker::AppendOp},   {0x65, &Walker::Appends},     {0x81, &Walker::NamesCallable},
        {0x92, &Walker::NamesCallable}, {0x69, &Walker::NamesCallable},
        {0x6F, &Walker::NamesCallable}, {0x82, &Walker::NamesCallable},
        {0x83, &Walker::NamesCallable}, {0x84, &Walker::NamesCallable},
        {0x2E, &Walker::Stop},
    };
    for (const auto& [op, handler] : rows) t[op] = handler;
    return t;
  }();
  return table;
}

bool Walker::Run(std::uint32_t* root) {
  const HandlerTable& handlers = Handlers();
  while (!root_found_) {
    op_ = pos_;
    if (pos_ >= size_) {
      op_ = size_;
      return Malformed("data.pkl ends without STOP");
    }
    const std::uint8_t op = f_[ds_ + pos_];
    pos_ += 1;
    if (first_op_ && op != 0x80) return Malformed("data.pkl does not start with PROTO");
    const Handler handler = handlers[op];
    if (handler == nullptr) return Malformed("opcode outside the subset");
    if (!(this->*handler)(op)) return false;
    first_op_ = false;
  }
  *root = root_;
  return true;
}

}  // namespace

bool WalkPickle(qd::ByteView file, Report& report, const Records& records, Model* model,
                std::uint32_t* root, std::set<std::string>* named) {
  Walker walker(file, report, records, model);
  const bool ok = walker.Run(root);
  *named = std::move(walker.named);
  return ok;
}

}  // namespace qd::oracle::pt_internal
