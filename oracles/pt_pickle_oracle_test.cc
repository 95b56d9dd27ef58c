// pt_pickle_oracle_test.cc: hand-built cases for the oracle torch.save
// reader's pickle walk (oracles/pt.cc, docs/pt.md section 4: PT-011..
// PT-017). Every expected value comes from docs/pt.md, worked out by hand
// in the comments, never from running the code. The archive layout and its
// offsets (a pickle opcode at pos has byte_offset 40 + pos) are worked out
// in pt_oracle_test_files.h.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "oracles/pt_test_support.h"
#include "oracles/pt_oracle_test_files.h"

namespace qd::oracle {
namespace {

// The archive writer's names (pt_test_support.h), StateDict, Read,
// ExpectError and SimplePickle.
using namespace pt_test_files;  // NOLINT

// ---------------------------------------------------------------------------
// PT-011.

TEST(PtPickleOracle, Pt011Globals) {
  // GLOBAL posix.system at pos 2 -> 42.
  Pkl p;
  p.proto().global("posix", "system").str("touch /tmp/quantdiff_pwned").op(0x85).reduce().stop();
  ExpectError(Read(StateDict(p.b, kSix)), "PT-011", "global", kPkl + 2);
  Pkl q;
  q.proto().global("builtins", "eval");
  ExpectError(Read(StateDict(q.b, kSix)), "PT-011", "global", kPkl + 2);
  Pkl r;
  r.proto().global("__builtin__", "eval");
  ExpectError(Read(StateDict(r.b, kSix)), "PT-011", "global", kPkl + 2);
  // STACK_GLOBAL of builtins.eval: PROTO(2) str(10) str(6) -> pos 18.
  Pkl s;
  s.proto(4).str("builtins").str("eval").op(0x93);
  ExpectError(Read(StateDict(s.b, kSix)), "PT-011", "global", kPkl + 18);
  // Out of the allow-list though torch writes them elsewhere (4.3).
  for (const auto& name : {std::make_pair("torch._utils", "_rebuild_tensor"),
                           std::make_pair("torch._utils", "_rebuild_tensor_v3"),
                           std::make_pair("torch._tensor", "_rebuild_from_type_v2"),
                           std::make_pair("torch", "UntypedStorage"), std::make_pair("torch", "device"),
                           std::make_pair("collections", "Counter"), std::make_pair("_codecs", "encode")}) {
    Pkl t;
    t.proto().dict().global(name.first, name.second);
    ExpectError(Read(StateDict(t.b, kSix)), "PT-011", "global", kPkl + 3);
  }
}

TEST(PtPickleOracle, Pt011OpcodesReduceBuild) {
  for (const std::uint8_t op : {0x81, 0x92, 0x69, 0x6F, 0x82, 0x83, 0x84}) {
    Pkl p;
    p.proto().dict().op(op);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-011", "opcode", kPkl + 3);
  }
  // REDUCE of a dtype token: PROTO, GLOBAL torch float16 (1 + 6 + 8 = 15 bytes), ().
  Pkl r;
  r.proto().global("torch", "float16").op(0x29).reduce();
  ExpectError(Read(StateDict(r.b, kSix)), "PT-011", "reduce", kPkl + 2 + 15 + 1);
  // REDUCE of a storage class token (GLOBAL is 1 + 6 + 13 = 20 bytes).
  Pkl s;
  s.proto().global("torch", "FloatStorage").op(0x29).reduce();
  ExpectError(Read(StateDict(s.b, kSix)), "PT-011", "reduce", kPkl + 2 + 20 + 1);
  // REDUCE of a non-token (a dict).
  Pkl t;
  t.proto().dict().op(0x29).reduce();
  ExpectError(Read(StateDict(t.b, kSix)), "PT-011", "reduce", kPkl + 4);
  // BUILD on a plain dict.
  Pkl u;
  u.proto().dict().dict().op(0x62);
  ExpectError(Read(StateDict(u.b, kSix)), "PT-011", "build", kPkl + 4);
}

// ---------------------------------------------------------------------------
// PT-012.

TEST(PtPickleOracle, Pt012Marks) {
  Pkl p;
  p.proto();
  for (int i = 0; i < 256; ++i) p.mark();
  p.mark();  // the 257th at pos 2 + 256
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "marks", kPkl + 258);
}

TEST(PtPickleOracle, Pt012IntegerAndString) {
  Pkl p;
  p.proto().dict().op(0x8A).op(9);  // LONG1 of 9 bytes, no operand bytes at all
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "integer", kPkl + 3);
  Pkl q;
  q.proto().dict().op(0x58);
  Put32(&q.b, 1048577);  // longer than the limit, checked before the bounds
  ExpectError(Read(StateDict(q.b, kSix)), "PT-012", "string", kPkl + 3);
  Pkl r;
  r.proto().dict().op(0x8D);
  Put64(&r.b, 0xFFFFFFFFFFFFFFFFull);
  ExpectError(Read(StateDict(r.b, kSix)), "PT-012", "string", kPkl + 3);
  // Exactly 1048576 bytes is allowed: the string is accepted as a value.
  Pkl s;
  s.proto().dict().str("v").op(0x58);
  Put32(&s.b, 1048576);
  s.b.insert(s.b.end(), 1048576, 'x');
  s.setitem().stop();
  EXPECT_FALSE(Read(StateDict(s.b, kSix)).refused);
}

