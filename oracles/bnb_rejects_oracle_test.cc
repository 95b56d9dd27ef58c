// bnb_rejects_oracle_test.cc: the oracle's bitsandbytes reader refusing
// 4-bit layers, one case per check in docs/bnb.md's order (BNB-101..105,
// BNB-002, BNB-004), and the first failing step winning. Expected rules,
// tensors, fields and offsets come from docs/bnb.md and the files' layout.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/bnb_oracle_test_files.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {
namespace {

using namespace bnb_test;  // NOLINT(google-build-using-namespace): the files and checks of the tests

// ===========================================================================
// 4-bit rejects, one per check, in docs/bnb.md's order.

std::vector<TensorSpec> Base(const std::string& state = State("nf4", 64, "float32", "[4]")) {
  return FourBitLayer("w", state, {0xF0, 0x7A}, {0x40000000});
}

const char kStateName[] = "w.quant_state.bitsandbytes__nf4";

std::int64_t StateAt(const File& file) { return file.data_at.at(kStateName); }

TEST(BnbFourBitRejects, Step1LayerIncompleteOrAmbiguousIsBNB105) {
  // Two suffixes name w.
  const std::string fp4_state = State("fp4", 64, "float32", "[4]");
  ExpectRefused(
      Read(Build(
          Plus(Base(),
               {{"w.quant_state.bitsandbytes__fp4", "U8", {fp4_state.size()}, Text(fp4_state)}}))),
      "BNB-105", "w", "quant_state", 8);
  // HF and GPT-QModel forms name the same W ("m.weight").
  const std::string state = State("nf4", 64, "float32", "[4]");
  std::vector<TensorSpec> both = FourBitLayer("m.weight", state, {0xF0, 0x7A}, {0x40000000});
  both.push_back({"m.weight_quant_state", "U8", {state.size()}, Text(state)});
  ExpectRefused(Read(Build(both)), "BNB-105", "m.weight", "quant_state", 8);
  // W missing; absmax missing.
  ExpectRefused(Read(Build(Without(Base(), "w"))), "BNB-105", "w", "quant_state", 8);
  ExpectRefused(Read(Build(Without(Base(), "w.absmax"))), "BNB-105", "w", "quant_state", 8);
}

TEST(BnbFourBitRejects, Step2StateNotStrictJsonOfTheRightTypesIsBNB101) {
  const std::string good = State("nf4", 64, "float32", "[4]");
  // Not U8 of rank 1: a header-level fact, byte_offset 8.
  ExpectRefused(Read(Build(Replace(Base(), {kStateName, "I8", {good.size()}, Text(good)}))),
                "BNB-101", kStateName, "quant_state", 8);
  ExpectRefused(Read(Build(Replace(Base(), {kStateName, "U8", {1, good.size()}, Text(good)}))),
                "BNB-101", kStateName, "quant_state", 8);
  // The JSON text: byte_offset is where the state's data begins.
  const std::vector<std::string> bad_texts = {
      "not json",
      "[1, 2]",
      "",
      "{\"quant_type\": \"nf4\", \"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": "
      "\"float32\", "
      "\"shape\": [4]}",                                              // duplicate key
      "{\"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [4]}",  // no quant_type
      "{\"quant_type\": 4, \"blocksize\": 64, \"dtype\": \"float32\", \"shape\": [4]}",
      "{\"quant_type\": \"nf4\", \"blocksize\": \"64\", \"dtype\": \"float32\", \"shape\": [4]}",
      "{\"quant_type\": \"nf4\", \"blocksize\": 64.0, \"dtype\": \"float32\", \"shape\": [4]}",
      "{\"quant_type\": \"nf4\", \"blocksize\": 6.4e1, \"dtype\": \"float32\", \"shape\": [4]}",
      "{\"quant_type\": \"nf4\", \"blocksize\": -64, \"dtype\": \"float32\", \"shape\": [4]}",
      "{\"quant_type\": \"nf4\", \"blocksize\": 18446744073709551616, \"dtype\": \"float32\", "
      "\"shape\": [4]}",                                                       // 2^64
      "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [4]}",          // no dtype
      "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\"}",  // no shape
      State("nf4", 64, "float32", "[2, -2]"),
      State("nf4", 64, "float32", "null"),
      State("nf4", 64, "float32", "[4]", ", \"nested_offset\": \"0.5\""),
      State("nf4", 64, "float32", "[4]", ", \"nested_blocksize\": 2.56e2"),
      State("nf4", 64, "float32", "[4]", ", \"nested_dtype\": null"),
      State("nf4", 64, "float32", "[4]", ", \"x\": 1e400"),         // overflows binary64
      State("nf4", 64, "float32", "[4]", ", \"x\": \"\xC0\xAF\""),  // overlong UTF-8
      "\xEF\xBB\xBF" + good,                                        // BOM
      good + std::string(1, '\0'),                                  // NUL
      State("nf4", 64, "float32", "[4]", ", \"x\": " + std::string(64, '[') + std::string(64, ']')),
  };
  for (const std::string& text : bad_texts) {
    SCOPED_TRACE(text);
    const File file = Build(Replace(Base(), {kStateName, "U8", {text.size()}, Text(text)}));
    ExpectRefused(Read(file), "BNB-101", kStateName, "quant_state", StateAt(file));
  }
  // 63 nested arrays inside the top-level object is depth 64: accepted.
  const std::string deep =
      State("nf4", 64, "float32", "[4]", ", \"x\": " + std::string(63, '[') + std::string(63, ']'));
  const qd::Outcome ok =
      Read(Build(Replace(Base(), {kStateName, "U8", {deep.size()}, Text(deep)})));
  EXPECT_FALSE(ok.refused) << Describe(ok);
}

TEST(BnbFourBitRejects, Steps3To6QuantTypeSuffixBlocksizeDtype) {
  // Step 3: quant_type (BNB-001) is checked before the suffix (BNB-102).
  {
    const std::string state = State("int4", 64, "float32", "[4]");
    std::vector<TensorSpec> t = FourBitLayer("w", state, {0xF0, 0x7A}, {0x40000000}, "int4");
    t[2].data = F32(kNf4);
    const File file = Build(t);
    ExpectRefused(Read(file), "BNB-001", "w.quant_state.bitsandbytes__int4", "quant_type",
                  file.data_at.at("w.quant_state.bitsandbytes__int4"));
  }
  {
    const File file = Build(Base(State("af4", 64, "float32", "[4]")));
    ExpectRefused(Read(file), "BNB-001", kStateName, "quant_type", StateAt(file));
  }
  // Step 4: the HF suffix disagrees with quant_type.
  {
    const File file = Build(Base(State("fp4", 64, "float32", "[4]")));
    ExpectRefused(Read(file), "BNB-102", kStateName, "quant_type", StateAt(file));
  }
  // Step 5: blocksize.
  for (const int blocksize : {0, 16, 48, 96, 8192}) {
    SCOPED_TRACE(blocksize);
    const File file = Build(Base(State("nf4", blocksize, "float32", "[4]")));
    ExpectRefused(Read(file), "BNB-001", kStateName, "blocksize", StateAt(file));
  }
  for (const int blocksize : {32, 128, 256, 512, 1024, 2048, 4096}) {
    EXPECT_FALSE(Read(Build(Base(State("nf4", blocksize, "float32", "[4]")))).refused) << blocksize;
  }
  // Step 6: dtype.
  for (const std::string dtype : {"float64", "float8", "Float16", ""}) {
    SCOPED_TRACE(dtype);
    const File file = Build(Base(State("nf4", 64, dtype, "[4]")));
    ExpectRefused(Read(file), "BNB-103", kStateName, "dtype", StateAt(file));
  }
}

TEST(BnbFourBitRejects, Step7NestedLayerMissingAPieceIsBNB004) {
  const auto nested_file = [](const std::string& extra, bool absmax_tensor, bool map_tensor) {
    std::vector<TensorSpec> t = NestedLayer("w", State("nf4", 64, "float32", "[2]", extra), {0xF0},
                                            {0}, {0x3F800000}, Map256({}));
    if (!absmax_tensor) t = Without(t, "w.nested_absmax");
    if (!map_tensor) t = Without(t, "w.nested_quant_map");
    return Build(t);
  };
  const std::string bs = ", \"nested_blocksize\": 256";
  const std::string dt = ", \"nested_dtype\": \"float32\"";
  const std::string off = ", \"nested_offset\": 0.5";
  struct Case {
    std::string extra;
    bool absmax_tensor;
    bool map_tensor;
    std::string field;
  };
  const std::vector<Case> cases = {
      {bs + dt, true, true, "nested_offset"},
      {dt + off, true, true, "nested_blocksize"},
      {", \"nested_blocksize\": 100" + dt + off, true, true, "nested_blocksize"},
      {", \"nested_blocksize\": 16" + dt + off, true, true, "nested_blocksize"},
      {", \"nested_blocksize\": 8192" + dt + off, true, true, "nested_blocksize"},
      {bs + off, true, true, "nested_dtype"},
      {bs + ", \"nested_dtype\": \"float16\"" + off, true, true, "nested_dtype"},
      {bs + dt + off, false, true, "nested_absmax"},
      {bs + dt + off, true, false, "nested_quant_map"},  // the absmax is U8: still nested
      {bs + dt + off, false, false, "nested_absmax"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.extra);
    const File file = nested_file(c.extra, c.absmax_tensor, c.map_tensor);
    // A missing JSON piece names the state tensor; a missing tensor names W.
    const bool json_piece = c.field != "nested_absmax" && c.field != "nested_quant_map";
    ExpectRefused(Read(file), "BNB-004", json_piece ? kStateName : "w", c.field,
                  json_piece ? StateAt(file) : 8);
  }
  // Nested by a nested_* key alone (here an unknown one) or by a nested
  // tensor alone, in an otherwise flat layer.
  {
    const File file = Build(Base(State("nf4", 64, "float32", "[4]", ", \"nested_x\": 1")));
    ExpectRefused(Read(file), "BNB-004", kStateName, "nested_offset", StateAt(file));
  }
  {
    const File file = Build(Plus(Base(), {{"w.nested_quant_map", "F32", {256}, F32(Map256({}))}}));
    ExpectRefused(Read(file), "BNB-004", kStateName, "nested_offset", StateAt(file));
  }
}

TEST(BnbFourBitRejects, Step8PackedWeightNotCeilHalfIsBNB002) {
  // shape [4] needs 2 bytes.
  for (const Bytes& packed : {Bytes{0xF0}, Bytes{0xF0, 0x7A, 0x00}}) {
    ExpectRefused(Read(Build(Replace(Base(), {"w", "U8", {packed.size(), 1}, packed}))), "BNB-002",
                  "w", "weight", 8);
  }
  // The element count overflows: 2^32 * 2^32.
  ExpectRefused(Read(Build(Base(State("nf4", 64, "float32", "[4294967296, 4294967296]")))),
                "BNB-002", "w", "weight", 8);
  // An empty shape is one element: ceil(1 / 2) = 1 byte.
  ExpectDecoded(
      Read(Build(FourBitLayer("w", State("nf4", 64, "float32", "[]"), {0xF7}, {0x3F800000}))), "w",
      {}, {0x3F800000});
  // A zero element count needs zero bytes and zero blocks.
  ExpectDecoded(Read(Build(FourBitLayer("w", State("nf4", 64, "float32", "[0, 5]"), {}, {}))), "w",
                {0, 5}, {});
}

TEST(BnbFourBitRejects, Steps9To12TensorKindsAndCounts) {
  // Step 9: flat absmax must be F32, nested absmax U8.
  ExpectRefused(Read(Build(Replace(Base(), {"w.absmax", "F16", {1}, {0x00, 0x40}}))), "BNB-102",
                "w.absmax", "absmax", 8);
  {
    std::vector<TensorSpec> t = NestedLayer("w", State("nf4", 64, "float32", "[2]", kNested),
                                            {0xF0}, {0}, {0x3F800000}, Map256({}));
    ExpectRefused(Read(Build(Replace(t, {"w.absmax", "F32", {1}, F32({0x3F800000})}))), "BNB-102",
                  "w.absmax", "absmax", 8);
  }
  // Step 10: ceil(4 / 64) = 1 absmax.
  ExpectRefused(
      Read(Build(Replace(Base(), {"w.absmax", "F32", {2}, F32({0x40000000, 0x40000000})}))),
      "BNB-001", "w.absmax", "absmax", 8);
  ExpectRefused(Read(Build(Replace(Base(), {"w.absmax", "F32", {0}, {}}))), "BNB-001", "w.absmax",
                "absmax", 8);
  // Step 11: nested_absmax F32 with ceil(1 / 256) = 1 element, nested_quant_map F32[256].
  {
    const std::vector<TensorSpec> t = NestedLayer("w", State("nf4", 64, "float32", "[2]", kNested),
                                                  {0xF0}, {0}, {0x3F800000}, Map256({}));
    ExpectRefused(Read(Build(Replace(t, {"w.nested_absmax", "F32", {2}, F32({0, 0})}))), "BNB-004",
                  "w.nested_absmax", "nested_absmax", 8);
    ExpectRefused(Read(Build(Replace(t, {"w.nested_absmax", "F16", {1, 1}, {0, 0x3C}}))), "BNB-004",
                  "w.nested_absmax", "nested_absmax", 8);
    ExpectRefused(Read(Build(Replace(t, {"w.nested_quant_map", "F32", {255}, F32(Bits(255, 0))}))),
                  "BNB-004", "w.nested_quant_map", "nested_quant_map", 8);
    ExpectRefused(Read(Build(Replace(t, {"w.nested_quant_map", "F64", {128}, Bytes(1024, 0)}))),
                  "BNB-004", "w.nested_quant_map", "nested_quant_map", 8);
  }
  // Step 12: a stored quant_map is F32 with 16 elements (any shape).
  ExpectRefused(Read(Build(Replace(Base(), {"w.quant_map", "F32", {15}, F32(Bits(15, 0))}))),
                "BNB-102", "w.quant_map", "quant_map", 8);
  ExpectRefused(Read(Build(Replace(Base(), {"w.quant_map", "F16", {16}, Bytes(32, 0)}))), "BNB-102",
                "w.quant_map", "quant_map", 8);
  EXPECT_FALSE(Read(Build(Replace(Base(), {"w.quant_map", "F32", {4, 4}, F32(kNf4)}))).refused);
}

TEST(BnbFourBitRejects, Step13NonFiniteStatisticIsBNB104) {
  // Flat absmax: 130 elements, blocksize 64 -> 3 blocks; block 1 is NaN.
  {
    const File file = Build(FourBitLayer("w", State("nf4", 64, "float32", "[130]"), Bytes(65, 0xFF),
                                         {0x3F800000, 0x7FC00000, 0xFF800000}));
    ExpectRefused(Read(file), "BNB-104", "w.absmax", "absmax", file.data_at.at("w.absmax") + 4, 1,
                  -1);
  }
  // Nested: nested_absmax infinite (block 0), nested_quant_map NaN at 200.
  {
    const File file = Build(NestedLayer("w", State("nf4", 64, "float32", "[2]", kNested), {0xF0},
                                        {0}, {0x7F800000}, Map256({{200, 0x7FC00001}})));
    ExpectRefused(Read(file), "BNB-104", "w.nested_absmax", "nested_absmax",
                  file.data_at.at("w.nested_absmax"), 0, -1);
  }
  {
    const File file = Build(NestedLayer("w", State("nf4", 64, "float32", "[2]", kNested), {0xF0},
                                        {0}, {0x3F800000}, Map256({{200, 0x7FC00001}})));
    ExpectRefused(Read(file), "BNB-104", "w.nested_quant_map", "nested_quant_map",
                  file.data_at.at("w.nested_quant_map") + 800, -1, 200);
  }
  // A non-finite stored quant_map is not a statistic: only BNB-106.
  {
    Bits map = kNf4;
    map[3] = 0x7FC00000;
    const qd::Outcome outcome =
        Read(Build(Replace(Base(), {"w.quant_map", "F32", {16}, F32(map)})));
    ASSERT_FALSE(outcome.refused) << Describe(outcome);
    ASSERT_EQ(outcome.findings.size(), 1u);
    EXPECT_EQ(outcome.findings[0].rule, "BNB-106");
    EXPECT_EQ(outcome.findings[0].element, 3);
  }
}

// The first failing step wins: a file with a bad dtype (step 6) and a short
// weight (step 8) is BNB-103; a short weight and a bad absmax count is BNB-002.
TEST(BnbFourBitRejects, TheFirstFailingStepIsReported) {
  ExpectRefused(
      Read(Build(Replace(Base(State("nf4", 64, "float64", "[4]")), {"w", "U8", {1, 1}, {0}}))),
      "BNB-103", kStateName, "dtype");
  ExpectRefused(Read(Build(Replace(Replace(Base(), {"w", "U8", {1, 1}, {0}}),
                                   {"w.absmax", "F32", {2}, F32({0, 0})}))),
                "BNB-002", "w", "weight", 8);
}

}  // namespace
}  // namespace qd::oracle
