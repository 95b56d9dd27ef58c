// gptq_decode_codec_test: the GPTQ reader's detection API (claims, layer
// views into the file, format names) and its decoded output on hand-built
// files: output order and streaming, a file without a layer, and
// dequantized values computed by hand per layout (v1 and v2, 3-bit
// continuous and planar, a flooded v1 zero, g_idx choosing the group).
// Expected values come from the contract (docs/gptq.md), not from running
// the code. The layer rules are tests/gptq_codec_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "tests/gptq_codec_files.h"
#include "tests/recording_sink.h"

namespace {

using namespace qd::gptq_codec_test;  // NOLINT: the shared builders

// ---- detection, views, names ---------------------------------------------------

TEST(GptqApi, ClaimsLayerMemberNames) {
  auto claims = [](const FileSpec& f) {
    const auto b = f.Bytes();
    return qd::codec::ClaimsGptq(qd::ByteView{b.data(), b.size()});
  };
  EXPECT_TRUE(claims(DefaultFile()));
  EXPECT_FALSE(claims(DenseFile()));
  FileSpec g;
  g.Add("x.g_idx", "I32", {1}, Words({0}));
  EXPECT_TRUE(claims(g));
  FileSpec s;
  s.Add("scales", "F32", {1}, Words({0}));
  EXPECT_TRUE(claims(s));
  FileSpec b;
  b.Add("x.bias", "F32", {1}, Words({0}));
  b.Add("x.qweight.y", "F32", {1}, Words({0}));
  EXPECT_FALSE(claims(b));
  const std::vector<std::uint8_t> junk = {1, 2, 3};
  EXPECT_FALSE(qd::codec::ClaimsGptq(qd::ByteView{junk.data(), junk.size()}));
  EXPECT_FALSE(qd::codec::ClaimsGptq(qd::ByteView{nullptr, 0}));
}

TEST(GptqApi, ViewPointsIntoTheFile) {
  Layer l;
  l.scales_dtype = "BF16";
  FileSpec f;
  AddLayer(&f, l);
  const auto bytes = f.Bytes();
  const GptqResult r = Read(bytes, {Cfg(R"({"bits": 4, "group_size": 32, "format": "gptq_v2"})")});
  ASSERT_FALSE(r.refused);
  ASSERT_EQ(r.layers.size(), 1u);
  const qd::codec::GptqLayerView v = qd::codec::ViewOf(r, r.layers[0]);
  const std::uint8_t* data = bytes.data() + DataStart(bytes);
  EXPECT_EQ(v.format, GptqFormat::kV2);
  EXPECT_EQ(v.bits, 4);
  EXPECT_EQ(v.in_features, 64);
  EXPECT_EQ(v.out_features, 32);
  EXPECT_EQ(v.groups, 2);
  EXPECT_EQ(v.qweight, data + 0);
  EXPECT_EQ(v.qzeros, data + 1024);
  EXPECT_EQ(v.scales, data + 1056);
  EXPECT_EQ(v.g_idx, data + 1184);
  EXPECT_EQ(v.scales_dtype, qd::codec::Dtype::kBF16);
}

TEST(GptqApi, FormatNames) {
  EXPECT_STREQ(qd::codec::GptqFormatName(GptqFormat::kV1), "gptq");
  EXPECT_STREQ(qd::codec::GptqFormatName(GptqFormat::kV2), "gptq_v2");
  EXPECT_STREQ(qd::codec::GptqFormatName(GptqFormat::kPlanar), "gptq_p");
}

// ---- decoded output and streaming ---------------------------------------------

using qd::test::RecordingSink;

TEST(GptqDecode, OutputOrderAndStreaming) {
  FileSpec f;
  f.Add("a.norm", "F16", {2}, Halves({0x3c00, 0xc000}));
  AddLayer(&f, Layer{.prefix = "model.l0.", .bias = true});
  f.Add("z.ids", "I32", {2}, Words({1, 2}));           // integer outside layers: left out
  f.Add("emb", "BF16", {2}, Halves({0x3f80, 0x4040}));  // floating: widened
  f.Add("model.l0.extra", "F64", {1}, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f});  // sibling: ordinary
  const auto bytes = f.Bytes();
  RecordingSink sink;
  const qd::Outcome o = qd::codec::StreamGptqFile({bytes.data(), bytes.size()}, kFile, {Cfg(kCfg4)}, sink,
                                                  qd::codec::Kernel::kScalar);
  ASSERT_FALSE(o.refused);
  EXPECT_TRUE(o.tensors.empty());
  ASSERT_EQ(o.findings.size(), 1u);
  EXPECT_EQ(o.findings[0].rule, "GPTQ-103");
  const std::vector<std::string> names = {"a.norm", "model.l0.weight", "model.l0.bias", "emb",
                                          "model.l0.extra"};
  const std::vector<std::vector<std::uint64_t>> shapes = {{2}, {32, 64}, {32}, {2}, {1}};
  ASSERT_EQ(sink.plan.size(), names.size());
  ASSERT_EQ(sink.tensors.size(), names.size());
  EXPECT_TRUE(sink.Complete());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(sink.plan[i].name, names[i]);
    EXPECT_EQ(sink.plan[i].shape, shapes[i]);
    EXPECT_EQ(sink.tensors[i].name, names[i]);
    EXPECT_EQ(sink.tensors[i].shape, shapes[i]);
  }
  EXPECT_EQ(sink.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(sink.tensors[1].values.size(), 32u * 64u);
  EXPECT_EQ(sink.tensors[2].values, std::vector<float>(32, 1.0f));
  EXPECT_EQ(sink.tensors[3].values, (std::vector<float>{1.0f, 3.0f}));
  EXPECT_EQ(sink.tensors[4].values, (std::vector<float>{1.0f}));
  // Decode = the stream collected.
  const qd::Outcome d = qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile, {Cfg(kCfg4)},
                                                  qd::codec::Kernel::kScalar);
  ASSERT_EQ(d.tensors.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(d.tensors[i].name, names[i]);
  // A sink that declines the plan gets nothing more.
  RecordingSink no;
  no.accept_plan = false;
  qd::codec::StreamGptqFile({bytes.data(), bytes.size()}, kFile, {Cfg(kCfg4)}, no);
  EXPECT_EQ(no.plans, 1);
  EXPECT_EQ(no.chunks, 0u);
  // A refused file announces nothing.
  RecordingSink none;
  const qd::Outcome refused = qd::codec::StreamGptqFile({bytes.data(), bytes.size()}, kFile, {}, none);
  EXPECT_TRUE(refused.refused);
  EXPECT_EQ(none.plans, 0);
}

