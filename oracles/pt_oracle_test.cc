// pt_oracle_test.cc: hand-built cases for the oracle torch.save reader
// (oracles/pt.cc). Every expected value comes from docs/pt.md, worked out
// by hand in the comments, never from running the code.
// This file: the ZIP container (PT-001..PT-010, warnings, accepted files);
// the opcode walk is in pt_pickle_oracle_test.cc. The archive layout and
// its offsets are worked out in pt_oracle_test_files.h.
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
// Accepts.

TEST(PtOracle, Crc32CheckValue) {
  const Bytes digits = Text("123456789");
  EXPECT_EQ(PtCrc32(digits.data(), digits.size()), 0xCBF43926u);
  EXPECT_EQ(TestCrc(digits), 0xCBF43926u);
}

TEST(PtOracle, AcceptsSimpleStateDict) {
  std::vector<PtTensorBytes> table;
  const qd::Outcome o = Read(StateDict(SimplePickle().b, kSix), &table);
  ASSERT_FALSE(o.refused);
  EXPECT_TRUE(o.findings.empty());
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].name, "w");
  EXPECT_EQ(table[0].dtype, "F32");
  EXPECT_EQ(table[0].shape, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(table[0].bytes, kSix);
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].name, "w");
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(PtOracle, AcceptsTorchStyleArchiveWithZip64EndRecords) {
  // FB padding, flags 0x0808, descriptors, zip64 end record and locator: 2.1.
  const Bytes file = Zip({{"a/data.pkl", SimplePickle().b}, {"a/data/0", kSix}, {"a/version", Text("3\n")}},
                         ZipStyle{true, true});
  std::vector<PtTensorBytes> table;
  const qd::Outcome o = Read(file, &table);
  ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().byte_offset;
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].bytes, kSix);
}

