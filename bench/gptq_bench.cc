// gptq_bench: GPTQ layer dequantize and fused dequant-matvec throughput,
// 3-bit and 4-bit continuous v1, sorted and act-order g_idx, per kernel, with
// a memcpy of the same bytes in the same run as the yardstick.
//
// Layer: K = N = 4096, group size 128, F16 scales (16M weights; 8 MiB packed
// at 4 bits, 6 MiB at 3 bits; 64 MiB of binary32 output).
//  * Dequantize/full: the whole layer into one N x K buffer (DRAM-bound
//    writes). Bytes/s counts packed bytes read plus output bytes written;
//    Memcpy/full copies that many bytes.
//  * Dequantize/rows: 32 output rows at a time into a reused 512 KiB buffer,
//    as a streaming decoder does: the output stays in cache.
//  * Matvec: y = W x, weights never written. Bytes/s counts packed bytes;
//    Memcpy/packed copies them.
// Run: build/bench/bench/qd_gptq_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/float16.h"
#include "codecs/gptq.h"
#include "codecs/kernels.h"

namespace {

using qd::codec::GptqFormat;
using qd::codec::Kernel;

constexpr std::int64_t kIn = 4096;   // K
constexpr std::int64_t kOut = 4096;  // N
constexpr std::int64_t kGroupSize = 128;
constexpr std::int64_t kGroups = kIn / kGroupSize;
constexpr std::int64_t kSliceRows = 32;

struct Layer {
  qd::codec::GptqPacked packed;
  std::vector<std::uint16_t> scales;  // F16 [G][N]
  std::vector<std::int32_t> g_idx;

  Layer(int bits, bool act_order) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(bits * 2 + act_order));
    std::vector<std::int32_t> codes(kIn * kOut), zeros(kGroups * kOut);
    for (auto& c : codes) c = static_cast<std::int32_t>(rng() % (1u << bits));
    for (auto& z : zeros) z = 1 + static_cast<std::int32_t>(rng() % (1u << bits));
    std::normal_distribution<float> normal(0.01f, 0.002f);
    scales.resize(kGroups * kOut);
    for (auto& s : scales) s = qd::codec::F32ToF16(normal(rng));
    g_idx.resize(kIn);
    for (std::int64_t k = 0; k < kIn; ++k) g_idx[k] = static_cast<std::int32_t>(k / kGroupSize);
    // desc_act: the groups of a column permutation, as GPTQ writes them.
    if (act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);
    qd::codec::GptqPackError error;
    qd::codec::GptqEncode(GptqFormat::kV1, bits, kIn, kOut, kGroups, codes, zeros, &packed, &error);
  }

  qd::codec::GptqLayerView View(int bits) const {
    qd::codec::GptqLayerView v;
    v.format = GptqFormat::kV1;
    v.bits = bits;
    v.in_features = kIn;
    v.out_features = kOut;
    v.groups = kGroups;
    v.qweight = reinterpret_cast<const std::uint8_t*>(packed.qweight.data());
    v.qzeros = reinterpret_cast<const std::uint8_t*>(packed.qzeros.data());
    v.scales = reinterpret_cast<const std::uint8_t*>(scales.data());
    v.scales_dtype = qd::codec::Dtype::kF16;
    v.g_idx = reinterpret_cast<const std::uint8_t*>(g_idx.data());
    return v;
  }

  std::int64_t PackedBytes() const {
    return static_cast<std::int64_t>(packed.qweight.size() * 4 + packed.qzeros.size() * 4 +
                                     scales.size() * 2 + g_idx.size() * 4);
  }
};

const Layer& TheLayer(int bits, bool act_order) {
  static const Layer l3(3, false), l3a(3, true), l4(4, false), l4a(4, true);
  if (bits == 3) return act_order ? l3a : l3;
  return act_order ? l4a : l4;
}

constexpr std::int64_t kOutputBytes = kIn * kOut * 4;

void Report(benchmark::State& state, std::int64_t bytes, const std::string& label) {
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["weights/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kIn * kOut, benchmark::Counter::kIsRate);
  state.SetLabel(label);
}

std::string Label(int bits, bool act, Kernel kernel) {
  return "b" + std::to_string(bits) + (act ? " act" : " sorted") + " " +
         std::string(qd::codec::KernelName(kernel));
}

void MemcpyBytes(benchmark::State& state, std::int64_t bytes) {
  std::vector<std::uint8_t> in(static_cast<std::size_t>(bytes), 1), out(in.size());
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), out.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

// Memcpy of the packed layer plus the full output.
void BM_MemcpyFull(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  MemcpyBytes(state, TheLayer(bits, false).PackedBytes() + kOutputBytes);
  state.SetLabel("b" + std::to_string(bits) + " packed+output");
}

// Memcpy of the packed layer alone (the matvec's input).
void BM_MemcpyPacked(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  MemcpyBytes(state, TheLayer(bits, false).PackedBytes());
  state.SetLabel("b" + std::to_string(bits) + " packed");
}

void BM_DequantizeFull(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const bool act = state.range(1) != 0;
  const auto kernel = static_cast<Kernel>(state.range(2));
  const Layer& l = TheLayer(bits, act);
  std::vector<float> out(kIn * kOut);
  for (auto _ : state) {
    qd::codec::GptqDequantize(l.View(bits), out.data(), kernel);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  Report(state, l.PackedBytes() + kOutputBytes, Label(bits, act, kernel));
}

void BM_DequantizeRows(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const bool act = state.range(1) != 0;
  const auto kernel = static_cast<Kernel>(state.range(2));
  const Layer& l = TheLayer(bits, act);
  std::vector<float> out(kSliceRows * kIn);
  for (auto _ : state) {
    for (std::int64_t n = 0; n < kOut; n += kSliceRows) {
      qd::codec::GptqDequantizeRows(l.View(bits), n, n + kSliceRows, out.data(), kernel);
      benchmark::DoNotOptimize(out.data());
    }
  }
  Report(state, l.PackedBytes() + kOutputBytes, Label(bits, act, kernel));
}

void BM_Matvec(benchmark::State& state) {
  const int bits = static_cast<int>(state.range(0));
  const bool act = state.range(1) != 0;
  const auto kernel = static_cast<Kernel>(state.range(2));
  const Layer& l = TheLayer(bits, act);
  std::vector<float> x(kIn), y(kOut);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (auto _ : state) {
    qd::codec::GptqMatvec(l.View(bits), x.data(), y.data(), kernel);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  Report(state, l.PackedBytes(), Label(bits, act, kernel));
}

void KernelArgs(benchmark::internal::Benchmark* b) {
  for (int bits : {3, 4}) {
    for (int act : {0, 1}) {
      for (Kernel k : qd::codec::AvailableKernels()) b->Args({bits, act, static_cast<int>(k)});
    }
  }
}

BENCHMARK(BM_MemcpyFull)->ArgNames({"bits"})->Arg(3)->Arg(4)->UseRealTime();
BENCHMARK(BM_DequantizeFull)->ArgNames({"bits", "act", "kernel"})->Apply(KernelArgs)->UseRealTime();
BENCHMARK(BM_DequantizeRows)->ArgNames({"bits", "act", "kernel"})->Apply(KernelArgs)->UseRealTime();
BENCHMARK(BM_MemcpyPacked)->ArgNames({"bits"})->Arg(3)->Arg(4)->UseRealTime();
BENCHMARK(BM_Matvec)->ArgNames({"bits", "act", "kernel"})->Apply(KernelArgs)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
