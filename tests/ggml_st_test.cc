// ggml_st_test.cc: GGUF-family safetensors (docs/ggml_safetensors.md) through
// the registry's "ggml_st" entry, codec and oracle alike, on files built here
// with the tests' own writer. Expected values are worked out from
// docs/ggml_blocks.md section 3 in the comments; expected findings from the
// check order of docs/ggml_safetensors.md sections 4 and 7.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "generators/generators.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "property_tests/gen/files.h"
#include "quantdiff/plain_data.h"

namespace {

using Bytes = std::vector<std::uint8_t>;
using qdtest::RawTensor;

const std::string kConfigName = "quantize_config.json";

qd::SideFile Config(const std::string& format, int bits, const std::string& method = "gguf") {
  const std::string text = "{\"bits\": " + std::to_string(bits) + ", \"format\": \"" + format +
                           "\", \"method\": \"" + method + "\", \"pack_dtype\": \"int32\"}";
  return {kConfigName, Bytes(text.begin(), text.end())};
}

Bytes Text(const std::string& text) { return Bytes(text.begin(), text.end()); }

void PutHalf(Bytes* b, std::size_t at, std::uint16_t h) {
  (*b)[at] = static_cast<std::uint8_t>(h);
  (*b)[at + 1] = static_cast<std::uint8_t>(h >> 8);
}

// Two q8_0 rows of one block each (docs/ggml_blocks.md 3.5, y = i8(q) * d):
// row 0 d = 0.5 (0x3800), q_i = i - 16, so y_i = (i - 16) / 2; row 1
// d = -1 (0xBC00), q_i = 3, so y_i = -3.
Bytes Q8Rows() {
  Bytes q(2 * 34, 0);
  PutHalf(&q, 0, 0x3800);
  for (int i = 0; i < 32; ++i) q[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(i - 16));
  PutHalf(&q, 34, 0xBC00);
  for (int i = 0; i < 32; ++i) q[36 + i] = 3;
  return q;
}

// One q4_0 row of two blocks (docs/ggml_blocks.md 3.1): block 0 d = 1,
// every qs byte 0x98; block 1 d = 2, every qs byte SECOND_QS.
Bytes Q4_0Row(std::uint8_t second_qs) {
  Bytes q(36, 0);
  PutHalf(&q, 0, 0x3C00);
  for (int i = 0; i < 16; ++i) q[2 + i] = 0x98;
  PutHalf(&q, 18, 0x4000);
  for (int i = 0; i < 16; ++i) q[20 + i] = second_qs;
  return q;
}

struct Read {
  qd::Outcome codec, oracle;
};

struct Geometry {
  const char* type;
  std::uint64_t values, bytes;  // docs/ggml_blocks.md section 3's table
};
const Geometry kTypes[] = {{"q4_0", 32, 18},  {"q4_1", 32, 20},  {"q5_0", 32, 22},   {"q5_1", 32, 24},
                           {"q8_0", 32, 34},  {"q2_K", 256, 84}, {"q3_K", 256, 110}, {"q4_K", 256, 144},
                           {"q5_K", 256, 176}, {"q6_K", 256, 210}, {"iq4_nl", 32, 18}, {"mxfp4", 32, 17}};

Read ReadBoth(const std::vector<RawTensor>& tensors, const std::vector<qd::SideFile>& configs,
              const qdtest::Metadata* metadata = nullptr) {
  const Bytes file = qdtest::SafetensorsFile(tensors, metadata);
  const qd::harness::FormatEntry& f = *qd::harness::FindFormat("ggml_st");
  return {f.codec_read({file.data(), file.size()}, "m.safetensors", configs),
          f.oracle_read({file.data(), file.size()}, "m.safetensors", configs)};
}

TEST(GgmlSt, DetectsAU8QweightWithoutGptqMembers) {
  const Bytes file = qdtest::SafetensorsFile({{"l.qweight", "U8", {2, 34}, Q8Rows()}}, nullptr);
  EXPECT_EQ(qd::harness::DetectFormat({file.data(), file.size()}, {}).name, "ggml_st");
  EXPECT_EQ(qd::harness::OracleDetectFormat({file.data(), file.size()}, {}).name, "ggml_st");
  const Bytes with_scales = qdtest::SafetensorsFile(
      {{"l.qweight", "U8", {2, 34}, Q8Rows()}, {"l.scales", "F16", {2}, Bytes(4, 0)}}, nullptr);
  EXPECT_NE(qd::harness::DetectFormat({with_scales.data(), with_scales.size()}, {}).name, "ggml_st");
  EXPECT_NE(qd::harness::OracleDetectFormat({with_scales.data(), with_scales.size()}, {}).name, "ggml_st");
}

TEST(GgmlSt, DecodesQ8_0RowsAndWidensTheBias) {
  Bytes bias(4);
  PutHalf(&bias, 0, 0x3C00);  // 1.0
  PutHalf(&bias, 2, 0xC000);  // -2.0
  const Read r = ReadBoth({{"l.qweight", "U8", {2, 34}, Q8Rows()}, {"l.bias", "F16", {2}, bias}},
                          {Config("q_0", 8)});
  for (const qd::Outcome* o : {&r.codec, &r.oracle}) {
    ASSERT_FALSE(o->refused);
    EXPECT_TRUE(o->findings.empty());
    ASSERT_EQ(o->tensors.size(), 2u);
    EXPECT_EQ(o->tensors[0].name, "l.weight");
    EXPECT_EQ(o->tensors[0].shape, (std::vector<std::uint64_t>{2, 32}));
    ASSERT_EQ(o->tensors[0].values.size(), 64u);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(o->tensors[0].values[i], static_cast<float>(i - 16) / 2.0f) << i;
      EXPECT_EQ(o->tensors[0].values[32 + i], -3.0f) << i;
    }
    EXPECT_EQ(o->tensors[1].name, "l.bias");
    EXPECT_EQ(o->tensors[1].values, (std::vector<float>{1.0f, -2.0f}));
  }
}

