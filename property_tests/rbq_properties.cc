// rbq_properties.cc: properties of the Q4B32 / Q8B32 codec (every kernel) and
// oracle, with every expected value derived in the test from the spec text
// (specs/002_a5b0561d4b728a5e.txt): hand-packed blocks, scales computed with
// the tests' own binary16 arithmetic (gen/half.h), and error bounds derived
// below. Nothing the codec produced is ever used as the expected value.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"
#include "oracles/rbq.h"
#include "property_tests/gen/bounds.h"
#include "property_tests/gen/files.h"
#include "property_tests/gen/half.h"
#include "property_tests/gen/rc_gen.h"

namespace {

using qd::codec::Kernel;
using qdtest::HalfValue;

constexpr char kFile[] = "property.safetensors";

int Levels(int bits) { return bits == 4 ? 7 : 127; }
int Lowest(int bits) { return bits == 4 ? -8 : -128; }

std::string Hex(std::uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

std::string FloatText(float f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a (%s)", static_cast<double>(f),
                Hex(qdtest::FloatBits(f), 8).c_str());
  return buf;
}

// A row-major matrix of blocks packed by hand, with its expected decoding.
struct PackedMatrix {
  int bits = 4;
  std::uint64_t rows = 0;
  std::uint64_t columns = 0;
  std::vector<std::uint16_t> scales;  // one per block, row-major
  std::vector<int> codes;             // one per weight, row-major
  std::vector<std::uint8_t> blocks;
  std::vector<float> expected;        // float(q) * scale, position by position
};

PackedMatrix Pack(int bits, std::uint64_t rows, std::uint64_t blocks_per_row,
                  const std::vector<std::uint16_t>& scales, const std::vector<int>& codes) {
  PackedMatrix m;
  m.bits = bits;
  m.rows = rows;
  m.columns = 32 * blocks_per_row;
  m.scales = scales;
  m.codes = codes;
  for (std::size_t b = 0; b < scales.size(); ++b) {
    const std::vector<int> block_codes(codes.begin() + static_cast<std::ptrdiff_t>(32 * b),
                                       codes.begin() + static_cast<std::ptrdiff_t>(32 * b + 32));
    const std::vector<std::uint8_t> block = qdtest::PackBlock(bits, scales[b], block_codes);
    m.blocks.insert(m.blocks.end(), block.begin(), block.end());
    // Blocks are stored row by row, left to right: block b holds weights
    // 32b .. 32b+31 of the row-major matrix. weight = q * half_to_f32(scale).
    for (int n = 0; n < 32; ++n) {
      m.expected.push_back(static_cast<float>(codes[32 * b + n]) * HalfValue(scales[b]));
    }
  }
  return m;
}

// "" when got equals m.expected bit for bit; else the first difference.
std::string FirstMismatch(const PackedMatrix& m, const std::vector<float>& got,
                          const std::string& who) {
  if (got.size() != m.expected.size()) {
    return who + ": " + std::to_string(got.size()) + " values, expected " +
           std::to_string(m.expected.size());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!qdtest::SameFloat(got[i], m.expected[i])) {
      const std::size_t row = i / m.columns, block = (i % m.columns) / 32, n = i % 32;
      const std::size_t b = i / 32;
      return who + ": weight " + std::to_string(i) + " (row " + std::to_string(row) +
             ", block " + std::to_string(block) + ", position " + std::to_string(n) +
             "): q=" + std::to_string(m.codes[i]) + " scale=" + Hex(m.scales[b], 4) +
             " payload byte=" +
             Hex(m.blocks[b * qdtest::BlockSize(m.bits) + 2 + (m.bits == 4 ? n / 2 : n)], 2) +
             " expected " + FloatText(m.expected[i]) + " got " + FloatText(got[i]);
    }
  }
  return "";
}

std::string DescribeOutcome(const qd::Outcome& o) {
  std::string s = o.refused ? "refused:" : "accepted:";
  for (const qd::Finding& f : o.findings) {
    s += " " + f.rule + (f.severity == qd::Severity::kError ? "(error" : "(warning") +
         " tensor=" + f.tensor + " row=" + std::to_string(f.row) +
         " block=" + std::to_string(f.block) + ")";
  }
  return s;
}