TEST(PtPickleOracle, Pt012StackMemoContainer) {
  // 1048576 items is the most the stacks may hold: the next push fails.
  // PROTO, dict, then Nones: the 1048576th push after the dict is at pos 3 + 1048575.
  Pkl p;
  p.proto().dict();
  p.b.insert(p.b.end(), 1048576, 0x4E);
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "stack", kPkl + 3 + 1048575);
  // Memo: 1048576 distinct indices allowed, the next new one fails.
  Pkl m;
  m.proto().dict();
  for (std::uint32_t i = 0; i <= 1048576; ++i) {
    m.op(0x72);
    Put32(&m.b, i);
  }
  ExpectError(Read(StateDict(m.b, kSix)), "PT-012", "memo", kPkl + 3 + 5 * 1048576);
  // A list of 1048576 items, then one more APPEND.
  Pkl l;
  l.proto().dict().op(0x5D);
  for (std::uint32_t i = 0; i <= 1048576; ++i) l.op(0x4E).op(0x61);
  ExpectError(Read(StateDict(l.b, kSix)), "PT-012", "container", kPkl + 4 + 2 * 1048576 + 1);
}

TEST(PtPickleOracle, Pt012ValuesCreated) {
  // docs/pt.md 4.4: at most 2^21 values made in a file. None, then 2^21 - 1
  // TUPLE1s (one stack item throughout) make exactly 2^21.
  Pkl p;
  p.proto().op(0x4E);
  p.b.insert(p.b.end(), 2097151, 0x85);
  Pkl fits = p;  // refused for its root only, at STOP
  fits.stop();
  ExpectError(Read(StateDict(fits.b, kSix)), "PT-017", "root", kPkl + 2 + 1 + 2097151);
  const std::size_t at = p.pos();
  p.op(0x85).stop();
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "container", kPkl + at);
  // The REDUCE result counts: 2^21 - 2 values, then OrderedDict and ().
  Pkl r;
  r.proto().op(0x4E);
  r.b.insert(r.b.end(), 2097149, 0x85);
  r.global("collections", "OrderedDict").op(0x29);
  const std::size_t reduce_at = r.pos();
  r.reduce().stop();
  ExpectError(Read(StateDict(r.b, kSix)), "PT-012", "container", kPkl + reduce_at);
  // BINGET makes nothing: 2^20 + 1 fresh int keys, each value one memoized
  // None (2^20 BINGETs); had those counted, the budget (2^21) would fail
  // before the item limit that does.
  Pkl d;
  d.proto().dict().op(0x4A);
  Put32(&d.b, 0);
  d.op(0x4E).op(0x71).op(0).setitem();
  for (std::uint32_t i = 1; i <= 1048576; ++i) {
    d.op(0x4A);
    Put32(&d.b, i);
    d.op(0x68).op(0);
    if (i < 1048576) d.setitem();
  }
  const std::size_t item_at = d.pos();
  d.setitem().stop();
  ExpectError(Read(StateDict(d.b, kSix)), "PT-012", "container", kPkl + item_at);
}