// q4_0 (3.1: y = (nibble - 8) * d), written "Q4-0" (normalised to q4_0):
// block 0 d = 1, every qs byte 0x98: weights 0..15 (low nibble 8) are 0,
// 16..31 (high nibble 9) are 1; block 1 (the padding's) d = 2, qs 0x88: 0.
// The padded width Kp = 64 is decoded whole (section 1).
TEST(GgmlSt, DecodesQ4_0WithItsPaddedBlock) {
  const Bytes q = Q4_0Row(0x88);
  const Read r = ReadBoth({{"l.qweight", "U8", {1, 36}, q}}, {Config("Q4-0", 4)});
  for (const qd::Outcome* o : {&r.codec, &r.oracle}) {
    ASSERT_FALSE(o->refused);
    ASSERT_EQ(o->tensors.size(), 1u);
    EXPECT_EQ(o->tensors[0].shape, (std::vector<std::uint64_t>{1, 64}));
    for (int k = 0; k < 64; ++k) EXPECT_EQ(o->tensors[0].values[k], (k >= 16 && k < 32) ? 1.0f : 0.0f) << k;
  }
}

struct RuleCase {
  const char* what;
  std::vector<RawTensor> tensors;
  std::vector<qd::SideFile> configs;
  const char* rule;
  const char* file;
  const char* tensor;
  const char* field;
  std::int64_t row = -1, block = -1;
  std::int64_t data_byte = -1;  // byte_offset - data start, or -1 for the fixed offsets below
  qdtest::Metadata metadata = {};  // section 7's layout when it has ggml_type
};

