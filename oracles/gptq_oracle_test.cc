// gptq_oracle_test.cc: hand-computed cases for the oracle GPTQ reader and
// packer (oracles/gptq.cc). Every expected value comes from docs/gptq.md,
// worked out by hand in the comments, never from running the code.
//
// The config rules are in gptq_config_oracle_test.cc; the files are built
// by gptq_oracle_test_files.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "oracles/gptq.h"
#include "quantdiff/plain_data.h"
#include "oracles/gptq_oracle_test_files.h"

namespace qd::oracle {
namespace {

using namespace gptq_test_files;  // NOLINT: the shared file builders

// ---------------------------------------------------------------------------
// Section 4: continuous fields.

// 3-bit, K = 32, N = 32: qweight [3, 32]; column n is words (0, n), (1, n),
// (2, n). Column 0 by hand:
//   word0 = 0x40000003: field 0 = bits 0..2 = 3; bit 30 = 1, bit 31 = 0 (the
//           low two bits of field 10: 0b01)
//   word1 = 0x00000001: bit 0 = 1 (the high bit of field 10) -> field 10 =
//           0b101 = 5; bit 31 = 0 (the low bit of field 21)
//   word2 = 0xE0000003: bits 0..1 = 0b11 (the high bits of field 21) ->
//           field 21 = 0b110 = 6; bits 29..31 = field 31 = 7
// Column 1: word0 = 0xFFFFFFFF, words 1, 2 = 0: fields 0..9 = 7, field 10 =
// bits 30..31 of word0 and bit 0 of word1 = 0b011 = 3, fields 11..31 = 0.
TEST(GptqOracleFields, ThreeBitStraddlesAtFields10And21) {
  LayerSpec s;
  s.bits = 3;
  s.k = 32;
  s.g = 1;
  s.qweight.assign(3 * 32, 0);
  s.qweight[0 * 32 + 0] = 0x40000003u;
  s.qweight[1 * 32 + 0] = 0x00000001u;
  s.qweight[2 * 32 + 0] = 0xE0000003u;
  s.qweight[0 * 32 + 1] = 0xFFFFFFFFu;
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome o = Read(Layer(s), R"({"bits": 3, "group_size": -1})", &layers);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(layers.size(), 1u);
  const GptqLayerCodes& l = layers[0];
  EXPECT_EQ(l.prefix, "l.");
  EXPECT_EQ(l.in_features, 32);
  EXPECT_EQ(l.out_features, 32);
  EXPECT_EQ(l.groups, 1);
  ASSERT_EQ(l.codes.size(), 32u * 32u);
  for (int k = 0; k < 32; ++k) {
    const int want0 = k == 0 ? 3 : k == 10 ? 5 : k == 21 ? 6 : k == 31 ? 7 : 0;
    const int want1 = k < 10 ? 7 : k == 10 ? 3 : 0;
    EXPECT_EQ(l.codes[k * 32 + 0], want0) << "k " << k;
    EXPECT_EQ(l.codes[k * 32 + 1], want1) << "k " << k;
    EXPECT_EQ(l.codes[k * 32 + 2], 0) << "k " << k;
  }
}

// 3-bit zero fields straddle the same way along a qzeros row: N = 32, 3
// words per row; row 0 = {0x80000000, 0x00000001, 0x00000000}: field 10 =
// bits 30..31 of word0 (0b10) and bit 0 of word1 (1 -> 0b100) = 6. Format
// gptq_v2, so zero = field = 6; every other zero is 0 (field 11 = bits 1..3
// of word1 = 0).
TEST(GptqOracleFields, ThreeBitZeroFieldStraddles) {
  LayerSpec s;
  s.bits = 3;
  s.k = 32;
  s.g = 1;
  s.qzeros = {0x80000000u, 0x00000001u, 0};
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome o =
      Read(Layer(s), R"({"bits": 3, "group_size": -1, "format": "gptq_v2"})", &layers);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(layers[0].zeros.size(), 32u);
  for (int n = 0; n < 32; ++n) EXPECT_EQ(layers[0].zeros[n], n == 10 ? 6 : 0) << n;
}

// 2, 4, 8 bits: field j of a word at bit j * b.
//   b = 2: word 0xE4 = 0b11100100 -> fields 0..3 = 0, 1, 2, 3
//   b = 4: word 0x87654321 -> fields 0..7 = 1..8
//   b = 8: word 0x04030201 -> fields 0..3 = 1..4
// Column 0, row 0 holds the word; row 1 of column 0 holds 0x80000000: the
// top bit of its top field, field 2 * 32 / b - 1, which is then 2^(b-1) (2 for
// b = 2, 8 for b = 4, 128 for b = 8).
TEST(GptqOracleFields, TwoFourEightBitFieldPositions) {
  const struct {
    int bits;
    std::uint32_t word;
    std::vector<int> fields;
    int top;
  } cases[] = {{2, 0xE4u, {0, 1, 2, 3}, 2},
               {4, 0x87654321u, {1, 2, 3, 4, 5, 6, 7, 8}, 8},
               {8, 0x04030201u, {1, 2, 3, 4}, 128}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.bits);
    LayerSpec s;
    s.bits = c.bits;
    s.k = 32;
    s.g = 1;
    s.qweight.assign(static_cast<std::size_t>(c.bits) * 32, 0);  // [b, 32]
    s.qweight[0] = c.word;
    s.qweight[32] = 0x80000000u;  // row 1, column 0
    std::vector<GptqLayerCodes> layers;
    const qd::Outcome o = Read(
        Layer(s), R"({"bits": )" + std::to_string(c.bits) + R"(, "group_size": -1})", &layers);
    ASSERT_FALSE(o.refused) << Describe(o);
    const int per_word = 32 / c.bits;
    for (int k = 0; k < 32; ++k) {
      int want = 0;
      if (k < static_cast<int>(c.fields.size())) want = c.fields[k];
      if (k == 2 * per_word - 1) want = c.top;
      EXPECT_EQ(layers[0].codes[k * 32], want) << "k " << k;
    }
  }
}

// ---------------------------------------------------------------------------
// Section 4: planar fields (format gptq_p).

struct PlanarCase {
  int bits;
  std::vector<std::pair<int, std::uint32_t>> words;  // (word index in column 0, value)
  std::vector<std::pair<int, int>> fields;           // (field k, value)
};

// Planes 3 = [2, 1], 5 = [4, 1], 6 = [4, 2], 7 = [4, 2, 1]; block of 32
// fields over b words, plane j at word W_j + t / (32 / p_j), shift
// (t % (32 / p_j)) * p_j.
//   b = 3: field 0 = 0b101: word0 bits 0..1 = 01, word2 bit 0 = 1.
//          field 17 = 0b110: plane 0 word 17/16 = 1 shift 2 -> word1 = 0b10 << 2
//          = 0x8; plane 1 word 2 bit 17 -> word2 |= 0x20000. word2 = 0x20001.
//   b = 5: field 9 = 0b10011 = 19: plane 0 word 1 shift 4 -> word1 = 0x30;
//          plane 1 word 4 bit 9 -> 0x200. field 31 = 16: word4 |= 0x80000000
//          (plane 0 word 3 shift 28 = 0).
//   b = 6: field 20 = 0b110101 = 53: plane 0 word 2 shift 16 -> 0x50000;
//          plane 1 word 4 + 20/16 = 5 shift 8 -> 0b11 << 8 = 0x300.
//   b = 7: field 30 = 0b1011010 = 90: plane 0 word 3 shift 24 -> 0xA000000;
//          plane 1 word 5 shift 28 -> 0b01 << 28 = 0x10000000; plane 2 word 6
//          bit 30 -> 0x40000000.
TEST(GptqOracleFields, PlanarPlanes) {
  const std::vector<PlanarCase> cases = {
      {3, {{0, 0x1u}, {1, 0x8u}, {2, 0x20001u}}, {{0, 5}, {17, 6}}},
      {5, {{1, 0x30u}, {4, 0x80000200u}}, {{9, 19}, {31, 16}}},
      {6, {{2, 0x50000u}, {5, 0x300u}}, {{20, 53}}},
      {7, {{3, 0xA000000u}, {5, 0x10000000u}, {6, 0x40000000u}}, {{30, 90}}},
  };
  for (const PlanarCase& c : cases) {
    SCOPED_TRACE(c.bits);
    LayerSpec s;
    s.bits = c.bits;
    s.k = 32;
    s.g = 1;
    s.qweight.assign(static_cast<std::size_t>(c.bits) * 32, 0);
    for (const auto& [row, value] : c.words) s.qweight[row * 32] = value;
    std::vector<GptqLayerCodes> layers;
    const qd::Outcome o = Read(Layer(s),
                               R"({"bits": )" + std::to_string(c.bits) +
                                   R"(, "group_size": -1, "format": "gptq_p"})",
                               &layers);
    ASSERT_FALSE(o.refused) << Describe(o);
    for (int k = 0; k < 32; ++k) {
      int want = 0;
      for (const auto& [field, value] : c.fields) {
        if (field == k) want = value;
      }
      EXPECT_EQ(layers[0].codes[k * 32], want) << "k " << k;
    }
  }
}

// A second block: b = 3, K = 64. Field 40 is block 1 (words 3..5), t = 8:
// plane 0 word 3 + 8/16 = 3, shift 16; plane 1 word 5, bit 8. Field 40 =
// 0b111: word3 = 0x30000, word5 = 0x100.
TEST(GptqOracleFields, PlanarSecondBlock) {
  LayerSpec s;
  s.bits = 3;
  s.k = 64;
  s.g = 1;
  s.qweight.assign(6 * 32, 0);
  s.qweight[3 * 32] = 0x30000u;
  s.qweight[5 * 32] = 0x100u;
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome o =
      Read(Layer(s), R"({"bits": 3, "group_size": -1, "format": "gptq_p"})", &layers);
  ASSERT_FALSE(o.refused) << Describe(o);
  for (int k = 0; k < 64; ++k) EXPECT_EQ(layers[0].codes[k * 32], k == 40 ? 7 : 0) << k;
}

// ---------------------------------------------------------------------------
// Section 5: zeros.

// b = 4, N = 32, G = 2: qzeros [2, 4]. Row 0 word 1 = 0xF0: fields 8..15 of
// the row are in word 1, field 9 at bits 4..7 = 15 = mask(4). Row 1 word 0 =
// 0x00000021: field 0 = 1, field 1 = 2.
//   v1: zero = field + 1 unmasked: (0, 9) = 16, (1, 0) = 2, (1, 1) = 3, the
//       rest 1; GPTQ-107 once, at (0, 9): qzeros begins at 4 * 8 * 32 = 1024,
//       j = 4 * (0 * 4 + 9 * 4 / 32) = 4 -> byte_offset kData + 1028.
//   v2: zero = field: 15, 1, 2, the rest 0; no warning.
TEST(GptqOracleZeros, V1AddsOneUnmaskedAndWarns) {
  LayerSpec s;
  s.qzeros = {0, 0xF0u, 0, 0, 0x21u, 0, 0, 0};
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome v1 = Read(Layer(s), kV1, &layers);
  ASSERT_FALSE(v1.refused) << Describe(v1);
  ASSERT_EQ(v1.findings.size(), 1u) << Describe(v1);
  ExpectFinding(v1.findings[0], "GPTQ-107", qd::Severity::kWarning, kFile, "l.qzeros", "qzeros",
                kData + 1028, 0, 9);
  ASSERT_EQ(layers[0].zeros.size(), 64u);
  for (int g = 0; g < 2; ++g) {
    for (int n = 0; n < 32; ++n) {
      int want = 1;
      if (g == 0 && n == 9) want = 16;
      if (g == 1 && n == 0) want = 2;
      if (g == 1 && n == 1) want = 3;
      EXPECT_EQ(layers[0].zeros[g * 32 + n], want) << g << "," << n;
    }
  }
  // Dequant of (n = 9, k = 0): code 0, zero 16, scale 1.0 -> -16.0.
  ASSERT_EQ(v1.tensors.size(), 1u);  // l.weight alone: the scales are the layer's
  EXPECT_EQ(v1.tensors[0].name, "l.weight");
  EXPECT_EQ(v1.tensors[0].values[9 * 64 + 0], -16.0f);

  const qd::Outcome v2 = Read(Layer(s), kV2, &layers);
  ASSERT_FALSE(v2.refused) << Describe(v2);
  EXPECT_TRUE(v2.findings.empty()) << Describe(v2);
  EXPECT_EQ(layers[0].zeros[9], 15);
  EXPECT_EQ(layers[0].zeros[32], 1);
  EXPECT_EQ(layers[0].zeros[33], 2);
  EXPECT_EQ(layers[0].zeros[0], 0);
}

// GPTQ-107 names the word holding the field's lowest bit, once per layer:
// b = 3, row 1 field 10 = mask(3) across words 0 and 1 of the row ({0xC0000000,
// 1, 0}), and row 1 field 21 = 7 as well (word1 bit 31, word2 bits 0..1).
// qweight [12, 32] is 1536 bytes, so qzeros begins at 1536; row 1 word 0 is
// j = 4 * (1 * 3 + 10 * 3 / 32) = 12 -> kData + 1548. Zero (1, 10) = 8.
TEST(GptqOracleZeros, V1StraddlingMaskWarnsAtItsLowWord) {
  LayerSpec s;
  s.bits = 3;
  s.k = 128;
  s.g = 2;
  s.qzeros = {0, 0, 0, 0xC0000000u, 0x80000001u, 0x3u};
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome o = Read(Layer(s), R"({"bits": 3, "group_size": 64})", &layers);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 1u) << Describe(o);
  ExpectFinding(o.findings[0], "GPTQ-107", qd::Severity::kWarning, kFile, "l.qzeros", "qzeros",
                kData + 1548, 1, 10);
  EXPECT_EQ(layers[0].zeros[32 + 10], 8);
  EXPECT_EQ(layers[0].zeros[32 + 21], 8);
  EXPECT_EQ(layers[0].zeros[32 + 11], 1);
}

