// gptq_roundtrip: the GPTQ packer, unpacker, converter and layer kernels
// (codecs/gptq.h) against the oracle's packer and against docs/gptq.md
// sections 4 to 9.
//
// Input: [code and zero bytes ...][8-byte tail]
//   tail[0] bits 0..1  format, modulo 3: gptq, gptq_v2, gptq_p
//           bits 2..5  bits: with bit 6 clear, mapped to an allowed width
//                      (continuous {2, 3, 4, 8}[v % 4], planar 2 + v % 7);
//                      with bit 6 set, taken as it is (0..15)
//           bit 7      codes and zeros unmasked (bytes as they are: out of
//                      range values make both packers refuse)
//   tail[1] bits 0..2  K / 32 - 1; bits 3..4 N / 32 - 1
//           bits 5..7  group_size: -1, 32, 128, 1 + tail[2], 16, 48, 7, 1
//   tail[3] bits 0..1  zeros: from the bytes, all smallest, all largest, edges
//           bits 2..3  scales dtype, modulo 3: F16, BF16, F32
//           bits 4..5  g_idx, modulo 3: k / gs, a permutation, any group
//           bit 6      K + 16 (not a multiple of 32: both packers refuse)
//   tail[4..7]         seed of the scales, g_idx and x
// The body's bytes are the codes [K][N] then the zeros [G][N] (masked to
// the field width; v1 zeros 1 + byte % 2^b); past the body they come from
// the seed.
// Checks, each a divergence DIFF:gptq_roundtrip:<kind>:<what>:
//   1. codec::GptqEncode and oracle::PackGptq agree on the verdict and, when
//      both pack, on every qweight and qzeros word;
//   2. codec::GptqUnpack gives the codes and zeros back;
//   3. GptqDequantize on every kernel equals fl32((c - z) * s) computed here
//      (s widened by the tests' own property_tests/gen/half.h, not the
//      codec's converters), bit for bit, and GptqDequantizeRows equals its slice;
//   4. GptqMatvec: the scalar kernel equals acc = acc + w * x in k order
//      computed here; every other kernel equals the scalar one bit for bit
//      (codecs/gptq_kernels.cc documents bit identity for AVX2) and lies
//      within |dy| <= 2 (K + 1) 2^-24 sum |w x| + 2 K 2^-149 in any case;
//   5. GptqConvert to each other format: refused with overflow exactly where
//      a v1 field is mask(b) (zero 2^b) and the target is true-zero, with
//      underflow exactly where a true zero 0 goes to v1, with bits for
//      planar 5..7 to continuous; otherwise the converted words are the
//      oracle's pack of the same codes and zeros, unpack to them, dequantize
//      to the same bits, and convert back to the original words.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "fuzz/common/fuzz_support.h"
#include "oracles/gptq.h"
#include "property_tests/gen/half.h"


namespace {

using qd::codec::GptqFormat;
using qd::fuzz::Diverge;

constexpr std::size_t kTailSize = 8;
constexpr std::string_view kPrefix = "DIFF:gptq_roundtrip:";

std::string Sig(std::string_view kind, std::string_view what) {
  return std::string(kPrefix) + std::string(kind) + ":" + std::string(what);
}

const char* const kNames[] = {"gptq", "gptq_v2", "gptq_p"};

GptqFormat FormatOf(int f) {
  return f == 0 ? GptqFormat::kV1 : f == 1 ? GptqFormat::kV2 : GptqFormat::kPlanar;
}

std::vector<std::uint8_t> Bytes(const std::vector<std::int32_t>& words) {
  std::vector<std::uint8_t> out(words.size() * 4);
  if (!out.empty()) std::memcpy(out.data(), words.data(), out.size());
  return out;
}

std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }
bool Same(float a, float b) { return Bits(a) == Bits(b) || (std::isnan(a) && std::isnan(b)); }

std::string At(std::int64_t a, std::int64_t b) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

