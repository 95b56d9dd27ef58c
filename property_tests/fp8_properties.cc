// fp8_properties.cc: FP8 weight files (docs/fp8.md) against the tests' own
// arithmetic.
//
//  * Every valid instance of the registry's FP8 generator decodes, in the
//    codec and in the oracle, to value(code) / inverse scale for every
//    weight, where value(code) is computed here from the E4M3 / E5M2 / E8M0
//    bit definitions (sign, exponent, mantissa; section 4) and the
//    division is one binary32 division (section 6); the header, the config
//    and the codes are read here too (nlohmann's JSON, not either reader).
//    Codec and oracle agree bit for bit.
//  * Encoding those decoded weights again (the quantizer's cast, section 9)
//    gives the file's codes back wherever the decoded weight is zero or a
//    normal binary32 number.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codecs/fp8.h"
#include "generators/generators.h"
#include "harness/registry.h"
#include "property_tests/gen/outcome_text.h"

namespace {

using qdtest::Findings;

// A subtype as its definition gives it (docs/fp8.md section 1's table).
struct Definition {
  const char* name;
  int exponent_bits, mantissa_bits, bias;
  enum Kind { kFiniteOnly, kIeee, kFnuz, kExponentOnly } kind;
  const char* dtype;
};
const Definition kDefinitions[] = {
    {"float8_e4m3fn", 4, 3, 7, Definition::kFiniteOnly, "F8_E4M3"},
    {"float8_e4m3fnuz", 4, 3, 8, Definition::kFnuz, "F8_E4M3"},
    {"float8_e5m2", 5, 2, 15, Definition::kIeee, "F8_E5M2"},
    {"float8_e5m2fnuz", 5, 2, 16, Definition::kFnuz, "F8_E5M2"},
    {"float8_e8m0fnu", 8, 0, 127, Definition::kExponentOnly, "F8_E8M0"},
};

// The config's format spellings (GPT-QModel's aliases) to canonical names.
std::string Canonical(std::string format) {
  for (char& c : format) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, std::string> kAliases = {
      {"e4m3", "float8_e4m3fn"},         {"e4m3fn", "float8_e4m3fn"},     {"float8_e4m3", "float8_e4m3fn"},
      {"e4m3fnuz", "float8_e4m3fnuz"},   {"e5m2", "float8_e5m2"},         {"e5m2fnuz", "float8_e5m2fnuz"},
      {"e8m0", "float8_e8m0fnu"},        {"e8m0fnu", "float8_e8m0fnu"},   {"float8_e8m0", "float8_e8m0fnu"}};
  const auto it = kAliases.find(format);
  return it == kAliases.end() ? format : it->second;
}

const Definition* DefinitionNamed(const std::string& name) {
  for (const Definition& d : kDefinitions) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

// The value of CODE from its fields; NaN for NaN codes, +-infinity for E5M2's.
float ValueOf(const Definition& d, std::uint8_t code) {
  const bool negative = d.kind != Definition::kExponentOnly && (code & 0x80) != 0;
  const int exponent = (code >> d.mantissa_bits) & ((1 << d.exponent_bits) - 1);
  const int mantissa = code & ((1 << d.mantissa_bits) - 1);
  const int top = (1 << d.exponent_bits) - 1;
  switch (d.kind) {
    case Definition::kFiniteOnly:
      if (exponent == top && mantissa == (1 << d.mantissa_bits) - 1) return NAN;
      break;
    case Definition::kIeee:
      if (exponent == top) return mantissa != 0 ? NAN : (negative ? -INFINITY : INFINITY);
      break;
    case Definition::kFnuz:
      if (code == 0x80) return NAN;
      break;
    case Definition::kExponentOnly:
      return code == 0xFF ? NAN : std::ldexp(1.0f, exponent - d.bias);
  }
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), 1 - d.bias - d.mantissa_bits)
                              : std::ldexp(static_cast<float>((1 << d.mantissa_bits) + mantissa),
                                           exponent - d.bias - d.mantissa_bits);
  return negative ? -magnitude : magnitude;
}

