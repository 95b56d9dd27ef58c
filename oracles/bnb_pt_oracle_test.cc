// bnb_pt_oracle_test.cc: the oracle's bitsandbytes readers on a .pt tensor
// table (docs/pt.md 6.4, section 8 step 8) and the QuantState list layout
// (docs/pt.md section 7), through ReadPtFile. Also the structured value
// graph of oracles/pt.h.
//
// Every expected value is worked out by hand in the comment next to it from
// docs/pt.md, docs/bnb.md and the NF4 / FP4 tables of the peer TABLES.json
// (retyped below as bit patterns); none is a recorded output of the code
// under test.
//
// Files are built with pt_test_support.h's ZIP writer: entries a/data.pkl,
// a/data/0, a/data/1, ..., a/version in that order, no extra fields, so
// a/data.pkl's data starts at 30 + 10 = 40: the byte_offset of every
// header-level finding (kPkl, docs/pt.md 6.4). Storage records are numbered
// in the order the pickle first names them; Built::ds[k] is the data start
// of a/data/<k>, h_k + 30 + len("a/data/<k>") with h_k the sum of
// 30 + name length + data size over the entries before it (the ZIP
// writer's layout, not the reader's answer). A value of byte k of a
// tensor's C-order bytes is at ds + s(k div isz) * isz + (k mod isz)
// (docs/pt.md 6.4), with s(i) = storage_offset + sum(i_d * stride_d).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oracles/bnb_test_tables.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "oracles/pt_test_support.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {
namespace {

using pt_test::Bytes;
using pt_test::Pkl;
using pt_test::Put16;
using pt_test::Put32;
using pt_test::Put64;
using pt_test::Text;
using pt_test::Zip;
using pt_test::ZipEntry;
using qd::oracle::test::Bits;

const std::string kFile = "dir/model.pt";
constexpr std::int64_t kPkl = 40;  // ds of a/data.pkl, the first entry

using qd::oracle::test::kFp4;
using qd::oracle::test::kNf4;

constexpr std::uint32_t kInf = 0x7F800000;
constexpr std::uint32_t kNaN = 0x7FC00000;

std::uint32_t BitsOf(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

Bytes F32Bytes(const Bits& bits) {
  Bytes out;
  for (const std::uint32_t b : bits) Put32(&out, b);
  return out;
}

Bytes F64Bytes(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  Bytes out;
  Put64(&out, bits);
  return out;
}

// ---------------------------------------------------------------------------
// Building .pt files: a root dict of items, each value written by an Item.

struct Record {
  std::string cls;
  Bytes data;
};

struct Writer {
  Pkl p;
  std::vector<Record> records;  // data/<index>

  std::string AddRecord(const std::string& cls, const Bytes& data) {
    records.push_back({cls, data});
    return std::to_string(records.size() - 1);
  }
};

using Item = std::function<void(Writer&)>;

std::uint64_t ItemSize(const std::string& cls) {
  if (cls == "DoubleStorage" || cls == "LongStorage") return 8;
  if (cls == "FloatStorage" || cls == "IntStorage") return 4;
  if (cls == "HalfStorage" || cls == "BFloat16Storage" || cls == "ShortStorage") return 2;
  return 1;  // Char, Byte, Bool
}

std::vector<std::int64_t> Contiguous(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> stride(shape.size(), 1);
  for (std::size_t d = shape.size(); d > 1; --d) stride[d - 2] = stride[d - 1] * shape[d - 1];
  return stride;
}

// A view of a new storage holding data.
Item View(const std::string& cls, const Bytes& data, std::int64_t offset,
          const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& stride) {
  return [=](Writer& w) {
    const std::string key = w.AddRecord(cls, data);
    w.p.tensor(cls, key, static_cast<std::int64_t>(data.size() / ItemSize(cls)), offset, shape,
               stride);
  };
}

// A contiguous tensor over a new storage holding exactly its data.
Item Tensor(const std::string& cls, const Bytes& data, const std::vector<std::int64_t>& shape) {
  return View(cls, data, 0, shape, Contiguous(shape));
}

Item F32(const Bits& bits, const std::vector<std::int64_t>& shape) {
  return Tensor("FloatStorage", F32Bytes(bits), shape);
}
Item U8(const Bytes& bytes, const std::vector<std::int64_t>& shape) {
  return Tensor("ByteStorage", bytes, shape);
}

// One storage several views name (its record is added at the first view).
struct SharedStorage {
  std::string cls;
  Bytes data;
  std::string key;
};

Item ViewOf(const std::shared_ptr<SharedStorage>& storage, std::int64_t offset,
            const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& stride) {
  return [=](Writer& w) {
    if (storage->key.empty()) storage->key = w.AddRecord(storage->cls, storage->data);
    w.p.tensor(storage->cls, storage->key,
               static_cast<std::int64_t>(storage->data.size() / ItemSize(storage->cls)), offset,
               shape, stride);
  };
}

Item Size(const std::vector<std::int64_t>& dims) {
  return [=](Writer& w) { w.p.global("torch", "Size").ints(dims).op(0x85).reduce(); };
}
Item Dtype(const std::string& name) {
  return [=](Writer& w) { w.p.global("torch", name); };
}
Item Int(std::int64_t value) {
  return [=](Writer& w) { w.p.integer(value); };
}
Item Str(const std::string& text) {
  return [=](Writer& w) { w.p.str(text); };
}
Item None() {
  return [](Writer& w) { w.p.op(0x4E); };
}
Item Bool(bool value) {
  return [=](Writer& w) { w.p.op(value ? 0x88 : 0x89); };
}
// BINFLOAT: the binary64 bits, big-endian.
Item Float(double value) {
  return [=](Writer& w) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    w.p.op(0x47);
    for (int i = 7; i >= 0; --i) w.p.op(static_cast<std::uint8_t>(bits >> (8 * i)));
  };
}
Item List(const std::vector<Item>& items) {
  return [=](Writer& w) {
    w.p.op(0x5D);  // EMPTY_LIST
    if (items.empty()) return;
    w.p.mark();
    for (const Item& item : items) item(w);
    w.p.op(0x65);  // APPENDS
  };
}
Item Tuple(const std::vector<Item>& items) {
  return [=](Writer& w) {
    w.p.mark();
    for (const Item& item : items) item(w);
    w.p.tuple();
  };
}

struct Built {
  Bytes bytes;
  std::vector<std::int64_t> ds;  // data start of a/data/<k>
};

Built Build(const std::vector<std::pair<std::string, Item>>& entries,
            const std::string& version = "3\n") {
  Writer w;
  w.p.proto().dict();
  if (!entries.empty()) {
    w.p.mark();
    for (const auto& [key, item] : entries) {
      w.p.str(key);
      item(w);
    }
    w.p.setitems();
  }
  w.p.stop();
  std::vector<ZipEntry> zip = {{"a/data.pkl", w.p.b}};
  for (std::size_t k = 0; k < w.records.size(); ++k) {
    zip.push_back({"a/data/" + std::to_string(k), w.records[k].data});
  }
  zip.push_back({"a/version", Text(version)});
  Built built;
  built.bytes = Zip(zip);
  std::int64_t h = 0;
  for (std::size_t i = 0; i < zip.size(); ++i) {
    const std::int64_t ds = h + 30 + static_cast<std::int64_t>(zip[i].name.size());
    if (i >= 1 && i <= w.records.size()) built.ds.push_back(ds);
    h = ds + static_cast<std::int64_t>(zip[i].data.size());
  }
  return built;
}

qd::Outcome Read(const Built& file, std::vector<PtTensorBytes>* tensors = nullptr,
                 std::vector<PtValueEntry>* values = nullptr, PtValueGraph* graph = nullptr) {
  return ReadPtFile(qd::ByteView{file.bytes.data(), file.bytes.size()}, kFile, tensors, values,
                    graph);
}

// ---------------------------------------------------------------------------
// Checking outcomes.

std::string Describe(const qd::Outcome& outcome) {
  std::string text = outcome.refused ? "refused" : "accepted";
  for (const qd::Finding& f : outcome.findings) {
    text += "\n  " + f.rule + (f.severity == qd::Severity::kError ? " error" : " warning") +
            " tensor=" + f.tensor + " field=" + f.field +
            " byte_offset=" + std::to_string(f.byte_offset) + " block=" + std::to_string(f.block) +
            " element=" + std::to_string(f.element) + ": " + f.message;
  }
  return text;
}

void ExpectFinding(const qd::Finding& f, const std::string& rule, qd::Severity severity,
                   const std::string& tensor, const std::string& field, std::int64_t byte_offset,
                   std::int64_t block, std::int64_t element) {
  EXPECT_EQ(f.rule, rule);
  EXPECT_EQ(f.severity, severity);
  EXPECT_EQ(f.file, kFile);
  EXPECT_EQ(f.tensor, tensor);
  EXPECT_EQ(f.field, field);
  EXPECT_EQ(f.byte_offset, byte_offset);
  EXPECT_EQ(f.row, -1);
  EXPECT_EQ(f.block, block);
  EXPECT_EQ(f.element, element);
}

// Refused; the last finding is this error (every field), the ones before it
// are warnings, nothing is decoded and the tables are not given.
void ExpectError(const Built& file, const std::string& rule, const std::string& tensor,
                 const std::string& field, std::int64_t byte_offset, std::int64_t block = -1,
                 std::int64_t element = -1) {
  std::vector<PtTensorBytes> tensors;
  std::vector<PtValueEntry> values;
  PtValueGraph graph;
  const qd::Outcome o = Read(file, &tensors, &values, &graph);
  ASSERT_TRUE(o.refused) << Describe(o);
  ASSERT_FALSE(o.findings.empty());
  SCOPED_TRACE(Describe(o));
  ExpectFinding(o.findings.back(), rule, qd::Severity::kError, tensor, field, byte_offset, block,
                element);
  for (std::size_t i = 0; i + 1 < o.findings.size(); ++i) {
    EXPECT_EQ(o.findings[i].severity, qd::Severity::kWarning);
  }
  EXPECT_TRUE(o.tensors.empty());
  EXPECT_TRUE(tensors.empty());
  EXPECT_TRUE(values.empty());
  EXPECT_TRUE(graph.nodes.empty());
}

const qd::DecodedTensor* FindDecoded(const qd::Outcome& outcome, const std::string& name) {
  for (const qd::DecodedTensor& t : outcome.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void ExpectValues(const qd::Outcome& outcome, const std::string& name,
                  const std::vector<std::uint64_t>& shape, const Bits& bits) {
  const qd::DecodedTensor* found = FindDecoded(outcome, name);
  ASSERT_NE(found, nullptr) << "no decoded tensor " << name << "\n" << Describe(outcome);
  EXPECT_EQ(found->shape, shape);
  ASSERT_EQ(found->values.size(), bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(BitsOf(found->values[i]), bits[i]) << name << " element " << i;
  }
}

std::vector<std::string> DecodedNames(const qd::Outcome& outcome) {
  std::vector<std::string> names;
  for (const qd::DecodedTensor& t : outcome.tensors) names.push_back(t.name);
  return names;
}

// ---------------------------------------------------------------------------
// The layers the tests start from.

// W "w": U8 [2] = F0 7A, codes 15, 0, 7, 10 (the high nibble is the even
// element, BNB-002).
Item PackedW() { return U8({0xF0, 0x7A}, {2}); }

// The flat 7-item list (docs/pt.md 7.1, quantize_4bit of 0.40):
// [absmax F32 [1] = 2.0, torch.Size([4]), torch.float32, 64, None, 'nf4',
//  quant_map F32 [16] = the NF4 table].
// With PackedW the records are data/0 = w, data/1 = absmax, data/2 = quant_map.
std::vector<Item> Flat7() {
  return {F32({0x40000000}, {1}), Size({4}), Dtype("float32"), Int(64), None(), Str("nf4"),
          F32(kNf4, {16})};
}

Built FlatFile(const std::vector<Item>& state) {
  return Build({{"w", PackedW()}, {"w.quant_state", List(state)}});
}

std::vector<Item> With(std::vector<Item> items, std::size_t index, const Item& item) {
  items[index] = item;
  return items;
}

// state2 as quantize_blockwise returned it: [absmax2 F32 [1] = 1 + 2^-12,
// code F32 [256] (code[5] = 1 + 2^-12, all else 0), 256, False,
// torch.float32, None, None].
const std::uint32_t kOnePlus12 = 0x3F800800;  // 1 + 2^-12
Bits Code256(const std::map<int, std::uint32_t>& entries) {
  Bits code(256, 0);
  for (const auto& [index, bits] : entries) code[index] = bits;
  return code;
}
std::vector<Item> State2() {
  return {F32({kOnePlus12}, {1}), F32(Code256({{5, kOnePlus12}}), {256}), Int(256), Bool(false),
          Dtype("float32"), None(), None()};
}

// The nested 6-item list: [absmax U8 [1] = code 5, Size([2]), float32, 64,
// [offset, state2], 'nf4'] with W "w" = U8 [1] F0 (codes 15, 0). Records
// with a tensor offset: 0 = w, 1 = absmax, 2 = offset, 3 = absmax2, 4 = code.
std::vector<Item> Nested6(const Item& offset, const std::vector<Item>& state2 = State2()) {
  return {U8({5}, {1}), Size({2}), Dtype("float32"), Int(64), List({offset, List(state2)}),
          Str("nf4")};
}

Built NestedFile(const std::vector<Item>& state) {
  return Build({{"w", U8({0xF0}, {1})}, {"w.quant_state", List(state)}});
}

// ===========================================================================
// Decoding list-layout layers (docs/pt.md 7.3, docs/bnb.md "Decoding").

// Codes 15, 0, 7, 10 of PackedW times absmax 2.0 (exact, the exponent goes up
// by one): NF4 1.0 -> 2.0, -1.0 -> -2.0, 0.0 -> 0.0, 0x3e7c04dd -> 0x3efc04dd.
// The stored quant_map is the NF4 table: no BNB-106.
TEST(BnbPtList, FlatSevenItemsWithTheTableDecodes) {
  const qd::Outcome o = Read(FlatFile(Flat7()));
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  EXPECT_EQ(DecodedNames(o), (std::vector<std::string>{"w"}));
  ExpectValues(o, "w", {4}, {0x40000000, 0xC0000000, 0x00000000, 0x3efc04dd});
}

// The 6-item list (no datatype), FP4, shape as a list of ints, dtype
// float16, as a tuple. W "m.w" = 8B 1F: codes 8, 11, 1, 15; absmax 4.0:
//   code 8  +0.0 (bnb's Python table)  -> +0.0            0x00000000
//   code 11 -1.0                        -> -4.0            0xC0800000
//   code 1  0x3baaaaab                  -> 0x3caaaaab; to float16: exponent
//           2^-6 (normal), mantissa 0x2aaaab keeps 0x155, rest 0x0aab <
//           0x1000 rounds down: 0x3caaa000
//   code 15 -0.25                       -> -1.0            0xBF800000
// Beside it a loose F32 "bias" and a table tensor "m.w.absmax" that the list
// layer does not consult (7.3): both are output, sorted by name with "m.w".
TEST(BnbPtList, FlatSixItemsWithoutTheTableFp4Float16) {
  const std::vector<Item> state = {F32({0x40800000}, {1}), List({Int(2), Int(2)}),
                                   Dtype("float16"),       Int(64),
                                   None(),                 Str("fp4")};
  const Built file = Build({{"m.w", U8({0x8B, 0x1F}, {2})},
                            {"m.w.quant_state", Tuple(state)},
                            {"m.w.absmax", F32({0x3F000000}, {1})},
                            {"bias", F32({0x3F800000}, {1})}});
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  EXPECT_EQ(DecodedNames(o), (std::vector<std::string>{"bias", "m.w", "m.w.absmax"}));
  ExpectValues(o, "m.w", {2, 2}, {0x00000000, 0xC0800000, 0x3caaa000, 0xBF800000});
  ExpectValues(o, "bias", {1}, {0x3F800000});
  ExpectValues(o, "m.w.absmax", {1}, {0x3F000000});
}

// Nested, offset a 0-d F32 tensor of -1.0. absmax_eff[0] =
// fl(fl(code[5] * absmax2[0]) + offset): (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24
// exactly; 2^-24 is half an ulp of 1 + 2^-11 (even), so fl gives 1 + 2^-11;
// minus 1.0 is 2^-11 (0x3A000000). (A fused multiply-add would keep the
// 2^-24: 0x3A000400.) Codes 15, 0: +-2^-11.
TEST(BnbPtList, NestedOffsetAsZeroDimTensor) {
  const qd::Outcome o = Read(NestedFile(Nested6(F32({0xBF800000}, {}))));
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  ExpectValues(o, "w", {2}, {0x3A000000, 0xBA000000});
}

// Nested, offset a Python float 1 + 2^-24 (exact in binary64). Rounded to
// binary32 it is a tie between 1.0 (even) and 1 + 2^-23: 1.0. With absmax
// code 0 and code[0] = 0 the absmax is 0 * 1 + 1.0 = 1.0, so codes 15, 0
// give 1.0, -1.0 (rounding up would give 0x3F800001).
TEST(BnbPtList, NestedOffsetAsPythonFloatIsRoundedToBinary32) {
  const std::vector<Item> state = {U8({0}, {1}), Size({2}), Dtype("float32"), Int(64),
                                   List({Float(1.0 + std::ldexp(1.0, -24)), List(State2())}),
                                   Str("nf4")};
  const qd::Outcome o = Read(NestedFile(state));
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  ExpectValues(o, "w", {2}, {0x3F800000, 0xBF800000});
}

// The offset as an F64 tensor of shape [1] (numel 1) holding 1 + 2^-24: 6.3's
// conversion rounds it to even, 1.0, as above. The offset as an F16 0-d
// tensor -1.0 (0xBC00) widens exactly: as NestedOffsetAsZeroDimTensor.
TEST(BnbPtList, NestedOffsetAsF64AndF16Tensors) {
  const qd::Outcome a = Read(NestedFile(
      {U8({0}, {1}), Size({2}), Dtype("float32"), Int(64),
       List({Tensor("DoubleStorage", F64Bytes(1.0 + std::ldexp(1.0, -24)), {1}), List(State2())}),
       Str("nf4")}));
  ASSERT_FALSE(a.refused) << Describe(a);
  ExpectValues(a, "w", {2}, {0x3F800000, 0xBF800000});
  Bytes half;
  Put16(&half, 0xBC00);
  const qd::Outcome b = Read(NestedFile(Nested6(Tensor("HalfStorage", half, {}))));
  ASSERT_FALSE(b.refused) << Describe(b);
  ExpectValues(b, "w", {2}, {0x3A000000, 0xBA000000});
}

// W as a non-contiguous view: storage U8 [F0, 7A, 8F, 00], size [2, 2],
// stride [1, 2]: element (i, j) is storage byte i + 2 j, so the C-order
// bytes are F0, 8F, 7A, 00 (docs/pt.md 5.3), codes 15, 0, 8, 15, 7, 10, 0, 0.
// Shape [8], absmax 1.0: NF4 1.0, -1.0, 0x3da2faff, 1.0, 0.0, 0x3e7c04dd,
// -1.0, -1.0. (Storage order would start 1.0, -1.0, 0.0, 0x3e7c04dd.)
TEST(BnbPtList, NonContiguousWeightIsReadInCOrder) {
  const Built file = Build(
      {{"w", View("ByteStorage", {0xF0, 0x7A, 0x8F, 0x00}, 0, {2, 2}, {1, 2})},
       {"w.quant_state", List({F32({0x3F800000}, {1}), Size({8}), Dtype("float32"), Int(64),
                               None(), Str("nf4")})}});
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused) << Describe(o);
  ExpectValues(o, "w", {8},
               {0x3f800000, 0xbf800000, 0x3da2faff, 0x3f800000, 0x00000000, 0x3e7c04dd,
                0xbf800000, 0xbf800000});
}

// ===========================================================================
// docs/bnb.md's tensor layouts in a .pt file (6.4).

// HF 4-bit: w (U8 [1, 2]), w.absmax, w.quant_map, w.quant_state.bitsandbytes__nf4
// (U8 JSON text). PackedW's codes times 2.0 as above: 2.0, -2.0, 0.0,
// 0x3efc04dd for shape [2, 2] in row-major order; W's first dimension is 1
// and the shape has rank 2, so bnb's compatibility transpose gives shape
// [2, 2] with (r, c) <- (c, r): 2.0, 0.0, -2.0, 0x3efc04dd.
TEST(BnbPtTable, HfFourBitLayerInAPtFile) {
  const std::string json =
      "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [2, 2]}";
  const Built file = Build({{"w", U8({0xF0, 0x7A}, {1, 2})},
                            {"w.absmax", F32({0x40000000}, {1})},
                            {"w.quant_map", F32(kNf4, {16})},
                            {"w.quant_state.bitsandbytes__nf4",
                             U8(Text(json), {static_cast<std::int64_t>(json.size())})}});
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  EXPECT_EQ(DecodedNames(o), (std::vector<std::string>{"w"}));
  ExpectValues(o, "w", {2, 2}, {0x40000000, 0x00000000, 0xC0000000, 0x3efc04dd});
}

// The JSON text as a view at storage offset 3 of a U8 storage "xyz{bad":
// byte 0 of its C-order bytes is ds + 3 * 1 + 0 = begin (6.4), where the
// BNB-101 finding about the text points.
TEST(BnbPtTable, HfStateJsonFindingPointsAtTheViewsFirstByte) {
  const Bytes text = Text("xyz{bad");
  const Built file =
      Build({{"w", U8({0xF0, 0x7A}, {2})},
             {"w.absmax", F32({0x40000000}, {1})},
             {"w.quant_state.bitsandbytes__nf4", View("ByteStorage", text, 3, {4}, {1})}});
  // Records: 0 = w, 1 = w.absmax, 2 = the text.
  ExpectError(file, "BNB-101", "w.quant_state.bitsandbytes__nf4", "quant_state", file.ds[2] + 3);
}

// GPT-QModel 4-bit names: m.weight, m.weight_absmax, m.weight_quant_state.
TEST(BnbPtTable, GptqModelFourBitLayerInAPtFile) {
  const std::string json =
      "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [4]}";
  const Built file = Build({{"m.weight", PackedW()},
                            {"m.weight_absmax", F32({0x40000000}, {1})},
                            {"m.weight_quant_state",
                             U8(Text(json), {static_cast<std::int64_t>(json.size())})}});
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused) << Describe(o);
  ExpectValues(o, "m.weight", {4}, {0x40000000, 0xC0000000, 0x00000000, 0x3efc04dd});
}

// int8 Linear8bitLt: l.weight I8 [[127, -127], [1, 0]], l.SCB F32 [1.0, 2.0],
// l.weight_format U8 0-d = 0. out = fl(fl(q * SCB[r]) * 0x3c010204), where
// 0x3c010204 = 0x810204 * 2^-30 and 127 * 0x810204 = 2^30 - 4:
//   127 * 1.0 = 127 -> (2^30 - 4) * 2^-30 = 1 - 2^-28, nearest binary32 1.0
//   -127 -> -1.0;  1 * 2.0 = 2.0 -> 0x3c810204 exactly;  0 -> 0.0.
TEST(BnbPtTable, Int8Linear8bitLtInAPtFile) {
  const Built file = Build({{"l.weight", Tensor("CharStorage", {127, 0x81, 1, 0}, {2, 2})},
                            {"l.SCB", F32({0x3F800000, 0x40000000}, {2})},
                            {"l.weight_format", U8({0}, {})}});
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  EXPECT_EQ(DecodedNames(o), (std::vector<std::string>{"l.weight"}));
  ExpectValues(o, "l.weight", {2, 2}, {0x3F800000, 0xBF800000, 0x3c810204, 0x00000000});
}

// BNB-108 on weight_format's value and BNB-104 on a scale: the value
// offsets map through the views (6.4). weight_format: a 0-d view at offset
// 2 of U8 [0, 0, 1] (record 2) -> ds + 2. SCB: [1.0, inf] (record 1), row 1
// -> ds + 4, element 1.
TEST(BnbPtTable, Int8ValueFindingsUseElementOffsets) {
  const Built format = Build({{"l.weight", Tensor("CharStorage", {1, 2, 3, 4}, {2, 2})},
                              {"l.SCB", F32({0x3F800000, 0x3F800000}, {2})},
                              {"l.weight_format", View("ByteStorage", {0, 0, 1}, 2, {}, {})}});
  ExpectError(format, "BNB-108", "l.weight_format", "weight_format", format.ds[2] + 2);
  const Built scale = Build({{"l.weight", Tensor("CharStorage", {1, 2, 3, 4}, {2, 2})},
                             {"l.SCB", F32({0x3F800000, kInf}, {2})}});
  ExpectError(scale, "BNB-104", "l.SCB", "SCB", scale.ds[1] + 4, -1, 1);
}

// ===========================================================================
// Files that are not bitsandbytes files.

// No layer: section 6.3's output, in (begin, end, name) order: "z" (record
// 0) before "a" (record 1), not by name. A table tensor pair like
// bnb_like_mixed.pt's (w.weight U8 and w.weight.absmax, no state) and
// W.quant_state values that are no list (a str), or a list under the empty
// W (".quant_state"), make no layer.
TEST(BnbPtTable, NoLayerDecodesAsSection63) {
  const Built file =
      Build({{"z", F32({0x3F800000}, {1})},
             {"a", F32({0x40000000}, {1})},
             {"w.weight", U8({0x12}, {1})},
             {"w.weight.absmax", F32({0x40400000}, {1})},
             {"w.weight.quant_state", Str("nf4")},
             {".quant_state", List(Flat7())}});
  std::vector<PtValueEntry> values;
  const qd::Outcome o = Read(file, nullptr, &values);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  EXPECT_EQ(DecodedNames(o), (std::vector<std::string>{"z", "a", "w.weight.absmax"}));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].text, "'nf4'");
}

