// awq_bench: AWQ 4-bit dequantize (docs/awq.md section 6) of a K = N = 4096
// layer, group size 128, F16 scales, in each layout: GEMM (fl32((q - z) * s),
// codes in AWQ's 0,2,4,6,1,3,5,7 nibble order), GEMV (the same arithmetic,
// codes along the inputs) and GEMV_FAST (fl32(fl32(q * s) + sz), I16 words,
// shuffled and interleaved), with a memcpy of the packed qweight bytes (8 MiB
// in every layout) in the same run as the yardstick.
//
// Rows of the [N, K] weight are decoded eight at a time into a 128 KiB
// buffer, as `decode` streams a layer, once per layout and available kernel
// (scalar, AVX2). Bytes/s counts the packed qweight bytes; weights/s the
// weights written.
// Run: build/bench/bench/qd_awq_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/awq.h"
#include "codecs/kernels.h"

namespace {

constexpr std::int64_t kIn = 4096;   // K
constexpr std::int64_t kOut = 4096;  // N
constexpr std::int64_t kGroup = 128;
constexpr std::int64_t kSliceRows = 8;

void PushHalf(std::vector<std::uint8_t>* bytes, std::uint16_t half) {
  bytes->push_back(static_cast<std::uint8_t>(half & 0xff));
  bytes->push_back(static_cast<std::uint8_t>(half >> 8));
}

struct Layer {
  qd::codec::AwqPacked packed;
  std::vector<std::uint8_t> qweight, qzeros, scales;  // little-endian bytes
  qd::codec::AwqLayerView view;
  explicit Layer(qd::codec::AwqFormat format) {
    std::mt19937_64 rng(11);
    std::vector<std::int32_t> codes(static_cast<std::size_t>(kIn * kOut));
    for (auto& c : codes) c = static_cast<std::int32_t>(rng() % 16);
    std::vector<std::int32_t> zeros(static_cast<std::size_t>(kIn / kGroup * kOut));
    for (auto& z : zeros) z = static_cast<std::int32_t>(rng() % 16);
    std::string error;
    if (!qd::codec::AwqEncode(format, kIn, kOut, kGroup, codes, zeros, &packed, &error)) {
      std::abort();  // the bench's own fixture: a failure here is a bug in this file
    }
    const bool fast = format == qd::codec::AwqFormat::kGemvFast;
    if (fast) {
      for (const std::int32_t w : packed.qweight) PushHalf(&qweight, static_cast<std::uint16_t>(w));
    } else {
      qweight = qd::codec::I32WordBytes(packed.qweight);
      qzeros = qd::codec::I32WordBytes(packed.qzeros);
    }
    // Finite binary16 scales between 2^-7 and 2^-3 (exponent 8..11); the
    // grid is [G, N] (GEMV [N, 8Z], GEMV_FAST [8Z, N]: 8Z = G = 32 here).
    // GEMV_FAST's scaled zeros: more halves of that range, negated.
    const std::size_t slots = static_cast<std::size_t>(kIn / kGroup * kOut);
    for (std::size_t i = 0; i < slots; ++i) {
      const std::uint16_t exponent = static_cast<std::uint16_t>(8 + rng() % 4);
      PushHalf(&scales, static_cast<std::uint16_t>((exponent << 10) | (rng() & 0x3ff)));
      if (fast) PushHalf(&qzeros, static_cast<std::uint16_t>(0x8000 | (exponent << 10) | (rng() & 0x3ff)));
    }
    view.format = format;
    view.in_features = kIn;
    view.out_features = kOut;
    view.groups = kIn / kGroup;
    view.group_size = kGroup;
    view.zeros_width = format == qd::codec::AwqFormat::kGemm ? 0 : qd::codec::AwqZerosWidth(kIn, kGroup);
    view.qweight = qweight.data();
    view.qzeros = qzeros.data();
    view.scales = scales.data();
    view.scales_dtype = qd::codec::Dtype::kF16;
  }
};

const qd::codec::AwqFormat kFormats[] = {qd::codec::AwqFormat::kGemm, qd::codec::AwqFormat::kGemv,
                                         qd::codec::AwqFormat::kGemvFast};

const Layer& TheLayer(int format) {
  static const Layer layers[] = {Layer(kFormats[0]), Layer(kFormats[1]), Layer(kFormats[2])};
  return layers[format];
}

void BM_MemcpyPacked(benchmark::State& state) {
  const Layer& l = TheLayer(0);
  std::vector<std::uint8_t> out(l.qweight.size());
  for (auto _ : state) {
    std::memcpy(out.data(), l.qweight.data(), l.qweight.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * l.qweight.size()));
}

void BM_DequantizeRows(benchmark::State& state) {
  const Layer& l = TheLayer(static_cast<int>(state.range(0)));
  const auto kernel = static_cast<qd::codec::Kernel>(state.range(1));
  state.SetLabel(std::string(qd::codec::AwqFormatName(l.view.format)) + " " +
                 std::string(qd::codec::KernelName(kernel)));
  std::vector<float> out(static_cast<std::size_t>(kSliceRows * kIn));
  for (auto _ : state) {
    for (std::int64_t n = 0; n < kOut; n += kSliceRows) {
      qd::codec::AwqDequantizeRows(l.view, n, n + kSliceRows, out.data(), kernel);
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * l.qweight.size()));
  state.counters["weights/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * kIn * kOut,
                                                   benchmark::Counter::kIsRate);
}

BENCHMARK(BM_MemcpyPacked)->Unit(benchmark::kMillisecond);
void LayoutAndKernelArgs(benchmark::internal::Benchmark* b) {
  for (int format = 0; format < 3; ++format) {
    for (qd::codec::Kernel k : qd::codec::AvailableKernels()) b->Args({format, static_cast<int>(k)});
  }
}

BENCHMARK(BM_DequantizeRows)->ArgNames({"format", "kernel"})->Apply(LayoutAndKernelArgs)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
