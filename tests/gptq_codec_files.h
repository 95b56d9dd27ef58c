// gptq_codec_files.h: the hand-built GPTQ safetensors files, configs and
// finding expectations that tests/gptq_codec_test.cc (layers, detection,
// decoding) and tests/gptq_config_codec_test.cc (config steps C1..C11) share.
// Byte offsets in the tests are worked out by hand from the layout these
// builders write (docs/gptq.md).
#ifndef QUANTDIFF_TESTS_GPTQ_CODEC_FILES_H_
#define QUANTDIFF_TESTS_GPTQ_CODEC_FILES_H_

#include <gtest/gtest.h>
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>
#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "tests/recording_sink.h"

namespace qd::gptq_codec_test {

using qd::codec::GptqFormat;
using qd::codec::GptqResult;

inline const std::string kFile = "m.safetensors";

// ---- bytes ------------------------------------------------------------------

inline std::vector<std::uint8_t> Words(const std::vector<std::uint32_t>& w) {
  std::vector<std::uint8_t> b;
  for (std::uint32_t v : w) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  return b;
}
inline std::vector<std::uint8_t> Halves(const std::vector<std::uint16_t>& h) {
  std::vector<std::uint8_t> b;
  for (std::uint16_t v : h) {
    b.push_back(static_cast<std::uint8_t>(v));
    b.push_back(static_cast<std::uint8_t>(v >> 8));
  }
  return b;
}
inline std::vector<std::uint8_t> Text(const std::string& s) { return {s.begin(), s.end()}; }

// ---- files ------------------------------------------------------------------

// Tensors written in the order added: data begins are the running byte sums.
struct FileSpec {
  std::vector<qd::codec::TensorWithBytes> tensors;

  void Add(const std::string& name, const std::string& dtype, std::vector<std::uint64_t> shape,
           std::vector<std::uint8_t> bytes) {
    tensors.push_back({{name, dtype, std::move(shape), 0}, std::move(bytes)});
  }
  qd::codec::TensorWithBytes* Find(const std::string& name) {
    for (auto& t : tensors) {
      if (t.spec.name == name) return &t;
    }
    return nullptr;
  }
  void Erase(const std::string& name) {
    for (auto it = tensors.begin(); it != tensors.end(); ++it) {
      if (it->spec.name == name) {
        tensors.erase(it);
        return;
      }
    }
  }
  std::vector<std::uint8_t> Bytes() const { return qd::codec::SerializeSafetensors(tensors, nullptr); }
};

// The data section starts at 8 + the u64 little-endian header length.
inline std::int64_t DataStart(const std::vector<std::uint8_t>& file) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  return static_cast<std::int64_t>(8 + n);
}

// A layer with zero codes: qweight, qzeros, scales, g_idx (then bias), in that
// order. Defaults: 4 bits, K 64, N 32, group 32 -> G 2; qweight [8, 32] at
// 0..1024, qzeros [2, 4] at 1024..1056 (every v1 field 7), scales F16 [2, 32]
// at 1056..1184 (1.0), g_idx [64] at 1184..1440 (k / 32).
struct Layer {
  std::string prefix = "layer.";
  int bits = 4;
  std::uint64_t k = 64, n = 32, groups = 2;
  std::int64_t group_size = 32;
  std::uint32_t zero_word = 0x77777777u;
  std::string scales_dtype = "F16";
  bool bias = false;
};

