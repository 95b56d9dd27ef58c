// fp8_roundtrip: the FP8 encoder and decoder (codecs/fp8.h) against the
// oracle's (oracles/fp8.h) and against each other: encode -> decode ->
// compare (docs/fp8.md sections 4, 6 and 9).
//
// Input: [weight bytes ...][8-byte tail]
//   tail[0] bits 0..1  subtype: E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ (E8M0 is
//                      not encoded, section 9)
//           bits 2..3  scaling, modulo 3: tensor, row, block
//           bit 4      the body holds codes: the weights are their values
//                      divided by the inverse scale (decode first), else the
//                      body holds binary32 weights as they are (NaN,
//                      infinities, subnormals included)
//           bit 5      inverse scales from the edges (subnormal, huge,
//                      negative, 1) rather than 2^-8 .. 2^8
//   tail[1] bits 0..3  N - 1;   tail[2] bits 0..5  K - 1
//   tail[3] bits 0..2  block rows - 1; bits 3..6 block columns - 1
//   tail[4..7]         seed of the inverse scales and of weights past the body
// Checks, each a divergence DIFF:fp8_roundtrip:<kind>:<subtype>:
//   1. codec::Fp8QuantizeSpan equals oracle::EncodeFp8Codes of fl32(w * inv)
//      on every weight (codes);
//   2. codec::Fp8DequantizeSpan of those codes equals the oracle's
//      DecodeFp8Code(code) / inv, bit for bit (decode; NaN codes NaN);
//   3. encoding the decoded weights gives every code back wherever the
//      decoded weight is zero or a normal binary32 number (roundtrip;
//      section 9: a subnormal or infinite quotient has lost the code);
//   4. in decode-first mode, the codes encoded are the body's codes where
//      the same holds (its NaN codes excepted).
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/fp8.h"
#include "fuzz/common/fuzz_support.h"
#include "oracles/fp8.h"

namespace {

using qd::codec::Fp8Subtype;
using qd::fuzz::Diverge;

constexpr std::size_t kTailSize = 8;
constexpr std::array<Fp8Subtype, 4> kSubtypes = {Fp8Subtype::kE4M3Fn, Fp8Subtype::kE4M3Fnuz,
                                                 Fp8Subtype::kE5M2, Fp8Subtype::kE5M2Fnuz};

std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }
bool Same(float a, float b) { return Bits(a) == Bits(b) || (std::isnan(a) && std::isnan(b)); }