TEST(PtPickleOracle, Pt012TorchSizeInts) {
  // All torch.Size values of a file hold at most 1048576 ints (docs/pt.md
  // 4.4): one memoized tuple of 1000 ints, REDUCEd into a Size 1048 times
  // (1048000 ints), fits; the 1049th REDUCE does not.
  // {"k": [Size(t), ...]}: PROTO, dict, "k", list, GLOBAL, BINPUT 0, MARK, ...
  Pkl p;
  p.proto().dict().str("k").op(0x5D).global("torch", "Size").op(0x71).op(0).mark();
  for (int i = 0; i < 1000; ++i) p.op(0x4B).op(1);
  p.tuple().op(0x85).op(0x71).op(1).reduce().op(0x61);
  for (int k = 1; k < 1048; ++k) p.op(0x68).op(0).op(0x68).op(1).reduce().op(0x61);
  Pkl fits = p;
  fits.setitem().stop();
  EXPECT_FALSE(Read(StateDict(fits.b, kSix)).refused);
  p.op(0x68).op(0).op(0x68).op(1);
  const auto at = static_cast<std::int64_t>(p.b.size());
  p.reduce().op(0x61).setitem().stop();
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "container", kPkl + at);
}

TEST(PtPickleOracle, Pt012DepthAndNodes) {
  // 65 dicts nested: {"k": {"k": ... {}}}; the root is depth 1, so the
  // innermost is depth 65 -> PT-012 at ds(data.pkl).
  Pkl p;
  p.proto();
  for (int i = 0; i < 64; ++i) p.dict().str("k");
  p.dict();
  for (int i = 0; i < 64; ++i) p.setitem();
  p.stop();
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "depth", kPkl);
  // 64 nested dicts (the deepest depth 64) are fine.
  Pkl ok;
  ok.proto();
  for (int i = 0; i < 63; ++i) ok.dict().str("k");
  ok.dict();
  for (int i = 0; i < 63; ++i) ok.setitem();
  ok.stop();
  EXPECT_FALSE(Read(StateDict(ok.b, kSix)).refused);
  // A list nested in itself: depth grows past 64.
  Pkl c;
  c.proto().dict().str("v").op(0x5D).op(0x71).op(0).op(0x68).op(0).op(0x61).setitem().stop();
  ExpectError(Read(StateDict(c.b, kSix)), "PT-012", "depth", kPkl);
  // Shared inner list of 1024 Nones, 1024 times in an outer list:
  // 1 + 1024 * (1 + 1024) = 1049601 visits > 1048576.
  Pkl n;
  n.proto().dict().str("v").op(0x5D).mark();
  for (int i = 0; i < 1024; ++i) n.op(0x4E);
  n.op(0x65).op(0x71).op(0).op(0x5D);  // APPENDS, BINPUT 0, the outer list
  n.mark();
  for (int i = 0; i < 1024; ++i) n.op(0x68).op(0);
  n.op(0x65);
  // "v" -> (inner, outer) via TUPLE2: 1 + 1025 + 1 + 1024 * 1025 visits.
  n.op(0x86).setitem().stop();
  ExpectError(Read(StateDict(n.b, kSix)), "PT-012", "depth", kPkl);
}

// ---------------------------------------------------------------------------
// PT-013.