TEST(GptqDecode, FileWithoutLayerDecodesItsFloatTensors) {
  FileSpec f = DenseFile();
  f.Add("i", "I32", {1}, Words({7}));
  const auto bytes = f.Bytes();
  const qd::Outcome o = qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile, {Cfg(kCfg4)});
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].name, "w");
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.0f, 2.0f}));
}

std::uint32_t Bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// out[n * K + k] from a function of (n, k), compared bit for bit.
void ExpectWeights(const qd::Outcome& o, const std::string& name, std::uint64_t n_out, std::uint64_t k_in,
                   float (*want)(std::uint64_t n, std::uint64_t k)) {
  ASSERT_FALSE(o.refused) << (o.findings.empty() ? "" : o.findings.back().rule);
  const qd::DecodedTensor* t = nullptr;
  for (const auto& d : o.tensors) {
    if (d.name == name) t = &d;
  }
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->shape, (std::vector<std::uint64_t>{n_out, k_in}));
  ASSERT_EQ(t->values.size(), n_out * k_in);
  int bad = 0;
  for (std::uint64_t n = 0; n < n_out; ++n) {
    for (std::uint64_t k = 0; k < k_in; ++k) {
      const float w = want(n, k);
      if (Bits(t->values[n * k_in + k]) != Bits(w) && bad++ < 5) {
        ADD_FAILURE() << "out[" << n << "][" << k << "] = " << t->values[n * k_in + k] << ", want " << w;
      }
    }
  }
}

