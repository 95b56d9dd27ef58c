// bnb_quantize.cc: encoders reproducing bitsandbytes' default (pure torch)
// backend as the peer vectors record it (../shared/peer/bnb/README.md,
// TABLES.json). Every formula here was checked against the stored bytes of
// all peer cases (tests/peer/bnb_peer_test.cc); the comments say which facts
// the vectors decided. Compiled with -ffp-contract=off: every operation is one
// binary32 rounding, as torch's CPU kernels do it.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/float16.h"

namespace qd::codec {
namespace {

// absmax.clamp(min=1e-38): binary32 0x006ce3ee (subnormal).
const float kAbsmaxFloor = std::bit_cast<float>(0x006ce3eeu);

// max|x| over [begin, end). bnb stores it unclamped for a full block and
// clamped to the floor for the partial last one; *stored gets that, and the
// clamped value (what every block is scaled by) is returned.
float BlockAbsmax(const float* x, std::uint64_t begin, std::uint64_t end, bool partial,
                  float* stored) {
  float a = 0.0f;
  for (std::uint64_t i = begin; i < end; ++i) a = std::max(a, std::fabs(x[i]));
  const float clamped = std::max(a, kAbsmaxFloor);
  *stored = partial ? clamped : a;
  return clamped;
}

// torch.linspace(start, end, steps) for binary32 on the CPU, scalar formula:
// the lower half counts up from start, the upper half down from end.
std::vector<float> LinspaceF32(float start, float end, std::int64_t steps) {
  std::vector<float> out(static_cast<std::size_t>(steps));
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float range = end - start;
  const float step = range / static_cast<float>(steps - 1);
  const std::int64_t halfway = steps / 2;
  for (std::int64_t i = 0; i < steps; ++i) {
    if (i < halfway) {
      const float offset = step * static_cast<float>(i);
      out[i] = start + offset;
    } else {
      const float offset = step * static_cast<float>(steps - i - 1);
      out[i] = end - offset;
    }
  }
  return out;
}

// Python's 10 ** k as a binary32 multiplier: k >= 0 is an exact integer,
// k < 0 the double nearest 10^k (strtod is correctly rounded), then RNE.
float PowerOfTenF32(int k) {
  const std::string text = "1e" + std::to_string(k);
  return static_cast<float>(std::strtod(text.c_str(), nullptr));
}

// ---- torch's cascade sum (aten/src/ATen/native/cpu/SumKernel.cpp) ----------
// Emulated for Vectorized<float> of 8 lanes (AVX2 builds), single thread.
constexpr int kLanes = 8;

std::int64_t CeilLog2(std::int64_t x) {
  if (x <= 2) return 1;
  return static_cast<std::int64_t>(std::bit_width(static_cast<std::uint64_t>(x - 1)));
}

template <int W>
struct Lanes {
  std::array<float, W> v{};
  void Add(const Lanes& o) {
    for (int l = 0; l < W; ++l) v[l] = v[l] + o.v[l];
  }
  static Lanes Load(const float* x, std::int64_t item) {
    Lanes r;
    for (int l = 0; l < W; ++l) r.v[l] = x[item * W + l];
    return r;
  }
};

// multi_row_sum: 4 columns of accumulators, 4 cascade levels.
template <int W>
std::array<Lanes<W>, 4> MultiRowSum(const float* x, std::int64_t rows) {
  constexpr int kLevels = 4;
  const std::int64_t level_power = std::max<std::int64_t>(4, CeilLog2(rows) / kLevels);
  const std::int64_t level_step = std::int64_t{1} << level_power;
  const std::int64_t level_mask = level_step - 1;
  std::array<std::array<Lanes<W>, 4>, kLevels> acc{};
  std::int64_t i = 0;
  while (i + level_step <= rows) {
    for (std::int64_t j = 0; j < level_step; ++j, ++i) {
      for (int k = 0; k < 4; ++k) acc[0][k].Add(Lanes<W>::Load(x, i * 4 + k));
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < 4; ++k) {
        acc[j][k].Add(acc[j - 1][k]);
        acc[j - 1][k] = Lanes<W>{};
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < rows; ++i) {
    for (int k = 0; k < 4; ++k) acc[0][k].Add(Lanes<W>::Load(x, i * 4 + k));
  }
  for (int j = 1; j < kLevels; ++j) {
    for (int k = 0; k < 4; ++k) acc[0][k].Add(acc[j][k]);
  }
  return acc[0];
}

// row_sum: items viewed as [-1, 4]; the leftover items go into column 0.
template <int W>
Lanes<W> RowSum(const float* x, std::int64_t items) {
  const std::int64_t rows = items / 4;
  std::array<Lanes<W>, 4> partial = MultiRowSum<W>(x, rows);
  for (std::int64_t i = rows * 4; i < items; ++i) partial[0].Add(Lanes<W>::Load(x, i));
  for (int k = 1; k < 4; ++k) partial[0].Add(partial[k]);
  return partial[0];
}

float CascadeSum(const float* x, std::int64_t n) {
  if (n < kLanes) return RowSum<1>(x, n).v[0];
  const std::int64_t vectors = n / kLanes;
  const Lanes<kLanes> acc = RowSum<kLanes>(x, vectors);
  float total = 0.0f;
  for (std::int64_t k = vectors * kLanes; k < n; ++k) total = total + x[k];
  for (int l = 0; l < kLanes; ++l) total = total + acc.v[l];
  return total;
}

// Midpoints of a sorted table, fl(fl(a + b) / 2).
std::vector<float> Midpoints(const float* sorted, std::size_t count) {
  std::vector<float> bounds(count - 1);
  for (std::size_t k = 0; k + 1 < count; ++k) {
    const float sum = sorted[k] + sorted[k + 1];
    bounds[k] = sum / 2.0f;
  }
  return bounds;
}

// torch.bucketize(value, bounds, right=False): bounds strictly below value.
std::size_t Bucket(const std::vector<float>& bounds, float value) {
  return static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) -
                                  bounds.begin());
}

bool Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// The 4-bit tables' sort order (stable, so FP4's two zeros keep code 0 first)
// and the midpoints of the sorted values.
struct FourBitCoder {
  std::array<std::uint8_t, 16> order{};
  std::vector<float> bounds;
  explicit FourBitCoder(Bnb4bitType type) {
    const std::array<float, 16>& table = Bnb4bitTable(type);
    std::array<int, 16> index{};
    std::iota(index.begin(), index.end(), 0);
    std::stable_sort(index.begin(), index.end(),
                     [&](int a, int b) { return table[a] < table[b]; });
    std::array<float, 16> sorted{};
    for (int k = 0; k < 16; ++k) {
      order[k] = static_cast<std::uint8_t>(index[k]);
      sorted[k] = table[index[k]];
    }
    bounds = Midpoints(sorted.data(), sorted.size());
  }
  std::uint8_t Code(float scaled) const { return order[Bucket(bounds, scaled)]; }
};

}  // namespace

