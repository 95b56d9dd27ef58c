// gptq_codec_test: the GPTQ reader on hand-built files: every layer rule of
// docs/gptq.md section 3 (L1..L10) with its finding fields (byte offsets
// worked out by hand from the layout each test writes), layer discovery and
// geometry. The config steps are in tests/gptq_config_codec_test.cc; the
// detection API, the decoded output, its streaming order and hand-computed
// dequantized values in tests/gptq_decode_codec_test.cc.
// Expected values come from the contract, not from running the code.
// tests/peer/gptq_peer_test.cc checks the same code against upstream output.
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

// ---- layers: L1..L4 ------------------------------------------------------------

TEST(GptqLayer, MissingMemberIsGptq101) {
  {
    FileSpec f = DefaultFile();
    f.Erase("layer.qzeros");
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-101", "layer.qweight", "qzeros"));
  }
  {
    FileSpec f = DefaultFile();
    f.Erase("layer.g_idx");
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-101", "layer.qweight", "g_idx"));
  }
  {
    FileSpec f = DefaultFile();
    f.Erase("layer.qweight");
    f.Erase("layer.scales");
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-101", "layer.qzeros", "qweight"));
  }
  {
    FileSpec f;
    f.Add("a.b.g_idx", "I32", {1}, Words({0}));
    f.Add("a.b.scales", "F16", {1, 1}, Halves({0x3c00}));
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-101", "a.b.scales", "qweight"));
  }
  {
    // A name without a dot: prefix "".
    FileSpec f;
    f.Add("qweight", "I32", {1, 1}, Words({0}));
    f.Add("x", "F32", {1}, Words({0}));
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-101", "qweight", "qzeros"));
  }
  {
    // A bias alone is no layer.
    FileSpec f = DenseFile();
    f.Add("p.bias", "F16", {2}, Halves({0x3c00, 0x4000}));
    const GptqResult r = Read(f, {Cfg(kCfg4)});
    ExpectAccepted(r);
    EXPECT_FALSE(r.is_gptq);
  }
}

TEST(GptqLayer, DenseWeightBesideLayerIsGptq102) {
  FileSpec f = DefaultFile();
  f.Add("layer.weight", "F16", {32, 64}, Halves(std::vector<std::uint16_t>(32 * 64, 0)));
  f.Add("layer.extra", "F32", {1}, Words({0}));  // L2 comes before L3's warning
  const GptqResult r = Read(f, {Cfg(kCfg4)});
  ExpectRefused(r, HeaderWant("GPTQ-102", "layer.weight", "weight"));
  EXPECT_EQ(r.findings.size(), 1u);
}

TEST(GptqLayer, UnknownSiblingsWarnGptq103InOrder) {
  FileSpec f;
  f.Add("layer.zeta", "F32", {1}, Words({0x3f800000u}));
  AddLayer(&f, Layer{});
  f.Add("layer.alpha", "I32", {1}, Words({0}));
  f.Add("layer.qweight.x", "F32", {1}, Words({0}));  // prefix layer.qweight.: no sibling
  f.Add("layer.", "F32", {1}, Words({0}));           // suffix ""
  const GptqResult r = Read(f, {Cfg(kCfg4)});
  ExpectAccepted(r, {"GPTQ-103", "GPTQ-103", "GPTQ-103"});
  ExpectFinding(r.findings[0], Want{"GPTQ-103", kFile, "layer.zeta", "zeta", 8, -1, -1, qd::Severity::kWarning});
  ExpectFinding(r.findings[1], Want{"GPTQ-103", kFile, "layer.alpha", "alpha", 8, -1, -1, qd::Severity::kWarning});
  ExpectFinding(r.findings[2], Want{"GPTQ-103", kFile, "layer.", "", 8, -1, -1, qd::Severity::kWarning});
}

