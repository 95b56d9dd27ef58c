// kernel_dispatch_test.cc: run-time kernel selection and kernel agreement.
//
//  * QD_KERNEL=scalar|avx2 forces a kernel the processor has; unset or an
//    unknown value gives the fastest (codecs/kernels.h). BestKernel() decides
//    once per process, so each case runs kernel_probe in a child process.
//  * Dequantization is exact (q * scale is exact in binary32), so every
//    kernel must give the same bits as the spec's float(q) * scale on a large
//    random tensor, and the oracle must too. The matrix-vector product is
//    only required to agree within the derived bound (property_tests/gen/bounds.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"
#include "harness/differ.h"
#include "oracles/rbq.h"
#include "property_tests/gen/bounds.h"
#include "property_tests/gen/files.h"
#include "property_tests/gen/half.h"

namespace {

using qd::codec::Kernel;

// stdout of kernel_probe with QD_KERNEL set to value (nullptr: unset).
std::string Probe(const char* value) {
  std::string command = value == nullptr ? "env -u QD_KERNEL " : "env QD_KERNEL='" + std::string(value) + "' ";
  command += "'" QD_KERNEL_PROBE "'";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "<popen failed>";
  std::string out;
  char buf[128];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  const int status = pclose(pipe);
  if (status != 0) return "<exit status " + std::to_string(status) + ">";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string Fastest() {
  return std::string(qd::codec::KernelName(qd::codec::AvailableKernels().back()));
}

bool Available(const std::string& name) {
  for (Kernel k : qd::codec::AvailableKernels()) {
    if (qd::codec::KernelName(k) == name) return true;
  }
  return false;
}

TEST(KernelDispatch, ScalarIsAlwaysAvailableAndFirst) {
  const std::vector<Kernel> kernels = qd::codec::AvailableKernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.front(), Kernel::kScalar);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_NE(qd::codec::KernelName(kernels[i]), "unknown");
    for (std::size_t j = i + 1; j < kernels.size(); ++j) EXPECT_NE(kernels[i], kernels[j]);
  }
}

TEST(KernelDispatch, UnsetPicksTheFastest) { EXPECT_EQ(Probe(nullptr), Fastest()); }

TEST(KernelDispatch, QdKernelForcesEveryAvailableKernel) {
  for (Kernel k : qd::codec::AvailableKernels()) {
    const std::string name(qd::codec::KernelName(k));
    EXPECT_EQ(Probe(name.c_str()), name);
  }
}

TEST(KernelDispatch, QdKernelNamingAnUnavailableOrUnknownKernelFallsBackToTheFastest) {
  for (const char* name : {"avx2", "scalar"}) {
    if (!Available(name)) {
      EXPECT_EQ(Probe(name), Fastest()) << name;
    }
  }
  EXPECT_EQ(Probe("neon"), Fastest());
  EXPECT_EQ(Probe(""), Fastest());
  EXPECT_EQ(Probe("SCALAR"), Fastest());
}

// A large tensor of random blocks: every scale bit pattern (inf and NaN too,
// unless finite_only) and random payloads.
struct Tensor {
  int bits;
  std::uint64_t rows, columns;
  std::vector<std::uint8_t> blocks;
  std::vector<float> expected;  // float(q) * half_to_f32(scale), the spec
};

Tensor RandomTensor(int bits, std::uint64_t rows, std::uint64_t columns, bool finite_only,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t{bits, rows, columns, {}, {}};
  const std::size_t size = qdtest::BlockSize(bits);
  t.blocks.resize(rows * (columns / 32) * size);
  for (std::uint8_t& b : t.blocks) b = static_cast<std::uint8_t>(rng());
  for (std::size_t b = 0; b < t.blocks.size() / size; ++b) {
    std::uint8_t* block = t.blocks.data() + b * size;
    if (finite_only && !qdtest::HalfIsFinite(qdtest::BlockScale(block))) block[1] &= 0xbf;
    const float scale = qdtest::HalfValue(qdtest::BlockScale(block));
    for (int k = 0; k < 32; ++k) {
      t.expected.push_back(static_cast<float>(qdtest::UnpackCode(bits, block, k)) * scale);
    }
  }
  return t;
}

