// bnb_kernels_test: the bitsandbytes codec's kernels agreeing with each other
// (scalar vs AVX2, bit for bit, NaN / infinity / subnormal included) and with
// the tests' own rounding, and the strict JSON parser its quant_state reading
// uses (codecs/strict_json.h). Expected values as bnb_codec_test.cc says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/kernels.h"
#include "codecs/strict_json.h"
#include "tests/bnb_codec_test_support.h"

namespace {

using namespace qd_bnb_test;  // NOLINT(google-build-using-namespace): the files and checks of the tests

// ---- strict JSON ------------------------------------------------------------------

TEST(StrictJson, AcceptsPlainDocuments) {
  EXPECT_TRUE(qd::codec::ParseStrictJson(R"({"a": [1, 2.5, "x", null, true, {}]})"));
  EXPECT_TRUE(qd::codec::ParseStrictJson(" \t\r\n{} \n\t\r "));
  EXPECT_TRUE(qd::codec::ParseStrictJson("[]"));
  EXPECT_TRUE(qd::codec::ParseStrictJson("3"));
  // An escaped NUL is valid JSON text; only a raw NUL byte is refused.
  const auto escaped = qd::codec::ParseStrictJson(R"({"a": "x\u0000y"})");
  ASSERT_TRUE(escaped);
  EXPECT_EQ((*escaped)["a"].get<std::string>().size(), 3u);
  // Same keys in different objects are fine.
  EXPECT_TRUE(qd::codec::ParseStrictJson(R"({"a": {"k": 1}, "b": {"k": 2}})"));
  // 2^64 does not fit 64 bits: it is kept as a (finite) double.
  const auto big = qd::codec::ParseStrictJson(R"({"n": 18446744073709551616})");
  ASSERT_TRUE(big);
  EXPECT_TRUE((*big)["n"].is_number_float());
}

TEST(StrictJson, RefusesWhatNlohmannLetsThrough) {
  using qd::codec::ParseStrictJson;
  EXPECT_FALSE(ParseStrictJson("\xef\xbb\xbf{}"));                 // BOM
  EXPECT_FALSE(ParseStrictJson(std::string_view("{}\0", 3)));      // NUL after the value
  EXPECT_FALSE(ParseStrictJson(std::string_view("{\"a\0\":1}", 8)));
  EXPECT_FALSE(ParseStrictJson(R"({"a": 1, "a": 2})"));            // duplicate key
  EXPECT_FALSE(ParseStrictJson(R"({"x": [{"a": 1, "b": 2, "a": 3}]})"));
  EXPECT_FALSE(ParseStrictJson(R"({"a": 1e400})"));                // overflows binary64
  EXPECT_FALSE(ParseStrictJson(R"({"a": -1e400})"));
  EXPECT_FALSE(ParseStrictJson("{} x"));                           // trailing bytes
  EXPECT_FALSE(ParseStrictJson("{}{}"));
  EXPECT_FALSE(ParseStrictJson("{} /* c */"));                     // comments
  EXPECT_FALSE(ParseStrictJson("{}\f"));                           // not JSON whitespace
  EXPECT_FALSE(ParseStrictJson("{\"a\": \"\xff\"}"));              // invalid UTF-8
  EXPECT_FALSE(ParseStrictJson(""));
  EXPECT_FALSE(ParseStrictJson(R"({"a": 01})"));
}

TEST(StrictJson, NestingLimitIs64) {
  auto nest = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_TRUE(qd::codec::ParseStrictJson(nest(64)));
  EXPECT_FALSE(qd::codec::ParseStrictJson(nest(65)));
  EXPECT_FALSE(qd::codec::ParseStrictJson(std::string(100000, '[')));
}

TEST(StrictJson, MembersNotKeptAreNullButStillChecked) {
  using qd::codec::ParseStrictJson;
  const std::vector<std::string_view> kept = {"b"};
  const auto doc = ParseStrictJson(R"({"a": [1, {"q": "zz"}], "b": [7], "c": "long"})", &kept);
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->dump(), R"({"a":null,"b":[7],"c":null})");
  EXPECT_FALSE(ParseStrictJson(R"({"a": {"k": 1, "k": 2}, "b": 1})", &kept));  // duplicate inside
  EXPECT_FALSE(ParseStrictJson(R"({"a": 1, "a": {}})", &kept));                // duplicate member
  EXPECT_FALSE(ParseStrictJson("{\"a\":" + std::string(64, '[') + std::string(64, ']') + "}", &kept));
  EXPECT_TRUE(ParseStrictJson("{\"a\":" + std::string(63, '[') + std::string(63, ']') + "}", &kept));
  EXPECT_FALSE(ParseStrictJson(R"({"a": [1e400]})", &kept));
}

// ---- kernels -----------------------------------------------------------------------