// Decodes m with every codec kernel (raw blocks and as a file) and with the
// oracle (as a file) and compares each with the spec's value.
void CheckDecodes(const PackedMatrix& m) {
  for (Kernel k : qd::codec::AvailableKernels()) {
    const std::string kernel(qd::codec::KernelName(k));
    std::vector<float> out(m.rows * m.columns, -1.0f);
    qd::codec::RbqDequantize(m.bits, m.blocks.data(), m.rows, m.columns, out.data(), k);
    const std::string raw = FirstMismatch(m, out, "codec RbqDequantize/" + kernel);
    if (!raw.empty()) RC_FAIL(raw);
  }
  const std::vector<std::uint8_t> file = qdtest::RbqFile(m.bits, m.rows, m.columns, m.blocks);
  const qd::ByteView view{file.data(), file.size()};
  std::vector<std::pair<std::string, qd::Outcome>> outcomes;
  for (Kernel k : qd::codec::AvailableKernels()) {
    outcomes.emplace_back("codec DecodeRbqFile/" + std::string(qd::codec::KernelName(k)),
                          qd::codec::DecodeRbqFile(view, kFile, k));
  }
  outcomes.emplace_back("oracle ReadRbqFile", qd::oracle::ReadRbqFile(view, kFile));
  for (const auto& [who, o] : outcomes) {
    if (o.refused || !o.findings.empty() || o.tensors.size() != 1) {
      RC_FAIL(who + " should accept the file with no finding and one tensor: " +
              DescribeOutcome(o));
    }
    RC_ASSERT(o.tensors[0].name == "w");
    RC_ASSERT(o.tensors[0].shape == (std::vector<std::uint64_t>{m.rows, m.columns}));
    const std::string diff = FirstMismatch(m, o.tensors[0].values, who);
    if (!diff.empty()) RC_FAIL(diff);
  }
}

void DecodeProperty(int bits) {
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto scales = *rc::gen::container<std::vector<std::uint16_t>>(
      rows * blocks_per_row, qdtest::gen::FiniteHalf());
  const auto codes = *qdtest::gen::Codes(bits, rows * blocks_per_row * 32);
  CheckDecodes(Pack(bits, rows, blocks_per_row, scales, codes));
}

// ---- quantizers ---------------------------------------------------------------

using Quantizer = bool (*)(int, const float*, std::uint64_t, std::uint64_t,
                           std::vector<std::uint8_t>*, qd::Finding*);

struct NamedQuantizer {
  const char* name;
  Quantizer quantize;
};

const NamedQuantizer kQuantizers[] = {
    {"codec RbqQuantize", &qd::codec::RbqQuantize},
    {"oracle QuantizeRbq", &qd::oracle::QuantizeRbq},
};

// The spec's scale of one block: f32_to_f16(max|w| / levels), the division in
// binary32, the rounding by the tests' own nearest-half search.
std::uint16_t SpecScale(int bits, const float* w) {
  float max_abs = 0.0f;
  for (int k = 0; k < 32; ++k) max_abs = std::fmax(max_abs, std::fabs(w[k]));
  return qdtest::NearestHalf(max_abs / static_cast<float>(Levels(bits)));
}

