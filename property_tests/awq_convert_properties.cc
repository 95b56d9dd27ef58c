// awq_convert_properties.cc: conversions across GPTQ and AWQ
// (docs/awq.md section 11).
//
//  * The diagram v1 -> v2 -> AWQ GEMM -> GEMV -> GEMM -> v1 commutes on every
//    generated 4-bit layer: at each corner the codes, zeros and scales are
//    the generated ones and every decoded value is fl32((c - z) * s) computed
//    here, and the last corner's words, g_idx and scales are the first's.
//  * A zero point the target cannot hold is refused with AWQ-201 at the
//    first (group, column) in row-major order; an act-order g_idx with
//    AWQ-202 at its first foreign k.
//  * For a generated valid GPTQ or AWQ file and every --to target, convert
//    writes a file `check` accepts as the target family beside the config it
//    writes, or refuses only because the target cannot hold the layer.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cli/convert.h"
#include "cli/decoded_output.h"
#include "codecs/awq.h"
#include "codecs/gptq.h"
#include "harness/registry.h"
#include "property_tests/gen/half.h"
#include "property_tests/gen/rc_gen.h"

namespace {

using qd::codec::AwqFormat;
using qd::codec::Dtype;
using qd::codec::GptqFormat;

// A 4-bit layer every corner of the diagram holds: K and N multiples of 32
// (GPTQ), groups of equal width dividing K with a GEMV zeros width, zero
// points 1..15 (v1 stores 0..14, AWQ a nibble).
struct Layer {
  std::int64_t k = 0, n = 0, groups = 0;
  std::int64_t group_size = 0;       // the config's: -1 or K / G
  std::vector<std::int32_t> codes;   // [K][N]
  std::vector<std::int32_t> zeros;   // [G][N]
  std::vector<std::uint8_t> scales;  // [G][N] raw
  Dtype dtype = Dtype::kF16;
  std::size_t ScaleSize() const { return dtype == Dtype::kF32 ? 4 : 2; }
  // The scale (g, n) widened, by the dtype's definition (half.h).
  float Scale(std::int64_t g, std::int64_t n) const {
    const std::uint8_t* p = &scales[static_cast<std::size_t>(g * this->n + n) * ScaleSize()];
    if (dtype == Dtype::kF32) {
      std::uint32_t u = 0;
      std::memcpy(&u, p, 4);
      return qdtest::BitsFloat(u);
    }
    const auto h = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
    return dtype == Dtype::kF16 ? qdtest::HalfValue(h) : qdtest::BFloat16Value(h);
  }
};

// SEVERAL_GROUPS: at least two groups (else group_size -1 is likely).
rc::Gen<Layer> Layers(bool several_groups = false) {
  return rc::gen::exec([several_groups] {
    Layer l;
    const bool one_group = !several_groups && *rc::gen::arbitrary<bool>();
    if (one_group) {  // group_size -1: the whole K is a group of a GEMV width (32, 64, >= 128)
      l.k = *rc::gen::element<std::int64_t>(32, 64, 128, 256);
      l.group_size = -1;
      l.groups = 1;
    } else {
      l.group_size = *rc::gen::element<std::int64_t>(32, 64, 128);
      l.groups = *rc::gen::inRange<std::int64_t>(several_groups ? 2 : 1, 4);
      l.k = l.group_size * l.groups;
    }
    l.n = 32 * *rc::gen::inRange<std::int64_t>(1, 3);
    l.codes = *rc::gen::container<std::vector<std::int32_t>>(static_cast<std::size_t>(l.k * l.n),
                                                             rc::gen::inRange(0, 16));
    l.zeros = *rc::gen::container<std::vector<std::int32_t>>(
        static_cast<std::size_t>(l.groups * l.n), rc::gen::inRange(1, 16));
    l.dtype = *rc::gen::element(Dtype::kF16, Dtype::kBF16, Dtype::kF32);
    for (std::int64_t i = 0; i < l.groups * l.n; ++i) {
      std::uint32_t bits = 0;
      if (l.dtype == Dtype::kF32) {
        bits = qdtest::FloatBits(*qdtest::gen::AnyFiniteFloat());
      } else if (l.dtype == Dtype::kF16) {
        bits = *qdtest::gen::FiniteHalf();
      } else {
        bits = *rc::gen::arbitrary<std::uint16_t>();
        if (((bits >> 7) & 0xff) == 0xff) bits &= ~0x4000u;  // finite bfloat16
      }
      for (std::size_t b = 0; b < l.ScaleSize(); ++b) l.scales.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
    }
    return l;
  });
}

// fl32((c - z) * s) for weight (n, k): docs/awq.md section 6, docs/gptq.md section 6.
float Expected(const Layer& l, std::int64_t n, std::int64_t k) {
  const std::int64_t g = k / (l.k / l.groups);
  const float d = static_cast<float>(l.codes[k * l.n + n] - l.zeros[g * l.n + n]);
  return d * l.Scale(g, n);
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

void AssertDecodes(const Layer& l, const std::vector<float>& out, const char* corner) {
  for (std::int64_t n = 0; n < l.n; ++n) {
    for (std::int64_t k = 0; k < l.k; ++k) {
      if (!SameBits(out[n * l.k + k], Expected(l, n, k))) {
        RC_FAIL(std::string(corner) + ": weight (" + std::to_string(n) + ", " + std::to_string(k) + ")");
      }
    }
  }
}

// A corner of the diagram: one layout's tensors, and views over them.
struct GptqCorner {
  GptqFormat format;
  std::vector<std::uint8_t> qweight, qzeros, scales, g_idx;
  qd::codec::GptqLayerView View(const Layer& l, Dtype dtype) const {
    return {format, 4, l.k, l.n, l.groups, qweight.data(), qzeros.data(), scales.data(), dtype, g_idx.data()};
  }
};

struct AwqCorner {
  AwqFormat format;
  qd::codec::QuantTensors t;
  qd::codec::AwqLayerView View(const Layer& l) const {
    qd::codec::AwqLayerView v;
    v.format = format;
    v.in_features = l.k;
    v.out_features = l.n;
    v.groups = l.groups;
    v.group_size = l.k / l.groups;
    v.zeros_width = format == AwqFormat::kGemm ? 0 : qd::codec::AwqZerosWidth(l.k, v.group_size);
    v.qweight = t.qweight.data();
    v.qzeros = t.qzeros.data();
    v.scales = t.scales.data();
    v.scales_dtype = l.dtype;
    return v;
  }
};

void AssertFields(const Layer& l, const qd::codec::QuantFields& f, const char* corner) {
  RC_ASSERT(f.in_features == l.k && f.out_features == l.n && f.groups == l.groups);
  if (f.codes != l.codes) RC_FAIL(std::string(corner) + ": codes differ");
  if (f.zeros != l.zeros) RC_FAIL(std::string(corner) + ": zeros differ");
  if (f.scales != l.scales || f.scales_dtype != l.dtype) RC_FAIL(std::string(corner) + ": scales differ");
}

qd::codec::QuantFields FieldsOf(const qd::codec::GptqLayerView& v, std::int64_t group_size) {
  qd::codec::QuantFields f;
  qd::codec::GptqPackError e;
  RC_ASSERT(qd::codec::FieldsOfGptq(v, group_size, &f, &e));
  return f;
}

qd::codec::QuantFields FieldsOf(const qd::codec::AwqLayerView& v) {
  qd::codec::QuantFields f;
  qd::codec::GptqPackError e;
  RC_ASSERT(qd::codec::FieldsOfAwq(v, &f, &e));
  return f;
}

AwqCorner ToAwq(const qd::codec::QuantFields& f, AwqFormat format) {
  AwqCorner c{format, {}};
  qd::codec::GptqPackError e;
  RC_ASSERT(qd::codec::PackFieldsAsAwq(f, format, &c.t, &e));
  return c;
}

std::vector<float> DecodeGptq(const Layer& l, const qd::codec::GptqLayerView& v) {
  std::vector<float> out(static_cast<std::size_t>(l.n * l.k));
  qd::codec::GptqDequantize(v, out.data());
  return out;
}

std::vector<float> DecodeAwq(const Layer& l, const qd::codec::AwqLayerView& v) {
  std::vector<float> out(static_cast<std::size_t>(l.n * l.k));
  qd::codec::AwqDequantizeRows(v, 0, l.n, out.data());
  return out;
}

// The start corner: v1 words from the GPTQ encoder, g_idx k / (K / G).
GptqCorner V1Corner(const Layer& l) {
  qd::codec::GptqPacked packed;
  qd::codec::GptqPackError e;
  RC_ASSERT(qd::codec::GptqEncode(GptqFormat::kV1, 4, l.k, l.n, l.groups, l.codes, l.zeros, &packed, &e));
  GptqCorner c{GptqFormat::kV1, qd::codec::I32WordBytes(packed.qweight),
               qd::codec::I32WordBytes(packed.qzeros), l.scales, {}};
  std::vector<std::int32_t> g_idx;
  for (std::int64_t k = 0; k < l.k; ++k) g_idx.push_back(static_cast<std::int32_t>(k / (l.k / l.groups)));
  c.g_idx = qd::codec::I32WordBytes(g_idx);
  return c;
}

RC_GTEST_PROP(AwqConvert, V1ToV2ToGemmToGemvToGemmToV1Commutes, ()) {
  const Layer l = *Layers();
  const GptqCorner v1 = V1Corner(l);
  AssertDecodes(l, DecodeGptq(l, v1.View(l, l.dtype)), "v1");

  qd::codec::GptqPacked packed;
  qd::codec::GptqPackError e;
  RC_ASSERT(qd::codec::GptqConvert(v1.View(l, l.dtype), GptqFormat::kV2, &packed, &e));
  const GptqCorner v2{GptqFormat::kV2, qd::codec::I32WordBytes(packed.qweight),
                      qd::codec::I32WordBytes(packed.qzeros), v1.scales, v1.g_idx};
  AssertDecodes(l, DecodeGptq(l, v2.View(l, l.dtype)), "v2");
  const qd::codec::QuantFields from_v2 = FieldsOf(v2.View(l, l.dtype), l.group_size);
  AssertFields(l, from_v2, "v2");

  const AwqCorner gemm = ToAwq(from_v2, AwqFormat::kGemm);
  RC_ASSERT(gemm.t.qweight_shape == (std::vector<std::int64_t>{l.k, l.n / 8}));
  AssertDecodes(l, DecodeAwq(l, gemm.View(l)), "gemm");
  const qd::codec::QuantFields from_gemm = FieldsOf(gemm.View(l));
  AssertFields(l, from_gemm, "gemm");

  const AwqCorner gemv = ToAwq(from_gemm, AwqFormat::kGemv);
  RC_ASSERT(gemv.t.qweight_shape == (std::vector<std::int64_t>{l.n, l.k / 8}));
  AssertDecodes(l, DecodeAwq(l, gemv.View(l)), "gemv");
  const qd::codec::QuantFields from_gemv = FieldsOf(gemv.View(l));
  AssertFields(l, from_gemv, "gemv");

  const AwqCorner gemm_again = ToAwq(from_gemv, AwqFormat::kGemm);
  RC_ASSERT(gemm_again.t.qweight == gemm.t.qweight);
  RC_ASSERT(gemm_again.t.qzeros == gemm.t.qzeros);
  RC_ASSERT(gemm_again.t.scales == gemm.t.scales);

  qd::codec::QuantTensors back;
  RC_ASSERT(qd::codec::PackFieldsAsGptq(FieldsOf(gemm_again.View(l)), GptqFormat::kV1, &back, &e));
  RC_ASSERT(back.qweight == v1.qweight);
  RC_ASSERT(back.qzeros == v1.qzeros);
  RC_ASSERT(back.scales == v1.scales);
  RC_ASSERT(back.g_idx == v1.g_idx);
  RC_ASSERT(back.qweight_shape == (std::vector<std::int64_t>{l.k / 8, l.n}));
  RC_ASSERT(back.qzeros_shape == (std::vector<std::int64_t>{l.groups, l.n / 8}));
}

// docs/awq.md section 11 V3: AWQ-201 at the first zero in row-major order.
RC_GTEST_PROP(AwqConvert, AZeroTheTargetCannotHoldIsNamed, ()) {
  Layer l = *Layers();
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, l.zeros.size());
  const bool to_v1 = *rc::gen::arbitrary<bool>();
  // Zero 0 has no v1 field; zero 16 (a v1 field 15) no AWQ nibble.
  l.zeros[at] = to_v1 ? 0 : 16;
  qd::codec::QuantFields f{l.k, l.n, l.groups, l.codes, l.zeros, l.scales, l.dtype};
  qd::codec::QuantTensors t;
  qd::codec::GptqPackError e;
  const bool ok = to_v1 ? qd::codec::PackFieldsAsGptq(f, GptqFormat::kV1, &t, &e)
                        : qd::codec::PackFieldsAsAwq(f, *rc::gen::element(AwqFormat::kGemm, AwqFormat::kGemv), &t, &e);
  RC_ASSERT(!ok);
  RC_ASSERT(e.rule == "AWQ-201");
  RC_ASSERT(e.what == std::string(to_v1 ? "underflow" : "overflow"));
  RC_ASSERT(e.row == static_cast<std::int64_t>(at) / l.n);
  RC_ASSERT(e.column == static_cast<std::int64_t>(at) % l.n);
  if (!to_v1) {  // the same zero through the GPTQ v1 reader: field 15
    const GptqCorner v1 = V1Corner(l);
    RC_ASSERT(!qd::codec::FieldsOfGptq(v1.View(l, l.dtype), l.group_size, &f, &e) ||
              !qd::codec::PackFieldsAsAwq(f, AwqFormat::kGemm, &t, &e));
    RC_ASSERT(e.rule == "AWQ-201");
  }
}

// docs/awq.md section 11 V2: a g_idx AWQ has no form for is AWQ-202 at its first foreign k.
RC_GTEST_PROP(AwqConvert, AnActOrderGroupMapIsNamed, ()) {
  const Layer l = *Layers(/*several_groups=*/true);
  GptqCorner v1 = V1Corner(l);
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, l.k);
  const std::int32_t own = static_cast<std::int32_t>(k / (l.k / l.groups));
  const std::int32_t other = (own + *rc::gen::inRange<std::int32_t>(1, static_cast<std::int32_t>(l.groups))) %
                             static_cast<std::int32_t>(l.groups);
  std::memcpy(&v1.g_idx[4 * k], &other, 4);
  qd::codec::QuantFields f;
  qd::codec::GptqPackError e;
  RC_ASSERT(!qd::codec::FieldsOfGptq(v1.View(l, l.dtype), l.group_size, &f, &e));
  RC_ASSERT(e.rule == "AWQ-202");
  RC_ASSERT(e.column == k);
}

