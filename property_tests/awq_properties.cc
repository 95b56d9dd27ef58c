// awq_properties.cc: properties of the AWQ packers and unpacker
// (docs/awq.md sections 4 and 8), codec and oracle.
//
//  * For random layers of every version, the codec's encoder and the
//    oracle's packer write the same words, and the codec's unpacker gives the
//    codes and zeros back.
//  * A lone non-zero code lands where section 4's formulas (written here
//    again) put it: GEMM nibble i with [0,2,4,6,1,3,5,7][i] = n % 8; GEMV
//    nibble k % 8 of word (n, k / 8); GEMV_FAST the shuffle, interleave and
//    nibble of section 4.
//  * Dequantization (section 6) of GEMM, GEMV and GEMV_FAST on every kernel
//    equals the scalar kernel bit for bit, and the scalar kernel equals
//    section 6 computed here from the codes, zeros, scales and scaled zeros
//    drawn: shapes that leave tails (K not a multiple of 8 in GEMM, group
//    sizes that are not multiples of 8, partial row ranges), scales of any
//    bits (subnormal, infinite, NaN, -0.0), any row range.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/awq.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/awq.h"
#include "property_tests/gen/half.h"

namespace {

using qd::codec::AwqFormat;

const char* const kVersions[] = {"gemm", "gemv", "gemv_fast"};
const AwqFormat kFormats[] = {AwqFormat::kGemm, AwqFormat::kGemv, AwqFormat::kGemvFast};

struct Layer {
  int version = 0;
  std::int64_t k = 0, n = 0, group_size = 0;
  std::int64_t Groups() const { return group_size == -1 ? 1 : k / group_size; }
};

rc::Gen<Layer> Layers() {
  return rc::gen::exec([] {
    Layer l;
    l.version = *rc::gen::inRange(0, 3);
    l.group_size = *rc::gen::element<std::int64_t>(-1, 32, 64, 128);
    const std::int64_t unit = l.group_size == -1 ? 64 : l.group_size;
    l.k = unit * *rc::gen::inRange<std::int64_t>(1, 4);
    if (l.version == 2 && l.k % 64 != 0) l.k *= 2;
    l.n = l.version == 0 ? 8 * *rc::gen::inRange<std::int64_t>(1, 5)
          : l.version == 2 ? 4 * *rc::gen::inRange<std::int64_t>(1, 9)
                           : *rc::gen::inRange<std::int64_t>(1, 40);
    return l;
  });
}

qd::codec::AwqLayerView ViewOf(const Layer& l, const qd::codec::AwqPacked& p,
                               std::vector<std::uint8_t>* qweight_bytes,
                               std::vector<std::uint8_t>* qzeros_bytes) {
  const int width = l.version == 2 ? 2 : 4;
  for (const std::int32_t w : p.qweight) {
    for (int b = 0; b < width; ++b) qweight_bytes->push_back(static_cast<std::uint8_t>(static_cast<std::uint32_t>(w) >> (8 * b)));
  }
  for (const std::int32_t w : p.qzeros) {
    for (int b = 0; b < 4; ++b) qzeros_bytes->push_back(static_cast<std::uint8_t>(static_cast<std::uint32_t>(w) >> (8 * b)));
  }
  qd::codec::AwqLayerView v;
  v.format = kFormats[l.version];
  v.in_features = l.k;
  v.out_features = l.n;
  v.groups = l.Groups();
  v.group_size = l.k / l.Groups();
  v.zeros_width = l.version == 0 ? 0 : qd::codec::AwqZerosWidth(l.k, v.group_size);
  v.qweight = qweight_bytes->data();
  v.qzeros = qzeros_bytes->data();
  return v;
}

RC_GTEST_PROP(AwqPack, CodecAndOracleWriteTheSameWordsAndUnpackGivesThemBack, ()) {
  const Layer l = *Layers();
  const std::vector<std::int32_t> codes =
      *rc::gen::container<std::vector<std::int32_t>>(static_cast<std::size_t>(l.k * l.n), rc::gen::inRange(0, 16));
  const std::vector<std::int32_t> zeros =
      *rc::gen::container<std::vector<std::int32_t>>(static_cast<std::size_t>(l.Groups() * l.n), rc::gen::inRange(0, 16));
  qd::codec::AwqPacked packed;
  std::string error;
  RC_ASSERT(qd::codec::AwqEncode(kFormats[l.version], l.k, l.n, l.group_size, codes, zeros, &packed, &error));
  std::vector<std::int32_t> qweight, qzeros;
  RC_ASSERT(qd::oracle::PackAwq(kVersions[l.version], l.k, l.n, l.group_size, codes, zeros, &qweight, &qzeros, &error));
  RC_ASSERT(packed.qweight == qweight);
  RC_ASSERT(packed.qzeros == qzeros);
  std::vector<std::uint8_t> wb, zb;
  std::vector<std::int32_t> got_codes, got_zeros;
  qd::codec::AwqUnpack(ViewOf(l, packed, &wb, &zb), &got_codes, &got_zeros);
  RC_ASSERT(got_codes == codes);
  if (l.version != 2) RC_ASSERT(got_zeros == zeros);
}

// docs/awq.md section 4, written again: (word index, nibble) of code (k, n).
std::pair<std::int64_t, int> Place(int version, std::int64_t k, std::int64_t n, std::int64_t K, std::int64_t N) {
  if (version == 0) {
    const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    int i = 0;
    while (order[i] != n % 8) ++i;
    return {k * (N / 8) + n / 8, i};
  }
  if (version == 1) return {n * (K / 8) + k / 8, static_cast<int>(k % 8)};
  const std::int64_t r = k % 32, c = r / 8, a = (r % 8) / 2, d = r % 2;
  const std::int64_t placed = 32 * (k / 32) + 8 * a + 4 * d + c;
  const std::int64_t t = 64 * (n % 4) + placed % 64;
  return {(n / 4) * K + 64 * (placed / 64) + t / 4, static_cast<int>(t % 4)};
}

RC_GTEST_PROP(AwqPack, ALoneCodeLandsWhereTheContractSays, ()) {
  const Layer l = *Layers();
  const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, l.k);
  const std::int64_t n = *rc::gen::inRange<std::int64_t>(0, l.n);
  const std::int32_t value = *rc::gen::inRange(1, 16);
  std::vector<std::int32_t> codes(static_cast<std::size_t>(l.k * l.n), 0);
  codes[static_cast<std::size_t>(k * l.n + n)] = value;
  const std::vector<std::int32_t> zeros(static_cast<std::size_t>(l.Groups() * l.n), 0);
  qd::codec::AwqPacked packed;
  std::string error;
  RC_ASSERT(qd::codec::AwqEncode(kFormats[l.version], l.k, l.n, l.group_size, codes, zeros, &packed, &error));
  const auto [word, nibble] = Place(l.version, k, n, l.k, l.n);
  const std::uint32_t mask = l.version == 2 ? 0xFFFFu : 0xFFFFFFFFu;
  for (std::size_t i = 0; i < packed.qweight.size(); ++i) {
    const std::uint32_t w = static_cast<std::uint32_t>(packed.qweight[i]) & mask;
    const std::uint32_t want = static_cast<std::int64_t>(i) == word ? static_cast<std::uint32_t>(value) << (4 * nibble) : 0u;
    RC_ASSERT(w == want);
  }
}