// Checks one quantized block against the spec:
//   scale = f32_to_f16(max|w| / levels); q = round(w / f32(scale)), clamped.
// Error bound for a value that needs no clamping: with r = fl(w / s) =
// (w / s)(1 + d), |d| <= 2^-24, and |q - r| <= 1/2,
//   |w - q s| <= s |w/s - r| + s |r - q| <= |w| 2^-24 + s / 2.
// Clamp case: r >= levels gives q = levels, r <= lowest gives q = lowest.
// A normal scale is within a relative 2^-11 of max|w| / levels, so the
// largest weight lands within levels * 2^-11 < 1/2 of +-levels: it gets
// exactly +-levels and no code is clamped (in particular no -8 / -128).
std::string CheckBlock(int bits, const float* w, const std::uint8_t* block,
                       std::uint16_t want_scale) {
  const std::uint16_t scale_bits = qdtest::BlockScale(block);
  if (scale_bits != want_scale) {
    return "scale " + Hex(scale_bits, 4) + ", the spec gives " + Hex(want_scale, 4);
  }
  const float s = HalfValue(scale_bits);
  float max_abs = 0.0f;
  for (int k = 0; k < 32; ++k) max_abs = std::fmax(max_abs, std::fabs(w[k]));
  if (max_abs == 0.0f) {  // "A block of zeros stores a scale of 0.0 and a payload of zero."
    for (std::size_t i = 0; i < qdtest::BlockSize(bits); ++i) {
      if (block[i] != 0) return "a block of zeros has byte " + std::to_string(i) + " = " +
                                Hex(block[i], 2);
    }
    return "";
  }
  if (s == 0.0f) return "";  // the scale underflows: every weight decodes to 0 whatever q
  const bool normal = ((scale_bits >> 10) & 0x1f) != 0;
  for (int k = 0; k < 32; ++k) {
    const int q = qdtest::UnpackCode(bits, block, k);
    const float r = w[k] / s;
    const std::string where = "weight " + std::to_string(k) + " = " + FloatText(w[k]) +
                              " scale " + FloatText(s) + " w/s = " + FloatText(r) +
                              " q = " + std::to_string(q);
    if (r >= static_cast<float>(Levels(bits))) {
      if (q != Levels(bits)) return where + ": should clamp to " + std::to_string(Levels(bits));
    } else if (r <= static_cast<float>(Lowest(bits))) {
      if (q != Lowest(bits)) return where + ": should clamp to " + std::to_string(Lowest(bits));
    } else {
      if (std::fabs(static_cast<double>(q) - static_cast<double>(r)) > 0.5) {
        return where + ": q is not w/s rounded";
      }
      const double err = std::fabs(static_cast<double>(w[k]) - static_cast<double>(q) * s);
      const double bound = s / 2.0 + std::fabs(static_cast<double>(w[k])) * std::ldexp(1.0, -24);
      if (err > bound) return where + ": |w - q s| = " + std::to_string(err) + " > bound";
    }
    if (normal) {
      if (q < -Levels(bits)) return where + ": a normal scale never needs the lowest code";
      if (std::fabs(w[k]) == max_abs && q != (w[k] < 0 ? -Levels(bits) : Levels(bits))) {
        return where + ": the largest weight of a block with a normal scale must get +-levels";
      }
    }
  }
  return "";
}

// True when some weight's w / s reaches the clamp (a subnormal scale, whose
// rounding error is large, makes it happen).
bool AnyClamp(int bits, const std::vector<float>& w) {
  for (std::size_t b = 0; b < w.size() / 32; ++b) {
    const std::uint16_t scale = SpecScale(bits, w.data() + 32 * b);
    const float s = HalfValue(scale);
    if (!qdtest::HalfIsFinite(scale) || s == 0.0f) continue;
    for (int k = 0; k < 32; ++k) {
      const float r = w[32 * b + k] / s;
      if (r > static_cast<float>(Levels(bits)) + 0.5f || r < static_cast<float>(Lowest(bits)) - 0.5f) {
        return true;
      }
    }
  }
  return false;
}

struct BlockFailure {
  bool any = false;
  std::int64_t row = -1, block = -1;
};

// First block (row-major) whose spec scale is not a finite binary16.
BlockFailure FirstOverflow(int bits, const std::vector<float>& w, std::uint64_t blocks_per_row) {
  BlockFailure f;
  for (std::size_t b = 0; b < w.size() / 32; ++b) {
    if (!qdtest::HalfIsFinite(SpecScale(bits, w.data() + 32 * b))) {
      f.any = true;
      f.row = static_cast<std::int64_t>(b / blocks_per_row);
      f.block = static_cast<std::int64_t>(b % blocks_per_row);
      return f;
    }
  }
  return f;
}

// ---- matrix vector product --------------------------------------------------
// The bound and its derivation: gen/bounds.h (MatvecBound).

struct MatvecCase {
  PackedMatrix m;
  std::vector<float> x;
};

MatvecCase AMatvecCase() {
  const int bits = *rc::gen::element(4, 8);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 5);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 9);
  const auto scales = *rc::gen::container<std::vector<std::uint16_t>>(
      rows * blocks_per_row, qdtest::gen::FiniteHalf());
  const auto codes = *qdtest::gen::Codes(bits, rows * blocks_per_row * 32);
  MatvecCase c{Pack(bits, rows, blocks_per_row, scales, codes), {}};
  c.x = *rc::gen::container<std::vector<float>>(c.m.columns, qdtest::gen::Input());
  return c;
}