struct Layer {
  int format = 0;
  int bits = 4;
  std::int64_t K = 0, N = 0, G = 0;
  std::vector<std::uint8_t> qweight, qzeros, scales, g_idx;
  qd::codec::Dtype dtype = qd::codec::Dtype::kF16;
  int scale_size = 2;

  qd::codec::GptqLayerView View() const {
    qd::codec::GptqLayerView v;
    v.format = FormatOf(format);
    v.bits = bits;
    v.in_features = K;
    v.out_features = N;
    v.groups = G;
    v.qweight = qweight.data();
    v.qzeros = qzeros.data();
    v.scales = scales.data();
    v.scales_dtype = dtype;
    v.g_idx = g_idx.data();
    return v;
  }
  float Scale(std::int64_t g, std::int64_t n) const {
    const std::size_t i = static_cast<std::size_t>(g * N + n);
    if (scale_size == 4) {
      std::uint32_t u;
      std::memcpy(&u, scales.data() + 4 * i, 4);
      return std::bit_cast<float>(u);
    }
    const std::uint16_t h = static_cast<std::uint16_t>(scales[2 * i] | (scales[2 * i + 1] << 8));
    return dtype == qd::codec::Dtype::kBF16 ? qdtest::BFloat16Value(h) : qdtest::HalfValue(h);
  }
  std::int32_t Gidx(std::int64_t k) const {
    std::int32_t v;
    std::memcpy(&v, g_idx.data() + 4 * k, 4);
    return v;
  }
};

std::vector<float> Dequant(const Layer& l, qd::codec::Kernel kernel) {
  std::vector<float> out(static_cast<std::size_t>(l.N * l.K));
  qd::codec::GptqDequantize(l.View(), out.data(), kernel);
  return out;
}