// ---------------------------------------------------------------------------
// Section 6: dequantization.

// v2, b = 4, K = 32, N = 32, G = 1, column n = 0..3 with code/zero/scale:
//   n 0: code 0, zero 0, scale -2.0 (F16 0xC000): d = +0.0 -> +0.0 * -2 = -0.0
//   n 1: code 0, zero 1, scale -0.5 (0xB800): d = -1 -> +0.5
//   n 2: code 15, zero 0, scale F16 subnormal 0x0001 = 2^-24: 15 * 2^-24
//   n 3: code 2, zero 2, scale +1.0: +0.0
// codes at k = 0: qweight row 0 word of column n holds field 0 = code.
// zeros: qzeros row 0 word 0 = field 1 (n = 1) = 1 -> 0x10.
TEST(GptqOracleDequant, SignsAndSubnormals) {
  LayerSpec s;
  s.k = 32;
  s.g = 1;
  s.qweight.assign(4 * 32, 0);
  s.qweight[2] = 15;
  s.qweight[3] = 2;
  s.qzeros = {0x2010u, 0, 0, 0};  // field 1 = 1, field 3 = 2
  s.scales.assign(32, 0x3C00);
  s.scales[0] = 0xC000;
  s.scales[1] = 0xB800;
  s.scales[2] = 0x0001;
  const qd::Outcome o = Read(Layer(s), R"({"bits": 4, "group_size": -1, "format": "gptq_v2"})");
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.tensors[0].name, "l.weight");
  const std::vector<float>& w = o.tensors[0].values;  // [N, K]
  EXPECT_EQ(o.tensors[0].shape, (std::vector<std::uint64_t>{32, 32}));
  EXPECT_EQ(Bits(w[0 * 32 + 0]), 0x80000000u);   // -0.0
  EXPECT_EQ(Bits(w[0 * 32 + 1]), 0x80000000u);   // k 1: code 0 zero 0 too
  EXPECT_EQ(Bits(w[1 * 32 + 0]), 0x3F000000u);   // +0.5
  EXPECT_EQ(w[2 * 32 + 0], 15.0f * std::ldexp(1.0f, -24));
  // 15 * 2^-24 = 1.875 * 2^-21: exponent 127 - 21 = 106 (0x35000000),
  // mantissa 0.875 (0x700000).
  EXPECT_EQ(Bits(w[2 * 32 + 0]), 0x35700000u);
  EXPECT_EQ(Bits(w[3 * 32 + 0]), 0x00000000u);   // +0.0
}