// Zero or a normal binary32 number: a quotient that kept the code's bits.
bool KeepsItsCode(float w) { return w == 0.0f || std::isnormal(w); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t tail[kTailSize] = {};
  const std::size_t body = size > kTailSize ? size - kTailSize : 0;
  for (std::size_t i = 0; i < kTailSize && body + i < size; ++i) tail[i] = data[body + i];

  const Fp8Subtype subtype = kSubtypes[tail[0] & 3];
  const int scaling = ((tail[0] >> 2) & 3) % 3;
  const bool decode_first = (tail[0] & 0x10) != 0;
  const bool edge_scales = (tail[0] & 0x20) != 0;
  const std::uint64_t N = 1 + (tail[1] & 15);
  const std::uint64_t K = 1 + (tail[2] & 63);
  const std::uint64_t br = 1 + (tail[3] & 7);
  const std::uint64_t bc = 1 + ((tail[3] >> 3) & 15);
  const std::uint32_t seed = static_cast<std::uint32_t>(tail[4] | (tail[5] << 8) | (tail[6] << 16)) |
                             (static_cast<std::uint32_t>(tail[7]) << 24);
  std::mt19937 rng(seed);
  const std::string name = qd::codec::Fp8SubtypeName(subtype);
  auto sig = [&](const char* kind) { return std::string("DIFF:fp8_roundtrip:") + kind + ":" + name; };
  const std::string params = name + " N" + std::to_string(N) + " K" + std::to_string(K) + " scaling " +
                             std::to_string(scaling) + " block " + std::to_string(br) + "x" + std::to_string(bc);

  // Inverse scales per (row, column block), laid out as the span functions
  // take them; tensor and row scaling repeat one value across the row.
  const std::uint64_t blocks = scaling == 2 ? (K + bc - 1) / bc : 1;
  const std::uint64_t block_cols = scaling == 2 ? bc : K;
  std::vector<float> grid((N + br - 1) / br * blocks);
  for (float& s : grid) {
    const std::uint32_t r = rng();
    if (edge_scales) {
      static const float kEdges[] = {1.0f, -1.0f, 0x1p-140f, 0x1p100f, -0x1p-126f, 0x1.fffffep127f};
      s = kEdges[r % 6];
    } else {
      s = std::ldexp(1.0f + static_cast<float>(r & 0xfffff) / 0x1p20f, static_cast<int>((r >> 20) % 17) - 8);
    }
  }
  std::vector<float> inv(N * blocks);
  for (std::uint64_t n = 0; n < N; ++n) {
    for (std::uint64_t j = 0; j < blocks; ++j) {
      const float tensor_scale = grid[0];
      const float row_scale = grid[n % grid.size()];
      inv[n * blocks + j] = scaling == 0 ? tensor_scale : scaling == 1 ? row_scale : grid[(n / br) * blocks + j];
    }
  }
  auto inv_at = [&](std::uint64_t n, std::uint64_t k) { return inv[n * blocks + k / block_cols]; };

  // The weights: from the body (binary32 as is, or codes decoded first),
  // then from the seed around the scale's reciprocal.
  std::vector<float> w(N * K);
  std::vector<int> source_code(N * K, -1);
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < N * K; ++i) {
    const float s = inv_at(i / K, i % K);
    if (decode_first) {
      const std::uint8_t c = at < body ? data[at++] : static_cast<std::uint8_t>(rng());
      float value;
      bool is_nan, is_infinite;
      qd::oracle::DecodeFp8Code(name, c, &value, &is_nan, &is_infinite);
      source_code[i] = is_nan ? -1 : c;
      w[i] = value / s;
    } else if (at + 4 <= body) {
      std::uint32_t bits;
      std::memcpy(&bits, data + at, 4);
      at += 4;
      w[i] = std::bit_cast<float>(bits);
    } else {
      const std::uint32_t r = rng();
      w[i] = std::ldexp(static_cast<float>(static_cast<std::int32_t>(r % 4001) - 2000) / 16.0f,
                        static_cast<int>((r >> 16) % 24) - 12) / s;
    }
  }

  // 1. Codec encoder against the oracle's.
  std::vector<std::uint8_t> codes(N * K);
  if (!qd::codec::Fp8QuantizeSpan(subtype, w.data(), N, K, inv.data(), blocks, block_cols, codes.data())) {
    Diverge(sig("encode-refused"), params);
  }
  std::vector<float> scaled(N * K);
  for (std::uint64_t i = 0; i < N * K; ++i) scaled[i] = w[i] * inv_at(i / K, i % K);
  std::vector<std::uint8_t> expect;
  if (!qd::oracle::EncodeFp8Codes(name, scaled, &expect)) Diverge(sig("encode-refused"), params + ": oracle");
  for (std::uint64_t i = 0; i < N * K; ++i) {
    if (expect[i] != codes[i]) {
      Diverge(sig("codes"), params + ": [" + std::to_string(i / K) + "][" + std::to_string(i % K) + "] w " +
                                qd::fuzz::Hex(Bits(w[i]), 8) + " * inv " + qd::fuzz::Hex(Bits(inv_at(i / K, i % K)), 8) +
                                ": codec " + qd::fuzz::Hex(codes[i], 2) + " oracle " + qd::fuzz::Hex(expect[i], 2));
    }
  }

  // 2. Decode: codec span against the oracle's division.
  std::vector<float> decoded(N * K);
  qd::codec::Fp8DequantizeSpan(subtype, codes.data(), N, K, inv.data(), blocks, block_cols, decoded.data());
  for (std::uint64_t i = 0; i < N * K; ++i) {
    float value;
    bool is_nan, is_infinite;
    qd::oracle::DecodeFp8Code(name, codes[i], &value, &is_nan, &is_infinite);
    const float expect = value / inv_at(i / K, i % K);
    if (!Same(decoded[i], expect)) {
      Diverge(sig("decode"), params + ": code " + qd::fuzz::Hex(codes[i], 2) + ": codec " +
                                 qd::fuzz::Hex(Bits(decoded[i]), 8) + " oracle " + qd::fuzz::Hex(Bits(expect), 8));
    }
  }

  // 3. Roundtrip: decoded weights encode to their codes again.
  std::vector<std::uint8_t> again(N * K);
  qd::codec::Fp8QuantizeSpan(subtype, decoded.data(), N, K, inv.data(), blocks, block_cols, again.data());
  for (std::uint64_t i = 0; i < N * K; ++i) {
    if (qd::codec::Fp8CodeIsNonFinite(subtype, codes[i]) || !KeepsItsCode(decoded[i])) continue;
    if (again[i] != codes[i]) {
      Diverge(sig("roundtrip"), params + ": code " + qd::fuzz::Hex(codes[i], 2) + " decoded " +
                                    qd::fuzz::Hex(Bits(decoded[i]), 8) + " encoded " + qd::fuzz::Hex(again[i], 2));
    }
  }
  // 4. Decode first: the body's codes came back.
  for (std::uint64_t i = 0; i < N * K; ++i) {
    if (source_code[i] < 0 || !KeepsItsCode(w[i]) || codes[i] == source_code[i]) continue;
    Diverge(sig("decode-first"), params + ": code " + qd::fuzz::Hex(static_cast<std::uint32_t>(source_code[i]), 2) +
                                     " encoded as " + qd::fuzz::Hex(codes[i], 2));
  }
  return 0;
}
