// fp8_bench: FP8 dequantize (docs/fp8.md section 6: a table lookup and one
// binary32 division per weight) for E4M3FN row and [128, 128] block scales,
// with a memcpy of the same FP8 bytes in the same run as the yardstick.
//
// Bytes/s counts the FP8 bytes read; weights/s the weights written.
// Run: build/bench/bench/qd_fp8_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "codecs/fp8.h"

namespace {

constexpr std::uint64_t kRows = 4096;
constexpr std::uint64_t kColumns = 4096;  // 16M weights: 16 MiB of FP8
constexpr std::uint64_t kBlock = 128;

struct Fixture {
  std::vector<std::uint8_t> codes;
  std::vector<float> row_scales, block_scales;
  Fixture() {
    std::mt19937_64 rng(8);
    codes.resize(kRows * kColumns);
    for (auto& c : codes) {
      do {
        c = static_cast<std::uint8_t>(rng());
      } while (qd::codec::Fp8CodeIsNonFinite(qd::codec::Fp8Subtype::kE4M3Fn, c));
    }
    std::uniform_real_distribution<float> scale(100.0f, 20000.0f);
    row_scales.resize(kRows);
    for (float& s : row_scales) s = scale(rng);
    block_scales.resize((kRows / kBlock) * (kColumns / kBlock));
    for (float& s : block_scales) s = scale(rng);
  }
};

const Fixture& Data() {
  static const Fixture f;
  return f;
}

void BM_Memcpy(benchmark::State& state) {
  const Fixture& f = Data();
  std::vector<std::uint8_t> out(f.codes.size());
  for (auto _ : state) {
    std::memcpy(out.data(), f.codes.data(), f.codes.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.codes.size()));
}

// Row by row into a cache-resident buffer, as `decode` streams a layer.
// range(0): 0 row scales, 1 [128, 128] block scales.
void BM_Dequantize(benchmark::State& state) {
  const Fixture& f = Data();
  const bool block = state.range(0) == 1;
  std::vector<float> row(kColumns);
  for (auto _ : state) {
    for (std::uint64_t r = 0; r < kRows; ++r) {
      const float* scales = block ? f.block_scales.data() + (r / kBlock) * (kColumns / kBlock) : &f.row_scales[r];
      qd::codec::Fp8DequantizeSpan(qd::codec::Fp8Subtype::kE4M3Fn, f.codes.data() + r * kColumns, 1, kColumns,
                                   scales, block ? kColumns / kBlock : 1, block ? kBlock : kColumns, row.data());
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * f.codes.size()));
  state.counters["weights/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kRows * kColumns, benchmark::Counter::kIsRate);
  state.SetLabel(block ? "E4M3FN, block 128x128" : "E4M3FN, row scales");
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Dequantize)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