inline void AddLayer(FileSpec* f, const Layer& l) {
  const std::uint64_t rows = l.k / 32 * l.bits;
  const std::uint64_t zcols = l.n / 32 * l.bits;
  f->Add(l.prefix + "qweight", "I32", {rows, l.n}, Words(std::vector<std::uint32_t>(rows * l.n, 0)));
  std::uint32_t zw = l.zero_word;
  if (l.bits != 4) zw = 0;
  f->Add(l.prefix + "qzeros", "I32", {l.groups, zcols},
         Words(std::vector<std::uint32_t>(l.groups * zcols, zw)));
  if (l.scales_dtype == "F32") {
    f->Add(l.prefix + "scales", "F32", {l.groups, l.n},
           Words(std::vector<std::uint32_t>(l.groups * l.n, 0x3f800000u)));
  } else {
    const std::uint16_t one = l.scales_dtype == "BF16" ? 0x3f80 : 0x3c00;
    f->Add(l.prefix + "scales", l.scales_dtype, {l.groups, l.n},
           Halves(std::vector<std::uint16_t>(l.groups * l.n, one)));
  }
  std::vector<std::uint32_t> g(l.k);
  for (std::uint64_t i = 0; i < l.k; ++i) {
    g[i] = l.group_size == -1 ? 0 : static_cast<std::uint32_t>(i / l.group_size);
  }
  f->Add(l.prefix + "g_idx", "I32", {l.k}, Words(g));
  if (l.bias) f->Add(l.prefix + "bias", "F16", {l.n}, Halves(std::vector<std::uint16_t>(l.n, 0x3c00)));
}

inline FileSpec DefaultFile() {
  FileSpec f;
  AddLayer(&f, Layer{});
  return f;
}

inline FileSpec DenseFile() {
  FileSpec f;
  f.Add("w", "F32", {2}, Words({0x3f800000u, 0x40000000u}));
  return f;
}

inline qd::SideFile Cfg(const std::string& text, const std::string& name = "q.json") {
  return qd::SideFile{name, Text(text)};
}
inline const std::string kCfg4 = R"({"bits": 4, "group_size": 32})";

inline GptqResult Read(const std::vector<std::uint8_t>& file, const std::vector<qd::SideFile>& configs) {
  return qd::codec::ReadGptq({file.data(), file.size()}, kFile, configs);
}
inline GptqResult Read(const FileSpec& f, const std::vector<qd::SideFile>& configs) {
  return Read(f.Bytes(), configs);
}

// The finding every refusal ends with, field by field.
struct Want {
  std::string rule;
  std::string file;
  std::string tensor;
  std::string field;
  std::int64_t offset = -1;
  std::int64_t row = -1;
  std::int64_t element = -1;
  qd::Severity severity = qd::Severity::kError;
};

inline void ExpectFinding(const qd::Finding& f, const Want& w) {
  EXPECT_EQ(f.rule, w.rule) << f.message;
  EXPECT_EQ(f.severity, w.severity) << f.rule;
  EXPECT_EQ(f.file, w.file) << f.rule;
  EXPECT_EQ(f.tensor, w.tensor) << f.rule;
  EXPECT_EQ(f.field, w.field) << f.rule;
  EXPECT_EQ(f.byte_offset, w.offset) << f.rule;
  EXPECT_EQ(f.row, w.row) << f.rule;
  EXPECT_EQ(f.block, -1) << f.rule;
  EXPECT_EQ(f.element, w.element) << f.rule;
}

inline void ExpectRefused(const GptqResult& r, const Want& w) {
  ASSERT_TRUE(r.refused);
  ASSERT_FALSE(r.findings.empty());
  ExpectFinding(r.findings.back(), w);
  int errors = 0;
  for (const qd::Finding& f : r.findings) errors += f.severity == qd::Severity::kError;
  EXPECT_EQ(errors, 1);
  EXPECT_TRUE(r.layers.empty());
}

inline Want ConfigWant(const std::string& rule, const std::string& field, const std::string& file = "q.json") {
  return Want{rule, file, "", field, -1};
}
inline Want HeaderWant(const std::string& rule, const std::string& tensor, const std::string& field) {
  return Want{rule, kFile, tensor, field, 8};
}

inline void ExpectAccepted(const GptqResult& r, std::vector<std::string> warnings = {}) {
  EXPECT_FALSE(r.refused) << (r.findings.empty() ? "" : r.findings.back().rule + ": " + r.findings.back().message);
  std::vector<std::string> got;
  for (const qd::Finding& f : r.findings) got.push_back(f.rule);
  EXPECT_EQ(got, warnings);
}

}  // namespace qd::gptq_codec_test

#endif  // QUANTDIFF_TESTS_GPTQ_CODEC_FILES_H_