// ===========================================================================
// docs/pt.md 7.4, step by step. Header-level findings point at kPkl.

// Step 1, BNB-105: the list and a state tensor name the same W (HF,
// GPT-QModel, int8 SCB, int8 weight_scb), field quant_state, tensor W.
TEST(BnbPtListRejects, Step1TwoStatesAreBNB105) {
  const std::string json =
      "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [4]}";
  const Item json_tensor = U8(Text(json), {static_cast<std::int64_t>(json.size())});
  ExpectError(Build({{"w", PackedW()},
                     {"w.absmax", F32({0x40000000}, {1})},
                     {"w.quant_state", List(Flat7())},
                     {"w.quant_state.bitsandbytes__nf4", json_tensor}}),
              "BNB-105", "w", "quant_state", kPkl);
  ExpectError(Build({{"m.weight", PackedW()},
                     {"m.weight.quant_state", List(Flat7())},
                     {"m.weight_absmax", F32({0x40000000}, {1})},
                     {"m.weight_quant_state", json_tensor}}),
              "BNB-105", "m.weight", "quant_state", kPkl);
  ExpectError(Build({{"m.weight", PackedW()},
                     {"m.weight.quant_state", List(Flat7())},
                     {"m.SCB", F32({0x3F800000}, {1})}}),
              "BNB-105", "m.weight", "quant_state", kPkl);
  ExpectError(Build({{"m.weight", PackedW()},
                     {"m.weight.quant_state", List(Flat7())},
                     {"m.weight_scb", F32({0x3F800000}, {1})}}),
              "BNB-105", "m.weight", "quant_state", kPkl);
}

