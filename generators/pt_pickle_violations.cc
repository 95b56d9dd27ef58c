// pt_pickle_violations.cc: .pt files whose data.pkl breaks one rule of
// docs/pt.md section 9 (PT-011..PT-017), the ZIP and the records valid and
// no earlier pickle check failing: opcodes and globals outside the subset,
// limits, framing, the torch reductions' arguments, persistent IDs, tensor
// geometry and the state dict's keys. Each builder draws a random model
// (BasePickleModel), changes it or inserts opcodes written by hand, and
// writes it. See pt_violations.h.
#include <algorithm>
#include <string>
#include <vector>

#include "generators/pt_model.h"
#include "generators/pt_violations.h"

namespace qd::gen::pt_gen {
namespace {

// ---- helpers of the builders ---------------------------------------------------------------

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

// What a pickle rule's builder starts from: a random model, pickled with
// protocol 4 one time in four (else 2).
Model BasePickleModel(Rng& rng) { return BaseModel(rng, Coin(rng, 4) ? 4 : 2); }

}  // namespace

// ---- the builders (PT-011..PT-017) ---------------------------------------------------------

Generated ViolatePt011(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  std::string what;
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
  return Done(WriteModel(m), r, what);
}

Generated ViolatePt012(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  std::string what;
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
  return Done(WriteModel(m), r, what);
}

Generated ViolatePt013(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  std::string what;
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
  return Done(WriteModel(m), r, what);
}

Generated ViolatePt014(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  Tensor& tail = TailTensor(m);
  std::string what;
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
  return Done(WriteModel(m), r, what);
}

Generated ViolatePt015(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  Tensor& tail = TailTensor(m);
  std::string what;
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
  return Done(WriteModel(m), r, what);
}

Generated ViolatePt016(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  Tensor& tail = TailTensor(m);
  std::string what;
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
}

Generated ViolatePt017(const std::string& r, Rng& rng) {
  Model m = BasePickleModel(rng);
  std::string what;
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
  return Done(WriteModel(m), r, what);
}

}  // namespace qd::gen::pt_gen