TEST(GgmlSt, EveryRuleWithItsFields) {
  Bytes q6(210, 0);
  PutHalf(&q6, 208, 0x7C00);  // q6_K's d (3.9: @208) is +infinity
  Bytes q4k(2 * 144, 0);
  PutHalf(&q4k, 144 + 2, 0xFE00);  // row 1's dmin (@2) is a NaN
  Bytes f32_bias(8, 0);
  const std::vector<RuleCase> cases = {
      {"q_0 with 5 bits is q5_0, not written by GPT-QModel", {{"l.qweight", "U8", {2, 34}, Q8Rows()}},
       {Config("q_0", 5)}, "GGST-001", "quantize_config.json", "", "format"},
      {"q4_k_m says 4 bits", {{"l.qweight", "U8", {2, 34}, Q8Rows()}}, {Config("q4_k_m", 5)}, "GGST-002",
       "quantize_config.json", "", "bits"},
      {"35 bytes a row", {{"l.qweight", "U8", {1, 35}, Bytes(35, 0)}}, {Config("q_0", 8)}, "GGST-003",
       "m.safetensors", "l.qweight", "shape"},
      {"q6_K d infinite", {{"l.qweight", "U8", {1, 210}, q6}}, {Config("q_k", 6)}, "GGST-004", "m.safetensors",
       "l.qweight", "d", 0, 0, 208},
      {"q4_K dmin NaN", {{"l.qweight", "U8", {2, 144}, q4k}}, {Config("q_k_s", 4)}, "GGST-004",
       "m.safetensors", "l.qweight", "dmin", 1, 0, 146},
      {"second layer has scales", {{"a.qweight", "U8", {2, 34}, Q8Rows()}, {"b.scales", "F16", {1}, Bytes(2, 0)}},
       {Config("q_0", 8)}, "GGST-101", "m.safetensors", "b.scales", "qweight"},
      {"second layer has g_idx", {{"a.qweight", "U8", {2, 34}, Q8Rows()}, {"b.qweight", "U8", {2, 34}, Q8Rows()},
                                  {"b.g_idx", "I32", {1}, Bytes(4, 0)}},
       {Config("q_0", 8)}, "GGST-101", "m.safetensors", "b.g_idx", "g_idx"},
      {"dense weight beside", {{"l.qweight", "U8", {2, 34}, Q8Rows()}, {"l.weight", "F16", {1}, Bytes(2, 0)}},
       {Config("q_0", 8)}, "GGST-102", "m.safetensors", "l.weight", "weight"},
      {"F32 bias", {{"l.qweight", "U8", {2, 34}, Q8Rows()}, {"l.bias", "F32", {2}, f32_bias}},
       {Config("q_0", 8)}, "GGST-104", "m.safetensors", "l.bias", "dtype"},
      {"bias of 4 for 2 rows", {{"l.qweight", "U8", {2, 34}, Q8Rows()}, {"l.bias", "F16", {4}, f32_bias}},
       {Config("q_0", 8)}, "GGST-104", "m.safetensors", "l.bias", "shape"},
      // 2^32 + 4 does not fit an int: read as -1 (section 2), never as 4.
      {"q_0 with bits 2^32 + 4", {{"l.qweight", "U8", {1, 18}, Bytes(18, 0)}},
       {{kConfigName, Text("{\"method\": \"gguf\", \"format\": \"q_0\", \"bits\": 4294967300}")}}, "GGST-001",
       "quantize_config.json", "", "format"},
      {"q4_0 with bits 2^32 + 4", {{"l.qweight", "U8", {1, 18}, Bytes(18, 0)}},
       {{kConfigName, Text("{\"method\": \"gguf\", \"format\": \"q4_0\", \"bits\": 4294967300}")}}, "GGST-002",
       "quantize_config.json", "", "bits"},
      {"labelled gptq", {{"l.qweight", "U8", {2, 34}, Q8Rows()}}, {Config("q_0", 8, "gptq")}, "CFG-005",
       "quantize_config.json", "", "method"},
      {"no config", {{"l.qweight", "U8", {2, 34}, Q8Rows()}}, {}, "CFG-003", "m.safetensors", "", "config"},
      // Section 7, the block-vector layout: no config is read (V1..V5).
      {"V1 ggml_type spelled q4_k", {{"blocks", "U8", {2, 34}, Q8Rows()}}, {}, "GGST-001", "m.safetensors", "",
       "ggml_type", -1, -1, -1, {{"ggml_type", "q4_k"}}},
      {"V1 ggml_type q8_1 (not decoded)", {{"blocks", "U8", {2, 34}, Q8Rows()}}, {Config("q_0", 8)}, "GGST-001",
       "m.safetensors", "", "ggml_type", -1, -1, -1, {{"ggml_type", "q8_1"}}},
      {"V2 cols with a sign", {{"blocks", "U8", {2, 34}, Q8Rows()}}, {}, "GGST-003", "m.safetensors", "", "cols",
       -1, -1, -1, {{"ggml_type", "q8_0"}, {"cols", "+32"}}},
      {"V2 cols of 20 digits", {{"blocks", "U8", {2, 34}, Q8Rows()}}, {}, "GGST-003", "m.safetensors", "", "cols",
       -1, -1, -1, {{"ggml_type", "q8_0"}, {"cols", "00000000000000000032"}}},
      {"V3 blocks of rank 1", {{"blocks", "U8", {68}, Q8Rows()}}, {}, "GGST-104", "m.safetensors", "blocks",
       "shape", -1, -1, -1, {{"ggml_type", "q8_0"}}},
      {"V4 35 bytes a row", {{"blocks", "U8", {1, 35}, Bytes(35, 0)}}, {}, "GGST-003", "m.safetensors", "blocks",
       "shape", -1, -1, -1, {{"ggml_type", "q8_0"}}},
      // Two q8_0 blocks a row: Kp = 64, so 33..64 pad to it; 32 would leave
      // a whole block of padding, 65 needs a third block.
      {"V5 cols 32 of 64", {{"blocks", "U8", {1, 68}, Q8Rows()}}, {}, "GGST-003", "m.safetensors", "blocks", "cols",
       -1, -1, -1, {{"ggml_type", "q8_0"}, {"cols", "32"}}},
      {"V5 cols 65 of 64", {{"blocks", "U8", {1, 68}, Q8Rows()}}, {}, "GGST-003", "m.safetensors", "blocks", "cols",
       -1, -1, -1, {{"ggml_type", "q8_0"}, {"cols", "65"}}},
      {"V5 on the second block tensor", {{"a", "U8", {1, 68}, Q8Rows()}, {"b", "U8", {2, 34}, Q8Rows()}}, {},
       "GGST-003", "m.safetensors", "b", "cols", -1, -1, -1, {{"ggml_type", "q8_0"}, {"cols", "40"}}},
  };
  for (const RuleCase& c : cases) {
    const qdtest::Metadata* metadata = c.metadata.empty() ? nullptr : &c.metadata;
    const Bytes file = qdtest::SafetensorsFile(c.tensors, metadata);
    const std::int64_t data_start = 8 + static_cast<std::int64_t>(file[0] | (file[1] << 8));
    const Read r = ReadBoth(c.tensors, c.configs, metadata);
    for (const qd::Outcome* o : {&r.codec, &r.oracle}) {
      ASSERT_TRUE(o->refused) << c.what;
      ASSERT_EQ(o->findings.size(), 1u) << c.what;
      const qd::Finding& f = o->findings.back();
      EXPECT_EQ(f.rule, c.rule) << c.what;
      EXPECT_EQ(f.file, c.file) << c.what;
      EXPECT_EQ(f.tensor, c.tensor) << c.what;
      EXPECT_EQ(f.field, c.field) << c.what;
      EXPECT_EQ(f.row, c.row) << c.what;
      EXPECT_EQ(f.block, c.block) << c.what;
      const bool header_fact = std::string(c.rule).rfind("GGST-1", 0) == 0 || std::string(c.rule) == "GGST-003" ||
                               !c.metadata.empty();
      const std::int64_t offset = c.data_byte >= 0 ? data_start + c.data_byte : header_fact ? 8 : -1;
      EXPECT_EQ(f.byte_offset, offset) << c.what;
    }
  }
}

