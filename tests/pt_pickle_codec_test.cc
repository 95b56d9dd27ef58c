// pt_pickle_codec_test: the torch .pt reader (codecs/pt.h) on hand-built
// files (tests/pt_test_builder.h), its pickle walk (docs/pt.md section 4):
// refused globals and opcodes, limits, malformed streams, arguments,
// persistent ids, geometry, the output bound, root and keys. Every expected
// rule, field and byte offset comes from docs/pt.md.
#include <gtest/gtest.h>

#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codecs/bnb_pt_layers.h"
#include "codecs/pt.h"
#include "codecs/safetensors.h"
#include "tests/pt_test_builder.h"
#include "tests/pt_codec_test_support.h"

namespace {

// The builders (qd::pt_test), Read, IsError and OneTensor.
using namespace qd::pt_codec_test;  // NOLINT
using qd::codec::PtKind;

// ==== the opcode walk ================================================================

// data.pkl = p (first entry, so ds = 64), storage "0" = 4 floats.
PtResult ReadPk(const Pk& p, const std::vector<Record>& st = {{"0", kFour}}) {
  return Read(Archive(p.b, st));
}
constexpr std::int64_t kDs = 64;

TEST(PtPickle, RefusedGlobals) {
  const std::pair<const char*, const char*> refused[] = {
      {"posix", "system"},       {"os", "system"},           {"builtins", "eval"},
      {"__builtin__", "eval"},   {"builtins", "getattr"},    {"torch._utils", "_rebuild_tensor"},
      {"torch._utils", "_rebuild_tensor_v3"}, {"torch._utils", "_rebuild_parameter_with_state"},
      {"torch._tensor", "_rebuild_from_type_v2"}, {"torch", "UntypedStorage"},
      {"torch", "device"},       {"torch", "ComplexFloatStorage"}, {"_codecs", "encode"},
      {"collections", "Counter"}, {"torch", "float8_e4m3fn"}, {"torch", "uint16"},
      {"Torch", "Size"},         {"collections ", "OrderedDict"}};
  for (const auto& [m, n] : refused) {
    Pk p;
    p.proto().dict().mark().str("k");
    const std::uint64_t at = p.at();
    p.glob(m, n).mark().str("touch /tmp/quantdiff_pwned").tuple().reduce().op('u').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-011", "global", kDs + static_cast<std::int64_t>(at)))
        << m << "." << n;
  }
  // STACK_GLOBAL of posix.system (protocol 4, memoized strings).
  Pk p;
  p.proto(4).sstr("posix").op(0x94).sstr("system").op(0x94);
  const std::uint64_t at = p.at();
  p.op(0x93).sstr("echo").op(0x85).reduce().stop();
  EXPECT_TRUE(IsError(ReadPk(p), "PT-011", "global", kDs + static_cast<std::int64_t>(at)));
}

TEST(PtPickle, RefusedOpcodesReduceBuild) {
  for (int op : {0x81, 0x92, int('i'), int('o'), 0x82, 0x83, 0x84}) {
    Pk p;
    p.proto().dict();
    const std::uint64_t at = p.at();
    p.op(static_cast<std::uint8_t>(op)).stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-011", "opcode", kDs + static_cast<std::int64_t>(at))) << int(op);
  }
  {  // REDUCE of a dtype token, a storage class and a str
    for (int kind = 0; kind < 3; ++kind) {
      Pk p;
      p.proto().dict().mark().str("k");
      if (kind == 0) p.glob("torch", "float16");
      if (kind == 1) p.glob("torch", "FloatStorage");
      if (kind == 2) p.str("os.system");
      p.op(')');
      const std::uint64_t at = p.at();
      p.reduce().op('u').stop();
      EXPECT_TRUE(IsError(ReadPk(p), "PT-011", "reduce", kDs + static_cast<std::int64_t>(at))) << kind;
    }
  }
  {  // BUILD on a plain dict, on a list
    for (int kind = 0; kind < 2; ++kind) {
      Pk p;
      p.proto();
      if (kind == 0) p.dict(); else p.list();
      p.dict();
      const std::uint64_t at = p.at();
      p.op('b').stop();
      EXPECT_TRUE(IsError(ReadPk(p), "PT-011", "build", kDs + static_cast<std::int64_t>(at))) << kind;
    }
  }
}

TEST(PtPickle, Limits) {
  {  // the 257th MARK
    Pk p;
    p.proto();
    for (int i = 0; i < 256; ++i) p.mark();
    const std::uint64_t at = p.at();
    p.mark().stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "marks", kDs + static_cast<std::int64_t>(at)));
  }
  {  // the 1,048,577th stack item
    Pk p;
    p.proto();
    p.b.insert(p.b.end(), 1048576, 'N');
    const std::uint64_t at = p.at();
    p.none().stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "stack", kDs + static_cast<std::int64_t>(at)));
  }
  {  // the 1,048,577th memo entry
    Pk p;
    p.proto().dict();
    p.b.insert(p.b.end(), 1048576, 0x94);
    const std::uint64_t at = p.at();
    p.op(0x94).stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "memo", kDs + static_cast<std::int64_t>(at)));
    // Re-putting an existing index adds nothing.
    Pk q;
    q.proto().dict();
    for (int i = 0; i < 1048576; ++i) q.put(0);
    q.stop();
    EXPECT_FALSE(ReadPk(q).refused);
  }
  {  // string length, checked before the bounds
    Pk p;
    p.proto();
    const std::uint64_t at = p.at();
    p.op('X');
    PutN(p.b, 1048577, 4);
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "string", kDs + static_cast<std::int64_t>(at)));
    Pk q;
    q.proto();
    q.op(0x8d);
    PutN(q.b, 0xffffffffffffffffull, 8);
    EXPECT_TRUE(IsError(ReadPk(q), "PT-012", "string", kDs + 2));
    Pk s;  // exactly 1,048,576 bytes: fine
    s.proto().dict().str("k").str(std::string(1048576, 'a')).op('s').stop();
    EXPECT_FALSE(ReadPk(s).refused);
  }
  {  // LONG1 of 9 bytes
    Pk p;
    p.proto();
    p.op(0x8a).op(9);
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "integer", kDs + 2));
  }
  {  // torch.Size ints of the whole file: 1048 Sizes of 1000 ints fit, the 1049th not
    // {"k": [Size(t), Size(t), ...]} with t one memoized tuple of 1000 ints.
    Pk p;
    p.proto().dict().str("k").list().glob("torch", "Size").put(0).mark();
    for (int i = 0; i < 1000; ++i) p.i1(1);
    p.tuple().op(0x85).put(1).reduce().op('a');
    for (int k = 1; k < 1048; ++k) p.get(0).get(1).reduce().op('a');
    Pk fits = p;
    fits.op('s').stop();
    EXPECT_FALSE(ReadPk(fits).refused);
    p.get(0).get(1);
    const std::uint64_t at = p.at();
    p.reduce().op('a').op('s').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "container", kDs + static_cast<std::int64_t>(at)));
  }
  {  // 1,048,577 items in one list / dict
    Pk p;
    p.proto().dict().str("l").list();
    for (int i = 0; i < 1048576; ++i) p.none().op('a');
    p.none();
    const std::uint64_t at = p.at();
    p.op('a').op('s').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "container", kDs + static_cast<std::int64_t>(at)));
    // The values are one memoized None, so that the 2^20 fresh keys stay
    // inside the created-values budget (2^21) and this limit is what fails;
    // had the 2^20 BINGETs counted as values made, the budget would fail
    // first (2^21 + 3 values), so this also checks that they do not.
    Pk d;
    d.proto().dict().i4(0).none().put(0).op('s');
    for (int i = 1; i < 1048576; ++i) d.i4(i).get(0).op('s');
    d.i4(1048576).get(0);
    const std::uint64_t at2 = d.at();
    d.op('s').stop();
    EXPECT_TRUE(IsError(ReadPk(d), "PT-012", "container", kDs + static_cast<std::int64_t>(at2)));
  }
  {  // values created in the file (docs/pt.md 4.4): None, then 2^21 - 1
     // TUPLE1s make 2^21 values, one stack item; one more TUPLE1 is PT-012.
    Pk p;
    p.proto().none();
    p.b.insert(p.b.end(), 2097151, 0x85);
    Pk fits = p;  // the budget holds: refused only for its root (PT-017)
    fits.stop();
    EXPECT_TRUE(IsError(ReadPk(fits), "PT-017", "root", kDs + 2 + 1 + 2097151));
    const std::uint64_t at = p.at();
    p.op(0x85).stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "container", kDs + static_cast<std::int64_t>(at)));
    // A REDUCE result counts: 2^21 - 2 values, OrderedDict and () make 2^21.
    Pk r;
    r.proto().none();
    r.b.insert(r.b.end(), 2097149, 0x85);
    r.glob("collections", "OrderedDict").op(')');
    const std::uint64_t reduce_at = r.at();
    r.reduce().stop();
    EXPECT_TRUE(IsError(ReadPk(r), "PT-012", "container", kDs + static_cast<std::int64_t>(reduce_at)));
  }
  {  // dict nesting: root depth 1, k dicts below it reach depth k + 1; a value
     // inside the depth-d dict has depth d + 1, a tensor is not walked.
    auto nest = [](int levels, bool tensor) {
      Pk p;
      p.proto().dict();
      for (int i = 0; i < levels; ++i) p.str("a").dict();
      p.str("v");
      if (tensor) p.tensor("0", "FloatStorage", 4, 0, {4}, {1}); else p.i1(1);
      p.op('s');
      for (int i = 0; i < levels; ++i) p.op('s');
      p.stop();
      return ReadPk(p);
    };
    const PtResult ok = nest(62, false);
    ASSERT_FALSE(ok.refused) << ok.findings.back().message;
    EXPECT_EQ(ok.values[0].first.size(), 62u * 2 + 1);
    EXPECT_TRUE(IsError(nest(63, false), "PT-012", "depth", kDs));  // value at 65
    const PtResult t = nest(63, true);
    ASSERT_FALSE(t.refused) << t.findings.back().message;
    EXPECT_EQ(t.tensors[0].name.size(), 63u * 2 + 1);
    EXPECT_TRUE(IsError(nest(64, true), "PT-012", "depth", kDs));  // dict at 65
  }
  {  // value nesting: root 1, value 2, ..., 63 nested lists reach 64
    for (int levels : {63, 64}) {
      Pk p;
      p.proto().dict().str("v");
      for (int i = 0; i < levels; ++i) p.list();
      for (int i = 1; i < levels; ++i) p.op('a');
      p.op('s').stop();
      const PtResult r = ReadPk(p);
      if (levels == 63) EXPECT_FALSE(r.refused); else EXPECT_TRUE(IsError(r, "PT-012", "depth", kDs));
    }
  }
  {  // a list appended to itself
    Pk p;
    p.proto().dict().str("v").list().put(0).get(0).op('a').op('s').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "depth", kDs));
  }
  {  // shared lists: 1024 references to a list of 1024 -> over 1,048,576 visits
    for (int outer : {512, 1024}) {
      Pk p;
      p.proto().dict().str("v").list().put(1).mark();
      for (int i = 0; i < 1024; ++i) p.none();
      p.op('e').op('s');  // root["v"] = inner list (memo 1)
      p.str("w").list().mark();
      for (int i = 0; i < outer; ++i) p.get(1);
      p.op('e').op('s').stop();
      const PtResult r = ReadPk(p);
      if (outer == 512) EXPECT_FALSE(r.refused); else EXPECT_TRUE(IsError(r, "PT-012", "depth", kDs));
    }
  }
}

