// bnb_codec_test: the bitsandbytes codec on hand-built files (every BNB rule,
// finding fields and offsets, layouts, output order), kernel agreement
// (scalar vs AVX2, bit for bit, NaN / infinity / subnormal included), the
// strict JSON parser, and the encoders' documented edge cases.
// tests/peer/bnb_peer_test.cc checks the same code against bnb's own output.
//
// Expected decoded values never come from the codec: the NF4 / FP4 tables are
// the tests' transcription of TABLES.json (property_tests/gen/bnb_tables.h;
// spec 000 and docs/bnb.md "Decoding"), the rounding to the restored dtype is
// the tests' own (property_tests/gen/half.h: binary16 and bfloat16, nearest
// even, NaNs quieted with their leading payload bits, IEEE 754-2019 6.2.3),
// and the int8 scale is docs/bnb.md's literal 0x3c010204.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "codecs/strict_json.h"
#include "property_tests/gen/bnb_tables.h"
#include "property_tests/gen/half.h"

namespace {

using qd::codec::Bnb4bitType;
using qd::codec::BnbDtype;
using qd::codec::Kernel;

std::vector<std::uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<std::uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float FromBits(std::uint32_t u) { return std::bit_cast<float>(u); }

// docs/bnb.md "Decoding": TABLE[quant_type][code], from the tests' tables.
float TableValue(Bnb4bitType type, int code) {
  return qdtest::BnbTableValue(type == Bnb4bitType::kFp4, code);
}

std::vector<float> Table(Bnb4bitType type) {
  std::vector<float> t(16);
  for (int code = 0; code < 16; ++code) t[code] = TableValue(type, code);
  return t;
}

// docs/bnb.md "Decoding": the product rounded to dtype (RNE) and widened back.
float RoundedToDtype(float x, BnbDtype dtype) {
  switch (dtype) {
    case BnbDtype::kFloat16: return qdtest::RoundedThroughHalf(x);
    case BnbDtype::kBfloat16: return qdtest::RoundedThroughBFloat16(x);
    case BnbDtype::kFloat32: return x;
  }
  return x;
}

// docs/bnb.md "Decoding", int8 row-scaled: 0x3c010204, the binary32 nearest 1/127.
constexpr std::uint32_t kInt8ScaleBits = 0x3c010204u;

bool SameBits(const std::vector<float>& a, const std::vector<float>& b, std::string* where) {
  if (a.size() != b.size()) {
    *where = "size " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (Bits(a[i]) != Bits(b[i])) {
      char text[96];
      std::snprintf(text, sizeof text, "index %zu: %08x vs %08x", i, Bits(a[i]), Bits(b[i]));
      *where = text;
      return false;
    }
  }
  return true;
}

// ---- file builder ---------------------------------------------------------------

// Tensors by name; written in name order (so data order = name order).
struct FileSpec {
  std::map<std::string, qd::codec::TensorWithBytes> tensors;
  std::optional<qd::codec::MetadataList> metadata;