TEST(GgmlSt, AnUnknownSiblingIsAWarning) {
  const Read r = ReadBoth({{"l.qweight", "U8", {2, 34}, Q8Rows()}, {"l.perm", "I32", {1}, Bytes(4, 0)}},
                          {Config("q8_0", 8)});
  for (const qd::Outcome* o : {&r.codec, &r.oracle}) {
    EXPECT_FALSE(o->refused);
    ASSERT_EQ(o->findings.size(), 1u);
    EXPECT_EQ(o->findings[0].rule, "GGST-103");
    EXPECT_EQ(o->findings[0].severity, qd::Severity::kWarning);
    EXPECT_EQ(o->findings[0].field, "perm");
    EXPECT_EQ(o->tensors.size(), 1u);  // l.weight; the I32 sibling is left out
  }
}

// Section 7: the block-vector layout is found by __metadata__ ggml_type
// alone; its U8 tensors decode under their own names (a qweight too: no
// layer, no config), floating tensors are widened.
TEST(GgmlSt, BlockVectorLayoutDecodesEachU8TensorUnderItsName) {
  const qdtest::Metadata metadata = {{"ggml_type", "q8_0"}, {"rows", "2"}};
  const Bytes half_one_f32 = {0, 0, 0, 0x3F};  // 0.5f
  const Bytes rows = Q8Rows();
  const std::vector<RawTensor> tensors = {{"input", "F32", {1}, half_one_f32},
                                          {"blocks", "U8", {2, 34}, rows},
                                          {"l.qweight", "U8", {1, 34}, Bytes(rows.begin(), rows.begin() + 34)}};
  const Bytes file = qdtest::SafetensorsFile(tensors, &metadata);
  EXPECT_EQ(qd::harness::DetectFormat({file.data(), file.size()}, {}).name, "ggml_st");
  EXPECT_EQ(qd::harness::OracleDetectFormat({file.data(), file.size()}, {}).name, "ggml_st");
  const Read r = ReadBoth(tensors, {}, &metadata);
  for (const qd::Outcome* o : {&r.codec, &r.oracle}) {
    ASSERT_FALSE(o->refused) << (o->findings.empty() ? "" : o->findings[0].rule);
    EXPECT_TRUE(o->findings.empty());
    ASSERT_EQ(o->tensors.size(), 3u);
    EXPECT_EQ(o->tensors[0].name, "input");
    EXPECT_EQ(o->tensors[0].values, std::vector<float>{0.5f});
    EXPECT_EQ(o->tensors[1].name, "blocks");
    EXPECT_EQ(o->tensors[2].name, "l.qweight");
    EXPECT_EQ(o->tensors[1].shape, (std::vector<std::uint64_t>{2, 32}));
    EXPECT_EQ(o->tensors[2].shape, (std::vector<std::uint64_t>{1, 32}));
    for (int i = 0; i < 32; ++i) {  // Q8Rows: (i - 16) / 2, then -3
      EXPECT_EQ(o->tensors[1].values[i], (i - 16) / 2.0f) << i;
      EXPECT_EQ(o->tensors[1].values[32 + i], -3.0f) << i;
      EXPECT_EQ(o->tensors[2].values[i], (i - 16) / 2.0f) << i;
    }
  }
}

