// rbq_bench: Q4B32 / Q8B32 dequantize and in-place matvec throughput, with a
// memcpy of the same packed bytes in the same run as the yardstick.
//
// Bytes/s counts the packed bytes read (what the format exists to shrink).
// Run: build/bench/bench/qd_rbq_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"

namespace {

constexpr std::uint64_t kRows = 4096;
constexpr std::uint64_t kColumns = 4096;  // 16M weights: 9 MiB of Q4B32

struct Fixture {
  std::vector<std::uint8_t> blocks;
  std::vector<float> x;
  explicit Fixture(int bits) {
    std::mt19937_64 rng(bits);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> w(kRows * kColumns);
    for (float& v : w) v = normal(rng);
    qd::Finding error;
    qd::codec::RbqQuantize(bits, w.data(), kRows, kColumns, &blocks, &error);
    x.resize(kColumns);
    for (float& v : x) v = normal(rng);
  }
};

const Fixture& FixtureFor(int bits) {
  static const Fixture q4(4), q8(8);
  return bits == 4 ? q4 : q8;
}

void BM_Memcpy(benchmark::State& state) {
  const Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> out(f.blocks.size());
  for (auto _ : state) {
    std::memcpy(out.data(), f.blocks.data(), f.blocks.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * f.blocks.size());
}

// One row at a time into a row buffer, as a streaming decoder would: the
// output stays in cache, so this measures decoding, not DRAM writes.
void BM_Dequantize(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const auto kernel = static_cast<qd::codec::Kernel>(state.range(1));
  const Fixture& f = FixtureFor(bits);
  const std::uint64_t row_bytes = kColumns / 32 * qd::codec::RbqBlockBytes(bits);
  std::vector<float> row(kColumns);
  for (auto _ : state) {
    for (std::uint64_t r = 0; r < kRows; ++r) {
      qd::codec::RbqDequantize(bits, f.blocks.data() + r * row_bytes, 1, kColumns,
                               row.data(), kernel);
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * f.blocks.size());
  state.counters["weights/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kRows * kColumns, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(qd::codec::KernelName(kernel)));
}

void BM_Matvec(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const auto kernel = static_cast<qd::codec::Kernel>(state.range(1));
  const Fixture& f = FixtureFor(bits);
  std::vector<float> y(kRows);
  for (auto _ : state) {
    qd::codec::RbqMatvec(bits, f.blocks.data(), kRows, kColumns, f.x.data(), y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * f.blocks.size());
  state.counters["weights/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kRows * kColumns, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(qd::codec::KernelName(kernel)));
}

void KernelArgs(benchmark::internal::Benchmark* b) {
  for (int bits : {4, 8}) {
    for (qd::codec::Kernel k : qd::codec::AvailableKernels()) {
      b->Args({bits, static_cast<int>(k)});
    }
  }
}

BENCHMARK(BM_Memcpy)->ArgName("bits")->Arg(4)->Arg(8);
BENCHMARK(BM_Dequantize)->ArgNames({"bits", "kernel"})->Apply(KernelArgs);
BENCHMARK(BM_Matvec)->ArgNames({"bits", "kernel"})->Apply(KernelArgs);

}  // namespace

BENCHMARK_MAIN();