// F32 scales round once: d = 3, s = 0x3F800001 (1 + 2^-23): 3 + 3 * 2^-23 is
// 1.5 ulp (ulp 2^-22 in [2, 4)) above 3, a tie between 3 + 2^-22 (mantissa
// ...01) and 3 + 2^-21 (...10): even -> 0x40400002. Overflow: d = 255
// (b = 8, code 255, zero 0) times 0x7F7FFFFF -> +infinity. BF16 0x4040 = 3.0.
TEST(GptqOracleDequant, F32RoundsToNearestEvenAndOverflows) {
  const Bytes qweight = [] {
    std::vector<std::uint32_t> words(8 * 32, 0);
    words[0] = 3;    // column 0, k 0: code 3
    words[1] = 255;  // column 1, k 0: code 255
    words[2] = 1;    // column 2, k 0: code 1
    return I32(words);
  }();
  std::vector<std::uint32_t> scale_bits(32, 0x3F800000u);
  scale_bits[0] = 0x3F800001u;
  scale_bits[1] = 0x7F7FFFFFu;
  const std::vector<T> tensors = {
      {"l.qweight", "I32", {8, 32}, qweight},
      {"l.qzeros", "I32", {1, 8}, I32(std::vector<std::uint32_t>(8, 0))},
      {"l.scales", "F32", {1, 32}, I32(scale_bits)},
      {"l.g_idx", "I32", {32}, I32(std::vector<std::uint32_t>(32, 0))}};
  const qd::Outcome o = Read(tensors, R"({"bits": 8, "group_size": -1, "format": "gptq_v2"})");
  ASSERT_FALSE(o.refused) << Describe(o);
  const std::vector<float>& w = o.tensors[0].values;
  EXPECT_EQ(Bits(w[0 * 32 + 0]), 0x40400002u);
  EXPECT_EQ(Bits(w[1 * 32 + 0]), 0x7F800000u);
  EXPECT_EQ(Bits(w[2 * 32 + 0]), 0x3F800000u);

  // BF16 scales widen exactly: 0x4040 = 3.0; code 1 - zero 0 -> 3.0.
  std::vector<std::uint16_t> bf16(32, 0x3F80);
  bf16[2] = 0x4040;
  std::vector<T> with_bf16 = tensors;
  with_bf16[2] = {"l.scales", "BF16", {1, 32}, U16(bf16)};
  const qd::Outcome b = Read(with_bf16, R"({"bits": 8, "group_size": -1, "format": "gptq_v2"})");
  ASSERT_FALSE(b.refused) << Describe(b);
  EXPECT_EQ(b.tensors[0].values[2 * 32 + 0], 3.0f);
}