  void Put(const std::string& name, const std::string& dtype, std::vector<std::uint64_t> shape,
           std::vector<std::uint8_t> bytes) {
    tensors[name] = qd::codec::TensorWithBytes{{name, dtype, std::move(shape), 0}, std::move(bytes)};
  }
  void PutF32(const std::string& name, const std::vector<float>& v) {
    Put(name, "F32", {v.size()}, FloatBytes(v));
  }
  void PutJson(const std::string& name, const std::string& text) {
    Put(name, "U8", {text.size()}, std::vector<std::uint8_t>(text.begin(), text.end()));
  }
  void Erase(const std::string& name) { tensors.erase(name); }
  std::vector<std::uint8_t> Bytes() const {
    std::vector<qd::codec::TensorWithBytes> list;
    for (const auto& [name, t] : tensors) list.push_back(t);
    return qd::codec::SerializeSafetensors(list, metadata ? &*metadata : nullptr);
  }
  // Absolute file offset of a tensor's data (tensors are laid out by name).
  std::int64_t DataOffset(const std::string& name) const {
    const std::vector<std::uint8_t> bytes = Bytes();
    std::uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | bytes[i];
    std::uint64_t at = 8 + header;
    for (const auto& [n, t] : tensors) {
      if (n == name) return static_cast<std::int64_t>(at);
      at += t.bytes.size();
    }
    return -1;
  }
};

std::vector<float> Normal(std::size_t n, std::uint64_t seed, float stddev = 0.02f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::string StateJson(const std::string& quant_type, std::uint64_t blocksize,
                      const std::string& dtype, const std::vector<std::uint64_t>& shape,
                      const qd::codec::Bnb4bitQuantized* nested) {
  nlohmann::ordered_json j;
  j["quant_type"] = quant_type;
  j["blocksize"] = blocksize;
  j["dtype"] = dtype;
  j["shape"] = shape;
  if (nested != nullptr && nested->nested) {
    j["nested_blocksize"] = nested->nested_blocksize;
    j["nested_dtype"] = "float32";
    j["nested_offset"] = static_cast<double>(nested->nested_offset);
  }
  return j.dump();
}

struct FourBit {
  FileSpec spec;
  qd::codec::Bnb4bitQuantized q;
  std::string w;
  std::string state;
};

// An HF-layout 4-bit layer "<w>" quantized from normal data.
FourBit Make4bit(const std::string& w, std::vector<std::uint64_t> shape, Bnb4bitType type,
                 std::uint64_t blocksize, bool nested, const std::string& dtype = "float16",
                 std::uint64_t seed = 1) {
  FourBit f;
  f.w = w;
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  const std::vector<float> x = Normal(n, seed);
  std::string error;
  EXPECT_TRUE(qd::codec::QuantizeBnb4bit(x.data(), n, type, blocksize, nested, &f.q, &error)) << error;
  const std::string qt = type == Bnb4bitType::kNf4 ? "nf4" : "fp4";
  f.spec.Put(w, "U8", {f.q.packed.size(), 1}, f.q.packed);
  if (nested) {
    f.spec.Put(w + ".absmax", "U8", {f.q.absmax_codes.size()}, f.q.absmax_codes);
    f.spec.PutF32(w + ".nested_absmax", f.q.nested_absmax);
    f.spec.PutF32(w + ".nested_quant_map", f.q.nested_quant_map);
  } else {
    f.spec.PutF32(w + ".absmax", f.q.absmax);
  }
  f.spec.PutF32(w + ".quant_map", Table(type));
  f.state = w + ".quant_state.bitsandbytes__" + qt;
  f.spec.PutJson(f.state, StateJson(qt, blocksize, dtype, shape, &f.q));
  return f;
}

qd::Outcome Decode(const FileSpec& spec, Kernel kernel = qd::codec::BestKernel()) {
  const std::vector<std::uint8_t> bytes = spec.Bytes();
  return qd::codec::DecodeBnbFile({bytes.data(), bytes.size()}, "test.safetensors", kernel);
}

// The refusing finding, checked field by field.
void ExpectRefused(const FileSpec& spec, const std::string& rule, const std::string& tensor,
                   const std::string& field, std::int64_t offset, std::int64_t block = -1,
                   std::int64_t element = -1) {
  const qd::Outcome o = Decode(spec);
  ASSERT_TRUE(o.refused) << "expected " << rule;
  ASSERT_FALSE(o.findings.empty());
  const qd::Finding& f = o.findings.back();
  EXPECT_EQ(f.rule, rule) << f.message;
  EXPECT_EQ(f.severity, qd::Severity::kError);
  EXPECT_EQ(f.tensor, tensor) << f.message;
  EXPECT_EQ(f.field, field) << f.message;
  EXPECT_EQ(f.byte_offset, offset) << f.message;
  EXPECT_EQ(f.block, block);
  EXPECT_EQ(f.element, element);
  EXPECT_EQ(f.row, -1);
  EXPECT_EQ(f.file, "test.safetensors");
  EXPECT_TRUE(o.tensors.empty());
}

// Reference 4-bit decode written plainly in the test.
std::vector<float> Reference4bit(const FourBit& f, Bnb4bitType type, std::uint64_t n,
                                 std::uint64_t blocksize, BnbDtype dtype) {
  std::vector<float> scales = f.q.absmax;
  if (f.q.nested) {
    for (std::size_t b = 0; b < scales.size(); ++b) {
      const float product = f.q.nested_quant_map[f.q.absmax_codes[b]] *
                            f.q.nested_absmax[b / f.q.nested_blocksize];
      scales[b] = product + f.q.nested_offset;
    }
  }
  std::vector<float> out(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint8_t byte = f.q.packed[i / 2];
    const int code = i % 2 == 0 ? byte >> 4 : byte & 15;
    out[i] = RoundedToDtype(TableValue(type, code) * scales[i / blocksize], dtype);
  }
  return out;
}

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

// ---- reader: layouts and outputs ---------------------------------------------------

TEST(BnbReader, DecodesHfLayoutWithEveryKernel) {
  for (bool nested : {false, true}) {
    FourBit f = Make4bit("model.w", {17, 129}, Bnb4bitType::kNf4, 64, nested, "bfloat16");
    f.spec.Put("model.a_bias", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0});  // 1, -2
    f.spec.Put("zz.ids", "I32", {1}, {1, 0, 0, 0});                       // not floating: skipped
    const std::vector<float> want = Reference4bit(f, Bnb4bitType::kNf4, 17 * 129, 64, BnbDtype::kBfloat16);
    for (Kernel k : qd::codec::AvailableKernels()) {
      const qd::Outcome o = Decode(f.spec, k);
      ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
      EXPECT_TRUE(o.findings.empty());
      ASSERT_EQ(o.tensors.size(), 2u);
      EXPECT_EQ(o.tensors[0].name, "model.a_bias");  // by name bytes
      EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
      EXPECT_EQ(o.tensors[1].name, "model.w");
      EXPECT_EQ(o.tensors[1].shape, (std::vector<std::uint64_t>{17, 129}));
      std::string where;
      EXPECT_TRUE(SameBits(o.tensors[1].values, want, &where)) << where;
    }
  }
}

TEST(BnbReader, DecodesGptqLayoutIncludingAnEmptyPrefix) {
  for (const std::string m : {"layers.0.", ""}) {
    FourBit f = Make4bit(m + "weight", {3, 37}, Bnb4bitType::kFp4, 32, false, "float32");
    FileSpec g;
    g.tensors[m + "weight"] = f.spec.tensors[m + "weight"];
    g.tensors[m + "weight_absmax"] = f.spec.tensors[m + "weight.absmax"];
    g.tensors[m + "weight_absmax"].spec.name = m + "weight_absmax";
    g.PutJson(m + "weight_quant_state", StateJson("fp4", 32, "float32", {3, 37}, nullptr));
    const qd::Outcome o = Decode(g);
    ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
    ASSERT_EQ(o.tensors.size(), 1u);
    EXPECT_EQ(o.tensors[0].name, m + "weight");
    std::string where;
    EXPECT_TRUE(SameBits(o.tensors[0].values, Reference4bit(f, Bnb4bitType::kFp4, 111, 32, BnbDtype::kFloat32), &where));
  }
}

TEST(BnbReader, QuantStorageAndTheTransposeQuirk) {
  // Packed bytes held in an F16 tensor: read as raw bytes, not as floats.
  FourBit f = Make4bit("w", {8, 32}, Bnb4bitType::kNf4, 64, false, "float32");
  f.spec.Put("w", "F16", {f.q.packed.size() / 2, 1}, f.q.packed);
  qd::Outcome o = Decode(f.spec);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);
  std::string where;
  EXPECT_TRUE(SameBits(o.tensors[0].values, Reference4bit(f, Bnb4bitType::kNf4, 256, 64, BnbDtype::kFloat32), &where));
  // [1, 2] stored as one byte in a [1, 1] tensor: bnb returns the transpose.
  FourBit t = Make4bit("w", {1, 2}, Bnb4bitType::kNf4, 64, false, "float32");
  o = Decode(t.spec);
  ASSERT_FALSE(o.refused);
  EXPECT_EQ(o.tensors[0].shape, (std::vector<std::uint64_t>{2, 1}));
  // The same shape stored [1] (rank 1, first dimension 1) is transposed too;
  // stored [2, 1] or with a rank-3 shape it is not.
  t.spec.Put("w", "U8", {1}, t.q.packed);
  EXPECT_EQ(Decode(t.spec).tensors[0].shape, (std::vector<std::uint64_t>{2, 1}));
  FourBit u = Make4bit("w", {1, 4}, Bnb4bitType::kNf4, 64, false, "float32");
  EXPECT_EQ(Decode(u.spec).tensors[0].shape, (std::vector<std::uint64_t>{1, 4}));
}

