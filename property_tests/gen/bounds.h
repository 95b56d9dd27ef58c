// bounds.h: the derived tolerance between two binary32 evaluations of one
// row of a Q4B32 / Q8B32 matrix vector product (DESIGN.md: tolerances only
// where the summation order differs, each bound derived and stated).
//
//   EXPECT_LE(std::fabs(double(a) - double(b)), qdtest::MatvecBound(w, x, columns));
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_BOUNDS_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_BOUNDS_H_

#include <cmath>
#include <cstdint>

namespace qdtest {

// Bound for two binary32 evaluations a, b of y = sum_j w_j x_j over one row of
// `columns` weights, w_j = q_j * s_(block of j).
//  * w_j is exact in binary32 (|q| <= 128 has at most 8 significant bits, a
//    binary16 scale at most 11, the product's exponent is >= -24), so every
//    evaluation is a rounding of the same exact sum; a dequantized weight
//    (q * s in binary32) is that same w_j.
//  * Count the roundings on the path of one term w_j x_j (standard model,
//    fl(a op b) = (a op b)(1 + d), |d| <= u = 2^-24; Higham, "Accuracy and
//    Stability of Numerical Algorithms", 2nd ed., section 3.1): the spec's
//    loop (oracle, scalar kernel) takes 1 for q x, at most 31 in the block
//    accumulator, 1 for accumulator * scale and at most blocks-1 in the row
//    sum: 32 + blocks. The 8-lane AVX2+FMA kernel takes at most 4 in a lane,
//    blocks in the fused row accumulation and 3 in the horizontal sum. A plain
//    dequantize-then-dot loop takes 1 + (columns - 1). All are <= m =
//    columns + 2, so |fl - y| <= gamma(m) sum|w_j x_j| with gamma(m) = m u /
//    (1 - m u) (Higham, Lemma 3.1: prod (1 + d_i)^(+-1) = 1 + theta, |theta| <=
//    gamma(m)).
//  * Underflow: a product (or fused product) that rounds in the subnormal
//    range has an absolute error <= 2^-150 instead (sums that underflow are
//    exact). A row makes at most columns + blocks <= m such products per
//    evaluation, each error later scaled by at most (1 + u)^m < 2, so each
//    evaluation adds <= m 2^-149.
//  * By the triangle inequality through the exact y:
//      |a - b| <= 2 gamma(m) sum|w_j x_j| + 2 m 2^-149.
// sum|w_j x_j| is computed in binary64: each product is exact (19 + 24 bits),
// the sum of n <= 2^12 non-negative terms is within a relative n 2^-53 <=
// 2^-41 of the exact sum and is enlarged by 2^-40 to stay an upper bound.
inline double MatvecBound(const float* w_row, const float* x, std::uint64_t columns) {
  double sum_abs = 0.0;
  for (std::uint64_t j = 0; j < columns; ++j) {
    sum_abs += std::fabs(static_cast<double>(w_row[j]) * static_cast<double>(x[j]));
  }
  sum_abs *= 1.0 + std::ldexp(1.0, -40);
  const double m = static_cast<double>(columns) + 2.0;
  const double u = std::ldexp(1.0, -24);
  const double gamma = m * u / (1.0 - m * u);
  return 2.0 * gamma * sum_abs + 2.0 * m * std::ldexp(1.0, -149);
}

}  // namespace qdtest

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_BOUNDS_H_