TEST(PtOracle, ViewsStridesAndOffsetsInCOrder) {
  // Storage s = [0..11] as F32. t = transpose of a [3, 4] view: size [4, 3],
  // stride [1, 4]: element (i, j) = s[i + 4 j]. u: offset 5, size [2, 2],
  // stride [4, 2]: (i, j) = s[5 + 4 i + 2 j] = 5, 7, 9, 11. b: broadcast
  // size [2, 2] stride [0, 1] offset 10: 10, 11, 10, 11. r: rank 0, offset 3.
  std::vector<float> s;
  for (int i = 0; i < 12; ++i) s.push_back(static_cast<float>(i));
  Pkl p;
  p.proto().dict().mark();
  p.str("t").tensor("FloatStorage", "0", 12, 0, {4, 3}, {1, 4});
  p.str("u").tensor("FloatStorage", "0", 12, 5, {2, 2}, {4, 2});
  p.str("b").tensor("FloatStorage", "0", 12, 10, {2, 2}, {0, 1});
  p.str("r").tensor("FloatStorage", "0", 12, 3, {}, {});
  p.str("e").tensor("FloatStorage", "0", 12, 12, {0, 5}, {5, 1});  // numel 0, offset == numel
  p.setitems().stop();
  std::vector<PtTensorBytes> table;
  const qd::Outcome o = Read(StateDict(p.b, F32s(s)), &table);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(table.size(), 5u);
  EXPECT_EQ(table[0].bytes, F32s({0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(table[1].bytes, F32s({5, 7, 9, 11}));
  EXPECT_EQ(table[2].bytes, F32s({10, 11, 10, 11}));
  EXPECT_EQ(table[3].bytes, F32s({3}));
  EXPECT_TRUE(table[3].shape.empty());
  EXPECT_TRUE(table[4].bytes.empty());
  EXPECT_EQ(table[4].shape, (std::vector<std::uint64_t>{0, 5}));
  // Decoded output sorted by (begin, end, name), 6.4 with ds = 78 + P:
  // t [ds, ds+48), r [ds+12, ds+16), u [ds+20, ds+36), b [ds+40, ds+56),
  // e [ds+48, ds+48) -> t, r, u, b, e.
  ASSERT_EQ(o.tensors.size(), 5u);
  EXPECT_EQ(o.tensors[0].name, "t");
  EXPECT_EQ(o.tensors[1].name, "r");
  EXPECT_EQ(o.tensors[2].name, "u");
  EXPECT_EQ(o.tensors[3].name, "b");
  EXPECT_EQ(o.tensors[4].name, "e");
  EXPECT_EQ(o.tensors[1].values, (std::vector<float>{3}));
}

TEST(PtOracle, ByteorderBigSwapsEachElement) {
  // F16 storage of 2 elements stored big-endian: 3C 00 (1.0), C0 00 (-2.0).
  Pkl p;
  p.proto().dict().mark().str("h").tensor("HalfStorage", "0", 2, 0, {2}, {1}).setitems().stop();
  const Bytes file = Zip({{"a/data.pkl", p.b}, {"a/data/0", Bytes{0x3C, 0x00, 0xC0, 0x00}},
                          {"a/version", Text("3\n")}, {"a/byteorder", Text("big")}});
  std::vector<PtTensorBytes> table;
  const qd::Outcome o = Read(file, &table);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].dtype, "F16");
  EXPECT_EQ(table[0].bytes, (Bytes{0x00, 0x3C, 0x00, 0xC0}));
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
}

TEST(PtOracle, NestedDictsIntKeysOrderedDictBuildParameterAndValues) {
  // OrderedDict root with BUILD state {'_metadata': {}} (attributes, not
  // items); "m" -> {0: tensor I64 [1] via _rebuild_parameter, "n": None};
  // "cfg" -> {"q": 'nf4', "bs": 32, "shape": (40, 30), "f": 0.5,
  // "dt": torch.float16, "ok": True, "l": [1, torch.Size([2])]}.
  Pkl p;
  p.proto().ordered().mark();
  p.str("m").dict().mark();
  p.integer(0).global("torch._utils", "_rebuild_parameter").mark();
  p.tensor("LongStorage", "0", 1, 0, {1}, {1}).op(0x88).ordered().tuple().reduce();
  p.str("n").op(0x4E).setitems();
  p.str("cfg").dict().mark();
  p.str("q").str("nf4").str("bs").integer(32).str("shape").integer(40).integer(30).op(0x86);
  p.str("f").op(0x47);
  for (const std::uint8_t x : {0x3F, 0xE0, 0, 0, 0, 0, 0, 0}) p.op(x);  // 0.5 big-endian
  p.str("dt").global("torch", "float16").str("ok").op(0x88);
  p.str("l").op(0x5D).mark().integer(1).global("torch", "Size").integer(2).op(0x85).op(0x85).reduce().op(0x65);
  p.setitems();
  p.setitems();
  p.dict().str("_metadata").dict().setitem().op(0x62).stop();
  Bytes storage;
  Put64(&storage, 7);
  std::vector<PtTensorBytes> table;
  std::vector<PtValueEntry> values;
  const qd::Outcome o = Read(StateDict(p.b, storage), &table, &values);
  ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().byte_offset;
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].name, "m.0");
  EXPECT_EQ(table[0].dtype, "I64");
  EXPECT_TRUE(o.tensors.empty());  // integer tensors are not output (6.3)
  ASSERT_EQ(values.size(), 8u);
  EXPECT_EQ(values[0].name, "m.n");
  EXPECT_EQ(values[0].text, "None");
  EXPECT_EQ(values[1].name, "cfg.q");
  EXPECT_EQ(values[1].text, "'nf4'");
  EXPECT_EQ(values[2].text, "32");
  EXPECT_EQ(values[3].text, "(40, 30)");
  EXPECT_EQ(values[4].text, "0.5");
  EXPECT_EQ(values[5].text, "float16");
  EXPECT_EQ(values[6].text, "True");
  EXPECT_EQ(values[7].name, "cfg.l");
  EXPECT_EQ(values[7].text, "[1, torch.Size([2])]");
}