// g = g_idx[k] picks the scale and zero, in any order (act order).
// K = 64, G = 2, g_idx = 1 for k < 32 and 0 after; scales row 0 = 1.0,
// row 1 = 2.0 (0x4000); v1 zeros all field 0 -> zero 1; codes 0: out = -1 *
// scale -> -2.0 for k < 32, -1.0 after.
TEST(GptqOracleDequant, GIdxSelectsGroups) {
  LayerSpec s;
  s.scales.assign(64, 0x3C00);
  for (int n = 0; n < 32; ++n) s.scales[32 + n] = 0x4000;
  s.g_idx.assign(64, 0);
  for (int k = 0; k < 32; ++k) s.g_idx[k] = 1;
  const qd::Outcome o = Read(Layer(s), kV1);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_EQ(o.tensors[0].values[5 * 64 + 3], -2.0f);
  EXPECT_EQ(o.tensors[0].values[5 * 64 + 40], -1.0f);
}

// ---------------------------------------------------------------------------
// Section 7: decoded output.

// Order (begin, end, name) of the source; layers give P+weight at their
// qweight; every other floating tensor is widened (the bias; a layer's scales
// are consumed by its weight); integer tensors outside layers are left out.
//   a.dense F16 [2] = {1.0, -2.0}, begins 0
//   l.* (qweight, qzeros, scales F16, g_idx), then l.bias BF16 [32] = 0.5
//   z.ids I32 [1] (dropped)
TEST(GptqOracleOutput, TensorsInDataOrder) {
  std::vector<T> tensors = {{"a.dense", "F16", {2}, U16({0x3C00, 0xC000})}};
  LayerSpec s;
  s.k = 32;
  s.g = 1;
  for (const T& t : Layer(s)) tensors.push_back(t);
  tensors.push_back({"l.bias", "BF16", {32}, U16(std::vector<std::uint16_t>(32, 0x3F00))});
  tensors.push_back({"z.ids", "I32", {1}, I32({7})});
  const qd::Outcome o = Read(tensors, kV1);
  ASSERT_FALSE(o.refused) << Describe(o);
  EXPECT_TRUE(o.findings.empty()) << Describe(o);
  ASSERT_EQ(o.tensors.size(), 3u);
  EXPECT_EQ(o.tensors[0].name, "a.dense");
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(o.tensors[1].name, "l.weight");
  EXPECT_EQ(o.tensors[1].shape, (std::vector<std::uint64_t>{32, 32}));
  EXPECT_EQ(o.tensors[2].name, "l.bias");
  EXPECT_EQ(o.tensors[2].values[31], 0.5f);
}

// A file with no layer is accepted (the config steps still run).
TEST(GptqOracleOutput, NoLayerIsAcceptedButNeedsAConfig) {
  const std::vector<T> tensors = {{"norm.weight", "F16", {1}, U16({0x3C00})}};
  const qd::Outcome o = Read(tensors, kV1);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].values[0], 1.0f);
  ExpectOnlyError(Read(tensors, std::vector<qd::SideFile>{}), "CFG-003", kFile, "", "config", -1);
}