TEST(BnbReader, AFileWithoutLayersReadsAsSafetensors) {
  FileSpec s;
  s.Put("b", "F16", {1}, {0x00, 0x3c});
  s.Put("a", "F32", {1}, FloatBytes({2.0f}));
  s.Put("absmax", "F32", {1}, FloatBytes({3.0f}));
  const std::vector<std::uint8_t> bytes = s.Bytes();
  const qd::Outcome o = Decode(s);
  const qd::codec::ContainerResult c = qd::codec::ReadContainer({bytes.data(), bytes.size()}, "x");
  std::vector<qd::DecodedTensor> want;
  qd::codec::AppendFloatTensors(c.container, &want);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(o.tensors[i].name, want[i].name);
  // A blockwise8 state in __metadata__ with no W.absmax + W.quant_map pair: no layer.
  s.metadata = qd::codec::MetadataList{{"bnb_blockwise8_quant_state", "not json"}};
  EXPECT_FALSE(Decode(s).refused);
  // And a container error stays the container's.
  s.Put("c", "F32", {2}, FloatBytes({1.0f}));
  EXPECT_EQ(Decode(s).findings.back().rule.substr(0, 3), "ST-");
}

// ---- reader: the 4-bit rules, in check order -------------------------------------

TEST(BnbRules, Bnb105) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FileSpec two = f.spec;
  two.PutJson("w.quant_state.bitsandbytes__fp4", StateJson("fp4", 64, "float16", {4, 64}, nullptr));
  ExpectRefused(two, "BNB-105", "w", "quant_state", 8);
  // HF and GPT-QModel forms for the same W.
  FourBit g = Make4bit("weight", {4, 64}, Bnb4bitType::kNf4, 64, false);
  g.spec.PutJson("weight_quant_state", StateJson("nf4", 64, "float16", {4, 64}, nullptr));
  ExpectRefused(g.spec, "BNB-105", "weight", "quant_state", 8);
  FileSpec no_w = f.spec;
  no_w.Erase("w");
  ExpectRefused(no_w, "BNB-105", "w", "quant_state", 8);
  FileSpec no_absmax = f.spec;
  no_absmax.Erase("w.absmax");
  ExpectRefused(no_absmax, "BNB-105", "w", "quant_state", 8);
}

