// bnb_codec_test_support.h: what the bitsandbytes codec tests share
// (bnb_codec_test.cc, bnb_kernels_test.cc): the tests' own NF4 / FP4 tables
// and rounding to the restored dtype, bit-for-bit comparison, and a file
// builder of 4-bit, nested, 8-bit and int8 layers. Expected values never
// come from the codec (see bnb_codec_test.cc).
#ifndef QUANTDIFF_TESTS_BNB_CODEC_TEST_SUPPORT_H_
#define QUANTDIFF_TESTS_BNB_CODEC_TEST_SUPPORT_H_

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
#include "property_tests/gen/bnb_tables.h"
#include "property_tests/gen/half.h"

namespace qd_bnb_test {

using qd::codec::Bnb4bitType;
using qd::codec::BnbDtype;
using qd::codec::Kernel;

inline std::vector<std::uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<std::uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }
inline float FromBits(std::uint32_t u) { return std::bit_cast<float>(u); }

// docs/bnb.md "Decoding": TABLE[quant_type][code], from the tests' tables.
inline float TableValue(Bnb4bitType type, int code) {
  return qdtest::BnbTableValue(type == Bnb4bitType::kFp4, code);
}

inline std::vector<float> Table(Bnb4bitType type) {
  std::vector<float> t(16);
  for (int code = 0; code < 16; ++code) t[code] = TableValue(type, code);
  return t;
}

// docs/bnb.md "Decoding": the product rounded to dtype (RNE) and widened back.
inline float RoundedToDtype(float x, BnbDtype dtype) {
  switch (dtype) {
    case BnbDtype::kFloat16: return qdtest::RoundedThroughHalf(x);
    case BnbDtype::kBfloat16: return qdtest::RoundedThroughBFloat16(x);
    case BnbDtype::kFloat32: return x;
  }
  return x;
}

// docs/bnb.md "Decoding", int8 row-scaled: 0x3c010204, the binary32 nearest 1/127.
inline constexpr std::uint32_t kInt8ScaleBits = 0x3c010204u;

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b, std::string* where) {
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

inline std::vector<float> Normal(std::size_t n, std::uint64_t seed, float stddev = 0.02f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::string StateJson(const std::string& quant_type, std::uint64_t blocksize,
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
inline FourBit Make4bit(const std::string& w, std::vector<std::uint64_t> shape, Bnb4bitType type,
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

inline qd::Outcome Decode(const FileSpec& spec, Kernel kernel = qd::codec::BestKernel()) {
  const std::vector<std::uint8_t> bytes = spec.Bytes();
  return qd::codec::DecodeBnbFile({bytes.data(), bytes.size()}, "test.safetensors", kernel);
}

// The refusing finding, checked field by field.
inline void ExpectRefused(const FileSpec& spec, const std::string& rule, const std::string& tensor,
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
inline std::vector<float> Reference4bit(const FourBit& f, Bnb4bitType type, std::uint64_t n,
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

}  // namespace qd_bnb_test

#endif  // QUANTDIFF_TESTS_BNB_CODEC_TEST_SUPPORT_H_