bool SameBits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

// The instance as the tests read it: the header, the first config source.
struct Parsed {
  nlohmann::json header;
  std::size_t data_start = 0;
  std::string format;                      // canonical, or empty
  std::uint64_t block_rows = 0, block_cols = 0;
};

Parsed Parse(const qd::harness::Generated& g) {
  Parsed p;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n * 256 + g.bytes[static_cast<std::size_t>(i)];
  p.header = nlohmann::json::parse(g.bytes.begin() + 8, g.bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  p.data_start = 8 + n;
  if (g.side_files.empty()) return p;
  const qd::SideFile& first = g.side_files.front();
  nlohmann::json config = nlohmann::json::parse(first.bytes.begin(), first.bytes.end());
  if (first.name == "config.json") config = config["quantization_config"];
  for (const char* key : {"format", "checkpoint_format"}) {
    if (config.contains(key) && config[key].is_string()) {
      const std::string f = Canonical(config[key].get<std::string>());
      if (f != "fp8" && !f.empty()) p.format = f;
      break;
    }
  }
  if (config.contains("weight_block_size") && config["weight_block_size"].is_array()) {
    p.block_rows = config["weight_block_size"][0].get<std::uint64_t>();
    p.block_cols = config["weight_block_size"][1].get<std::uint64_t>();
  }
  return p;
}

const qd::DecodedTensor* Decoded(const qd::Outcome& o, const std::string& name) {
  for (const qd::DecodedTensor& t : o.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

float F32At(const std::vector<std::uint8_t>& bytes, std::size_t at) {
  std::uint32_t bits = 0;
  for (int b = 3; b >= 0; --b) bits = bits << 8 | bytes[at + static_cast<std::size_t>(b)];
  return std::bit_cast<float>(bits);
}

RC_GTEST_PROP(Fp8Properties, ValidInstancesDecodeToTheDefinitionsOverTheInverseScale, ()) {
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::harness::Generated g = qd::gen::Fp8Valid(rng);
  const qd::harness::FormatEntry& fp8 = *qd::harness::FindFormat("fp8");
  const qd::ByteView view{g.bytes.data(), g.bytes.size()};
  const qd::Outcome codec = fp8.codec_read(view, "m.safetensors", g.side_files);
  const qd::Outcome oracle = fp8.oracle_read(view, "m.safetensors", g.side_files);
  const std::string context = g.description + " (seed " + std::to_string(seed) + ")";
  if (codec.refused || oracle.refused) RC_FAIL(context + ": " + Findings(codec) + " / " + Findings(oracle));

  const Parsed p = Parse(g);
  int layers = 0;
  for (const auto& [name, entry] : p.header.items()) {
    const std::string suffix = "weight_scale_inv";
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string prefix = name.substr(0, name.size() - suffix.size());
    const nlohmann::json& weight = p.header[prefix + "weight"];
    const Definition* d = DefinitionNamed(p.format);
    if (d == nullptr) {  // no format in the config: the weight's dtype says it
      for (const Definition& candidate : kDefinitions) {
        if (weight["dtype"] == candidate.dtype && d == nullptr) d = &candidate;
      }
    }
    RC_ASSERT(d != nullptr);
    const std::uint64_t N = weight["shape"][0], K = weight["shape"][1];
    const std::size_t codes_at = p.data_start + weight["data_offsets"][0].get<std::size_t>();
    const std::size_t scales_at = p.data_start + entry["data_offsets"][0].get<std::size_t>();
    const std::size_t rank = entry["shape"].size();
    const std::uint64_t grid_cols = rank == 2 ? entry["shape"][1].get<std::uint64_t>() : 0;
    const qd::DecodedTensor* c = Decoded(codec, prefix + "weight");
    const qd::DecodedTensor* o = Decoded(oracle, prefix + "weight");
    RC_ASSERT(c != nullptr && o != nullptr);
    RC_ASSERT(c->values.size() == N * K && o->values.size() == N * K);
    for (std::uint64_t n = 0; n < N; ++n) {
      for (std::uint64_t k = 0; k < K; ++k) {
        const std::size_t scale_index =
            rank == 0 ? 0 : rank == 1 ? n : (n / p.block_rows) * grid_cols + k / p.block_cols;
        const float inv = F32At(g.bytes, scales_at + 4 * scale_index);
        const float expect = ValueOf(*d, g.bytes[codes_at + n * K + k]) / inv;
        const float got = c->values[n * K + k];
        if (!SameBits(got, expect) || !SameBits(o->values[n * K + k], got)) {
          RC_FAIL(context + ": " + prefix + "weight[" + std::to_string(n) + "][" + std::to_string(k) + "] code " +
                  std::to_string(g.bytes[codes_at + n * K + k]) + " inv " + std::to_string(inv) + ": expected " +
                  std::to_string(expect) + ", codec " + std::to_string(got) + ", oracle " +
                  std::to_string(o->values[n * K + k]));
        }
      }
    }
    ++layers;
  }
  RC_ASSERT(layers >= 1);
  // Every decoded tensor, codec against oracle (bias and dense tensors too).
  RC_ASSERT(codec.tensors.size() == oracle.tensors.size());
  for (std::size_t i = 0; i < codec.tensors.size(); ++i) {
    RC_ASSERT(codec.tensors[i].name == oracle.tensors[i].name);
    RC_ASSERT(codec.tensors[i].values.size() == oracle.tensors[i].values.size());
    for (std::size_t j = 0; j < codec.tensors[i].values.size(); ++j) {
      RC_ASSERT(SameBits(codec.tensors[i].values[j], oracle.tensors[i].values[j]));
    }
  }
}

RC_GTEST_PROP(Fp8Properties, DecodedWeightsEncodeToTheirCodes, ()) {
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::harness::Generated g = qd::gen::Fp8Valid(rng);
  const qd::codec::Fp8Result r =
      qd::codec::ReadFp8({g.bytes.data(), g.bytes.size()}, "m.safetensors", g.side_files);
  RC_ASSERT(!r.refused);
  for (const qd::codec::Fp8Layer& layer : r.layers) {
    if (layer.subtype == qd::codec::Fp8Subtype::kE8M0Fnu) continue;  // not encoded (section 9)
    const std::uint64_t N = layer.out_features, K = layer.in_features;
    std::vector<float> decoded(N * K);
    qd::codec::Fp8DequantizeRows(r, layer, 0, N, decoded.data());
    // The inverse scales as the span functions take them, from the header.
    const Parsed p = Parse(g);
    const nlohmann::json& entry = p.header[layer.prefix + "weight_scale_inv"];
    const std::size_t scales_at = p.data_start + entry["data_offsets"][0].get<std::size_t>();
    std::vector<float> inv(N * K);
    for (std::uint64_t n = 0; n < N; ++n) {
      for (std::uint64_t k = 0; k < K; ++k) {
        const std::size_t rank = entry["shape"].size();
        const std::size_t index =
            rank == 0 ? 0
            : rank == 1 ? n
                        : (n / p.block_rows) * entry["shape"][1].get<std::uint64_t>() + k / p.block_cols;
        inv[n * K + k] = F32At(g.bytes, scales_at + 4 * index);
      }
    }
    std::vector<std::uint8_t> codes(N * K);
    RC_ASSERT(qd::codec::Fp8QuantizeSpan(layer.subtype, decoded.data(), N * K, 1, inv.data(), 1, 1, codes.data()));
    const std::size_t codes_at = p.data_start + p.header[layer.prefix + "weight"]["data_offsets"][0].get<std::size_t>();
    for (std::uint64_t i = 0; i < N * K; ++i) {
      if (decoded[i] != 0.0f && !std::isnormal(decoded[i])) continue;
      const std::uint8_t original = g.bytes[codes_at + i];
      if (codes[i] != original) {
        RC_FAIL(g.description + " (seed " + std::to_string(seed) + "): code " + std::to_string(original) +
                " decoded " + std::to_string(decoded[i]) + " encoded " + std::to_string(codes[i]));
      }
    }
  }
}

}  // namespace