// Step 1, BNB-105: no tensor table entry W (absent, or a value), checked
// before the list's own shape (a 5-item list).
TEST(BnbPtListRejects, Step1MissingWeightIsBNB105) {
  ExpectError(Build({{"w.quant_state", List(Flat7())}}), "BNB-105", "w", "quant_state", kPkl);
  ExpectError(Build({{"w", Int(3)}, {"w.quant_state", List(Flat7())}}), "BNB-105", "w",
              "quant_state", kPkl);
  std::vector<Item> five = Flat7();
  five.resize(5);
  ExpectError(Build({{"w.quant_state", List(five)}}), "BNB-105", "w", "quant_state", kPkl);
}

// Step 2a, BNB-101 (field quant_state): every item of the outer list.
TEST(BnbPtListRejects, Step2aOuterItemsAreBNB101) {
  const auto expect = [](const std::vector<Item>& state) {
    ExpectError(FlatFile(state), "BNB-101", "w.quant_state", "quant_state", kPkl);
  };
  std::vector<Item> five = Flat7();
  five.resize(5);
  expect(five);                                                       // 5 items
  std::vector<Item> eight = Flat7();
  eight.push_back(None());
  expect(eight);                                                      // 8 items
  expect(With(Flat7(), 0, Int(1)));                                   // S[0] not a tensor
  expect(With(Flat7(), 1, Tuple({Int(4), Str("x")})));                // S[1] a str inside
  expect(With(Flat7(), 1, List({Bool(true), Int(4)})));               // a bool is not an int
  expect(With(Flat7(), 1, Size({-4})));                               // an int below 0
  expect(With(Flat7(), 1, Int(4)));                                   // not a sequence
  expect(With(Flat7(), 2, Str("float32")));                           // S[2] not a dtype token
  expect(With(Flat7(), 3, Bool(true)));                               // S[3] a bool
  expect(With(Flat7(), 3, Int(-64)));                                 // S[3] below 0
  expect(With(Flat7(), 3, Float(64.0)));                              // S[3] a float
  expect(With(Flat7(), 4, List({Float(0.5), List(State2()), None()})));  // S[4] of 3 items
  expect(With(Flat7(), 4, Int(0)));                                   // S[4] an int
  expect(With(Flat7(), 5, Int(4)));                                   // S[5] not a str
  expect(With(Flat7(), 5, Dtype("float32")));
  expect(With(Flat7(), 6, None()));                                   // S[6] not a tensor
  // The 7 items as a tuple are accepted (7.2: a list or tuple).
  const qd::Outcome ok = Read(Build({{"w", PackedW()}, {"w.quant_state", Tuple(Flat7())}}));
  EXPECT_FALSE(ok.refused) << Describe(ok);
}

