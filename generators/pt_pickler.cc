// pt_pickler.cc: data.pkl of the .pt generator's model, written opcode by
// opcode as pickle's protocol 2 (or 3..5) writes a state dict (docs/pt.md 4).
#include <map>
#include <set>

#include "generators/pt_model.h"

namespace qd::gen::pt_gen {
namespace {

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

}  // namespace

Bytes PickleRoot(int protocol, const std::vector<Tensor>& tensors, const std::vector<Storage>& storages,
                 const V& root, std::vector<std::size_t>* ops) {
  return Pickler(protocol, tensors, storages).Pickle(root, ops);
}

}  // namespace qd::gen::pt_gen