TEST(BnbRules, Bnb101) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  const std::string st = f.state;
  auto with_json = [&](const std::string& text) {
    FileSpec s = f.spec;
    s.PutJson(st, text);
    return s;
  };
  FileSpec not_u8 = f.spec;
  not_u8.Put(st, "I8", {4}, {'{', '}', ' ', ' '});
  ExpectRefused(not_u8, "BNB-101", st, "quant_state", 8);
  FileSpec rank2 = f.spec;
  rank2.Put(st, "U8", {1, 2}, {'{', '}'});
  ExpectRefused(rank2, "BNB-101", st, "quant_state", 8);
  const std::string good = StateJson("nf4", 64, "float16", {4, 64}, nullptr);
  for (const std::string& bad : {
           std::string("\xef\xbb\xbf") + good, good + std::string(1, '\0'), good + " x",
           std::string("[1]"), std::string(R"({"quant_type":"nf4","quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64.0,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":-64,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":"64","dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16"})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,-64]})"),
           std::string(R"({"quant_type":null,"blocksize":64,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":16,"shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"nested_offset":"0.1"})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"nested_blocksize":256.0})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"x":1e999})")}) {
    SCOPED_TRACE(bad);
    ExpectRefused(with_json(bad), "BNB-101", st, "quant_state", with_json(bad).DataOffset(st));
  }
  // Unknown keys are ignored.
  EXPECT_FALSE(Decode(with_json(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"extra":[1,{}]})")).refused);
}

TEST(BnbRules, Bnb001Bnb102Bnb103) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  auto with = [&](const std::string& qt, std::uint64_t bs, const std::string& dtype) {
    FileSpec s = f.spec;
    s.PutJson(f.state, StateJson(qt, bs, dtype, {4, 64}, nullptr));
    return s;
  };
  const std::int64_t at = f.spec.DataOffset(f.state);
  ExpectRefused(with("af4", 64, "float16"), "BNB-001", f.state, "quant_type", at);
  ExpectRefused(with("fp4", 64, "float16"), "BNB-102", f.state, "quant_type", at);
  for (std::uint64_t bs : {0ull, 16ull, 48ull, 8192ull}) {
    ExpectRefused(with("nf4", bs, "float16"), "BNB-001", f.state, "blocksize", with("nf4", bs, "float16").DataOffset(f.state));
  }
  ExpectRefused(with("nf4", 64, "float64"), "BNB-103", f.state, "dtype", at);
  // The GPT-QModel layout has no suffix to disagree with.
  FileSpec g;
  g.Put("weight", "U8", {128, 1}, f.q.packed);
  g.PutF32("weight_absmax", f.q.absmax);
  g.PutJson("weight_quant_state", StateJson("fp4", 64, "float16", {4, 64}, nullptr));
  EXPECT_FALSE(Decode(g).refused);
}

TEST(BnbRules, Bnb004) {
  FourBit f = Make4bit("w", {8, 64}, Bnb4bitType::kFp4, 64, true);
  const std::string st = f.state;
  nlohmann::ordered_json base = nlohmann::ordered_json::parse(StateJson("fp4", 64, "float16", {8, 64}, &f.q));
  auto with = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    nlohmann::ordered_json j = base;
    edit(j);
    FileSpec s = f.spec;
    s.PutJson(st, j.dump());
    return s;
  };
  auto at = [&](const FileSpec& s) { return s.DataOffset(st); };
  FileSpec s = with([](auto& j) { j.erase("nested_offset"); });
  ExpectRefused(s, "BNB-004", st, "nested_offset", at(s));
  s = with([](auto& j) { j.erase("nested_blocksize"); });
  ExpectRefused(s, "BNB-004", st, "nested_blocksize", at(s));
  s = with([](auto& j) { j["nested_blocksize"] = 100; });
  ExpectRefused(s, "BNB-004", st, "nested_blocksize", at(s));
  s = with([](auto& j) { j["nested_dtype"] = "float16"; });
  ExpectRefused(s, "BNB-004", st, "nested_dtype", at(s));
  s = f.spec;
  s.Erase("w.nested_absmax");
  ExpectRefused(s, "BNB-004", "w", "nested_absmax", 8);
  s = f.spec;
  s.Erase("w.nested_quant_map");
  ExpectRefused(s, "BNB-004", "w", "nested_quant_map", 8);
  // A nested tensor alone makes the layer nested (the peer's missing-offset case).
  FourBit flat = Make4bit("w", {8, 64}, Bnb4bitType::kFp4, 64, false);
  flat.spec.PutF32("w.nested_absmax", {1.0f});
  ExpectRefused(flat.spec, "BNB-004", flat.state, "nested_offset", flat.spec.DataOffset(flat.state));
  // Any nested_* key does too.
  FourBit keyed = Make4bit("w", {8, 64}, Bnb4bitType::kFp4, 64, false);
  keyed.spec.PutJson(keyed.state, R"({"quant_type":"fp4","blocksize":64,"dtype":"float16","shape":[8,64],"nested_whatever":1})");
  ExpectRefused(keyed.spec, "BNB-004", keyed.state, "nested_offset", keyed.spec.DataOffset(keyed.state));
  // Counts and dtypes of the nested tensors (step 11).
  s = f.spec;
  s.PutF32("w.nested_absmax", {1.0f, 2.0f});
  ExpectRefused(s, "BNB-004", "w.nested_absmax", "nested_absmax", 8);
  s = f.spec;
  s.PutF32("w.nested_quant_map", std::vector<float>(255, 0.0f));
  ExpectRefused(s, "BNB-004", "w.nested_quant_map", "nested_quant_map", 8);
}

