// pt_codec_test_support.h: what the .pt codec tests share: reading a
// hand-built file (tests/pt_test_builder.h) as m.pt, the one-error check of
// a refusal's rule, field, byte offset and tensor (docs/pt.md), and a
// one-tensor state dict. Used by tests/pt_codec_test.cc (the ZIP container)
// and tests/pt_pickle_codec_test.cc (the opcode walk).
#ifndef QUANTDIFF_TESTS_PT_CODEC_TEST_SUPPORT_H_
#define QUANTDIFF_TESTS_PT_CODEC_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codecs/bnb_pt_layers.h"
#include "codecs/pt.h"
#include "codecs/safetensors.h"
#include "tests/pt_test_builder.h"

namespace qd::pt_codec_test {

using namespace qd::pt_test;  // NOLINT: the builders are these tests' vocabulary
using qd::codec::PtResult;

inline PtResult Read(const Zip& z) { return qd::codec::ReadPt(z.View(), "m.pt"); }
inline PtResult ReadBytes(const Bytes& b) { return qd::codec::ReadPt({b.data(), b.size()}, "m.pt"); }

inline ::testing::AssertionResult IsError(const PtResult& r, const std::string& rule,
                                   const std::string& field, std::int64_t offset,
                                   const std::string& tensor = "") {
  if (!r.refused || r.findings.empty()) return ::testing::AssertionFailure() << "accepted";
  const qd::Finding& f = r.findings.back();
  int errors = 0;
  for (const auto& x : r.findings) errors += x.severity == qd::Severity::kError ? 1 : 0;
  if (f.rule != rule || f.field != field || f.byte_offset != offset || f.tensor != tensor ||
      errors != 1 || f.severity != qd::Severity::kError || f.file != "m.pt" || f.row != -1 ||
      f.block != -1 || f.element != -1) {
    return ::testing::AssertionFailure()
           << "got " << f.rule << " field=" << f.field << " offset=" << f.byte_offset
           << " tensor=" << f.tensor << " errors=" << errors << " (" << f.message << "); want "
           << rule << " " << field << " " << offset << " " << tensor;
  }
  return ::testing::AssertionSuccess();
}

// A one-tensor state dict {"w": FloatStorage "0" of 4 floats, shape [2, 2]}.
inline Pk OneTensor() {
  Pk p;
  p.proto().dict().mark().str("w").tensor("0", "FloatStorage", 4, 0, {2, 2}, {2, 1});
  p.op('u').stop();
  return p;
}
inline const Bytes kFour = F32s({1.0f, 2.0f, 3.0f, 4.0f});

}  // namespace qd::pt_codec_test

#endif  // QUANTDIFF_TESTS_PT_CODEC_TEST_SUPPORT_H_