class KernelAgreement : public ::testing::TestWithParam<int> {};

TEST_P(KernelAgreement, DequantizeIsBitExactInEveryKernel) {
  const int bits = GetParam();
  const Tensor t = RandomTensor(bits, 256, 32 * 64, /*finite_only=*/false, 0x5eed0000 + bits);
  for (Kernel k : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(qd::codec::KernelName(k));
    std::vector<float> out(t.rows * t.columns, 12345.0f);
    qd::codec::RbqDequantize(bits, t.blocks.data(), t.rows, t.columns, out.data(), k);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!qdtest::SameFloat(out[i], t.expected[i]) && ++mismatches <= 5) {
        ADD_FAILURE() << "weight " << i << " (block " << i / 32 << ", position " << i % 32
                      << "): expected bits " << std::hex << qdtest::FloatBits(t.expected[i])
                      << ", got " << qdtest::FloatBits(out[i]);
      }
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

// The same through the file readers: every kernel's DecodeRbqFile and the
// oracle agree bit for bit (finite scales: the reader refuses the others).
TEST_P(KernelAgreement, DecodedFileIsBitExactInEveryKernelAndTheOracle) {
  const int bits = GetParam();
  const Tensor t = RandomTensor(bits, 128, 32 * 32, /*finite_only=*/true, 0x5eed1000 + bits);
  const std::vector<std::uint8_t> file = qdtest::RbqFile(bits, t.rows, t.columns, t.blocks);
  const qd::ByteView view{file.data(), file.size()};
  const qd::Outcome oracle = qd::oracle::ReadRbqFile(view, "large.safetensors");
  ASSERT_FALSE(oracle.refused);
  ASSERT_EQ(oracle.tensors.size(), 1u);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < t.expected.size(); ++i) {
    if (!qdtest::SameFloat(oracle.tensors[0].values[i], t.expected[i])) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u) << "oracle values differ from float(q) * scale";
  for (Kernel k : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(qd::codec::KernelName(k));
    const qd::Outcome codec = qd::codec::DecodeRbqFile(view, "large.safetensors", k);
    const auto d = qd::harness::Compare(codec, oracle, "kernel_dispatch");
    EXPECT_FALSE(d.has_value()) << d->signature << ": " << d->detail;
  }
}

// Matvec: every kernel within the derived bound of the oracle, per row.
TEST_P(KernelAgreement, MatvecWithinTheDerivedBoundInEveryKernel) {
  const int bits = GetParam();
  const Tensor t = RandomTensor(bits, 64, 32 * 64, /*finite_only=*/true, 0x5eed2000 + bits);
  std::mt19937_64 rng(7 + bits);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<float> x(t.columns);
  for (float& v : x) v = uniform(rng);
  std::vector<float> want(t.rows);
  ASSERT_TRUE(qd::oracle::MatvecRbq(bits, qd::ByteView{t.blocks.data(), t.blocks.size()}, t.rows,
                                    t.columns, x.data(), want.data()));
  for (Kernel k : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(qd::codec::KernelName(k));
    std::vector<float> y(t.rows);
    qd::codec::RbqMatvec(bits, t.blocks.data(), t.rows, t.columns, x.data(), y.data(), k);
    for (std::uint64_t r = 0; r < t.rows; ++r) {
      const double bound = qdtest::MatvecBound(t.expected.data() + r * t.columns, x.data(), t.columns);
      EXPECT_LE(std::fabs(static_cast<double>(y[r]) - static_cast<double>(want[r])), bound)
          << "row " << r << ": codec " << y[r] << " oracle " << want[r];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, KernelAgreement, ::testing::Values(4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 4 ? std::string("Q4B32") : std::string("Q8B32");
                         });

}  // namespace