// The container refuses first: a 4-byte file is ST-001 whatever the config.
TEST(GptqOracleOutput, ContainerRulesRunFirst) {
  const Bytes file = {1, 2, 3, 4};
  const qd::Outcome o = ReadGptqFile(qd::ByteView{file.data(), file.size()}, kFile, {});
  ASSERT_TRUE(o.refused);
  EXPECT_EQ(o.findings.back().rule, "ST-001");
}

// ---------------------------------------------------------------------------
// Layer rules. The default layer (b = 4, K = 64, N = 32, G = 2) is laid out
// qweight [8, 32] at 0 (1024 bytes), qzeros [2, 4] at 1024 (32 bytes),
// scales F16 [2, 32] at 1056 (128 bytes), g_idx [64] at 1184 (256 bytes).

TEST(GptqOracleLayer, Gptq101MissingMember) {
  std::vector<T> t = SmallLayer();
  t.pop_back();  // no l.g_idx
  ExpectOnlyError(Read(t, kV1), "GPTQ-101", kFile, "l.qweight", "g_idx", 8);
  // No qweight: the anchor is the first present of qzeros, scales, g_idx.
  std::vector<T> u = SmallLayer();
  u.erase(u.begin(), u.begin() + 2);  // scales and g_idx only
  ExpectOnlyError(Read(u, kV1), "GPTQ-101", kFile, "l.scales", "qweight", 8);
  // A bare "qweight" (no dot) makes the layer with the empty prefix.
  ExpectOnlyError(Read({{"qweight", "I32", {8, 32}, I32(std::vector<std::uint32_t>(256, 0))}}, kV1),
                  "GPTQ-101", kFile, "qweight", "qzeros", 8);
}

TEST(GptqOracleLayer, Gptq102DenseWeightBesideTheLayer) {
  std::vector<T> t = SmallLayer();
  t.push_back({"l.weight", "F16", {1}, U16({0})});
  ExpectOnlyError(Read(t, kV1), "GPTQ-102", kFile, "l.weight", "weight", 8);
}

TEST(GptqOracleLayer, Gptq103UnknownSiblingsInDataOrder) {
  std::vector<T> t = {{"l.zz", "F32", {1}, I32({0x3F800000u})}};
  for (const T& m : SmallLayer()) t.push_back(m);
  t.push_back({"l.aa", "I32", {1}, I32({1})});
  t.push_back({"l.sub.x", "F16", {1}, U16({0})});  // prefix "l.sub.": not a sibling
  const qd::Outcome o = Read(t, kV1);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 2u) << Describe(o);
  ExpectFinding(o.findings[0], "GPTQ-103", qd::Severity::kWarning, kFile, "l.zz", "zz", 8);
  ExpectFinding(o.findings[1], "GPTQ-103", qd::Severity::kWarning, kFile, "l.aa", "aa", 8);
  // Read as ordinary tensors: l.zz (F32) is decoded, l.aa (I32) left out.
  ASSERT_EQ(o.tensors.size(), 3u);
  EXPECT_EQ(o.tensors[0].name, "l.zz");
  EXPECT_EQ(o.tensors[1].name, "l.weight");
  EXPECT_EQ(o.tensors[2].name, "l.sub.x");
}

TEST(GptqOracleLayer, Gptq104DtypeThenRank) {
  {
    std::vector<T> t = SmallLayer();
    t[0].dtype = "F32";
    ExpectOnlyError(Read(t, kV1), "GPTQ-104", kFile, "l.qweight", "dtype", 8);
  }
  {
    std::vector<T> t = SmallLayer();
    t[1].shape = {8};  // qzeros rank 1
    ExpectOnlyError(Read(t, kV1), "GPTQ-104", kFile, "l.qzeros", "shape", 8);
  }
  {
    std::vector<T> t = SmallLayer();
    t[2].dtype = "I16";
    ExpectOnlyError(Read(t, kV1), "GPTQ-104", kFile, "l.scales", "dtype", 8);
  }
  {
    std::vector<T> t = SmallLayer();
    t[3].shape = {64, 1};
    ExpectOnlyError(Read(t, kV1), "GPTQ-104", kFile, "l.g_idx", "shape", 8);
  }
  {
    std::vector<T> t = SmallLayer();
    t.push_back({"l.bias", "F64", {4}, Bytes(32, 0)});
    ExpectOnlyError(Read(t, kV1), "GPTQ-104", kFile, "l.bias", "dtype", 8);
  }
  {
    // qweight is checked before qzeros even when qzeros comes first in data.
    std::vector<T> t = SmallLayer();
    t[1].dtype = "F32";
    t[0].shape = {256};
    ExpectOnlyError(Read(t, kV1), "GPTQ-104", kFile, "l.qweight", "shape", 8);
  }
}