TEST(GptqLayer, DtypeAndRankAreGptq104) {
  struct Case {
    std::string tensor, dtype;
    std::vector<std::uint64_t> shape;
    std::size_t bytes;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"layer.qweight", "F32", {8, 32}, 1024, "dtype"},
      {"layer.qweight", "U32", {8, 32}, 1024, "dtype"},
      {"layer.qweight", "I32", {256}, 1024, "shape"},
      {"layer.qweight", "I32", {8, 32, 1}, 1024, "shape"},
      {"layer.qzeros", "I64", {2, 2}, 32, "dtype"},
      {"layer.qzeros", "I32", {8}, 32, "shape"},
      {"layer.scales", "I32", {2, 32}, 256, "dtype"},
      {"layer.scales", "F64", {2, 32}, 512, "dtype"},
      {"layer.scales", "F8_E4M3", {2, 32}, 64, "dtype"},
      {"layer.scales", "F16", {64}, 128, "shape"},
      {"layer.g_idx", "U32", {64}, 256, "dtype"},
      {"layer.g_idx", "I32", {1, 64}, 256, "shape"},
      {"layer.bias", "I32", {32}, 128, "dtype"},
      {"layer.bias", "F64", {32}, 256, "dtype"},
      {"layer.bias", "F16", {1, 32}, 64, "shape"},
      {"layer.bias", "BF16", {}, 2, "shape"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tensor + " " + c.dtype);
    Layer l;
    l.bias = true;
    FileSpec f;
    AddLayer(&f, l);
    auto* t = f.Find(c.tensor);
    t->spec.dtype = c.dtype;
    t->spec.shape = c.shape;
    t->bytes.assign(c.bytes, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-104", c.tensor, c.field));
  }
  {
    // Members in the order qweight, qzeros, scales, g_idx, bias.
    FileSpec f = DefaultFile();
    f.Find("layer.scales")->spec.dtype = "BF16";
    f.Find("layer.g_idx")->spec.dtype = "U32";
    f.Find("layer.qzeros")->spec.shape = {8};
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-104", "layer.qzeros", "shape"));
  }
  // F16, BF16, F32 scales are all accepted; so are bias dtypes.
  for (const std::string dtype : {"F16", "BF16", "F32"}) {
    Layer l;
    l.scales_dtype = dtype;
    l.bias = true;
    FileSpec f;
    AddLayer(&f, l);
    ExpectAccepted(Read(f, {Cfg(kCfg4)}));
  }
}

// ---- layers: L5..L8 geometry ------------------------------------------------------