// Step 2b, BNB-101 (field nested_offset, tensor w.quant_state): the offset's
// kind at kPkl; a non-finite binary32 value of an offset tensor at its
// element offset (records 0 = w, 1 = absmax, 2 = the offset tensor).
TEST(BnbPtListRejects, Step2bNestedOffsetIsBNB101) {
  const auto at_header = [](const Item& offset) {
    ExpectError(NestedFile(Nested6(offset)), "BNB-101", "w.quant_state", "nested_offset", kPkl);
  };
  at_header(Str("x"));
  at_header(Int(1));      // an int is not a float
  at_header(Bool(true));
  at_header(None());
  at_header(F32({0xBF800000, 0xBF800000}, {2}));  // numel 2
  at_header(F32({}, {0}));                        // numel 0
  at_header(Tensor("IntStorage", {1, 0, 0, 0}, {}));  // not floating
  at_header(Float(1e300));   // finite binary64, infinite in binary32
  at_header(Float(std::numeric_limits<double>::infinity()));
  at_header(Float(std::numeric_limits<double>::quiet_NaN()));

  // F32 NaN as a 0-d view at offset 3 of [1, 2, 3, NaN]: ds + 3 * 4.
  const Built nan = NestedFile(
      Nested6(View("FloatStorage", F32Bytes({0x3F800000, 0x40000000, 0x40400000, kNaN}), 3, {},
                   {})));
  ExpectError(nan, "BNB-101", "w.quant_state", "nested_offset", nan.ds[2] + 12);
  // F64 1e300 rounds to infinity in binary32: at the tensor's first byte.
  const Built big = NestedFile(Nested6(Tensor("DoubleStorage", F64Bytes(1e300), {1})));
  ExpectError(big, "BNB-101", "w.quant_state", "nested_offset", big.ds[2]);
  // F16 infinity (0x7C00).
  Bytes half;
  Put16(&half, 0x7C00);
  const Built inf = NestedFile(Nested6(Tensor("HalfStorage", half, {})));
  ExpectError(inf, "BNB-101", "w.quant_state", "nested_offset", inf.ds[2]);
}

