// gptq_pack.cc: GPTQ encoder, unpacker and format conversions
// (docs/gptq.md sections 4, 5, 8 and 9).
//
// Everything here works on fields: a stream (a qweight column running down
// the rows, or a qzeros row running along it) is a sequence of b-bit fields,
// laid out continuously (gptq, gptq_v2) or in bit planes (gptq_p). Encoding
// ORs each field into words that start at 0; decoding reads it back. The two
// are inverse bijections on the shapes the encoder accepts.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/gptq.h"

namespace qd::codec {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the packed words are read with memcpy as little-endian");

inline std::uint32_t Mask(int bits) { return (1u << bits) - 1u; }

struct Plane {
  int width;
  int offset;
};

// Planes, low first (section 4). Only called for 2..8.
std::vector<Plane> PlanesOf(int bits) {
  switch (bits) {
    case 2: return {{2, 0}};
    case 3: return {{2, 0}, {1, 2}};
    case 4: return {{4, 0}};
    case 5: return {{4, 0}, {1, 4}};
    case 6: return {{4, 0}, {2, 4}};
    case 7: return {{4, 0}, {2, 4}, {1, 6}};
    default: return {{8, 0}};
  }
}

bool BitsAllowed(GptqFormat format, int bits) {
  if (format == GptqFormat::kPlanar) return bits >= 2 && bits <= 8;
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

// A stream of b-bit fields over words word(0), word(1), ... The accessor
// gives the word index of stream word j, so one class serves the qweight
// columns (stride N) and the qzeros rows (stride 1).
class Stream {
 public:
  Stream(bool planar, int bits) : planar_(planar), bits_(bits), planes_(PlanesOf(bits)) {}

  // Field i, read from words[index(j)].
  template <typename Index>
  std::uint32_t Get(const std::uint32_t* words, std::int64_t i, Index index) const {
    if (!planar_) {
      const std::int64_t s = i * bits_;
      const std::int64_t w = s / 32;
      const int o = static_cast<int>(s % 32);
      std::uint32_t v = words[index(w)] >> o;
      if (o + bits_ > 32) v |= words[index(w + 1)] << (32 - o);
      return v & Mask(bits_);
    }
    const std::int64_t block = (i / 32) * bits_;
    const int t = static_cast<int>(i % 32);
    std::uint32_t v = 0;
    for (const Plane& p : planes_) {
      const int per_word = 32 / p.width;
      const std::uint32_t word = words[index(block + p.offset + t / per_word)];
      v |= ((word >> ((t % per_word) * p.width)) & Mask(p.width)) << p.offset;
    }
    return v;
  }

  // ORs field i of value v (< 2^b) into words[index(j)] (section 8).
  template <typename Index>
  void Put(std::uint32_t* words, std::int64_t i, std::uint32_t v, Index index) const {
    if (!planar_) {
      const std::int64_t s = i * bits_;
      const std::int64_t w = s / 32;
      const int o = static_cast<int>(s % 32);
      words[index(w)] |= v << o;  // mod 2^32: u32 shift drops the high bits
      if (o + bits_ > 32) words[index(w + 1)] |= v >> (32 - o);
      return;
    }
    const std::int64_t block = (i / 32) * bits_;
    const int t = static_cast<int>(i % 32);
    for (const Plane& p : planes_) {
      const int per_word = 32 / p.width;
      words[index(block + p.offset + t / per_word)] |=
          ((v >> p.offset) & Mask(p.width)) << ((t % per_word) * p.width);
    }
  }

 private:
  bool planar_;
  int bits_;
  std::vector<Plane> planes_;
};

void Fail(GptqPackError* error, const char* what, std::int64_t row, std::int64_t column,
          std::string message) {
  if (error == nullptr) return;
  error->what = what;
  error->row = row;
  error->column = column;
  error->message = std::move(message);
}

std::string At(std::int64_t row, std::int64_t column) {
  return "(" + std::to_string(row) + ", " + std::to_string(column) + ")";
}

// a * b when it fits int64 and both are >= 0; false otherwise.
bool CheckedProduct(std::int64_t a, std::int64_t b, std::int64_t* out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

// Stored fields of a layer's qweight columns and qzeros rows.
struct Fields {
  std::vector<std::int32_t> codes;  // [K][N]
  std::vector<std::int32_t> zeros;  // [G][N], the stored field (not the zero point)
};

Fields ReadFields(const GptqLayerView& layer) {
  const std::int64_t K = layer.in_features;
  const std::int64_t N = layer.out_features;
  const std::int64_t G = layer.groups;
  const std::int64_t rows = K / 32 * layer.bits;
  const std::int64_t zero_words = N / 32 * layer.bits;
  const Stream stream(layer.format == GptqFormat::kPlanar, layer.bits);
  std::vector<std::uint32_t> qweight(static_cast<std::size_t>(rows * N));
  std::vector<std::uint32_t> qzeros(static_cast<std::size_t>(G * zero_words));
  if (!qweight.empty()) std::memcpy(qweight.data(), layer.qweight, qweight.size() * 4);
  if (!qzeros.empty()) std::memcpy(qzeros.data(), layer.qzeros, qzeros.size() * 4);
  Fields f;
  f.codes.resize(static_cast<std::size_t>(K * N));
  f.zeros.resize(static_cast<std::size_t>(G * N));
  for (std::int64_t n = 0; n < N; ++n) {
    const auto column = [N, n](std::int64_t j) { return j * N + n; };
    for (std::int64_t k = 0; k < K; ++k) {
      f.codes[k * N + n] = static_cast<std::int32_t>(stream.Get(qweight.data(), k, column));
    }
  }
  for (std::int64_t g = 0; g < G; ++g) {
    const std::uint32_t* row = qzeros.data() + g * zero_words;
    for (std::int64_t n = 0; n < N; ++n) {
      f.zeros[g * N + n] =
          static_cast<std::int32_t>(stream.Get(row, n, [](std::int64_t j) { return j; }));
    }
  }
  return f;
}

// Packs already-checked stored fields.
void WriteFields(GptqFormat format, int bits, std::int64_t K, std::int64_t N, std::int64_t G,
                 const std::vector<std::int32_t>& codes, const std::vector<std::int32_t>& fields,
                 GptqPacked* out) {
  const Stream stream(format == GptqFormat::kPlanar, bits);
  const std::int64_t rows = K / 32 * bits;
  const std::int64_t zero_words = N / 32 * bits;
  std::vector<std::uint32_t> qweight(static_cast<std::size_t>(rows * N), 0u);
  std::vector<std::uint32_t> qzeros(static_cast<std::size_t>(G * zero_words), 0u);
  for (std::int64_t n = 0; n < N; ++n) {
    const auto column = [N, n](std::int64_t j) { return j * N + n; };
    for (std::int64_t k = 0; k < K; ++k) {
      stream.Put(qweight.data(), k, static_cast<std::uint32_t>(codes[k * N + n]), column);
    }
  }
  for (std::int64_t g = 0; g < G; ++g) {
    std::uint32_t* row = qzeros.data() + g * zero_words;
    for (std::int64_t n = 0; n < N; ++n) {
      stream.Put(row, n, static_cast<std::uint32_t>(fields[g * N + n]),
                 [](std::int64_t j) { return j; });
    }
  }
  out->qweight.resize(qweight.size());
  out->qzeros.resize(qzeros.size());
  if (!qweight.empty()) std::memcpy(out->qweight.data(), qweight.data(), qweight.size() * 4);
  if (!qzeros.empty()) std::memcpy(out->qzeros.data(), qzeros.data(), qzeros.size() * 4);
}

}  // namespace

bool GptqEncode(GptqFormat format, int bits, std::int64_t in_features,
                std::int64_t out_features, std::int64_t groups,
                const std::vector<std::int32_t>& codes, const std::vector<std::int32_t>& zeros,
                GptqPacked* out, GptqPackError* error) {
  const std::int64_t K = in_features;
  const std::int64_t N = out_features;
  const std::int64_t G = groups;
  if (!BitsAllowed(format, bits)) {
    Fail(error, "bits", -1, -1,
         std::string(GptqFormatName(format)) + " cannot hold " + std::to_string(bits) + " bits");
    return false;
  }
  std::int64_t code_count = 0;
  std::int64_t zero_count = 0;
  if (K < 0 || N < 0 || G < 0 || K % 32 != 0 || N % 32 != 0 ||
      !CheckedProduct(K, N, &code_count) || !CheckedProduct(G, N, &zero_count) ||
      static_cast<std::uint64_t>(code_count) != codes.size() ||
      static_cast<std::uint64_t>(zero_count) != zeros.size()) {
    Fail(error, "shape", -1, -1,
         "in_features " + std::to_string(K) + " and out_features " + std::to_string(N) +
             " must be multiples of 32, codes [K][N] and zeros [groups][N]");
    return false;
  }
  const std::int64_t max_code = Mask(bits);
  for (std::int64_t i = 0; i < code_count; ++i) {
    if (codes[i] < 0 || codes[i] > max_code) {
      Fail(error, "code", i / N, i % N,
           "code " + std::to_string(codes[i]) + " at " + At(i / N, i % N) + " is outside 0.." +
               std::to_string(max_code));
      return false;
    }
  }
  const bool v1 = format == GptqFormat::kV1;
  const std::int64_t zero_min = v1 ? 1 : 0;
  const std::int64_t zero_max = v1 ? max_code + 1 : max_code;
  std::vector<std::int32_t> fields(zeros.size());
  for (std::int64_t i = 0; i < zero_count; ++i) {
    if (zeros[i] < zero_min || zeros[i] > zero_max) {
      Fail(error, "zero", i / N, i % N,
           "zero point " + std::to_string(zeros[i]) + " at " + At(i / N, i % N) +
               " is outside " + std::to_string(zero_min) + ".." + std::to_string(zero_max) +
               " for " + GptqFormatName(format));
      return false;
    }
    fields[i] = v1 ? zeros[i] - 1 : zeros[i];
  }
  WriteFields(format, bits, K, N, G, codes, fields, out);
  return true;
}

void GptqUnpack(const GptqLayerView& layer, std::vector<std::int32_t>* codes,
                std::vector<std::int32_t>* zeros) {
  Fields f = ReadFields(layer);
  if (layer.format == GptqFormat::kV1) {
    for (std::int32_t& z : f.zeros) z += 1;  // section 5: not masked
  }
  *codes = std::move(f.codes);
  *zeros = std::move(f.zeros);
}

bool GptqConvert(const GptqLayerView& layer, GptqFormat target, GptqPacked* out,
                 GptqPackError* error) {
  const int bits = layer.bits;
  if (!BitsAllowed(target, bits)) {
    Fail(error, "bits", -1, -1,
         std::string(GptqFormatName(target)) + " cannot hold " + std::to_string(bits) + " bits");
    return false;
  }
  Fields f = ReadFields(layer);
  const bool from_v1 = layer.format == GptqFormat::kV1;
  const bool to_v1 = target == GptqFormat::kV1;
  const std::int64_t N = layer.out_features;
  if (from_v1 != to_v1) {
    const std::int32_t max_field = static_cast<std::int32_t>(Mask(bits));
    for (std::size_t i = 0; i < f.zeros.size(); ++i) {
      const std::int64_t g = static_cast<std::int64_t>(i) / N;
      const std::int64_t n = static_cast<std::int64_t>(i) % N;
      if (from_v1) {  // v1 -> true zeros: field + 1
        if (f.zeros[i] == max_field) {
          Fail(error, "overflow", g, n,
               "v1 zero field " + std::to_string(max_field) + " at " + At(g, n) +
                   " is zero point " + std::to_string(max_field + 1) + ", which " +
                   GptqFormatName(target) + " cannot store");
          return false;
        }
        f.zeros[i] += 1;
      } else {  // true zeros -> v1: field - 1
        if (f.zeros[i] == 0) {
          Fail(error, "underflow", g, n,
               "zero point 0 at " + At(g, n) + " has no gptq (v1) field");
          return false;
        }
        f.zeros[i] -= 1;
      }
    }
  }
  WriteFields(target, bits, layer.in_features, N, layer.groups, f.codes, f.zeros, out);
  return true;
}

}  // namespace qd::codec