TEST(PtPickle, Malformed) {
  auto at_end = [](Pk p, std::uint64_t at) { return IsError(ReadPk(p), "PT-013", "opcode", kDs + static_cast<std::int64_t>(at)); };
  for (int op : std::vector<int>{'S', '0', '1', '2', 'P', 'B', 'C', 0x8e, 0x8f, 0x90, 0x91, 0x96, 0x97,
                                 0x98, 'I', 'L', 'F', 'V', 'U', 'T', 'p', 'g', 'd', 'l', 0x00, 0xff}) {
    Pk p;
    p.proto().dict();
    const std::uint64_t at = p.at();
    p.op(static_cast<std::uint8_t>(op)).stop();
    EXPECT_TRUE(at_end(p, at)) << op;
  }
  { Pk p; p.dict().stop(); EXPECT_TRUE(at_end(p, 0)); }            // no PROTO first
  { Pk p; p.proto(1).dict().stop(); EXPECT_TRUE(at_end(p, 0)); }   // protocol 1
  { Pk p; p.proto(6).dict().stop(); EXPECT_TRUE(at_end(p, 0)); }
  { Pk p; p.proto().proto().dict().stop(); EXPECT_TRUE(at_end(p, 2)); }  // PROTO twice
  { Pk p; p.op(0x80); EXPECT_TRUE(at_end(p, 0)); }                 // truncated PROTO
  { Pk p; p.proto().op('J').op(1); EXPECT_TRUE(at_end(p, 2)); }     // truncated BININT
  { Pk p; p.proto().op('X'); PutN(p.b, 5, 4); p.raw("ab"); EXPECT_TRUE(at_end(p, 2)); }
  { Pk p; p.proto().op(0x95); PutN(p.b, 100, 8); p.dict().stop(); EXPECT_TRUE(at_end(p, 2)); }
  { Pk p; p.proto().op(0x85); EXPECT_TRUE(at_end(p, 2)); }         // TUPLE1 on an empty stack
  { Pk p; p.proto().dict().mark().op(0x85); EXPECT_TRUE(at_end(p, 4)); }  // below the mark
  { Pk p; p.proto().dict().tuple(); EXPECT_TRUE(at_end(p, 3)); }   // TUPLE without a mark
  { Pk p; p.proto().dict().op('u'); EXPECT_TRUE(at_end(p, 3)); }   // SETITEMS without a mark
  { Pk p; p.proto().dict().op('e'); EXPECT_TRUE(at_end(p, 3)); }   // APPENDS without a mark
  // SETITEMS / APPENDS whose mark opened on an empty frame: nothing below the mark.
  { Pk p; p.proto().mark().mark().str("a").i1(1); const auto at = p.at(); p.op('u'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().mark().i1(1); const auto at = p.at(); p.op('e'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().mark().str("a").i1(1); const auto at = p.at(); p.op('u'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().list().str("a").i1(1); const auto at = p.at(); p.op('s'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().dict().mark().str("a"); const auto at = p.at(); p.op('u'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().list().mark().str("a"); const auto at = p.at(); p.op('u'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().dict().i1(1); const auto at = p.at(); p.op('a'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().dict().mark().i1(1); const auto at = p.at(); p.op('e'); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto(); const auto at = p.at(); p.get(3); EXPECT_TRUE(at_end(p, at)); }  // unset memo
  { Pk p; p.proto(); const auto at = p.at(); p.put(0); EXPECT_TRUE(at_end(p, at)); }  // PUT on empty
  { Pk p; p.proto(); p.sstr(std::string("\xff")); EXPECT_TRUE(at_end(p, 2)); }
  { Pk p; p.proto(); p.sstr(std::string("\xed\xa0\x80")); EXPECT_TRUE(at_end(p, 2)); }  // surrogate
  { Pk p; p.proto(); p.op('c').raw(std::string(257, 'a') + "\nx\n"); EXPECT_TRUE(at_end(p, 2)); }
  { Pk p; p.proto(); p.op('c').raw("torch\x01\nSize\n"); EXPECT_TRUE(at_end(p, 2)); }
  { Pk p; p.proto(); p.op('c').raw("torch\nSize"); EXPECT_TRUE(at_end(p, 2)); }
  { Pk p; p.proto(4).i1(1).i1(2); const auto at = p.at(); p.op(0x93); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().dict(); EXPECT_TRUE(at_end(p, 3)); }            // no STOP: ds + size
  { Pk p; p.proto().dict().dict(); const auto at = p.at(); p.stop(); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto().dict().mark(); const auto at = p.at(); p.stop(); EXPECT_TRUE(at_end(p, at)); }
  { Pk p; p.proto(); const auto at = p.at(); p.stop(); EXPECT_TRUE(at_end(p, at)); }  // empty stack
  { Pk p; p.proto().dict().stop(); const auto at = p.at(); p.none(); EXPECT_TRUE(at_end(p, at)); }
  // A 256-byte GLOBAL line is within the limit (then refused by name).
  { Pk p; p.proto(); p.op('c').raw(std::string(256, 'a') + "\nx\n");
    EXPECT_TRUE(IsError(ReadPk(p), "PT-011", "global", kDs + 2)); }
}

TEST(PtPickle, Arguments) {
  auto err = [](Pk p, std::uint64_t at) { return IsError(ReadPk(p), "PT-014", "args", kDs + static_cast<std::int64_t>(at)); };
  { Pk p; p.proto().glob("collections", "OrderedDict").mark().i1(1).tuple(); const auto at = p.at(); p.reduce().stop(); EXPECT_TRUE(err(p, at)); }
  { Pk p; p.proto().glob("collections", "OrderedDict").list(); const auto at = p.at(); p.reduce().stop(); EXPECT_TRUE(err(p, at)); }
  { Pk p; p.proto().glob("torch", "Size").mark().str("a").tuple().op(0x85); const auto at = p.at(); p.reduce().stop(); EXPECT_TRUE(err(p, at)); }
  { Pk p; p.proto().glob("torch", "Size").mark().op(0x88).tuple().op(0x85); const auto at = p.at(); p.reduce().stop(); EXPECT_TRUE(err(p, at)); }
  { Pk p; p.proto().glob("torch", "Size").ints({1}); const auto at = p.at(); p.reduce().stop(); EXPECT_TRUE(err(p, at)); }
  // _rebuild_tensor_v2 argument forms.
  auto tensor = [](int variant) {
    Pk p;
    p.proto().dict().mark().str("w").glob("torch._utils", "_rebuild_tensor_v2").mark();
    if (variant == 0) p.str("x"); else p.pid("0", "FloatStorage", 4);
    if (variant == 1) p.fl(0.0); else p.i1(0);
    if (variant == 2) p.list(); else p.ints({4});
    if (variant == 3) p.mark().i1(1).none().tuple(); else p.ints({1});
    if (variant == 4) p.i1(0); else p.op(0x89);
    if (variant == 5) p.dict().str("h").none().op('s'); else if (variant == 6) p.none(); else p.od();
    if (variant == 7) p.dict().str("m").i1(1).op('s');
    if (variant == 8) p.none().none();
    p.tuple();
    const std::uint64_t at = p.at();
    p.reduce().op('u').stop();
    return std::make_pair(p, at);
  };
  for (int v = 0; v <= 8; ++v) {
    auto [p, at] = tensor(v);
    EXPECT_TRUE(err(p, at)) << v;
  }
  // _rebuild_parameter
  {
    Pk p;
    p.proto().glob("torch._utils", "_rebuild_parameter").mark().i1(1).op(0x89).od().tuple();
    const auto at = p.at();
    p.reduce().stop();
    EXPECT_TRUE(err(p, at));
  }
  // BUILD: twice, ordered state, non-str key.
  {
    Pk p;
    p.proto().od().dict().op('b').dict();
    const auto at = p.at();
    p.op('b').stop();
    EXPECT_TRUE(err(p, at));
  }
  {
    Pk p;
    p.proto().od().od();
    const auto at = p.at();
    p.op('b').stop();
    EXPECT_TRUE(err(p, at));
  }
  {
    Pk p;
    p.proto().od().dict().i1(1).none().op('s');
    const auto at = p.at();
    p.op('b').stop();
    EXPECT_TRUE(err(p, at));
  }
}

TEST(PtPickle, PersistentIds) {
  auto run = [](const std::function<void(Pk&)>& id, const std::vector<Record>& st,
                const char* field) {
    Pk p;
    p.proto().dict().mark().str("s");
    id(p);
    const std::uint64_t at = p.at();
    p.op('Q').op('u').stop();
    return IsError(ReadPk(p, st), "PT-015", field, kDs + static_cast<std::int64_t>(at));
  };
  auto pid = [](std::string tag, std::string cls, std::string key, bool loc_str, std::int64_t n) {
    return [=](Pk& p) {
      p.mark().str(tag);
      if (cls.empty()) p.str("FloatStorage"); else p.glob("torch", cls);
      p.str(key);
      if (loc_str) p.str("cpu"); else p.none();
      p.i8(n).tuple();
    };
  };
  const std::vector<Record> st = {{"0", kFour}};
  EXPECT_TRUE(run([](Pk& p) { p.str("storage"); }, st, "persistent_id"));
  EXPECT_TRUE(run([](Pk& p) { p.mark().str("storage").tuple(); }, st, "persistent_id"));
  EXPECT_TRUE(run(pid("module", "FloatStorage", "0", true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "", "0", true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "float32", "0", true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "", true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "../0", true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "a.b", true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", std::string(65, 'a'), true, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "0", false, 4), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "0", true, -1), st, "persistent_id"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "1", true, 4), st, "storage"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "0", true, 3), st, "storage"));
  EXPECT_TRUE(run(pid("storage", "HalfStorage", "0", true, 4), st, "storage"));
  EXPECT_TRUE(run(pid("storage", "FloatStorage", "0", true, 1LL << 62), st, "storage"));
  // A 64-character key is fine.
  const std::string k64(64, 'K');
  Pk ok;
  ok.proto().dict().mark().str("s");
  pid("storage", "FloatStorage", k64, true, 4)(ok);
  ok.op('Q').op('u').stop();
  const PtResult r = ReadPk(ok, {{k64, kFour}});
  ASSERT_FALSE(r.refused) << r.findings.back().message;
  EXPECT_EQ(r.Value("s")->kind, PtKind::kStorage);
  // Reusing a key with another numel or class.
  for (const char* cls : {"FloatStorage", "IntStorage"}) {
    Pk p;
    p.proto().dict().mark().str("a");
    pid("storage", "FloatStorage", "0", true, 4)(p);
    p.op('Q').str("b");
    pid("storage", cls, "0", true, std::string(cls) == "IntStorage" ? 4 : 2)(p);
    const std::uint64_t at = p.at();
    p.op('Q').op('u').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-015", "storage", kDs + static_cast<std::int64_t>(at))) << cls;
  }
}

TEST(PtPickle, Geometry) {
  auto run = [](std::int64_t offset, const std::vector<std::int64_t>& size,
                const std::vector<std::int64_t>& stride, const char* field) {
    Pk p;
    p.proto().dict().mark().str("w").glob("torch._utils", "_rebuild_tensor_v2").mark();
    p.pid("0", "FloatStorage", 4).i8(offset).ints(size).ints(stride).op(0x89).od().tuple();
    const std::uint64_t at = p.at();
    p.reduce().op('u').stop();
    const PtResult r = ReadPk(p);
    if (field == nullptr) return r.refused ? ::testing::AssertionFailure() << r.findings.back().message
                                           : ::testing::AssertionSuccess();
    return IsError(r, "PT-016", field, kDs + static_cast<std::int64_t>(at));
  };
  EXPECT_TRUE(run(0, {2, 2}, {2}, "shape"));
  EXPECT_TRUE(run(0, {2, -2}, {2, 1}, "shape"));
  EXPECT_TRUE(run(0, {2, 2}, {-2, 1}, "shape"));
  EXPECT_TRUE(run(-1, {2}, {1}, "shape"));
  EXPECT_TRUE(run(0, {1LL << 40, 1LL << 40, 0}, {0, 0, 0}, "shape"));  // overflow before the 0
  EXPECT_TRUE(run(0, std::vector<std::int64_t>(65, 1), std::vector<std::int64_t>(65, 1), "shape"));
  EXPECT_TRUE(run(0, std::vector<std::int64_t>(64, 1), std::vector<std::int64_t>(64, 1), nullptr));
  EXPECT_TRUE(run(0, {5}, {1}, "storage_offset"));
  EXPECT_TRUE(run(1, {4}, {1}, "storage_offset"));
  EXPECT_TRUE(run(0, {2, 2}, {3, 1}, "storage_offset"));  // last element at 4
  EXPECT_TRUE(run(0, {2, 2}, {2, 1}, nullptr));
  EXPECT_TRUE(run(3, {1}, {1000}, nullptr));
  EXPECT_TRUE(run(4, {0}, {1}, nullptr));           // numel 0: offset <= numel
  EXPECT_TRUE(run(5, {0}, {1}, "storage_offset"));
  EXPECT_TRUE(run(0, {2, (1LL << 61)}, {1LL << 62, 1LL << 62}, "storage_offset"));
}

TEST(PtPickle, OutputBound) {
  // Section 3: the names' bytes plus the tensors' C-order bytes, in table order,
  // stay within n + 2^26; a stride-0 view of a 4-float storage is the lever.
  auto file = [](std::int64_t k) {
    Pk p;
    p.proto().dict().mark().str("b").tensor("0", "FloatStorage", 4, 0, {k}, {0}).op('u').stop();
    return Archive(p.b, {{"0", kFour}});
  };
  const std::uint64_t n = file(0).bytes.size();  // k is an 8-byte LONG1: n does not depend on it
  const std::int64_t kmax = static_cast<std::int64_t>((n + (1ull << 26) - 1) / 4);  // 1 + 4k <= n + 2^26
  const Zip ok = file(kmax);
  ASSERT_EQ(ok.bytes.size(), n);
  const PtResult r = Read(ok);
  ASSERT_FALSE(r.refused) << r.findings.back().message;
  EXPECT_EQ(r.TableTensor(0).numel, static_cast<std::uint64_t>(kmax));
  EXPECT_TRUE(IsError(Read(file(kmax + 1)), "PT-012", "container", kDs));
  EXPECT_TRUE(IsError(Read(file(1LL << 62)), "PT-012", "container", kDs));
  // Names count too: one dict shared under 4096 keys, each holding 4096 entries
  // would flatten to 2^24 names (and 2^24 node visits: the visit limit comes first).
  Pk p;
  p.proto().dict().str("d").dict().put(1);
  for (int i = 0; i < 300; ++i) p.str(std::string(200, 'x') + std::to_string(i)).none().op('s');
  p.op('s');
  for (int i = 0; i < 2000; ++i) p.str("k" + std::to_string(i)).get(1).op('s');
  p.stop();
  // 2001 * 300 = 600,300 visits (under 2^20); names > 2001 * 300 * 203 bytes > n + 2^26.
  EXPECT_TRUE(IsError(ReadPk(p), "PT-012", "container", kDs));
}

TEST(PtPickle, RootAndKeys) {
  { Pk p; p.proto().list(); const auto at = p.at(); p.stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "root", kDs + static_cast<std::int64_t>(at))); }
  { Pk p; p.proto().tensor("0", "FloatStorage", 4, 0, {4}, {1}); const auto at = p.at(); p.stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "root", kDs + static_cast<std::int64_t>(at))); }
  for (int kind = 0; kind < 4; ++kind) {
    Pk p;
    p.proto().dict();
    if (kind == 0) p.op(0x88); else if (kind == 1) p.fl(1.0); else if (kind == 2) p.none(); else p.op(')');
    p.i1(1);
    const auto at = p.at();
    p.op('s').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "key", kDs + static_cast<std::int64_t>(at))) << kind;
  }
  {  // repeated key inside one SETITEMS; int 1 and str "1" are different keys
    Pk p;
    p.proto().dict().mark().str("1").i1(1).i1(1).i1(2).str("1").i1(3);
    const auto at = p.at();
    p.op('u').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "key", kDs + static_cast<std::int64_t>(at)));
  }
  {  // but int 1 then str "1" in different dicts collide only when flattened
    Pk p;
    p.proto().dict().mark().str("1").i1(1).i1(1).i1(2).op('u').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "key", kDs, "1"));
  }
  {  // an empty key (flattening)
    Pk p;
    p.proto().dict().str("").i1(1).op('s').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "key", kDs));
  }
  {  // "a.b" as a key and as a flattened path: the name collides
    Pk p;
    p.proto().dict().mark().str("a.b").tensor("0", "FloatStorage", 4, 0, {4}, {1});
    p.str("a").dict().str("b").i1(1).op('s').op('u').stop();
    EXPECT_TRUE(IsError(ReadPk(p), "PT-017", "key", kDs, "a.b"));
  }
  {  // negative int keys print as decimals
    Pk p;
    p.proto().dict().mark().i4(-7).i1(1).op('u').stop();
    const PtResult r = ReadPk(p, {});
    ASSERT_FALSE(r.refused) << r.findings.back().message;
    EXPECT_NE(r.Value("-7"), nullptr);
  }
}

TEST(PtPickle, NothingExecuted) {
  // A hostile pickle naming os.system through every route is refused; nothing runs.
  Pk p;
  p.proto().glob("os", "system").mark().str("touch /tmp/quantdiff_pwned").tuple().reduce().stop();
  EXPECT_TRUE(ReadPk(p).refused);
  EXPECT_FALSE(std::ifstream("/tmp/quantdiff_pwned").good());
}

}  // namespace