std::vector<float> OracleMatvec(const PackedMatrix& m, const std::vector<float>& x) {
  std::vector<float> y(m.rows, -7.0f);
  const bool ok = qd::oracle::MatvecRbq(m.bits, qd::ByteView{m.blocks.data(), m.blocks.size()},
                                        m.rows, m.columns, x.data(), y.data());
  RC_ASSERT(ok);
  return y;
}

void AssertWithinBound(const PackedMatrix& m, const std::vector<float>& x, const float* a,
                       const float* b, const std::string& a_name, const std::string& b_name) {
  for (std::uint64_t r = 0; r < m.rows; ++r) {
    const std::vector<float> w_row(m.expected.begin() + static_cast<std::ptrdiff_t>(r * m.columns),
                                   m.expected.begin() + static_cast<std::ptrdiff_t>((r + 1) * m.columns));
    const double bound = qdtest::MatvecBound(w_row.data(), x.data(), m.columns);
    const double diff = std::fabs(static_cast<double>(a[r]) - static_cast<double>(b[r]));
    if (!std::isfinite(a[r]) || !std::isfinite(b[r]) || !(diff <= bound)) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "row %llu: %s %a vs %s %a, |diff| %a > bound %a",
                    static_cast<unsigned long long>(r), a_name.c_str(), static_cast<double>(a[r]),
                    b_name.c_str(), static_cast<double>(b[r]), diff, bound);
      RC_FAIL(std::string(buf));
    }
  }
}

}  // namespace

// ---- decoding: nibble order, sign extension, bytes ----------------------------

// For codes q in -8..7 and any finite scale: the low nibble of payload byte j
// is position 2j, the high nibble position 2j+1, each two's complement, and
// the weight is float(q) * scale, bit for bit, in every kernel and the oracle.
RC_GTEST_PROP(RbqProperties, Q4NibbleOrderAndSignExtension, ()) { DecodeProperty(4); }

// Q8B32: payload byte k is position k, a two's complement byte.
RC_GTEST_PROP(RbqProperties, Q8SignedBytes, ()) { DecodeProperty(8); }

// A non-finite scale (exponent all ones) anywhere refuses the file with
// RBQ-005 naming the first such block in row, block order and its byte offset.
RC_GTEST_PROP(RbqProperties, NonFiniteScaleRefusedAtFirstBlock, ()) {
  const int bits = *rc::gen::element(4, 8);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 4);
  const std::uint64_t count = rows * blocks_per_row;
  auto scales = *rc::gen::container<std::vector<std::uint16_t>>(count, qdtest::gen::FiniteHalf());
  const auto bad = *rc::gen::nonEmpty(rc::gen::container<std::vector<std::uint64_t>>(
      rc::gen::inRange<std::uint64_t>(0, count)));
  std::uint64_t first = count;
  for (std::uint64_t b : bad) {
    scales[b] = *qdtest::gen::NonFiniteHalf();
    first = std::min(first, b);
  }
  const auto codes = *qdtest::gen::Codes(bits, count * 32);
  const PackedMatrix m = Pack(bits, rows, blocks_per_row, scales, codes);
  const std::vector<std::uint8_t> file = qdtest::RbqFile(bits, rows, m.columns, m.blocks);
  const qd::ByteView view{file.data(), file.size()};
  const std::int64_t want_offset =
      static_cast<std::int64_t>(qdtest::DataStart(file) + first * qdtest::BlockSize(bits));
  const std::vector<std::pair<std::string, qd::Outcome>> outcomes = {
      {"codec DecodeRbqFile", qd::codec::DecodeRbqFile(view, kFile)},
      {"oracle ReadRbqFile", qd::oracle::ReadRbqFile(view, kFile)},
  };
  for (const auto& [who, o] : outcomes) {
    const bool ok = o.refused && !o.findings.empty() && o.findings.back().rule == "RBQ-005" &&
                    o.findings.back().severity == qd::Severity::kError &&
                    o.findings.back().tensor == "w" &&
                    o.findings.back().row == static_cast<std::int64_t>(first / blocks_per_row) &&
                    o.findings.back().block == static_cast<std::int64_t>(first % blocks_per_row) &&
                    o.findings.back().byte_offset == want_offset;
    if (!ok) {
      RC_FAIL(who + " should refuse with RBQ-005 at row " + std::to_string(first / blocks_per_row) +
              " block " + std::to_string(first % blocks_per_row) + " offset " +
              std::to_string(want_offset) + ": " + DescribeOutcome(o) +
              (o.findings.empty() ? "" : " offset=" + std::to_string(o.findings.back().byte_offset)));
    }
  }
}