TEST(PtPickleOracle, Pt013Malformed) {
  struct Case {
    Bytes pkl;
    std::int64_t pos;
  };
  std::vector<Case> cases;
  {
    Pkl p;  // no PROTO first
    p.dict().stop();
    cases.push_back({p.b, 0});
  }
  {
    Pkl p;  // PROTO 1
    p.proto(1).dict().stop();
    cases.push_back({p.b, 0});
  }
  {
    Pkl p;  // PROTO again
    p.proto().proto().dict().stop();
    cases.push_back({p.b, 2});
  }
  {
    Pkl p;  // unknown opcode: POP
    p.proto().dict().op(0x30).stop();
    cases.push_back({p.b, 3});
  }
  {
    Pkl p;  // truncated BININT
    p.proto().dict().op(0x4A).op(1);
    cases.push_back({p.b, 3});
  }
  {
    Pkl p;  // no STOP: end at ds + size
    p.proto().dict();
    cases.push_back({p.b, 3});
  }
  {
    Pkl p;  // byte after STOP
    p.proto().dict().stop().op(0x4E);
    cases.push_back({p.b, 4});
  }
  {
    Pkl p;  // two values at STOP
    p.proto().dict().dict().stop();
    cases.push_back({p.b, 4});
  }
  {
    Pkl p;  // open mark at STOP
    p.proto().dict().mark().stop();
    cases.push_back({p.b, 4});
  }
  {
    Pkl p;  // unset memo
    p.proto().dict().op(0x68).op(3).stop();
    cases.push_back({p.b, 3});
  }
  {
    Pkl p;  // bad UTF-8 (a lone surrogate, ED A0 80)
    p.proto().dict().op(0x8C).op(3).op(0xED).op(0xA0).op(0x80);
    cases.push_back({p.b, 3});
  }
  {
    Pkl p;  // SETITEM on a list
    p.proto().op(0x5D).str("k").op(0x4E).setitem();
    cases.push_back({p.b, 7});
  }
  {
    Pkl p;  // APPEND on a dict
    p.proto().dict().op(0x4E).op(0x61);
    cases.push_back({p.b, 4});
  }
  {
    Pkl p;  // TUPLE without a mark
    p.proto().dict().tuple();
    cases.push_back({p.b, 3});
  }
  {
    Pkl p;  // SETITEMS with an odd count
    p.proto().dict().mark().str("k").setitems();
    cases.push_back({p.b, 7});
  }
  {
    Pkl p;  // stack underflow
    p.proto().op(0x86);
    cases.push_back({p.b, 2});
  }
  {
    Pkl p;  // GLOBAL line of 257 bytes without newline
    p.proto().op(0x63).raw(std::string(300, 'a'));
    cases.push_back({p.b, 2});
  }
  {
    Pkl p;  // GLOBAL line with a control byte
    p.proto().op(0x63).raw("tor\tch\nSize\n");
    cases.push_back({p.b, 2});
  }
  {
    Pkl p;  // STACK_GLOBAL of non-str
    p.proto(4).integer(1).integer(2).op(0x93);
    cases.push_back({p.b, 6});
  }
  {
    Pkl p;  // FRAME longer than the rest
    p.proto(4).op(0x95);
    Put64(&p.b, 100);
    p.dict().stop();
    cases.push_back({p.b, 2});
  }
  {
    Pkl p;  // empty data.pkl
    cases.push_back({p.b, 0});
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectError(Read(StateDict(cases[i].pkl, kSix)), "PT-013", "opcode", kPkl + cases[i].pos);
  }
}

// ---------------------------------------------------------------------------
// PT-014, PT-015, PT-016, PT-017.

TEST(PtPickleOracle, Pt014Args) {
  {  // OrderedDict((1,)): GLOBAL collections OrderedDict is 25 bytes.
    Pkl p;
    p.proto().global("collections", "OrderedDict").integer(1).op(0x85).reduce();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + 2 + 25 + 3);
  }
  {  // args not a tuple
    Pkl p;
    p.proto().global("collections", "OrderedDict").op(0x5D).reduce();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + 2 + 25 + 1);
  }
  {  // torch.Size((True,)): GLOBAL torch Size is 12 bytes.
    Pkl p;
    p.proto().global("torch", "Size").op(0x88).op(0x85).op(0x85).reduce();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + 2 + 12 + 3);
  }
  {  // _rebuild_tensor_v2 with hooks {"h": None}: the REDUCE is the last opcode.
    Pkl p;
    p.proto().dict().str("w").global("torch._utils", "_rebuild_tensor_v2").mark().pid("FloatStorage", "0", 6);
    p.integer(0).ints({6}).ints({1}).op(0x89).dict().str("h").op(0x4E).setitem().tuple();
    const std::size_t at = p.pos();
    p.reduce();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + static_cast<std::int64_t>(at));
  }
  {  // _rebuild_tensor_v2 with 5 args
    Pkl p;
    p.proto().dict().str("w").global("torch._utils", "_rebuild_tensor_v2").mark().pid("FloatStorage", "0", 6);
    p.integer(0).ints({6}).ints({1}).op(0x89).tuple();
    const std::size_t at = p.pos();
    p.reduce();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + static_cast<std::int64_t>(at));
  }
  {  // second BUILD on an ordered dict: ordered() is 25 + 1 + 1 bytes.
    Pkl p;
    p.proto().ordered().dict().op(0x62).dict().op(0x62);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + 2 + 27 + 3);
  }
  {  // BUILD state with an int key
    Pkl p;
    p.proto().ordered().dict().integer(1).op(0x4E).setitem().op(0x62);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-014", "args", kPkl + 2 + 27 + 1 + 2 + 1 + 1);
  }
}

