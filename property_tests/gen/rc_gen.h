// rc_gen.h: RapidCheck generators shared by the property tests.
//
// Values quantizers, kernels and readers meet: finite binary16 scales of every
// class (zero, -0, subnormal, normal, largest), codes of both widths, binary32
// weights from every region (subnormal, near the binary16 overflow of the
// scale, arbitrary bit patterns), and byte mutations of a file's header.
//
//   const std::uint16_t scale = *qdtest::gen::FiniteHalf();
//   const std::vector<float> w = *qdtest::gen::WeightRow(4, 2);
#ifndef QUANTDIFF_PROPERTY_TESTS_GEN_RC_GEN_H_
#define QUANTDIFF_PROPERTY_TESTS_GEN_RC_GEN_H_

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "property_tests/gen/half.h"

namespace qdtest::gen {

// Any finite binary16 bit pattern, with the class boundaries made likely.
inline rc::Gen<std::uint16_t> FiniteHalf() {
  return rc::gen::weightedOneOf<std::uint16_t>({
      {6, rc::gen::map(rc::gen::arbitrary<std::uint16_t>(),
                       [](std::uint16_t h) {
                         // exponent all ones -> clear its top bit (still finite)
                         return HalfIsFinite(h) ? h : static_cast<std::uint16_t>(h & ~0x4000u);
                       })},
      {2, rc::gen::elementOf(std::vector<std::uint16_t>{0x0000, 0x8000, 0x0001, 0x8001, 0x03ff,
                                                        0x0400, 0x3c00, 0xbc00, 0x3800, 0x7bff,
                                                        0xfbff, 0x3555})},
      // moderate positive normals, the quantizer's usual output
      {2, rc::gen::map(rc::gen::inRange<int>(0x1000, 0x5000),
                       [](int h) { return static_cast<std::uint16_t>(h); })},
  });
}

// A finite, strictly positive binary16 (0x0001..0x7bff): a scale the quantizer
// can produce for a block that is not all zeros.
inline rc::Gen<std::uint16_t> PositiveHalf() {
  return rc::gen::weightedOneOf<std::uint16_t>({
      {6, rc::gen::map(rc::gen::inRange<int>(1, 0x7c00),
                       [](int h) { return static_cast<std::uint16_t>(h); })},
      {1, rc::gen::elementOf(std::vector<std::uint16_t>{0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff})},
  });
}

inline rc::Gen<std::uint16_t> NonFiniteHalf() {
  return rc::gen::map(rc::gen::pair(rc::gen::arbitrary<bool>(), rc::gen::inRange<int>(0, 0x400)),
                      [](std::pair<bool, int> p) {
                        return static_cast<std::uint16_t>((p.first ? 0x8000 : 0) | 0x7c00 | p.second);
                      });
}

// Codes of one width: -8..7 or -128..127.
inline rc::Gen<std::vector<int>> Codes(int bits, std::size_t count) {
  const int low = bits == 4 ? -8 : -128;
  const int high = bits == 4 ? 8 : 128;  // exclusive
  return rc::gen::container<std::vector<int>>(count, rc::gen::inRange(low, high));
}

// A finite binary32 from an arbitrary bit pattern (exponent all ones is
// turned into the largest finite exponent).
inline rc::Gen<float> AnyFiniteFloat() {
  return rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t u) {
    if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x00800000u;
    return BitsFloat(u);
  });
}

// m * 2^e with a 24-bit m and e in [e_low, e_high]: a float of that range.
inline rc::Gen<float> ScaledFloat(int e_low, int e_high) {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange<int>(-(1 << 24) + 1, 1 << 24),
                                    rc::gen::inRange<int>(e_low, e_high + 1)),
                      [](std::pair<int, int> p) {
                        return static_cast<float>(std::ldexp(static_cast<double>(p.first), p.second - 24));
                      });
}

// One weight, from the regions a block quantizer must handle.
inline rc::Gen<float> Weight() {
  return rc::gen::weightedOneOf<float>({
      {8, ScaledFloat(-4, 4)},                         // ordinary weights
      {2, rc::gen::element(0.0f, -0.0f)},              // exact zeros
      {2, ScaledFloat(-30, -20)},                      // near binary16 underflow
      {1, ScaledFloat(-149, -126)},                    // binary32 subnormal or tiny
      {1, ScaledFloat(16, 24)},                        // near the scale's overflow
      {1, AnyFiniteFloat()},                           // anything finite
      {2, rc::gen::map(rc::gen::inRange(-8, 8), [](int q) { return static_cast<float>(q); })},
  });
}