// ---- quantizers -----------------------------------------------------------------

// "A block of zeros stores a scale of 0.0 and a payload of zero", whatever
// the other blocks of the row hold, for both quantizers.
RC_GTEST_PROP(RbqProperties, ZeroBlocksQuantizeToZeroBytes, ()) {
  const int bits = *rc::gen::element(4, 8);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 4);
  const std::uint64_t count = rows * blocks_per_row;
  const auto zero = *rc::gen::container<std::vector<bool>>(count, rc::gen::arbitrary<bool>());
  std::vector<float> w;
  for (std::uint64_t b = 0; b < count; ++b) {
    const auto block = zero[b]
        ? *rc::gen::container<std::vector<float>>(32, rc::gen::element(0.0f, -0.0f))
        : *rc::gen::container<std::vector<float>>(32, qdtest::gen::ScaledFloat(-6, 6));
    w.insert(w.end(), block.begin(), block.end());
  }
  for (const NamedQuantizer& q : kQuantizers) {
    std::vector<std::uint8_t> out;
    qd::Finding error;
    RC_ASSERT(q.quantize(bits, w.data(), rows, 32 * blocks_per_row, &out, &error));
    RC_ASSERT(out.size() == count * qdtest::BlockSize(bits));
    for (std::uint64_t b = 0; b < count; ++b) {
      if (!zero[b]) continue;
      for (std::size_t i = 0; i < qdtest::BlockSize(bits); ++i) {
        if (out[b * qdtest::BlockSize(bits) + i] != 0) {
          RC_FAIL(std::string(q.name) + ": zero block " + std::to_string(b) + " has byte " +
                  std::to_string(i) + " = " + Hex(out[b * qdtest::BlockSize(bits) + i], 2));
        }
      }
    }
  }
}

// Scale == f16(max|w| / levels) bit for bit, every code is w / scale rounded
// (or clamped), within the derived bound; an overflowing scale is RBQ-005 at
// the first such block. Both quantizers.
RC_GTEST_PROP(RbqProperties, QuantizerFollowsTheScaleRule, ()) {
  const int bits = *rc::gen::element(4, 8);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 4);
  const std::vector<float> w = *qdtest::gen::WeightMatrix(rows, blocks_per_row);
  const BlockFailure overflow = FirstOverflow(bits, w, blocks_per_row);
  RC_TAG(overflow.any ? "scale overflows" : "quantizable");
  RC_CLASSIFY(!overflow.any && AnyClamp(bits, w), "clamp case");
  for (const NamedQuantizer& q : kQuantizers) {
    std::vector<std::uint8_t> out;
    qd::Finding error;
    const bool ok = q.quantize(bits, w.data(), rows, 32 * blocks_per_row, &out, &error);
    if (overflow.any) {
      if (ok || error.rule != "RBQ-005" || error.row != overflow.row ||
          error.block != overflow.block) {
        RC_FAIL(std::string(q.name) + " should refuse with RBQ-005 at row " +
                std::to_string(overflow.row) + " block " + std::to_string(overflow.block) +
                ", got ok=" + std::to_string(ok) + " rule=" + error.rule + " row=" +
                std::to_string(error.row) + " block=" + std::to_string(error.block));
      }
      continue;
    }
    if (!ok) RC_FAIL(std::string(q.name) + " refused: " + error.rule + " " + error.message);
    RC_ASSERT(out.size() == rows * blocks_per_row * qdtest::BlockSize(bits));
    for (std::uint64_t b = 0; b < rows * blocks_per_row; ++b) {
      const float* wb = w.data() + 32 * b;
      const std::string why = CheckBlock(bits, wb, out.data() + b * qdtest::BlockSize(bits),
                                         SpecScale(bits, wb));
      if (!why.empty()) {
        RC_FAIL(std::string(q.name) + " Q" + std::to_string(bits) + " block " +
                std::to_string(b) + ": " + why);
      }
    }
  }
}