TEST(PtPickleOracle, Pt015PersistentIds) {
  auto at_pid = [](Pkl& p) {
    // The BINPERSID is the last opcode written.
    return kPkl + static_cast<std::int64_t>(p.pos()) - 1;
  };
  {  // not a tuple
    Pkl p;
    p.proto().dict().str("storage").op(0x51);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "persistent_id", at_pid(p));
  }
  {  // key with a dot
    Pkl p;
    p.proto().dict().pid("FloatStorage", "0.x", 6);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "persistent_id", at_pid(p));
  }
  {  // negative numel
    Pkl p;
    p.proto().dict().mark().str("storage").global("torch", "FloatStorage").str("0").str("cpu");
    p.op(0x4A);
    Put32(&p.b, 0xFFFFFFFF);
    p.tuple().op(0x51);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "persistent_id", at_pid(p));
  }
  {  // dtype token instead of a storage class
    Pkl p;
    p.proto().dict().mark().str("storage").global("torch", "float32").str("0").str("cpu").integer(6).tuple().op(0x51);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "persistent_id", at_pid(p));
  }
  {  // missing record
    Pkl p;
    p.proto().dict().pid("FloatStorage", "7", 6);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "storage", at_pid(p));
  }
  {  // record length 24 != 5 * 4
    Pkl p;
    p.proto().dict().pid("FloatStorage", "0", 5);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "storage", at_pid(p));
  }
  {  // same key with another dtype (24 bytes = 6 F32 = 3 F64)
    Pkl p;
    p.proto().dict().pid("FloatStorage", "0", 6).pid("DoubleStorage", "0", 3);
    ExpectError(Read(StateDict(p.b, kSix)), "PT-015", "storage", at_pid(p));
  }
}

TEST(PtPickleOracle, Pt016Geometry) {
  auto check = [](std::int64_t offset, const std::vector<std::int64_t>& size,
                  const std::vector<std::int64_t>& stride, const char* field) {
    Pkl p;
    p.proto().dict().str("w").global("torch._utils", "_rebuild_tensor_v2").mark().pid("FloatStorage", "0", 6);
    p.integer(offset).ints(size).ints(stride).op(0x89).ordered().tuple();
    const std::size_t at = p.pos();
    p.reduce().setitem().stop();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-016", field, kPkl + static_cast<std::int64_t>(at));
  };
  check(0, {2, 3}, {3}, "shape");                                  // ranks differ
  check(0, std::vector<std::int64_t>(65, 1), std::vector<std::int64_t>(65, 1), "shape");  // rank 65
  check(-1, {1}, {1}, "shape");                                    // negative offset
  check(0, {2, -3}, {3, 1}, "shape");                              // negative size
  check(0, {2, 3}, {-3, 1}, "shape");                              // negative stride
  check(0, {std::int64_t{1} << 40, std::int64_t{1} << 40, 0}, {0, 0, 0}, "shape");  // overflow before the 0
  check(1, {2, 3}, {3, 1}, "storage_offset");                      // 1 + 3 + 2 + 1 = 7 > 6
  check(0, {3, 3}, {2, 1}, "storage_offset");                      // 0 + 4 + 2 + 1 = 7 > 6
  check(7, {0}, {1}, "storage_offset");                            // numel 0: 7 > 6
}

