// ggml_blocks_bench: dequantize throughput of the ggml block types Q4_0,
// Q4_K and Q6_K (docs/ggml_blocks.md), per codec kernel, beside a memcpy
// and beside ggml's own dequantize_row_<type> (the pinned libggml-base.so,
// opened through thirdparty/ggml/ when present) on the same blocks, in the
// same run.
//
// Tensor: 4096 x 4096 weights (16M; 64 MiB of binary32 output).
//  * Decode/rows: one 4096-weight row at a time into a reused 16 KiB
//    buffer (the output stays in cache), as a streaming decoder does.
//    Bytes/s counts output bytes written; Memcpy/rows copies 16 KiB rows of
//    a 64 MiB source into the same buffer.
//  * Ggml/rows: the same rows through ggml's dequantize_row_<type>.
// Run: build/bench/bench/qd_ggml_blocks_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"
#include "codecs/kernels.h"
#include "thirdparty/ggml/ggml_library.h"

namespace {

using qd::codec::GgmlType;
using qd::codec::Kernel;

constexpr std::int64_t kRows = 4096;
constexpr std::int64_t kCols = 4096;

// Random blocks with finite scales of a realistic size (d about 2^-8).
const std::vector<std::uint8_t>& Blocks(GgmlType type) {
  static std::vector<std::uint8_t> cache[12];
  std::vector<std::uint8_t>& bytes = cache[static_cast<int>(type)];
  if (!bytes.empty()) return bytes;
  const qd::codec::GgmlTypeInfo& info = qd::codec::GgmlInfo(type);
  const std::int64_t blocks = kRows * kCols / info.values;
  bytes.resize(static_cast<std::size_t>(blocks * info.bytes));
  std::mt19937_64 rng(static_cast<std::uint64_t>(info.ggml_id));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  const int scale_at = type == GgmlType::kQ6_K ? 208 : 0;
  for (std::int64_t k = 0; k < blocks; ++k) {
    std::uint8_t* p = bytes.data() + k * info.bytes;
    for (int at : {scale_at, type == GgmlType::kQ4_K ? 2 : scale_at}) {
      const std::uint16_t h = qd::codec::F32ToF16(std::ldexp(1.0f + static_cast<float>(rng() % 256) / 256.0f, -8));
      p[at] = static_cast<std::uint8_t>(h & 0xFF);
      p[at + 1] = static_cast<std::uint8_t>(h >> 8);
    }
  }
  return bytes;
}

std::size_t RowBytes(GgmlType type) {
  const qd::codec::GgmlTypeInfo& info = qd::codec::GgmlInfo(type);
  return static_cast<std::size_t>(kCols / info.values * info.bytes);
}

void Decode(benchmark::State& state, GgmlType type, Kernel kernel) {
  const std::vector<std::uint8_t>& bytes = Blocks(type);
  const qd::codec::GgmlTypeInfo& info = qd::codec::GgmlInfo(type);
  std::vector<float> row(kCols);
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      qd::codec::GgmlDecode(type, bytes.data() + r * RowBytes(type), static_cast<std::size_t>(kCols / info.values),
                            row.data(), kernel);
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}

const qd::ggml::Library* Ggml() { return qd::ggml::SharedDefaultLibrary(); }

void GgmlDecodeRows(benchmark::State& state, GgmlType type) {
  const std::vector<std::uint8_t>& bytes = Blocks(type);
  // Resolved before the timed loop, as a caller of ggml's to_float table
  // would hold the function: the yardstick times decoding, not dlsym.
  const qd::ggml::DequantizeRowFn dequantize_row = Ggml()->RowDequantizer(qd::codec::GgmlInfo(type).name);
  if (dequantize_row == nullptr) {
    state.SkipWithError("this ggml build has no dequantize_row for the type");
    return;
  }
  std::vector<float> row(kCols);
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      dequantize_row(bytes.data() + r * RowBytes(type), row.data(), kCols);
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}

void MemcpyRows(benchmark::State& state) {
  static const std::vector<float> source(static_cast<std::size_t>(kRows * kCols), 1.0f);
  std::vector<float> row(kCols);
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      std::memcpy(row.data(), source.data() + r * kCols, static_cast<std::size_t>(kCols) * 4);
      benchmark::DoNotOptimize(row.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}

int Register() {
  benchmark::RegisterBenchmark("Memcpy/rows", MemcpyRows);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::string name(qd::codec::GgmlInfo(type).name);
    for (Kernel kernel : qd::codec::AvailableKernels()) {
      benchmark::RegisterBenchmark(("Decode/rows/" + name + "/" + std::string(qd::codec::KernelName(kernel))).c_str(),
                                   [type, kernel](benchmark::State& s) { Decode(s, type, kernel); });
    }
    if (Ggml() != nullptr) {
      benchmark::RegisterBenchmark(("Ggml/rows/" + name).c_str(),
                                   [type](benchmark::State& s) { GgmlDecodeRows(s, type); });
    }
  }
  return 0;
}
[[maybe_unused]] const int kRegistered = Register();

}  // namespace

BENCHMARK_MAIN();