// Whole files through the CLI's core: written only as check reads it.
RC_GTEST_PROP(AwqConvert, ConvertedFilesPassCheckOrTheTargetCannotHold, (std::uint64_t seed)) {
  for (const char* family : {"gptq", "awq"}) {
    const qd::harness::FormatEntry& source = *qd::harness::FindFormat(family);
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = source.generate_valid(rng);
    const qd::ByteView input{g.bytes.data(), g.bytes.size()};
    for (const char* to : {"gptq", "gptq_v2", "gptq_p", "awq_gemm", "awq_gemv"}) {
      qd::cli::ConvertTarget target;
      RC_ASSERT(qd::cli::ParseConvertTarget(to, &target));
      qd::cli::GptqConversion converted;
      std::string error;
      const int verdict = qd::cli::ConvertQuantized(
          input, "model.safetensors", g.side_files, target, "out.safetensors",
          [](const qd::harness::SideFiles& pending, qd::harness::SideFiles* found, std::string*) {
            *found = pending;
            return true;
          },
          &converted, &error);
      const bool cannot_hold = verdict == 1 && converted.refusal == qd::cli::ConvertRefusal::kTargetCannotHold;
      // The distribution RapidCheck prints shows conversions are written.
      RC_TAG(std::string(family) + " -> " + to + (cannot_hold ? ": cannot hold" : ": written"));
      if (cannot_hold) continue;
      if (verdict != 0) RC_FAIL(std::string(family) + " -> " + to + ": verdict " + std::to_string(verdict) + " " + error);
      const qd::harness::SideFiles beside = {
          {converted.config_path,
           std::vector<std::uint8_t>(converted.config_text.begin(), converted.config_text.end())}};
      const qd::ByteView output{converted.file.data(), converted.file.size()};
      const qd::harness::FormatEntry* read_as = nullptr;
      const auto check = qd::cli::CheckVerbOutcome(output, "out.safetensors", beside, nullptr, &read_as, &error);
      RC_ASSERT(check.has_value());
      RC_ASSERT(read_as == qd::harness::FindFormat(target.awq ? "awq" : "gptq"));
      RC_ASSERT(!check->refused);
    }
  }
}

}  // namespace
