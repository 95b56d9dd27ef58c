// bnb_pt_oracle_test.cc: the oracle's bitsandbytes readers on a .pt tensor
// table (docs/pt.md 6.4, section 8 step 8) and the QuantState list layout
// (docs/pt.md section 7), through ReadPtFile. Also the structured value
// graph of oracles/pt.h. The list layout's refusals, step by step, are
// bnb_pt_rejects_oracle_test.cc.
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

#include "oracles/bnb_pt_oracle_test_files.h"
#include "oracles/bnb_test_tables.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "oracles/pt_test_support.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {
namespace {

using namespace bnb_pt_test;  // NOLINT(google-build-using-namespace): the files and checks of the tests

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