std::vector<float> CreateDynamicMap(bool signed_map, int max_exponent_bits, int total_bits) {
  std::vector<float> data;
  if (max_exponent_bits < 1 || total_bits < 2 || total_bits > 8) return data;
  const int non_sign_bits = total_bits - 1;
  if (non_sign_bits - max_exponent_bits < 0) return data;
  const std::int64_t additional_items = (std::int64_t{1} << (non_sign_bits - max_exponent_bits)) - 1;
  const float start = 0.1f;
  auto append_level = [&](std::int64_t boundary_count, int exponent) {
    const std::vector<float> b = LinspaceF32(start, 1.0f, boundary_count);
    const float scale = PowerOfTenF32(exponent);
    for (std::size_t j = 0; j + 1 < b.size(); ++j) {
      const float sum = b[j] + b[j + 1];
      data.push_back(scale * (sum / 2.0f));
    }
    if (signed_map) {
      for (std::size_t j = 0; j + 1 < b.size(); ++j) {
        const float sum = b[j] + b[j + 1];
        data.push_back(-scale * (sum / 2.0f));
      }
    }
  };
  int i = 0;
  for (; i < max_exponent_bits; ++i) {
    const int bits = i + non_sign_bits - max_exponent_bits + (signed_map ? 0 : 1);
    append_level((std::int64_t{1} << bits) + 1, -(max_exponent_bits - 1) + i);
  }
  if (additional_items > 0) {  // uses the last exponent, as bnb's loop variable does
    append_level(additional_items + 1, -(max_exponent_bits - 1) + (i - 1));
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  if (data.size() != (std::size_t{1} << total_bits) || data.size() > 256) return {};
  data.resize(256, 0.0f);
  std::sort(data.begin(), data.end());
  return data;
}

float TorchMeanF32(const float* x, std::uint64_t n) {
  const float sum = CascadeSum(x, static_cast<std::int64_t>(n));
  return sum / static_cast<float>(n);
}

bool QuantizeBlockwise8(const float* x, std::uint64_t n, const float* map,
                        std::uint64_t blocksize, std::vector<std::uint8_t>* codes,
                        std::vector<float>* absmax, std::string* error) {
  if (blocksize == 0) return Fail(error, "blocksize 0");
  for (std::uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return Fail(error, "input value " + std::to_string(i) + " is not finite");
  }
  const std::vector<float> bounds = Midpoints(map, 256);
  const std::uint64_t blocks = n / blocksize + (n % blocksize != 0 ? 1 : 0);
  codes->assign(n, 0);
  absmax->assign(blocks, 0.0f);
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const std::uint64_t begin = b * blocksize;
    const std::uint64_t end = std::min(n, begin + blocksize);
    const bool partial = end - begin < blocksize;
    const float clamped = BlockAbsmax(x, begin, end, partial, &(*absmax)[b]);
    const float reciprocal = 1.0f / clamped;
    for (std::uint64_t i = begin; i < end; ++i) {
      // Full blocks multiply by the reciprocal, the partial block divides:
      // the peer vectors decide both (a tie on a midpoint goes either way).
      const float scaled = std::clamp(partial ? x[i] / clamped : x[i] * reciprocal, -1.0f, 1.0f);
      (*codes)[i] = static_cast<std::uint8_t>(Bucket(bounds, scaled));
    }
  }
  return true;
}

