// fp8_codes_test.cc: every one of the 256 codes of each FP8 subtype
// (docs/fp8.md section 4), codec table against the oracle's bit-field
// decoding, bit for bit (NaN encodings, infinities, subnormals, -0.0); a
// handful of codes against values computed here from the formats'
// definitions; and the one division of section 6 on hand-built files
// (tensor, row and partial-block scaling) through both readers; the
// encoders of section 9 on every code, every midpoint and the edges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/fp8.h"
#include "codecs/safetensors.h"
#include "oracles/fp8.h"

namespace {

using qd::codec::Fp8Subtype;

std::uint32_t Bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

const Fp8Subtype kAll[] = {Fp8Subtype::kE4M3Fn, Fp8Subtype::kE4M3Fnuz, Fp8Subtype::kE5M2,
                           Fp8Subtype::kE5M2Fnuz, Fp8Subtype::kE8M0Fnu};

TEST(Fp8Codes, EveryCodeOfEverySubtypeCodecEqualsOracle) {
  for (Fp8Subtype subtype : kAll) {
    const std::string name = qd::codec::Fp8SubtypeName(subtype);
    const std::array<float, 256>& table = qd::codec::Fp8CodeTable(subtype);
    int nans = 0, infinities = 0, zeros = 0;
    for (int code = 0; code < 256; ++code) {
      SCOPED_TRACE(name + " code " + std::to_string(code));
      float value = 0;
      bool is_nan = false, is_infinite = false;
      ASSERT_TRUE(qd::oracle::DecodeFp8Code(name, static_cast<std::uint8_t>(code), &value, &is_nan, &is_infinite));
      EXPECT_EQ(qd::codec::Fp8CodeIsNonFinite(subtype, static_cast<std::uint8_t>(code)), is_nan || is_infinite);
      if (is_nan) {
        ++nans;
        EXPECT_TRUE(std::isnan(table[code]));
        EXPECT_TRUE(std::isnan(value));
        continue;
      }
      infinities += is_infinite;
      zeros += value == 0.0f;
      EXPECT_EQ(Bits(table[code]), Bits(value));
    }
    // The NaN and infinity counts each definition gives (docs/fp8.md 4).
    const int want_nans = subtype == Fp8Subtype::kE4M3Fn ? 2 : subtype == Fp8Subtype::kE5M2 ? 6 : 1;
    EXPECT_EQ(nans, want_nans) << name;
    EXPECT_EQ(infinities, subtype == Fp8Subtype::kE5M2 ? 2 : 0) << name;
    // +0 and -0 where there is a sign and no fnuz; fnuz has +0 only; E8M0 none.
    const int want_zeros = subtype == Fp8Subtype::kE8M0Fnu ? 0
                           : (subtype == Fp8Subtype::kE4M3Fnuz || subtype == Fp8Subtype::kE5M2Fnuz) ? 1 : 2;
    EXPECT_EQ(zeros, want_zeros) << name;
  }
}

struct HandCode {
  Fp8Subtype subtype;
  int code;
  float value;  // computed here from sign, exponent and mantissa
};

TEST(Fp8Codes, HandComputedCodes) {
  const HandCode cases[] = {
      // E4M3FN: bias 7, 3 mantissa bits, S.1111.111 NaN.
      {Fp8Subtype::kE4M3Fn, 0x38, 1.0f},                       // 0.0111.000
      {Fp8Subtype::kE4M3Fn, 0x7E, 448.0f},                     // 2^(15-7) * 1.75
      {Fp8Subtype::kE4M3Fn, 0xFE, -448.0f},
      {Fp8Subtype::kE4M3Fn, 0x01, std::ldexp(1.0f, -9)},       // subnormal 1/8 * 2^-6
      {Fp8Subtype::kE4M3Fn, 0x07, 7.0f * std::ldexp(1.0f, -9)},
      {Fp8Subtype::kE4M3Fn, 0x08, std::ldexp(1.0f, -6)},       // smallest normal
      {Fp8Subtype::kE4M3Fn, 0x80, -0.0f},
      // E5M2: bias 15, IEEE-like.
      {Fp8Subtype::kE5M2, 0x3C, 1.0f},
      {Fp8Subtype::kE5M2, 0x7B, 57344.0f},                     // 2^15 * 1.75
      {Fp8Subtype::kE5M2, 0x7C, INFINITY},
      {Fp8Subtype::kE5M2, 0xFC, -INFINITY},
      {Fp8Subtype::kE5M2, 0x01, std::ldexp(1.0f, -16)},
      {Fp8Subtype::kE5M2, 0x83, -3.0f * std::ldexp(1.0f, -16)},
      // fnuz: bias 8 / 16, 0x80 the only NaN, no -0.0.
      {Fp8Subtype::kE4M3Fnuz, 0x40, 1.0f},
      {Fp8Subtype::kE4M3Fnuz, 0x7F, 240.0f},                   // 2^(15-8) * 1.875
      {Fp8Subtype::kE4M3Fnuz, 0x01, std::ldexp(1.0f, -10)},
      {Fp8Subtype::kE4M3Fnuz, 0xFF, -240.0f},
      {Fp8Subtype::kE5M2Fnuz, 0x40, 1.0f},
      {Fp8Subtype::kE5M2Fnuz, 0x7F, 57344.0f},                 // 2^(31-16) * 1.75
      {Fp8Subtype::kE5M2Fnuz, 0x01, std::ldexp(1.0f, -17)},
      // E8M0FNU: 2^(e - 127), no sign.
      {Fp8Subtype::kE8M0Fnu, 0x7F, 1.0f},
      {Fp8Subtype::kE8M0Fnu, 0x80, 2.0f},
      {Fp8Subtype::kE8M0Fnu, 0x00, std::ldexp(1.0f, -127)},    // a binary32 subnormal
      {Fp8Subtype::kE8M0Fnu, 0xFE, std::ldexp(1.0f, 127)},
  };
  for (const HandCode& c : cases) {
    const std::string name = qd::codec::Fp8SubtypeName(c.subtype);
    SCOPED_TRACE(name + " code " + std::to_string(c.code));
    EXPECT_EQ(Bits(qd::codec::Fp8CodeTable(c.subtype)[c.code]), Bits(c.value));
    float value = 0;
    bool is_nan = false, is_infinite = false;
    qd::oracle::DecodeFp8Code(name, static_cast<std::uint8_t>(c.code), &value, &is_nan, &is_infinite);
    EXPECT_EQ(Bits(value), Bits(c.value));
  }
  // The NaN encodings.
  for (auto [subtype, code] : {std::pair{Fp8Subtype::kE4M3Fn, 0x7F}, {Fp8Subtype::kE4M3Fn, 0xFF},
                               {Fp8Subtype::kE5M2, 0x7D}, {Fp8Subtype::kE5M2, 0xFF},
                               {Fp8Subtype::kE4M3Fnuz, 0x80}, {Fp8Subtype::kE5M2Fnuz, 0x80},
                               {Fp8Subtype::kE8M0Fnu, 0xFF}}) {
    EXPECT_TRUE(std::isnan(qd::codec::Fp8CodeTable(subtype)[code])) << code;
  }
}

// ---- section 6 on files ---------------------------------------------------------

std::vector<std::uint8_t> F32Bytes(const std::vector<float>& values) {
  std::vector<std::uint8_t> out(4 * values.size());
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

qd::codec::TensorWithBytes T(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
                             std::vector<std::uint8_t> bytes) {
  const std::uint64_t size = bytes.size();
  return {{std::move(name), std::move(dtype), std::move(shape), size}, std::move(bytes)};
}

std::vector<qd::SideFile> Config(const std::string& json) {
  return {{"quantize_config.json", std::vector<std::uint8_t>(json.begin(), json.end())}};
}

// Both readers give exactly WANT for layer "l.weight" (and accept).
void ExpectDecoded(const std::vector<qd::codec::TensorWithBytes>& tensors,
                   const std::vector<qd::SideFile>& configs, const std::vector<float>& want) {
  const std::vector<std::uint8_t> file = qd::codec::SerializeSafetensors(tensors, nullptr);
  const qd::ByteView view{file.data(), file.size()};
  ASSERT_TRUE(qd::codec::ClaimsFp8(view));
  ASSERT_TRUE(qd::oracle::IsFp8File(view));
  for (const qd::Outcome& o : {qd::codec::DecodeFp8File(view, "t.safetensors", configs),
                               qd::oracle::ReadFp8File(view, "t.safetensors", configs)}) {
    ASSERT_FALSE(o.refused) << (o.findings.empty() ? "" : o.findings.back().rule);
    ASSERT_EQ(o.tensors.size(), 1u);
    EXPECT_EQ(o.tensors[0].name, "l.weight");
    ASSERT_EQ(o.tensors[0].values.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(Bits(o.tensors[0].values[i]), Bits(want[i])) << "element " << i;
    }
  }
}

TEST(Fp8Decode, RowScalesDivide) {
  // E4M3FN codes 1.0, -1.0, 2.0 / 448, 2^-9, -0.0; inverse scales 2 and 0.5.
  const std::vector<std::uint8_t> codes = {0x38, 0xB8, 0x40, 0x7E, 0x01, 0x80};
  ExpectDecoded({T("l.weight", "F8_E4M3", {2, 3}, codes), T("l.weight_scale_inv", "F32", {2}, F32Bytes({2.0f, 0.5f}))},
                {}, {0.5f, -0.5f, 1.0f, 896.0f, std::ldexp(1.0f, -8), -0.0f});
}

TEST(Fp8Decode, TensorScaleIsOneDivisionNotAReciprocalMultiply) {
  // 0x2A is 0.3125 (E4M3FN 0.0101.010); 0.3125 / 3 rounds to 0x3DD55555,
  // while 0.3125 * fl(1/3) gives 0x3DD55556: the contract's division is the first.
  const float divided = 0.3125f / 3.0f;
  ASSERT_EQ(Bits(divided), 0x3DD55555u);
  ASSERT_EQ(Bits(0.3125f * (1.0f / 3.0f)), 0x3DD55556u);
  ExpectDecoded({T("l.weight", "F8_E4M3", {1, 2}, {0x2A, 0xAA}), T("l.weight_scale_inv", "F32", {}, F32Bytes({3.0f}))},
                {}, {divided, -divided});
}

TEST(Fp8Decode, PartialBlocksUseTheirBlocksScale) {
  // [3, 3] weight of E5M2 1.0 (0x3C), blocks [2, 2]: scale grid [2, 2].
  const std::vector<std::uint8_t> codes(9, 0x3C);
  const std::vector<qd::codec::TensorWithBytes> tensors = {
      T("l.weight", "F8_E5M2", {3, 3}, codes),
      T("l.weight_scale_inv", "F32", {2, 2}, F32Bytes({1.0f, 2.0f, 4.0f, 8.0f}))};
  const auto configs = Config(R"({"method":"fp8","format":"float8_e5m2","weight_block_size":[2,2]})");
  ExpectDecoded(tensors, configs, {1.0f, 1.0f, 0.5f, 1.0f, 1.0f, 0.5f, 0.25f, 0.25f, 0.125f});
  // Both readers warn FP8-101 (2 does not divide 3).
  const std::vector<std::uint8_t> file = qd::codec::SerializeSafetensors(tensors, nullptr);
  const qd::Outcome o = qd::oracle::ReadFp8File({file.data(), file.size()}, "t.safetensors", configs);
  ASSERT_EQ(o.findings.size(), 1u);
  EXPECT_EQ(o.findings[0].rule, "FP8-101");
  const qd::codec::Fp8Result r = qd::codec::ReadFp8({file.data(), file.size()}, "t.safetensors", configs);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].rule, "FP8-101");
}