// quantize(dequantize(block)) == block for canonical blocks: a positive finite
// scale, codes in -levels..levels with some |q| == levels. Then max|w| / levels
// is the scale exactly and every w / scale is its code exactly.
RC_GTEST_PROP(RbqProperties, QuantizeOfDequantizeIsIdentityOnCanonicalBlocks, ()) {
  const int bits = *rc::gen::element(4, 8);
  const int levels = Levels(bits);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 3);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 4);
  const std::uint64_t count = rows * blocks_per_row;
  const auto scales =
      *rc::gen::container<std::vector<std::uint16_t>>(count, qdtest::gen::PositiveHalf());
  auto codes = *rc::gen::container<std::vector<int>>(count * 32, rc::gen::inRange(-levels, levels + 1));
  for (std::uint64_t b = 0; b < count; ++b) {
    const int at = *rc::gen::inRange(0, 32);
    codes[32 * b + at] = *rc::gen::element(levels, -levels);
  }
  const PackedMatrix m = Pack(bits, rows, blocks_per_row, scales, codes);
  for (const NamedQuantizer& q : kQuantizers) {
    std::vector<std::uint8_t> out;
    qd::Finding error;
    if (!q.quantize(bits, m.expected.data(), rows, m.columns, &out, &error)) {
      RC_FAIL(std::string(q.name) + " refused a canonical block: " + error.rule);
    }
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
      if (out.size() != m.blocks.size() || out[i] != m.blocks[i]) {
        RC_FAIL(std::string(q.name) + ": byte " + std::to_string(i) + " (block " +
                std::to_string(i / qdtest::BlockSize(bits)) + ") is " +
                (out.size() == m.blocks.size() ? Hex(out[i], 2) : std::string("missing")) +
                ", the hand-packed block has " + Hex(m.blocks[i], 2));
      }
    }
  }
}

// The codec's quantizer writes the oracle's bytes for any finite weights
// (subnormals and scale overflow included), and both refuse the same way on
// non-finite weights, overflowing scales and ragged columns.
RC_GTEST_PROP(RbqProperties, CodecQuantizerMatchesOracle, ()) {
  const int bits = *rc::gen::element(4, 8);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 4);
  std::vector<float> w = *qdtest::gen::WeightMatrix(rows, blocks_per_row);
  std::uint64_t columns = 32 * blocks_per_row;
  const int twist = *rc::gen::inRange(0, 10);
  if (twist == 0) {  // a non-finite weight somewhere
    w[*rc::gen::inRange<std::size_t>(0, w.size())] =
        *rc::gen::element(INFINITY, -INFINITY, NAN);
    RC_TAG("non-finite weight");
  } else if (twist == 1) {  // columns not a multiple of 32
    columns -= *rc::gen::inRange<std::uint64_t>(1, 32);
    w.resize(rows * columns);
    RC_TAG("ragged columns");
  }
  std::vector<std::uint8_t> codec_out, oracle_out;
  qd::Finding codec_error, oracle_error;
  RC_CLASSIFY(twist > 1 && FirstOverflow(bits, w, blocks_per_row).any, "scale overflows");
  const bool codec_ok = qd::codec::RbqQuantize(bits, w.data(), rows, columns, &codec_out, &codec_error);
  const bool oracle_ok = qd::oracle::QuantizeRbq(bits, w.data(), rows, columns, &oracle_out, &oracle_error);
  RC_ASSERT(codec_ok == oracle_ok);
  if (twist == 1) RC_ASSERT(codec_error.rule == std::string("RBQ-003"));
  if (!codec_ok) {
    RC_ASSERT(codec_error.rule == oracle_error.rule);
    RC_ASSERT(codec_error.row == oracle_error.row);
    RC_ASSERT(codec_error.block == oracle_error.block);
    return;
  }
  RC_ASSERT(codec_out.size() == oracle_out.size());
  for (std::size_t i = 0; i < codec_out.size(); ++i) {
    if (codec_out[i] != oracle_out[i]) {
      RC_FAIL("Q" + std::to_string(bits) + " byte " + std::to_string(i) + " (block " +
              std::to_string(i / qdtest::BlockSize(bits)) + "): codec " + Hex(codec_out[i], 2) +
              " oracle " + Hex(oracle_out[i], 2));
    }
  }
}

// ---- matrix vector product ------------------------------------------------------