// Section 7's cols (K): the padded columns K .. Kp-1 are dropped. One q4_0
// row of two blocks (docs/ggml_blocks.md 3.1, y = (nibble - 8) * d, low
// nibbles weights 0..15, high 16..31): block 0 d = 1, bytes 0x98: 0 x16,
// 1 x16; block 1 d = 2, bytes 0x9A: 4 x16, 2 x16. Kp = 64; K = 40 keeps
// the first 8 weights of block 1, all 4, and drops the 2s.
TEST(GgmlSt, BlockVectorColsDropsThePaddingColumns) {
  const Bytes q = Q4_0Row(0x9A);
  const qdtest::Metadata metadata = {{"ggml_type", "q4_0"}, {"cols", "040"}};
  const Read r = ReadBoth({{"blocks", "U8", {1, 36}, q}}, {}, &metadata);
  std::vector<float> expected(16, 0.0f);
  expected.insert(expected.end(), 16, 1.0f);
  expected.insert(expected.end(), 8, 4.0f);
  for (const qd::Outcome* o : {&r.codec, &r.oracle}) {
    ASSERT_FALSE(o->refused);
    ASSERT_EQ(o->tensors.size(), 1u);
    EXPECT_EQ(o->tensors[0].shape, (std::vector<std::uint64_t>{1, 40}));
    EXPECT_EQ(o->tensors[0].values, expected);
  }
}

