// pt_oracle_test.cc: hand-built cases for the oracle torch.save reader
// (oracles/pt.cc). Every expected value comes from docs/pt.md, worked out
// by hand in the comments, never from running the code.
//
// The archives are built by pt_test_support.h's tiny ZIP writer in Python zipfile's
// style (version 20, flags 0, no descriptor, no extra field) unless a test
// says otherwise, so the layout is plain arithmetic. With prefix "a" and the
// entries in the order given, entry i of name length L_i and data size D_i
// has its local header at h_i = sum_{j<i} (30 + L_j + D_j), its data at
// h_i + 30 + L_i, the directory starts at cd_off = sum_j (30 + L_j + D_j),
// central entry i at cd_off + sum_{j<i} (46 + L_j), and the end record at
// n - 22. The usual state dict is
//   a/data.pkl (L 10, D = P)   h 0,          data at 40
//   a/data/0   (L 8,  D = S)   h 40 + P,     data at 78 + P
//   a/version  (L 9,  D = 2)   h 78 + P + S, data at 117 + P + S
//   cd_off = 119 + P + S; central entries at cd_off, cd_off + 56, cd_off + 110.
// so a pickle opcode at pos has byte_offset 40 + pos.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "oracles/pt_test_support.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {
namespace {

using pt_test::Bytes;
using pt_test::F32s;
using pt_test::Pkl;
using pt_test::Put16;
using pt_test::Put32;
using pt_test::Put64;
using pt_test::Set16;
using pt_test::Set32;
using pt_test::TestCrc;
using pt_test::Text;
using pt_test::Zip;
using pt_test::ZipEntry;
using pt_test::ZipStyle;

const std::string kFile = "dir/model.pt";
constexpr std::int64_t kPkl = 40;  // data start of a/data.pkl when it is first

// The usual archive: a/data.pkl, a/data/0, a/version "3\n".
Bytes StateDict(const Bytes& pickle, const Bytes& storage, const std::string& version = "3\n") {
  return Zip({{"a/data.pkl", pickle}, {"a/data/0", storage}, {"a/version", Text(version)}});
}

qd::Outcome Read(const Bytes& file, std::vector<PtTensorBytes>* t = nullptr,
                 std::vector<PtValueEntry>* v = nullptr) {
  return ReadPtFile(qd::ByteView{file.data(), file.size()}, kFile, t, v);
}

// The one error of a refused outcome, all fields.
void ExpectError(const qd::Outcome& o, const char* rule, const char* field, std::int64_t offset,
                 const std::string& tensor = "") {
  ASSERT_TRUE(o.refused);
  ASSERT_FALSE(o.findings.empty());
  const qd::Finding& f = o.findings.back();
  EXPECT_EQ(f.rule, rule);
  EXPECT_EQ(f.severity, qd::Severity::kError);
  EXPECT_EQ(f.file, kFile);
  EXPECT_EQ(f.tensor, tensor);
  EXPECT_EQ(f.field, field);
  EXPECT_EQ(f.byte_offset, offset);
  EXPECT_EQ(f.row, -1);
  EXPECT_EQ(f.block, -1);
  EXPECT_EQ(f.element, -1);
  for (std::size_t i = 0; i + 1 < o.findings.size(); ++i) EXPECT_EQ(o.findings[i].severity, qd::Severity::kWarning);
  EXPECT_TRUE(o.tensors.empty());
}

// {"w": tensor F32 [2, 3] of storage "0" (numel 6)}.
Pkl SimplePickle() {
  Pkl p;
  p.proto().dict().mark().str("w").tensor("FloatStorage", "0", 6, 0, {2, 3}, {3, 1}).setitems().stop();
  return p;
}
const Bytes kSix = F32s({1, 2, 3, 4, 5, 6});

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

// ---------------------------------------------------------------------------
// PT-011.

TEST(PtOracle, Pt011Globals) {
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

TEST(PtOracle, Pt011OpcodesReduceBuild) {
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

TEST(PtOracle, Pt012Marks) {
  Pkl p;
  p.proto();
  for (int i = 0; i < 256; ++i) p.mark();
  p.mark();  // the 257th at pos 2 + 256
  ExpectError(Read(StateDict(p.b, kSix)), "PT-012", "marks", kPkl + 258);
}

TEST(PtOracle, Pt012IntegerAndString) {
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

TEST(PtOracle, Pt012StackMemoContainer) {
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

TEST(PtOracle, Pt012ValuesCreated) {
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

TEST(PtOracle, Pt012TorchSizeInts) {
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

TEST(PtOracle, Pt012DepthAndNodes) {
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

TEST(PtOracle, Pt013Malformed) {
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

TEST(PtOracle, Pt014Args) {
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

TEST(PtOracle, Pt015PersistentIds) {
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

TEST(PtOracle, Pt016Geometry) {
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

TEST(PtOracle, Pt016HugeStrideOnUnitDimensionIsFine) {
  // size [1, 6] stride [2^62, 1]: (1 - 1) * 2^62 + 5 + 1 = 6 <= 6.
  Pkl p;
  p.proto().dict().str("w").tensor("FloatStorage", "0", 6, 0, {1, 6}, {std::int64_t{1} << 62, 1}).setitem().stop();
  std::vector<PtTensorBytes> table;
  const qd::Outcome o = Read(StateDict(p.b, kSix), &table);
  ASSERT_FALSE(o.refused);
  EXPECT_EQ(table[0].bytes, kSix);
}

TEST(PtOracle, Pt017RootKeysCollisions) {
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

TEST(PtOracle, TensorsInsideListsStayValues) {
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

TEST(PtOracle, TruncationsNeverCrash) {
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
