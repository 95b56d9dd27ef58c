// bnb_pt_rejects_oracle_test.cc: the oracle refusing bitsandbytes QuantState
// list layers in a .pt file, one case per step of docs/pt.md 7.4 (BNB-105,
// BNB-101, BNB-001..004, BNB-102, BNB-104, warning BNB-106), and pieces
// too large to read refused before any byte is materialised. Header-level
// findings point at kPkl; the files' layout is the one bnb_pt_oracle_test.cc
// describes, every expected value worked out by hand beside its case.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/bnb_pt_oracle_test_files.h"
#include "oracles/pt.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {
namespace {

using namespace bnb_pt_test;  // NOLINT(google-build-using-namespace): the files and checks of the tests

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

// ===========================================================================
// Bounded memory.

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

}  // namespace
}  // namespace qd::oracle