// Section 7 codec against oracle on random block bytes of every type (NaN
// scales included), random row and block counts and cols inside and just
// outside Kp - QK < cols <= Kp: same verdict, finding, shapes and bits
// (NaN as NaN, docs/ggml_blocks.md 1.3).
TEST(GgmlSt, BlockVectorCodecAndOracleAgreeOnRandomBlocks) {
  std::mt19937_64 rng(12);
  int accepted = 0, refused = 0;
  for (const Geometry& g : kTypes) {
    for (int round = 0; round < 12; ++round) {
      const std::uint64_t rows = 1 + rng() % 3;
      const std::uint64_t blocks = 1 + rng() % 3;
      const std::uint64_t padded = blocks * g.values;
      // Kp - QK - 1 .. Kp + 1: one value each side of the accepted range
      // (with one block Kp - QK - 1 wraps to 2^64 - 1: 20 digits, V2's case).
      const std::uint64_t cols = padded - g.values - 1 + rng() % (g.values + 3);
      Bytes data(rows * blocks * g.bytes);
      for (std::uint8_t& b : data) b = static_cast<std::uint8_t>(rng());
      const qdtest::Metadata metadata = {{"ggml_type", g.type}, {"cols", std::to_string(cols)}};
      const Read r = ReadBoth({{"w", "U8", {rows, blocks * g.bytes}, data}}, {}, &metadata);
      const std::string what = std::string(g.type) + " cols " + std::to_string(cols) + " of " + std::to_string(padded);
      ASSERT_EQ(r.codec.refused, r.oracle.refused) << what;
      const bool in_range = cols <= padded && cols + g.values > padded;
      EXPECT_EQ(r.codec.refused, !in_range) << what;
      if (r.codec.refused) {
        ++refused;
        EXPECT_EQ(r.codec.findings.back().rule, "GGST-003") << what;
        EXPECT_EQ(r.oracle.findings.back().rule, "GGST-003") << what;
        EXPECT_EQ(r.oracle.findings.back().field, "cols") << what;
        continue;
      }
      ++accepted;
      ASSERT_EQ(r.codec.tensors.size(), 1u) << what;
      ASSERT_EQ(r.oracle.tensors.size(), 1u) << what;
      EXPECT_EQ(r.codec.tensors[0].shape, (std::vector<std::uint64_t>{rows, cols})) << what;
      EXPECT_EQ(r.oracle.tensors[0].shape, r.codec.tensors[0].shape) << what;
      const std::vector<float>& c = r.codec.tensors[0].values;
      const std::vector<float>& o = r.oracle.tensors[0].values;
      ASSERT_EQ(c.size(), o.size()) << what;
      for (std::size_t i = 0; i < c.size(); ++i) {
        const bool same = std::bit_cast<std::uint32_t>(c[i]) == std::bit_cast<std::uint32_t>(o[i]) ||
                          (std::isnan(c[i]) && std::isnan(o[i]));
        ASSERT_TRUE(same) << what << " value " << i;
      }
    }
  }
  EXPECT_GT(accepted, 60);
  EXPECT_GT(refused, 3);
}

