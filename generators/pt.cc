// Generators for torch .pt / .bin files (rules PT-*, docs/pt.md).
//
// The writer here is quantdiff's own: a ZIP of stored entries laid out as
// torch's PyTorchStreamWriter lays them out (FB padding to 64 bytes, flags
// 0x0808 with a data descriptor, zip64 end records) or as Python's zipfile
// does, and a data.pkl written opcode by opcode as pickle's protocol 2 (or
// 4) writes a state dict. Nothing here reads a file: the readers say what the
// bytes mean. A violation starts from such a file and breaks one thing,
// chosen so that no check earlier in docs/pt.md section 8's order fires.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "generators/generators.h"
#include "generators/pt_bnb.h"

namespace qd::gen {
namespace {

using Bytes = std::vector<std::uint8_t>;
using namespace std::string_literals;

// ---- little-endian fields ---------------------------------------------------------

void Add16(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void Add32(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void Add64(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void Set16(Bytes* b, std::uint64_t at, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void Set32(Bytes* b, std::uint64_t at, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void Set64(Bytes* b, std::uint64_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t Get32(const Bytes& b, std::uint64_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
void AddText(Bytes* b, std::string_view s) { b->insert(b->end(), s.begin(), s.end()); }
Bytes TextBytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

// ---- dtypes (docs/pt.md 4.3) -------------------------------------------------------

struct PtDtype {
  const char* code;     // tensor table dtype
  const char* storage;  // torch.<storage>
  const char* torch;    // torch.<dtype>
  int size;
};
constexpr PtDtype kDtypes[] = {
    {"F64", "DoubleStorage", "float64", 8}, {"F32", "FloatStorage", "float32", 4},
    {"F16", "HalfStorage", "float16", 2},   {"BF16", "BFloat16Storage", "bfloat16", 2},
    {"I64", "LongStorage", "int64", 8},     {"I32", "IntStorage", "int32", 4},
    {"I16", "ShortStorage", "int16", 2},    {"I8", "CharStorage", "int8", 1},
    {"U8", "ByteStorage", "uint8", 1},      {"BOOL", "BoolStorage", "bool", 1},
};
constexpr int kDtypeCount = 10;

// ---- the value model -----------------------------------------------------------------

struct Value;
using V = std::shared_ptr<Value>;

struct Value {
  enum Kind { kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kODict, kSize, kTensor, kDtype, kRaw };
  Kind kind = kNone;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string s;  // kStr text, kDtype name, kRaw opcode bytes
  std::vector<V> items;                    // kTuple, kList, kSize
  std::vector<std::pair<V, V>> entries;    // kDict, kODict
  V state;                                 // kODict: BUILD state (a kDict), or null
  int build_count = 1;                     // BUILDs written when state is set
  int tensor = -1;                         // kTensor: index into Model::tensors
};

V None() { return std::make_shared<Value>(); }
V Bool(bool b) { auto v = std::make_shared<Value>(); v->kind = Value::kBool; v->b = b; return v; }
V Int(std::int64_t i) { auto v = std::make_shared<Value>(); v->kind = Value::kInt; v->i = i; return v; }
V Float(double f) { auto v = std::make_shared<Value>(); v->kind = Value::kFloat; v->f = f; return v; }
V Str(std::string s) { auto v = std::make_shared<Value>(); v->kind = Value::kStr; v->s = std::move(s); return v; }
V Raw(std::string s) { auto v = std::make_shared<Value>(); v->kind = Value::kRaw; v->s = std::move(s); return v; }
V Seq(Value::Kind k, std::vector<V> items = {}) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  v->items = std::move(items);
  return v;
}
V Dict(bool ordered) { auto v = std::make_shared<Value>(); v->kind = ordered ? Value::kODict : Value::kDict; return v; }
V DtypeToken(std::string name) { auto v = std::make_shared<Value>(); v->kind = Value::kDtype; v->s = std::move(name); return v; }

struct Storage {
  std::string key;
  int dtype = 1;
  std::uint64_t numel = 0;
  std::string location = "cpu";
  Bytes bytes;  // little-endian elements, filled by Model::Finish
  bool explicit_bytes = false;
};

// How a tensor's _rebuild_tensor_v2 call is written.
struct Tensor {
  int storage = 0;
  std::int64_t offset = 0;
  std::vector<std::int64_t> size, stride;
  bool requires_grad = false;
  bool parameter = false;  // wrapped in torch._utils._rebuild_parameter
  bool size_as_torch_size = false;
  int hooks = 0;     // backward_hooks: 0 OrderedDict(), 1 {}
  int metadata = 0;  // 0 six arguments, 1 a 7th None, 2 a 7th OrderedDict()
  // Replacements for violations: the whole persistent ID / argument tuple.
  V persid;           // null: ('storage', class, key, location, numel)
  V args;             // null: the six or seven arguments
  std::string storage_class;  // "" : the storage's
};

std::uint64_t Numel(const std::vector<std::int64_t>& size) {
  std::uint64_t n = 1;
  for (std::int64_t d : size) n *= static_cast<std::uint64_t>(d);
  return n;
}

// Elements a view needs: offset + sum((size - 1) * stride) + 1, or offset for an empty view.
std::uint64_t Extent(const Tensor& t) {
  if (Numel(t.size) == 0) return static_cast<std::uint64_t>(t.offset);
  std::uint64_t e = static_cast<std::uint64_t>(t.offset) + 1;
  for (std::size_t k = 0; k < t.size.size(); ++k) {
    e += static_cast<std::uint64_t>(t.size[k] - 1) * static_cast<std::uint64_t>(t.stride[k]);
  }
  return e;
}

std::vector<std::int64_t> ContiguousStrides(const std::vector<std::int64_t>& size) {
  std::vector<std::int64_t> stride(size.size(), 1);
  for (int k = static_cast<int>(size.size()) - 2; k >= 0; --k) {
    stride[k] = stride[k + 1] * std::max<std::int64_t>(size[k + 1], 1);
  }
  return stride;
}

// ---- the pickler -----------------------------------------------------------------------

class Pickler {
 public:
  Pickler(int protocol, const std::vector<Tensor>& tensors, const std::vector<Storage>& storages)
      : protocol_(protocol), tensors_(tensors), storages_(storages) {}

  Bytes Pickle(const V& root, std::vector<std::size_t>* ops) {
    Op(0x80);
    out_.push_back(static_cast<std::uint8_t>(protocol_));
    std::size_t frame = 0;
    if (protocol_ >= 4) {
      frame = out_.size();
      Op(0x95);
      Add64(&out_, 0);
    }
    Save(root);
    Op('.');
    if (protocol_ >= 4) Set64(&out_, frame + 1, out_.size() - (frame + 9));
    if (ops) *ops = ops_;
    return out_;
  }

 private:
  void Op(std::uint8_t op) {
    ops_.push_back(out_.size());
    out_.push_back(op);
  }
  void Put() {
    const std::uint32_t n = memo_count_++;
    if (protocol_ >= 4) {
      Op(0x94);
    } else if (n < 256) {
      Op('q');
      out_.push_back(static_cast<std::uint8_t>(n));
    } else {
      Op('r');
      Add32(&out_, n);
    }
  }
  void Get(std::uint32_t n) {
    if (n < 256) {
      Op('h');
      out_.push_back(static_cast<std::uint8_t>(n));
    } else {
      Op('j');
      Add32(&out_, n);
    }
  }
  bool Memoized(const void* p) {
    auto it = memo_.find(p);
    if (it == memo_.end()) return false;
    Get(it->second);
    return true;
  }
  void Remember(const void* p) {
    memo_[p] = memo_count_;
    Put();
  }

  void Global(const std::string& module, const std::string& name) {
    const std::string key = module + "\n" + name;
    auto it = globals_.find(key);
    if (it != globals_.end()) {
      Get(it->second);
      return;
    }
    if (protocol_ >= 4) {
      Text(module);
      Text(name);
      Op(0x93);
    } else {
      Op('c');
      AddText(&out_, module + "\n" + name + "\n");
    }
    globals_[key] = memo_count_;
    Put();
  }

  // A str, memoized as pickle does (equal interned strings share one memo entry).
  void Text(const std::string& s, bool share = false) {
    if (share) {
      auto it = strings_.find(s);
      if (it != strings_.end()) {
        Get(it->second);
        return;
      }
    }
    if (protocol_ >= 4 && s.size() < 256) {
      Op(0x8C);
      out_.push_back(static_cast<std::uint8_t>(s.size()));
    } else {
      Op('X');
      Add32(&out_, s.size());
    }
    AddText(&out_, s);
    if (share) strings_[s] = memo_count_;
    Put();
  }

  void Integer(std::int64_t x) {
    if (x >= 0 && x < 256) {
      Op('K');
      out_.push_back(static_cast<std::uint8_t>(x));
    } else if (x >= 0 && x < 65536) {
      Op('M');
      Add16(&out_, static_cast<std::uint64_t>(x));
    } else if (x >= INT32_MIN && x <= INT32_MAX) {
      Op('J');
      Add32(&out_, static_cast<std::uint32_t>(static_cast<std::int32_t>(x)));
    } else {
      // LONG1: the shortest two's complement little-endian form.
      Bytes b;
      std::uint64_t u = static_cast<std::uint64_t>(x);
      for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
      while (b.size() > 1) {
        const std::uint8_t last = b.back(), prev = b[b.size() - 2];
        if ((last == 0 && !(prev & 0x80)) || (last == 0xff && (prev & 0x80))) {
          b.pop_back();
        } else {
          break;
        }
      }
      Op(0x8A);
      out_.push_back(static_cast<std::uint8_t>(b.size()));
      out_.insert(out_.end(), b.begin(), b.end());
    }
  }

  void TupleOf(const std::vector<V>& items, const void* identity) {
    if (items.empty()) {
      Op(')');
      return;
    }
    if (items.size() <= 3) {
      for (const V& v : items) Save(v);
      Op(static_cast<std::uint8_t>(0x85 + items.size() - 1));
    } else {
      Op('(');
      for (const V& v : items) Save(v);
      Op('t');
    }
    if (identity) {
      memo_[identity] = memo_count_;
    }
    Put();
  }

  void IntTuple(const std::vector<std::int64_t>& ints) {
    std::vector<V> items;
    for (std::int64_t x : ints) items.push_back(Int(x));
    TupleOf(items, nullptr);
  }

  void SetItems(const std::vector<std::pair<V, V>>& entries) {
    if (entries.size() == 1) {
      Save(entries[0].first);
      Save(entries[0].second);
      Op('s');
      return;
    }
    for (std::size_t at = 0; at < entries.size(); at += 1000) {
      Op('(');
      for (std::size_t k = at; k < entries.size() && k < at + 1000; ++k) {
        Save(entries[k].first);
        Save(entries[k].second);
      }
      Op('u');
    }
  }

  void EmptyOrderedDict() {
    Global("collections", "OrderedDict");
    Op(')');
    Op('R');
    Put();
  }

  void SaveTensor(const Tensor& t) {
    const Storage& st = storages_[t.storage];
    // _rebuild_parameter(tensor, requires_grad, OrderedDict()): the callable first.
    if (t.parameter) Global("torch._utils", "_rebuild_parameter");
    Global("torch._utils", "_rebuild_tensor_v2");
    if (t.args) {
      Save(t.args);
    } else {
      Op('(');
      if (t.persid) {
        Save(t.persid);
      } else {
        Op('(');
        Text("storage", true);
        Global("torch", t.storage_class.empty() ? kDtypes[st.dtype].storage : t.storage_class);
        Text(st.key);
        Text(st.location, true);
        Integer(static_cast<std::int64_t>(st.numel));
        Op('t');
        Put();
      }
      Op('Q');
      Integer(t.offset);
      if (t.size_as_torch_size) {
        Global("torch", "Size");
        IntTuple(t.size);
        Op(0x85);
        Put();
        Op('R');
        Put();
      } else {
        IntTuple(t.size);
      }
      IntTuple(t.stride);
      Op(t.requires_grad ? 0x88 : 0x89);
      if (t.hooks == 0) {
        EmptyOrderedDict();
      } else {
        Op('}');
        Put();
      }
      if (t.metadata == 1) Op('N');
      if (t.metadata == 2) EmptyOrderedDict();
      Op('t');
      Put();
    }
    Op('R');
    Put();
    if (t.parameter) {
      Op(t.requires_grad ? 0x88 : 0x89);
      EmptyOrderedDict();
      Op(0x87);
      Put();
      Op('R');
      Put();
    }
  }

  void Save(const V& v) {
    switch (v->kind) {
      case Value::kNone: Op('N'); return;
      case Value::kBool: Op(v->b ? 0x88 : 0x89); return;
      case Value::kInt: Integer(v->i); return;
      case Value::kFloat: {
        Op('G');
        const std::uint64_t bits = std::bit_cast<std::uint64_t>(v->f);
        for (int i = 7; i >= 0; --i) out_.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
        return;
      }
      case Value::kStr:
        if (Memoized(v.get())) return;
        Text(v->s);
        memo_[v.get()] = memo_count_ - 1;
        return;
      case Value::kRaw: {
        // Verbatim opcodes; their first byte is recorded as an opcode.
        ops_.push_back(out_.size());
        AddText(&out_, v->s);
        return;
      }
      case Value::kDtype:
        Global("torch", v->s);
        return;
      case Value::kTuple:
        if (Memoized(v.get())) return;
        TupleOf(v->items, v.get());
        return;
      case Value::kSize:
        if (Memoized(v.get())) return;
        Global("torch", "Size");
        TupleOf(v->items, nullptr);
        Op(0x85);
        Put();
        Op('R');
        Remember(v.get());
        return;
      case Value::kList:
        if (Memoized(v.get())) return;
        Op(']');
        Remember(v.get());
        if (v->items.size() == 1) {
          Save(v->items[0]);
          Op('a');
        } else {
          for (std::size_t at = 0; at < v->items.size(); at += 1000) {
            Op('(');
            for (std::size_t k = at; k < v->items.size() && k < at + 1000; ++k) Save(v->items[k]);
            Op('e');
          }
        }
        return;
      case Value::kDict:
        if (Memoized(v.get())) return;
        Op('}');
        Remember(v.get());
        if (!v->entries.empty()) SetItems(v->entries);
        return;
      case Value::kODict:
        if (Memoized(v.get())) return;
        Global("collections", "OrderedDict");
        Op(')');
        Op('R');
        Remember(v.get());
        if (!v->entries.empty()) SetItems(v->entries);
        if (v->state) {
          for (int k = 0; k < v->build_count; ++k) {
            Save(v->state);
            Op('b');
          }
        }
        return;
      case Value::kTensor:
        if (Memoized(v.get())) return;
        SaveTensor(tensors_[v->tensor]);
        memo_[v.get()] = memo_count_ - 1;
        return;
    }
  }

  int protocol_;
  const std::vector<Tensor>& tensors_;
  const std::vector<Storage>& storages_;
  Bytes out_;
  std::vector<std::size_t> ops_;
  std::uint32_t memo_count_ = 0;
  std::map<const void*, std::uint32_t> memo_;
  std::map<std::string, std::uint32_t> globals_;
  std::map<std::string, std::uint32_t> strings_;
};

// ---- random element bytes -----------------------------------------------------------------

Bytes RandomElements(int dtype, std::uint64_t n, Rng& rng) {
  const int isz = kDtypes[dtype].size;
  Bytes b(n * isz);
  const std::string code = kDtypes[dtype].code;
  for (std::uint64_t e = 0; e < n; ++e) {
    std::uint8_t* p = b.data() + e * isz;
    if (code == "BOOL") {
      p[0] = static_cast<std::uint8_t>(Pick(rng, 2));
    } else if (code == "F32") {
      const float v = Coin(rng, 8) ? std::bit_cast<float>(static_cast<std::uint32_t>(rng()))
                                   : static_cast<float>(static_cast<std::int64_t>(Pick(rng, 2001)) - 1000) / 64.0f;
      std::memcpy(p, &v, 4);
    } else if (code == "F64") {
      const std::int64_t whole = static_cast<std::int64_t>(Pick(rng, 200001)) - 100000;
      const std::uint64_t tiny = Pick(rng, 1000);
      double v = static_cast<double>(whole) / 1024.0 + std::ldexp(static_cast<double>(tiny), -40);
      if (Coin(rng, 8)) v = std::bit_cast<double>(static_cast<std::uint64_t>(rng()));
      std::memcpy(p, &v, 8);
    } else {
      const std::uint64_t r = rng();
      for (int i = 0; i < isz; ++i) p[i] = static_cast<std::uint8_t>(r >> (8 * i));
    }
  }
  return b;
}

// Calls f(i, s) for every C-order element i of t and its storage element
// s(i) = offset + sum(i_k * stride[k]) (docs/pt.md 5.3).
template <typename F>
void ForEachElement(const Tensor& t, F f) {
  const std::uint64_t n = Numel(t.size);
  std::vector<std::int64_t> index(t.size.size(), 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t s = static_cast<std::uint64_t>(t.offset);
    for (std::size_t k = 0; k < index.size(); ++k) s += static_cast<std::uint64_t>(index[k] * t.stride[k]);
    f(i, s);
    for (int k = static_cast<int>(index.size()) - 1; k >= 0; --k) {
      if (++index[k] < t.size[k]) break;
      index[k] = 0;
    }
  }
}

// ---- a state dict under construction ----------------------------------------------------

struct Model {
  int protocol = 2;
  bool torch_style = true;
  bool zip64_end = true;
  std::string prefix = "archive";
  int byteorder = 0;  // 0 no record, 1 little, 2 big
  bool data_version = false;  // .data/version instead of version
  std::string version = "3\n";
  bool newer_records = false;  // .format_version, .storage_alignment, .data/serialization_id
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;
  V root;
  int counter = 0;  // makes every key unique, so flattened names never collide
  std::vector<std::pair<std::string, Bytes>> extra_records;  // added as they are

  std::string NewKey() { return std::to_string(storages.size()); }

  int AddStorage(int dtype) {
    Storage s;
    s.key = NewKey();
    s.dtype = dtype;
    storages.push_back(s);
    return static_cast<int>(storages.size()) - 1;
  }

  V AddTensor(Tensor t) {
    tensors.push_back(std::move(t));
    auto v = std::make_shared<Value>();
    v->kind = Value::kTensor;
    v->tensor = static_cast<int>(tensors.size()) - 1;
    return v;
  }

  // A contiguous tensor on a fresh storage of exactly its elements.
  V NewTensor(int dtype, std::vector<std::int64_t> size, Rng& rng) {
    Tensor t;
    t.storage = AddStorage(dtype);
    t.stride = ContiguousStrides(size);
    t.size = std::move(size);
    t.requires_grad = Coin(rng, 4);
    t.size_as_torch_size = Coin(rng, 8);
    t.hooks = Coin(rng, 6) ? 1 : 0;
    t.metadata = Coin(rng, 6) ? static_cast<int>(1 + Pick(rng, 2)) : 0;
    return AddTensor(std::move(t));
  }
  // NewTensor of a random dtype among the first `dtypes` and a random size.
  // The size is drawn before the dtype, so every compiler makes the same bytes.
  V RandomTensor(Rng& rng, int dtypes = kDtypeCount) {
    std::vector<std::int64_t> size = RandomSize(rng);
    const int dtype = static_cast<int>(Pick(rng, static_cast<std::uint64_t>(dtypes)));
    return NewTensor(dtype, std::move(size), rng);
  }

  std::string Segment(Rng& rng) {
    static const char* const kWords[] = {"weight", "bias", "embed", "ln", "proj", "running_var",
                                         "buf", "step", "lr", "meta", "cfg", "h", "w", "fc"};
    return std::string(kWords[Pick(rng, std::size(kWords))]) + std::to_string(counter++);
  }
  V Key(Rng& rng, bool allow_int) {
    if (allow_int && Coin(rng, 5)) return Int(1000 + counter++);
    std::string k = Segment(rng);
    if (Coin(rng, 3)) k = "layers" + std::to_string(counter++) + "." + k;
    return Str(k);
  }

  // Sizes: rank 0..3 (rank 0 sometimes), dimensions 0..5 (0 sometimes).
  std::vector<std::int64_t> RandomSize(Rng& rng) {
    const std::uint64_t rank = Coin(rng, 8) ? 0 : 1 + Pick(rng, 3);
    std::vector<std::int64_t> size;
    for (std::uint64_t k = 0; k < rank; ++k) {
      size.push_back(Coin(rng, 12) ? 0 : static_cast<std::int64_t>(1 + Pick(rng, 5)));
    }
    return size;
  }

  // A view on storage s: random sizes and strides (broadcast, overlap and
  // transposes included) and an offset; the storage grows to hold it.
  V NewView(int s, Rng& rng) {
    Tensor t;
    t.storage = s;
    t.size = RandomSize(rng);
    switch (Pick(rng, 4)) {
      case 0: t.stride = ContiguousStrides(t.size); break;
      case 1:  // transposed
        t.stride = ContiguousStrides(t.size);
        std::reverse(t.stride.begin(), t.stride.end());
        break;
      default:
        for (std::size_t k = 0; k < t.size.size(); ++k) t.stride.push_back(static_cast<std::int64_t>(Pick(rng, 5)));
    }
    t.offset = static_cast<std::int64_t>(Pick(rng, 6));
    t.requires_grad = Coin(rng, 4);
    Storage& st = storages[s];
    st.numel = std::max(st.numel, Extent(t) + Pick(rng, 3));
    return AddTensor(std::move(t));
  }

  V PlainValue(Rng& rng, int depth) {
    switch (Pick(rng, depth > 2 ? 7 : 10)) {
      case 0: return Str(Coin(rng) ? "nf4" : std::string("text") + std::to_string(Pick(rng, 100)));
      case 1: {
        const std::int64_t choices[] = {0, 1, 255, 256, 65535, 65536, -1, -129, INT32_MAX,
                                        INT32_MIN, static_cast<std::int64_t>(1) << 40, INT64_MAX, INT64_MIN};
        return Int(choices[Pick(rng, std::size(choices))]);
      }
      case 2: {
        const double choices[] = {0.5, -0.0, 1e-300, 3.25, 1e300, 0.1};
        return Float(choices[Pick(rng, std::size(choices))]);
      }
      case 3: return Bool(Coin(rng));
      case 4: return None();
      case 5: return DtypeToken(kDtypes[Pick(rng, kDtypeCount)].torch);
      case 6: {
        std::vector<V> ints;
        for (std::uint64_t k = Pick(rng, 4); k > 0; --k) ints.push_back(Int(static_cast<std::int64_t>(Pick(rng, 100))));
        return Seq(Value::kSize, ints);
      }
      case 7: {
        std::vector<V> items;
        for (std::uint64_t k = Pick(rng, 5); k > 0; --k) items.push_back(PlainValue(rng, depth + 1));
        return Seq(Value::kTuple, items);
      }
      case 8: {
        std::vector<V> items;
        for (std::uint64_t k = Pick(rng, 4); k > 0; --k) items.push_back(PlainValue(rng, depth + 1));
        // A tensor inside a list stays inside its value (docs/pt.md 6.1).
        if (Coin(rng, 3)) items.push_back(RandomTensor(rng));
        return Seq(Value::kList, items);
      }
      default: {
        V d = Dict(false);
        V value = PlainValue(rng, depth + 1);  // before the key takes its counter
        d->entries.emplace_back(Str("k" + std::to_string(counter++)), std::move(value));
        return Seq(Value::kList, {d});
      }
    }
  }

  // Fills dict d with n items: tensors, views, parameters, nested dicts, values.
  void Fill(const V& d, int n, Rng& rng, int depth) {
    for (int k = 0; k < n; ++k) {
      V key = Key(rng, depth > 1 || Coin(rng, 6));
      V value;
      switch (Pick(rng, depth >= 3 ? 7 : 9)) {
        case 0: case 1: case 2:
          value = RandomTensor(rng);
          break;
        case 3: {  // a view of a storage shared with other views
          // Views' storages have their numel set already (contiguous tensors' at Finish).
          int s = -1;
          for (int i = 0; i < static_cast<int>(storages.size()); ++i) {
            if (storages[i].numel > 0 && Coin(rng, 2)) s = i;
          }
          if (s < 0) s = AddStorage(static_cast<int>(Pick(rng, kDtypeCount)));
          value = NewView(s, rng);
          break;
        }
        case 4: {
          value = RandomTensor(rng, 4);
          tensors[value->tensor].parameter = true;
          break;
        }
        case 5: case 6:
          value = PlainValue(rng, depth);
          break;
        default: {
          value = Dict(Coin(rng));
          Fill(value, static_cast<int>(1 + Pick(rng, 3)), rng, depth + 1);
        }
      }
      d->entries.emplace_back(key, value);
    }
  }

  // A tensor given by its C-order bytes (PtTensorData), on a storage of its
  // own laid out as data.layout says; the storage is complete (Finish leaves it).
  V AddTensorData(const PtTensorData& data) {
    int dtype = 8;  // U8 for a dtype outside the ten
    for (int d = 0; d < kDtypeCount; ++d) {
      if (data.dtype == kDtypes[d].code) dtype = d;
    }
    const std::uint64_t isz = static_cast<std::uint64_t>(kDtypes[dtype].size);
    Tensor t;
    for (std::uint64_t d : data.shape) t.size.push_back(static_cast<std::int64_t>(d));
    const std::vector<std::int64_t> contiguous = ContiguousStrides(t.size);
    const std::uint64_t numel = Numel(t.size);
    PtTensorData::Layout layout = data.layout;
    if (layout == PtTensorData::Layout::kTransposed && t.size.size() < 2) layout = PtTensorData::Layout::kStrided;
    std::uint64_t tail = 0;  // storage elements after the view's last one
    switch (layout) {
      case PtTensorData::Layout::kContiguous: t.stride = contiguous; break;
      case PtTensorData::Layout::kTransposed: {
        // The storage is the tensor with its axes reversed, in C order; the
        // view reads it back through the reversed strides, as x.t() does.
        std::vector<std::int64_t> reversed(t.size.rbegin(), t.size.rend());
        const std::vector<std::int64_t> rs = ContiguousStrides(reversed);
        t.stride.assign(rs.rbegin(), rs.rend());
        break;
      }
      case PtTensorData::Layout::kOffsetSlice:
        t.stride = contiguous;
        t.offset = static_cast<std::int64_t>(1 + numel % 3);
        tail = 2;
        break;
      case PtTensorData::Layout::kStrided:
        for (std::int64_t c : contiguous) t.stride.push_back(2 * c);
        if (t.size.empty()) t.offset = 1;  // a 0-d tensor has no stride: an offset instead
        tail = 1;
        break;
    }
    t.storage = AddStorage(dtype);
    Storage& st = storages[t.storage];
    st.numel = Extent(t) + tail;
    st.bytes.assign(st.numel * isz, 0xEE);
    st.explicit_bytes = true;
    ForEachElement(t, [&](std::uint64_t i, std::uint64_t at) {
      for (std::uint64_t k = 0; k < isz; ++k) {
        st.bytes[at * isz + k] = i * isz + k < data.bytes.size() ? data.bytes[i * isz + k] : 0;
      }
    });
    return AddTensor(std::move(t));
  }

  V FromObject(const PtObject& o) {
    using K = PtObject::Kind;
    switch (o.kind) {
      case K::kNone: return None();
      case K::kBool: return Bool(o.boolean);
      case K::kInt: return Int(o.integer);
      case K::kFloat: return Float(o.real);
      case K::kStr: return Str(o.text);
      case K::kToken: return DtypeToken(o.text);
      case K::kTensor: return AddTensorData(o.tensor);
      case K::kDict: {
        V d = Dict(o.boolean);
        for (const auto& [k, v] : o.entries) d->entries.emplace_back(Str(k), FromObject(v));
        return d;
      }
      default: {
        std::vector<V> items;
        for (const PtObject& item : o.items) items.push_back(FromObject(item));
        return Seq(o.kind == K::kTuple ? Value::kTuple : o.kind == K::kList ? Value::kList : Value::kSize,
                   std::move(items));
      }
    }
  }

  // Items added to a finished root, each at a random place among its items.
  void Insert(const PtStateDict& items, Rng& rng) {
    for (const auto& [k, v] : items) {
      const std::size_t at = Pick(rng, root->entries.size() + 1);
      root->entries.insert(root->entries.begin() + static_cast<std::ptrdiff_t>(at), {Str(k), FromObject(v)});
    }
  }

  // Storage sizes and bytes: a storage is at least as long as its views need
  // (a contiguous tensor's storage exactly its elements).
  void Finish(Rng& rng) {
    for (const Tensor& t : tensors) {
      Storage& st = storages[t.storage];
      st.numel = std::max(st.numel, Extent(t));
    }
    for (Storage& st : storages) {
      if (!st.explicit_bytes) st.bytes = RandomElements(st.dtype, st.numel, rng);
    }
  }
};

// C-order bytes of tensor t (docs/pt.md 5.3), from little-endian storage bytes.
Bytes Materialise(const Tensor& t, const Storage& st) {
  const int isz = kDtypes[st.dtype].size;
  // Violations write geometry no reader accepts: nothing to materialise.
  if (t.size.size() != t.stride.size() || t.size.size() > 64 || t.offset < 0) return {};
  for (std::size_t k = 0; k < t.size.size(); ++k) {
    if (t.size[k] < 0 || t.size[k] > (1 << 20) || t.stride[k] < 0) return {};
  }
  const std::uint64_t n = Numel(t.size);
  if (n > (1u << 24) || Extent(t) * isz > st.bytes.size()) return {};
  Bytes out;
  out.reserve(n * isz);
  ForEachElement(t, [&](std::uint64_t, std::uint64_t s) {
    out.insert(out.end(), st.bytes.begin() + s * isz, st.bytes.begin() + (s + 1) * isz);
  });
  return out;
}

bool IsWholeStorage(const Tensor& t, const Storage& st) {
  return t.offset == 0 && t.stride == ContiguousStrides(t.size) && Numel(t.size) == st.numel;
}

void Flatten(const Model& m, const V& d, const std::string& prefix, PtDraft* draft) {
  for (const auto& [k, v] : d->entries) {
    const std::string name = prefix + (k->kind == Value::kInt ? std::to_string(k->i) : k->s);
    if (v->kind == Value::kDict || v->kind == Value::kODict) {
      Flatten(m, v, name + ".", draft);
    } else if (v->kind == Value::kTensor) {
      const Tensor& t = m.tensors[v->tensor];
      const Storage& st = m.storages[t.storage];
      PtExpectedTensor e;
      e.name = name;
      e.dtype = kDtypes[st.dtype].code;
      for (std::int64_t s : t.size) e.shape.push_back(static_cast<std::uint64_t>(s));
      e.bytes = Materialise(t, st);
      e.view = !IsWholeStorage(t, st);
      draft->tensors.push_back(std::move(e));
    } else {
      draft->values.push_back(name);
    }
  }
}

// Pickles the model and lays out its records as torch 1.13 (data.pkl,
// data/<k>, version) or torch 2.x (data.pkl, .format_version,
// .storage_alignment, byteorder, data/<k>, .data/version,
// .data/serialization_id) writes them.
PtDraft Serialize(const Model& m) {
  PtDraft d;
  d.prefix = m.prefix;
  d.torch_style = m.torch_style;
  d.zip64_end = m.zip64_end;
  Pickler p(m.protocol, m.tensors, m.storages);
  d.records.emplace_back("data.pkl", p.Pickle(m.root, &d.pickle_ops));
  if (m.newer_records) {
    d.records.emplace_back(".format_version", TextBytes("1"));
    d.records.emplace_back(".storage_alignment", TextBytes("64"));
  }
  if (m.byteorder == 1) d.records.emplace_back("byteorder", TextBytes("little"));
  if (m.byteorder == 2) d.records.emplace_back("byteorder", TextBytes("big"));
  for (const Storage& st : m.storages) {
    Bytes b = st.bytes;
    if (m.byteorder == 2) {
      const int isz = kDtypes[st.dtype].size;
      for (std::size_t e = 0; e + isz <= b.size(); e += isz) std::reverse(b.begin() + e, b.begin() + e + isz);
    }
    d.records.emplace_back("data/" + st.key, std::move(b));
  }
  d.records.emplace_back(m.data_version ? ".data/version" : "version", TextBytes(m.version));
  if (m.newer_records) d.records.emplace_back(".data/serialization_id", TextBytes("1234567890123456789"));
  for (const auto& r : m.extra_records) d.records.push_back(r);
  if (m.root && (m.root->kind == Value::kDict || m.root->kind == Value::kODict)) Flatten(m, m.root, "", &d);
  return d;
}

Model RandomModel(Rng& rng, const PtDraftOptions& options) {
  Model m;
  const int protocols[] = {2, 2, 2, 2, 2, 3, 4, 4, 5};
  m.protocol = options.protocol ? options.protocol : protocols[Pick(rng, std::size(protocols))];
  m.torch_style = !Coin(rng, 5);
  m.zip64_end = m.torch_style && !Coin(rng, 6);
  const char* const prefixes[] = {"archive", "model", "pytorch_model", "gptq4_sd", "a", "x_1"};
  m.prefix = prefixes[Pick(rng, std::size(prefixes))];
  m.byteorder = static_cast<int>(Pick(rng, options.allow_big ? 3 : 2));
  if (m.byteorder == 2 && !Coin(rng, 2)) m.byteorder = 1;
  m.newer_records = Coin(rng, 3);
  m.data_version = m.newer_records ? !Coin(rng, 4) : Coin(rng, 8);
  m.version = Coin(rng, 4) ? "3" : "3\n";
  m.root = Dict(!Coin(rng, 5));
  m.Fill(m.root, static_cast<int>(1 + Pick(rng, static_cast<std::uint64_t>(std::max(1, options.max_items)))), rng, 1);
  if (options.copies) {
    // Each view gets a contiguous copy on its own storage (bytes set after Finish).
    std::vector<std::pair<V, V>> entries = m.root->entries;
    m.root->entries.clear();
    for (auto& [k, v] : entries) {
      m.root->entries.emplace_back(k, v);
      if (v->kind == Value::kTensor && k->kind == Value::kStr) {
        const Tensor t = m.tensors[v->tensor];
        V copy = m.NewTensor(m.storages[t.storage].dtype, t.size, rng);
        m.root->entries.emplace_back(Str(k->s + "_copy"), copy);
      }
    }
  }
  if (m.root->kind == Value::kODict && Coin(rng, 3)) {  // torch's _metadata, set by BUILD
    V meta = Dict(true);
    V version = Dict(false);
    version->entries.emplace_back(Str("version"), Int(1));
    meta->entries.emplace_back(Str(""), version);
    m.root->state = Dict(false);
    m.root->state->entries.emplace_back(Str("_metadata"), meta);
  }
  m.Finish(rng);
  if (options.copies) {
    for (const auto& [k, v] : m.root->entries) {
      if (v->kind != Value::kTensor || k->kind != Value::kStr || k->s.size() < 5 ||
          k->s.compare(k->s.size() - 5, 5, "_copy") != 0) {
        continue;
      }
      // The entry before is the original.
      for (std::size_t i = 1; i < m.root->entries.size(); ++i) {
        if (m.root->entries[i].second == v) {
          const Tensor& orig = m.tensors[m.root->entries[i - 1].second->tensor];
          Storage& st = m.storages[m.tensors[v->tensor].storage];
          st.bytes = Materialise(orig, m.storages[orig.storage]);
          st.explicit_bytes = true;
        }
      }
    }
  }
  if (!options.extra.empty()) m.Insert(options.extra, rng);
  return m;
}

std::vector<PtZipEntry> Entries(const PtDraft& d) {
  std::vector<PtZipEntry> entries;
  for (const auto& [name, bytes] : d.records) {
    PtZipEntry e;
    e.name = d.prefix + "/" + name;
    e.data = bytes;
    e.torch_style = d.torch_style;
    entries.push_back(std::move(e));
  }
  return entries;
}

PtZipOptions Options(const PtDraft& d) {
  PtZipOptions o;
  o.zip64_end = d.zip64_end;
  return o;
}

std::size_t RecordIndex(const PtDraft& d, const std::string& name) {
  for (std::size_t i = 0; i < d.records.size(); ++i) {
    if (d.records[i].first == name) return i;
  }
  return d.records.size();
}

Generated Done(Bytes bytes, std::string rule, std::string what) {
  return Generated{std::move(bytes), std::move(rule), std::move(what), {}};
}

// A valid model with at least one tensor on a non-empty storage, few items,
// and no byteorder = big (some violations patch storages).
Model BaseModel(Rng& rng, int protocol = 0) {
  PtDraftOptions o;
  o.max_items = 3;
  o.allow_big = false;
  o.protocol = protocol;
  Model m = RandomModel(rng, o);
  V t = m.NewTensor(1, {2, 3}, rng);
  m.tensors[t->tensor].args = nullptr;
  m.root->entries.emplace_back(Str("tail" + std::to_string(m.counter++) + ".weight"), t);
  m.Finish(rng);
  return m;
}

Bytes WriteModel(const Model& m, PtZipLayout* layout = nullptr) { return PtWriteDraft(Serialize(m), layout); }

// ---- violations by rule -----------------------------------------------------------------

// Opcode sequences that push one value (inserted as a dict value).
V RawValue(const std::string& ops) { return Raw(ops); }

std::string U32Text(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}

std::string GlobalOp(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}

std::string BinUnicode(const std::string& s) { return "X" + U32Text(static_cast<std::uint32_t>(s.size())) + s; }

// Inserts a raw value under a fresh key at a random place of the root.
void InsertRaw(Model& m, const std::string& ops, Rng& rng) {
  const std::size_t at = Pick(rng, m.root->entries.size() + 1);
  m.root->entries.insert(m.root->entries.begin() + static_cast<std::ptrdiff_t>(at),
                         {Str("raw" + std::to_string(m.counter++)), RawValue(ops)});
}

// The tensor added last by BaseModel ("tail<n>.weight", F32 [2, 3]).
Tensor& TailTensor(Model& m) { return m.tensors[m.root->entries.back().second->tensor]; }

Generated ZipViolation(const std::string& r, Rng& rng) {
  Model m = BaseModel(rng);
  PtDraft d = Serialize(m);
  std::vector<PtZipEntry> entries = Entries(d);
  PtZipOptions options = Options(d);
  PtZipLayout l;
  Bytes f = PtWriteZip(entries, options, &l);
  const std::size_t n = entries.size();
  const std::size_t victim = Pick(rng, n);
  const PtZipLayout::Entry& le = l.entries[victim];

  if (r == "PT-002") {
    switch (Pick(rng, 12)) {
      case 0: f.resize(Pick(rng, 22)); if (f.size() >= 4) f[0] = 'P'; break;
      case 1: f.insert(f.begin(), static_cast<std::uint8_t>(Pick(rng, 256) == 'P' ? 0 : 'Q')); break;
      case 2: Set16(&f, l.eocd + 20, 1 + Pick(rng, 100)); break;  // comment length, no comment
      case 3: for (std::uint64_t k = 1 + Pick(rng, 30); k > 0; --k) f.push_back(static_cast<std::uint8_t>(rng())); break;
      case 4: Set16(&f, l.eocd + 4 + 2 * Pick(rng, 2), 1); break;  // disk fields
      case 5: Set16(&f, l.eocd + 8, n + 1); break;                // entries on this disk
      case 6: {  // the directory does not end at the end records
        const std::uint64_t off = l.cd_off - 1;
        Set32(&f, l.eocd + 16, off);
        if (l.zip64) Set64(&f, l.zip64_record + 48, off);
        break;
      }
      case 7: {  // no entry
        Set16(&f, l.eocd + 8, 0);
        Set16(&f, l.eocd + 10, 0);
        if (l.zip64) {
          Set64(&f, l.zip64_record + 24, 0);
          Set64(&f, l.zip64_record + 32, 0);
        }
        break;
      }
      case 8: {  // more entries than the directory can hold
        const std::uint64_t count = l.cd_size / 46 + 1 + Pick(rng, 60000 - l.cd_size / 46);
        Set16(&f, l.eocd + 8, count);
        Set16(&f, l.eocd + 10, count);
        if (l.zip64) {
          Set64(&f, l.zip64_record + 24, count);
          Set64(&f, l.zip64_record + 32, count);
        }
        break;
      }
      case 9:
        if (l.zip64) {  // a zip64 field out of line
          switch (Pick(rng, 5)) {
            case 0: Set32(&f, l.locator + 16, 2); break;                         // disk count
            case 1: Set64(&f, l.locator + 8, l.zip64_record - 1); break;         // z + 56 != L
            case 2: Set64(&f, l.zip64_record + 4, 45); break;                    // record size
            case 3: Set64(&f, l.zip64_record + 24, n + 1); break;                // counts differ
            default: Set32(&f, l.locator + 4, 1); break;                         // locator disk
          }
        } else {  // a saturated classic value without a locator
          Set16(&f, l.eocd + 10, 0xFFFF);
          Set16(&f, l.eocd + 8, 0xFFFF);
        }
        break;
      case 10:
        if (l.zip64) {  // the classic value is not saturated and differs from zip64's
          Set32(&f, l.eocd + 12, l.cd_size + 1 + Pick(rng, 5));
        } else {
          Set32(&f, l.eocd + 16, 0xFFFFFFFF);
        }
        break;
      default: {  // an archive of no entries at all: just an end record
        f.assign(22, 0);
        Set32(&f, 0, 0x06054b50);
      }
    }
    return Done(std::move(f), r, "end records outside the subset");
  }
  if (r == "PT-003") {
    const std::uint64_t c = le.central;
    switch (Pick(rng, 9)) {
      case 0: f[c + Pick(rng, 4)] ^= static_cast<std::uint8_t>(1 + Pick(rng, 255)); break;  // signature
      case 1: {  // a flag outside bits 3 and 11 (bit 0: encryption)
        const std::uint16_t bits[] = {0x0001, 0x0002, 0x0004, 0x0040, 0x2000, 0x0010, 0x0100, 0x0041};
        const std::uint16_t bit = bits[Pick(rng, std::size(bits))];
        f[c + 8] |= static_cast<std::uint8_t>(bit & 0xff);
        f[c + 9] |= static_cast<std::uint8_t>(bit >> 8);
        break;
      }
      case 2: Set16(&f, c + 10, Coin(rng) ? 8 : 1 + Pick(rng, 20)); break;  // method (deflate)
      case 3: Set32(&f, c + 20, Get32(f, c + 20) + 1 + Pick(rng, 9)); break;  // compressed != uncompressed
      case 4: Set16(&f, c + 34, 1 + Pick(rng, 3)); break;                     // disk start
      case 5: {  // saturated sizes without a zip64 extra field
        Set32(&f, c + 20, 0xFFFFFFFF);
        Set32(&f, c + 24, 0xFFFFFFFF);
        break;
      }
      case 6: {  // extra field not filled exactly / id twice / zip64 too short
        const Bytes extras[] = {
            {0xCA, 0xFE, 0x08, 0x00, 1, 2, 3, 4},
            {0xCA, 0xFE, 0x00, 0x00, 0xCA, 0xFE, 0x00, 0x00},
            {0x01},
            {0xCA, 0xFE, 0x02, 0x00, 1, 2, 3},
        };
        entries[victim].central_extra = extras[Pick(rng, 4)];
        f = PtWriteZip(entries, options, &l);
        break;
      }
      case 7: {  // a name running past the directory (last entry)
        const std::uint64_t last = l.entries.back().central;
        Set16(&f, last + 28, l.cd_size + Pick(rng, 100));
        break;
      }
      default: {  // bytes after the last entry, inside cd_size
        options.central_tail = Bytes(1 + Pick(rng, 45), 0x00);
        f = PtWriteZip(entries, options, &l);
      }
    }
    return Done(std::move(f), r, "central directory entry outside the subset");
  }
  if (r == "PT-004") {
    const std::string p = d.prefix;
    const std::size_t i = 1 + Pick(rng, n - 1);  // not the first: its prefix is P
    std::string rest = entries[i].name.substr(p.size() + 1);
    const std::string bad[] = {
        p + "/../" + rest, "/" + p + "/" + rest, p + "\\" + rest, p + "/" + rest + "\x01",
        p + "/x\xff" + rest, rest.find('/') == std::string::npos ? rest : "data.pkl",
        "other/" + rest, p + "//" + rest, p + "/./" + rest, p + "/" + rest + "/",
        p + "/\xc0\xaf" + rest, p + "/" + rest + "\x7f", p + "/\xed\xa0\x80" + rest,
    };
    entries[i].name = bad[Pick(rng, std::size(bad))];
    if (Coin(rng, 4)) {  // or the first entry, escaping at once
      entries[i].name = d.prefix + "/" + rest;
      entries[0].name = Coin(rng) ? "../data.pkl" : "/" + entries[0].name;
    }
    return Done(PtWriteZip(entries, options), r, "entry name escapes the archive");
  }
  if (r == "PT-005") {
    PtZipEntry dup = entries[victim];
    if (Coin(rng)) dup.data.push_back('x');
    entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(victim + 1 + Pick(rng, n - victim)), dup);
    return Done(PtWriteZip(entries, options), r, "two entries with one name");
  }
  if (r == "PT-006") {
    const std::uint64_t h = le.local;
    const bool torch = entries[victim].torch_style;
    switch (Pick(rng, torch ? 11 : 7)) {
      case 0: {  // signature (not the first entry's: that is the file's PT-002 check)
        // drawn in this order so every compiler makes the same bytes
        const auto flip = static_cast<std::uint8_t>(1 + Pick(rng, 255));
        const std::size_t entry = 1 + Pick(rng, n - 1);
        const std::uint64_t byte = Pick(rng, 4);
        f[l.entries[entry].local + byte] ^= flip;
        break;
      }
      case 1: f[h + 30 + Pick(rng, entries[victim].name.size())] ^= 0x20; break;            // name
      case 2: f[h + 6] ^= Coin(rng) ? 0x08 : 0x00, f[h + 7] ^= 0x08; break;                // flags
      case 3: Set16(&f, h + 8, 8); break;                                                   // method
      case 4: Set32(&f, l.entries[victim].central + 42, l.cd_off - 29 + Pick(rng, 29)); break;  // h + 30 > cd_off
      case 5: {  // central sizes one larger: the data or descriptor moves
        const std::uint64_t c = le.central;
        Set32(&f, c + 20, Get32(f, c + 20) + 1);
        Set32(&f, c + 24, Get32(f, c + 24) + 1);
        break;
      }
      case 6: {  // local CRC disagrees (bit 3 clear: the CRC must equal; set: 0 or equal)
        std::uint32_t crc = Get32(f, le.central + 16) ^ (1u << Pick(rng, 32));
        if (crc == 0) crc = 1;
        Set32(&f, h + 14, crc);
        break;
      }
      case 7: {  // FB padding byte not Z
        if (le.fb_size > 0) {
          f[le.fb + Pick(rng, le.fb_size)] = static_cast<std::uint8_t>(Coin(rng) ? 0xA5 : 'z');
        } else {
          Set32(&f, le.end - 16, 0x08074b51);
        }
        break;
      }
      case 8: Set32(&f, le.end - 16, 0x08074b50 ^ (1u << Pick(rng, 32))); break;  // descriptor signature
      case 9: Set32(&f, le.end - 12 + 4 * Pick(rng, 3), Get32(f, le.end - 12) ^ 0x100); break;  // descriptor values
      default: {  // the local sizes set but not equal to the central size
        // drawn in this order so every compiler makes the same bytes
        const std::uint64_t more = 1 + Pick(rng, 4);
        const std::uint64_t field = Pick(rng, 2);
        Set32(&f, h + 18 + 4 * field, Get32(f, le.central + 20) + more);
      }
    }
    return Done(std::move(f), r, "local header disagrees with the central directory");
  }
  if (r == "PT-007") {
    // An entry whose local header lies inside another entry's data.
    PtZipEntry inner;
    inner.name = d.prefix + "/data/" + std::to_string(100 + Pick(rng, 100));
    // drawn in this order so every compiler makes the same bytes
    const auto fill = static_cast<std::uint8_t>(rng());
    inner.data = Bytes(Pick(rng, 20), fill);
    inner.torch_style = false;
    PtZipEntry outer;
    outer.name = d.prefix + "/blob" + std::to_string(Pick(rng, 10));
    outer.torch_style = Coin(rng);
    const std::uint64_t lead = Pick(rng, 40);
    outer.data = Bytes(lead, 0x41);
    const Bytes record = PtLocalRecord(inner.name, inner.data);
    outer.data.insert(outer.data.end(), record.begin(), record.end());
    outer.data.resize(outer.data.size() + Pick(rng, 20), 0x42);
    const std::size_t at = Pick(rng, n + 1);
    entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at), outer);
    inner.embed_in = static_cast<int>(at);
    inner.embed_at = lead;
    entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(at + 1 + Pick(rng, n + 1 - at)), inner);
    return Done(PtWriteZip(entries, options), r, "an entry inside another entry's data");
  }
  if (r == "PT-008") {
    // A data byte changed, or a CRC of 0 recorded consistently everywhere.
    std::size_t i = victim;
    for (std::size_t k = 0; k < n && entries[i].data.empty(); ++k) i = (i + 1) % n;
    const PtZipLayout::Entry& e = l.entries[i];
    if (Coin(rng)) {
      f[e.data_start + Pick(rng, entries[i].data.size())] ^= static_cast<std::uint8_t>(1 + Pick(rng, 255));
    } else {
      Set32(&f, e.central + 16, 0);
      if (entries[i].torch_style) {
        Set32(&f, e.end - 12, 0);
      } else {
        Set32(&f, e.local + 14, 0);
      }
    }
    return Done(std::move(f), r, "CRC-32 mismatch");
  }
  return Done(std::move(f), "", "valid");
}

Generated RecordViolation(const std::string& r, Rng& rng) {
  Model m = BaseModel(rng);
  PtDraft d = Serialize(m);
  const std::string version_name = m.data_version ? ".data/version" : "version";
  if (r == "PT-009") {
    switch (Pick(rng, 4)) {
      case 0: d.records.erase(d.records.begin()); break;  // no data.pkl
      case 1: d.records.erase(d.records.begin() + static_cast<std::ptrdiff_t>(RecordIndex(d, version_name))); break;
      case 2: {
        const char* const bad[] = {"", "\n", "3\n\n", "x", " 3", "3 ", "-3", "+3", "3\r\n", "3.0",
                                   "123456789012345678901", "\n3", "three"};
        d.records[RecordIndex(d, version_name)].second = TextBytes(bad[Pick(rng, std::size(bad))]);
        break;
      }
      default: {  // .data/version wins over a good version record
        if (version_name == "version") {
          d.records.emplace_back(".data/version", TextBytes("3a\n"));
        } else {
          d.records[RecordIndex(d, version_name)].second = TextBytes("");
          d.records.emplace_back("version", TextBytes("3\n"));
        }
      }
    }
    return Done(PtWriteDraft(d), r, "data.pkl or version record missing or malformed");
  }
  if (r == "PT-010") {
    const char* const bad[] = {"", "Little", "little\n", "big ", "LITTLE", "middle", "littl", "bigg", "little "};
    const std::size_t i = RecordIndex(d, "byteorder");
    const std::string text = bad[Pick(rng, std::size(bad))];
    if (i < d.records.size()) {
      d.records[i].second = TextBytes(text);
    } else {
      d.records.insert(d.records.begin() + 1, {"byteorder", TextBytes(text)});
    }
    return Done(PtWriteDraft(d), r, "byteorder neither little nor big");
  }
  if (r == "PT-101") {
    const char* const names[] = {"extra.txt", "data/0/x", ".data/foo", "data.pkl.bak", "xl/abc",
                                 ".format_version2", "code/__torch__.py", "constants.pkl"};
    // drawn in this order so every compiler makes the same bytes
    const char* const name = names[Pick(rng, std::size(names))];
    const std::size_t at = 1 + Pick(rng, d.records.size());
    d.records.insert(d.records.begin() + static_cast<std::ptrdiff_t>(at), {name, TextBytes("ignored")});
    return Done(PtWriteDraft(d), r, "unknown record (warning)");
  }
  if (r == "PT-102") {
    // drawn in this order so every compiler makes the same bytes
    std::pair<std::string, Bytes> record = {"data/unused" + std::to_string(Pick(rng, 100)), Bytes(Pick(rng, 12), 7)};
    const std::size_t at = 1 + Pick(rng, d.records.size());
    d.records.insert(d.records.begin() + static_cast<std::ptrdiff_t>(at), std::move(record));
    return Done(PtWriteDraft(d), r, "storage record no persistent ID names (warning)");
  }
  if (r == "PT-104") {
    const char* const versions[] = {"1", "2\n", "4", "10\n", "0", "12345"};
    d.records[RecordIndex(d, version_name)].second = TextBytes(versions[Pick(rng, std::size(versions))]);
    return Done(PtWriteDraft(d), r, "version other than 3 (warning)");
  }
  return Done(PtWriteDraft(d), "", "valid");
}

Generated PickleViolation(const std::string& r, Rng& rng) {
  Model m = BaseModel(rng, Coin(rng, 4) ? 4 : 2);
  Tensor& tail = TailTensor(m);
  std::string what;
  if (r == "PT-011") {
    switch (Pick(rng, 6)) {
      case 0: case 1: {
        const std::pair<const char*, const char*> names[] = {
            {"posix", "system"}, {"__builtin__", "eval"}, {"builtins", "getattr"}, {"os", "system"},
            {"torch._utils", "_rebuild_tensor"}, {"torch._utils", "_rebuild_tensor_v3"},
            {"torch", "UntypedStorage"}, {"collections", "Counter"}, {"torch", "device"},
            {"_codecs", "encode"}, {"torch._tensor", "_rebuild_from_type_v2"},
            {"torch", "ComplexFloatStorage"}, {"torch", "uint16"}, {"torch", "QInt8Storage"},
            {"torch._utils", "_rebuild_parameter_with_state"}, {"Collections", "OrderedDict"},
            {"torch", "size"}, {"torch ", "Size"}, {"torch._utils", "_rebuild_qtensor"}, {"nt", "system"},
        };
        const auto& [module, name] = names[Pick(rng, std::size(names))];
        if (Coin(rng)) {
          InsertRaw(m, GlobalOp(module, name) + BinUnicode("touch /tmp/quantdiff_pwned") + "\x85R", rng);
        } else {  // STACK_GLOBAL
          InsertRaw(m, BinUnicode(module) + BinUnicode(name) + "\x93" + BinUnicode("x") + "\x85R", rng);
        }
        what = std::string("global ") + module + "." + name;
        break;
      }
      case 2: {  // instance-building opcodes
        const std::string ops[] = {
            GlobalOp("collections", "OrderedDict") + ")\x81",
            GlobalOp("collections", "OrderedDict") + ")}\x92",
            "(itorch\nSize\n",
            "(" + GlobalOp("collections", "OrderedDict") + "o",
            "\x82\x01", std::string("\x83\x01\x00", 3), std::string("\x84\x01\x00\x00\x00", 5),
        };
        InsertRaw(m, ops[Pick(rng, std::size(ops))], rng);
        what = "NEWOBJ / INST / OBJ / EXT";
        break;
      }
      case 3: {  // REDUCE of a token that is not callable, or of no token
        const std::string callee[] = {GlobalOp("torch", "FloatStorage"), GlobalOp("torch", "float16"),
                                      "N", "K\x01", ")", BinUnicode("OrderedDict"), "}", "]"};
        InsertRaw(m, callee[Pick(rng, std::size(callee))] + ")R", rng);
        what = "REDUCE of a non-callable";
        break;
      }
      case 4: {  // BUILD on a plain dict, a list, a tensor's place, a str
        const std::string target[] = {"}", "]", ")", BinUnicode("x"), "N",
                                      GlobalOp("collections", "OrderedDict")};
        InsertRaw(m, target[Pick(rng, std::size(target))] + "}b", rng);
        what = "BUILD on something other than an ordered dict";
        break;
      }
      default: {  // BUILD on a dict inside the file that is plain
        V plain = Dict(false);
        plain->entries.emplace_back(Str("a"), Int(1));
        m.root->entries.emplace_back(Str("p" + std::to_string(m.counter++)), plain);
        m.root->entries.emplace_back(Str("q" + std::to_string(m.counter++)),
                                     RawValue("}}" + BinUnicode("_metadata") + "}sb"));
        what = "BUILD on a plain dict";
      }
    }
  } else if (r == "PT-012") {
    switch (Pick(rng, 6)) {
      case 0: InsertRaw(m, std::string(257 + Pick(rng, 3), '('), rng); what = "257 open marks"; break;
      case 1: InsertRaw(m, "\x8a" + std::string(1, static_cast<char>(9 + Pick(rng, 200))) + std::string(8, '\x01'), rng);
        what = "LONG1 longer than 8 bytes";
        break;
      case 2: {
        const std::uint32_t n = 0x100001 + static_cast<std::uint32_t>(Pick(rng, 1000));
        InsertRaw(m, Coin(rng) ? "X" + U32Text(n) : "\x8d" + U32Text(n) + U32Text(0), rng);
        what = "string longer than 1,048,576 bytes";
        break;
      }
      case 3: {  // dicts nested deeper than 64 below the root
        V top = Dict(Coin(rng));
        V d = top;
        for (int k = 0; k < 64 + static_cast<int>(Pick(rng, 4)); ++k) {
          V inner = Dict(Coin(rng));
          d->entries.emplace_back(Str("n"), inner);
          d = inner;
        }
        d->entries.emplace_back(Str("leaf"), Int(1));
        m.root->entries.emplace_back(Str("deep" + std::to_string(m.counter++)), top);
        what = "flattened dicts deeper than 64";
        break;
      }
      case 4: {  // a value nested deeper than 64
        V top = Seq(Value::kList);
        V l = top;
        for (int k = 0; k < 64 + static_cast<int>(Pick(rng, 4)); ++k) {
          V inner = Seq(Coin(rng) ? Value::kList : Value::kTuple);
          if (inner->kind == Value::kTuple) {
            V list = Seq(Value::kList);
            inner->items.push_back(list);
            l->items.push_back(inner);
            l = list;
          } else {
            l->items.push_back(inner);
            l = inner;
          }
        }
        m.root->entries.emplace_back(Str("nest" + std::to_string(m.counter++)), top);
        what = "value nested deeper than 64";
        break;
      }
      default: {  // more than 1,048,576 nodes through shared lists
        V inner = Seq(Value::kList);
        for (int k = 0; k < 1100; ++k) inner->items.push_back(Int(k & 0xff));
        V outer = Seq(Value::kList);
        for (int k = 0; k < 960; ++k) outer->items.push_back(inner);
        m.root->entries.emplace_back(Str("wide" + std::to_string(m.counter++)), outer);
        what = "more than 1,048,576 value nodes";
      }
    }
  } else if (r == "PT-013") {
    switch (Pick(rng, 7)) {
      case 0: {  // an opcode outside the subset
        const char ops[] = {'0', 'P', 'S', 'B', 'C', 'I', 'L', 'F', 'V', 'p', 'g', '2', 'U', 'T',
                            'd', 'l', '1', 'A', '\x8e', '\x8f', '\x90', '\x91', '\x96', '\x97',
                            '\x98', '\xff', '\x00', 'Z', '\n'};
        InsertRaw(m, std::string(1, ops[Pick(rng, std::size(ops))]) + "NNNNNNNN", rng);
        what = "opcode outside the subset";
        break;
      }
      case 1: {  // memo index never set
        InsertRaw(m, "j" + U32Text(0x7fffffff - static_cast<std::uint32_t>(Pick(rng, 100))), rng);
        what = "unset memo index";
        break;
      }
      case 2: {  // bad UTF-8
        const std::string bad[] = {"\xc3\x28", "\xed\xa0\x80", "\xff", "\xc0\xaf", "a\xe2\x82", "\xf4\x90\x80\x80"};
        const std::string s = bad[Pick(rng, std::size(bad))];
        InsertRaw(m, Coin(rng) ? BinUnicode(s) : "\x8c" + std::string(1, static_cast<char>(s.size())) + s, rng);
        what = "invalid UTF-8";
        break;
      }
      case 3: {  // wrong container
        const std::string ops[] = {"]K\x01K\x02s", "}K\x01" "a", ")K\x01" "a", "](K\x01K\x02u",
                                   "}(K\x01" "e", "NK\x01K\x02s", "K\x05K\x01" "a"};
        InsertRaw(m, ops[Pick(rng, std::size(ops))], rng);
        what = "SETITEM/APPEND on the wrong container";
        break;
      }
      case 4: {  // a GLOBAL line without a newline within 257 bytes
        InsertRaw(m, "c" + std::string(257 + Pick(rng, 40), 'a') + "\nb\n", rng);
        what = "GLOBAL line too long";
        break;
      }
      case 5: {  // at STOP: two values, or an open mark; or bytes after STOP
        Bytes pkl;
        PtDraft d = Serialize(m);
        pkl = d.records[0].second;
        switch (Pick(rng, 4)) {
          case 0: pkl.insert(pkl.end() - 1, 'N'); break;
          case 1: pkl.insert(pkl.end() - 1, '('); break;
          case 2: pkl.push_back(Coin(rng) ? '.' : 'N'); break;
          default: pkl.pop_back(); break;  // no STOP
        }
        d.records[0].second = pkl;
        return Done(PtWriteDraft(d), r, "STOP misplaced");
      }
      default: {  // no PROTO first, a protocol outside 2..5, stack underflow, truncation
        PtDraft d = Serialize(m);
        Bytes& pkl = d.records[0].second;
        switch (Pick(rng, 4)) {
          case 0: pkl.erase(pkl.begin(), pkl.begin() + 2); break;
          case 1: pkl[1] = static_cast<std::uint8_t>(Coin(rng) ? Pick(rng, 2) : 6 + Pick(rng, 250)); break;
          case 2: pkl.insert(pkl.begin() + 2, Coin(rng) ? 'R' : 's'); break;
          default: pkl.resize(2 + Pick(rng, pkl.size() - 3)); break;
        }
        return Done(PtWriteDraft(d), r, "pickle framing broken");
      }
    }
  } else if (r == "PT-014") {
    switch (Pick(rng, 5)) {
      case 0: {
        const std::string args[] = {"K\x01\x85", "]", "N", "))\x86", BinUnicode("a") + "\x85"};
        InsertRaw(m, GlobalOp("collections", "OrderedDict") + args[Pick(rng, std::size(args))] + "R", rng);
        what = "OrderedDict with arguments";
        break;
      }
      case 1: {
        const std::string args[] = {"K\x02\x85", "K\x01K\x02\x86K\x03\x86", ")", "G\x3f\xf8\0\0\0\0\0\0\x85\x85"s,
                                    "]\x85", "K\x01\x85K\x02\x86"};
        InsertRaw(m, GlobalOp("torch", "Size") + args[Pick(rng, std::size(args))] + "R", rng);
        what = "torch.Size with bad arguments";
        break;
      }
      case 2: {  // _rebuild_tensor_v2 arguments of the wrong form
        // The tail tensor's argument tuple written by hand with one argument replaced.
        std::string bad;
        switch (Pick(rng, 7)) {
          case 0: bad = "offset"; break;
          case 1: bad = "size"; break;
          case 2: bad = "grad"; break;
          case 3: bad = "hooks"; break;
          case 4: bad = "meta"; break;
          case 5: bad = "count"; break;
          default: bad = "stride"; break;
        }
        // Written by hand below: ( (persid) Q offset size stride grad hooks [meta] t
        const Storage& st = m.storages[tail.storage];
        std::string ops = "((" + BinUnicode("storage") + GlobalOp("torch", kDtypes[st.dtype].storage) +
                          BinUnicode(st.key) + BinUnicode("cpu") + "K\x06tQ";
        ops += bad == "offset" ? "G\0\0\0\0\0\0\0\0"s : "K\x00"s;
        ops += bad == "size" ? "K\x02" + BinUnicode("3") + "\x86" : "K\x02K\x03\x86";
        ops += bad == "stride" ? "]" : "K\x03K\x01\x86";
        ops += bad == "grad" ? "K\x00"s : "\x89"s;
        ops += bad == "hooks" ? "}K\x01K\x02s" : GlobalOp("collections", "OrderedDict") + ")R";
        if (bad == "meta") ops += BinUnicode("x");
        if (bad == "count") ops += "NN";
        ops += "t";
        tail.args = Raw(ops);
        what = "_rebuild_tensor_v2 argument " + bad;
        break;
      }
      case 3: {  // _rebuild_parameter with bad arguments
        const std::string bad[] = {"K\x01" + GlobalOp("collections", "OrderedDict") + ")R\x87",
                                   "\x89\x86", "\x89}K\x01K\x02s\x87"};
        // tensor is on the stack; then these items; then REDUCE
        tail.args = nullptr;
        InsertRaw(m, GlobalOp("torch._utils", "_rebuild_parameter") + GlobalOp("collections", "OrderedDict") + ")R" +
                         bad[Pick(rng, std::size(bad))] + "R",
                  rng);
        what = "_rebuild_parameter with bad arguments";
        break;
      }
      default: {  // a bad BUILD state on the root, or a second BUILD
        m.root = Dict(true);
        m.root->entries.emplace_back(Str("w" + std::to_string(m.counter++)), m.NewTensor(1, {2}, rng));
        m.Finish(rng);
        switch (Pick(rng, 3)) {
          case 0: {
            V state = Dict(false);
            state->entries.emplace_back(Str("_metadata"), Dict(true));
            m.root->state = state;
            m.root->build_count = 2;
            break;
          }
          case 1: {
            V state = Dict(false);
            state->entries.emplace_back(Int(1), Int(2));
            m.root->state = state;
            break;
          }
          default: {
            m.root->state = Seq(Value::kList, {Int(1)});
          }
        }
        what = "BUILD with a bad state or twice";
      }
    }
  } else if (r == "PT-015") {
    const Storage& st = m.storages[tail.storage];
    const std::string good_class = GlobalOp("torch", kDtypes[st.dtype].storage);
    auto persid = [&](const std::string& first, const std::string& cls, const std::string& key,
                      const std::string& loc, const std::string& numel) {
      return "(" + first + cls + key + loc + numel + "t";
    };
    const std::string s = BinUnicode("storage"), k = BinUnicode(st.key), loc = BinUnicode("cpu"), num = "K\x06";
    std::string id;
    switch (Pick(rng, 11)) {
      case 0: id = persid(BinUnicode(Coin(rng) ? "Storage" : "storag"), good_class, k, loc, num); break;
      case 1: id = persid(s, GlobalOp("torch", "float32"), k, loc, num); break;
      case 2: id = persid(s, good_class, BinUnicode(std::vector<std::string>{"", "0/x", "a.b", "0 ", std::string(65, 'k'), "\xc3\xa9"}[Pick(rng, 6)]), loc, num); break;
      case 3: id = persid(s, good_class, k, "K\x00"s, num); break;
      case 4: id = persid(s, good_class, k, loc, "J\xff\xff\xff\xff"); break;
      case 5: id = persid(s, good_class, k, loc, BinUnicode("6")); break;
      case 6: id = "(" + s + good_class + k + loc + "t"; break;          // 4 items
      case 7: id = "(" + s + good_class + k + loc + num + "Nt"; break;   // 6 items
      case 8: id = persid(s, good_class, BinUnicode("77"), loc, num); break;  // no data/77
      case 9: {  // the record is not numel * item size
        m.storages[tail.storage].bytes.push_back(0);
        m.storages[tail.storage].explicit_bytes = true;
        id = persid(s, good_class, k, loc, num);
        break;
      }
      default: {  // the key reused with another class or numel
        const bool other_class = Coin(rng);
        const int other = (st.dtype + 1) % kDtypeCount;
        tail.size = {6};
        tail.stride = {1};
        id = persid(s, good_class, k, loc, num);
        std::string second = other_class ? persid(s, GlobalOp("torch", kDtypes[other].storage), k, loc, num)
                                         : persid(s, good_class, k, loc, "K\x07");
        InsertRaw(m, GlobalOp("torch._utils", "_rebuild_tensor_v2") + "(" + second + "QK\x00K\x01\x85K\x01\x85\x89"s +
                         GlobalOp("collections", "OrderedDict") + ")RtR",
                  rng);
        // The reuse must come after the first use: move the raw entry to the end.
        auto it = std::find_if(m.root->entries.begin(), m.root->entries.end(),
                               [](const auto& e) { return e.second->kind == Value::kRaw; });
        auto entry = *it;
        m.root->entries.erase(it);
        m.root->entries.push_back(entry);
      }
    }
    if (tail.size.empty() || tail.size != std::vector<std::int64_t>{6}) {
      tail.size = {6};
      tail.stride = {1};
    }
    tail.args = Raw("(" + id + "QK\x00K\x06\x85K\x01\x85\x89"s + GlobalOp("collections", "OrderedDict") + ")Rt");
    what = "bad persistent ID";
  } else if (r == "PT-016") {
    Storage& st = m.storages[tail.storage];
    switch (Pick(rng, 8)) {
      case 0: tail.size = {2, 3}; tail.stride = {3}; break;
      case 1: tail.size = {2, -1}; tail.stride = {3, 1}; break;
      case 2: tail.size = {2, 3}; tail.stride = {-3, 1}; break;
      case 3: tail.offset = -1 - static_cast<std::int64_t>(Pick(rng, 5)); break;
      case 4: {
        const std::int64_t big = static_cast<std::int64_t>(1) << (32 + Pick(rng, 20));
        tail.size = {big, big, 0};
        tail.stride = {1, 1, 1};
        break;
      }
      case 5: {
        tail.size.assign(65 + Pick(rng, 3), 1);
        tail.stride.assign(tail.size.size(), 1);
        break;
      }
      case 6: tail.offset = static_cast<std::int64_t>(1 + Pick(rng, 3)); break;  // one past the storage
      default: tail.size = {0, 2}; tail.stride = {2, 1}; tail.offset = static_cast<std::int64_t>(7 + Pick(rng, 4)); break;
    }
    // The storage stays 6 elements (as written before the change).
    st.numel = 6;
    st.bytes = RandomElements(st.dtype, 6, rng);
    st.explicit_bytes = true;
    what = "invalid tensor geometry";
    PtDraft d = Serialize(m);
    return Done(PtWriteDraft(d), r, what);
  } else if (r == "PT-017") {
    switch (Pick(rng, 7)) {
      case 0: {  // the root is not a dict
        V roots[] = {Seq(Value::kList, {Int(1)}), None(), m.root->entries.back().second,
                     Seq(Value::kTuple, {m.root}), Str("state")};
        m.root = roots[Pick(rng, std::size(roots))];
        what = "root not a dict";
        break;
      }
      case 1: {  // a key that is not str/int
        V keys[] = {None(), Float(1.0), Bool(true), Bool(false), Seq(Value::kTuple, {Int(1)}), Seq(Value::kTuple)};
        V d = Coin(rng) ? m.root : Dict(Coin(rng));
        d->entries.emplace_back(keys[Pick(rng, std::size(keys))], Int(1));
        if (d != m.root) m.root->entries.emplace_back(Str("sub" + std::to_string(m.counter++)), d);
        what = "dict key not str or int";
        break;
      }
      case 2: {  // a repeated key
        V d = Coin(rng) ? m.root : Dict(Coin(rng));
        V key = Coin(rng) ? Str("dup") : Int(7);
        d->entries.emplace_back(key, Int(1));
        d->entries.emplace_back(key->kind == Value::kStr ? Str("dup") : Int(7), Int(2));
        if (d != m.root) m.root->entries.emplace_back(Str("sub" + std::to_string(m.counter++)), d);
        what = "repeated dict key";
        break;
      }
      case 3: {  // an empty key text
        V d = Dict(Coin(rng));
        d->entries.emplace_back(Str(""), Int(1));
        m.root->entries.emplace_back(Str("sub" + std::to_string(m.counter++)), d);
        if (Coin(rng)) m.root->entries.emplace_back(Str(""), m.NewTensor(1, {1}, rng));
        what = "empty key";
        break;
      }
      case 4: {  // flattened names collide: "a.b" and {"a": {"b"}}
        V d = Dict(Coin(rng));
        d->entries.emplace_back(Str("b"), Coin(rng) ? m.NewTensor(2, {2}, rng) : Int(3));
        const std::string a = "col" + std::to_string(m.counter++);
        V first = Coin(rng) ? m.NewTensor(1, {1}, rng) : Str("v");
        if (Coin(rng)) {
          m.root->entries.emplace_back(Str(a + ".b"), first);
          m.root->entries.emplace_back(Str(a), d);
        } else {
          m.root->entries.emplace_back(Str(a), d);
          m.root->entries.emplace_back(Str(a + ".b"), first);
        }
        what = "flattened names collide";
        break;
      }
      case 5: {  // int key 5 and str key "5"
        V d = Dict(Coin(rng));
        d->entries.emplace_back(Int(5), Int(1));
        d->entries.emplace_back(Str("5"), m.NewTensor(1, {1}, rng));
        m.root->entries.emplace_back(Str("opt" + std::to_string(m.counter++)), d);
        what = "int and str key with one text";
        break;
      }
      default: {  // SETITEMS with a bool key written by hand
        InsertRaw(m, "}(\x88K\x01u", rng);
        what = "bool key";
      }
    }
    m.Finish(rng);
  }
  return Done(WriteModel(m), r, what);
}

Generated LegacyViolation(Rng& rng) {
  Bytes f;
  if (Coin(rng, 3)) {  // a tar archive: ustar at 257
    f.assign(512 * (2 + Pick(rng, 2)), 0);
    const std::string name = "storages";
    std::memcpy(f.data(), name.data(), name.size());
    std::memcpy(f.data() + 257, Coin(rng) ? "ustar\0" "00" : "ustar  \0", 8);
    f[0] = 's';
  } else {
    const std::uint8_t magic[] = {0x80, 0x02, 0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19};
    f.assign(std::begin(magic), std::end(magic));
    AddText(&f, ".\x80\x02M\xe9\x03.\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M\xe9\x03u."s);
    for (std::uint64_t k = Pick(rng, 64); k > 0; --k) f.push_back(static_cast<std::uint8_t>(rng()));
  }
  return Done(std::move(f), "PT-001", "legacy torch serialization");
}

}  // namespace

// ---- the ZIP writer ---------------------------------------------------------------------

std::uint32_t PtCrc32(const std::uint8_t* data, std::size_t size) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::vector<std::uint8_t> PtLocalRecord(const std::string& name, const std::vector<std::uint8_t>& data) {
  Bytes b;
  Add32(&b, 0x04034b50);
  Add16(&b, 20);
  Add16(&b, 0);
  Add16(&b, 0);
  Add16(&b, 0);
  Add16(&b, 0x21);
  Add32(&b, PtCrc32(data.data(), data.size()));
  Add32(&b, data.size());
  Add32(&b, data.size());
  Add16(&b, name.size());
  Add16(&b, 0);
  AddText(&b, name);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<std::uint8_t> PtWriteZip(const std::vector<PtZipEntry>& entries, const PtZipOptions& options,
                                     PtZipLayout* layout) {
  Bytes f;
  PtZipLayout l;
  l.entries.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtZipEntry& e = entries[i];
    if (e.embed_in >= 0) continue;
    PtZipLayout::Entry& le = l.entries[i];
    const std::uint32_t crc = PtCrc32(e.data.data(), e.data.size());
    le.local = f.size();
    Add32(&f, 0x04034b50);
    if (e.torch_style) {
      // torch: version 0, flags 0x0808, no time, CRC and sizes in the descriptor.
      Add16(&f, 0);
      Add16(&f, 0x0808);
      Add16(&f, 0);
      Add32(&f, 0);
      Add32(&f, 0);
      Add32(&f, 0);
      Add32(&f, 0);
      // FB field: Z bytes so that the data starts at a multiple of 64 [W getPadding].
      const std::uint64_t start = le.local + 30 + e.name.size() + 4;
      const std::uint64_t pad = (64 - start % 64) % 64;
      Add16(&f, e.name.size());
      Add16(&f, 4 + pad);
      AddText(&f, e.name);
      Add16(&f, 0x4246);
      Add16(&f, pad);
      le.fb = f.size();
      le.fb_size = pad;
      f.insert(f.end(), pad, 'Z');
    } else {
      Add16(&f, 20);
      Add16(&f, 0);
      Add16(&f, 0);
      Add16(&f, 0);
      Add16(&f, 0x21);
      Add32(&f, crc);
      Add32(&f, e.data.size());
      Add32(&f, e.data.size());
      Add16(&f, e.name.size());
      Add16(&f, 0);
      AddText(&f, e.name);
    }
    le.data_start = f.size();
    f.insert(f.end(), e.data.begin(), e.data.end());
    if (e.torch_style) {
      Add32(&f, 0x08074b50);
      Add32(&f, crc);
      Add32(&f, e.data.size());
      Add32(&f, e.data.size());
    }
    le.end = f.size();
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtZipEntry& e = entries[i];
    if (e.embed_in < 0) continue;
    PtZipLayout::Entry& le = l.entries[i];
    le.local = l.entries[e.embed_in].data_start + e.embed_at;
    le.data_start = le.local + 30 + e.name.size();
    le.end = le.data_start + e.data.size();
  }
  l.cd_off = f.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const PtZipEntry& e = entries[i];
    const bool torch = e.torch_style && e.embed_in < 0;
    l.entries[i].central = f.size();
    Add32(&f, 0x02014b50);
    Add16(&f, torch ? 0 : 0x0314);  // version made by
    Add16(&f, torch ? 0 : 20);      // version needed
    Add16(&f, torch ? 0x0808 : 0);
    Add16(&f, 0);
    Add16(&f, 0);
    Add16(&f, torch ? 0 : 0x21);
    Add32(&f, PtCrc32(e.data.data(), e.data.size()));
    Add32(&f, e.data.size());
    Add32(&f, e.data.size());
    Add16(&f, e.name.size());
    Add16(&f, e.central_extra.size());
    Add16(&f, 0);
    Add16(&f, 0);
    Add16(&f, 0);
    Add32(&f, torch ? 0 : 0x01800000u);
    Add32(&f, l.entries[i].local);
    AddText(&f, e.name);
    f.insert(f.end(), e.central_extra.begin(), e.central_extra.end());
  }
  f.insert(f.end(), options.central_tail.begin(), options.central_tail.end());
  l.cd_size = f.size() - l.cd_off;
  if (options.zip64_end) {
    l.zip64 = true;
    l.zip64_record = f.size();
    Add32(&f, 0x06064b50);
    Add64(&f, 44);
    Add16(&f, 0x031e);
    Add16(&f, 0x2d);
    Add32(&f, 0);
    Add32(&f, 0);
    Add64(&f, entries.size());
    Add64(&f, entries.size());
    Add64(&f, l.cd_size);
    Add64(&f, l.cd_off);
    l.locator = f.size();
    Add32(&f, 0x07064b50);
    Add32(&f, 0);
    Add64(&f, l.zip64_record);
    Add32(&f, 1);
  }
  l.eocd = f.size();
  Add32(&f, 0x06054b50);
  Add16(&f, 0);
  Add16(&f, 0);
  Add16(&f, entries.size());
  Add16(&f, entries.size());
  Add32(&f, l.cd_size);
  Add32(&f, l.cd_off);
  Add16(&f, 0);
  if (layout) *layout = std::move(l);
  return f;
}

std::vector<std::uint8_t> PtWriteDraft(const PtDraft& draft, PtZipLayout* layout) {
  return PtWriteZip(Entries(draft), Options(draft), layout);
}

PtDraft PtRandomDraft(Rng& rng, const PtDraftOptions& options) {
  return Serialize(RandomModel(rng, options));
}

std::uint64_t PtItemSize(std::string_view dtype) {
  for (const PtDtype& d : kDtypes) {
    if (dtype == d.code) return static_cast<std::uint64_t>(d.size);
  }
  return 1;
}

std::vector<std::uint8_t> PtWriteStateDict(const PtStateDict& root, const PtWriteOptions& options,
                                           PtZipLayout* layout) {
  Model m;
  m.protocol = options.protocol;
  m.byteorder = options.big_endian ? 2 : 0;
  m.root = Dict(options.ordered);
  for (const auto& [k, v] : root) m.root->entries.emplace_back(Str(k), m.FromObject(v));
  return WriteModel(m, layout);
}

PtObject PtObject::Bool(bool b) { return {.kind = Kind::kBool, .boolean = b}; }
PtObject PtObject::Int(std::int64_t i) { return {.kind = Kind::kInt, .integer = i}; }
PtObject PtObject::Float(double f) { return {.kind = Kind::kFloat, .real = f}; }
PtObject PtObject::Str(std::string s) { return {.kind = Kind::kStr, .text = std::move(s)}; }
PtObject PtObject::Token(std::string name) { return {.kind = Kind::kToken, .text = std::move(name)}; }
PtObject PtObject::Tuple(std::vector<PtObject> items) { return {.kind = Kind::kTuple, .items = std::move(items)}; }
PtObject PtObject::List(std::vector<PtObject> items) { return {.kind = Kind::kList, .items = std::move(items)}; }
PtObject PtObject::Size(const std::vector<std::int64_t>& dims) {
  PtObject o{.kind = Kind::kSize};
  for (std::int64_t d : dims) o.items.push_back(Int(d));
  return o;
}
PtObject PtObject::Dict(std::vector<std::pair<std::string, PtObject>> entries, bool ordered) {
  return {.kind = Kind::kDict, .boolean = ordered, .entries = std::move(entries)};
}
PtObject PtObject::Tensor(PtTensorData tensor) { return {.kind = Kind::kTensor, .tensor = std::move(tensor)}; }

void PtPut(PtStateDict* dict, std::string_view name, PtObject value, int nest) {
  const std::size_t dot = name.find('.');
  if (nest > 0 && dot != std::string_view::npos && dot > 0 && dot + 1 < name.size()) {
    const std::string key(name.substr(0, dot));
    for (auto& [k, v] : *dict) {
      if (k == key && v.kind == PtObject::Kind::kDict) {
        PtPut(&v.entries, name.substr(dot + 1), std::move(value), nest - 1);
        return;
      }
    }
    PtObject sub = PtObject::Dict();
    PtPut(&sub.entries, name.substr(dot + 1), std::move(value), nest - 1);
    dict->emplace_back(key, std::move(sub));
    return;
  }
  dict->emplace_back(std::string(name), std::move(value));
}

// One valid file in three carries bitsandbytes layers beside its random
// content (docs/pt.md 6.4, 7); drawn after the content so that the other two
// are the files this generator has always written.
Generated PtValid(Rng& rng) {
  Model m = RandomModel(rng, {});
  if (!Coin(rng, 3)) return Done(WriteModel(m), "", "valid torch.save-like file");
  m.Insert(RandomPtBnbLayers(rng), rng);
  return Done(WriteModel(m), "", "valid torch.save-like file with bitsandbytes layers");
}

std::vector<std::string> PtViolableRules() {
  std::vector<std::string> rules = {"PT-001", "PT-002", "PT-003", "PT-004", "PT-005", "PT-006", "PT-007",
                                    "PT-008", "PT-009", "PT-010", "PT-011", "PT-012", "PT-013", "PT-014",
                                    "PT-015", "PT-016", "PT-017", "PT-101", "PT-102", "PT-104"};
  // The bitsandbytes readers run on an accepted file's tensor table (docs/pt.md 6.4, 8 step 8).
  for (std::string& r : PtBnbViolableRules()) rules.push_back(std::move(r));
  return rules;
}

Generated PtViolation(std::string_view rule, Rng& rng) {
  const std::string r(rule);
  if (r.rfind("BNB-", 0) == 0) return PtBnbViolation(r, rng);
  if (r == "PT-001") return LegacyViolation(rng);
  if (r >= "PT-002" && r <= "PT-008") return ZipViolation(r, rng);
  if (r == "PT-009" || r == "PT-010" || r == "PT-101" || r == "PT-102" || r == "PT-104") {
    return RecordViolation(r, rng);
  }
  if (r >= "PT-011" && r <= "PT-017") return PickleViolation(r, rng);
  return PtValid(rng);
}

}  // namespace qd::gen
