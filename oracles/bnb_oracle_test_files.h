// bnb_oracle_test_files.h: the safetensors files and checks the bitsandbytes
// oracle tests share (bnb_oracle_test.cc, bnb_rejects_oracle_test.cc):
// tensors built from bit patterns, 4-bit and nested layers, and the
// expectations on an outcome. The values the tests expect come from
// docs/bnb.md and hand arithmetic, never from the reader.
#ifndef QUANTDIFF_ORACLES_BNB_ORACLE_TEST_FILES_H_
#define QUANTDIFF_ORACLES_BNB_ORACLE_TEST_FILES_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/bnb_test_tables.h"
#include "oracles/oracle_test_files.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::bnb_test {

using Bytes = std::vector<std::uint8_t>;
using qd::oracle::test::Bits;

inline constexpr char kFileName[] = "model.safetensors";

using qd::oracle::test::kFp4;
using qd::oracle::test::kNf4;

inline std::uint32_t BitsOf(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float FloatOf(std::uint32_t bits) {
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// ---------------------------------------------------------------------------
// Building files.

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  Bytes data;
};

inline Bytes F32(const Bits& bits) {
  Bytes out;
  for (const std::uint32_t b : bits) {
    for (int k = 0; k < 4; ++k) out.push_back(static_cast<std::uint8_t>(b >> (8 * k)));
  }
  return out;
}

inline Bytes Text(const std::string& text) { return Bytes(text.begin(), text.end()); }

// A built file and where each tensor's data begins (8 + N + begin).
struct File {
  Bytes bytes;
  std::map<std::string, std::int64_t> data_at;
};

// The tensors in the given order; metadata is the raw JSON text of the
// __metadata__ object (or empty). The header is padded to a multiple of 8.
inline File Build(const std::vector<TensorSpec>& tensors, const std::string& metadata = "") {
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":" + metadata;
    first = false;
  }
  std::uint64_t offset = 0;
  std::map<std::string, std::uint64_t> begins;
  for (const TensorSpec& t : tensors) {
    if (!first) header += ",";
    first = false;
    header += test_files::Member(t.name, t.dtype, t.shape, offset, offset + t.data.size());
    begins[t.name] = offset;
    offset += t.data.size();
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  File file;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file.bytes.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  file.bytes.insert(file.bytes.end(), header.begin(), header.end());
  for (const TensorSpec& t : tensors)
    file.bytes.insert(file.bytes.end(), t.data.begin(), t.data.end());
  for (const auto& [name, begin] : begins)
    file.data_at[name] = static_cast<std::int64_t>(8 + n + begin);
  return file;
}

inline qd::Outcome Read(const File& file) {
  return ReadBnbFile(qd::ByteView{file.bytes.data(), file.bytes.size()}, kFileName);
}

// The packed quant_state text of a 4-bit layer.
inline std::string State(const std::string& quant_type, int blocksize, const std::string& dtype,
                  const std::string& shape, const std::string& extra = "") {
  return "{\"quant_type\": \"" + quant_type + "\", \"blocksize\": " + std::to_string(blocksize) +
         ", \"dtype\": \"" + dtype + "\", \"shape\": " + shape + extra + "}";
}

// A 4-bit HF layer: W (U8 [bytes, 1]), W.absmax (F32), W.quant_map (the
// table of quant_type) and W.quant_state.bitsandbytes__<suffix>.
inline std::vector<TensorSpec> FourBitLayer(const std::string& w, const std::string& state,
                                     const Bytes& packed, const Bits& absmax,
                                     const std::string& suffix = "nf4") {
  const Bits& table = suffix == "fp4" ? kFp4 : kNf4;
  return {
      {w, "U8", {packed.size(), 1}, packed},
      {w + ".absmax", "F32", {absmax.size()}, F32(absmax)},
      {w + ".quant_map", "F32", {16}, F32(table)},
      {w + ".quant_state.bitsandbytes__" + suffix, "U8", {state.size()}, Text(state)},
  };
}

// A nested 4-bit HF layer: absmax U8 codes, nested_absmax, nested_quant_map.
inline std::vector<TensorSpec> NestedLayer(const std::string& w, const std::string& state,
                                    const Bytes& packed, const Bytes& codes,
                                    const Bits& nested_absmax, const Bits& nested_quant_map) {
  std::vector<TensorSpec> tensors = FourBitLayer(w, state, packed, {});
  tensors[1] = {w + ".absmax", "U8", {codes.size()}, codes};
  tensors.push_back({w + ".nested_absmax", "F32", {nested_absmax.size()}, F32(nested_absmax)});
  tensors.push_back(
      {w + ".nested_quant_map", "F32", {nested_quant_map.size()}, F32(nested_quant_map)});
  return tensors;
}

inline const std::string kNested =
    ", \"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": -1.0";

// A 256-entry map that is zero except at the given codes.
inline Bits Map256(const std::map<int, std::uint32_t>& entries) {
  Bits map(256, 0);
  for (const auto& [code, bits] : entries) map[code] = bits;
  return map;
}

inline std::vector<TensorSpec> Without(std::vector<TensorSpec> tensors, const std::string& name) {
  std::vector<TensorSpec> out;
  for (TensorSpec& t : tensors) {
    if (t.name != name) out.push_back(std::move(t));
  }
  return out;
}

inline std::vector<TensorSpec> Replace(std::vector<TensorSpec> tensors, const TensorSpec& spec) {
  for (TensorSpec& t : tensors) {
    if (t.name == spec.name) t = spec;
  }
  return tensors;
}

inline std::vector<TensorSpec> Plus(std::vector<TensorSpec> tensors, const std::vector<TensorSpec>& more) {
  tensors.insert(tensors.end(), more.begin(), more.end());
  return tensors;
}

// ---------------------------------------------------------------------------
// Checking outcomes.

inline std::string Describe(const qd::Outcome& outcome) {
  std::string text = outcome.refused ? "refused" : "accepted";
  for (const qd::Finding& f : outcome.findings) {
    text += "\n  " + f.rule + " tensor=" + f.tensor + " field=" + f.field +
            " byte_offset=" + std::to_string(f.byte_offset) + " block=" + std::to_string(f.block) +
            " element=" + std::to_string(f.element) + ": " + f.message;
  }
  return text;
}

inline constexpr std::int64_t kAny = std::numeric_limits<std::int64_t>::min();

// The outcome is refused and its last (error) finding is as given.
inline void ExpectRefused(const qd::Outcome& outcome, const std::string& rule, const std::string& tensor,
                   const std::string& field, std::int64_t byte_offset = kAny,
                   std::int64_t block = -1, std::int64_t element = -1) {
  ASSERT_TRUE(outcome.refused) << Describe(outcome);
  ASSERT_FALSE(outcome.findings.empty());
  const qd::Finding& f = outcome.findings.back();
  EXPECT_EQ(f.rule, rule) << Describe(outcome);
  EXPECT_EQ(f.severity, qd::Severity::kError);
  EXPECT_EQ(f.file, kFileName);
  EXPECT_EQ(f.tensor, tensor) << Describe(outcome);
  EXPECT_EQ(f.field, field) << Describe(outcome);
  if (byte_offset != kAny) {
    EXPECT_EQ(f.byte_offset, byte_offset) << Describe(outcome);
  }
  EXPECT_EQ(f.block, block) << Describe(outcome);
  EXPECT_EQ(f.element, element) << Describe(outcome);
  EXPECT_TRUE(outcome.tensors.empty());
}

// The outcome is accepted with no finding and decodes `name` to these bits.
inline void ExpectDecoded(const qd::Outcome& outcome, const std::string& name,
                   const std::vector<std::uint64_t>& shape, const Bits& bits) {
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  const qd::DecodedTensor* found = nullptr;
  for (const qd::DecodedTensor& t : outcome.tensors) {
    if (t.name == name) found = &t;
  }
  ASSERT_NE(found, nullptr) << "no decoded tensor " << name;
  EXPECT_EQ(found->shape, shape);
  ASSERT_EQ(found->values.size(), bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(BitsOf(found->values[i]), bits[i]) << "element " << i << " is " << found->values[i];
  }
}

}  // namespace qd::oracle::bnb_test

#endif  // QUANTDIFF_ORACLES_BNB_ORACLE_TEST_FILES_H_