// 4 bits, K 32, N 32, one group. qweight word (0, 0) = 0x21: code(0, 0) = 1,
// code(1, 0) = 2, every other code 0. qzeros word 0 = 0x87: field 0 = 7,
// field 1 = 8, others 0. scales: n 0 -> 0.5, n 1 -> -2, n 2 -> -1, else 1.
std::vector<std::uint8_t> FourBitFile() {
  FileSpec f;
  std::vector<std::uint32_t> qweight(4 * 32, 0);
  qweight[0] = 0x21;
  f.Add("p.qweight", "I32", {4, 32}, Words(qweight));
  f.Add("p.qzeros", "I32", {1, 4}, Words({0x87, 0, 0, 0}));
  std::vector<std::uint16_t> scales(32, 0x3c00);
  scales[0] = 0x3800;
  scales[1] = 0xc000;
  scales[2] = 0xbc00;
  f.Add("p.scales", "F16", {1, 32}, Halves(scales));
  f.Add("p.g_idx", "I32", {32}, Words(std::vector<std::uint32_t>(32, 0)));
  return f.Bytes();
}

TEST(GptqDecode, HandComputedV1AndV2) {
  const auto bytes = FourBitFile();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string(qd::codec::KernelName(kernel)));
    // v1: zero = field + 1: z(0) = 8, z(1) = 9, others 1.
    ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                            {Cfg(R"({"bits": 4, "group_size": -1})")}, kernel),
                  "p.weight", 32, 32, [](std::uint64_t n, std::uint64_t k) -> float {
                    if (n == 0) return k == 0 ? -3.5f : k == 1 ? -3.0f : -4.0f;  // (c - 8) * 0.5
                    if (n == 1) return 18.0f;                                    // (0 - 9) * -2
                    if (n == 2) return 1.0f;                                     // (0 - 1) * -1
                    return -1.0f;
                  });
    // v2: zero = field: z(0) = 7, z(1) = 8, others 0; (0 - 0) * -1 = -0.0.
    ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                            {Cfg(R"({"bits": 4, "group_size": 32, "format": "gptq_v2"})")},
                                            kernel),
                  "p.weight", 32, 32, [](std::uint64_t n, std::uint64_t k) -> float {
                    if (n == 0) return k == 0 ? -3.0f : k == 1 ? -2.5f : -3.5f;
                    if (n == 1) return 16.0f;
                    if (n == 2) return -0.0f;
                    return 0.0f;
                  });
  }
}

TEST(GptqDecode, HandComputedThreeBitContinuousAndPlanar) {
  // 3 bits, K 32, N 32, one group, F32 scales 1.0. qweight column 0 words
  // (rows 0, 1, 2) = 0x80000003, 0x00000001, 0x00000003; qzeros row words
  // 0x00000001, 0, 0x00000002.
  FileSpec f;
  std::vector<std::uint32_t> qweight(3 * 32, 0);
  qweight[0 * 32] = 0x80000003u;
  qweight[1 * 32] = 0x00000001u;
  qweight[2 * 32] = 0x00000003u;
  f.Add("p.qweight", "I32", {3, 32}, Words(qweight));
  f.Add("p.qzeros", "I32", {1, 3}, Words({0x1, 0, 0x2}));
  f.Add("p.scales", "F32", {1, 32}, Words(std::vector<std::uint32_t>(32, 0x3f800000u)));
  f.Add("p.g_idx", "I32", {32}, Words(std::vector<std::uint32_t>(32, 0)));
  const auto bytes = f.Bytes();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string(qd::codec::KernelName(kernel)));
    // Continuous v2: column 0 codes: field 0 = 3; field 10 = (w0 >> 30) | (w1 << 2)
    // = 2 | 4 = 6; field 21 = (w1 >> 31) | (w2 << 1) = 0 | 6 = 6; field 22 =
    // (w2 >> 2) & 7 = 0; others 0. Zeros: field 0 = 1, field 21 =
    // (z1 >> 31) | (z2 << 1) = 4, field 22 = (z2 >> 2) & 7 = 0, others 0.
    ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                            {Cfg(R"({"bits": 3, "group_size": 32, "format": "gptq_v2"})")},
                                            kernel),
                  "p.weight", 32, 32, [](std::uint64_t n, std::uint64_t k) -> float {
                    const int z = n == 0 ? 1 : n == 21 ? 4 : 0;
                    int c = 0;
                    if (n == 0) c = k == 0 ? 3 : k == 10 ? 6 : k == 21 ? 6 : 0;
                    return static_cast<float>(c - z);
                  });
    // Planar (planes [2, 1]): column 0: part0 of k from word k / 16 at bit
    // 2 (k % 16); part1 from word 2 bit k. Word 0 = 0x80000003: k 0 -> 3,
    // k 15 -> 2; word 1 = 1: k 16 -> 1; word 2 = 3: k 0, 1 get + 4.
    // codes: k0 = 7, k1 = 4, k15 = 2, k16 = 1. Zeros row: word 0 = 1: n 0 -> 1;
    // word 2 = 2: n 1 -> 4.
    ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                            {Cfg(R"({"bits": 3, "group_size": 32, "format": "gptq_p"})")},
                                            kernel),
                  "p.weight", 32, 32, [](std::uint64_t n, std::uint64_t k) -> float {
                    const int z = n == 0 ? 1 : n == 1 ? 4 : 0;
                    int c = 0;
                    if (n == 0) c = k == 0 ? 7 : k == 1 ? 4 : k == 15 ? 2 : k == 16 ? 1 : 0;
                    return static_cast<float>(c - z);
                  });
    // v1 reading of the same words: zero = field + 1.
    ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                            {Cfg(R"({"bits": 3, "group_size": 32})")}, kernel),
                  "p.weight", 32, 32, [](std::uint64_t n, std::uint64_t k) -> float {
                    const int z = 1 + (n == 0 ? 1 : n == 21 ? 4 : 0);
                    int c = 0;
                    if (n == 0) c = k == 0 ? 3 : k == 10 ? 6 : k == 21 ? 6 : 0;
                    return static_cast<float>(c - z);
                  });
  }
}