TEST(GptqOracleLayer, Gptq002QweightShape) {
  // Extra qweight row: Kq = 9 * 32 / 4 = 72, n_groups(72) = 3 != 2 scale rows
  // -> K = Kg = 64; 9 != 64 / 32 * 4.
  {
    std::vector<T> t = SmallLayer();
    t[0] = {"l.qweight", "I32", {9, 32}, I32(std::vector<std::uint32_t>(9 * 32, 0))};
    ExpectOnlyError(Read(t, kV1), "GPTQ-002", kFile, "l.qweight", "shape", 8);
  }
  // K not a multiple of 32: b = 4, qweight [5, 32] -> Kq = 40, gs -1 ->
  // n_groups = 1 = scale rows -> K = 40.
  {
    LayerSpec s;
    s.k = 32;
    s.g = 1;
    std::vector<T> t = Layer(s);
    t[0] = {"l.qweight", "I32", {5, 32}, I32(std::vector<std::uint32_t>(5 * 32, 0))};
    ExpectOnlyError(Read(t, R"({"bits": 4, "group_size": -1})"), "GPTQ-002", kFile, "l.qweight",
                    "shape", 8);
  }
  // Lying header: qweight [2^62, 0] holds no byte. Kq = 2^62 * 8 = 2^65 (needs
  // more than 64 bits), gs -1 -> 1 group = scales [1, 0] -> K = 2^65: a
  // multiple of 32 and rows = K / 32 * 4; qzeros [1, 0] fits; g_idx [0] is not
  // K long -> GPTQ-004 (shape), without overflow or allocation.
  {
    const std::vector<T> t = {{"l.qweight", "I32", {4611686018427387904ull, 0}, {}},
                              {"l.qzeros", "I32", {1, 0}, {}},
                              {"l.scales", "F16", {1, 0}, {}},
                              {"l.g_idx", "I32", {0}, {}}};
    ExpectOnlyError(Read(t, R"({"bits": 4, "group_size": -1})"), "GPTQ-004", kFile, "l.g_idx",
                    "shape", 8);
  }
}

// Lying header the other way: K = 0, G = 0, N = 2^62: every member is empty,
// the layer is accepted with an empty [2^62, 0] weight and nothing iterated.
TEST(GptqOracleLayer, EmptyLayerWithHugeOutFeatures) {
  const std::uint64_t n = 4611686018427387904ull;
  const std::vector<T> t = {{"l.qweight", "I32", {0, n}, {}},
                            {"l.qzeros", "I32", {0, n / 32 * 4}, {}},
                            {"l.scales", "F16", {0, n}, {}},
                            {"l.g_idx", "I32", {0}, {}}};
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome o = Read(t, kV1, &layers);
  ASSERT_FALSE(o.refused) << Describe(o);
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].shape, (std::vector<std::uint64_t>{n, 0}));
  EXPECT_TRUE(o.tensors[0].values.empty());
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_TRUE(layers[0].codes.empty());
  EXPECT_TRUE(layers[0].zeros.empty());
}

// The witness rule of section 2: Kq = 32 (qweight [4, 32]), Kg = 48, gs 32:
// n_groups(32) = 1 != 2 scale rows -> K = 48 -> GPTQ-002 (not a multiple of 32).
TEST(GptqOracleLayer, Gptq002WitnessRule) {
  LayerSpec s;
  s.k = 64;
  s.g = 2;
  std::vector<T> t = Layer(s);
  t[0] = {"l.qweight", "I32", {4, 32}, I32(std::vector<std::uint32_t>(4 * 32, 0))};
  t[3] = {"l.g_idx", "I32", {48}, I32(std::vector<std::uint32_t>(48, 0))};
  ExpectOnlyError(Read(t, kV1), "GPTQ-002", kFile, "l.qweight", "shape", 8);
  // Kq = 64 with 2 scale rows wins over Kg = 63: GPTQ-004 on the length.
  std::vector<T> u = SmallLayer();
  u[3] = {"l.g_idx", "I32", {63}, I32(std::vector<std::uint32_t>(63, 0))};
  ExpectOnlyError(Read(u, kV1), "GPTQ-004", kFile, "l.g_idx", "shape", 8);
}

TEST(GptqOracleLayer, Gptq003QzerosShape) {
  // N = 48 with qzeros [2, 4]: the literal 48 / 32 * 4 = 4 holds, but N is
  // not a multiple of 32.
  LayerSpec s;
  s.n = 48;
  std::vector<T> t = Layer(s);
  t[1] = {"l.qzeros", "I32", {2, 4}, I32(std::vector<std::uint32_t>(8, 0))};
  ExpectOnlyError(Read(t, kV1), "GPTQ-003", kFile, "l.qzeros", "shape", 8);
  // One column too many.
  std::vector<T> u = SmallLayer();
  u[1] = {"l.qzeros", "I32", {2, 5}, I32(std::vector<std::uint32_t>(10, 0))};
  ExpectOnlyError(Read(u, kV1), "GPTQ-003", kFile, "l.qzeros", "shape", 8);
  // One group row too many: G = 2 from K = 64, gs 32.
  std::vector<T> v = SmallLayer();
  v[1] = {"l.qzeros", "I32", {3, 4}, I32(std::vector<std::uint32_t>(12, 0))};
  ExpectOnlyError(Read(v, kV1), "GPTQ-003", kFile, "l.qzeros", "shape", 8);
}

TEST(GptqOracleLayer, Gptq105ScalesThenBias) {
  // scales [2, 31] -> Kq = 64 and n_groups(64) = 2 = scale rows, K = 64;
  // qzeros fine; scales [2, 31] != [2, 32].
  std::vector<T> t = SmallLayer();
  t[2] = {"l.scales", "F16", {2, 31}, U16(std::vector<std::uint16_t>(62, 0x3C00))};
  ExpectOnlyError(Read(t, kV1), "GPTQ-105", kFile, "l.scales", "shape", 8);
  std::vector<T> u = SmallLayer();
  u.push_back({"l.bias", "F16", {31}, U16(std::vector<std::uint16_t>(31, 0))});
  ExpectOnlyError(Read(u, kV1), "GPTQ-105", kFile, "l.bias", "shape", 8);
}