// Step 2c, BNB-101 (field quant_state): state2's form.
TEST(BnbPtListRejects, Step2cState2IsBNB101) {
  const auto expect = [](const Item& state2) {
    std::vector<Item> state = Nested6(Float(-1.0));
    state[4] = List({Float(-1.0), state2});
    ExpectError(NestedFile(state), "BNB-101", "w.quant_state", "quant_state", kPkl);
  };
  expect(None());
  expect(Int(7));
  std::vector<Item> five = State2();
  five.resize(5);
  expect(List(five));
  std::vector<Item> eight = State2();
  eight.push_back(None());
  expect(List(eight));
  expect(List(With(State2(), 0, Int(1))));              // absmax2 not a tensor
  expect(List(With(State2(), 1, None())));              // code not a tensor
  expect(List(With(State2(), 2, Bool(true))));          // blocksize2 a bool
  expect(List(With(State2(), 2, Int(-256))));           // blocksize2 below 0
  expect(List(With(State2(), 3, Int(0))));              // nested2 an int, not a bool
  expect(List(With(State2(), 4, Str("float32"))));      // dtype2 not a dtype token
  // The same state2 as a tuple is accepted.
  std::vector<Item> ok_state = Nested6(Float(-1.0));
  ok_state[4] = List({Float(-1.0), Tuple(State2())});
  const qd::Outcome ok = Read(NestedFile(ok_state));
  EXPECT_FALSE(ok.refused) << Describe(ok);
}