TEST(GptqDecode, FloodedV1ZeroDecodesAsTwoToTheBits) {
  // 4 bits, one group; qzeros field 0 = 15 -> zero 16, not 0; code 0; scale 1.
  FileSpec f;
  f.Add("p.qweight", "I32", {4, 32}, Words(std::vector<std::uint32_t>(128, 0)));
  f.Add("p.qzeros", "I32", {1, 4}, Words({0xf, 0, 0, 0}));
  f.Add("p.scales", "F16", {1, 32}, Halves(std::vector<std::uint16_t>(32, 0x3c00)));
  f.Add("p.g_idx", "I32", {32}, Words(std::vector<std::uint32_t>(32, 0)));
  const auto bytes = f.Bytes();
  const qd::Outcome o = qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                                  {Cfg(R"({"bits": 4, "group_size": 32})")});
  ASSERT_EQ(o.findings.size(), 1u);
  EXPECT_EQ(o.findings[0].rule, "GPTQ-107");
  ExpectWeights(o, "p.weight", 32, 32,
                [](std::uint64_t n, std::uint64_t) -> float { return n == 0 ? -16.0f : -1.0f; });
}

TEST(GptqDecode, GidxSelectsTheGroup) {
  // 8 bits, K 32, N 32, group 16 -> 2 groups; g_idx reversed halves: k < 16
  // uses group 1, k >= 16 group 0. qweight all 0; qzeros v2 group 0 fields 1,
  // group 1 fields 2 (bytes); scales group 0 = 1, group 1 = 0.5 (F16).
  FileSpec f;
  f.Add("p.qweight", "I32", {8, 32}, Words(std::vector<std::uint32_t>(256, 0)));
  std::vector<std::uint32_t> z(16, 0x01010101u);
  for (int i = 8; i < 16; ++i) z[i] = 0x02020202u;
  f.Add("p.qzeros", "I32", {2, 8}, Words(z));
  std::vector<std::uint16_t> s(64, 0x3c00);
  for (int i = 32; i < 64; ++i) s[i] = 0x3800;
  f.Add("p.scales", "F16", {2, 32}, Halves(s));
  std::vector<std::uint32_t> g(32);
  for (int k = 0; k < 32; ++k) g[k] = k < 16 ? 1 : 0;
  f.Add("p.g_idx", "I32", {32}, Words(g));
  const auto bytes = f.Bytes();
  ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                          {Cfg(R"({"bits": 8, "group_size": 16, "format": "gptq_v2"})")}),
                "p.weight", 32, 32,
                [](std::uint64_t, std::uint64_t k) -> float { return k < 16 ? -1.0f : -1.0f; });
  // v1: zeros 2 and 3: k < 16 -> (0 - 3) * 0.5, k >= 16 -> (0 - 2) * 1.
  ExpectWeights(qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile,
                                          {Cfg(R"({"bits": 8, "group_size": 16})")}),
                "p.weight", 32, 32,
                [](std::uint64_t, std::uint64_t k) -> float { return k < 16 ? -1.5f : -2.0f; });
}

}  // namespace