TEST(PtOracle, DecodesF64Bf16AndLeavesBoolOut) {
  // F64 0.1 rounds to the nearest binary32 0x3DCCCCCD; BF16 0x4049 is
  // 0x40490000 = 3.140625.
  Pkl p;
  p.proto().dict().mark();
  p.str("d").tensor("DoubleStorage", "0", 1, 0, {1}, {1});
  p.setitems().stop();
  double tenth = 0.1;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &tenth, 8);
  Bytes storage;
  Put64(&storage, bits);
  const qd::Outcome o = Read(StateDict(p.b, storage));
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);
  std::uint32_t f = 0;
  std::memcpy(&f, &o.tensors[0].values[0], 4);
  EXPECT_EQ(f, 0x3DCCCCCDu);

  Pkl q;
  q.proto().dict().mark();
  q.str("b").tensor("BFloat16Storage", "0", 1, 0, {}, {});
  q.str("z").tensor("BoolStorage", "1", 1, 0, {}, {});
  q.setitems().stop();
  const Bytes file = Zip({{"a/data.pkl", q.b}, {"a/data/0", Bytes{0x49, 0x40}}, {"a/data/1", Bytes{1}},
                          {"a/version", Text("3\n")}});
  std::vector<PtTensorBytes> table;
  const qd::Outcome o2 = Read(file, &table);
  ASSERT_FALSE(o2.refused);
  ASSERT_EQ(o2.tensors.size(), 1u);
  EXPECT_EQ(o2.tensors[0].values[0], 3.140625f);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[1].dtype, "BOOL");
  EXPECT_EQ(table[1].bytes, Bytes{1});
}

TEST(PtOracle, Protocol4FrameMemoizeAndAllowedStackGlobal) {
  // PROTO 4, FRAME, STACK_GLOBAL of collections.OrderedDict (allowed),
  // MEMOIZE (the dict is memo 0, "x" memo 1), BINGET: accepted.
  Pkl p;
  p.proto(4).op(0x95);
  Put64(&p.b, 0);
  p.str("collections").str("OrderedDict").op(0x93).op(0x29).reduce().op(0x94);
  p.str("x").op(0x94).integer(7).setitem().stop();
  std::vector<PtValueEntry> values;
  const qd::Outcome ok = Read(StateDict(p.b, kSix), nullptr, &values);
  ASSERT_FALSE(ok.refused);
  EXPECT_EQ(ok.findings.size(), 1u);  // PT-102: data/0 is never named
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].name, "x");
  EXPECT_EQ(values[0].text, "7");
  // BINGET 1 pushes "x" again: a repeated key at that SETITEM (PT-017).
  Pkl q;
  q.b = p.b;
  q.b.pop_back();  // drop STOP
  q.op(0x68).op(1).integer(8);
  const std::size_t at = q.pos();
  q.setitem().stop();
  ExpectError(Read(StateDict(q.b, kSix)), "PT-017", "key", kPkl + static_cast<std::int64_t>(at));
  // A key that is the dict itself (BINGET 0): not str or int.
  Pkl r;
  r.b = p.b;
  r.b.pop_back();
  r.op(0x68).op(0).op(0x4E);
  const std::size_t at2 = r.pos();
  r.setitem().stop();
  ExpectError(Read(StateDict(r.b, kSix)), "PT-017", "key", kPkl + static_cast<std::int64_t>(at2));
}

// ---------------------------------------------------------------------------
// PT-001, PT-002.

TEST(PtOracle, Pt001LegacyStreamAndTar) {
  Bytes legacy = {0x80, 0x02, 0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19, 0x2E};
  ExpectError(Read(legacy), "PT-001", "format", 0);
  Bytes tar(600, 0);
  std::memcpy(tar.data() + 257, "ustar", 5);
  ExpectError(Read(tar), "PT-001", "format", 0);
}

TEST(PtOracle, Pt002EndRecords) {
  ExpectError(Read(Bytes{}), "PT-002", "eocd", 0);
  ExpectError(Read(Bytes{0x50, 0x4B, 0x03, 0x04, 0, 0}), "PT-002", "eocd", 0);
  ExpectError(Read(Text("not a zip at all, no, not at all")), "PT-002", "eocd", 0);
  const Bytes good = StateDict(SimplePickle().b, kSix);
  const std::size_t e = good.size() - 22;
  Bytes b = good;
  b[e + 20] = 1;  // comment length 1
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  b = good;
  Set16(&b, e + 4, 1);  // disk number
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  b = good;
  Set16(&b, e + 8, 2);  // entries on this disk != total
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  b = good;
  Set32(&b, e + 16, 0xFFFFFFFFu);  // saturated without zip64
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  b = good;
  Set32(&b, e + 12, 164);  // cd_off + cd_size != e
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  b = good;
  Set16(&b, e + 8, 4);
  Set16(&b, e + 10, 4);  // 46 * 4 = 184 > 165
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  b = good;
  Set16(&b, e + 8, 0);
  Set16(&b, e + 10, 0);  // N = 0
  ExpectError(Read(b), "PT-002", "eocd", static_cast<std::int64_t>(e));
  // zip64: the record's total entries disagree with the classic value 3.
  Bytes z = Zip({{"a/data.pkl", SimplePickle().b}, {"a/data/0", kSix}, {"a/version", Text("3\n")}},
                ZipStyle{false, true});
  const std::size_t ze = z.size() - 22;
  const std::size_t zr = ze - 20 - 56;
  z[zr + 32] = 4;
  z[zr + 24] = 4;
  ExpectError(Read(z), "PT-002", "eocd", static_cast<std::int64_t>(ze));
}

