// gptq_kernels_test: the GPTQ layer kernels (codecs/gptq_kernels.cc) against
// docs/gptq.md: dequantization by hand and for every kernel, row slices, and
// matvec as the in-order recurrence and within its error bound. Expected
// weights are fl32((c - z) * s) from codes and zeros the test chose, the
// scale widened by the tests' own binary16 / bfloat16 arithmetic
// (property_tests/gen/half.h), not by the codec's converters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "property_tests/gen/half.h"
#include "tests/gptq_pack_test_support.h"

namespace {

using namespace qd_gptq_test;  // NOLINT(google-build-using-namespace): the reference packer and layers

// ---- dequantization ------------------------------------------------------------

TEST(GptqDequant, HandValues) {
  // v2 4-bit, K = N = 32, one group. Column 0: code 3 with zero 3 and scale
  // -2.0 gives -0.0 (+0.0 times a negative scale); column 1 with the F16
  // subnormal 0x0001 = 2^-24: code 5, zero 2 gives 3 * 2^-24 = 0x34400000.
  for (Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string(qd::codec::KernelName(kernel)));
    Layer l;
    l.format = GptqFormat::kV2;
    l.bits = 4;
    l.K = 32;
    l.N = 32;
    l.G = 1;
    l.codes.assign(32 * 32, 0);
    l.zeros.assign(32, 0);
    l.g_idx.assign(32, 0);
    for (int k = 0; k < 32; ++k) {
      l.codes[k * 32 + 0] = 3;
      l.codes[k * 32 + 1] = 5;
      l.codes[k * 32 + 2] = 0;
    }
    l.zeros[0] = 3;
    l.zeros[1] = 2;
    l.zeros[2] = 15;
    std::vector<std::uint32_t> s(32, 0x3c00u);  // 1.0
    s[0] = 0xc000u;                            // -2.0
    s[1] = 0x0001u;                            // 2^-24
    s[2] = 0x8400u;                            // -2^-14
    l.scales_dtype = Dtype::kF16;
    l.scales = ScaleBytes(Dtype::kF16, s);
    l.Pack();
    const std::vector<float> out = Decode(l, kernel);
    for (int k = 0; k < 32; ++k) {
      EXPECT_EQ(Bits(out[0 * 32 + k]), 0x80000000u);
      EXPECT_EQ(Bits(out[1 * 32 + k]), 0x34400000u);
      EXPECT_EQ(Bits(out[2 * 32 + k]), Bits(15.0f * 0x1p-14f));  // (0 - 15) * -2^-14
      EXPECT_EQ(Bits(out[3 * 32 + k]), 0u);                     // +0.0 * 1.0
    }
    // F32: subnormal products are kept (no FTZ/DAZ), overflow gives inf.
    l.scales_dtype = Dtype::kF32;
    s.assign(32, Bits(1.0f));
    s[0] = 0x00000001u;     // 2^-149, code - zero = 0 -> +0
    s[1] = 0x80000001u;     // -2^-149 * 3
    s[2] = Bits(3.0e38f);   // -15 * 3e38 = -inf
    s[3] = 0x00400000u;     // 2^-127 subnormal * 0
    l.scales = ScaleBytes(Dtype::kF32, s);
    const std::vector<float> f = Decode(l, kernel);
    EXPECT_EQ(Bits(f[0 * 32]), 0u);
    EXPECT_EQ(Bits(f[1 * 32]), 0x80000003u);
    EXPECT_EQ(Bits(f[2 * 32]), Bits(-std::numeric_limits<float>::infinity()));
    EXPECT_EQ(Bits(f[3 * 32]), 0u);
    // BF16 widening: 0x4049 = 3.140625; code 5 - zero 2 = 3 -> 9.421875.
    l.scales_dtype = Dtype::kBF16;
    s.assign(32, 0x4049u);
    l.scales = ScaleBytes(Dtype::kBF16, s);
    EXPECT_EQ(Decode(l, kernel)[1 * 32], 9.421875f);
    // v1: field 15 is zero point 16 (unmasked): code 0 gives -16 * scale.
    Layer v1 = l;
    v1.format = GptqFormat::kV1;
    v1.zeros.assign(32, 16);
    v1.Pack();
    EXPECT_EQ(v1.qzeros[0], -1);  // all fields 15
    EXPECT_EQ(Decode(v1, kernel)[2 * 32], -16.0f * 3.140625f);
  }
}