TEST(Fp8Decode, FnuzNeedsTheConfigAndReadsOtherValues) {
  // 0x7F is NaN in E4M3FN (FP8-007 without a config) and 240 in E4M3FNUZ.
  const std::vector<qd::codec::TensorWithBytes> tensors = {
      T("l.weight", "F8_E4M3", {1, 1}, {0x7F}), T("l.weight_scale_inv", "F32", {1}, F32Bytes({1.0f}))};
  ExpectDecoded(tensors, Config(R"({"quant_method":"fp8","format":"e4m3fnuz"})"), {240.0f});
  const std::vector<std::uint8_t> file = qd::codec::SerializeSafetensors(tensors, nullptr);
  const qd::Outcome o = qd::oracle::ReadFp8File({file.data(), file.size()}, "t.safetensors", {});
  ASSERT_TRUE(o.refused);
  EXPECT_EQ(o.findings.back().rule, "FP8-007");
  EXPECT_EQ(o.findings.back().row, 0);
  EXPECT_EQ(o.findings.back().element, 0);
}

// docs/fp8.md section 9 on both encoders: every finite code's value encodes
// to that code; the midpoint of two neighbouring codes goes to the one with
// the even mantissa field; clamping, zeros and NaN as the section says.
const Fp8Subtype kEncoded[] = {Fp8Subtype::kE4M3Fn, Fp8Subtype::kE4M3Fnuz, Fp8Subtype::kE5M2,
                               Fp8Subtype::kE5M2Fnuz};