TEST(BnbRules, Bnb002AndAbsmaxShape) {
  FourBit f = Make4bit("w", {3, 37}, Bnb4bitType::kNf4, 64, false);  // n = 111: 56 bytes
  FileSpec s = f.spec;
  std::vector<std::uint8_t> shorter = f.q.packed;
  shorter.pop_back();
  s.Put("w", "U8", {shorter.size(), 1}, shorter);
  ExpectRefused(s, "BNB-002", "w", "weight", 8);
  s = f.spec;
  s.PutJson(f.state, StateJson("nf4", 64, "float16", {1ull << 40, 1ull << 40}, nullptr));
  ExpectRefused(s, "BNB-002", "w", "weight", 8);
  s = f.spec;
  s.Put("w.absmax", "F16", {2}, {0, 0, 0, 0});
  ExpectRefused(s, "BNB-102", "w.absmax", "absmax", 8);
  s = f.spec;
  s.PutF32("w.absmax", {1.0f});
  ExpectRefused(s, "BNB-001", "w.absmax", "absmax", 8);
  s = f.spec;
  s.PutF32("w.quant_map", std::vector<float>(15, 0.0f));
  ExpectRefused(s, "BNB-102", "w.quant_map", "quant_map", 8);
  // quant_map is optional.
  s = f.spec;
  s.Erase("w.quant_map");
  EXPECT_FALSE(Decode(s).refused);
  // A nested layer's absmax must be U8.
  FourBit n = Make4bit("w", {3, 37}, Bnb4bitType::kNf4, 64, true);
  n.spec.PutF32("w.absmax", {1.0f, 2.0f});
  ExpectRefused(n.spec, "BNB-102", "w.absmax", "absmax", 8);
}

TEST(BnbRules, Bnb104FirstInStorageOrder) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 32, false);
  std::vector<float> absmax = f.q.absmax;
  absmax[5] = INFINITY;
  absmax[6] = NAN;
  FileSpec s = f.spec;
  s.PutF32("w.absmax", absmax);
  ExpectRefused(s, "BNB-104", "w.absmax", "absmax", s.DataOffset("w.absmax") + 20, 5, -1);
  // Nested: nested_absmax comes before nested_quant_map in the file.
  FourBit n = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 32, true);
  std::vector<float> map = n.q.nested_quant_map;
  map[200] = NAN;
  s = n.spec;
  s.PutF32("w.nested_quant_map", map);
  ExpectRefused(s, "BNB-104", "w.nested_quant_map", "nested_quant_map",
                s.DataOffset("w.nested_quant_map") + 800, -1, 200);
  s.PutF32("w.nested_absmax", {-INFINITY});
  ExpectRefused(s, "BNB-104", "w.nested_absmax", "nested_absmax", s.DataOffset("w.nested_absmax"), 0, -1);
}

TEST(BnbRules, Bnb106WarnsAndDecodesWithTheTable) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FileSpec s = f.spec;
  s.PutF32("w.quant_map", Table(Bnb4bitType::kFp4));
  const qd::Outcome o = Decode(s);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.findings.size(), 1u);
  EXPECT_EQ(o.findings[0].rule, "BNB-106");
  EXPECT_EQ(o.findings[0].severity, qd::Severity::kWarning);
  EXPECT_EQ(o.findings[0].tensor, "w.quant_map");
  EXPECT_EQ(o.findings[0].field, "quant_map");
  EXPECT_EQ(o.findings[0].byte_offset, s.DataOffset("w.quant_map"));  // code 0 differs first
  EXPECT_EQ(o.findings[0].element, 0);
  std::string where;
  EXPECT_TRUE(SameBits(o.tensors[0].values, Reference4bit(f, Bnb4bitType::kNf4, 256, 64, BnbDtype::kFloat16), &where));
}