TEST(GptqLayer, QweightShapeIsGptq002) {
  {
    // One extra qweight row: Kq = 72 gives 3 groups, scales have 2 -> K = Kg = 64.
    FileSpec f = DefaultFile();
    auto* q = f.Find("layer.qweight");
    q->spec.shape = {9, 32};
    q->bytes.assign(9 * 32 * 4, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-002", "layer.qweight", "shape"));
  }
  {
    // AutoGPTQ's truncated K 48: Kq 32 (1 group != 2 scale rows) -> K = Kg = 48.
    Layer l;
    l.k = 48;
    FileSpec f;
    AddLayer(&f, l);  // qweight [48/32*4 = 4, 32], g_idx [48]
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-002", "layer.qweight", "shape"));
  }
  {
    // Kq = 48 agrees with 2 groups: K = 48, not a multiple of 32.
    FileSpec f = DefaultFile();
    auto* q = f.Find("layer.qweight");
    q->spec.shape = {6, 32};
    q->bytes.assign(6 * 32 * 4, 0);
    auto* g = f.Find("layer.g_idx");
    g->spec.shape = {48};
    g->bytes.resize(48 * 4);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-002", "layer.qweight", "shape"));
  }
  {
    // 3 bits, one qweight row: 32 / 3 is no integer, so K = Kg = 64 (6 rows).
    Layer l;
    l.bits = 3;
    FileSpec f;
    AddLayer(&f, l);
    auto* q = f.Find("layer.qweight");
    q->spec.shape = {1, 32};
    q->bytes.assign(32 * 4, 0);
    ExpectRefused(Read(f, {Cfg(R"({"bits": 3, "group_size": 32})")}),
                  HeaderWant("GPTQ-002", "layer.qweight", "shape"));
    // The config's bits, not the tensors', decide: a 3-bit layer read as 4-bit.
    FileSpec g;
    AddLayer(&g, Layer{.bits = 3});
    ExpectRefused(Read(g, {Cfg(kCfg4)}), HeaderWant("GPTQ-002", "layer.qweight", "shape"));
  }
}

TEST(GptqLayer, QzerosShapeIsGptq003) {
  {
    // N 48: the literal formula 48 / 32 * 4 = 4 holds, but N is no multiple of 32.
    Layer l;
    l.n = 48;
    FileSpec f;
    AddLayer(&f, l);  // qzeros [2, 48/32*4 = 4]
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-003", "layer.qzeros", "shape"));
  }
  {
    FileSpec f = DefaultFile();
    auto* z = f.Find("layer.qzeros");
    z->spec.shape = {2, 5};
    z->bytes.assign(40, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-003", "layer.qzeros", "shape"));
  }
  {
    FileSpec f = DefaultFile();
    auto* z = f.Find("layer.qzeros");
    z->spec.shape = {3, 4};
    z->bytes.assign(48, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-003", "layer.qzeros", "shape"));
  }
}

TEST(GptqLayer, ScalesAndBiasShapeAreGptq105) {
  {
    FileSpec f = DefaultFile();
    auto* s = f.Find("layer.scales");
    s->spec.shape = {2, 31};
    s->bytes.assign(2 * 31 * 2, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-105", "layer.scales", "shape"));
  }
  {
    // 3 scale rows: Kq = 64 needs 2 groups, so K = Kg = 64 and G = 2 != 3.
    FileSpec f = DefaultFile();
    auto* s = f.Find("layer.scales");
    s->spec.shape = {3, 32};
    s->bytes.assign(3 * 32 * 2, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-105", "layer.scales", "shape"));
  }
  {
    Layer l;
    l.bias = true;
    FileSpec f;
    AddLayer(&f, l);
    auto* b = f.Find("layer.bias");
    b->spec.shape = {31};
    b->bytes.assign(62, 0);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-105", "layer.bias", "shape"));
  }
}

TEST(GptqLayer, GidxIsGptq004) {
  {
    // 63 entries: Kq = 64 agrees with the 2 scale rows, so K = 64.
    FileSpec f = DefaultFile();
    auto* g = f.Find("layer.g_idx");
    g->spec.shape = {63};
    g->bytes.resize(63 * 4);
    ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-004", "layer.g_idx", "shape"));
  }
  // g_idx data begins at 1184; element k at + 4k.
  auto with_gidx = [](std::vector<std::pair<int, std::uint32_t>> sets) {
    FileSpec f = DefaultFile();
    auto* g = f.Find("layer.g_idx");
    for (auto [k, v] : sets) {
      for (int i = 0; i < 4; ++i) g->bytes[4 * k + i] = static_cast<std::uint8_t>(v >> (8 * i));
    }
    return f.Bytes();
  };
  {
    const auto bytes = with_gidx({{5, 2}});
    ExpectRefused(Read(bytes, {Cfg(kCfg4)}),
                  Want{"GPTQ-004", kFile, "layer.g_idx", "g_idx", DataStart(bytes) + 1184 + 20, -1, 5});
  }
  {
    const auto bytes = with_gidx({{63, 0xffffffffu}, {40, 0x80000000u}});
    ExpectRefused(Read(bytes, {Cfg(kCfg4)}),
                  Want{"GPTQ-004", kFile, "layer.g_idx", "g_idx", DataStart(bytes) + 1184 + 160, -1, 40});
  }
  {
    // Any order and any existing group is fine (act order, unused groups).
    const auto bytes = with_gidx({{0, 1}, {63, 0}, {10, 1}});
    ExpectAccepted(Read(bytes, {Cfg(kCfg4)}));
  }
  {
    // group_size -1: one group; g_idx 1 is out of range.
    Layer l;
    l.group_size = -1;
    l.groups = 1;
    FileSpec f;
    AddLayer(&f, l);
    ExpectAccepted(Read(f, {Cfg(R"({"bits": 4, "group_size": -1})")}));
    f.Find("layer.g_idx")->bytes[4 * 7] = 1;
    const auto bytes = f.Bytes();
    // qweight 1024, qzeros [1, 4] 16, scales [1, 32] F16 64: g_idx at 1104.
    ExpectRefused(Read(bytes, {Cfg(R"({"bits": 4, "group_size": -1})")}),
                  Want{"GPTQ-004", kFile, "layer.g_idx", "g_idx", DataStart(bytes) + 1104 + 28, -1, 7});
  }
}

TEST(GptqLayer, PartialLastGroupAndGroupSizeAll) {
  {
    // K 160 with group 128: 2 groups, the last partial (2 bits: qweight [10, 64]).
    Layer l;
    l.bits = 2;
    l.k = 160;
    l.n = 64;
    l.group_size = 128;
    l.groups = 2;
    FileSpec f;
    AddLayer(&f, l);
    const GptqResult r = Read(f, {Cfg(R"({"bits": 2, "group_size": 128, "desc_act": true})")});
    ExpectAccepted(r);
    ASSERT_EQ(r.layers.size(), 1u);
    EXPECT_EQ(r.layers[0].in_features, 160);
    EXPECT_EQ(r.layers[0].out_features, 64);
    EXPECT_EQ(r.layers[0].groups, 2);
  }
  {
    Layer l;
    l.bits = 8;
    l.k = 96;
    l.groups = 1;
    l.group_size = -1;
    FileSpec f;
    AddLayer(&f, l);
    const GptqResult r = Read(f, {Cfg(R"({"bits": 8, "group_size": -1})")});
    ExpectAccepted(r);
    ASSERT_EQ(r.layers.size(), 1u);
    EXPECT_EQ(r.layers[0].groups, 1);
    EXPECT_EQ(r.layers[0].in_features, 96);
  }
}

TEST(GptqLayer, ShapeArithmeticIsExact) {
  // qweight [2^59, 0] at 4 bits: Kq = 2^59 * 32 / 4 = 2^62 (2^64 overflows a
  // u64 product), n_groups(2^62) = 2^57 scale rows -> K = 2^62, so L5..L7
  // pass and g_idx [0] fails its length (GPTQ-004), not GPTQ-002.
  FileSpec f;
  f.Add("l.qweight", "I32", {1ull << 59, 0}, {});
  f.Add("l.qzeros", "I32", {1ull << 57, 0}, {});
  f.Add("l.scales", "F16", {1ull << 57, 0}, {});
  f.Add("l.g_idx", "I32", {0}, {});
  ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-004", "l.g_idx", "shape"));
}

TEST(GptqLayer, EmptyLayerWithHugeOutFeaturesIsAccepted) {
  // K = 0, G = 0, N = 2^64 - 32: no data at all, a [N, 0] weight.
  const std::uint64_t n = ~std::uint64_t{0} - 31;
  FileSpec f;
  f.Add("l.qweight", "I32", {0, n}, {});
  f.Add("l.qzeros", "I32", {0, n / 32 * 4}, {});
  f.Add("l.scales", "F16", {0, n}, {});
  f.Add("l.g_idx", "I32", {0}, {});
  const auto bytes = f.Bytes();
  const qd::Outcome o = qd::codec::DecodeGptqFile({bytes.data(), bytes.size()}, kFile, {Cfg(kCfg4)});
  EXPECT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].name, "l.weight");
  EXPECT_EQ(o.tensors[0].shape, (std::vector<std::uint64_t>{n, 0}));
  EXPECT_TRUE(o.tensors[0].values.empty());
}

// ---- layers: L9, L10 values -------------------------------------------------------

TEST(GptqLayer, NonFiniteScaleIsGptq106) {
  auto set_half = [](FileSpec* f, std::size_t i, std::uint16_t v) {
    auto& b = f->Find("layer.scales")->bytes;
    b[2 * i] = static_cast<std::uint8_t>(v);
    b[2 * i + 1] = static_cast<std::uint8_t>(v >> 8);
  };
  {
    // F16 scales at 1056: (g 1, n 3) is element 35, byte 70.
    FileSpec f = DefaultFile();
    set_half(&f, 35, 0x7e00);
    const auto bytes = f.Bytes();
    ExpectRefused(Read(bytes, {Cfg(kCfg4)}),
                  Want{"GPTQ-106", kFile, "layer.scales", "scales", DataStart(bytes) + 1056 + 70, 1, 3});
  }
  {
    FileSpec f = DefaultFile();
    set_half(&f, 35, 0x7e00);
    set_half(&f, 33, 0xfc00);  // -inf earlier in storage order
    const auto bytes = f.Bytes();
    ExpectRefused(Read(bytes, {Cfg(kCfg4)}),
                  Want{"GPTQ-106", kFile, "layer.scales", "scales", DataStart(bytes) + 1056 + 66, 1, 1});
  }
  {
    // BF16 NaN at (0, 1).
    FileSpec f;
    AddLayer(&f, Layer{.scales_dtype = "BF16"});
    set_half(&f, 1, 0x7fc1);
    const auto bytes = f.Bytes();
    ExpectRefused(Read(bytes, {Cfg(kCfg4)}),
                  Want{"GPTQ-106", kFile, "layer.scales", "scales", DataStart(bytes) + 1056 + 2, 0, 1});
  }
  {
    // F32 -inf at (1, 31): scales [2, 32] F32 at 1056, byte 63 * 4.
    FileSpec f;
    AddLayer(&f, Layer{.scales_dtype = "F32"});
    auto& b = f.Find("layer.scales")->bytes;
    const std::vector<std::uint8_t> ninf = Words({0xff800000u});
    std::copy(ninf.begin(), ninf.end(), b.begin() + 63 * 4);
    const auto bytes = f.Bytes();
    ExpectRefused(Read(bytes, {Cfg(kCfg4)}),
                  Want{"GPTQ-106", kFile, "layer.scales", "scales", DataStart(bytes) + 1056 + 252, 1, 31});
  }
  {
    // Largest finite, subnormal, zeros of both signs: fine.
    FileSpec f = DefaultFile();
    set_half(&f, 0, 0x7bff);
    set_half(&f, 1, 0x0001);
    set_half(&f, 2, 0x8000);
    set_half(&f, 3, 0x0000);
    set_half(&f, 4, 0xfbff);
    ExpectAccepted(Read(f, {Cfg(kCfg4)}));
  }
}

TEST(GptqLayer, FloodedV1ZeroWarnsGptq107) {
  {
    // qzeros [2, 4] at 1024; word (1, 2) = 0x000f0000: field at bit 16 of word
    // 2 is n = 2 * 8 + 4 = 20; byte 4 * (1 * 4 + 20 * 4 / 32) = 24.
    FileSpec f = DefaultFile();
    auto& z = f.Find("layer.qzeros")->bytes;
    const auto w = Words({0x000f0000u, 0xffffffffu});
    std::copy(w.begin(), w.begin() + 4, z.begin() + 24);
    std::copy(w.begin() + 4, w.end(), z.begin() + 28);  // later fields: still one warning
    const auto bytes = f.Bytes();
    const GptqResult r = Read(bytes, {Cfg(kCfg4)});
    ExpectAccepted(r, {"GPTQ-107"});
    ExpectFinding(r.findings[0], Want{"GPTQ-107", kFile, "layer.qzeros", "qzeros",
                                      DataStart(bytes) + 1024 + 24, 1, 20, qd::Severity::kWarning});
    // v2 and planar zeros have no such warning.
    ExpectAccepted(Read(bytes, {Cfg(R"({"bits": 4, "group_size": 32, "format": "gptq_v2"})")}));
    ExpectAccepted(Read(bytes, {Cfg(R"({"bits": 4, "group_size": 32, "format": "gptq_p"})")}));
  }
  // 3 bits, K 32, N 32, one group: qweight [3, 32] 0..384, qzeros [1, 3] at 384.
  auto three_bit = [](std::vector<std::uint32_t> zeros) {
    Layer l;
    l.bits = 3;
    l.k = 32;
    l.groups = 1;
    FileSpec f;
    AddLayer(&f, l);
    f.Find("layer.qzeros")->bytes = Words(zeros);
    return f.Bytes();
  };
  const std::string cfg3 = R"({"bits": 3, "group_size": 32})";
  {
    // Field 10: bits 30..31 of word 0 and bit 0 of word 1; its word is word 0.
    const auto bytes = three_bit({0xc0000000u, 0x00000001u, 0});
    const GptqResult r = Read(bytes, {Cfg(cfg3)});
    ExpectAccepted(r, {"GPTQ-107"});
    ExpectFinding(r.findings[0], Want{"GPTQ-107", kFile, "layer.qzeros", "qzeros",
                                      DataStart(bytes) + 384, 0, 10, qd::Severity::kWarning});
  }
  {
    // Field 21: bit 31 of word 1 and bits 0..1 of word 2: byte 4 * (63 / 32) = 4.
    const auto bytes = three_bit({0, 0x80000000u, 0x00000003u});
    const GptqResult r = Read(bytes, {Cfg(cfg3)});
    ExpectAccepted(r, {"GPTQ-107"});
    ExpectFinding(r.findings[0], Want{"GPTQ-107", kFile, "layer.qzeros", "qzeros",
                                      DataStart(bytes) + 384 + 4, 0, 21, qd::Severity::kWarning});
  }
  {
    // Half a straddling field set is no flood: field 10 = 3, field 21 = 4.
    ExpectAccepted(Read(three_bit({0xc0000000u, 0x80000000u, 0}), {Cfg(cfg3)}));
  }
}

TEST(GptqLayer, LayersAreCheckedInAnchorOrder) {
  // "z." lies first in the data, "a." second; both broken: z's error is met.
  FileSpec f;
  AddLayer(&f, Layer{.prefix = "z."});
  AddLayer(&f, Layer{.prefix = "a."});
  f.Find("z.qzeros")->spec.shape = {4, 2};
  f.Find("a.qzeros")->spec.shape = {4, 2};
  ExpectRefused(Read(f, {Cfg(kCfg4)}), HeaderWant("GPTQ-003", "z.qzeros", "shape"));
  // Warnings of an earlier layer are kept before a later layer's error.
  FileSpec g;
  AddLayer(&g, Layer{.prefix = "z.", .zero_word = 0x0000000fu});
  AddLayer(&g, Layer{.prefix = "a."});
  g.Find("a.qzeros")->spec.shape = {4, 2};
  const GptqResult r = Read(g, {Cfg(kCfg4)});
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].rule, "GPTQ-107");
  EXPECT_EQ(r.findings[0].tensor, "z.qzeros");
  ExpectRefused(r, HeaderWant("GPTQ-003", "a.qzeros", "shape"));
  // The anchor is qweight even when another member lies earlier.
  FileSpec h;
  h.Add("m.g_idx", "I32", {64}, Words(std::vector<std::uint32_t>(64, 0)));
  AddLayer(&h, Layer{.prefix = "n."});
  h.Add("m.qweight", "I32", {8, 32}, Words(std::vector<std::uint32_t>(256, 0)));
  const GptqResult s = Read(h, {Cfg(kCfg4)});
  ExpectRefused(s, HeaderWant("GPTQ-101", "m.qweight", "qzeros"));
}

TEST(GptqLayer, ContainerRulesRunFirst) {
  std::vector<std::uint8_t> bytes = DefaultFile().Bytes();
  bytes.pop_back();
  const GptqResult r = Read(bytes, {});
  EXPECT_TRUE(r.refused);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.back().rule.rfind("ST-", 0), 0u);
}

TEST(GptqLayer, HostileBytesDoNotCrash) {
  const std::vector<std::uint8_t> base = DefaultFile().Bytes();
  std::uint64_t state = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::uint8_t> b = base;
    const int flips = 1 + round % 8;
    for (int i = 0; i < flips; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      b[(state >> 33) % b.size()] ^= static_cast<std::uint8_t>(state >> 20);
    }
    if (round % 3 == 0) b.resize((state >> 40) % b.size());
    const qd::Outcome o = qd::codec::DecodeGptqFile({b.data(), b.size()}, kFile, {Cfg(kCfg4)});
    int errors = 0;
    for (const qd::Finding& f : o.findings) errors += f.severity == qd::Severity::kError;
    EXPECT_EQ(errors, o.refused ? 1 : 0);
    (void)qd::codec::ClaimsGptq(qd::ByteView{b.data(), b.size()});
  }
}

}  // namespace