// ---------------------------------------------------------------------------
// PT-003, PT-004, PT-005.

TEST(PtOracle, Pt003CentralEntries) {
  const Pkl pk = SimplePickle();
  const std::uint64_t P = pk.b.size();
  const Bytes good = StateDict(pk.b, kSix);
  const std::size_t cd_off = 119 + P + 24;
  const std::size_t c1 = cd_off + 56;  // central entry of a/data/0
  Bytes b = good;
  Set16(&b, c1 + 10, 8);  // deflate
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(c1));
  b = good;
  Set16(&b, c1 + 8, 1);  // encryption bit
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(c1));
  b = good;
  Set32(&b, c1 + 20, 23);  // compressed size 23 != uncompressed 24
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(c1));
  b = good;
  Set32(&b, c1 + 24, 0xFFFFFFFFu);  // saturated, no zip64 extra
  Set32(&b, c1 + 20, 0xFFFFFFFFu);
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(c1));
  b = good;
  Set32(&b, c1, 0x02014b51);  // signature
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(c1));
  b = good;
  Set16(&b, c1 + 30, 1);  // extra length 1: runs into the next entry; malformed
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(c1));
  // N = 2 while three entries are there: after entry 2 the position is
  // cd_off + 110, not the directory end -> PT-003 at cd_off + 110.
  b = good;
  const std::size_t e = b.size() - 22;
  Set16(&b, e + 8, 2);
  Set16(&b, e + 10, 2);
  ExpectError(Read(b), "PT-003", "central_directory", static_cast<std::int64_t>(cd_off + 110));
}

TEST(PtOracle, Pt004Names) {
  const Bytes pkl = SimplePickle().b;
  // Entry 1's name: central entry at cd_off + 56, cd_off = sum of locals.
  auto second_name = [&](const std::string& name) {
    const Bytes file = Zip({{"a/data.pkl", pkl}, {name, kSix}, {"a/version", Text("3\n")}});
    const std::int64_t cd_off = 40 + static_cast<std::int64_t>(pkl.size()) + 30 +
                                static_cast<std::int64_t>(name.size()) + 24 + 39 + 2;
    ExpectError(Read(file), "PT-004", "name", cd_off + 56);
  };
  second_name("a/../0");
  second_name("a/./0");
  second_name("a//0");
  second_name("a\\data");
  second_name("b/data/0");
  second_name("adata/0");  // prefix "adata" differs from "a"
  second_name("a/d\x01");
  second_name(std::string("a/\xC0\xAF"));  // overlong UTF-8
  second_name("a/\x7F");
  // First entry without a subdirectory, and an absolute first name.
  for (const std::string& first : {std::string("data.pkl"), std::string("/a/data.pkl")}) {
    const Bytes file = Zip({{first, pkl}, {"a/version", Text("3\n")}});
    const std::int64_t cd_off = 30 + static_cast<std::int64_t>(first.size() + pkl.size()) + 39 + 2;
    ExpectError(Read(file), "PT-004", "name", cd_off);
  }
}

TEST(PtOracle, Pt005DuplicateNames) {
  const Bytes pkl = SimplePickle().b;
  const Bytes file = Zip({{"a/data.pkl", pkl}, {"a/data/0", kSix}, {"a/data/0", kSix}, {"a/version", Text("3\n")}});
  // cd_off = (40 + P) + 38 + 24 + 38 + 24 + 39 + 2; third central entry at cd_off + 56 + 54.
  const std::int64_t cd_off = 40 + static_cast<std::int64_t>(pkl.size()) + 62 + 62 + 41;
  ExpectError(Read(file), "PT-005", "name", cd_off + 110);
}

// ---------------------------------------------------------------------------
// PT-006, PT-007, PT-008.

