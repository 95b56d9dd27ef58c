// oracle_test_files.h: the hand-built safetensors files and helpers that the
// oracle's container tests (oracle_test.cc) and RBQ tests (rbq_oracle_test.cc)
// share: a length prefix and header written from literal text, entries, RBQ
// blocks, little-endian puts, and a one-line summary of an outcome's rules.
#ifndef QUANTDIFF_ORACLES_ORACLE_TEST_FILES_H_
#define QUANTDIFF_ORACLES_ORACLE_TEST_FILES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/json.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::test_files {

using Bytes = std::vector<std::uint8_t>;

inline constexpr char kFileName[] = "model.safetensors";

// 8-byte little-endian N, the header, the data. pad appends spaces until N
// is a multiple of 8 (so that no ST-102 warning appears).
inline Bytes MakeFile(std::string header, const Bytes& data = {}, bool pad = true) {
  if (pad) {
    while (header.size() % 8 != 0) header += ' ';
  }
  Bytes file;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

// A file whose length prefix says n, followed by `rest`.
inline Bytes RawFile(std::uint64_t n, std::size_t rest) {
  Bytes file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  file.resize(8 + rest, ' ');
  return file;
}

inline qd::ByteView View(const Bytes& bytes) { return qd::ByteView{bytes.data(), bytes.size()}; }

inline qd::Outcome Read(const Bytes& file) { return ReadSafetensors(View(file), kFileName); }
inline qd::Outcome ReadRbq(const Bytes& file) { return ReadRbqFile(View(file), kFileName); }

// "ST-101,ST-004 refused": the rule IDs in order, then whether refused.
inline std::string Summary(const qd::Outcome& outcome) {
  std::string text;
  for (const qd::Finding& finding : outcome.findings) {
    if (!text.empty()) text += ",";
    text += finding.rule;
  }
  return text + (outcome.refused ? " refused" : " accepted");
}

inline std::string Entry(const std::string& dtype, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// Every compared field of a finding (rule, severity, file, tensor, field,
// byte_offset, row, block, element), the message aside.
inline void ExpectFindingFields(const qd::Finding& f, const std::string& rule, qd::Severity severity,
                                const std::string& file, const std::string& tensor, const std::string& field,
                                std::int64_t byte_offset, std::int64_t row, std::int64_t block,
                                std::int64_t element) {
  EXPECT_EQ(f.rule, rule);
  EXPECT_EQ(f.severity, severity);
  EXPECT_EQ(f.file, file);
  EXPECT_EQ(f.tensor, tensor);
  EXPECT_EQ(f.field, field);
  EXPECT_EQ(f.byte_offset, byte_offset);
  EXPECT_EQ(f.row, row);
  EXPECT_EQ(f.block, block);
  EXPECT_EQ(f.element, element);
}

// The member "NAME":{...} of a header, its shape written as a JSON array
// (the bitsandbytes and GPTQ oracle tests build their files from these).
inline std::string Member(const std::string& name, const std::string& dtype,
                          const std::vector<std::uint64_t>& shape, std::uint64_t begin, std::uint64_t end) {
  std::string items = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) items += (i ? "," : "") + std::to_string(shape[i]);
  return "\"" + name + "\":" + Entry(dtype, items + "]", begin, end);
}

inline void PutU16(Bytes* out, std::uint16_t v) {
  out->push_back(static_cast<std::uint8_t>(v));
  out->push_back(static_cast<std::uint8_t>(v >> 8));
}
inline void PutU32(Bytes* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void PutU64(Bytes* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

inline std::uint32_t Bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// An RBQ block: the scale, then the payload bytes (the rest zero).
inline Bytes Block(int bits, std::uint16_t scale, const Bytes& payload) {
  Bytes block;
  PutU16(&block, scale);
  Bytes body(bits == 4 ? 16 : 32, 0);
  for (std::size_t i = 0; i < payload.size(); ++i) body[i] = payload[i];
  block.insert(block.end(), body.begin(), body.end());
  return block;
}

inline void Append(Bytes* out, const Bytes& more) { out->insert(out->end(), more.begin(), more.end()); }

inline constexpr char kQ4Metadata[] = R"("__metadata__":{"format":"rabbit-q4b32","block":"32","scale":"f16"})";
inline constexpr char kQ8Metadata[] = R"("__metadata__":{"format":"rabbit-q8b32","block":"32","scale":"f16"})";

}  // namespace qd::oracle::test_files

#endif  // QUANTDIFF_ORACLES_ORACLE_TEST_FILES_H_
