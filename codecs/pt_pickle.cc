// pt_pickle.cc: the walk of data.pkl (docs/pt.md section 4) over the closed
// value model, and the tensors it rebuilds (5.1). Each opcode of the subset
// (4.1) has a handler in one opcode -> handler table; an opcode without one
// is PT-013. Nothing named by the file is imported, called or instantiated.
// See pt_reader.h.
#include <algorithm>
#include <bit>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/pt_reader.h"

namespace qd::codec::pt_internal {
namespace {

// ---- allow-list (section 4.3) ----
enum Callable : std::uint32_t { kOrderedDict, kRebuildTensorV2, kRebuildParameter, kSize };

struct Global {
  std::string_view module, name;
  PtTokenKind kind;
  Dtype dtype;
  std::uint32_t callable;
};

const Global kGlobals[] = {
    {"collections", "OrderedDict", PtTokenKind::kCallable, Dtype::kU8, kOrderedDict},
    {"torch._utils", "_rebuild_tensor_v2", PtTokenKind::kCallable, Dtype::kU8, kRebuildTensorV2},
    {"torch._utils", "_rebuild_parameter", PtTokenKind::kCallable, Dtype::kU8, kRebuildParameter},
    {"torch", "Size", PtTokenKind::kCallable, Dtype::kU8, kSize},
    {"torch", "DoubleStorage", PtTokenKind::kStorageClass, Dtype::kF64, 0},
    {"torch", "FloatStorage", PtTokenKind::kStorageClass, Dtype::kF32, 0},
    {"torch", "HalfStorage", PtTokenKind::kStorageClass, Dtype::kF16, 0},
    {"torch", "BFloat16Storage", PtTokenKind::kStorageClass, Dtype::kBF16, 0},
    {"torch", "LongStorage", PtTokenKind::kStorageClass, Dtype::kI64, 0},
    {"torch", "IntStorage", PtTokenKind::kStorageClass, Dtype::kI32, 0},
    {"torch", "ShortStorage", PtTokenKind::kStorageClass, Dtype::kI16, 0},
    {"torch", "CharStorage", PtTokenKind::kStorageClass, Dtype::kI8, 0},
    {"torch", "ByteStorage", PtTokenKind::kStorageClass, Dtype::kU8, 0},
    {"torch", "BoolStorage", PtTokenKind::kStorageClass, Dtype::kBool, 0},
    {"torch", "float64", PtTokenKind::kDtype, Dtype::kF64, 0},
    {"torch", "float32", PtTokenKind::kDtype, Dtype::kF32, 0},
    {"torch", "float16", PtTokenKind::kDtype, Dtype::kF16, 0},
    {"torch", "bfloat16", PtTokenKind::kDtype, Dtype::kBF16, 0},
    {"torch", "int64", PtTokenKind::kDtype, Dtype::kI64, 0},
    {"torch", "int32", PtTokenKind::kDtype, Dtype::kI32, 0},
    {"torch", "int16", PtTokenKind::kDtype, Dtype::kI16, 0},
    {"torch", "int8", PtTokenKind::kDtype, Dtype::kI8, 0},
    {"torch", "uint8", PtTokenKind::kDtype, Dtype::kU8, 0},
    {"torch", "bool", PtTokenKind::kDtype, Dtype::kBool, 0},
};

const Global* FindGlobal(std::string_view module, std::string_view name) {
  for (const Global& g : kGlobals) {
    if (g.module == module && g.name == name) return &g;
  }
  return nullptr;
}

}  // namespace

// GLOBAL / STACK_GLOBAL (section 4.3): the allow-listed name as a token on
// the stack, or PT-011 naming it. Nothing named is ever called.
bool Reader::PushGlobal(std::string_view module, std::string_view name) {
  const Global* g = FindGlobal(module, name);
  if (g == nullptr) {
    Error("PT-011", "global", op_at_,
          "global outside the allow-list: " + std::string(module) + "." + std::string(name));
    return false;
  }
  const std::uint32_t t = NewNode(PtKind::kToken);
  N(t).token = g->kind;
  N(t).dtype = g->dtype;
  N(t).text = std::string(g->name);
  N(t).tensor = g->callable;
  return Push(t);
}

bool Reader::SetItem(std::uint32_t dict, std::uint32_t key, std::uint32_t value) {
  const PtNode& k = N(key);
  std::string enc;
  if (k.kind == PtKind::kStr) {
    enc = "s" + k.text;
  } else if (k.kind == PtKind::kInt) {
    enc.assign("i");
    enc.append(reinterpret_cast<const char*>(&k.integer), sizeof k.integer);
  } else {
    Error("PT-017", "key", op_at_, "dict key is not str or int");
    return false;
  }
  if (!dict_keys_[dict].insert(std::move(enc)).second) {
    Error("PT-017", "key", op_at_, "repeated dict key");
    return false;
  }
  if (N(dict).items.size() / 2 >= kMaxItems) {
    Error("PT-012", "container", op_at_, "more than 1048576 items in one dict");
    return false;
  }
  N(dict).items.push_back(key);
  N(dict).items.push_back(value);
  return true;
}

bool Reader::PersistentId() {
  if (Avail() < 1) return Malformed("stack underflow");
  const std::uint32_t pid = stack_.back();
  stack_.pop_back();
  auto bad_pid = [&](const char* m) {
    Error("PT-015", "persistent_id", op_at_, m);
    return false;
  };
  const PtNode& t = N(pid);
  if (t.kind != PtKind::kTuple || t.items.size() != 5) return bad_pid("not a 5-tuple");
  const PtNode& tag = N(t.items[0]);
  const PtNode& cls = N(t.items[1]);
  const PtNode& key = N(t.items[2]);
  const PtNode& loc = N(t.items[3]);
  const PtNode& numel = N(t.items[4]);
  if (tag.kind != PtKind::kStr || tag.text != "storage") return bad_pid("not a storage ID");
  if (cls.kind != PtKind::kToken || cls.token != PtTokenKind::kStorageClass) {
    return bad_pid("no storage class");
  }
  if (key.kind != PtKind::kStr || key.text.empty() || key.text.size() > 64) {
    return bad_pid("bad storage key");
  }
  for (char ch : key.text) {
    const bool ok = (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= 'a' && ch <= 'z') || ch == '_';
    if (!ok) return bad_pid("bad storage key");
  }
  if (loc.kind != PtKind::kStr) return bad_pid("location is not a str");
  if (numel.kind != PtKind::kInt || numel.integer < 0) return bad_pid("bad numel");
  const u64 count = static_cast<u64>(numel.integer);
  const Dtype dtype = cls.dtype;
  const std::string key_text = key.text;
  auto bad_storage = [&](const std::string& m) {
    Error("PT-015", "storage", op_at_, m);
    return false;
  };
  auto rec = by_record_.find("data/" + key_text);
  if (rec == by_record_.end()) return bad_storage("no record data/" + key_text);
  auto it = storages_.find(key_text);
  if (it != storages_.end()) {
    if (it->second.dtype != dtype || it->second.numel != count) {
      return bad_storage("storage key reused with another dtype or numel");
    }
  }
  const u128 bytes = static_cast<u128>(count) * PtItemSize(dtype);
  if (bytes != entries_[rec->second].size) {
    return bad_storage("storage record length is not numel * item size");
  }
  if (it == storages_.end()) storages_.emplace(key_text, Storage{dtype, count, rec->second});
  const std::uint32_t s = NewNode(PtKind::kStorage);
  N(s).dtype = dtype;
  N(s).integer = static_cast<std::int64_t>(count);
  N(s).text = key_text;
  return Push(s);
}

bool Reader::RebuildTensor(std::uint32_t args, std::uint32_t* out) {
  const PtNode& a = N(args);
  auto bad = [&](const char* m) {
    Error("PT-014", "args", op_at_, m);
    return false;
  };
  if (a.items.size() != 6 && a.items.size() != 7) return bad("_rebuild_tensor_v2 takes 6 or 7 arguments");
  const std::uint32_t st = a.items[0], off = a.items[1], size = a.items[2], stride = a.items[3];
  if (N(st).kind != PtKind::kStorage) return bad("argument 0 is not a storage");
  if (N(off).kind != PtKind::kInt) return bad("storage offset is not an int");
  if (!IsIntSeq(size)) return bad("size is not a tuple of ints");
  if (!IsIntSeq(stride)) return bad("stride is not a tuple of ints");
  if (N(a.items[4]).kind != PtKind::kBool) return bad("requires_grad is not a bool");
  if (!IsEmptyDict(a.items[5])) return bad("backward hooks are not an empty dict");
  if (a.items.size() == 7 && N(a.items[6]).kind != PtKind::kNone && !IsEmptyDict(a.items[6])) {
    return bad("metadata is not None or an empty dict");
  }
  const PtNode& sz = N(size);
  const PtNode& sd = N(stride);
  auto shape = [&](const char* m) {
    Error("PT-016", "shape", op_at_, m);
    return false;
  };
  if (sz.items.size() != sd.items.size()) return shape("size and stride ranks differ");
  if (sz.items.size() > kMaxRank) return shape("rank above 64");
  const std::int64_t offset = N(off).integer;
  if (offset < 0) return shape("negative storage offset");
  for (std::size_t k = 0; k < sz.items.size(); ++k) {
    if (N(sz.items[k]).integer < 0 || N(sd.items[k]).integer < 0) return shape("negative size or stride");
  }
  u64 numel = 1;
  for (std::uint32_t k : sz.items) {
    const u128 p = static_cast<u128>(numel) * static_cast<u64>(N(k).integer);
    if (p > static_cast<u128>(INT64_MAX)) return shape("element count overflows");
    numel = static_cast<u64>(p);
  }
  const PtNode& storage = N(st);
  const u64 snumel = static_cast<u64>(storage.integer);
  if (numel > 0) {
    u128 last = static_cast<u64>(offset);
    for (std::size_t k = 0; k < sz.items.size() && last < snumel; ++k) {
      last += static_cast<u128>(static_cast<u64>(N(sz.items[k]).integer) - 1) *
              static_cast<u64>(N(sd.items[k]).integer);
    }
    if (last + 1 > snumel) {
      Error("PT-016", "storage_offset", op_at_, "view beyond its storage");
      return false;
    }
  } else if (static_cast<u64>(offset) > snumel) {
    Error("PT-016", "storage_offset", op_at_, "storage offset beyond its storage");
    return false;
  }
  const Storage& s = storages_.at(storage.text);
  const Entry& rec = entries_[s.entry];
  PtTensor t;
  t.dtype = s.dtype;
  for (std::uint32_t k : sz.items) t.shape.push_back(static_cast<u64>(N(k).integer));
  for (std::uint32_t k : sd.items) t.stride.push_back(static_cast<u64>(N(k).integer));
  t.storage_offset = static_cast<u64>(offset);
  t.numel = numel;
  t.storage_key = storage.text;
  t.storage_numel = snumel;
  t.storage_begin = rec.ds;
  t.storage = d_ + rec.ds;
  t.big_endian = r_.big_endian;
  const u64 isz = PtItemSize(s.dtype);
  const u128 begin = static_cast<u128>(rec.ds) + static_cast<u128>(t.storage_offset) * isz;
  const u128 end = begin + static_cast<u128>(numel) * isz;
  // Saturate: only ordering uses these, and a view within its storage stays exact.
  t.begin = begin > UINT64_MAX ? UINT64_MAX : static_cast<u64>(begin);
  t.end = end > UINT64_MAX ? UINT64_MAX : static_cast<u64>(end);
  r_.all_tensors.push_back(std::move(t));
  const std::uint32_t node = NewNode(PtKind::kTensor);
  N(node).tensor = static_cast<std::uint32_t>(r_.all_tensors.size() - 1);
  N(node).dtype = s.dtype;
  *out = node;
  return true;
}

bool Reader::Reduce() {
  if (Avail() < 2) return Malformed("stack underflow");
  const std::uint32_t args = stack_.back();
  stack_.pop_back();
  const std::uint32_t fn = stack_.back();
  const PtNode& f = N(fn);
  if (f.kind != PtKind::kToken || f.token != PtTokenKind::kCallable) {
    Error("PT-011", "reduce", op_at_, "REDUCE of something that is not an allowed callable");
    return false;
  }
  auto bad = [&](const char* m) {
    Error("PT-014", "args", op_at_, m);
    return false;
  };
  if (N(args).kind != PtKind::kTuple) return bad("REDUCE arguments are not a tuple");
  const PtNode& a = N(args);
  std::uint32_t result = kPtNoNode;
  switch (f.tensor) {  // the callable id is kept in `tensor` for callable tokens
    case kOrderedDict:
      if (!a.items.empty()) return bad("OrderedDict takes ()");
      result = NewNode(PtKind::kDict);
      N(result).ordered = true;
      break;
    case kRebuildTensorV2:
      if (!RebuildTensor(args, &result)) return false;
      break;
    case kRebuildParameter:
      if (a.items.size() != 3 || N(a.items[0]).kind != PtKind::kTensor ||
          N(a.items[1]).kind != PtKind::kBool || !IsEmptyDict(a.items[2])) {
        return bad("_rebuild_parameter takes (tensor, bool, {})");
      }
      result = a.items[0];
      break;
    case kSize: {
      if (a.items.size() != 1 || !IsIntSeq(a.items[0])) return bad("torch.Size takes (tuple of ints,)");
      const std::uint32_t src = a.items[0];
      // A Size copies its ints; one memoized tuple could be copied again and
      // again, so all Sizes of a file share one budget (docs/pt.md 4.4).
      if (N(src).items.size() > kMaxItems - size_items_) {
        Error("PT-012", "container", op_at_, "more than 1048576 torch.Size items in the file");
        return false;
      }
      size_items_ += N(src).items.size();
      result = NewNode(PtKind::kSize);
      N(result).items = N(src).items;
      break;
    }
    default:
      return bad("unknown callable");
  }
  if (!CountMade()) return false;
  stack_.back() = result;
  return true;
}

// ---- the opcode handlers (section 4.1) ----
bool Reader::OpProto(std::uint8_t) {
  if (op_at_ != pk_ds_) return Malformed("PROTO after the first opcode");
  if (!Need(1)) return Malformed("truncated operand");
  const std::uint8_t v = pk_[pos_++];
  if (v < 2 || v > 5) return Malformed("protocol outside 2..5");
  return true;
}

bool Reader::OpFrame(std::uint8_t) {
  if (!Need(8)) return Malformed("truncated operand");
  const u64 len = Rd64(pk_ + pos_);
  pos_ += 8;
  if (len > pk_size_ - pos_) return Malformed("FRAME longer than the bytes left");
  return true;
}

bool Reader::OpMark(std::uint8_t) {
  if (marks_.size() >= kMaxMarks) {
    Error("PT-012", "marks", op_at_, "more than 256 open marks");
    return false;
  }
  marks_.push_back(stack_.size());
  return true;
}

// EMPTY_TUPLE, EMPTY_LIST, EMPTY_DICT.
bool Reader::OpEmpty(std::uint8_t op) {
  return Push(NewNode(op == 0x29 ? PtKind::kTuple : op == 0x5d ? PtKind::kList : PtKind::kDict));
}

bool Reader::OpTuple(std::uint8_t) {
  if (marks_.empty()) return Malformed("TUPLE without an open mark");
  const u64 m = marks_.back();
  marks_.pop_back();
  const std::uint32_t t = NewNode(PtKind::kTuple);
  N(t).items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
  stack_.resize(m);
  return Push(t);
}

// TUPLE1, TUPLE2, TUPLE3.
bool Reader::OpTupleN(std::uint8_t op) {
  const u64 k = op - 0x84u;
  if (Avail() < k) return Malformed("stack underflow");
  const std::uint32_t t = NewNode(PtKind::kTuple);
  N(t).items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
  stack_.resize(stack_.size() - k);
  return Push(t);
}

// NONE, NEWTRUE, NEWFALSE: the shared singleton nodes.
bool Reader::OpSingleton(std::uint8_t op) {
  return Push(op == 0x4e ? none_ : op == 0x88 ? true_ : false_);
}

// BININT1, BININT2, BININT.
bool Reader::OpBinInt(std::uint8_t op) {
  const u64 k = op == 0x4b ? 1 : op == 0x4d ? 2 : 4;
  if (!Need(k)) return Malformed("truncated operand");
  std::int64_t v;
  if (k == 1) v = pk_[pos_];
  else if (k == 2) v = static_cast<std::int64_t>(Rd16(pk_ + pos_));
  else v = static_cast<std::int32_t>(static_cast<std::uint32_t>(Rd32(pk_ + pos_)));
  pos_ += k;
  const std::uint32_t i = NewNode(PtKind::kInt);
  N(i).integer = v;
  return Push(i);
}

bool Reader::OpLong1(std::uint8_t) {
  if (!Need(1)) return Malformed("truncated operand");
  const u64 k = pk_[pos_++];
  if (k > kMaxLong1) {
    Error("PT-012", "integer", op_at_, "LONG1 longer than 8 bytes");
    return false;
  }
  if (!Need(k)) return Malformed("truncated operand");
  u64 v = 0;
  for (u64 b = 0; b < k; ++b) v |= u64(pk_[pos_ + b]) << (8 * b);
  if (k > 0 && k < 8 && (pk_[pos_ + k - 1] & 0x80)) v |= ~u64{0} << (8 * k);
  pos_ += k;
  const std::uint32_t i = NewNode(PtKind::kInt);
  N(i).integer = static_cast<std::int64_t>(v);
  return Push(i);
}

bool Reader::OpBinFloat(std::uint8_t) {
  if (!Need(8)) return Malformed("truncated operand");
  u64 bits = 0;
  for (int b = 0; b < 8; ++b) bits = (bits << 8) | pk_[pos_ + b];
  pos_ += 8;
  const std::uint32_t f = NewNode(PtKind::kFloat);
  N(f).real = std::bit_cast<double>(bits);
  return Push(f);
}

// BINUNICODE, SHORT_BINUNICODE, BINUNICODE8.
bool Reader::OpUnicode(std::uint8_t op) {
  const u64 w = op == 0x8c ? 1 : op == 0x58 ? 4 : 8;
  if (!Need(w)) return Malformed("truncated operand");
  const u64 len = w == 1 ? pk_[pos_] : w == 4 ? Rd32(pk_ + pos_) : Rd64(pk_ + pos_);
  pos_ += w;
  if (len > kMaxString) {
    Error("PT-012", "string", op_at_, "string longer than 1048576 bytes");
    return false;
  }
  if (!Need(len)) return Malformed("truncated operand");
  if (!ValidUtf8(pk_ + pos_, len)) return Malformed("string is not valid UTF-8");
  const std::uint32_t s = NewNode(PtKind::kStr);
  N(s).text.assign(reinterpret_cast<const char*>(pk_ + pos_), len);
  pos_ += len;
  return Push(s);
}

// BINPUT, LONG_BINPUT, MEMOIZE.
bool Reader::OpPut(std::uint8_t op) {
  u64 idx;
  if (op == 0x94) {
    idx = memo_.size();
  } else {
    const u64 w = op == 0x71 ? 1 : 4;
    if (!Need(w)) return Malformed("truncated operand");
    idx = w == 1 ? pk_[pos_] : Rd32(pk_ + pos_);
    pos_ += w;
  }
  if (Avail() < 1) return Malformed("memo of an empty stack");
  const auto key = static_cast<std::uint32_t>(idx);
  auto it = memo_.find(key);
  if (it == memo_.end()) {
    if (memo_.size() >= kMaxMemo) {
      Error("PT-012", "memo", op_at_, "more than 1048576 memo entries");
      return false;
    }
    memo_.emplace(key, stack_.back());
  } else {
    it->second = stack_.back();
  }
  return true;
}

// BINGET, LONG_BINGET.
bool Reader::OpGet(std::uint8_t op) {
  const u64 w = op == 0x68 ? 1 : 4;
  if (!Need(w)) return Malformed("truncated operand");
  const u64 idx = w == 1 ? pk_[pos_] : Rd32(pk_ + pos_);
  pos_ += w;
  auto it = memo_.find(static_cast<std::uint32_t>(idx));
  if (it == memo_.end()) return Malformed("unset memo index");
  return Push(it->second, /*made=*/false);
}

bool Reader::OpGlobal(std::uint8_t) {
  std::string_view lines[2];
  for (auto& line : lines) {
    const u64 start = pos_;
    while (true) {
      if (pos_ >= pk_size_) return Malformed("GLOBAL line without newline");
      const std::uint8_t b = pk_[pos_];
      if (b == '\n') break;
      if (pos_ - start >= 256) return Malformed("GLOBAL line longer than 256 bytes");
      if (b < 0x20 || b > 0x7e) return Malformed("GLOBAL line byte outside 0x20..0x7E");
      ++pos_;
    }
    line = std::string_view(reinterpret_cast<const char*>(pk_ + start), pos_ - start);
    ++pos_;
  }
  return PushGlobal(lines[0], lines[1]);
}

bool Reader::OpStackGlobal(std::uint8_t) {
  if (Avail() < 2) return Malformed("stack underflow");
  const std::uint32_t name = stack_.back();
  const std::uint32_t module = stack_[stack_.size() - 2];
  if (N(name).kind != PtKind::kStr || N(module).kind != PtKind::kStr) {
    return Malformed("STACK_GLOBAL operands are not str");
  }
  stack_.resize(stack_.size() - 2);
  // Copies: PushGlobal adds a node, which may move the strings.
  return PushGlobal(std::string(N(module).text), std::string(N(name).text));
}

bool Reader::OpReduce(std::uint8_t) { return Reduce(); }

bool Reader::OpBuild(std::uint8_t) {
  if (Avail() < 2) return Malformed("stack underflow");
  const std::uint32_t state = stack_.back();
  stack_.pop_back();
  const std::uint32_t target = stack_.back();
  if (N(target).kind != PtKind::kDict || !N(target).ordered) {
    Error("PT-011", "build", op_at_, "BUILD on something other than an ordered dict");
    return false;
  }
  if (built_.count(target) != 0) {
    Error("PT-014", "args", op_at_, "second BUILD on one ordered dict");
    return false;
  }
  const PtNode& s = N(state);
  bool ok = s.kind == PtKind::kDict && !s.ordered;
  for (std::size_t k = 0; ok && k < s.items.size(); k += 2) {
    ok = N(s.items[k]).kind == PtKind::kStr;
  }
  if (!ok) {
    Error("PT-014", "args", op_at_, "BUILD state is not a plain dict with str keys");
    return false;
  }
  built_.insert(target);
  N(target).attributes = state;
  return true;
}

bool Reader::OpBinPersId(std::uint8_t) { return PersistentId(); }

bool Reader::OpSetItem(std::uint8_t) {
  if (Avail() < 3) return Malformed("stack underflow");
  const std::uint32_t value = stack_.back();
  const std::uint32_t key = stack_[stack_.size() - 2];
  stack_.resize(stack_.size() - 2);
  const std::uint32_t dict = stack_.back();
  if (N(dict).kind != PtKind::kDict) return Malformed("SETITEM on something that is not a dict");
  return SetItem(dict, key, value);
}

bool Reader::OpSetItems(std::uint8_t) {
  if (marks_.empty()) return Malformed("SETITEMS without an open mark");
  const u64 m = marks_.back();
  marks_.pop_back();
  if (m <= (marks_.empty() ? 0 : marks_.back())) return Malformed("stack underflow");
  const std::uint32_t dict = stack_[m - 1];
  if (N(dict).kind != PtKind::kDict) return Malformed("SETITEMS on something that is not a dict");
  if ((stack_.size() - m) % 2 != 0) return Malformed("SETITEMS with an odd item count");
  for (u64 k = m; k < stack_.size(); k += 2) {
    if (!SetItem(dict, stack_[k], stack_[k + 1])) return false;
  }
  stack_.resize(m);
  return true;
}

bool Reader::OpAppend(std::uint8_t) {
  if (Avail() < 2) return Malformed("stack underflow");
  const std::uint32_t value = stack_.back();
  stack_.pop_back();
  const std::uint32_t list = stack_.back();
  if (N(list).kind != PtKind::kList) return Malformed("APPEND to something that is not a list");
  if (N(list).items.size() >= kMaxItems) {
    Error("PT-012", "container", op_at_, "more than 1048576 items in one list");
    return false;
  }
  N(list).items.push_back(value);
  return true;
}

bool Reader::OpAppends(std::uint8_t) {
  if (marks_.empty()) return Malformed("APPENDS without an open mark");
  const u64 m = marks_.back();
  marks_.pop_back();
  if (m <= (marks_.empty() ? 0 : marks_.back())) return Malformed("stack underflow");
  const std::uint32_t list = stack_[m - 1];
  if (N(list).kind != PtKind::kList) return Malformed("APPENDS to something that is not a list");
  for (u64 k = m; k < stack_.size(); ++k) {
    if (N(list).items.size() >= kMaxItems) {
      Error("PT-012", "container", op_at_, "more than 1048576 items in one list");
      return false;
    }
    N(list).items.push_back(stack_[k]);
  }
  stack_.resize(m);
  return true;
}

// NEWOBJ, NEWOBJ_EX, INST, OBJ, EXT1/2/4 (4.3): refused by name.
bool Reader::OpConstructs(std::uint8_t) {
  Error("PT-011", "opcode", op_at_,
        "opcode that constructs or names an object (NEWOBJ, NEWOBJ_EX, INST, OBJ, EXT)");
  return false;
}

// Section 4.6.
bool Reader::OpStop(std::uint8_t) {
  if (!marks_.empty() || stack_.size() != 1) {
    return Malformed("STOP without exactly one value and no open mark");
  }
  if (pos_ != pk_size_) {
    op_at_ = pk_ds_ + pos_;
    return Malformed("bytes after STOP");
  }
  const std::uint32_t root = stack_.back();
  if (N(root).kind != PtKind::kDict) {
    Error("PT-017", "root", op_at_, "the root is not a dict");
    return false;
  }
  r_.root = root;
  stopped_ = true;
  return true;
}

const Reader::OpTable& Reader::Opcodes() {
  static const OpTable table = [] {
    OpTable t{};  // null: outside the subset (PT-013)
    // Each row owns its opcodes (an initializer_list member would outlive
    // its array).
    const std::pair<std::vector<std::uint8_t>, OpHandler> rows[] = {
        {{0x80}, &Reader::OpProto},
        {{0x95}, &Reader::OpFrame},
        {{0x28}, &Reader::OpMark},
        {{0x29, 0x5d, 0x7d}, &Reader::OpEmpty},
        {{0x74}, &Reader::OpTuple},
        {{0x85, 0x86, 0x87}, &Reader::OpTupleN},
        {{0x4e, 0x88, 0x89}, &Reader::OpSingleton},
        {{0x4b, 0x4d, 0x4a}, &Reader::OpBinInt},
        {{0x8a}, &Reader::OpLong1},
        {{0x47}, &Reader::OpBinFloat},
        {{0x58, 0x8c, 0x8d}, &Reader::OpUnicode},
        {{0x71, 0x72, 0x94}, &Reader::OpPut},
        {{0x68, 0x6a}, &Reader::OpGet},
        {{0x63}, &Reader::OpGlobal},
        {{0x93}, &Reader::OpStackGlobal},
        {{0x52}, &Reader::OpReduce},
        {{0x62}, &Reader::OpBuild},
        {{0x51}, &Reader::OpBinPersId},
        {{0x73}, &Reader::OpSetItem},
        {{0x75}, &Reader::OpSetItems},
        {{0x61}, &Reader::OpAppend},
        {{0x65}, &Reader::OpAppends},
        {{0x81, 0x92, 0x69, 0x6f, 0x82, 0x83, 0x84}, &Reader::OpConstructs},
        {{0x2e}, &Reader::OpStop},
    };
    for (const auto& [ops, handler] : rows) {
      for (const std::uint8_t op : ops) t[op] = handler;
    }
    return t;
  }();
  return table;
}

bool Reader::Walk() {
  const Entry& pkl = entries_[pkl_];
  pk_ = d_ + pkl.ds;
  pk_ds_ = pkl.ds;
  pk_size_ = pkl.size;
  r_.pickle_begin = pkl.ds;
  r_.nodes.reserve(std::min<u64>(pk_size_, 1u << 16) + 3);
  // Singletons: None, False, True.
  none_ = NewNode(PtKind::kNone);
  false_ = NewNode(PtKind::kBool);
  true_ = NewNode(PtKind::kBool);
  N(true_).boolean = true;
  const OpTable& opcodes = Opcodes();
  pos_ = 0;
  while (!stopped_) {
    op_at_ = pk_ds_ + pos_;
    if (pos_ >= pk_size_) return Malformed("data.pkl ends without STOP");
    const std::uint8_t op = pk_[pos_];
    if (pos_ == 0 && op != 0x80) return Malformed("data.pkl does not start with PROTO");
    ++pos_;
    const OpHandler handler = opcodes[op];
    if (handler == nullptr) return Malformed("opcode outside the subset");
    if (!(this->*handler)(op)) return false;
  }
  return true;
}

}  // namespace qd::codec::pt_internal