bool QuantizeBnb4bit(const float* x, std::uint64_t n, Bnb4bitType type, std::uint64_t blocksize,
                     bool compress_statistics, Bnb4bitQuantized* out, std::string* error,
                     const float* nested_map, std::uint64_t nested_blocksize) {
  // BNB-001: the 4-bit blocksizes bitsandbytes accepts.
  if (blocksize < 32 || blocksize > 4096 || (blocksize & (blocksize - 1)) != 0) {
    return Fail(error, "BNB-001: blocksize " + std::to_string(blocksize) +
                           " is not a power of two from 32 to 4096");
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return Fail(error, "input value " + std::to_string(i) + " is not finite");
  }
  static const FourBitCoder kNf4(Bnb4bitType::kNf4);
  static const FourBitCoder kFp4(Bnb4bitType::kFp4);
  const FourBitCoder& coder = type == Bnb4bitType::kNf4 ? kNf4 : kFp4;

  const std::uint64_t blocks = n / blocksize + (n % blocksize != 0 ? 1 : 0);
  *out = Bnb4bitQuantized{};
  out->absmax.assign(blocks, 0.0f);
  // Odd n: the padding element is 0.0, so the last low nibble is its code.
  out->packed.assign(n / 2 + n % 2, static_cast<std::uint8_t>(coder.Code(0.0f)));
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const std::uint64_t begin = b * blocksize;
    const std::uint64_t end = std::min(n, begin + blocksize);
    const bool partial = end - begin < blocksize;
    const float clamped = BlockAbsmax(x, begin, end, partial, &out->absmax[b]);
    const float reciprocal = 1.0f / clamped;
    for (std::uint64_t i = begin; i < end; ++i) {
      const float scaled = std::clamp(partial ? x[i] / clamped : x[i] * reciprocal, -1.0f, 1.0f);
      const std::uint8_t code = coder.Code(scaled);
      std::uint8_t& byte = out->packed[i / 2];
      byte = (i % 2 == 0) ? static_cast<std::uint8_t>((code << 4) | (byte & 0x0f))
                          : static_cast<std::uint8_t>((byte & 0xf0) | code);
    }
  }
  if (!compress_statistics) return true;

  if (blocks == 0) return Fail(error, "nested statistics of an empty tensor (mean of nothing)");
  if (nested_blocksize == 0) return Fail(error, "nested blocksize 0");
  std::vector<float> default_map;
  if (nested_map == nullptr) {
    default_map = CreateDynamicMap();
    nested_map = default_map.data();
  }
  const float offset = TorchMeanF32(out->absmax.data(), blocks);
  std::vector<float> centered(blocks);
  for (std::uint64_t b = 0; b < blocks; ++b) centered[b] = out->absmax[b] - offset;
  if (!std::isfinite(offset)) return Fail(error, "the mean of the block maxima is not finite");
  if (!QuantizeBlockwise8(centered.data(), blocks, nested_map, nested_blocksize,
                          &out->absmax_codes, &out->nested_absmax, error)) {
    return false;
  }
  out->nested = true;
  out->nested_offset = offset;
  out->nested_blocksize = nested_blocksize;
  out->nested_quant_map.assign(nested_map, nested_map + 256);
  return true;
}

bool QuantizeBnbInt8Rows(const float* w, std::uint64_t rows, std::uint64_t columns,
                         std::vector<std::int8_t>* cb, std::vector<float>* scb,
                         std::string* error) {
  cb->assign(rows * columns, 0);
  scb->assign(rows, 0.0f);
  std::vector<float> half(columns);
  for (std::uint64_t r = 0; r < rows; ++r) {
    float s = 0.0f;
    for (std::uint64_t c = 0; c < columns; ++c) {
      half[c] = F16ToF32(F32ToF16(w[r * columns + c]));  // Int8Params: .half() first
      if (!std::isfinite(half[c])) {
        return Fail(error, "weight (" + std::to_string(r) + ", " + std::to_string(c) +
                               ") is not a finite binary16");
      }
      s = std::max(s, std::fabs(half[c]));
    }
    (*scb)[r] = s;
    if (s == 0.0f) continue;  // bnb computes 0 * inf = NaN, stored as code 0
    // 127.0 / SCB is torch's reciprocal(SCB) * 127: two roundings (vectors).
    const float reciprocal = 1.0f / s;
    const float k = reciprocal * 127.0f;
    for (std::uint64_t c = 0; c < columns; ++c) {
      const float q = std::clamp(std::nearbyint(half[c] * k), -128.0f, 127.0f);
      (*cb)[r * columns + c] = static_cast<std::int8_t>(q);
    }
  }
  return true;
}

}  // namespace qd::codec