TEST(GptqDequant, EveryKernelMatchesTheContract) {
  std::uint64_t seed = 1000;
  for (const Shape& s : AllShapes()) {
    for (Dtype dtype : {Dtype::kF16, Dtype::kBF16, Dtype::kF32}) {
      for (bool act : {false, true}) {
        for (std::int64_t gs : {32, 128, -1}) {
          const std::int64_t K = 160;
          const std::int64_t N = 96;
          Layer l = RandomLayer(s.format, s.bits, K, N, gs, act, dtype, seed++);
          std::vector<std::uint32_t> expected(static_cast<std::size_t>(N * K));
          for (std::int64_t n = 0; n < N; ++n) {
            for (std::int64_t k = 0; k < K; ++k) expected[n * K + k] = Bits(l.Expected(k, n));
          }
          for (Kernel kernel : qd::codec::AvailableKernels()) {
            SCOPED_TRACE(Name(s) + " dtype " + std::to_string(static_cast<int>(dtype)) +
                         (act ? " act" : " sorted") + " gs " + std::to_string(gs) + " " +
                         std::string(qd::codec::KernelName(kernel)));
            ASSERT_EQ(AsBits(Decode(l, kernel)), expected);
          }
        }
      }
    }
  }
}

TEST(GptqDequant, RowSlicesEqualTheFullDecode) {
  std::uint64_t seed = 2000;
  for (const Shape& s : AllShapes()) {
    Layer l = RandomLayer(s.format, s.bits, 96, 96, 32, true, Dtype::kF16, seed++);
    for (Kernel kernel : qd::codec::AvailableKernels()) {
      SCOPED_TRACE(Name(s) + " " + std::string(qd::codec::KernelName(kernel)));
      const std::vector<float> full = Decode(l, kernel);
      const std::pair<std::int64_t, std::int64_t> slices[] = {
          {0, 96}, {0, 1}, {95, 96}, {3, 45}, {8, 40}, {16, 32}, {17, 96}, {40, 40}, {33, 88}};
      for (auto [b, e] : slices) {
        std::vector<float> part(static_cast<std::size_t>((e - b) * 96 + 1), 7.0f);
        qd::codec::GptqDequantizeRows(l.View(), b, e, part.data(), kernel);
        for (std::int64_t i = 0; i < (e - b) * 96; ++i) {
          ASSERT_EQ(Bits(part[i]), Bits(full[b * 96 + i])) << b << ".." << e << " at " << i;
        }
        EXPECT_EQ(part.back(), 7.0f) << "wrote past the slice " << b << ".." << e;
      }
    }
  }
}

// ---- matvec ----------------------------------------------------------------------

// The documented tolerance of a SIMD matvec against the scalar one
// (codecs/gptq_kernels.cc): each side is within (K + 1) u S + K 2^-149 of
// the exact sum, S = sum |w(k) x[k]|, u = 2^-24.
double MatvecBound(std::int64_t K, double abs_sum) {
  return 2.0 * static_cast<double>(K + 1) * 0x1p-24 * abs_sum + 2.0 * K * 0x1p-149;
}