TEST(GptqOracleLayer, Gptq004GIdxValues) {
  // g_idx at 1184: k = 3 at j = 12 -> kData + 1196; I32 read signed.
  std::vector<T> t = SmallLayer();
  std::vector<std::uint32_t> g_idx(64, 0);
  g_idx[3] = 0xFFFFFFFFu;  // -1
  g_idx[7] = 2;            // = G
  t[3] = {"l.g_idx", "I32", {64}, I32(g_idx)};
  ExpectOnlyError(Read(t, kV1), "GPTQ-004", kFile, "l.g_idx", "g_idx", kData + 1196, -1, 3);
  g_idx[3] = 1;  // k = 7 at j = 28 -> kData + 1212
  t[3] = {"l.g_idx", "I32", {64}, I32(g_idx)};
  ExpectOnlyError(Read(t, kV1), "GPTQ-004", kFile, "l.g_idx", "g_idx", kData + 1212, -1, 7);
  // Unsorted, unused groups: accepted (g_idx all 1).
  t[3] = {"l.g_idx", "I32", {64}, I32(std::vector<std::uint32_t>(64, 1))};
  EXPECT_FALSE(Read(t, kV1).refused);
}

TEST(GptqOracleLayer, Gptq106NonFiniteScale) {
  // scales at 1056: (1, 5) at j = (1 * 32 + 5) * 2 = 74 -> kData + 1130.
  LayerSpec s;
  s.scales.assign(64, 0x3C00);
  s.scales[32 + 5] = 0x7E00;  // NaN
  s.scales[32 + 9] = 0x7C00;  // +inf, later
  ExpectOnlyError(Read(Layer(s), kV1), "GPTQ-106", kFile, "l.scales", "scales", kData + 1130, 1,
                  5);
  // F32 scales: (0, 2) at j = 8; scales begin at 1056 -> kData + 1064.
  std::vector<T> t = SmallLayer();
  std::vector<std::uint32_t> f32(64, 0x3F800000u);
  f32[2] = 0xFF800000u;  // -inf
  t[2] = {"l.scales", "F32", {2, 32}, I32(f32)};
  t[3].data = I32(std::vector<std::uint32_t>(64, 0));
  ExpectOnlyError(Read(t, kV1), "GPTQ-106", kFile, "l.scales", "scales", kData + 1064, 0, 2);
}

// Warnings before an error are kept; layers go in anchor order. Layer "b."
// comes first in the data, layer "a." second: b.'s sibling warning, then
// a.'s GPTQ-101 (a. lacks g_idx).
TEST(GptqOracleLayer, AnchorOrderAndKeptWarnings) {
  LayerSpec b;
  b.prefix = "b.";
  std::vector<T> t = Layer(b);
  t.push_back({"b.extra", "F16", {1}, U16({0})});
  LayerSpec a;
  a.prefix = "a.";
  std::vector<T> layer_a = Layer(a);
  layer_a.pop_back();
  for (const T& m : layer_a) t.push_back(m);
  const qd::Outcome o = Read(t, kV1);
  ASSERT_TRUE(o.refused);
  ASSERT_EQ(o.findings.size(), 2u) << Describe(o);
  ExpectFinding(o.findings[0], "GPTQ-103", qd::Severity::kWarning, kFile, "b.extra", "extra", 8);
  ExpectFinding(o.findings[1], "GPTQ-101", qd::Severity::kError, kFile, "a.qweight", "g_idx", 8);
}

// GPTQ-107 is v1 only and at most one per layer; the config comes first.
TEST(GptqOracleLayer, Gptq107OncePerLayerV1Only) {
  LayerSpec s;
  s.qzeros = {0xFu, 0, 0, 0, 0xF0u, 0, 0, 0};  // (0, 0) and (1, 1) are 15
  const qd::Outcome v1 = Read(Layer(s), kV1);
  ASSERT_EQ(v1.findings.size(), 1u) << Describe(v1);
  ExpectFinding(v1.findings[0], "GPTQ-107", qd::Severity::kWarning, kFile, "l.qzeros", "qzeros",
                kData + 1024, 0, 0);
  EXPECT_TRUE(Read(Layer(s), kV2).findings.empty());
  EXPECT_TRUE(Read(Layer(s), R"({"bits": 4, "group_size": 32, "format": "gptq_p"})")
                  .findings.empty());
}

// ---------------------------------------------------------------------------
// Section 8: PackGptq.

// The 3-bit column of ThreeBitStraddlesAtFields10And21, packed: codes at k =
// 0, 10, 21, 31 = 3, 5, 6, 7 in column 0 give words 0x40000003, 0x00000001,
// 0xE0000003. v1 zero 8 (stored 7) at n = 10 of row 0: field 10 straddles,
// 7 << 30 -> 0xC0000000 in word 0, 7 >> 2 = 1 in word 1.
TEST(GptqOraclePack, ThreeBitByHand) {
  std::vector<std::int32_t> codes(32 * 32, 0);
  codes[0 * 32] = 3;
  codes[10 * 32] = 5;
  codes[21 * 32] = 6;
  codes[31 * 32] = 7;
  std::vector<std::int32_t> zeros(32, 1);  // stored 0
  zeros[10] = 8;
  std::vector<std::int32_t> qweight, qzeros;
  std::string error;
  ASSERT_TRUE(PackGptq("gptq", 3, 32, 32, 1, codes, zeros, &qweight, &qzeros, &error)) << error;
  ASSERT_EQ(qweight.size(), 3u * 32u);
  EXPECT_EQ(static_cast<std::uint32_t>(qweight[0 * 32]), 0x40000003u);
  EXPECT_EQ(static_cast<std::uint32_t>(qweight[1 * 32]), 0x00000001u);
  EXPECT_EQ(static_cast<std::uint32_t>(qweight[2 * 32]), 0xE0000003u);
  EXPECT_EQ(qweight[1], 0);
  ASSERT_EQ(qzeros.size(), 3u);
  EXPECT_EQ(static_cast<std::uint32_t>(qzeros[0]), 0xC0000000u);
  EXPECT_EQ(static_cast<std::uint32_t>(qzeros[1]), 0x00000001u);
  EXPECT_EQ(static_cast<std::uint32_t>(qzeros[2]), 0u);
}

