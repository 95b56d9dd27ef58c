// rbq_matvec: every codec matrix-vector kernel against the oracle's product.
//
// Input: [blocks ...][x ...][2-byte tail]
//   tail[0] bit 0      bits: 0 -> 4 (Q4B32), 1 -> 8 (Q8B32)
//   tail[1] bits 0..2  rows - 1 (1..8); bits 3..5 columns / 32 - 1 (1..8)
// The leading bytes are first rows * columns / 32 blocks (a little-endian
// binary16 scale made finite by clearing the lowest exponent bit when the
// exponent is all ones, then the payload as it is: any codes, -8 and -128
// included), then columns binary32 bit patterns for x, made finite and below
// 2^20 in magnitude by folding the exponent field (e > 146 becomes e % 147).
// Missing bytes are zero.
//
// The bound. Let w_k = q_k * s_b (exact in binary32: an 8-bit integer times
// a binary16 has at most 19 significant bits, and a subnormal binary16 is a
// multiple of 2^-24, far above binary32's range floor) and let
// S = sum_k |w_k * x_k|, computed in binary64 (each product is exact there:
// 19 + 24 bits). Each implementation evaluates the exact y = sum_k w_k x_k
// as a tree of binary32 roundings in which every term k passes through at
// most m = columns + 2 roundings:
//   oracle / codec scalar: q*x (1), the block accumulator (31), times the
//     scale (1), the row sum (blocks - 1): 32 + blocks <= columns + 2;
//   codec AVX2: q*x and three FMAs per lane (4), one FMA per block into the
//     row accumulator (blocks), three horizontal adds (3): 7 + blocks.
// With no underflow, Higham's Lemma 3.1 gives, for each implementation,
//   |y_impl - y| <= gamma(m) * S,   gamma(m) = m*u / (1 - m*u), u = 2^-24.
// Underflow: q*x, and every sum of such terms, is an integer multiple of x's
// quantum (>= 2^-149) and so exact when it lands in the subnormal range; only
// acc*scale (or its FMA) can lose bits there, at most 2^-150 each, once per
// block (blocks <= m), and those errors are carried by at most m further
// roundings (a factor below 2): at most m * 2^-149 per implementation.
// Overflow: |x| < 2^20, |q| <= 128, |s| <= 65504 < 2^16, columns <= 256 keep
// every partial sum below 2^52; rows with S not finite or S > 2^100 are
// skipped anyway. The difference of two implementations is therefore at most
//   2 * gamma(m) * S + 2 * m * 2^-149,
// and a larger difference is a divergence (DIFF:rbq_matvec:bound:<kernel>).
// The oracle refusing a well-formed call is DIFF:rbq_matvec:verdict:oracle.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"
#include "fuzz/common/fuzz_support.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"

namespace {

using qd::fuzz::Hex;

constexpr std::size_t kTailSize = 2;

std::string Float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t tail[kTailSize] = {0, 0};
  const std::size_t body = size >= kTailSize ? size - kTailSize : 0;
  for (std::size_t i = 0; i < kTailSize && body + i < size; ++i) tail[i] = data[body + i];
  const int bits = (tail[0] & 1) ? 8 : 4;
  const std::uint64_t rows = 1 + (tail[1] & 7);
  const std::uint64_t per_row = 1 + ((tail[1] >> 3) & 7);
  const std::uint64_t columns = 32 * per_row;
  const std::size_t block_bytes = bits == 4 ? 18 : 34;

  qd::fuzz::InputReader in(data, body);
  std::vector<std::uint8_t> blocks(rows * per_row * block_bytes);
  for (std::size_t b = 0; b < rows * per_row; ++b) {
    std::uint8_t* block = blocks.data() + b * block_bytes;
    std::uint16_t scale = in.U16();
    if ((scale & 0x7C00) == 0x7C00) scale &= static_cast<std::uint16_t>(~0x0400);
    block[0] = static_cast<std::uint8_t>(scale & 0xff);
    block[1] = static_cast<std::uint8_t>(scale >> 8);
    for (std::size_t i = 2; i < block_bytes; ++i) block[i] = in.U8();
  }
  std::vector<float> x(columns);
  for (float& v : x) {
    std::uint32_t b = in.U32();
    std::uint32_t e = (b >> 23) & 0xff;
    if (e > 146) e %= 147;
    b = (b & 0x807fffffu) | (e << 23);
    v = std::bit_cast<float>(b);
  }

  std::vector<float> truth(rows);
  if (!qd::oracle::MatvecRbq(bits, {blocks.data(), blocks.size()}, rows, columns, x.data(),
                             truth.data())) {
    qd::fuzz::Diverge("DIFF:rbq_matvec:verdict:oracle", "MatvecRbq refused rows=" +
                                                            std::to_string(rows) + " columns=" +
                                                            std::to_string(columns));
  }

  // S per row, in binary64.
  const double u = std::ldexp(1.0, -24);
  const double m = static_cast<double>(columns + 2);
  const double gamma = m * u / (1.0 - m * u);
  const double underflow = 2.0 * m * std::ldexp(1.0, -149);
  std::vector<double> magnitude(rows, 0.0);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t k = 0; k < per_row; ++k) {
      const std::uint8_t* block = blocks.data() + (r * per_row + k) * block_bytes;
      const float scale = qd::oracle::HalfToFloat(static_cast<std::uint16_t>(block[0] | (block[1] << 8)));
      for (int n = 0; n < 32; ++n) {
        const int q = bits == 4 ? ((((block[2 + n / 2] >> (4 * (n % 2))) & 0x0f) ^ 8) - 8)
                                : static_cast<std::int8_t>(block[2 + n]);
        const float w = static_cast<float>(q) * scale;  // exact
        magnitude[r] += std::fabs(static_cast<double>(w) * static_cast<double>(x[k * 32 + n]));
      }
    }
  }

  std::vector<float> y(rows);
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    std::fill(y.begin(), y.end(), std::nanf(""));
    qd::codec::RbqMatvec(bits, blocks.data(), rows, columns, x.data(), y.data(), kernel);
    for (std::uint64_t r = 0; r < rows; ++r) {
      const double s = magnitude[r];
      if (!std::isfinite(s) || s > std::ldexp(1.0, 100)) continue;
      const double bound = 2.0 * gamma * s + underflow;
      const double diff = std::fabs(static_cast<double>(y[r]) - static_cast<double>(truth[r]));
      if (!(diff <= bound)) {
        qd::fuzz::Diverge(
            "DIFF:rbq_matvec:bound:" + std::string(qd::codec::KernelName(kernel)),
            "row " + std::to_string(r) + " bits=" + std::to_string(bits) + " columns=" +
                std::to_string(columns) + ": codec " + Float(y[r]) + " (" +
                Hex(std::bit_cast<std::uint32_t>(y[r]), 8) + ") oracle " + Float(truth[r]) +
                " (" + Hex(std::bit_cast<std::uint32_t>(truth[r]), 8) + ") |diff| " +
                Float(diff) + " > bound " + Float(bound) + " (S " + Float(s) + ")");
      }
    }
  }
  return 0;
}
