// bnb_bench: bitsandbytes NF4 dequantize throughput, flat and nested
// statistics, per kernel and restored dtype, with a memcpy of the same packed
// bytes in the same run as the yardstick.
//
// Bytes/s counts the packed bytes read. Nested runs include computing the
// effective block scales (BnbNestedAbsmax), as DecodeBnbFile does.
// Run: build/bench/bench/qd_bnb_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/kernels.h"

namespace {

constexpr std::uint64_t kRows = 4096;
constexpr std::uint64_t kColumns = 4096;  // 16M weights: 8 MiB packed
constexpr std::uint64_t kBlocksize = 64;

struct Fixture {
  qd::codec::Bnb4bitQuantized q;
  Fixture() {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> w(kRows * kColumns);
    for (float& v : w) v = normal(rng);
    std::string error;
    qd::codec::QuantizeBnb4bit(w.data(), w.size(), qd::codec::Bnb4bitType::kNf4, kBlocksize,
                               /*compress_statistics=*/true, &q, &error);
  }
};

const Fixture& TheFixture() {
  static const Fixture f;
  return f;
}

void BM_Memcpy(benchmark::State& state) {
  const Fixture& f = TheFixture();
  std::vector<std::uint8_t> out(f.q.packed.size());
  for (auto _ : state) {
    std::memcpy(out.data(), f.q.packed.data(), out.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * f.q.packed.size());
}

// One row at a time into a row buffer, as a streaming decoder would: the
// output stays in cache, so this measures decoding, not DRAM writes.
void BM_DequantizeNf4(benchmark::State& state) {
  const bool nested = state.range(0) != 0;
  const auto dtype = static_cast<qd::codec::BnbDtype>(state.range(1));
  const auto kernel = static_cast<qd::codec::Kernel>(state.range(2));
  const Fixture& f = TheFixture();
  const std::uint64_t row_bytes = kColumns / 2;
  const std::uint64_t row_blocks = kColumns / kBlocksize;
  std::vector<float> scales = f.q.absmax;
  std::vector<float> row(kColumns);
  for (auto _ : state) {
    if (nested) {
      qd::codec::BnbNestedAbsmax(f.q.absmax_codes.data(), scales.size(), f.q.nested_quant_map.data(),
                                 f.q.nested_absmax.data(), f.q.nested_blocksize, f.q.nested_offset,
                                 scales.data());
    }
    for (std::uint64_t r = 0; r < kRows; ++r) {
      qd::codec::BnbDequantize4bit(qd::codec::Bnb4bitType::kNf4, f.q.packed.data() + r * row_bytes,
                                   kColumns, scales.data() + r * row_blocks, kBlocksize, dtype,
                                   row.data(), kernel);
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * f.q.packed.size());
  state.counters["weights/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kRows * kColumns, benchmark::Counter::kIsRate);
  static const char* kDtypes[] = {"f16", "bf16", "f32"};
  state.SetLabel(std::string(nested ? "nested " : "flat ") + kDtypes[state.range(1)] + " " +
                 std::string(qd::codec::KernelName(kernel)));
}

void KernelArgs(benchmark::internal::Benchmark* b) {
  for (int nested : {0, 1}) {
    for (int dtype : {0, 1, 2}) {
      for (qd::codec::Kernel k : qd::codec::AvailableKernels()) {
        b->Args({nested, dtype, static_cast<int>(k)});
      }
    }
  }
}

BENCHMARK(BM_Memcpy);
BENCHMARK(BM_DequantizeNf4)->ArgNames({"nested", "dtype", "kernel"})->Apply(KernelArgs);

}  // namespace

BENCHMARK_MAIN();
