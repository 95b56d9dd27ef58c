// awq_convert.cc: conversions between GPTQ (v1, v2, planar) and AWQ GEMM /
// GEMV through one plain form, QuantFields (docs/awq.md section 11): codes
// [K][N], true zero points [G][N] and the scales' stored bits [G][N]. Every
// layout is read into it with the layout's own unpacker and written from it
// with the layout's own encoder, so a conversion never re-derives a bit
// position; what the target cannot hold is refused with the rule that says so.
#include <cstring>
#include <string>

#include "codecs/awq.h"

namespace qd::codec {
namespace {

void Refuse(GptqPackError* error, const char* rule, const char* what, std::int64_t row,
            std::int64_t column, std::string message) {
  error->rule = rule;
  error->what = what;
  error->row = row;
  error->column = column;
  error->message = std::move(message);
}

std::size_t ScaleSize(Dtype dtype) { return InfoOf(dtype).bits / 8; }

// AWQ groups are K / G inputs each (docs/awq.md section 4); a layer without
// groups has none to convert.
bool HasGroups(const QuantFields& f, GptqPackError* error) {
  if (f.groups > 0 && f.in_features % f.groups == 0) return true;
  Refuse(error, "AWQ-202", "group_size", -1, -1,
         std::to_string(f.in_features) + " inputs do not split into " + std::to_string(f.groups) +
             " equal AWQ groups");
  return false;
}

}  // namespace

std::vector<std::uint8_t> I32WordBytes(const std::vector<std::int32_t>& words) {
  std::vector<std::uint8_t> bytes(words.size() * 4);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto u = static_cast<std::uint32_t>(words[i]);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<std::uint8_t>(u >> (8 * b));
  }
  return bytes;
}

bool FieldsOfGptq(const GptqLayerView& layer, std::int64_t group_size, QuantFields* out,
                  GptqPackError* error) {
  if (layer.bits != 4) {
    Refuse(error, "AWQ-203", "bits", -1, -1,
           "AWQ holds 4-bit codes only (AWQ-001), the layer has " + std::to_string(layer.bits));
    return false;
  }
  QuantFields f;
  f.in_features = layer.in_features;
  f.out_features = layer.out_features;
  f.groups = layer.groups;
  // The AWQ reader will take the group size from the same config (AWQ-005):
  // it must divide K, where GPTQ allows a partial last group.
  if (group_size != -1 && f.in_features % group_size != 0) {
    Refuse(error, "AWQ-202", "group_size", -1, -1,
           "group_size " + std::to_string(group_size) + " does not divide in_features " +
               std::to_string(f.in_features) + " (AWQ-005): the last group is partial");
    return false;
  }
  if (!HasGroups(f, error)) return false;
  // AWQ has no g_idx: input k belongs to group k / (K / G). An act-order
  // permutation, a partial last group or an unused group has no AWQ form.
  const std::int64_t width = f.in_features / f.groups;
  for (std::int64_t k = 0; k < f.in_features; ++k) {
    std::int32_t g = 0;
    std::memcpy(&g, layer.g_idx + 4 * k, 4);
    if (g != k / width) {
      Refuse(error, "AWQ-202", "g_idx", -1, k,
             "g_idx[" + std::to_string(k) + "] = " + std::to_string(g) + ", not " +
                 std::to_string(k / width) + ": AWQ groups are " + std::to_string(width) +
                 " consecutive inputs");
      return false;
    }
  }
  GptqUnpack(layer, &f.codes, &f.zeros);
  f.scales_dtype = layer.scales_dtype;
  const std::size_t scale_bytes = static_cast<std::size_t>(f.groups * f.out_features) * ScaleSize(f.scales_dtype);
  f.scales.assign(layer.scales, layer.scales + scale_bytes);
  *out = std::move(f);
  return true;
}

bool FieldsOfAwq(const AwqLayerView& layer, QuantFields* out, GptqPackError* error) {
  if (layer.format == AwqFormat::kGemvFast) {
    Refuse(error, "AWQ-203", "format", -1, -1,
           "gemv_fast stores scaled zeros -(scale * zero), not integer zero points");
    return false;
  }
  QuantFields f;
  f.in_features = layer.in_features;
  f.out_features = layer.out_features;
  f.groups = layer.groups;
  f.scales_dtype = layer.scales_dtype;
  AwqUnpack(layer, &f.codes, &f.zeros);
  const std::size_t size = ScaleSize(f.scales_dtype);
  const std::size_t G = static_cast<std::size_t>(f.groups);
  const std::size_t N = static_cast<std::size_t>(f.out_features);
  if (layer.format == AwqFormat::kGemm) {
    f.scales.assign(layer.scales, layer.scales + G * N * size);
  } else {  // GEMV scales [N, 8Z]: scale(g, n) at (n, g)
    const std::size_t slots = 8 * static_cast<std::size_t>(layer.zeros_width);
    f.scales.resize(G * N * size);
    for (std::size_t g = 0; g < G; ++g) {
      for (std::size_t n = 0; n < N; ++n) {
        std::memcpy(&f.scales[(g * N + n) * size], layer.scales + (n * slots + g) * size, size);
      }
    }
  }
  *out = std::move(f);
  return true;
}