// Blocks of 32 weights of one style each (one style per block makes whole
// zero blocks, whole underflowing blocks and overflowing blocks likely).
inline rc::Gen<std::vector<float>> WeightBlock() {
  return rc::gen::weightedOneOf<std::vector<float>>({
      {6, rc::gen::container<std::vector<float>>(32, Weight())},
      {1, rc::gen::container<std::vector<float>>(32, rc::gen::element(0.0f, -0.0f))},
      {2, rc::gen::container<std::vector<float>>(32, ScaledFloat(-28, -22))},
      // subnormal scales with a large relative rounding error: the clamp case
      {2, rc::gen::container<std::vector<float>>(32, ScaledFloat(-21, -9))},
      {1, rc::gen::container<std::vector<float>>(32, ScaledFloat(17, 24))},
      {1, rc::gen::container<std::vector<float>>(32, AnyFiniteFloat())},
  });
}

// A row-major rows x (32 * blocks_per_row) matrix made of such blocks.
inline rc::Gen<std::vector<float>> WeightMatrix(std::size_t rows, std::size_t blocks_per_row) {
  return rc::gen::map(rc::gen::container<std::vector<std::vector<float>>>(rows * blocks_per_row,
                                                                          WeightBlock()),
                      [](const std::vector<std::vector<float>>& blocks) {
                        std::vector<float> w;
                        for (const auto& b : blocks) w.insert(w.end(), b.begin(), b.end());
                        return w;
                      });
}

// Matrix-vector inputs: moderate magnitudes (no overflow of a row sum),
// zeros and a few tiny values whose products underflow.
inline rc::Gen<float> Input() {
  return rc::gen::weightedOneOf<float>({
      {8, ScaledFloat(-8, 8)},
      {1, rc::gen::element(0.0f, -0.0f, 1.0f, -1.0f)},
      {1, ScaledFloat(-140, -100)},
  });
}

// ---- byte mutations ---------------------------------------------------------

// Tokens that steer a mutated JSON header towards the rules' corners.
inline const std::vector<std::string>& JsonTokens() {
  static const std::vector<std::string> tokens = {
      "\"", "{", "}", "[", "]", ",", ":", " ", "\t", "\n", "\\", "\\u0000", "\\ud800",
      "\\udc00", "\\ud83d\\ude00", "\\\"", "0", "1", "-1", "-0", "01", "1.0", "1e2", "1e400",
      "-1e400", "18446744073709551615", "18446744073709551616", "null", "true", "false", "{}",
      "[]", "\"__metadata__\"", "\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"F32\"",
      "\"F16\"", "\"BF16\"", "\"U8\"", "\"F4\"", "\"Q4B32\"", "\"Q8B32\"", "\"format\"",
      "\"rabbit-q4b32\"", "\"rabbit-q8b32\"", "\"block\"", "\"32\"", "\"scale\"", "\"f16\"",
      std::string("\0", 1), "\xef\xbb\xbf", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
      "\xff", "\xc3\xa9", "\xe4\xb8\xad", "[[[[[[[[", "]]]]]]]]",
  };
  return tokens;
}

// Replacements for one number or one string of the header, so that
// mutations also reach the rules past the JSON grammar (sizes, offsets,
// dtypes, the RBQ declaration).
inline const std::vector<std::string>& NumberTokens() {
  static const std::vector<std::string> tokens = {
      "0", "1", "2", "3", "4", "7", "8", "16", "17", "18", "31", "32", "33", "34", "35", "36",
      "64", "68", "72", "4294967296", "9223372036854775808", "18446744073709551615",
      "18446744073709551616", "1e400", "-1", "1.0", "1e2",
  };
  return tokens;
}

inline const std::vector<std::string>& StringTokens() {
  static const std::vector<std::string> tokens = {
      "\"\"", "\"F32\"", "\"F16\"", "\"BF16\"", "\"F64\"", "\"U8\"", "\"F4\"", "\"F6_E2M3\"",
      "\"Q4B32\"", "\"Q8B32\"", "\"Q4B64\"", "\"rabbit-q4b32\"", "\"rabbit-q8b32\"",
      "\"rabbit-\"", "\"32\"", "\"64\"", "\"f16\"", "\"bf16\"", "\"__metadata__\"",
      "\"format\"", "\"block\"", "\"scale\"", "\"dtype\"", "\"shape\"", "\"data_offsets\"",
      "\"\\u0066ormat\"", "\"a\\u0000b\"",
  };
  return tokens;
}

struct Mutation {
  int kind = 0;             // 0 flip a bit, 1 set a byte, 2 insert bytes, 3 insert a token,
                            // 4 delete bytes, 5 replace a number, 6 replace a string
  std::uint32_t where = 0;  // position, reduced modulo the header length
  std::uint8_t value = 0;   // bit index or byte value
  std::uint32_t length = 1; // bytes to insert or delete
  std::uint32_t token = 0;  // index into JsonTokens()
};