std::vector<float> SpecialValues() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                          65536.0f, 6.0e-8f, 2.98023224e-8f, 2.9802326e-8f, 5.96046448e-8f,
                          6.1035156e-5f, 6.1035152e-5f, 3.0517578e-5f, 1e-45f, 1e-40f, 1e-38f,
                          3.3895314e38f, 3.4028235e38f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          FromBits(0x7fc00000u), FromBits(0xffc00001u), FromBits(0x7f800001u),
                          FromBits(0x7fbfffffu), FromBits(0x33000000u), FromBits(0x33000001u),
                          FromBits(0x477ff000u), FromBits(0x477fefffu), FromBits(0x7f7f8000u),
                          FromBits(0x7f7f7fffu), FromBits(0x38800000u), FromBits(0x387fffffu)};
  // Every binary16 value and the midpoints around it, both signs.
  for (std::uint32_t h = 0; h < 0x7c00u; h += 7) {
    const float f = qdtest::HalfValue(static_cast<std::uint16_t>(h));
    const std::uint32_t b = Bits(f);
    for (std::uint32_t d : {0u, 0x1000u, 0xfffu, 0x1001u}) {
      v.push_back(FromBits(b + d));
      v.push_back(-FromBits(b + d));
    }
  }
  return v;
}

TEST(BnbKernels, RoundingAgreesAcrossKernels) {
  std::vector<float> in = SpecialValues();
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65521) in.push_back(FromBits(static_cast<std::uint32_t>(u)));
  for (BnbDtype dtype : {BnbDtype::kFloat16, BnbDtype::kBfloat16, BnbDtype::kFloat32}) {
    std::vector<float> want(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) want[i] = RoundedToDtype(in[i], dtype);
    for (Kernel k : qd::codec::AvailableKernels()) {
      std::vector<float> got(in.size());
      qd::codec::BnbRoundArrayToDtype(in.data(), in.size(), dtype, got.data(), k);
      std::string where;
      EXPECT_TRUE(SameBits(got, want, &where))
          << qd::codec::KernelName(k) << " dtype " << static_cast<int>(dtype) << " " << where;
    }
  }
}

// Worked by hand; the codec's rounding and the tests' own (RoundedToDtype,
// the reference of every other test here) must both give these bits.
TEST(BnbKernels, RoundingIsRoundToNearestEven) {
  struct Case {
    std::uint32_t in;
    BnbDtype dtype;
    std::uint32_t want;
  };
  const Case cases[] = {
      // binary16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even wins (1);
      // 1 + 3 * 2^-11 ties up to 1 + 2^-9.
      {Bits(1.0f + 0x1p-11f), BnbDtype::kFloat16, Bits(1.0f)},
      {Bits(1.0f + 3 * 0x1p-11f), BnbDtype::kFloat16, Bits(1.0f + 0x1p-9f)},
      {Bits(65520.0f), BnbDtype::kFloat16, Bits(INFINITY)},  // half way to 2^16: even
      {Bits(0x1p-25f), BnbDtype::kFloat16, 0u},              // half the smallest subnormal
      {Bits(0x1.8p-25f), BnbDtype::kFloat16, Bits(0x1p-24f)},
      {0x80000000u, BnbDtype::kFloat16, 0x80000000u},        // -0.0 keeps its sign
      // NaNs come back quiet with the payload bits binary16 holds (10).
      {0x7f800001u, BnbDtype::kFloat16, 0x7fc00000u},
      {0xffbfe000u, BnbDtype::kFloat16, 0xffffe000u},
      // bfloat16: 1 + 2^-8 ties to 1; 1 + 3 * 2^-8 ties up to 1 + 2^-6.
      {Bits(1.0f + 0x1p-8f), BnbDtype::kBfloat16, Bits(1.0f)},
      {Bits(1.0f + 3 * 0x1p-8f), BnbDtype::kBfloat16, Bits(1.0f + 0x1p-6f)},
      {Bits(3.4028235e38f), BnbDtype::kBfloat16, Bits(INFINITY)},
      {0x00000001u, BnbDtype::kBfloat16, 0u},                // 2^-149 < half of 2^-133
      {0xffc00001u, BnbDtype::kBfloat16, 0xffc00000u},       // 7 payload bits kept
      {0x7f810000u, BnbDtype::kBfloat16, 0x7fc10000u},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << std::hex << c.in << " dtype " << static_cast<int>(c.dtype));
    EXPECT_EQ(Bits(qd::codec::BnbRoundToDtype(FromBits(c.in), c.dtype)), c.want);
    EXPECT_EQ(Bits(RoundedToDtype(FromBits(c.in), c.dtype)), c.want);
  }
}