std::uint8_t CodecEncode(Fp8Subtype subtype, float x) {
  std::uint8_t code = 0xAA;
  EXPECT_TRUE(qd::codec::Fp8Encode(subtype, x, &code));
  return code;
}
std::uint8_t OracleEncode(Fp8Subtype subtype, float x) {
  std::vector<std::uint8_t> codes;
  EXPECT_TRUE(qd::oracle::EncodeFp8Codes(qd::codec::Fp8SubtypeName(subtype), {x}, &codes));
  return codes.size() == 1 ? codes[0] : 0xAA;
}

TEST(Fp8Encode, EveryFiniteCodeEncodesToItselfAndMidpointsToTheEvenCode) {
  for (Fp8Subtype subtype : kEncoded) {
    const std::string name = qd::codec::Fp8SubtypeName(subtype);
    const std::array<float, 256>& table = qd::codec::Fp8CodeTable(subtype);
    for (int code = 0; code < 256; ++code) {
      if (qd::codec::Fp8CodeIsNonFinite(subtype, static_cast<std::uint8_t>(code))) continue;
      SCOPED_TRACE(name + " code " + std::to_string(code));
      EXPECT_EQ(CodecEncode(subtype, table[code]), code);
      EXPECT_EQ(OracleEncode(subtype, table[code]), code);
      // Positive codes c and c + 1 are neighbours on the grid (the exponent
      // field carries into the next binade): their midpoint, exact in
      // binary32, ties to whichever code is even.
      if (code >= 0x7F || qd::codec::Fp8CodeIsNonFinite(subtype, static_cast<std::uint8_t>(code + 1))) continue;
      const float mid = (table[code] + table[code + 1]) / 2;
      const int even = code % 2 == 0 ? code : code + 1;
      EXPECT_EQ(CodecEncode(subtype, mid), even);
      EXPECT_EQ(OracleEncode(subtype, mid), even);
      // Just above the midpoint: the upper code.
      const float above = std::nextafter(mid, INFINITY);
      EXPECT_EQ(CodecEncode(subtype, above), code + 1);
      EXPECT_EQ(OracleEncode(subtype, above), code + 1);
    }
  }
}