TEST(PtOracle, Pt006LocalHeaders) {
  const Pkl pk = SimplePickle();
  const std::uint64_t P = pk.b.size();
  const Bytes good = StateDict(pk.b, kSix);
  const std::size_t h1 = 40 + P;
  const std::size_t cd_off = 119 + P + 24;
  const std::int64_t c1 = static_cast<std::int64_t>(cd_off + 56);
  Bytes b = good;
  b[h1 + 30] = 'b';  // local name "b/data/0"
  ExpectError(Read(b), "PT-006", "local_header", c1);
  b = good;
  Set16(&b, h1 + 6, 0x0800);  // local flags differ
  ExpectError(Read(b), "PT-006", "local_header", c1);
  b = good;
  Set32(&b, h1 + 14, 0);  // local CRC differs (bit 3 clear)
  ExpectError(Read(b), "PT-006", "local_header", c1);
  b = good;
  Set32(&b, cd_off + 56 + 42, static_cast<std::uint32_t>(cd_off - 10));  // h + 30 > cd_off
  ExpectError(Read(b), "PT-006", "local_header", c1);
  b = good;
  Set32(&b, h1, 0x04034b51);
  ExpectError(Read(b), "PT-006", "local_header", c1);
  // Central sizes of a/data/0 raised to 1000 (local too): data end beyond cd_off.
  b = good;
  Set32(&b, cd_off + 56 + 20, 1000);
  Set32(&b, cd_off + 56 + 24, 1000);
  Set32(&b, h1 + 18, 1000);
  Set32(&b, h1 + 22, 1000);
  ExpectError(Read(b), "PT-006", "local_header", c1);
}

TEST(PtOracle, Pt006FbPaddingAndDescriptor) {
  const Bytes pkl = SimplePickle().b;
  const Bytes good = Zip({{"a/data.pkl", pkl}, {"a/data/0", kSix}, {"a/version", Text("3\n")}}, ZipStyle{true, false});
  // Entry 0: local header at 0, name 10, FB field: start = 44, pad 20 so the
  // data starts at 64; FB data at 44..63.
  const std::size_t e = good.size() - 22;
  const std::int64_t cd_off = good[e + 16] | (good[e + 17] << 8);
  Bytes b = good;
  b[50] = 0xA5;
  ExpectError(Read(b), "PT-006", "local_header", cd_off);
  // Descriptor signature of entry 0 (right after its data at 64 + P) broken.
  b = good;
  b[64 + pkl.size()] = 0;
  ExpectError(Read(b), "PT-006", "local_header", cd_off);
}

TEST(PtOracle, Pt007OverlappingEntries) {
  // a/x's data is the whole local entry of a/version, whose central entry
  // points inside it: sorted by h, a/version (h = 30 + 10 + P + 30 + 5)
  // starts before a/x ends.
  const Bytes pkl = SimplePickle().b;
  Bytes inner;
  const Bytes ver = Text("3\n");
  Put32(&inner, 0x04034b50);
  Put16(&inner, 20);
  Put16(&inner, 0);
  Put16(&inner, 0);
  Put32(&inner, 0);
  Put32(&inner, TestCrc(ver));
  Put32(&inner, 2);
  Put32(&inner, 2);
  Put16(&inner, 9);
  Put16(&inner, 0);
  for (const char c : std::string("a/version")) inner.push_back(static_cast<std::uint8_t>(c));
  inner.insert(inner.end(), ver.begin(), ver.end());
  Bytes file = Zip({{"a/data.pkl", pkl}, {"a/x", inner}, {"a/data/0", kSix}, {"a/version", ver}});
  // Point a/version's central entry at the inner header.
  const std::uint64_t P = pkl.size();
  const std::uint64_t inner_h = 40 + P + 30 + 3;
  const std::uint64_t cd_off = (40 + P) + (33 + inner.size()) + 62 + 41;
  const std::uint64_t c3 = cd_off + 56 + 49 + 54;
  Set32(&file, c3 + 42, static_cast<std::uint32_t>(inner_h));
  ExpectError(Read(file), "PT-007", "local_header", static_cast<std::int64_t>(c3));
}