// Random codes with awkward scales: every kernel equals a plain reference.
TEST(BnbKernels, FourBitKernelsAgree) {
  std::mt19937_64 rng(7);
  const std::vector<float> specials = SpecialValues();
  for (std::uint64_t n : {0ull, 1ull, 2ull, 31ull, 32ull, 33ull, 63ull, 64ull, 65ull, 127ull,
                          1000ull, 4097ull, 9000ull}) {
    for (std::uint64_t blocksize : {32ull, 64ull, 256ull, 4096ull}) {
      std::vector<std::uint8_t> packed(n / 2 + n % 2);
      for (auto& b : packed) b = static_cast<std::uint8_t>(rng());
      const std::uint64_t blocks = n / blocksize + (n % blocksize != 0);
      std::vector<float> scales(blocks);
      for (auto& s : scales) {
        s = rng() % 3 == 0 ? specials[rng() % specials.size()]
                           : std::ldexp(static_cast<float>(rng() % 1000) / 999.0f, static_cast<int>(rng() % 40) - 30);
      }
      for (Bnb4bitType type : {Bnb4bitType::kNf4, Bnb4bitType::kFp4}) {
        for (BnbDtype dtype : {BnbDtype::kFloat16, BnbDtype::kBfloat16, BnbDtype::kFloat32}) {
          std::vector<float> want(n);
          for (std::uint64_t i = 0; i < n; ++i) {
            const int code = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 15;
            want[i] = RoundedToDtype(TableValue(type, code) * scales[i / blocksize], dtype);
          }
          for (Kernel k : qd::codec::AvailableKernels()) {
            std::vector<float> got(n);
            qd::codec::BnbDequantize4bit(type, packed.data(), n, scales.data(), blocksize, dtype,
                                         got.data(), k);
            std::string where;
            ASSERT_TRUE(SameBits(got, want, &where))
                << qd::codec::KernelName(k) << " n=" << n << " bs=" << blocksize << " " << where;
          }
        }
      }
    }
  }
}

TEST(BnbKernels, Blockwise8AndInt8KernelsAgree) {
  std::mt19937_64 rng(11);
  const std::vector<float> specials = SpecialValues();
  std::vector<float> map = qd::codec::CreateDynamicMap();
  map[3] = INFINITY;  // stored maps are only checked for finiteness by the reader
  for (std::uint64_t n : {0ull, 7ull, 8ull, 9ull, 255ull, 4096ull, 4099ull}) {
    std::vector<std::uint8_t> codes(n);
    for (auto& c : codes) c = static_cast<std::uint8_t>(rng());
    const std::uint64_t blocksize = 64;
    std::vector<float> scales(n / blocksize + 1);
    for (auto& s : scales) s = specials[rng() % specials.size()];
    for (BnbDtype dtype : {BnbDtype::kFloat16, BnbDtype::kBfloat16, BnbDtype::kFloat32}) {
      std::vector<float> want(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        want[i] = RoundedToDtype(map[codes[i]] * scales[i / blocksize], dtype);
      }
      for (Kernel k : qd::codec::AvailableKernels()) {
        std::vector<float> got(n);
        qd::codec::BnbDequantizeBlockwise8(codes.data(), n, map.data(), scales.data(), blocksize,
                                           dtype, got.data(), k);
        std::string where;
        EXPECT_TRUE(SameBits(got, want, &where)) << qd::codec::KernelName(k) << " " << where;
      }
    }
  }
  for (std::uint64_t columns : {1ull, 8ull, 13ull, 64ull}) {
    const std::uint64_t rows = 5;
    std::vector<std::int8_t> w(rows * columns);
    for (auto& v : w) v = static_cast<std::int8_t>(rng());
    std::vector<float> scb = {0.5f, 3.0e38f, -2.0f, 1e-40f, 0.0123f};
    const float k127 = FromBits(kInt8ScaleBits);
    std::vector<float> want(rows * columns);
    for (std::uint64_t i = 0; i < want.size(); ++i) {
      const float scaled = static_cast<float>(w[i]) * scb[i / columns];
      want[i] = scaled * k127;
    }
    for (Kernel k : qd::codec::AvailableKernels()) {
      std::vector<float> got(want.size());
      qd::codec::BnbDequantizeInt8Rows(w.data(), rows, columns, scb.data(), got.data(), k);
      std::string where;
      EXPECT_TRUE(SameBits(got, want, &where)) << qd::codec::KernelName(k) << " " << where;
    }
  }
}

// The nested absmax is two roundings; a fused multiply-add gives other bits.
TEST(BnbKernels, NestedAbsmaxIsNeverFused) {
  const float map[256] = {1.0f + 0x1p-23f};
  const std::uint8_t code = 0;
  const float nested = 1.0f + 0x1p-23f;
  const float offset = -(1.0f + 0x1p-22f);
  float got = 0.0f;
  qd::codec::BnbNestedAbsmax(&code, 1, map, &nested, 256, offset, &got);
  // Exact product 1 + 2^-22 + 2^-46 rounds to 1 + 2^-22, so the sum is 0;
  // an FMA would keep 2^-46.
  EXPECT_EQ(got, 0.0f);
  EXPECT_NE(std::fma(map[0], nested, offset), 0.0f);
}

}  // namespace