TEST(BnbRules, LayersAreCheckedInByteOrderOfW) {
  FourBit a = Make4bit("b.w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FourBit b = Make4bit("a.w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FileSpec s = a.spec;
  for (const auto& [name, t] : b.spec.tensors) s.tensors[name] = t;
  s.PutJson(a.state, StateJson("nf4", 48, "float16", {4, 64}, nullptr));  // BNB-001 on b.w
  s.PutJson(b.state, StateJson("nf4", 64, "float64", {4, 64}, nullptr));  // BNB-103 on a.w
  ExpectRefused(s, "BNB-103", b.state, "dtype", s.DataOffset(b.state));
}

// ---- reader: 8-bit blockwise and int8 -----------------------------------------------

FileSpec MakeBlockwise8(bool nested, std::uint64_t n = 1000, std::uint64_t blocksize = 256) {
  const std::vector<float> x = Normal(n, 3);
  const std::vector<float> map = qd::codec::CreateDynamicMap();
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  std::string error;
  EXPECT_TRUE(qd::codec::QuantizeBlockwise8(x.data(), n, map.data(), blocksize, &codes, &absmax, &error));
  FileSpec s;
  s.Put("p.weight", "U8", {n}, codes);
  s.PutF32("p.weight.quant_map", map);
  nlohmann::ordered_json j;
  j["quant_type"] = nullptr;
  j["blocksize"] = blocksize;
  j["dtype"] = "bfloat16";
  j["shape"] = nullptr;
  if (nested) {
    const float offset = qd::codec::TorchMeanF32(absmax.data(), absmax.size());
    std::vector<float> centered(absmax.size());
    for (std::size_t b = 0; b < absmax.size(); ++b) centered[b] = absmax[b] - offset;
    std::vector<std::uint8_t> ncodes;
    std::vector<float> nabs;
    EXPECT_TRUE(qd::codec::QuantizeBlockwise8(centered.data(), centered.size(), map.data(), 256, &ncodes, &nabs, &error));
    s.Put("p.weight.absmax", "U8", {ncodes.size()}, ncodes);
    s.PutF32("p.weight.nested_absmax", nabs);
    s.PutF32("p.weight.nested_quant_map", map);
    j["nested_blocksize"] = 256;
    j["nested_dtype"] = "float32";
    j["nested_offset"] = offset;
  } else {
    s.PutF32("p.weight.absmax", absmax);
  }
  s.metadata = qd::codec::MetadataList{{"bnb_blockwise8_quant_state", j.dump()}, {"format", "pt"}};
  return s;
}

TEST(BnbBlockwise8, DecodesAndChecks) {
  for (bool nested : {false, true}) {
    const FileSpec s = MakeBlockwise8(nested);
    for (Kernel k : qd::codec::AvailableKernels()) {
      const qd::Outcome o = Decode(s, k);
      ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
      ASSERT_EQ(o.tensors.size(), 1u);
      EXPECT_EQ(o.tensors[0].name, "p.weight");
      EXPECT_EQ(o.tensors[0].shape, std::vector<std::uint64_t>{1000});
    }
  }
  const std::string key = "bnb_blockwise8_quant_state";
  auto with_state = [&](const std::string& text, bool nested = false) {
    FileSpec s = MakeBlockwise8(nested);
    (*s.metadata)[0].second = text;
    return s;
  };
  ExpectRefused(with_state("{"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":256})"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","shape":"x"})"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","shape":[1000],"shape":[1000]})"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":100,"dtype":"float16"})"), "BNB-107", "", "blocksize", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"int8"})"), "BNB-103", "", "dtype", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","nested_offset":0.5})"), "BNB-004", "", "nested_blocksize", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","nested_offset":0.5,"nested_blocksize":256,"nested_dtype":"float32"})"),
                "BNB-004", "p.weight", "nested_absmax", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","shape":[10,100]})"), "BNB-102", "p.weight", "shape", 8);
  EXPECT_FALSE(Decode(with_state(R"({"blocksize":256,"dtype":"float16","shape":[1000]})")).refused);
  FileSpec s = MakeBlockwise8(false);
  s.Put("p.weight", "I8", {1000}, std::vector<std::uint8_t>(1000, 0));
  ExpectRefused(s, "BNB-107", "p.weight", "weight", 8);
  s = MakeBlockwise8(false);
  s.PutF32("p.weight.quant_map", std::vector<float>(16, 0.0f));
  ExpectRefused(s, "BNB-107", "p.weight.quant_map", "quant_map", 8);
  s = MakeBlockwise8(false);
  s.PutF32("p.weight.absmax", {1.0f});
  ExpectRefused(s, "BNB-107", "p.weight.absmax", "absmax", 8);
  s = MakeBlockwise8(false);
  s.Put("p.weight.absmax", "U8", {4}, {0, 0, 0, 0});
  ExpectRefused(s, "BNB-102", "p.weight.absmax", "absmax", 8);
  s = MakeBlockwise8(false);
  std::vector<float> map = qd::codec::CreateDynamicMap();
  map[9] = NAN;
  s.PutF32("p.weight.quant_map", map);
  ExpectRefused(s, "BNB-104", "p.weight.quant_map", "quant_map", s.DataOffset("p.weight.quant_map") + 36, -1, 9);
}