TEST(GptqMatvec, ScalarIsTheInOrderRecurrence) {
  std::uint64_t seed = 3000;
  for (const Shape& s : AllShapes()) {
    Layer l = RandomLayer(s.format, s.bits, 96, 64, 32, true, Dtype::kF16, seed++);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> x(96);
    for (float& v : x) v = normal(rng);
    std::vector<float> y(64, 9.0f);
    qd::codec::GptqMatvec(l.View(), x.data(), y.data(), Kernel::kScalar);
    for (std::int64_t n = 0; n < 64; ++n) {
      float acc = l.Expected(0, n) * x[0];
      for (std::int64_t k = 1; k < 96; ++k) {
        const float term = l.Expected(k, n) * x[k];
        acc = acc + term;
      }
      ASSERT_EQ(Bits(y[n]), Bits(acc)) << Name(s) << " n " << n;
    }
  }
  // Order matters and is k = 0..K-1: w = 1 everywhere; x = 2^24, then 1s:
  // each 1 is lost to rounding (2^24 + 1 ties to even), so y = 2^24 exactly,
  // where a pairwise or reversed sum would give more.
  Layer one = RandomLayer(GptqFormat::kV2, 4, 64, 32, 64, false, Dtype::kF32, 1);
  for (auto& c : one.codes) c = 1;
  for (auto& z : one.zeros) z = 0;
  one.scales = ScaleBytes(Dtype::kF32, std::vector<std::uint32_t>(32, Bits(1.0f)));
  one.Pack();
  std::vector<float> x(64, 1.0f);
  x[0] = 0x1p24f;
  std::vector<float> y(32);
  qd::codec::GptqMatvec(one.View(), x.data(), y.data(), Kernel::kScalar);
  EXPECT_EQ(y[0], 0x1p24f);
  // A negative zero sum stays -0.0 (the first term starts the sum).
  for (float& v : x) v = -0.0f;
  qd::codec::GptqMatvec(one.View(), x.data(), y.data(), Kernel::kScalar);
  EXPECT_EQ(Bits(y[0]), 0x80000000u);
}

TEST(GptqMatvec, EveryKernelWithinTheBound) {
  std::uint64_t seed = 4000;
  for (const Shape& s : AllShapes()) {
    for (Dtype dtype : {Dtype::kF16, Dtype::kBF16, Dtype::kF32}) {
      const std::int64_t K = 192, N = 96;
      Layer l = RandomLayer(s.format, s.bits, K, N, 64, true, dtype, seed++);
      {  // moderate scales keep every product and sum finite
        std::mt19937_64 rng(seed);
        std::vector<std::uint32_t> sc(static_cast<std::size_t>(l.G * N));
        for (auto& v : sc) {
          const float f = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f, -12);
          v = dtype == Dtype::kF32    ? Bits(f)
              : dtype == Dtype::kF16 ? qdtest::NearestHalf(f)
                                     : Bits(f) >> 16;
        }
        l.scales = ScaleBytes(dtype, sc);
      }
      std::mt19937_64 rng(seed * 7);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(static_cast<std::size_t>(K));
      for (float& v : x) v = normal(rng);
      std::vector<float> scalar(static_cast<std::size_t>(N));
      qd::codec::GptqMatvec(l.View(), x.data(), scalar.data(), Kernel::kScalar);
      for (Kernel kernel : qd::codec::AvailableKernels()) {
        SCOPED_TRACE(Name(s) + " " + std::string(qd::codec::KernelName(kernel)));
        std::vector<float> y(static_cast<std::size_t>(N), 5.0f);
        qd::codec::GptqMatvec(l.View(), x.data(), y.data(), kernel);
        for (std::int64_t n = 0; n < N; ++n) {
          double abs_sum = 0.0;
          for (std::int64_t k = 0; k < K; ++k) {
            abs_sum += std::fabs(static_cast<double>(l.Expected(k, n)) * x[k]);
          }
          ASSERT_LE(std::fabs(static_cast<double>(y[n]) - scalar[n]), MatvecBound(K, abs_sum))
              << "n " << n;
          // This AVX2 kernel keeps the scalar order in every lane: exact.
          ASSERT_EQ(Bits(y[n]), Bits(scalar[n])) << "n " << n;
        }
      }
    }
  }
}

}  // namespace