// A layer shape for the kernel property: K, N and group sizes that leave
// tails in every kernel. GEMM: any group size, K % 8 not always 0. GEMV: K
// / 8 odd or even, group sizes 32, 64, >= 128 and not multiples of 8 (a lane
// block straddles two groups), N any. GEMV_FAST: K a multiple of 64, the
// same group sizes, N a multiple of 4 and row ranges cutting the four-row
// interleave. gs -1 is one group of K (K 32, 64 or >= 128: AWQ-005).
Layer KernelLayer(int version) {
  Layer l;
  l.version = version;
  if (version == 0) {
    l.group_size = *rc::gen::element<std::int64_t>(8, 16, 32, 64, 128, 4, 12, 1, 3);
    l.k = l.group_size * *rc::gen::inRange<std::int64_t>(1, 5);
    l.n = 8 * *rc::gen::inRange<std::int64_t>(1, 6);
    return l;
  }
  const std::int64_t align = version == 1 ? 8 : 64;
  l.group_size = *rc::gen::element<std::int64_t>(-1, 32, 64, 128, 192, 132, 129);
  if (l.group_size == -1) {
    l.k = version == 1 ? *rc::gen::element<std::int64_t>(32, 64, 136, 264, 1000)
                       : *rc::gen::element<std::int64_t>(64, 128, 192, 320);
  } else {
    const std::int64_t unit_groups = std::lcm(l.group_size, align) / l.group_size;
    l.k = l.group_size * unit_groups * *rc::gen::inRange<std::int64_t>(1, 3);
  }
  l.n = version == 1 ? *rc::gen::inRange<std::int64_t>(1, 20) : 4 * *rc::gen::inRange<std::int64_t>(1, 5);
  return l;
}

