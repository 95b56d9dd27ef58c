// gptq_layer.cc: one valid GPTQ layer (docs/gptq.md section 2): random
// codes and zeros packed with the codec's encoder (codec::GptqEncode, docs/gptq.md
// section 8), g_idx sorted, permuted or free, and finite scales and bias in
// F16 / BF16 / F32 drawn to reach subnormals, zeros, negatives and the
// largest finite value. See gptq_model.h.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "codecs/gptq.h"
#include "generators/gptq_model.h"

namespace qd::gen::gptq_gen {
namespace {

codec::GptqFormat FormatOf(int f) {
  return f == 0 ? codec::GptqFormat::kV1 : f == 1 ? codec::GptqFormat::kV2 : codec::GptqFormat::kPlanar;
}

// One finite value of a float dtype as raw bits: normal, subnormal, zero,
// negative, largest finite.
std::uint32_t FiniteBits(int dtype, Rng& rng) {
  const std::uint32_t sign = Coin(rng, 3) ? 0u : 1u;
  switch (dtype) {
    case 0: {  // F16
      std::uint32_t h;
      switch (Pick(rng, 8)) {
        case 0: h = 0; break;
        case 1: h = 1 + static_cast<std::uint32_t>(Pick(rng, 0x3ff)); break;  // subnormal
        case 2: h = 0x7bff; break;
        default: h = 0x1c00 + static_cast<std::uint32_t>(Pick(rng, 0x2800)); break;  // ~2^-8..2^2
      }
      return h | (sign << 15);
    }
    case 1: {  // BF16
      std::uint32_t b;
      switch (Pick(rng, 8)) {
        case 0: b = 0; break;
        case 1: b = 1 + static_cast<std::uint32_t>(Pick(rng, 0x7f)); break;
        case 2: b = 0x7f7f; break;
        default: b = 0x3b80 + static_cast<std::uint32_t>(Pick(rng, 0x0500)); break;
      }
      return b | (sign << 15);
    }
    default: {  // F32
      std::uint32_t f;
      switch (Pick(rng, 8)) {
        case 0: f = 0; break;
        case 1: f = 1 + static_cast<std::uint32_t>(Pick(rng, 0x7fffff)); break;
        case 2: f = 0x7f7fffff; break;
        case 3: f = static_cast<std::uint32_t>(rng()) & 0x7f7fffffu; break;  // any finite
        default: f = 0x3b800000u + static_cast<std::uint32_t>(Pick(rng, 0x05000000u)); break;
      }
      return f | (sign << 31);
    }
  }
}

}  // namespace

std::vector<std::uint8_t> WordsBytes(const std::vector<std::int32_t>& words) {
  std::vector<std::uint8_t> out(words.size() * 4);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const auto u = static_cast<std::uint32_t>(words[i]);
    for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<std::uint8_t>(u >> (8 * b));
  }
  return out;
}

std::int64_t NGroups(std::int64_t k, std::int64_t gs) { return gs == -1 ? 1 : (k + gs - 1) / gs; }

std::vector<std::uint8_t> FloatBytes(int dtype, std::uint64_t count, Rng& rng) {
  const int size = dtype == 2 ? 4 : 2;
  std::vector<std::uint8_t> out(count * size);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint32_t v = FiniteBits(dtype, rng);
    for (int b = 0; b < size; ++b) out[i * size + b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return out;
}

}  // namespace qd::gen::gptq_gen

namespace qd::gen {

using namespace gptq_gen;

std::vector<codec::TensorWithBytes> BuildGptqLayer(const GptqLayerParams& p, Rng& rng) {
  const std::int64_t K = p.in_features, N = p.out_features;
  const std::int64_t G = NGroups(K, p.group_size);
  const std::int32_t top = (1 << p.bits) - 1;
  std::vector<std::int32_t> codes(static_cast<std::size_t>(K * N));
  const bool edgy = Coin(rng, 4);
  for (auto& c : codes) {
    c = edgy && Coin(rng) ? (Coin(rng) ? 0 : top) : static_cast<std::int32_t>(Pick(rng, top + 1));
  }
  std::vector<std::int32_t> zeros(static_cast<std::size_t>(G * N));
  const std::int32_t lo = p.format == 0 ? 1 : 0;
  const std::int32_t hi = top;  // v1: 2^b only on request (zero_mode 2, GPTQ-107)
  for (auto& z : zeros) {
    switch (p.zero_mode) {
      case 1: z = lo; break;
      case 2: z = p.format == 0 ? top + 1 : top; break;
      default:
        z = edgy && Coin(rng) ? (Coin(rng) ? lo : hi)
                              : lo + static_cast<std::int32_t>(Pick(rng, hi - lo + 1));
    }
  }
  codec::GptqPacked packed;
  codec::GptqPackError error;
  codec::GptqEncode(FormatOf(p.format), p.bits, K, N, G, codes, zeros, &packed, &error);

  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k) {
    g_idx[k] = static_cast<std::int32_t>(p.group_size == -1 ? 0 : k / p.group_size);
  }
  if (p.g_idx_mode == 1) {
    std::shuffle(g_idx.begin(), g_idx.end(), rng);
  } else if (p.g_idx_mode == 2) {
    for (auto& g : g_idx) g = static_cast<std::int32_t>(Pick(rng, static_cast<std::uint64_t>(G)));
  }

  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  std::vector<codec::TensorWithBytes> out;
  out.push_back({{p.prefix + "qweight", "I32", {u(K * p.bits / 32), u(N)}, 0}, WordsBytes(packed.qweight)});
  out.push_back({{p.prefix + "qzeros", "I32", {u(G), u(N * p.bits / 32)}, 0}, WordsBytes(packed.qzeros)});
  out.push_back({{p.prefix + "scales", kFloatDtypes[p.scales_dtype], {u(G), u(N)}, 0},
                 FloatBytes(p.scales_dtype, u(G * N), rng)});
  out.push_back({{p.prefix + "g_idx", "I32", {u(K)}, 0}, WordsBytes(g_idx)});
  if (p.bias_dtype >= 0) {
    out.push_back({{p.prefix + "bias", kFloatDtypes[p.bias_dtype], {u(N)}, 0},
                   FloatBytes(p.bias_dtype, u(N), rng)});
  }
  return out;
}

}  // namespace qd::gen