bool PackFieldsAsGptq(const QuantFields& fields, GptqFormat target, QuantTensors* out,
                      GptqPackError* error) {
  if (!HasGroups(fields, error)) return false;
  GptqPacked packed;
  if (!GptqEncode(target, 4, fields.in_features, fields.out_features, fields.groups, fields.codes,
                  fields.zeros, &packed, error)) {
    // A true zero 0 has no v1 field (docs/gptq.md section 5): the zero the
    // target cannot hold; anything else is the geometry (K, N multiples of 32).
    const bool zero = error->what == "zero";
    error->rule = zero ? "AWQ-201" : "AWQ-203";
    if (zero) error->what = "underflow";
    return false;
  }
  const std::int64_t K = fields.in_features, N = fields.out_features, G = fields.groups;
  QuantTensors t;
  t.qweight = I32WordBytes(packed.qweight);
  t.qweight_shape = {K / 8, N};  // K * 4 / 32 rows
  t.qzeros = I32WordBytes(packed.qzeros);
  t.qzeros_shape = {G, N / 8};
  t.scales = fields.scales;
  t.scales_shape = {G, N};
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k) g_idx[k] = static_cast<std::int32_t>(k / (K / G));
  t.g_idx = I32WordBytes(g_idx);
  *out = std::move(t);
  return true;
}

bool PackFieldsAsAwq(const QuantFields& fields, AwqFormat target, QuantTensors* out,
                     GptqPackError* error) {
  if (target == AwqFormat::kGemvFast) {
    Refuse(error, "AWQ-203", "format", -1, -1, "conversion writes gemm or gemv, not gemv_fast");
    return false;
  }
  if (!HasGroups(fields, error)) return false;
  const std::int64_t K = fields.in_features, N = fields.out_features, G = fields.groups;
  // A GPTQ v1 field 15 is zero point 16 (docs/gptq.md section 5): no nibble holds it.
  for (std::size_t i = 0; i < fields.zeros.size(); ++i) {
    const std::int32_t z = fields.zeros[i];
    if (z < 0 || z > 15) {
      const std::int64_t g = static_cast<std::int64_t>(i) / N, n = static_cast<std::int64_t>(i) % N;
      Refuse(error, "AWQ-201", "overflow", g, n,
             "zero point " + std::to_string(z) + " at (" + std::to_string(g) + ", " +
                 std::to_string(n) + ") does not fit an AWQ nibble (0..15)");
      return false;
    }
  }
  const std::int64_t group_size = K / G;
  AwqPacked packed;
  std::string why;
  if (!AwqEncode(target, K, N, group_size, fields.codes, fields.zeros, &packed, &why)) {
    Refuse(error, "AWQ-203", "shape", -1, -1, why);
    return false;
  }
  QuantTensors t;
  t.qweight = I32WordBytes(packed.qweight);
  t.qweight_shape = packed.qweight_shape;
  t.qzeros = I32WordBytes(packed.qzeros);
  t.qzeros_shape = packed.qzeros_shape;
  const std::size_t size = ScaleSize(fields.scales_dtype);
  if (target == AwqFormat::kGemm) {
    t.scales = fields.scales;
    t.scales_shape = {G, N};
  } else {  // GEMV [N, 8Z], padding slots +0.0 (AWQ-006)
    const std::size_t slots = 8 * static_cast<std::size_t>(AwqZerosWidth(K, group_size));
    t.scales.assign(static_cast<std::size_t>(N) * slots * size, 0);
    for (std::size_t g = 0; g < static_cast<std::size_t>(G); ++g) {
      for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        std::memcpy(&t.scales[(n * slots + g) * size],
                    &fields.scales[(g * static_cast<std::size_t>(N) + n) * size], size);
      }
    }
    t.scales_shape = {N, static_cast<std::int64_t>(slots)};
  }
  *out = std::move(t);
  return true;
}

}  // namespace qd::codec