// `width` little-endian bytes of a scale (or GEMV_FAST scaled zero) of any
// bits; one in four is a special of its dtype (dtype 0 F16, 1 BF16, 2 F32):
// +-0.0 (a zero code times a negative scale plus a -0.0 scaled zero must stay
// -0.0), subnormal, infinite, NaN.
std::uint32_t ScaleBits(int dtype) {
  const auto bits = *rc::gen::arbitrary<std::uint32_t>();
  if (*rc::gen::inRange(0, 4) != 0) return bits;
  switch (dtype) {
    case 0: return *rc::gen::element<std::uint32_t>(0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e01);
    case 1: return *rc::gen::element<std::uint32_t>(0x0000, 0x8000, 0x0001, 0x807f, 0x7f80, 0xff80, 0x7fc1);
    default:
      return *rc::gen::element<std::uint32_t>(0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x7f800000,
                                               0xff800000, 0x7fc00001);
  }
}

float ScaleValue(int dtype, std::uint32_t bits) {
  const std::uint16_t half = static_cast<std::uint16_t>(bits);
  return dtype == 0 ? qdtest::HalfValue(half) : dtype == 1 ? qdtest::BFloat16Value(half) : std::bit_cast<float>(bits);
}

// Dequantization (section 6) on every kernel equals the scalar kernel bit for
// bit, and the scalar kernel equals section 6 computed here from the codes,
// zeros, scales and scaled zeros drawn: GEMM and GEMV fl32((c - z) * s)
// with F16, BF16 or F32 scales, GEMV_FAST fl32(fl32(c * s) + sz) with F16
// scales and scaled zeros; any bits (subnormal, infinite, NaN, -0.0), any
// row range, the shapes of KernelLayer.
RC_GTEST_PROP(AwqKernels, DequantizeIsBitExactInEveryKernel, ()) {
  const Layer l = KernelLayer(*rc::gen::inRange(0, 3));
  const std::int64_t K = l.k, N = l.n, G = l.Groups(), gs = K / G;
  std::vector<std::int32_t> codes(static_cast<std::size_t>(K * N)), zeros(static_cast<std::size_t>(G * N));
  for (auto& c : codes) c = *rc::gen::inRange(0, 16);
  for (auto& z : zeros) z = *rc::gen::inRange(0, 16);
  qd::codec::AwqPacked packed;
  std::string error;
  RC_ASSERT(qd::codec::AwqEncode(kFormats[l.version], K, N, l.group_size, codes, zeros, &packed, &error));
  std::vector<std::uint8_t> qweight, qzeros;
  qd::codec::AwqLayerView v = ViewOf(l, packed, &qweight, &qzeros);
  // Scales: GEMM [G, N], GEMV [N, 8Z] (columns >= G padding), GEMV_FAST F16
  // [8Z, N] beside its F16 scaled zeros [8Z, N] (section 4).
  const int dtype = l.version == 2 ? 0 : *rc::gen::inRange(0, 3);
  const int width = dtype == 2 ? 4 : 2;
  const std::int64_t slots = l.version == 0 ? G : 8 * v.zeros_width;
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(slots * N * width));
  std::vector<std::uint8_t> scaled_zeros(l.version == 2 ? scales.size() : 0);
  std::vector<float> scale(static_cast<std::size_t>(slots * N)), scaled_zero(scaled_zeros.size() / 2);
  for (std::size_t i = 0; i < scale.size(); ++i) {
    const std::uint32_t bits = ScaleBits(dtype);
    for (int b = 0; b < width; ++b) scales[i * width + b] = static_cast<std::uint8_t>(bits >> (8 * b));
    scale[i] = ScaleValue(dtype, bits);
  }
  for (std::size_t i = 0; i < scaled_zero.size(); ++i) {
    const std::uint32_t bits = ScaleBits(0);
    scaled_zeros[2 * i] = static_cast<std::uint8_t>(bits);
    scaled_zeros[2 * i + 1] = static_cast<std::uint8_t>(bits >> 8);
    scaled_zero[i] = ScaleValue(0, bits);
  }
  v.scales = scales.data();
  v.scales_dtype = dtype == 0 ? qd::codec::Dtype::kF16 : dtype == 1 ? qd::codec::Dtype::kBF16 : qd::codec::Dtype::kF32;
  if (l.version == 2) v.qzeros = scaled_zeros.data();
  const std::int64_t n0 = *rc::gen::inRange<std::int64_t>(0, N);
  const std::int64_t n1 = *rc::gen::inRange<std::int64_t>(n0 + 1, N + 1);
  auto same = [](float a, float b) {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
  };
  std::vector<float> scalar(static_cast<std::size_t>((n1 - n0) * K));
  qd::codec::AwqDequantizeRows(v, n0, n1, scalar.data(), qd::codec::Kernel::kScalar);
  for (std::int64_t n = n0; n < n1; ++n) {
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t g = k / gs;
      const float c = static_cast<float>(codes[k * N + n]);
      float expect = 0.0f;
      if (l.version == 2) {
        const float product = c * scale[g * N + n];
        expect = product + scaled_zero[g * N + n];
      } else {
        const std::int64_t at = l.version == 0 ? g * N + n : n * slots + g;
        expect = static_cast<float>(codes[k * N + n] - zeros[g * N + n]) * scale[at];
      }
      if (!same(scalar[(n - n0) * K + k], expect)) {
        RC_FAIL(std::string(kVersions[l.version]) + " scalar out[" + std::to_string(n) + "][" + std::to_string(k) + "]");
      }
    }
  }
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    std::vector<float> out(scalar.size(), -1.0f);
    qd::codec::AwqDequantizeRows(v, n0, n1, out.data(), kernel);
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (!same(out[i], scalar[i])) {
        RC_FAIL(std::string(kVersions[l.version]) + " " + std::string(qd::codec::KernelName(kernel)) + " K " +
                std::to_string(K) + " gs " + std::to_string(gs) + " rows " + std::to_string(n0) + ".." +
                std::to_string(n1) + ": element " + std::to_string(i));
      }
    }
  }
}