// 4-bit v1 zero 16 is stored as 15 (no overflow); v2 stores the zero as is.
// Planar b = 7 field 30 = 90 of PlanarPlanes.
TEST(GptqOraclePack, ZerosAndPlanarByHand) {
  std::vector<std::int32_t> codes(32 * 32, 0);
  std::vector<std::int32_t> zeros(32, 1);
  zeros[9] = 16;
  std::vector<std::int32_t> qweight, qzeros;
  std::string error;
  ASSERT_TRUE(PackGptq("gptq", 4, 32, 32, 1, codes, zeros, &qweight, &qzeros, &error)) << error;
  EXPECT_EQ(qzeros, (std::vector<std::int32_t>{0, 0xF0, 0, 0}));
  zeros.assign(32, 0);
  zeros[9] = 15;
  ASSERT_TRUE(PackGptq("gptq_v2", 4, 32, 32, 1, codes, zeros, &qweight, &qzeros, &error)) << error;
  EXPECT_EQ(qzeros, (std::vector<std::int32_t>{0, 0xF0, 0, 0}));

  codes[30 * 32] = 90;
  zeros.assign(32, 0);
  ASSERT_TRUE(PackGptq("gptq_p", 7, 32, 32, 1, codes, zeros, &qweight, &qzeros, &error)) << error;
  ASSERT_EQ(qweight.size(), 7u * 32u);
  EXPECT_EQ(qweight[3 * 32], 0xA000000);
  EXPECT_EQ(qweight[5 * 32], 0x10000000);
  EXPECT_EQ(qweight[6 * 32], 0x40000000);
  EXPECT_EQ(qweight[0], 0);
}

TEST(GptqOraclePack, Preconditions) {
  std::vector<std::int32_t> qweight, qzeros;
  std::string error;
  const std::vector<std::int32_t> codes(32 * 32, 0);
  const std::vector<std::int32_t> ones(32, 1);
  // b not allowed for the format.
  EXPECT_FALSE(PackGptq("gptq", 5, 32, 32, 1, codes, ones, &qweight, &qzeros, &error));
  EXPECT_FALSE(PackGptq("gptq_v2", 1, 32, 32, 1, codes, ones, &qweight, &qzeros, &error));
  EXPECT_FALSE(PackGptq("gptq_p", 9, 32, 32, 1, codes, ones, &qweight, &qzeros, &error));
  EXPECT_FALSE(PackGptq("marlin", 4, 32, 32, 1, codes, ones, &qweight, &qzeros, &error));
  EXPECT_TRUE(PackGptq("gptq_p", 5, 32, 32, 1, codes, ones, &qweight, &qzeros, &error)) << error;
  // K and N multiples of 32 (checked before the codes).
  const std::vector<std::int32_t> bad_codes(48 * 32, 99);
  error.clear();
  EXPECT_FALSE(PackGptq("gptq", 4, 48, 32, 2, bad_codes, std::vector<std::int32_t>(64, 1),
                        &qweight, &qzeros, &error));
  EXPECT_NE(error.find("48"), std::string::npos) << error;
  EXPECT_FALSE(PackGptq("gptq", 4, 32, 48, 1, std::vector<std::int32_t>(32 * 48, 0),
                        std::vector<std::int32_t>(48, 1), &qweight, &qzeros, &error));
  // Codes: the first offending (k, n) in row-major order is named.
  std::vector<std::int32_t> c = codes;
  c[5 * 32 + 7] = 16;
  c[9 * 32 + 1] = -1;
  error.clear();
  EXPECT_FALSE(PackGptq("gptq", 4, 32, 32, 1, c, ones, &qweight, &qzeros, &error));
  EXPECT_NE(error.find("(5, 7)"), std::string::npos) << error;
  // Zeros: v1 1..2^b (0 underflows), v2 / planar 0..mask(b).
  std::vector<std::int32_t> z = ones;
  z[3] = 0;
  error.clear();
  EXPECT_FALSE(PackGptq("gptq", 4, 32, 32, 1, codes, z, &qweight, &qzeros, &error));
  EXPECT_NE(error.find("(0, 3)"), std::string::npos) << error;
  z[3] = 17;
  EXPECT_FALSE(PackGptq("gptq", 4, 32, 32, 1, codes, z, &qweight, &qzeros, &error));
  z[3] = 16;
  EXPECT_TRUE(PackGptq("gptq", 4, 32, 32, 1, codes, z, &qweight, &qzeros, &error)) << error;
  EXPECT_FALSE(PackGptq("gptq_v2", 4, 32, 32, 1, codes, z, &qweight, &qzeros, &error));
  EXPECT_FALSE(PackGptq("gptq_p", 4, 32, 32, 1, codes, z, &qweight, &qzeros, &error));
  z[3] = 0;
  EXPECT_TRUE(PackGptq("gptq_v2", 4, 32, 32, 1, codes, z, &qweight, &qzeros, &error)) << error;
  // Codes are checked before zeros.
  error.clear();
  EXPECT_FALSE(PackGptq("gptq", 4, 32, 32, 1, c, z, &qweight, &qzeros, &error));
  EXPECT_NE(error.find("(5, 7)"), std::string::npos) << error;
}

}  // namespace
}  // namespace qd::oracle