TEST(PtPickleOracle, Pt016HugeStrideOnUnitDimensionIsFine) {
  // size [1, 6] stride [2^62, 1]: (1 - 1) * 2^62 + 5 + 1 = 6 <= 6.
  Pkl p;
  p.proto().dict().str("w").tensor("FloatStorage", "0", 6, 0, {1, 6}, {std::int64_t{1} << 62, 1}).setitem().stop();
  std::vector<PtTensorBytes> table;
  const qd::Outcome o = Read(StateDict(p.b, kSix), &table);
  ASSERT_FALSE(o.refused);
  EXPECT_EQ(table[0].bytes, kSix);
}

TEST(PtPickleOracle, Pt017RootKeysCollisions) {
  {  // root is a list: STOP at pos 3
    Pkl p;
    p.proto().op(0x5D).stop();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "root", kPkl + 3);
  }
  {  // bool key
    Pkl p;
    p.proto().dict().op(0x88).op(0x4E).setitem();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "key", kPkl + 5);
  }
  {  // repeated key in one SETITEMS
    Pkl p;
    p.proto().dict().mark().str("k").op(0x4E).str("k").op(0x4E);
    const std::size_t at = p.pos();
    p.setitems();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "key", kPkl + static_cast<std::int64_t>(at));
  }
  {  // repeated int key
    Pkl p;
    p.proto().dict().integer(1).op(0x4E).setitem().integer(1).op(0x4E).setitem();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "key", kPkl + 10);
  }
  {  // empty key: flattening, at ds(data.pkl)
    Pkl p;
    p.proto().dict().str("").op(0x4E).setitem().stop();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "key", kPkl);
  }
  {  // "a.b" tensor and a -> {b: None}: the second name collides
    Pkl p;
    p.proto().dict().mark().str("a.b").tensor("FloatStorage", "0", 6, 0, {6}, {1});
    p.str("a").dict().str("b").op(0x4E).setitem().setitems().stop();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "key", kPkl, "a.b");
  }
  {  // int key 1 and str key "1" collide as names
    Pkl p;
    p.proto().dict().mark().integer(1).op(0x4E).str("1").op(0x4E).setitems().stop();
    ExpectError(Read(StateDict(p.b, kSix)), "PT-017", "key", kPkl, "1");
  }
  {  // negative int key flattens as "-5"
    Pkl p;
    p.proto().dict().op(0x4A);
    Put32(&p.b, 0xFFFFFFFB);
    p.op(0x4E).setitem().stop();
    std::vector<PtValueEntry> values;
    const qd::Outcome o = Read(StateDict(p.b, kSix), nullptr, &values);
    ASSERT_FALSE(o.refused);
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(values[0].name, "-5");
  }
}

TEST(PtPickleOracle, TensorsInsideListsStayValues) {
  Pkl p;
  p.proto().dict().str("l").op(0x5D).tensor("FloatStorage", "0", 6, 0, {6}, {1}).op(0x61).setitem().stop();
  std::vector<PtTensorBytes> table;
  std::vector<PtValueEntry> values;
  const qd::Outcome o = Read(StateDict(p.b, kSix), &table, &values);
  ASSERT_FALSE(o.refused);
  EXPECT_TRUE(table.empty());
  EXPECT_TRUE(o.tensors.empty());
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].text, "[tensor(F32, [6])]");
  EXPECT_TRUE(o.findings.empty());  // data/0 was named, so no PT-102
}

TEST(PtPickleOracle, TruncationsNeverCrash) {
  const Bytes good = Zip({{"a/data.pkl", SimplePickle().b}, {"a/data/0", kSix}, {"a/version", Text("3\n")}},
                         ZipStyle{true, true});
  for (std::size_t n = 0; n < good.size(); ++n) {
    const Bytes cut(good.begin(), good.begin() + n);
    const qd::Outcome o = Read(cut);
    EXPECT_TRUE(o.refused);
  }
  // Every single-byte change is either refused or accepted; nothing crashes.
  for (std::size_t i = 0; i < good.size(); ++i) {
    Bytes b = good;
    b[i] ^= 0xFF;
    (void)Read(b);
  }
}

}  // namespace
}  // namespace qd::oracle