FileSpec MakeInt8(const std::string& m, bool gptq) {
  const std::uint64_t rows = 6, columns = 37;
  const std::vector<float> w = Normal(rows * columns, 5);
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  std::string error;
  EXPECT_TRUE(qd::codec::QuantizeBnbInt8Rows(w.data(), rows, columns, &cb, &scb, &error));
  FileSpec s;
  s.Put(m + "weight", "I8", {rows, columns}, std::vector<std::uint8_t>(cb.begin(), cb.end()));
  if (gptq) {
    s.PutF32(m + "weight_scb", scb);
  } else {
    s.PutF32(m + "SCB", scb);
    s.Put(m + "weight_format", "U8", {}, {0});
  }
  s.PutF32(m + "bias", {0.5f});
  return s;
}

TEST(BnbInt8, DecodesAndChecks) {
  for (bool gptq : {false, true}) {
    const FileSpec s = MakeInt8("l.", gptq);
    const qd::Outcome o = Decode(s);
    ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
    ASSERT_EQ(o.tensors.size(), 2u);
    EXPECT_EQ(o.tensors[0].name, "l.bias");
    EXPECT_EQ(o.tensors[1].name, "l.weight");
    EXPECT_EQ(o.tensors[1].shape, (std::vector<std::uint64_t>{6, 37}));
  }
  FileSpec s = MakeInt8("l.", false);
  s.Erase("l.weight");
  ExpectRefused(s, "BNB-105", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.PutF32("l.weight_scb", std::vector<float>(6, 1.0f));  // two scales name l.weight
  ExpectRefused(s, "BNB-105", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.Put("l.weight", "U8", {6, 37}, std::vector<std::uint8_t>(222, 0));
  ExpectRefused(s, "BNB-108", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.Put("l.weight", "I8", {222}, std::vector<std::uint8_t>(222, 0));
  ExpectRefused(s, "BNB-108", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.PutF32("l.SCB", std::vector<float>(5, 1.0f));
  ExpectRefused(s, "BNB-108", "l.SCB", "SCB", 8);
  s = MakeInt8("l.", false);
  s.Put("l.weight_format", "U8", {1}, {1});
  ExpectRefused(s, "BNB-108", "l.weight_format", "weight_format", s.DataOffset("l.weight_format"));
  s = MakeInt8("l.", false);
  s.Put("l.weight_format", "I8", {}, {0});
  ExpectRefused(s, "BNB-108", "l.weight_format", "weight_format", 8);
  s = MakeInt8("", false);
  std::vector<float> scb(6, 1.0f);
  scb[4] = NAN;
  s.PutF32("SCB", scb);
  ExpectRefused(s, "BNB-104", "SCB", "SCB", s.DataOffset("SCB") + 16, -1, 4);
}

// ---- robustness ------------------------------------------------------------------

// Random byte edits of valid files: the reader never crashes (run under
// ASan/UBSan), a refusal has exactly one error and it is last, and every
// kernel decodes an accepted file to the same bits.
TEST(BnbRobustness, MutatedFilesNeverCrashAndKernelsAgree) {
  std::vector<std::vector<std::uint8_t>> seeds = {
      Make4bit("w", {5, 70}, Bnb4bitType::kNf4, 32, false).spec.Bytes(),
      Make4bit("m.w", {3, 37}, Bnb4bitType::kFp4, 64, true, "bfloat16").spec.Bytes(),
      MakeBlockwise8(true, 600, 64).Bytes(),
      MakeBlockwise8(false).Bytes(),
      MakeInt8("l.", false).Bytes(),
  };
  std::mt19937_64 rng(2024);
  int accepted = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::vector<std::uint8_t> bytes = seeds[iteration % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0: bytes[at] = static_cast<std::uint8_t>(rng()); break;
        case 1: bytes[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8)); break;
        case 2: bytes[at] = static_cast<std::uint8_t>("0123456789[]{},:\"-.e"[rng() % 20]); break;
        default: bytes[at] = static_cast<std::uint8_t>(bytes[at] + 1); break;
      }
    }
    std::vector<qd::Outcome> outcomes;
    for (Kernel k : qd::codec::AvailableKernels()) {
      outcomes.push_back(qd::codec::DecodeBnbFile({bytes.data(), bytes.size()}, "m", k));
    }
    const qd::Outcome& first = outcomes.front();
    int errors = 0;
    for (const qd::Finding& f : first.findings) errors += f.severity == qd::Severity::kError;
    ASSERT_EQ(errors, first.refused ? 1 : 0);
    if (first.refused) {
      ASSERT_EQ(first.findings.back().severity, qd::Severity::kError);
      continue;
    }
    ++accepted;
    for (const qd::Outcome& o : outcomes) {
      ASSERT_EQ(o.tensors.size(), first.tensors.size());
      for (std::size_t t = 0; t < o.tensors.size(); ++t) {
        std::string where;
        ASSERT_TRUE(SameBits(o.tensors[t].values, first.tensors[t].values, &where))
            << "iteration " << iteration << " tensor " << o.tensors[t].name << " " << where;
      }
    }
  }
  EXPECT_GT(accepted, 100);
}

// ---- encoders ---------------------------------------------------------------------

TEST(BnbEncoder, PaddingZeroBlocksAndStatistics) {
  // Odd n: the pad nibble is the code of 0.0 (7 for nf4, 0 for fp4).
  for (Bnb4bitType type : {Bnb4bitType::kNf4, Bnb4bitType::kFp4}) {
    const std::vector<float> x = {0.5f, -0.25f, 0.125f};
    qd::codec::Bnb4bitQuantized q;
    std::string error;
    ASSERT_TRUE(qd::codec::QuantizeBnb4bit(x.data(), 3, type, 64, false, &q, &error));
    ASSERT_EQ(q.packed.size(), 2u);
    EXPECT_EQ(q.packed[1] & 0x0f, type == Bnb4bitType::kNf4 ? 7 : 0);
  }
  // A zero full block stores 0; a zero partial block stores the 1e-38 floor.
  std::vector<float> zeros(96, 0.0f);
  qd::codec::Bnb4bitQuantized q;
  std::string error;
  ASSERT_TRUE(qd::codec::QuantizeBnb4bit(zeros.data(), 96, Bnb4bitType::kNf4, 64, false, &q, &error));
  ASSERT_EQ(q.absmax.size(), 2u);
  EXPECT_EQ(Bits(q.absmax[0]), 0u);
  EXPECT_EQ(Bits(q.absmax[1]), 0x006ce3eeu);
  for (std::uint8_t b : q.packed) EXPECT_EQ(b, 0x77);
  // Non-finite input is refused, as is nesting nothing.
  std::vector<float> bad = {1.0f, NAN};
  EXPECT_FALSE(qd::codec::QuantizeBnb4bit(bad.data(), 2, Bnb4bitType::kNf4, 64, false, &q, &error));
  EXPECT_FALSE(qd::codec::QuantizeBnb4bit(nullptr, 0, Bnb4bitType::kNf4, 64, true, &q, &error));
  EXPECT_TRUE(qd::codec::QuantizeBnb4bit(nullptr, 0, Bnb4bitType::kNf4, 64, false, &q, &error));
  // Int8: a zero row keeps SCB 0 and codes 0.
  std::vector<float> w = {0.0f, 0.0f, 0.5f, -1.0f};
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  ASSERT_TRUE(qd::codec::QuantizeBnbInt8Rows(w.data(), 2, 2, &cb, &scb, &error));
  EXPECT_EQ(scb, (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ(cb, (std::vector<std::int8_t>{0, 0, 64, -127}));
}

TEST(BnbEncoder, RoundTripsThroughTheReader) {
  for (Bnb4bitType type : {Bnb4bitType::kNf4, Bnb4bitType::kFp4}) {
    FourBit f = Make4bit("w", {33, 65}, type, 128, true, "float32", 9);
    const qd::Outcome o = Decode(f.spec);
    ASSERT_FALSE(o.refused);
    const std::vector<float> x = Normal(33 * 65, 9);
    double worst = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(o.tensors[0].values[i]) - x[i]));
    }
    EXPECT_LT(worst, 0.05) << "4-bit error bound for std 0.02 data";
  }
}

TEST(BnbEncoder, DynamicMapAndMean) {
  const std::vector<float> map = qd::codec::CreateDynamicMap();
  ASSERT_EQ(map.size(), 256u);
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(map[127], 0.0f);
  EXPECT_EQ(map[255], 1.0f);
  EXPECT_EQ(qd::codec::CreateDynamicMap(false, 7, 8).size(), 256u);
  EXPECT_TRUE(qd::codec::CreateDynamicMap(true, 9, 8).empty());
  std::vector<float> ones(1000, 1.0f);
  EXPECT_EQ(qd::codec::TorchMeanF32(ones.data(), ones.size()), 1.0f);
  const std::vector<float> few = {1.0f, 2.0f, 4.0f};
  EXPECT_EQ(qd::codec::TorchMeanF32(few.data(), few.size()), 7.0f / 3.0f);
}

}  // namespace