// Every kernel against the oracle, within the bound derived in gen/bounds.h.
RC_GTEST_PROP(RbqProperties, MatvecEveryKernelWithinBoundOfOracle, ()) {
  const MatvecCase c = AMatvecCase();
  const std::vector<float> want = OracleMatvec(c.m, c.x);
  for (Kernel k : qd::codec::AvailableKernels()) {
    std::vector<float> y(c.m.rows, -7.0f);
    qd::codec::RbqMatvec(c.m.bits, c.m.blocks.data(), c.m.rows, c.m.columns, c.x.data(), y.data(), k);
    AssertWithinBound(c.m, c.x, y.data(), want.data(),
                      "codec " + std::string(qd::codec::KernelName(k)), "oracle");
  }
}

// The codec's scalar kernel against dequantize-then-dot (a plain binary32 dot
// product of the codec's dequantized row), within the same bound.
RC_GTEST_PROP(RbqProperties, MatvecScalarWithinBoundOfDequantizeThenDot, ()) {
  const MatvecCase c = AMatvecCase();
  std::vector<float> w(c.m.rows * c.m.columns);
  qd::codec::RbqDequantize(c.m.bits, c.m.blocks.data(), c.m.rows, c.m.columns, w.data(),
                           Kernel::kScalar);
  std::vector<float> dot(c.m.rows);
  for (std::uint64_t r = 0; r < c.m.rows; ++r) {
    float sum = 0.0f;
    for (std::uint64_t j = 0; j < c.m.columns; ++j) {
      const float product = w[r * c.m.columns + j] * c.x[j];
      sum = sum + product;
    }
    dot[r] = sum;
  }
  std::vector<float> y(c.m.rows, -7.0f);
  qd::codec::RbqMatvec(c.m.bits, c.m.blocks.data(), c.m.rows, c.m.columns, c.x.data(), y.data(),
                       Kernel::kScalar);
  AssertWithinBound(c.m, c.x, y.data(), dot.data(), "codec scalar", "dequantize-then-dot");
}

// With power-of-two scales and small integer inputs every intermediate is an
// integer (times the scale) below 2^24, so every evaluation order is exact:
// every kernel and the oracle must return the exact product, computed here in
// 64-bit integers.
RC_GTEST_PROP(RbqProperties, MatvecExactOnSmallIntegers, ()) {
  const int bits = *rc::gen::element(4, 8);
  const auto rows = *rc::gen::inRange<std::uint64_t>(1, 5);
  const auto blocks_per_row = *rc::gen::inRange<std::uint64_t>(1, 9);
  const std::uint64_t count = rows * blocks_per_row;
  // 0.25, 0.5, 1, 2, 4: |row sum| <= 8 * 32 * 128 * 16 * 4 = 2^21.
  const auto scales = *rc::gen::container<std::vector<std::uint16_t>>(
      count, rc::gen::elementOf(std::vector<std::uint16_t>{0x3400, 0x3800, 0x3c00, 0x4000, 0x4400}));
  const auto codes = *qdtest::gen::Codes(bits, count * 32);
  const PackedMatrix m = Pack(bits, rows, blocks_per_row, scales, codes);
  const auto xi = *rc::gen::container<std::vector<int>>(m.columns, rc::gen::inRange(-16, 17));
  std::vector<float> x(xi.begin(), xi.end());
  std::vector<double> exact(rows, 0.0);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t b = 0; b < blocks_per_row; ++b) {
      std::int64_t dot = 0;
      for (int n = 0; n < 32; ++n) {
        dot += static_cast<std::int64_t>(codes[(r * blocks_per_row + b) * 32 + n]) * xi[b * 32 + n];
      }
      exact[r] += static_cast<double>(dot) * qdtest::HalfExact(scales[r * blocks_per_row + b]);
    }
  }
  std::vector<std::pair<std::string, std::vector<float>>> results;
  results.emplace_back("oracle", OracleMatvec(m, x));
  for (Kernel k : qd::codec::AvailableKernels()) {
    std::vector<float> y(rows, -7.0f);
    qd::codec::RbqMatvec(bits, m.blocks.data(), rows, m.columns, x.data(), y.data(), k);
    results.emplace_back("codec " + std::string(qd::codec::KernelName(k)), y);
  }
  for (const auto& [who, y] : results) {
    for (std::uint64_t r = 0; r < rows; ++r) {
      if (static_cast<double>(y[r]) != exact[r]) {
        RC_FAIL(who + " row " + std::to_string(r) + ": " + std::to_string(y[r]) +
                ", exact " + std::to_string(exact[r]));
      }
    }
  }
}
