// bnb_oracle_test.cc: hand-computed tests of the oracle's bitsandbytes
// reader (ReadBnbFile) and reference 4-bit quantizer (QuantizeBnb4bit).
//
// Every expected value comes from docs/bnb.md, the table values of the peer
// TABLES.json (retyped below as bit patterns) or is worked out by hand in the
// comment next to it; none is a recorded output of the code under test.
// The 4-bit rejects, one per check, are bnb_rejects_oracle_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/bnb_oracle_test_files.h"
#include "oracles/bnb_test_tables.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {
namespace {

using namespace bnb_test;  // NOLINT(google-build-using-namespace): the files and checks of the tests

// ===========================================================================
// Decoding 4-bit layers.

// Bytes 0xF0 0x7A hold codes 15, 0 (byte 0: high, then low nibble), 7, 10.
// NF4 values 1.0, -1.0, 0.0, 0x3e7c04dd, each times absmax 2.0 (exact: the
// exponent goes up by one): 2.0, -2.0, 0.0, 0x3efc04dd. Low-nibble-first
// would start with -2.0.
TEST(BnbFourBit, HighNibbleIsTheEvenElementAndTheNf4TableIsUsed) {
  const File file =
      Build(FourBitLayer("w", State("nf4", 64, "float32", "[4]"), {0xF0, 0x7A}, {0x40000000}));
  ExpectDecoded(Read(file), "w", {4}, {0x40000000, 0xC0000000, 0x00000000, 0x3efc04dd});
}

// FP4 byte 0x8B: code 8 is +0.0 (bnb's Python table), so 0.0 * 4 = +0.0,
// not -0.0; code 11 is -1.0 -> -4.0. Byte 0x1F: code 1 = 0x3baaaaab =
// 0xAAAAAB * 2^-31, times 3 = (2^25 + 1) * 2^-31 = 2^-6 + 2^-31, a quarter
// ulp above 2^-6, so 0x3C800000; code 15 = -0.25 -> -0.75 (0xBF400000).
TEST(BnbFourBit, Fp4CodeEightIsPositiveZero) {
  const File a =
      Build(FourBitLayer("w", State("fp4", 64, "float32", "[2]"), {0x8B}, {0x40800000}, "fp4"));
  ExpectDecoded(Read(a), "w", {2}, {0x00000000, 0xC0800000});
  const File b =
      Build(FourBitLayer("w", State("fp4", 64, "float32", "[2]"), {0x1F}, {0x40400000}, "fp4"));
  ExpectDecoded(Read(b), "w", {2}, {0x3C800000, 0xBF400000});
}

// n = 3: ceil(3 / 2) = 2 bytes; element 2 is the high nibble of byte 1 (8:
// 0x3da2faff), the low nibble 7 is padding and is not decoded.
TEST(BnbFourBit, OddCountDecodesTheHighNibbleOfTheLastByte) {
  const File file =
      Build(FourBitLayer("w", State("nf4", 64, "float32", "[3]"), {0xF0, 0x87}, {0x3F800000}));
  ExpectDecoded(Read(file), "w", {3}, {0x3F800000, 0xBF800000, 0x3da2faff});
}

// Blocks: 65 elements, blocksize 64: element 64 is in block 1. All codes
// 15 (1.0): the values are the block's absmax.
TEST(BnbFourBit, EachBlockUsesItsOwnAbsmax) {
  const Bytes packed(33, 0xFF);  // ceil(65 / 2)
  const File file = Build(
      FourBitLayer("w", State("nf4", 64, "float32", "[65]"), packed, {0x40000000, 0x40800000}));
  Bits want(65, 0x40000000);
  want[64] = 0x40800000;
  ExpectDecoded(Read(file), "w", {65}, want);
}

// The product is rounded to dtype (RNE) and widened.
// NF4 code 1 = 0xbf3239b1, absmax 1.0:
//   float16: mantissa 0x3239b1 >> 13 = 0x191, rest 0x19b1 > 0x1000 -> 0x192;
//            exponent -1 -> half 0xB992 -> widened 0xBF324000.
//   bfloat16: low half 0x39b1 < 0x8000 -> 0xBF320000.
// Ties to even (code 15 = 1.0, so the value is the absmax):
//   float16: 1 + 2^-11 (0x3F801000) -> 1.0; 1 + 3 * 2^-11 (0x3F803000) -> 1 + 2^-9.
//   bfloat16: 1 + 2^-8 (0x3F808000) -> 1.0; 1 + 3 * 2^-8 (0x3F818000) -> 0x3F820000.
//   float16 subnormal: 1.5 * 2^-24 (0x33C00000) -> 2 * 2^-24 = 0x34000000.
//   float16 overflow: 65520 (0x477FF000) -> inf; 65519 (0x477FEF00) -> 65504.
TEST(BnbFourBit, ValuesAreRoundedToTheRestoredDtype) {
  const auto decode_one = [](const std::string& dtype, std::uint8_t byte, std::uint32_t absmax) {
    const File file = Build(FourBitLayer("w", State("nf4", 64, dtype, "[2]"), {byte}, {absmax}));
    const qd::Outcome outcome = Read(file);
    EXPECT_FALSE(outcome.refused) << Describe(outcome);
    return outcome.tensors.empty() ? 0u : BitsOf(outcome.tensors[0].values[0]);
  };
  EXPECT_EQ(decode_one("float16", 0x10, 0x3F800000), 0xBF324000u);
  EXPECT_EQ(decode_one("bfloat16", 0x10, 0x3F800000), 0xBF320000u);
  EXPECT_EQ(decode_one("float32", 0x10, 0x3F800000), 0xbf3239b1u);
  EXPECT_EQ(decode_one("float16", 0xF0, 0x3F801000), 0x3F800000u);
  EXPECT_EQ(decode_one("float16", 0xF0, 0x3F803000), 0x3F804000u);
  EXPECT_EQ(decode_one("bfloat16", 0xF0, 0x3F808000), 0x3F800000u);
  EXPECT_EQ(decode_one("bfloat16", 0xF0, 0x3F818000), 0x3F820000u);
  EXPECT_EQ(decode_one("float16", 0xF0, 0x33C00000), 0x34000000u);
  EXPECT_EQ(decode_one("float16", 0xF0, 0x477FF000), 0x7F800000u);
  EXPECT_EQ(decode_one("float16", 0xF0, 0x477FEF00), 0x477FE000u);
}

// Nested absmax, two roundings: q = nested_quant_map[5] = 1 + 2^-12 and
// nested_absmax = 1 + 2^-12. q * s = 1 + 2^-11 + 2^-24 exactly; 2^-24 is half
// an ulp and 1 + 2^-11 is even, so fl(q * s) = 1 + 2^-11; plus offset -1.0
// gives 2^-11 (0x3A000000). A fused multiply-add would give 2^-11 + 2^-24
// (0x3A000400). Codes 15, 0 -> +-absmax_eff.
TEST(BnbFourBit, NestedAbsmaxIsTwoRoundingsNeverFused) {
  const File file = Build(NestedLayer("w", State("nf4", 64, "float32", "[2]", kNested), {0xF0}, {5},
                                      {0x3F800800}, Map256({{5, 0x3F800800}})));
  ExpectDecoded(Read(file), "w", {2}, {0x3A000000, 0xBA000000});
}

// nested_offset goes decimal -> binary64 -> binary32. The decimal
// 1.0000000596046447753906250001 is 1 + 2^-24 + 1e-28: binary64 rounds it to
// 1 + 2^-24 (the excess is far below 2^-53), which is a binary32 tie, so
// binary32 gets the even 1.0. Rounding the decimal straight to binary32 would
// give 1 + 2^-23. With nested_quant_map[0] = 0 the absmax is the offset.
TEST(BnbFourBit, NestedOffsetIsRoundedFromTheJsonDouble) {
  const std::string nested =
      ", \"nested_blocksize\": 256, \"nested_dtype\": \"float32\", "
      "\"nested_offset\": 1.0000000596046447753906250001";
  const File file = Build(NestedLayer("w", State("nf4", 64, "float32", "[2]", nested), {0xF0}, {0},
                                      {0x3F800000}, Map256({})));
  ExpectDecoded(Read(file), "w", {2}, {0x3F800000, 0xBF800000});
}

// nested_blocksize 32 with 40 outer blocks: outer block 33 uses nested_absmax[1].
// blocksize 32, n = 1280 -> 40 blocks; codes 15 everywhere; absmax codes:
// block b has code 1 with nested_quant_map[1] = 0.5; nested_absmax = [2, 8];
// offset 0: blocks 0..31 -> 1.0, blocks 32..39 -> 4.0.
TEST(BnbFourBit, NestedBlocksizeIndexesNestedAbsmax) {
  const std::string nested =
      ", \"nested_blocksize\": 32, \"nested_dtype\": \"float32\", \"nested_offset\": 0";
  const Bytes packed(640, 0xFF);
  const File file =
      Build(NestedLayer("w", State("nf4", 32, "float32", "[1280]", nested), packed, Bytes(40, 1),
                        {0x40000000, 0x41000000}, Map256({{1, 0x3F000000}})));
  Bits want(1280, 0x3F800000);
  for (int i = 32 * 32; i < 1280; ++i) want[i] = 0x40800000;
  ExpectDecoded(Read(file), "w", {1280}, want);
}

// bnb's compatibility transpose: shape [2, 3] stored as U8 [1, 3] comes back
// as out.t(), shape [3, 2]. Codes 15 0 7 8 9 10 -> rows [1, -1, 0] and
// [t8, t9, t10]; the transpose is [[1, t8], [-1, t9], [0, t10]].
TEST(BnbFourBit, FirstDimensionOneTransposesRankTwoShapes) {
  std::vector<TensorSpec> tensors =
      FourBitLayer("w", State("nf4", 64, "float32", "[2, 3]"), {0xF0, 0x78, 0x9A}, {0x3F800000});
  tensors[0].shape = {1, 3};
  ExpectDecoded(Read(Build(tensors)), "w", {3, 2},
                {0x3F800000, kNf4[8], 0xBF800000, kNf4[9], 0x00000000, kNf4[10]});
  // Stored as [3, 1] there is no transpose.
  tensors[0].shape = {3, 1};
  ExpectDecoded(Read(Build(tensors)), "w", {2, 3},
                {0x3F800000, 0xBF800000, 0x00000000, kNf4[8], kNf4[9], kNf4[10]});
  // A rank-1 shape is not transposed even when W's first dimension is 1.
  tensors = FourBitLayer("w", State("nf4", 64, "float32", "[6]"), {0xF0, 0x78, 0x9A}, {0x3F800000});
  tensors[0].shape = {1, 3};
  ExpectDecoded(Read(Build(tensors)), "w", {6},
                {0x3F800000, 0xBF800000, 0x00000000, kNf4[8], kNf4[9], kNf4[10]});
}

// quant_storage: the packed bytes may sit in any dtype; they are read raw.
// F16 [2, 1] holding 0xF0 0x7A 0x8F 0x00: codes 15 0 7 10 8 15 0 0.
TEST(BnbFourBit, PackedBytesInAFloatTensorAreReadRaw) {
  std::vector<TensorSpec> tensors =
      FourBitLayer("w", State("nf4", 64, "float32", "[8]"), {0xF0, 0x7A, 0x8F, 0x00}, {0x3F800000});
  tensors[0].dtype = "F16";
  tensors[0].shape = {2, 1};
  const qd::Outcome outcome = Read(Build(tensors));
  ExpectDecoded(outcome, "w", {8},
                {0x3F800000, 0xBF800000, 0, kNf4[10], kNf4[8], 0x3F800000, 0xBF800000, 0xBF800000});
  EXPECT_EQ(outcome.tensors.size(), 1u) << "the F16 carrier is W, not a plain float tensor";
}

// GPT-QModel layout: M.weight_quant_state, W = M.weight, siblings
// M.weight_absmax and M.weight_quant_map; M may be empty.
TEST(BnbFourBit, GptqModelLayoutIsALayer) {
  for (const std::string m : {"model.layers.0.mlp.", ""}) {
    SCOPED_TRACE(m);
    const std::string state = State("fp4", 64, "float32", "[2]");
    const File file = Build({
        {m + "weight", "U8", {1, 1}, {0x3B}},
        {m + "weight_absmax", "F32", {1}, F32({0x40000000})},
        {m + "weight_quant_map", "F32", {16}, F32(kFp4)},
        {m + "weight_quant_state", "U8", {state.size()}, Text(state)},
    });
    // fp4 code 3 = 1.0, code 11 = -1.0, times 2.
    ExpectDecoded(Read(file), m + "weight", {2}, {0x40000000, 0xC0000000});
  }
}

// The quant_map tensor is optional; a stored one that differs from the table
// gives warning BNB-106 at its first differing value and is ignored.
TEST(BnbFourBit, QuantMapIsOptionalAndAStrayOneIsOnlyAWarning) {
  const std::vector<TensorSpec> base =
      FourBitLayer("w", State("nf4", 64, "float32", "[2]"), {0xF0}, {0x3F800000});
  ExpectDecoded(Read(Build(Without(base, "w.quant_map"))), "w", {2}, {0x3F800000, 0xBF800000});

  Bits tampered = kNf4;
  tampered[5] ^= 1;
  const File file = Build(Replace(base, {"w.quant_map", "F32", {16}, F32(tampered)}));
  const qd::Outcome outcome = Read(file);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  ASSERT_EQ(outcome.findings.size(), 1u) << Describe(outcome);
  const qd::Finding& f = outcome.findings[0];
  EXPECT_EQ(f.rule, "BNB-106");
  EXPECT_EQ(f.severity, qd::Severity::kWarning);
  EXPECT_EQ(f.tensor, "w.quant_map");
  EXPECT_EQ(f.field, "quant_map");
  EXPECT_EQ(f.element, 5);
  EXPECT_EQ(f.byte_offset, file.data_at.at("w.quant_map") + 20);
  ASSERT_EQ(outcome.tensors.size(), 1u);
  EXPECT_EQ(BitsOf(outcome.tensors[0].values[0]), 0x3F800000u);
}

// ===========================================================================
// The decoded tensor list and files without layers.

// Layer W "b.weight", floats "a.bias" (F32) and "c.norm" (BF16), a U8 tensor
// and the layer's own F32 absmax / quant_map: the output is every layer's W
// and every float tensor outside a layer, sorted by name.
TEST(BnbFile, OutputIsLayersAndLooseFloatsSortedByName) {
  const File file = Build(
      Plus({{"z.u8", "U8", {1}, {7}}, {"c.norm", "BF16", {1}, {0x80, 0x3F}}},
           Plus(FourBitLayer("b.weight", State("nf4", 64, "float32", "[2]"), {0xF0}, {0x3F800000}),
                {{"a.bias", "F32", {1}, F32({0x40400000})}})));
  const qd::Outcome outcome = Read(file);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  ASSERT_EQ(outcome.tensors.size(), 3u);
  EXPECT_EQ(outcome.tensors[0].name, "a.bias");
  EXPECT_EQ(outcome.tensors[1].name, "b.weight");
  EXPECT_EQ(outcome.tensors[2].name, "c.norm");
  EXPECT_EQ(BitsOf(outcome.tensors[0].values[0]), 0x40400000u);
  EXPECT_EQ(BitsOf(outcome.tensors[2].values[0]), 0x3F800000u);
}

// No layer: exactly ReadSafetensors' outcome (data-offset order, findings).
TEST(BnbFile, AFileWithoutLayersReadsAsSafetensors) {
  const File file = Build({{"b", "F32", {1}, F32({0x3F800000})},
                           {"a", "F16", {2}, {0x00, 0x3C, 0x00, 0xC0}},
                           {"x.absmax", "F32", {1}, F32({0x40000000})}});
  const qd::ByteView view{file.bytes.data(), file.bytes.size()};
  const qd::Outcome bnb = ReadBnbFile(view, kFileName);
  const qd::Outcome plain = ReadSafetensors(view, kFileName);
  ASSERT_FALSE(bnb.refused);
  ASSERT_EQ(bnb.tensors.size(), plain.tensors.size());
  for (std::size_t i = 0; i < bnb.tensors.size(); ++i) {
    EXPECT_EQ(bnb.tensors[i].name, plain.tensors[i].name);
    EXPECT_EQ(bnb.tensors[i].shape, plain.tensors[i].shape);
    EXPECT_EQ(bnb.tensors[i].values, plain.tensors[i].values);
  }
  EXPECT_EQ(bnb.tensors[0].name, "b");  // data-offset order, not name order
  EXPECT_EQ(bnb.findings.size(), plain.findings.size());
  // A container error is the container's.
  Bytes broken = file.bytes;
  broken.pop_back();
  const qd::Outcome refused = ReadBnbFile(qd::ByteView{broken.data(), broken.size()}, kFileName);
  ASSERT_TRUE(refused.refused);
  EXPECT_EQ(refused.findings.back().rule, "ST-013");
}

// Layers are checked in byte order of W and the first error stops the
// reader; a warning of an earlier layer is kept before it.
TEST(BnbFile, LayersAreCheckedInNameOrderAndWarningsBeforeTheErrorAreKept) {
  Bits tampered = kNf4;
  tampered[0] = 0;
  const std::vector<TensorSpec> good =
      Replace(FourBitLayer("a.weight", State("nf4", 64, "float32", "[2]"), {0xF0}, {0x3F800000}),
              {"a.weight.quant_map", "F32", {16}, F32(tampered)});
  const std::vector<TensorSpec> bad =
      FourBitLayer("b.weight", State("nf4", 64, "float64", "[2]"), {0xF0}, {0x3F800000});
  const qd::Outcome outcome = Read(Build(Plus(bad, good)));  // b's bytes first
  ExpectRefused(outcome, "BNB-103", "b.weight.quant_state.bitsandbytes__nf4", "dtype");
  ASSERT_EQ(outcome.findings.size(), 2u);
  EXPECT_EQ(outcome.findings[0].rule, "BNB-106");
  EXPECT_EQ(outcome.findings[0].tensor, "a.weight.quant_map");
}

// ===========================================================================
// 8-bit blockwise layers.

std::string Bw8Meta(const std::string& state) {
  std::string escaped;
  for (const char c : state) {
    if (c == '"') escaped += '\\';
    escaped += c;
  }
  return "{\"format\":\"pt\",\"bnb_blockwise8_quant_state\":\"" + escaped + "\"}";
}

// quant_map with qm[0] = -1, qm[1] = 0.5, qm[128] = 0.25, qm[255] = 1.
const Bits kMap8 = Map256({{0, 0xBF800000}, {1, 0x3F000000}, {128, 0x3E800000}, {255, 0x3F800000}});

std::vector<TensorSpec> Bw8Layer(const std::vector<std::uint64_t>& shape, const Bytes& codes,
                                 const Bits& absmax) {
  return {{"w", "U8", shape, codes},
          {"w.absmax", "F32", {absmax.size()}, F32(absmax)},
          {"w.quant_map", "F32", {256}, F32(kMap8)}};
}

// Codes 0 1 255 128 with absmax 3: -3, 1.5, 3, 0.75 (exact in float16).
TEST(BnbBlockwise8, DecodesWithTheStoredMapAndKeepsWsShape) {
  const File file =
      Build(Bw8Layer({2, 2}, {0, 1, 255, 128}, {0x40400000}),
            Bw8Meta("{\"quant_type\": null, \"blocksize\": 64, \"dtype\": \"float16\", "
                    "\"shape\": null}"));
  ExpectDecoded(Read(file), "w", {2, 2}, {0xC0400000, 0x3FC00000, 0x40400000, 0x3F400000});
}

// 65 codes of 255, blocksize 64, absmax [2, 4]: element 64 is 4. A matching
// shape is accepted.
TEST(BnbBlockwise8, BlocksAndAMatchingShape) {
  const File file =
      Build(Bw8Layer({1, 65}, Bytes(65, 255), {0x40000000, 0x40800000}),
            Bw8Meta("{\"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [1, 65]}"));
  Bits want(65, 0x40000000);
  want[64] = 0x40800000;
  ExpectDecoded(Read(file), "w", {1, 65}, want);
}

// Nested: absmax code 1, nested_quant_map[1] = 0.5, nested_absmax 4, offset
// 0.5: fl(0.5 * 4) + 0.5 = 2.5; codes 255 1 -> 2.5, 1.25.
TEST(BnbBlockwise8, NestedAbsmax) {
  std::vector<TensorSpec> t = Bw8Layer({2}, {255, 1}, {});
  t[1] = {"w.absmax", "U8", {1}, {1}};
  t.push_back({"w.nested_absmax", "F32", {1}, F32({0x40800000})});
  t.push_back({"w.nested_quant_map", "F32", {256}, F32(Map256({{1, 0x3F000000}}))});
  const File file =
      Build(t, Bw8Meta("{\"blocksize\": 64, \"dtype\": \"float32\", \"nested_blocksize\": 64, "
                       "\"nested_dtype\": \"float32\", \"nested_offset\": 0.5}"));
  ExpectDecoded(Read(file), "w", {2}, {0x40200000, 0x3FA00000});
}

TEST(BnbBlockwise8, RejectsInDocumentOrder) {
  const std::vector<TensorSpec> base = Bw8Layer({2, 2}, {0, 1, 255, 128}, {0x40400000});
  const std::string ok = "{\"blocksize\": 64, \"dtype\": \"float32\"}";
  // Step 1, BNB-101: the metadata text; no tensor named, byte_offset 8.
  for (const std::string& text :
       {std::string("nope"), std::string("[]"), std::string("{\"dtype\": \"float32\"}"),
        std::string("{\"blocksize\": \"64\", \"dtype\": \"float32\"}"),
        std::string("{\"blocksize\": 64}"),
        std::string("{\"blocksize\": 64, \"dtype\": \"float32\", \"shape\": 4}"),
        std::string("{\"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [\"2\"]}"),
        std::string("{\"blocksize\": 64, \"blocksize\": 64, \"dtype\": \"float32\"}"),
        std::string("{\"blocksize\": 64, \"dtype\": \"float32\", \"nested_offset\": null}")}) {
    SCOPED_TRACE(text);
    ExpectRefused(Read(Build(base, Bw8Meta(text))), "BNB-101", "", "bnb_blockwise8_quant_state", 8);
  }
  // Step 2, BNB-107: blocksize; step 3, BNB-103: dtype.
  ExpectRefused(Read(Build(base, Bw8Meta("{\"blocksize\": 48, \"dtype\": \"float32\"}"))),
                "BNB-107", "", "blocksize", 8);
  ExpectRefused(Read(Build(base, Bw8Meta("{\"blocksize\": 64, \"dtype\": \"int8\"}"))), "BNB-103",
                "", "dtype", 8);
  // Step 4, BNB-004: a nested key without the rest.
  ExpectRefused(
      Read(Build(base,
                 Bw8Meta("{\"blocksize\": 64, \"dtype\": \"float32\", \"nested_offset\": 0}"))),
      "BNB-004", "", "nested_blocksize", 8);
  ExpectRefused(
      Read(Build(base, Bw8Meta("{\"blocksize\": 64, \"dtype\": \"float32\", \"nested_offset\": 0, "
                               "\"nested_blocksize\": 64, \"nested_dtype\": \"float32\"}"))),
      "BNB-004", "w", "nested_absmax", 8);
  // Step 5, BNB-107: codes not U8; quant_map not F32[256].
  ExpectRefused(Read(Build(Replace(base, {"w", "I8", {2, 2}, {0, 1, 255, 128}}), Bw8Meta(ok))),
                "BNB-107", "w", "weight", 8);
  ExpectRefused(Read(Build(Replace(base, {"w.quant_map", "F32", {16}, F32(kNf4)}), Bw8Meta(ok))),
                "BNB-107", "w.quant_map", "quant_map", 8);
  // Step 6, BNB-102: a shape that differs from W's.
  ExpectRefused(
      Read(Build(base, Bw8Meta("{\"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [4]}"))),
      "BNB-102", "w", "shape", 8);
  // Step 7: absmax dtype (BNB-102), count (BNB-107).
  ExpectRefused(Read(Build(Replace(base, {"w.absmax", "U8", {1}, {1}}), Bw8Meta(ok))), "BNB-102",
                "w.absmax", "absmax", 8);
  ExpectRefused(Read(Build(Replace(base, {"w.absmax", "F32", {2}, F32({0, 0})}), Bw8Meta(ok))),
                "BNB-107", "w.absmax", "absmax", 8);
  // Step 9, BNB-104: absmax, then the quant_map.
  {
    const File file =
        Build(Replace(base, {"w.absmax", "F32", {1}, F32({0x7F800000})}), Bw8Meta(ok));
    ExpectRefused(Read(file), "BNB-104", "w.absmax", "absmax", file.data_at.at("w.absmax"), 0, -1);
  }
  {
    Bits map = kMap8;
    map[7] = 0xFF800000;
    const File file = Build(Replace(base, {"w.quant_map", "F32", {256}, F32(map)}), Bw8Meta(ok));
    ExpectRefused(Read(file), "BNB-104", "w.quant_map", "quant_map",
                  file.data_at.at("w.quant_map") + 28, -1, 7);
  }
}

// Without the metadata key the same tensors are not a layer: W (U8) is
// skipped and absmax / quant_map are plain float tensors.
TEST(BnbBlockwise8, WithoutTheMetadataKeyThereIsNoLayer) {
  const qd::Outcome outcome = Read(Build(Bw8Layer({2, 2}, {0, 1, 255, 128}, {0x40400000})));
  ASSERT_FALSE(outcome.refused);
  ASSERT_EQ(outcome.tensors.size(), 2u);
  EXPECT_EQ(outcome.tensors[0].name, "w.absmax");
  EXPECT_EQ(outcome.tensors[1].name, "w.quant_map");
}

// ===========================================================================
// int8 row-scaled layers.

// 0x3c010204 = 8454660 * 2^-30. Row 0 (SCB 1): 127 -> fl(127 * 8454660 *
// 2^-30) = fl(1 - 2^-28) = 1.0; -127 -> -1.0. Row 1 (SCB 2): 1 -> fl(2 *
// 0x3c010204) = 0x3c810204 (exact); 0 -> 0.
TEST(BnbInt8, RowScaledDecodeIsTwoRoundings) {
  const File file = Build({{"m.SCB", "F32", {2}, F32({0x3F800000, 0x40000000})},
                           {"m.weight", "I8", {2, 2}, {127, 0x81, 1, 0}},
                           {"m.weight_format", "U8", {}, {0}}});
  ExpectDecoded(Read(file), "m.weight", {2, 2}, {0x3F800000, 0xBF800000, 0x3c810204, 0x00000000});
}

TEST(BnbInt8, GptqModelScaleTensor) {
  const File file =
      Build({{"weight_scb", "F32", {1}, F32({0x3F800000})}, {"weight", "I8", {1, 1}, {0x81}}});
  ExpectDecoded(Read(file), "weight", {1, 1}, {0xBF800000});
}

TEST(BnbInt8, Rejects) {
  const std::vector<TensorSpec> base = {{"m.SCB", "F32", {2}, F32({0x3F800000, 0x40000000})},
                                        {"m.weight", "I8", {2, 2}, {127, 0x81, 1, 0}},
                                        {"m.weight_format", "U8", {}, {0}}};
  ExpectRefused(Read(Build(Without(base, "m.weight"))), "BNB-105", "m.weight", "weight", 8);
  ExpectRefused(Read(Build(Plus(base, {{"m.weight_scb", "F32", {2}, F32({0, 0})}}))), "BNB-105",
                "m.weight", "weight", 8);
  ExpectRefused(Read(Build(Replace(base, {"m.weight", "U8", {2, 2}, {1, 2, 3, 4}}))), "BNB-108",
                "m.weight", "weight", 8);
  ExpectRefused(Read(Build(Replace(base, {"m.weight", "I8", {4}, {1, 2, 3, 4}}))), "BNB-108",
                "m.weight", "weight", 8);
  ExpectRefused(Read(Build(Replace(base, {"m.SCB", "F32", {4}, F32({0, 0, 0, 0})}))), "BNB-108",
                "m.SCB", "SCB", 8);
  ExpectRefused(Read(Build(Replace(base, {"m.SCB", "F16", {2}, {0, 0x3C, 0, 0x3C}}))), "BNB-108",
                "m.SCB", "SCB", 8);
  ExpectRefused(Read(Build(Replace(base, {"m.weight_format", "U8", {2}, {0, 0}}))), "BNB-108",
                "m.weight_format", "weight_format", 8);
  {
    const File file = Build(Replace(base, {"m.weight_format", "U8", {1}, {1}}));
    ExpectRefused(Read(file), "BNB-108", "m.weight_format", "weight_format",
                  file.data_at.at("m.weight_format"));
  }
  {
    const File file = Build(Replace(base, {"m.SCB", "F32", {2}, F32({0x3F800000, 0x7FC00000})}));
    ExpectRefused(Read(file), "BNB-104", "m.SCB", "SCB", file.data_at.at("m.SCB") + 4, -1, 1);
  }
  // Without weight_format the layer is read.
  EXPECT_FALSE(Read(Build(Without(base, "m.weight_format"))).refused);
}

// ===========================================================================
// The reference quantizer.

struct Quantized {
  bool ok = false;
  Bytes packed;
  std::vector<float> absmax;
  qd::Finding error;
};

Quantized Quantize(const std::string& quant_type, int blocksize, const std::vector<float>& input,
                   const std::string& dtype = "float32") {
  Quantized q;
  q.ok = QuantizeBnb4bit(quant_type, blocksize, dtype, input.data(), input.size(), &q.packed,
                         &q.absmax, &q.error);
  return q;
}

// n = 4 in a 64 block (partial): absmax 1.0; scaled 1, -1, 0, 0.5. NF4
// bounds: all 15 are below 1 -> 15; none below -1 -> 0; 7 below 0 -> 7; 0.5
// lies between bounds 11 (0x3ec753f9) and 12 (0x3f006d04) -> 12.
TEST(BnbQuantize, Nf4CodesAreTheCountOfBoundsBelow) {
  const Quantized q = Quantize("nf4", 64, {1.0f, -1.0f, 0.0f, 0.5f});
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(q.packed, (Bytes{0xF0, 0x7C}));
  ASSERT_EQ(q.absmax.size(), 1u);
  EXPECT_EQ(BitsOf(q.absmax[0]), 0x3F800000u);
}

// A value exactly on a midpoint goes to the lower code: 0x3d22faff is NF4
// bound 7, so it is code 7, not 8.
TEST(BnbQuantize, ValueOnAMidpointTakesTheLowerCode) {
  const Quantized q = Quantize("nf4", 64, {1.0f, FloatOf(0x3d22faff)});
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(q.packed, (Bytes{0xF7}));
}

// An odd count pads the low nibble with the code of 0.0: 7 for NF4, 0 for
// FP4 (FP4 +1.0 is code 3).
TEST(BnbQuantize, OddCountPadsWithTheCodeOfZero) {
  EXPECT_EQ(Quantize("nf4", 64, {0.25f}).packed, (Bytes{0xF7}));
  EXPECT_EQ(Quantize("fp4", 64, {0.25f}).packed, (Bytes{0x30}));
}

// FP4 through argsort: bound 7 is (0 + 0) / 2 = 0 and bound 8 is 0x3b2aaaab,
// so 0.002 has 8 bounds below -> sorted position 8 = code 8; -0.002 has 7
// (bound 6 = 0xbb2aaaab is below) -> position 7 = code 0.
TEST(BnbQuantize, Fp4SmallValuesMapToCodesEightAndZero) {
  const Quantized q = Quantize("fp4", 32, {1.0f, 0.002f, -0.002f});
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(q.packed, (Bytes{0x38, 0x00}));
}

// Full blocks store max|x| unclamped (0 for a zero block); the partial last
// block stores max(max|x|, 1e-38) = 0x006ce3ee. Scaling always uses the
// clamped value, so zeros are code 7 (NF4).
TEST(BnbQuantize, PartialBlockAbsmaxIsClampedFullBlocksAreNot) {
  const Quantized q = Quantize("nf4", 32, std::vector<float>(33, 0.0f));
  ASSERT_TRUE(q.ok);
  ASSERT_EQ(q.absmax.size(), 2u);
  EXPECT_EQ(BitsOf(q.absmax[0]), 0x00000000u);
  EXPECT_EQ(BitsOf(q.absmax[1]), 0x006ce3eeu);
  EXPECT_EQ(q.packed, Bytes(17, 0x77));  // 16 full-block bytes, then code 7 and pad 7
}

// A subnormal full block (absmax 2^-130 < 1e-38) is scaled by fl(1 / 1e-38):
// 2^-130 * 1.0000000694e38 = 0.0735, between FP4 bounds 8 (0.0026) and 9
// (0.0859): sorted position 9 = code 1, not the code 3 of 1.0 that
// 1 / 2^-130 = inf would give. The zeros are code 0.
TEST(BnbQuantize, SubnormalBlocksScaleByTheFloor) {
  std::vector<float> input(32, 0.0f);
  input[0] = FloatOf(0x00080000);  // 2^-130
  const Quantized q = Quantize("fp4", 32, input);
  ASSERT_TRUE(q.ok);
  EXPECT_EQ(BitsOf(q.absmax[0]), 0x00080000u);
  EXPECT_EQ(q.packed[0], 0x10);
}

// Full blocks multiply by fl(1 / a); the partial block divides. x =
// -0x1.b8p-6, a = 0x1.08p-4: x / a = -5/12, whose binary32 (0xbed55555) lies
// above FP4 bound 2 (0xbed55556) -> 3 bounds below -> code 12 (-0.333);
// x * fl(1 / a) lands exactly on the bound 0xbed55556 -> 2 below -> code 13.
TEST(BnbQuantize, FullBlocksMultiplyByTheReciprocalThePartialBlockDivides) {
  const float a = 0x1.08p-4f;
  const float x = -0x1.b8p-6f;
  std::vector<float> full(32, 0.0f);
  full[0] = a;
  full[1] = x;
  EXPECT_EQ(Quantize("fp4", 32, full).packed[0], 0x3D);
  EXPECT_EQ(Quantize("fp4", 32, {a, x}).packed[0], 0x3C);
}

TEST(BnbQuantize, RefusedArguments) {
  const std::vector<float> input = {1.0f, 2.0f};
  Quantized q = Quantize("int4", 64, input);
  EXPECT_FALSE(q.ok);
  EXPECT_EQ(q.error.rule, "BNB-001");
  EXPECT_EQ(q.error.field, "quant_type");
  for (const int blocksize : {-64, 0, 16, 48, 8192}) {
    q = Quantize("nf4", blocksize, input);
    EXPECT_FALSE(q.ok);
    EXPECT_EQ(q.error.rule, "BNB-001");
    EXPECT_EQ(q.error.field, "blocksize");
  }
  q = Quantize("nf4", 64, input, "float64");
  EXPECT_FALSE(q.ok);
  EXPECT_EQ(q.error.rule, "BNB-103");
  q = Quantize("nf4", 64, {1.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_FALSE(q.ok);
  EXPECT_EQ(q.error.rule, "BNB-104");
  EXPECT_EQ(q.error.element, 1);
}

// Quantize, store, read back: every decoded value is table[code] * absmax.
TEST(BnbQuantize, RoundTripsThroughTheReader) {
  std::vector<float> input;
  for (int i = 0; i < 203; ++i) input.push_back(static_cast<float>((i * 37) % 101 - 50) / 64.0f);
  for (const std::string quant_type : {"nf4", "fp4"}) {
    SCOPED_TRACE(quant_type);
    const Quantized q = Quantize(quant_type, 64, input);
    ASSERT_TRUE(q.ok);
    Bits absmax_bits;
    for (const float a : q.absmax) absmax_bits.push_back(BitsOf(a));
    const File file = Build(FourBitLayer("w", State(quant_type, 64, "float32", "[203]"), q.packed,
                                         absmax_bits, quant_type));
    const Bits& table = quant_type == "nf4" ? kNf4 : kFp4;
    Bits want;
    for (std::size_t i = 0; i < input.size(); ++i) {
      const int code = i % 2 == 0 ? q.packed[i / 2] >> 4 : q.packed[i / 2] & 0x0F;
      want.push_back(BitsOf(FloatOf(table[code]) * q.absmax[i / 64]));
    }
    ExpectDecoded(Read(file), "w", {203}, want);
  }
}

}  // namespace
}  // namespace qd::oracle