TEST(PtOracle, Pt008CrcMismatch) {
  const Pkl pk = SimplePickle();
  const std::uint64_t P = pk.b.size();
  Bytes b = StateDict(pk.b, kSix);
  const std::size_t ds1 = 78 + P;
  const std::size_t cd_off = 119 + P + 24;
  (void)cd_off;
  // One data byte of a/data/0 flipped; local and central CRC agree (stale).
  b[ds1] ^= 1;
  ExpectError(Read(b), "PT-008", "crc32", static_cast<std::int64_t>(ds1));
}

// ---------------------------------------------------------------------------
// PT-009, PT-010, PT-104, PT-101, PT-102.

TEST(PtOracle, Pt009MissingOrMalformedRecords) {
  const Bytes pkl = SimplePickle().b;
  // No data.pkl: cd_off = (38 + 24) + (39 + 2) = 103.
  ExpectError(Read(Zip({{"a/data/0", kSix}, {"a/version", Text("3\n")}})), "PT-009", "data.pkl", 103);
  // No version: cd_off = 40 + P + 62.
  ExpectError(Read(Zip({{"a/data.pkl", pkl}, {"a/data/0", kSix}})), "PT-009", "version",
              static_cast<std::int64_t>(102 + pkl.size()));
  // Malformed version: data at 117 + P + 24.
  const std::int64_t vds = 117 + static_cast<std::int64_t>(pkl.size()) + 24;
  ExpectError(Read(StateDict(pkl, kSix, "3.0")), "PT-009", "version", vds);
  ExpectError(Read(StateDict(pkl, kSix, "\n")), "PT-009", "version", vds);
  ExpectError(Read(StateDict(pkl, kSix, "3\n\n")), "PT-009", "version", vds);
  ExpectError(Read(StateDict(pkl, kSix, "123456789012345678901")), "PT-009", "version", vds);
  // .data/version wins over version: ".data/version" "x" refused although
  // "version" is fine. a/.data/version (L 15): h = 102 + P, data at 147 + P.
  const Bytes both = Zip({{"a/data.pkl", pkl}, {"a/data/0", kSix}, {"a/.data/version", Text("x")},
                          {"a/version", Text("3\n")}});
  ExpectError(Read(both), "PT-009", "version", 147 + static_cast<std::int64_t>(pkl.size()));
}

TEST(PtOracle, Pt010Byteorder) {
  const Bytes pkl = SimplePickle().b;
  // a/byteorder (L 11) after a/version: h = 119 + P + 24, data at +41.
  const Bytes file = Zip({{"a/data.pkl", pkl}, {"a/data/0", kSix}, {"a/version", Text("3\n")},
                          {"a/byteorder", Text("little\n")}});
  ExpectError(Read(file), "PT-010", "byteorder", 119 + static_cast<std::int64_t>(pkl.size()) + 24 + 41);
}

TEST(PtOracle, WarningsVersionUnknownRecordUnusedStorage) {
  const Bytes pkl = SimplePickle().b;
  const std::int64_t P = static_cast<std::int64_t>(pkl.size());
  // Local order: a/data.pkl 0, a/data/0 40+P, a/version 78+P+24 (data
  // "2\n" at 117+P+24), a/notes (L 7) 119+P+24 with 1 byte, a/data/9
  // (L 8) 119+P+24+38 with 4 bytes.
  const Bytes file = Zip({{"a/data.pkl", pkl}, {"a/data/0", kSix}, {"a/version", Text("2\n")},
                          {"a/notes", Text("x")}, {"a/data/9", Bytes{0, 0, 0, 0}}});
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.findings.size(), 3u);
  EXPECT_EQ(o.findings[0].rule, "PT-104");
  EXPECT_EQ(o.findings[0].field, "version");
  EXPECT_EQ(o.findings[0].byte_offset, 117 + P + 24);
  EXPECT_EQ(o.findings[1].rule, "PT-101");
  EXPECT_EQ(o.findings[1].field, "record");
  EXPECT_EQ(o.findings[1].byte_offset, 119 + P + 24);
  EXPECT_EQ(o.findings[2].rule, "PT-102");
  EXPECT_EQ(o.findings[2].field, "storage");
  EXPECT_EQ(o.findings[2].byte_offset, 119 + P + 24 + 38);
  for (const qd::Finding& f : o.findings) {
    EXPECT_EQ(f.severity, qd::Severity::kWarning);
    EXPECT_EQ(f.tensor, "");
  }
  EXPECT_EQ(o.tensors.size(), 1u);
}

}  // namespace
}  // namespace qd::oracle