// Byte-level mutations (kinds 0..4) or structural ones (5, 6: the header
// stays JSON, a number or a string changes).
inline rc::Gen<Mutation> AMutation(bool structural) {
  return rc::gen::build<Mutation>(
      rc::gen::set(&Mutation::kind, structural ? rc::gen::element(5, 6) : rc::gen::inRange(0, 5)),
      rc::gen::set(&Mutation::where, rc::gen::arbitrary<std::uint32_t>()),
      rc::gen::set(&Mutation::value, rc::gen::arbitrary<std::uint8_t>()),
      rc::gen::set(&Mutation::length, rc::gen::inRange<std::uint32_t>(1, 5)),
      rc::gen::set(&Mutation::token, rc::gen::inRange<std::uint32_t>(0, 64)));
}

// Up to max_count mutations, structural only half of the time.
inline rc::Gen<std::vector<Mutation>> Mutations(int max_count) {
  return rc::gen::mapcat(rc::gen::arbitrary<bool>(), [max_count](bool structural) {
    return rc::gen::resize(max_count, rc::gen::nonEmpty(rc::gen::container<std::vector<Mutation>>(
                                          AMutation(structural))));
  });
}

inline std::string ShowBytes(const std::vector<std::uint8_t>& bytes, std::size_t limit = 400) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
    const std::uint8_t c = bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (bytes.size() > limit) out += "...";
  return out;
}

// Applies the mutations to the header bytes [8, 8 + N) of a safetensors
// file. With fix_length the length prefix follows the header's new size, so
// the mutated header is still read as a header (instead of dying at ST-003).
inline std::vector<std::uint8_t> MutateHeader(const std::vector<std::uint8_t>& file,
                                              const std::vector<Mutation>& mutations,
                                              bool fix_length) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n * 256 + file[i];
  std::vector<std::uint8_t> header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  const std::vector<std::uint8_t> data(file.begin() + 8 + static_cast<std::ptrdiff_t>(n), file.end());
  for (const Mutation& m : mutations) {
    const std::size_t size = header.size();
    const std::size_t at = size == 0 ? 0 : m.where % size;
    switch (m.kind) {
      case 0:
        if (size) header[at] ^= static_cast<std::uint8_t>(1u << (m.value % 8));
        break;
      case 1:
        if (size) header[at] = m.value;
        break;
      case 2:
        header.insert(header.begin() + static_cast<std::ptrdiff_t>(m.where % (size + 1)), m.length,
                      m.value);
        break;
      case 3: {
        const std::string& t = JsonTokens()[m.token % JsonTokens().size()];  // any index
        header.insert(header.begin() + static_cast<std::ptrdiff_t>(m.where % (size + 1)), t.begin(),
                      t.end());
        break;
      }
      case 5:
      case 6: {
        // The spans of the numbers (digit runs outside strings) or of the
        // strings (quote to unescaped quote); replace the chosen one.
        std::vector<std::pair<std::size_t, std::size_t>> spans;
        for (std::size_t i = 0; i < size;) {
          if (header[i] == '"') {
            std::size_t j = i + 1;
            while (j < size && header[j] != '"') j += header[j] == '\\' ? 2 : 1;
            if (j >= size) break;
            if (m.kind == 6) spans.emplace_back(i, j + 1);
            i = j + 1;
          } else if (header[i] >= '0' && header[i] <= '9') {
            std::size_t j = i;
            while (j < size && header[j] >= '0' && header[j] <= '9') ++j;
            if (m.kind == 5) spans.emplace_back(i, j);
            i = j;
          } else {
            ++i;
          }
        }
        if (spans.empty()) break;
        const auto& tokens = m.kind == 5 ? NumberTokens() : StringTokens();
        const std::string& t = tokens[m.token % tokens.size()];
        const auto [begin, end] = spans[m.where % spans.size()];
        header.erase(header.begin() + static_cast<std::ptrdiff_t>(begin),
                     header.begin() + static_cast<std::ptrdiff_t>(end));
        header.insert(header.begin() + static_cast<std::ptrdiff_t>(begin), t.begin(), t.end());
        break;
      }
      default: {
        if (!size) break;
        const std::size_t count = std::min<std::size_t>(m.length, size - at);
        header.erase(header.begin() + static_cast<std::ptrdiff_t>(at),
                     header.begin() + static_cast<std::ptrdiff_t>(at + count));
        break;
      }
    }
  }
  std::vector<std::uint8_t> out(file.begin(), file.begin() + 8);
  if (fix_length) {
    std::uint64_t len = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(len >> (8 * i));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace qdtest::gen

// RapidCheck prints counterexamples with showValue, found by argument lookup.
namespace qdtest::gen {
inline void showValue(const Mutation& m, std::ostream& os) {
  os << "{kind=" << m.kind << " where=" << m.where << " value=" << static_cast<int>(m.value)
     << " length=" << m.length << " token=" << m.token << "}";
}
}  // namespace qdtest::gen

#endif  // QUANTDIFF_PROPERTY_TESTS_GEN_RC_GEN_H_