// Steps 3, 5, 6: BNB-001 quant_type, BNB-001 blocksize, BNB-103 dtype, all
// tensor w.quant_state at kPkl; the first failing step is reported.
TEST(BnbPtListRejects, Steps3To6QuantTypeBlocksizeDtype) {
  ExpectError(FlatFile(With(Flat7(), 5, Str("nf5"))), "BNB-001", "w.quant_state", "quant_type",
              kPkl);
  ExpectError(FlatFile(With(Flat7(), 5, Str("NF4"))), "BNB-001", "w.quant_state", "quant_type",
              kPkl);
  for (const std::int64_t blocksize : {0, 16, 48, 96, 8192}) {
    SCOPED_TRACE(blocksize);
    ExpectError(FlatFile(With(Flat7(), 3, Int(blocksize))), "BNB-001", "w.quant_state",
                "blocksize", kPkl);
  }
  ExpectError(FlatFile(With(Flat7(), 2, Dtype("float64"))), "BNB-103", "w.quant_state", "dtype",
              kPkl);
  ExpectError(FlatFile(With(Flat7(), 2, Dtype("int8"))), "BNB-103", "w.quant_state", "dtype",
              kPkl);
  // quant_type before blocksize before dtype.
  std::vector<Item> all = With(With(With(Flat7(), 5, Str("x")), 3, Int(48)), 2, Dtype("int8"));
  ExpectError(FlatFile(all), "BNB-001", "w.quant_state", "quant_type", kPkl);
  ExpectError(FlatFile(With(With(Flat7(), 3, Int(48)), 2, Dtype("int8"))), "BNB-001",
              "w.quant_state", "blocksize", kPkl);
  // The blocksizes 32 and 4096 are fine (n = 4: one block either way).
  EXPECT_FALSE(Read(FlatFile(With(Flat7(), 3, Int(32)))).refused);
  EXPECT_FALSE(Read(FlatFile(With(Flat7(), 3, Int(4096)))).refused);
}

// Step 7, BNB-004 (tensor w.quant_state, kPkl), in its order: the 6-item
// state2 (nested_quant_map); nested2 True, offset2 or state2b not None
// (nested_blocksize); blocksize2 (nested_blocksize); dtype2 (nested_dtype).
TEST(BnbPtListRejects, Step7NestedStateIsBNB004) {
  const auto expect = [](const std::vector<Item>& state2, const char* field) {
    ExpectError(NestedFile(Nested6(F32({0xBF800000}, {}), state2)), "BNB-004", "w.quant_state",
                field, kPkl);
  };
  // The docstring's state2 [absmax, input_shape, dtype, blocksize, None, quant_type].
  expect({F32({kOnePlus12}, {1}), Size({1}), Dtype("float32"), Int(256), None(), Str("nf4")},
         "nested_quant_map");
  expect(With(State2(), 3, Bool(true)), "nested_blocksize");
  expect(With(State2(), 5, Float(0.5)), "nested_blocksize");
  expect(With(State2(), 6, List({})), "nested_blocksize");
  expect(With(State2(), 2, Int(100)), "nested_blocksize");
  expect(With(State2(), 2, Int(16)), "nested_blocksize");
  expect(With(State2(), 2, Int(8192)), "nested_blocksize");
  expect(With(State2(), 4, Dtype("float16")), "nested_dtype");
  expect(With(With(State2(), 2, Int(100)), 4, Dtype("float16")), "nested_blocksize");
}

// Step 8, BNB-002 (tensor w, field weight, kPkl): W's byte length is not
// ceil(n / 2): shapes [5] and [6] need 3 bytes, W has 2; [2^62, 8]
// overflows 64 bits.
// W may be any dtype: an F32 [1] W holds 4 bytes for shape [8].
TEST(BnbPtListRejects, Step8PackedWeightLengthIsBNB002) {
  ExpectError(FlatFile(With(Flat7(), 1, Size({5}))), "BNB-002", "w", "weight", kPkl);
  ExpectError(FlatFile(With(Flat7(), 1, Size({std::int64_t{1} << 62, 8}))), "BNB-002", "w",
              "weight", kPkl);
  ExpectError(FlatFile(With(Flat7(), 1, Size({6}))), "BNB-002", "w", "weight", kPkl);
  // F32 bits 0x008F7AF0: bytes F0 7A 8F 00, codes 15, 0, 7, 10, 8, 15, 0, 0;
  // absmax 2.0: 2.0, -2.0, 0.0, 0x3efc04dd, 0x3e22faff, 2.0, -2.0, -2.0.
  const qd::Outcome o = Read(Build(
      {{"w", F32({0x008F7AF0}, {1})}, {"w.quant_state", List(With(Flat7(), 1, Size({8})))}}));
  ASSERT_FALSE(o.refused) << Describe(o);
  ExpectValues(o, "w", {8},
               {0x40000000, 0xC0000000, 0x00000000, 0x3efc04dd, 0x3e22faff, 0x40000000,
                0xC0000000, 0xC0000000});
}

// Steps 9 and 10 (tensor w.quant_state[0], field absmax, kPkl): BNB-102
// absmax not F32 (flat) / U8 (nested); BNB-001 not ceil(n / blocksize)
// elements.
TEST(BnbPtListRejects, Steps9And10AbsmaxIsBNB102ThenBNB001) {
  ExpectError(FlatFile(With(Flat7(), 0, U8({2}, {1}))), "BNB-102", "w.quant_state[0]", "absmax",
              kPkl);
  ExpectError(NestedFile(With(Nested6(Float(-1.0)), 0, F32({0x3F800000}, {1}))), "BNB-102",
              "w.quant_state[0]", "absmax", kPkl);
  ExpectError(FlatFile(With(Flat7(), 0, F32({0x40000000, 0x40000000}, {2}))), "BNB-001",
              "w.quant_state[0]", "absmax", kPkl);
  ExpectError(FlatFile(With(Flat7(), 0, F32({}, {0}))), "BNB-001", "w.quant_state[0]", "absmax",
              kPkl);
  ExpectError(NestedFile(With(Nested6(Float(-1.0)), 0, U8({5, 5}, {2}))), "BNB-001",
              "w.quant_state[0]", "absmax", kPkl);
}

// Step 11, BNB-004: nested_absmax (w.quant_state[4][1][0]) not F32 with
// ceil(nblocks / nested_blocksize) = ceil(1 / 256) = 1 element; code
// (w.quant_state[4][1][1]) not F32 with 256.
TEST(BnbPtListRejects, Step11NestedTensorsAreBNB004) {
  const auto expect = [](const std::vector<Item>& state2, const char* tensor, const char* field) {
    ExpectError(NestedFile(Nested6(Float(-1.0), state2)), "BNB-004", tensor, field, kPkl);
  };
  expect(With(State2(), 0, F32({kOnePlus12, kOnePlus12}, {2})), "w.quant_state[4][1][0]",
         "nested_absmax");
  Bytes half;
  Put16(&half, 0x3C00);
  expect(With(State2(), 0, Tensor("HalfStorage", half, {1})), "w.quant_state[4][1][0]",
         "nested_absmax");
  Bits code255(255, 0);
  expect(With(State2(), 1, F32(code255, {255})), "w.quant_state[4][1][1]", "nested_quant_map");
  Bytes code_f64;
  for (int i = 0; i < 256; ++i) Put64(&code_f64, 0);
  expect(With(State2(), 1, Tensor("DoubleStorage", code_f64, {256})), "w.quant_state[4][1][1]",
         "nested_quant_map");
}