// A GEMV_FAST layer with no output row and 2^40 inputs holds no byte, yet
// its scale and zero grids have 2^35 rows (8Z for G = 2^35 groups of 32):
// both readers accept it at once and decode an empty [0, 2^40] weight,
// without walking the empty grids (they skip an empty region whole).
TEST(AwqEmptyLayer, HugeEmptyDimensionIsReadWithoutWalkingIt) {
  const std::uint64_t k = std::uint64_t{1} << 40;
  const std::uint64_t slots = 8 * static_cast<std::uint64_t>(qd::codec::AwqZerosWidth(static_cast<std::int64_t>(k), 32));
  ASSERT_EQ(slots, k / 32);  // G = 2^35 is a multiple of 32: no padding slot
  std::vector<qd::codec::TensorWithBytes> tensors = {
      {{"layer.qweight", "I16", {0, k}, 0}, {}},
      {{"layer.qzeros", "F16", {slots, 0}, 0}, {}},
      {{"layer.scales", "F16", {slots, 0}, 0}, {}},
  };
  const std::vector<std::uint8_t> file = qd::codec::SerializeSafetensors(tensors, nullptr);
  const std::string config = R"({"bits":4,"group_size":32,"quant_method":"awq","version":"gemv_fast"})";
  const std::vector<qd::SideFile> configs = {{"quantize_config.json", {config.begin(), config.end()}}};
  const qd::ByteView view{file.data(), file.size()};
  const qd::harness::FormatEntry& awq = *qd::harness::FindFormat("awq");
  EXPECT_EQ(qd::harness::DetectFormat(view, configs).name, "awq");
  const qd::Outcome codec = awq.codec_read(view, "empty.safetensors", configs);
  const qd::Outcome oracle = awq.oracle_read(view, "empty.safetensors", configs);
  ASSERT_FALSE(codec.refused);
  EXPECT_FALSE(qd::harness::Compare(codec, oracle, "awq").has_value());
  ASSERT_EQ(codec.tensors.size(), 1u);
  EXPECT_EQ(codec.tensors[0].shape, (std::vector<std::uint64_t>{0, k}));
}

}  // namespace
