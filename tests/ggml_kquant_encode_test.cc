// ggml_kquant_encode_test.cc: quantdiff's q2_K..q6_K and iq4_nl encoders
// (codecs/ggml_kquant_encode.cc) against docs/ggml_blocks.md section 4.5's
// per-weight bound. Inputs of many shapes (normal, sub-blocks of very
// different magnitudes, all negative, constant, zeros, subnormal, large;
// the bound holds where the super-scales fit binary16, section 4.5);
// every block is encoded, decoded by the oracle (not the codec), and each
// weight checked against the bound, computed here from the formula with the
// block's stored super-scales read by the tests' own binary16 widening.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/ggml_blocks.h"
#include "oracles/ggml_blocks.h"
#include "property_tests/gen/half.h"

namespace {

struct Kind {
  qd::codec::GgmlType type;
  const char* name;
  int per_sub;    // weights per sub-block
  bool with_min;  // min type (else symmetric, or iq4_nl)
  int n;          // codes 0..n (min types) or h (symmetric)
  int s_max;      // S
  int m_max;      // Sm (min types)
  int d_at;       // byte offset of d
  int dmin_at;    // byte offset of dmin, or -1
};

const Kind kKinds[] = {
    {qd::codec::GgmlType::kQ2_K, "q2_K", 16, true, 3, 15, 15, 80, 82},
    {qd::codec::GgmlType::kQ3_K, "q3_K", 16, false, 3, 32, 0, 108, -1},
    {qd::codec::GgmlType::kQ4_K, "q4_K", 32, true, 15, 63, 63, 0, 2},
    {qd::codec::GgmlType::kQ5_K, "q5_K", 32, true, 31, 63, 63, 0, 2},
    {qd::codec::GgmlType::kQ6_K, "q6_K", 16, false, 31, 128, 0, 208, -1},
    {qd::codec::GgmlType::kIq4Nl, "iq4_nl", 32, false, 0, 0, 0, 0, -1},
};

float HalfAt(const std::uint8_t* p) { return qdtest::HalfValue(static_cast<std::uint16_t>(p[0] | (p[1] << 8))); }

// Section 4.5's bound for one sub-block's weights.
double Bound(const Kind& k, const float* x, const float* y, float d, float dmin) {
  double m = 0.0;
  double a = 0.0;
  double lo = 0.0;
  double hi = -INFINITY;
  for (int i = 0; i < k.per_sub; ++i) {
    m = std::max({m, std::fabs(static_cast<double>(x[i])), std::fabs(static_cast<double>(y[i]))});
    a = std::max(a, std::fabs(static_cast<double>(x[i])));
    lo = std::min(lo, static_cast<double>(x[i]));
    hi = std::max(hi, static_cast<double>(x[i]));
  }
  const double rho = std::ldexp(m, -22);
  const double tiny = std::ldexp(1.0, -25);
  if (k.type == qd::codec::GgmlType::kIq4Nl) return 12.0 * a / 113.0 * (1.0 + std::ldexp(1.0, -11)) + 12.0 * tiny + rho;
  if (k.with_min) {
    return (hi - lo) / (2.0 * k.n) + (k.n + 1) * std::fabs(d) / 2.0 + std::fabs(dmin) / 2.0 +
           (k.n * k.s_max + k.m_max) * tiny + rho;
  }
  return a / (2.0 * k.n) + (k.n + 1) * std::fabs(d) / 2.0 + 2.0 * k.n * k.s_max * tiny + rho;
}

std::vector<float> Inputs(std::size_t values, std::mt19937_64& rng) {
  std::vector<float> x(values);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t b = 0; b < values / 256; ++b) {
    const int shape = static_cast<int>(b % 8);
    for (int i = 0; i < 256; ++i) {
      float v = normal(rng);
      switch (shape) {
        case 1: v *= std::ldexp(1.0f, static_cast<int>(i / 16) * 2 - 16); break;  // multiscale
        case 2: v = -std::fabs(v) - 3.0f; break;                                    // all negative
        case 3: v = 2.5f; break;                                                    // constant
        case 4: v = 0.0f; break;
        case 5: v = std::ldexp(v, -130); break;                                     // subnormal
        case 6: v = std::ldexp(v, 16); break;                                       // large, d near binary16 max for q2_K
        default: break;
      }
      x[b * 256 + static_cast<std::size_t>(i)] = v;
    }
  }
  return x;
}

TEST(GgmlKQuantEncode, EveryWeightWithinTheContractsBound) {
  std::mt19937_64 rng(0x4b51'2026);
  constexpr std::size_t kValues = 256 * 512;
  const std::vector<float> x = Inputs(kValues, rng);
  for (const Kind& k : kKinds) {
    const qd::codec::GgmlTypeInfo& info = qd::codec::GgmlInfo(k.type);
    const std::size_t blocks = kValues / static_cast<std::size_t>(info.values);
    std::vector<std::uint8_t> bytes(blocks * static_cast<std::size_t>(info.bytes), 0xAA);
    ASSERT_TRUE(qd::codec::GgmlEncodeWithinBound(k.type, x.data(), blocks, bytes.data())) << k.name;
    std::vector<float> y;
    ASSERT_TRUE(qd::oracle::DecodeGgmlBlocks(k.name, bytes, &y)) << k.name;
    std::size_t outside = 0;
    double worst = 0.0;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::uint8_t* block = bytes.data() + b * static_cast<std::size_t>(info.bytes);
      const float d = HalfAt(block + k.d_at);
      const float dmin = k.dmin_at >= 0 ? HalfAt(block + k.dmin_at) : 0.0f;
      for (int s = 0; s < info.values / k.per_sub; ++s) {
        const std::size_t at = b * static_cast<std::size_t>(info.values) + static_cast<std::size_t>(s * k.per_sub);
        const double bound = Bound(k, x.data() + at, y.data() + at, d, dmin);
        for (int i = 0; i < k.per_sub; ++i) {
          const double error = std::fabs(static_cast<double>(x[at + i]) - static_cast<double>(y[at + i]));
          worst = std::max(worst, bound > 0 ? error / bound : (error > 0 ? INFINITY : 0.0));
          if (!(error <= bound) && outside++ == 0) {
            ADD_FAILURE() << k.name << " block " << b << " (shape " << b * info.values / 256 % 8 << ") weight "
                          << at + i << ": |" << x[at + i] << " - " << y[at + i] << "| > " << bound;
          }
        }
      }
    }
    EXPECT_EQ(outside, 0u) << k.name << " (largest error / bound " << worst << ")";
    EXPECT_GT(worst, 0.2) << k.name << ": the bound is far looser than the encoder needs";
  }
}

TEST(GgmlKQuantEncode, NotForTheLegacyTypes) {
  std::vector<float> x(32, 1.0f);
  std::vector<std::uint8_t> out(18, 0x5A);
  EXPECT_FALSE(qd::codec::GgmlEncodeWithinBound(qd::codec::GgmlType::kQ4_0, x.data(), 1, out.data()));
  EXPECT_EQ(out, std::vector<std::uint8_t>(18, 0x5A));
}

}  // namespace