// Step 12, BNB-102 (tensor w.quant_state[6], field quant_map, kPkl): S[6]
// not F32 with 16 elements.
TEST(BnbPtListRejects, Step12QuantMapIsBNB102) {
  Bits fifteen(kNf4.begin(), kNf4.end() - 1);
  ExpectError(FlatFile(With(Flat7(), 6, F32(fifteen, {15}))), "BNB-102", "w.quant_state[6]",
              "quant_map", kPkl);
  Bytes half(32, 0);
  ExpectError(FlatFile(With(Flat7(), 6, Tensor("HalfStorage", half, {16}))), "BNB-102",
              "w.quant_state[6]", "quant_map", kPkl);
}

// Step 13, BNB-104 at the element offset (6.4).
// Flat: n = 128 (W 64 bytes), blocksize 64, 2 blocks. absmax a view offset
// 1, size [2], stride [2] of [9, 1.0, NaN, inf, 9] (record 1): C-order
// element 1 is storage element 1 + 2 = 3 (inf) -> ds + 12, block 1; the NaN
// at storage element 2 is not part of the view.
TEST(BnbPtListRejects, Step13FlatAbsmaxNonFiniteIsBNB104AtItsElementOffset) {
  const Item absmax = View("FloatStorage",
                           F32Bytes({0x41100000, 0x3F800000, kNaN, kInf, 0x41100000}), 1, {2}, {2});
  const std::vector<Item> state = With(With(Flat7(), 1, Size({128})), 0, absmax);
  const Built file = Build({{"w", U8(Bytes(64, 0x77), {64})}, {"w.quant_state", List(state)}});
  ExpectError(file, "BNB-104", "w.quant_state[0]", "absmax", file.ds[1] + 12, 1, -1);
}

// Nested, storage order: code and absmax2 are views of one F32 storage of
// 257 values (record 2 with a float offset: 0 = w, 1 = absmax codes):
// code = elements 0..255, absmax2 = element 256. absmax2 (NaN) comes first
// in the list but code starts first in the file, so code's inf at 7 is the
// finding: element 7, ds + 28. With code's values all finite, absmax2's NaN
// is reported: block 0 at ds + 256 * 4.
TEST(BnbPtListRejects, Step13NestedStatisticsInStorageOrder) {
  const auto file_with = [](std::uint32_t code7) {
    Bits values(257, 0);
    values[5] = kOnePlus12;
    values[7] = code7;
    values[256] = kNaN;
    auto storage = std::make_shared<SharedStorage>();
    storage->cls = "FloatStorage";
    storage->data = F32Bytes(values);
    std::vector<Item> state2 = State2();
    state2[0] = ViewOf(storage, 256, {1}, {1});
    state2[1] = ViewOf(storage, 0, {256}, {1});
    return NestedFile(Nested6(Float(-1.0), state2));
  };
  const Built a = file_with(kInf);
  ExpectError(a, "BNB-104", "w.quant_state[4][1][1]", "nested_quant_map", a.ds[2] + 28, -1, 7);
  const Built b = file_with(0);
  ExpectError(b, "BNB-104", "w.quant_state[4][1][0]", "nested_absmax", b.ds[2] + 1024, 0, -1);
}

// Step 14, BNB-106 (warning, tensor w.quant_state[6], field quant_map): the
// NF4 table with code 9 one ulp off (0x3e24cae4); the finding names the first
// differing value, element 9 at ds(record 2) + 36. The file is accepted and
// decodes with the table as in FlatSevenItemsWithTheTableDecodes.
TEST(BnbPtListRejects, Step14StrayQuantMapIsAWarning) {
  Bits map = kNf4;
  map[9] = 0x3e24cae4;
  const Built file = FlatFile(With(Flat7(), 6, F32(map, {16})));
  const qd::Outcome o = Read(file);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 1u) << Describe(o);
  ExpectFinding(o.findings[0], "BNB-106", qd::Severity::kWarning, "w.quant_state[6]", "quant_map",
                file.ds[2] + 36, -1, 9);
  ExpectValues(o, "w", {4}, {0x40000000, 0xC0000000, 0x00000000, 0x3efc04dd});
}

// Findings order (docs/pt.md 8): the PT warnings (PT-104, version 4), then
// the layers in name order of W, list or not: "a" (HF, a stray quant_map:
// BNB-106 at code 0, NF4 -1.0 vs 0.0 stored) before "b" (list, quant_type
// "nf5": BNB-001), which ends the read.
TEST(BnbPtList, WarningsThenLayersInNameOrder) {
  const std::string json =
      "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [4]}";
  Bits stray = kNf4;
  stray[0] = 0;
  const Built file = Build({{"b", PackedW()},
                            {"b.quant_state", List(With(Flat7(), 5, Str("nf5")))},
                            {"a", PackedW()},
                            {"a.absmax", F32({0x40000000}, {1})},
                            {"a.quant_map", F32(stray, {16})},
                            {"a.quant_state.bitsandbytes__nf4",
                             U8(Text(json), {static_cast<std::int64_t>(json.size())})}},
                           "4\n");
  const qd::Outcome o = Read(file);
  ASSERT_TRUE(o.refused);
  ASSERT_EQ(o.findings.size(), 3u) << Describe(o);
  EXPECT_EQ(o.findings[0].rule, "PT-104");
  EXPECT_EQ(o.findings[0].severity, qd::Severity::kWarning);
  // Records in pickle order: 0 = b, 1 = b's absmax, 2 = b's map, 3 = a,
  // 4 = a.absmax, 5 = a.quant_map, 6 = a's state.
  ExpectFinding(o.findings[1], "BNB-106", qd::Severity::kWarning, "a.quant_map", "quant_map",
                file.ds[5], -1, 0);
  ExpectFinding(o.findings[2], "BNB-001", qd::Severity::kError, "b.quant_state", "quant_type", kPkl,
                -1, -1);
  EXPECT_TRUE(o.tensors.empty());
}

// ===========================================================================
// Bounded memory and robustness.

// Tensors inside a value are not bounded by docs/pt.md section 3: a
// broadcast view of one F32 with size [2^40] stride [0] describes 4 TiB.
// Its element count fails a check (BNB-001 absmax, 2^40 != 1 block; the
// offset's numel != 1; quant_map's 16) before any byte is materialised.
TEST(BnbPtListRejects, HugeBroadcastPiecesAreNeverMaterialised) {
  const std::int64_t huge = std::int64_t{1} << 40;
  const Item broadcast = View("FloatStorage", F32Bytes({0x3F800000}), 0, {huge}, {0});
  ExpectError(FlatFile(With(Flat7(), 0, broadcast)), "BNB-001", "w.quant_state[0]", "absmax",
              kPkl);
  ExpectError(FlatFile(With(Flat7(), 6, broadcast)), "BNB-102", "w.quant_state[6]", "quant_map",
              kPkl);
  ExpectError(NestedFile(Nested6(broadcast)), "BNB-101", "w.quant_state", "nested_offset", kPkl);
  ExpectError(NestedFile(Nested6(Float(-1.0), With(State2(), 1, broadcast))), "BNB-004",
              "w.quant_state[4][1][1]", "nested_quant_map", kPkl);
}

