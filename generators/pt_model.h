// pt_model.h: the torch .pt generator's own model of a state dict, shared by
// its units (internal to generators/pt*.cc): little-endian fields, the dtypes
// of docs/pt.md 4.3, the values a pickle builds, storages and tensors as
// _rebuild_tensor_v2 writes them, and Model, a state dict under construction
// that draws its content from the generator's Rng. pt_pickler.cc writes a
// Model's data.pkl, pt_model.cc lays out its records, pt_zip.cc writes the
// ZIP, pt_violations.cc and pt_pickle_violations.cc break one rule of
// docs/pt.md section 9.
#ifndef QUANTDIFF_GENERATORS_PT_MODEL_H_
#define QUANTDIFF_GENERATORS_PT_MODEL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "generators/generators.h"

namespace qd::gen::pt_gen {

using Bytes = std::vector<std::uint8_t>;
using namespace std::string_literals;

// ---- little-endian fields ---------------------------------------------------------

inline void Add16(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Add32(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Add64(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void Set16(Bytes* b, std::uint64_t at, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void Set32(Bytes* b, std::uint64_t at, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void Set64(Bytes* b, std::uint64_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint32_t Get32(const Bytes& b, std::uint64_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b[at + i];
  return v;
}
inline void AddText(Bytes* b, std::string_view s) { b->insert(b->end(), s.begin(), s.end()); }
inline Bytes TextBytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

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

inline V None() { return std::make_shared<Value>(); }
inline V Bool(bool b) { auto v = std::make_shared<Value>(); v->kind = Value::kBool; v->b = b; return v; }
inline V Int(std::int64_t i) { auto v = std::make_shared<Value>(); v->kind = Value::kInt; v->i = i; return v; }
inline V Float(double f) { auto v = std::make_shared<Value>(); v->kind = Value::kFloat; v->f = f; return v; }
inline V Str(std::string s) { auto v = std::make_shared<Value>(); v->kind = Value::kStr; v->s = std::move(s); return v; }
inline V Raw(std::string s) { auto v = std::make_shared<Value>(); v->kind = Value::kRaw; v->s = std::move(s); return v; }
inline V Seq(Value::Kind k, std::vector<V> items = {}) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  v->items = std::move(items);
  return v;
}
inline V Dict(bool ordered) { auto v = std::make_shared<Value>(); v->kind = ordered ? Value::kODict : Value::kDict; return v; }
inline V DtypeToken(std::string name) { auto v = std::make_shared<Value>(); v->kind = Value::kDtype; v->s = std::move(name); return v; }

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

inline std::uint64_t Numel(const std::vector<std::int64_t>& size) {
  std::uint64_t n = 1;
  for (std::int64_t d : size) n *= static_cast<std::uint64_t>(d);
  return n;
}

// Elements a view needs: offset + sum((size - 1) * stride) + 1, or offset for an empty view.
inline std::uint64_t Extent(const Tensor& t) {
  if (Numel(t.size) == 0) return static_cast<std::uint64_t>(t.offset);
  std::uint64_t e = static_cast<std::uint64_t>(t.offset) + 1;
  for (std::size_t k = 0; k < t.size.size(); ++k) {
    e += static_cast<std::uint64_t>(t.size[k] - 1) * static_cast<std::uint64_t>(t.stride[k]);
  }
  return e;
}

inline std::vector<std::int64_t> ContiguousStrides(const std::vector<std::int64_t>& size) {
  std::vector<std::int64_t> stride(size.size(), 1);
  for (int k = static_cast<int>(size.size()) - 2; k >= 0; --k) {
    stride[k] = stride[k + 1] * std::max<std::int64_t>(size[k + 1], 1);
  }
  return stride;
}

// ---- random element bytes -----------------------------------------------------------------

// n random elements of dtype (kDtypes index), little-endian: small exact
// values mostly, any bit pattern sometimes.
Bytes RandomElements(int dtype, std::uint64_t n, Rng& rng);

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

// ---- records and files (pt_model.cc) ----------------------------------------------------

// data.pkl of a root value (pt_pickler.cc): protocol 2..5 opcodes; *ops gets
// the offset of every opcode.
Bytes PickleRoot(int protocol, const std::vector<Tensor>& tensors, const std::vector<Storage>& storages,
                 const V& root, std::vector<std::size_t>* ops);
// C-order bytes of tensor t (docs/pt.md 5.3), from little-endian storage bytes.
Bytes Materialise(const Tensor& t, const Storage& st);
// Pickles the model and lays out its records as torch writes them.
PtDraft Serialize(const Model& m);
Model RandomModel(Rng& rng, const PtDraftOptions& options);
// The ZIP entries and options of a draft (PtWriteZip's input).
std::vector<PtZipEntry> Entries(const PtDraft& d);
PtZipOptions Options(const PtDraft& d);
// Index in d.records of the record `name` (without the prefix).
std::size_t RecordIndex(const PtDraft& d, const std::string& name);
Generated Done(Bytes bytes, std::string rule, std::string what);
// A valid model with at least one tensor on a non-empty storage, few items,
// and no byteorder = big (some violations patch storages).
Model BaseModel(Rng& rng, int protocol = 0);
Bytes WriteModel(const Model& m, PtZipLayout* layout = nullptr);

}  // namespace qd::gen::pt_gen

#endif  // QUANTDIFF_GENERATORS_PT_MODEL_H_
