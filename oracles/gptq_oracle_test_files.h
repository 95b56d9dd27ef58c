// gptq_oracle_test_files.h: the hand-built files, configs and finding
// checks the oracle GPTQ tests share (gptq_oracle_test.cc: fields, zeros,
// dequantization, output, layers, packer; gptq_config_oracle_test.cc: the
// config rules). The header JSON is padded with spaces to exactly kHeader
// bytes, so the data starts at byte 8 + kHeader and every byte_offset is
// 8 + kHeader + begin + j, begin the sum of the sizes of the tensors before
// it (they are laid out in the order given).
#ifndef QUANTDIFF_ORACLES_GPTQ_ORACLE_TEST_FILES_H_
#define QUANTDIFF_ORACLES_GPTQ_ORACLE_TEST_FILES_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "oracles/gptq.h"
#include "oracles/oracle_test_files.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::gptq_test_files {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::size_t kHeader = 1024;              // header length N_hdr
inline constexpr std::int64_t kData = 8 + kHeader;       // absolute offset of data byte 0
inline const std::string kFile = "dir/m.safetensors";
inline const std::string kConfigName = "dir/m.quantize_config.json";

struct T {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  Bytes data;
};

inline Bytes I32(const std::vector<std::uint32_t>& words) {
  Bytes bytes;
  for (const std::uint32_t w : words) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(w >> (8 * i)));
  }
  return bytes;
}

inline Bytes U16(const std::vector<std::uint16_t>& halves) {
  Bytes bytes;
  for (const std::uint16_t h : halves) {
    bytes.push_back(static_cast<std::uint8_t>(h));
    bytes.push_back(static_cast<std::uint8_t>(h >> 8));
  }
  return bytes;
}

inline std::uint32_t Bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// A safetensors file with the tensors laid out in the order given.
inline Bytes MakeFile(const std::vector<T>& tensors) {
  std::string header = "{";
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const T& t = tensors[i];
    if (i != 0) header += ",";
    header += test_files::Member(t.name, t.dtype, t.shape, offset, offset + t.data.size());
    offset += t.data.size();
  }
  header += "}";
  EXPECT_LE(header.size(), kHeader) << "the test header does not fit";
  header.resize(kHeader, ' ');
  Bytes file;
  for (int i = 0; i < 8; ++i) {
    file.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(kHeader) >> (8 * i)));
  }
  file.insert(file.end(), header.begin(), header.end());
  for (const T& t : tensors) file.insert(file.end(), t.data.begin(), t.data.end());
  return file;
}

// One layer P: qweight [K*b/32, N], qzeros [G, N*b/32], F16 scales [G, N]
// (1.0 unless given), g_idx [K] = k / gs (gs = K when G = 1). Laid out in the
// order qweight, qzeros, scales, g_idx: begins 0, 4*K*b/32*N, then + 4*G*N*b/32,
// then + 2*G*N.
struct LayerSpec {
  std::string prefix = "l.";
  int bits = 4;
  std::uint64_t k = 64;
  std::uint64_t n = 32;
  std::uint64_t g = 2;
  std::vector<std::uint32_t> qweight;  // default zeros
  std::vector<std::uint32_t> qzeros;   // default zeros
  std::vector<std::uint16_t> scales;   // default 1.0 (0x3C00)
  std::vector<std::uint32_t> g_idx;    // default k / (K / G)
};

inline std::vector<T> Layer(LayerSpec s) {
  const std::uint64_t rows = s.k * s.bits / 32;
  const std::uint64_t cols = s.n * s.bits / 32;
  if (s.qweight.empty()) s.qweight.assign(rows * s.n, 0);
  if (s.qzeros.empty()) s.qzeros.assign(s.g * cols, 0);
  if (s.scales.empty()) s.scales.assign(s.g * s.n, 0x3C00);
  if (s.g_idx.empty()) {
    for (std::uint64_t k = 0; k < s.k; ++k) s.g_idx.push_back(static_cast<std::uint32_t>(k / (s.k / s.g)));
  }
  return {{s.prefix + "qweight", "I32", {rows, s.n}, I32(s.qweight)},
          {s.prefix + "qzeros", "I32", {s.g, cols}, I32(s.qzeros)},
          {s.prefix + "scales", "F16", {s.g, s.n}, U16(s.scales)},
          {s.prefix + "g_idx", "I32", {s.k}, I32(s.g_idx)}};
}

inline qd::SideFile Config(const std::string& text, const std::string& name = kConfigName) {
  return qd::SideFile{name, Bytes(text.begin(), text.end())};
}

inline qd::Outcome Read(const std::vector<T>& tensors, const std::vector<qd::SideFile>& configs,
                 std::vector<GptqLayerCodes>* layers = nullptr) {
  const Bytes file = MakeFile(tensors);
  return ReadGptqFile(qd::ByteView{file.data(), file.size()}, kFile, configs, layers);
}

inline qd::Outcome Read(const std::vector<T>& tensors, const std::string& config,
                 std::vector<GptqLayerCodes>* layers = nullptr) {
  return Read(tensors, std::vector<qd::SideFile>{Config(config)}, layers);
}

inline std::string Describe(const qd::Outcome& outcome) {
  std::string text = outcome.refused ? "refused" : "accepted";
  for (const qd::Finding& f : outcome.findings) {
    text += "\n  " + f.rule + " file=" + f.file + " tensor=" + f.tensor + " field=" + f.field +
            " byte_offset=" + std::to_string(f.byte_offset) + " row=" + std::to_string(f.row) +
            " element=" + std::to_string(f.element) + ": " + f.message;
  }
  return text;
}

// Checks one finding's compared fields (rule, severity, file, tensor, field,
// byte_offset, row, block, element).
inline void ExpectFinding(const qd::Finding& f, const char* rule, qd::Severity severity,
                   const std::string& file, const std::string& tensor, const std::string& field,
                   std::int64_t byte_offset, std::int64_t row = -1, std::int64_t element = -1) {
  test_files::ExpectFindingFields(f, rule, severity, file, tensor, field, byte_offset, row, -1, element);
  EXPECT_FALSE(f.message.empty());
}

// A refused outcome whose only finding is the given error.
inline void ExpectOnlyError(const qd::Outcome& o, const char* rule, const std::string& file,
                     const std::string& tensor, const std::string& field,
                     std::int64_t byte_offset, std::int64_t row = -1,
                     std::int64_t element = -1) {
  ASSERT_TRUE(o.refused) << Describe(o);
  ASSERT_EQ(o.findings.size(), 1u) << Describe(o);
  ExpectFinding(o.findings[0], rule, qd::Severity::kError, file, tensor, field, byte_offset, row,
                element);
  EXPECT_TRUE(o.tensors.empty());
}

// A config error: file = the source, no tensor, byte_offset -1.
inline void ExpectConfigError(const qd::Outcome& o, const char* rule, const std::string& field,
                       const std::string& file = kConfigName) {
  ExpectOnlyError(o, rule, file, "", field, -1);
}

inline const std::string kV1 = R"({"bits": 4, "group_size": 32})";
inline const std::string kV2 = R"({"bits": 4, "group_size": 32, "format": "gptq_v2"})";

// One default layer (LayerSpec defaults).
inline std::vector<T> SmallLayer() {
  LayerSpec s;
  return Layer(s);
}

}  // namespace qd::oracle::gptq_test_files

#endif  // QUANTDIFF_ORACLES_GPTQ_ORACLE_TEST_FILES_H_