void CheckSameFloats(const std::vector<float>& a, const std::vector<float>& b, std::int64_t K,
                     const std::string& sig, const std::string& what) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!Same(a[i], b[i])) {
      Diverge(sig, what + ": out[n " + std::to_string(i / K) + "][k " + std::to_string(i % K) +
                       "] " + qd::fuzz::Hex(Bits(a[i]), 8) + " vs " + qd::fuzz::Hex(Bits(b[i]), 8));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t tail[kTailSize] = {};
  const std::size_t body = size > kTailSize ? size - kTailSize : 0;
  for (std::size_t i = 0; i < kTailSize && body + i < size; ++i) tail[i] = data[body + i];

  const int format = (tail[0] & 3) % 3;
  const int raw_bits = (tail[0] >> 2) & 15;
  const bool bad_bits = (tail[0] & 0x40) != 0;
  const bool unmasked = (tail[0] & 0x80) != 0;
  int bits = format == 2 ? 2 + raw_bits % 7 : std::array<int, 4>{2, 3, 4, 8}[raw_bits % 4];
  if (bad_bits) bits = raw_bits;
  std::int64_t K = 32 * (1 + (tail[1] & 7));
  const std::int64_t N = 32 * (1 + ((tail[1] >> 3) & 3));
  static const std::int64_t kGroups[] = {-1, 32, 128, 0, 16, 48, 7, 1};
  std::int64_t gs = kGroups[tail[1] >> 5];
  if (gs == 0) gs = 1 + tail[2];
  const int zero_style = tail[3] & 3;
  const int dtype = ((tail[3] >> 2) & 3) % 3;
  const int g_idx_mode = ((tail[3] >> 4) & 3) % 3;
  if (tail[3] & 0x40) K += 16;
  const std::uint32_t seed = static_cast<std::uint32_t>(tail[4] | (tail[5] << 8) | (tail[6] << 16)) |
                             (static_cast<std::uint32_t>(tail[7]) << 24);
  std::mt19937_64 rng(seed);
  const std::int64_t G = gs == -1 ? 1 : (K + gs - 1) / gs;
  const int b = std::clamp(bits, 1, 16);
  const std::int32_t top = (1 << b) - 1;

  // Codes and zeros.
  std::size_t at = 0;
  auto next = [&]() -> std::uint8_t {
    return at < body ? data[at++] : static_cast<std::uint8_t>(rng());
  };
  std::vector<std::int32_t> codes(static_cast<std::size_t>(K * N));
  for (auto& c : codes) c = unmasked ? next() : next() & top;
  std::vector<std::int32_t> zeros(static_cast<std::size_t>(G * N));
  const std::int32_t zlo = format == 0 ? 1 : 0;
  const std::int32_t zhi = format == 0 ? top + 1 : top;
  for (auto& z : zeros) {
    const std::uint8_t v = next();
    switch (zero_style) {
      case 1: z = zlo; break;
      case 2: z = zhi; break;
      case 3: z = (v & 1) ? zlo : zhi; break;
      default: z = unmasked ? v : zlo + static_cast<std::int32_t>(v % (zhi - zlo + 1)); break;
    }
  }

  // 1. Packer against packer.
  qd::codec::GptqPacked packed;
  qd::codec::GptqPackError error;
  const bool codec_ok = qd::codec::GptqEncode(FormatOf(format), bits, K, N, G, codes, zeros, &packed, &error);
  std::vector<std::int32_t> qweight, qzeros;
  std::string oracle_error;
  const bool oracle_ok = qd::oracle::PackGptq(kNames[format], bits, K, N, G, codes, zeros, &qweight,
                                              &qzeros, &oracle_error);
  const std::string params = std::string(kNames[format]) + " b" + std::to_string(bits) + " K" +
                             std::to_string(K) + " N" + std::to_string(N) + " G" + std::to_string(G);
  if (codec_ok != oracle_ok) {
    Diverge(Sig("verdict", codec_ok ? "codec-packed" : error.what),
            params + ": codec " + (codec_ok ? "packed" : "refused (" + error.what + " at " + At(error.row, error.column) + ": " + error.message + ")") +
                ", oracle " + (oracle_ok ? "packed" : "refused (" + oracle_error + ")"));
  }
  if (!codec_ok) return 0;
  if (packed.qweight != qweight || packed.qzeros != qzeros) {
    const bool w = packed.qweight != qweight;
    const auto& a = w ? packed.qweight : packed.qzeros;
    const auto& o = w ? qweight : qzeros;
    std::size_t j = 0;
    while (j < a.size() && j < o.size() && a[j] == o[j]) ++j;
    Diverge(Sig("words", w ? "qweight" : "qzeros"),
            params + ": word " + std::to_string(j) + " of " + std::to_string(o.size()) + ": codec " +
                (j < a.size() ? qd::fuzz::Hex(static_cast<std::uint32_t>(a[j]), 8) : "none") + " oracle " +
                (j < o.size() ? qd::fuzz::Hex(static_cast<std::uint32_t>(o[j]), 8) : "none"));
  }

  // The layer: scales and g_idx from the seed.
  Layer l;
  l.format = format;
  l.bits = bits;
  l.K = K, l.N = N, l.G = G;
  l.qweight = Bytes(packed.qweight);
  l.qzeros = Bytes(packed.qzeros);
  l.dtype = dtype == 0 ? qd::codec::Dtype::kF16 : dtype == 1 ? qd::codec::Dtype::kBF16 : qd::codec::Dtype::kF32;
  l.scale_size = dtype == 2 ? 4 : 2;
  l.scales.resize(static_cast<std::size_t>(G * N) * l.scale_size);
  for (std::size_t i = 0; i < l.scales.size() / l.scale_size; ++i) {
    std::uint32_t v = static_cast<std::uint32_t>(rng());
    if (dtype == 0 && ((v >> 10) & 0x1f) == 0x1f) v &= ~0x4000u;
    if (dtype == 1 && ((v >> 7) & 0xff) == 0xff) v &= ~0x4000u;
    if (dtype == 2 && ((v >> 23) & 0xff) == 0xff) v &= ~0x40000000u;
    if ((rng() & 3) == 0) v = dtype == 2 ? (v & 0x807fffffu) : (v & (dtype == 0 ? 0x83ffu : 0x807fu));  // subnormal / zero
    for (int k = 0; k < l.scale_size; ++k) l.scales[i * l.scale_size + k] = static_cast<std::uint8_t>(v >> (8 * k));
  }
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(K));
  for (std::int64_t k = 0; k < K; ++k) g_idx[k] = static_cast<std::int32_t>(gs == -1 ? 0 : k / gs);
  if (g_idx_mode == 1) std::shuffle(g_idx.begin(), g_idx.end(), rng);
  if (g_idx_mode == 2) for (auto& g : g_idx) g = static_cast<std::int32_t>(rng() % G);
  l.g_idx = Bytes(g_idx);

  // 2. Unpack.
  std::vector<std::int32_t> codes2, zeros2;
  qd::codec::GptqUnpack(l.View(), &codes2, &zeros2);
  if (codes2 != codes) Diverge(Sig("unpack", "codes"), params);
  if (zeros2 != zeros) Diverge(Sig("unpack", "zeros"), params);

  // 3. Dequantization.
  std::vector<float> expect(static_cast<std::size_t>(N * K));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int32_t g = g_idx[k];
      const float d = static_cast<float>(codes[k * N + n] - zeros[g * N + n]);
      expect[n * K + k] = d * l.Scale(g, n);
    }
  }
  const std::vector<float> scalar = Dequant(l, qd::codec::Kernel::kScalar);
  CheckSameFloats(scalar, expect, K, Sig("dequant", "scalar"), params);
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == qd::codec::Kernel::kScalar) continue;
    CheckSameFloats(Dequant(l, kernel), scalar, K, Sig("dequant", qd::codec::KernelName(kernel)), params);
  }
  {
    const std::int64_t n0 = static_cast<std::int64_t>(rng() % N);
    const std::int64_t n1 = n0 + 1 + static_cast<std::int64_t>(rng() % (N - n0));
    for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
      std::vector<float> rows(static_cast<std::size_t>((n1 - n0) * K));
      qd::codec::GptqDequantizeRows(l.View(), n0, n1, rows.data(), kernel);
      CheckSameFloats(rows, std::vector<float>(scalar.begin() + n0 * K, scalar.begin() + n1 * K), K,
                      Sig("dequant-rows", qd::codec::KernelName(kernel)), params);
    }
  }

  // 4. Matvec.
  std::vector<float> x(static_cast<std::size_t>(K));
  for (auto& v : x) {
    const std::uint32_t r = static_cast<std::uint32_t>(rng());
    v = std::ldexp(static_cast<float>(static_cast<std::int32_t>(r % 2001) - 1000) / 1000.0f,
                   static_cast<int>((r >> 16) % 9) - 4);
  }
  std::vector<float> y_ref(static_cast<std::size_t>(N));
  std::vector<double> magnitude(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    float acc = scalar[n * K] * x[0];
    double m = std::fabs(static_cast<double>(scalar[n * K]) * x[0]);
    for (std::int64_t k = 1; k < K; ++k) {
      const float p = scalar[n * K + k] * x[k];
      acc = acc + p;
      m += std::fabs(static_cast<double>(scalar[n * K + k]) * x[k]);
    }
    y_ref[n] = acc;
    magnitude[n] = m;
  }
  std::vector<float> y_scalar(static_cast<std::size_t>(N));
  qd::codec::GptqMatvec(l.View(), x.data(), y_scalar.data(), qd::codec::Kernel::kScalar);
  for (std::int64_t n = 0; n < N; ++n) {
    if (!Same(y_scalar[n], y_ref[n])) {
      Diverge(Sig("matvec", "scalar"), params + ": y[" + std::to_string(n) + "] " +
                                          qd::fuzz::Hex(Bits(y_scalar[n]), 8) + " vs " +
                                          qd::fuzz::Hex(Bits(y_ref[n]), 8));
    }
  }
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == qd::codec::Kernel::kScalar) continue;
    std::vector<float> y(static_cast<std::size_t>(N));
    qd::codec::GptqMatvec(l.View(), x.data(), y.data(), kernel);
    for (std::int64_t n = 0; n < N; ++n) {
      if (Same(y[n], y_scalar[n])) continue;
      const double bound = 2.0 * (K + 1) * std::ldexp(1.0, -24) * magnitude[n] + 2.0 * K * std::ldexp(1.0, -149);
      const bool finite = std::isfinite(y[n]) && std::isfinite(y_scalar[n]);
      const bool within = finite && std::fabs(static_cast<double>(y[n]) - y_scalar[n]) <= bound;
      Diverge(Sig(within ? "matvec-inexact" : "matvec-bound", qd::codec::KernelName(kernel)),
              params + ": y[" + std::to_string(n) + "] " + qd::fuzz::Hex(Bits(y[n]), 8) + " scalar " +
                  qd::fuzz::Hex(Bits(y_scalar[n]), 8));
    }
  }

  // 5. Conversions.
  bool has_max = false, has_zero = false;  // zero 2^b (v1 only), true zero 0
  for (std::int32_t z : zeros) {
    has_max = has_max || z == top + 1;
    has_zero = has_zero || z == 0;
  }
  const bool continuous_bits = bits == 2 || bits == 3 || bits == 4 || bits == 8;
  for (int target = 0; target < 3; ++target) {
    if (target == format) continue;
    std::string expect_what;
    if (target != 2 && !continuous_bits) {
      expect_what = "bits";
    } else if (format == 0 && has_max) {
      expect_what = "overflow";
    } else if (target == 0 && has_zero) {
      expect_what = "underflow";
    }
    qd::codec::GptqPacked converted;
    qd::codec::GptqPackError cerr;
    const bool ok = qd::codec::GptqConvert(l.View(), FormatOf(target), &converted, &cerr);
    const std::string conv = params + " -> " + kNames[target];
    if (ok != expect_what.empty()) {
      Diverge(Sig("convert-verdict", expect_what.empty() ? "refused" : expect_what),
              conv + ": expected " + (expect_what.empty() ? "success" : expect_what) + ", codec " +
                  (ok ? "converted" : cerr.what + " at " + At(cerr.row, cerr.column)));
    }
    if (!ok) {
      if (cerr.what != expect_what) {
        Diverge(Sig("convert-what", expect_what), conv + ": codec says " + cerr.what);
      }
      continue;
    }
    // The oracle's pack of the same codes and zero points.
    std::vector<std::int32_t> oq, oz;
    std::string oe;
    if (!qd::oracle::PackGptq(kNames[target], bits, K, N, G, codes, zeros, &oq, &oz, &oe) ||
        oq != converted.qweight || oz != converted.qzeros) {
      Diverge(Sig("convert-words", kNames[target]), conv + ": not the oracle's pack (" + oe + ")");
    }
    if (bits != 3 && format != 0 && target != 0 && (converted.qweight != packed.qweight || converted.qzeros != packed.qzeros)) {
      Diverge(Sig("convert-words", "planar-identity"), conv + ": b2/4/8 v2 <-> planar words changed");
    }
    Layer t = l;
    t.format = target;
    t.qweight = Bytes(converted.qweight);
    t.qzeros = Bytes(converted.qzeros);
    std::vector<std::int32_t> c3, z3;
    qd::codec::GptqUnpack(t.View(), &c3, &z3);
    if (c3 != codes || z3 != zeros) Diverge(Sig("convert-unpack", kNames[target]), conv);
    CheckSameFloats(Dequant(t, qd::codec::Kernel::kScalar), scalar, K, Sig("convert-dequant", kNames[target]), conv);
    qd::codec::GptqPacked back;
    qd::codec::GptqPackError berr;
    if (!qd::codec::GptqConvert(t.View(), FormatOf(format), &back, &berr) ||
        back.qweight != packed.qweight || back.qzeros != packed.qzeros) {
      Diverge(Sig("convert-back", kNames[format]), conv + " -> back: " + berr.what);
    }
  }
  return 0;
}