TEST(Fp8Encode, ClampZerosAndNan) {
  struct Case {
    Fp8Subtype subtype;
    float x;
    int code;
  };
  const Case cases[] = {
      // 448 = 1.75 * 2^8 is E4M3FN's largest finite value, 0x7E; 0x7F is NaN.
      {Fp8Subtype::kE4M3Fn, 1e6f, 0x7E},
      {Fp8Subtype::kE4M3Fn, -INFINITY, 0xFE},
      {Fp8Subtype::kE4M3Fn, 470.0f, 0x7E},
      // E5M2: 57344 = 1.75 * 2^15, 0x7B; never the infinity 0x7C.
      {Fp8Subtype::kE5M2, 60000.0f, 0x7B},
      // E4M3FNUZ: 240 = 1.875 * 2^7, 0x7F.
      {Fp8Subtype::kE4M3Fnuz, 300.0f, 0x7F},
      // -0.0 where there is one; fnuz writes 0x00 (0x80 is its NaN).
      {Fp8Subtype::kE4M3Fn, -0.0f, 0x80},
      {Fp8Subtype::kE5M2Fnuz, -0.0f, 0x00},
      // Half the smallest subnormal (2^-9 for E4M3FN) ties to zero; a bit
      // more rounds to the subnormal 0x01.
      {Fp8Subtype::kE4M3Fn, std::ldexp(1.0f, -10), 0x00},
      {Fp8Subtype::kE4M3Fn, -std::ldexp(1.0f, -10), 0x80},
      {Fp8Subtype::kE4M3Fn, std::ldexp(1.5f, -10), 0x01},
      // 1.0625 lies between 1.0 (0x38) and 1.125 (0x39): halfway, to 0x38.
      {Fp8Subtype::kE4M3Fn, 1.0625f, 0x38},
      {Fp8Subtype::kE4M3Fn, NAN, 0x7F},
      {Fp8Subtype::kE5M2, NAN, 0x7D},
      {Fp8Subtype::kE5M2Fnuz, NAN, 0x80},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(qd::codec::Fp8SubtypeName(c.subtype)) + " x " + std::to_string(c.x));
    EXPECT_EQ(CodecEncode(c.subtype, c.x), c.code);
    EXPECT_EQ(OracleEncode(c.subtype, c.x), c.code);
  }
  std::uint8_t code = 0;
  EXPECT_FALSE(qd::codec::Fp8Encode(Fp8Subtype::kE8M0Fnu, 1.0f, &code));
  std::vector<std::uint8_t> codes;
  EXPECT_FALSE(qd::oracle::EncodeFp8Codes("float8_e8m0fnu", {1.0f}, &codes));
}

}  // namespace