// Every truncation of a nested list-layer file is refused and every single
// byte flip gives a verdict; nothing crashes (run under ASan + UBSan too).
TEST(BnbPtList, TruncationsAndByteFlipsNeverCrash) {
  const Built good = NestedFile(Nested6(F32({0xBF800000}, {})));
  ASSERT_FALSE(Read(good).refused);
  for (std::size_t n = 0; n < good.bytes.size(); ++n) {
    Built cut;
    cut.bytes.assign(good.bytes.begin(), good.bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_TRUE(Read(cut).refused) << n;
  }
  for (std::size_t i = 0; i < good.bytes.size(); ++i) {
    Built flipped = good;
    flipped.bytes[i] ^= 0xFF;
    const qd::Outcome o = Read(flipped);
    EXPECT_EQ(o.refused, !o.findings.empty() &&
                             o.findings.back().severity == qd::Severity::kError);
  }
}

// ===========================================================================
// The structured value graph (pt.h).

// BINPUT / BINGET of memo slot 9 after / instead of a value.
Item ThenMemo(const Item& item) {
  return [=](Writer& w) {
    item(w);
    w.p.op(0x71).op(9);
  };
}
Item Memo9() {
  return [](Writer& w) { w.p.op(0x68).op(9); };
}

// {"w": tensor, "state": [absmax view, Size([4]), float32, 64, None, 'nf4',
// 0.5, True], "s": the same list through the memo}. "state" is no W.quant_state,
// so the file has no layer and is accepted. The list is one node reached
// from both entries; kinds and the tensor layout are as built; PtByteOffset
// and PtTensorCOrderBytes follow 5.3 / 6.4. Records: 0 = w, 1 = the F32
// storage [1, 2, 3, 4] of the view (offset 1, size [2], stride [2]:
// elements 1 and 3, i.e. 2.0 and 4.0).
TEST(PtValueGraph, KindsSharingAndTensorLayout) {
  const Built file = Build(
      {{"w", PackedW()},
       {"state", ThenMemo(List({View("FloatStorage",
                                     F32Bytes({0x3F800000, 0x40000000, 0x40400000, 0x40800000}),
                                     1, {2}, {2}),
                                Size({4}), Dtype("float32"), Int(64), None(), Str("nf4"),
                                Float(0.5), Bool(true)}))},
       {"s", Memo9()}});
  std::vector<PtTensorBytes> tensors;
  std::vector<PtValueEntry> values;
  PtValueGraph graph;
  const qd::Outcome o = Read(file, &tensors, &values, &graph);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].text,
            "[tensor(F32, [2]), torch.Size([4]), float32, 64, None, 'nf4', 0.5, True]");
  ASSERT_EQ(graph.entries.size(), 2u);
  EXPECT_EQ(graph.entries[0].name, "state");
  EXPECT_EQ(graph.entries[1].name, "s");
  EXPECT_EQ(graph.entries[0].node, graph.entries[1].node);  // one shared list
  const PtValueNode& list = graph.nodes[graph.entries[0].node];
  ASSERT_EQ(list.kind, PtValueKind::kList);
  ASSERT_EQ(list.items.size(), 8u);
  const auto n = [&graph, &list](std::size_t i) -> const PtValueNode& {
    return graph.nodes[list.items[i]];
  };
  const std::uint64_t ds1 = static_cast<std::uint64_t>(file.ds[1]);
  EXPECT_EQ(n(0).kind, PtValueKind::kTensor);
  EXPECT_EQ(n(0).dtype, "F32");
  EXPECT_EQ(n(0).shape, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(n(0).layout.storage_start, ds1);
  EXPECT_EQ(n(0).layout.item_size, 4u);
  EXPECT_EQ(n(0).layout.storage_offset, 1u);
  EXPECT_EQ(n(0).layout.stride, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(n(0).layout.begin, ds1 + 4);       // ds + storage_offset * isz
  EXPECT_EQ(n(0).layout.end, ds1 + 4 + 8);     // begin + numel * isz
  EXPECT_FALSE(n(0).layout.big_endian);
  // Byte 5 of the C-order bytes: element 1 = storage element 1 + 2 = 3, byte 1.
  EXPECT_EQ(PtByteOffset(n(0).shape, n(0).layout, 5), ds1 + 13);
  EXPECT_EQ(PtByteOffset(n(0).shape, n(0).layout, 0), ds1 + 4);
  EXPECT_EQ(PtTensorCOrderBytes(qd::ByteView{file.bytes.data(), file.bytes.size()}, n(0).shape,
                                n(0).layout),
            F32Bytes({0x40000000, 0x40800000}));
  EXPECT_EQ(n(1).kind, PtValueKind::kSize);
  EXPECT_EQ(n(1).ints, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(n(2).kind, PtValueKind::kDtype);
  EXPECT_EQ(n(2).text, "float32");
  EXPECT_EQ(n(3).kind, PtValueKind::kInt);
  EXPECT_EQ(n(3).integer, 64);
  EXPECT_EQ(n(4).kind, PtValueKind::kNone);
  EXPECT_EQ(n(5).kind, PtValueKind::kStr);
  EXPECT_EQ(n(5).text, "nf4");
  EXPECT_EQ(n(6).kind, PtValueKind::kFloat);
  EXPECT_EQ(n(6).number, 0.5);
  EXPECT_EQ(n(7).kind, PtValueKind::kBool);
  EXPECT_EQ(n(7).integer, 1);
  // The table tensor carries its layout too: w is data/0, contiguous, 2 bytes.
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].layout.begin, static_cast<std::uint64_t>(file.ds[0]));
  EXPECT_EQ(tensors[0].layout.end, static_cast<std::uint64_t>(file.ds[0]) + 2);
  EXPECT_EQ(tensors[0].bytes, (Bytes{0xF0, 0x7A}));
}

// A PtTensorCOrderBytes layout whose last element lies past the file reads
// nothing.
TEST(PtValueGraph, StrayLayoutReadsNothing) {
  const Bytes bytes(16, 0);
  PtTensorLayout layout;
  layout.storage_start = 8;
  layout.item_size = 4;
  layout.stride = {1};
  EXPECT_EQ(PtTensorCOrderBytes(qd::ByteView{bytes.data(), bytes.size()}, {2}, layout).size(), 8u);
  EXPECT_TRUE(PtTensorCOrderBytes(qd::ByteView{bytes.data(), bytes.size()}, {3}, layout).empty());
  layout.stride = {std::uint64_t{1} << 62};
  EXPECT_TRUE(PtTensorCOrderBytes(qd::ByteView{bytes.data(), bytes.size()}, {5}, layout).empty());
}

}  // namespace
}  // namespace qd::oracle