// The generator's block-vector files (section 7; the campaign, fuzz seeds
// and vectors draw them): every block type, with and without cols, detected
// as ggml_st and accepted by both readers with no finding; `blocks` decoded
// to [rows, W], W = cols (the `input` tensor's K) when present, else the
// padded row (a multiple of QK, K <= W < K + QK); codec and oracle agree.
// Each rule section 7 checks, broken by the generator, is refused by both
// with that rule.
TEST(GgmlSt, GeneratedBlockVectorFilesOfEveryTypeAndRule) {
  const qd::harness::FormatEntry& f = *qd::harness::FindFormat("ggml_st");
  for (const Geometry& g : kTypes) {
    for (const bool with_cols : {false, true}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        qd::harness::Rng rng(seed);
        const qd::gen::Generated gen = qd::gen::GgmlStBlockVectorsValid(rng, g.type, with_cols);
        const std::string what = gen.description + " seed " + std::to_string(seed);
        const qd::ByteView view{gen.bytes.data(), gen.bytes.size()};
        EXPECT_EQ(qd::harness::DetectFormat(view, {}).name, "ggml_st") << what;
        EXPECT_EQ(gen.description.find(g.type) != std::string::npos, true) << what;
        const qd::Outcome codec = f.codec_read(view, "g.safetensors", {});
        const qd::Outcome oracle = f.oracle_read(view, "g.safetensors", {});
        ASSERT_FALSE(codec.refused) << what << ": " << codec.findings.back().rule;
        ASSERT_FALSE(oracle.refused) << what << ": " << oracle.findings.back().rule;
        EXPECT_TRUE(codec.findings.empty() && oracle.findings.empty()) << what;
        EXPECT_FALSE(qd::harness::Compare(codec, oracle, "ggml_st").has_value()) << what;
        ASSERT_GE(codec.tensors.size(), 2u) << what;
        ASSERT_EQ(codec.tensors[0].name, "input") << what;
        ASSERT_EQ(codec.tensors[1].name, "blocks") << what;
        const std::vector<std::uint64_t>& input = codec.tensors[0].shape;
        const std::vector<std::uint64_t>& blocks = codec.tensors[1].shape;
        ASSERT_EQ(blocks.size(), 2u) << what;
        EXPECT_EQ(blocks[0], input[0]) << what;
        if (with_cols) {
          EXPECT_EQ(blocks[1], input[1]) << what;
        } else {
          EXPECT_EQ(blocks[1] % g.values, 0u) << what;
          EXPECT_TRUE(blocks[1] >= input[1] && blocks[1] < input[1] + g.values) << what;
        }
      }
    }
  }
  for (const std::string& rule : qd::gen::GgmlStBlockVectorsViolableRules()) {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
      qd::harness::Rng rng(seed);
      const qd::gen::Generated gen = qd::gen::GgmlStBlockVectorsViolation(rule, rng);
      const qd::ByteView view{gen.bytes.data(), gen.bytes.size()};
      const std::string what = gen.description + " seed " + std::to_string(seed);
      EXPECT_EQ(gen.expected_rule, rule) << what;
      EXPECT_EQ(qd::harness::DetectFormat(view, {}).name, "ggml_st") << what;
      const qd::Outcome codec = f.codec_read(view, "g.safetensors", {});
      const qd::Outcome oracle = f.oracle_read(view, "g.safetensors", {});
      ASSERT_TRUE(codec.refused && oracle.refused) << what;
      EXPECT_EQ(codec.findings.back().rule, rule) << what;
      EXPECT_EQ(oracle.findings.back().rule, rule) << what;
    }
  }
}

}  // namespace
