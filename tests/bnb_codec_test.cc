// bnb_codec_test: the bitsandbytes codec on hand-built files (every BNB rule,
// finding fields and offsets, layouts, output order), robustness and the
// encoders' documented edge cases. Kernel agreement and the strict JSON
// parser are bnb_kernels_test.cc.
// tests/peer/bnb_peer_test.cc checks the same code against bnb's own output.
//
// Expected decoded values never come from the codec: the NF4 / FP4 tables are
// the tests' transcription of TABLES.json (property_tests/gen/bnb_tables.h;
// spec 000 and docs/bnb.md "Decoding"), the rounding to the restored dtype is
// the tests' own (property_tests/gen/half.h: binary16 and bfloat16, nearest
// even, NaNs quieted with their leading payload bits, IEEE 754-2019 6.2.3),
// and the int8 scale is docs/bnb.md's literal 0x3c010204.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "codecs/strict_json.h"
#include "property_tests/gen/bnb_tables.h"
#include "property_tests/gen/half.h"
#include "tests/bnb_codec_test_support.h"

namespace {

using namespace qd_bnb_test;  // NOLINT(google-build-using-namespace): the files and checks of the tests

// ---- reader: layouts and outputs ---------------------------------------------------

TEST(BnbReader, DecodesHfLayoutWithEveryKernel) {
  for (bool nested : {false, true}) {
    FourBit f = Make4bit("model.w", {17, 129}, Bnb4bitType::kNf4, 64, nested, "bfloat16");
    f.spec.Put("model.a_bias", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0});  // 1, -2
    f.spec.Put("zz.ids", "I32", {1}, {1, 0, 0, 0});                       // not floating: skipped
    const std::vector<float> want = Reference4bit(f, Bnb4bitType::kNf4, 17 * 129, 64, BnbDtype::kBfloat16);
    for (Kernel k : qd::codec::AvailableKernels()) {
      const qd::Outcome o = Decode(f.spec, k);
      ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
      EXPECT_TRUE(o.findings.empty());
      ASSERT_EQ(o.tensors.size(), 2u);
      EXPECT_EQ(o.tensors[0].name, "model.a_bias");  // by name bytes
      EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
      EXPECT_EQ(o.tensors[1].name, "model.w");
      EXPECT_EQ(o.tensors[1].shape, (std::vector<std::uint64_t>{17, 129}));
      std::string where;
      EXPECT_TRUE(SameBits(o.tensors[1].values, want, &where)) << where;
    }
  }
}

TEST(BnbReader, DecodesGptqLayoutIncludingAnEmptyPrefix) {
  for (const std::string m : {"layers.0.", ""}) {
    FourBit f = Make4bit(m + "weight", {3, 37}, Bnb4bitType::kFp4, 32, false, "float32");
    FileSpec g;
    g.tensors[m + "weight"] = f.spec.tensors[m + "weight"];
    g.tensors[m + "weight_absmax"] = f.spec.tensors[m + "weight.absmax"];
    g.tensors[m + "weight_absmax"].spec.name = m + "weight_absmax";
    g.PutJson(m + "weight_quant_state", StateJson("fp4", 32, "float32", {3, 37}, nullptr));
    const qd::Outcome o = Decode(g);
    ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
    ASSERT_EQ(o.tensors.size(), 1u);
    EXPECT_EQ(o.tensors[0].name, m + "weight");
    std::string where;
    EXPECT_TRUE(SameBits(o.tensors[0].values, Reference4bit(f, Bnb4bitType::kFp4, 111, 32, BnbDtype::kFloat32), &where));
  }
}

TEST(BnbReader, QuantStorageAndTheTransposeQuirk) {
  // Packed bytes held in an F16 tensor: read as raw bytes, not as floats.
  FourBit f = Make4bit("w", {8, 32}, Bnb4bitType::kNf4, 64, false, "float32");
  f.spec.Put("w", "F16", {f.q.packed.size() / 2, 1}, f.q.packed);
  qd::Outcome o = Decode(f.spec);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);
  std::string where;
  EXPECT_TRUE(SameBits(o.tensors[0].values, Reference4bit(f, Bnb4bitType::kNf4, 256, 64, BnbDtype::kFloat32), &where));
  // [1, 2] stored as one byte in a [1, 1] tensor: bnb returns the transpose.
  FourBit t = Make4bit("w", {1, 2}, Bnb4bitType::kNf4, 64, false, "float32");
  o = Decode(t.spec);
  ASSERT_FALSE(o.refused);
  EXPECT_EQ(o.tensors[0].shape, (std::vector<std::uint64_t>{2, 1}));
  // The same shape stored [1] (rank 1, first dimension 1) is transposed too;
  // stored [2, 1] or with a rank-3 shape it is not.
  t.spec.Put("w", "U8", {1}, t.q.packed);
  EXPECT_EQ(Decode(t.spec).tensors[0].shape, (std::vector<std::uint64_t>{2, 1}));
  FourBit u = Make4bit("w", {1, 4}, Bnb4bitType::kNf4, 64, false, "float32");
  EXPECT_EQ(Decode(u.spec).tensors[0].shape, (std::vector<std::uint64_t>{1, 4}));
}

TEST(BnbReader, AFileWithoutLayersReadsAsSafetensors) {
  FileSpec s;
  s.Put("b", "F16", {1}, {0x00, 0x3c});
  s.Put("a", "F32", {1}, FloatBytes({2.0f}));
  s.Put("absmax", "F32", {1}, FloatBytes({3.0f}));
  const std::vector<std::uint8_t> bytes = s.Bytes();
  const qd::Outcome o = Decode(s);
  const qd::codec::ContainerResult c = qd::codec::ReadContainer({bytes.data(), bytes.size()}, "x");
  std::vector<qd::DecodedTensor> want;
  qd::codec::AppendFloatTensors(c.container, &want);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(o.tensors[i].name, want[i].name);
  // A blockwise8 state in __metadata__ with no W.absmax + W.quant_map pair: no layer.
  s.metadata = qd::codec::MetadataList{{"bnb_blockwise8_quant_state", "not json"}};
  EXPECT_FALSE(Decode(s).refused);
  // And a container error stays the container's.
  s.Put("c", "F32", {2}, FloatBytes({1.0f}));
  EXPECT_EQ(Decode(s).findings.back().rule.substr(0, 3), "ST-");
}

// ---- reader: the 4-bit rules, in check order -------------------------------------

TEST(BnbRules, Bnb105) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FileSpec two = f.spec;
  two.PutJson("w.quant_state.bitsandbytes__fp4", StateJson("fp4", 64, "float16", {4, 64}, nullptr));
  ExpectRefused(two, "BNB-105", "w", "quant_state", 8);
  // HF and GPT-QModel forms for the same W.
  FourBit g = Make4bit("weight", {4, 64}, Bnb4bitType::kNf4, 64, false);
  g.spec.PutJson("weight_quant_state", StateJson("nf4", 64, "float16", {4, 64}, nullptr));
  ExpectRefused(g.spec, "BNB-105", "weight", "quant_state", 8);
  FileSpec no_w = f.spec;
  no_w.Erase("w");
  ExpectRefused(no_w, "BNB-105", "w", "quant_state", 8);
  FileSpec no_absmax = f.spec;
  no_absmax.Erase("w.absmax");
  ExpectRefused(no_absmax, "BNB-105", "w", "quant_state", 8);
}

TEST(BnbRules, Bnb101) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  const std::string st = f.state;
  auto with_json = [&](const std::string& text) {
    FileSpec s = f.spec;
    s.PutJson(st, text);
    return s;
  };
  FileSpec not_u8 = f.spec;
  not_u8.Put(st, "I8", {4}, {'{', '}', ' ', ' '});
  ExpectRefused(not_u8, "BNB-101", st, "quant_state", 8);
  FileSpec rank2 = f.spec;
  rank2.Put(st, "U8", {1, 2}, {'{', '}'});
  ExpectRefused(rank2, "BNB-101", st, "quant_state", 8);
  const std::string good = StateJson("nf4", 64, "float16", {4, 64}, nullptr);
  for (const std::string& bad : {
           std::string("\xef\xbb\xbf") + good, good + std::string(1, '\0'), good + " x",
           std::string("[1]"), std::string(R"({"quant_type":"nf4","quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64.0,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":-64,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":"64","dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16"})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,-64]})"),
           std::string(R"({"quant_type":null,"blocksize":64,"dtype":"float16","shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":16,"shape":[4,64]})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"nested_offset":"0.1"})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"nested_blocksize":256.0})"),
           std::string(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"x":1e999})")}) {
    SCOPED_TRACE(bad);
    ExpectRefused(with_json(bad), "BNB-101", st, "quant_state", with_json(bad).DataOffset(st));
  }
  // Unknown keys are ignored.
  EXPECT_FALSE(Decode(with_json(R"({"quant_type":"nf4","blocksize":64,"dtype":"float16","shape":[4,64],"extra":[1,{}]})")).refused);
}

TEST(BnbRules, Bnb001Bnb102Bnb103) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  auto with = [&](const std::string& qt, std::uint64_t bs, const std::string& dtype) {
    FileSpec s = f.spec;
    s.PutJson(f.state, StateJson(qt, bs, dtype, {4, 64}, nullptr));
    return s;
  };
  const std::int64_t at = f.spec.DataOffset(f.state);
  ExpectRefused(with("af4", 64, "float16"), "BNB-001", f.state, "quant_type", at);
  ExpectRefused(with("fp4", 64, "float16"), "BNB-102", f.state, "quant_type", at);
  for (std::uint64_t bs : {0ull, 16ull, 48ull, 8192ull}) {
    ExpectRefused(with("nf4", bs, "float16"), "BNB-001", f.state, "blocksize", with("nf4", bs, "float16").DataOffset(f.state));
  }
  ExpectRefused(with("nf4", 64, "float64"), "BNB-103", f.state, "dtype", at);
  // The GPT-QModel layout has no suffix to disagree with.
  FileSpec g;
  g.Put("weight", "U8", {128, 1}, f.q.packed);
  g.PutF32("weight_absmax", f.q.absmax);
  g.PutJson("weight_quant_state", StateJson("fp4", 64, "float16", {4, 64}, nullptr));
  EXPECT_FALSE(Decode(g).refused);
}

TEST(BnbRules, Bnb004) {
  FourBit f = Make4bit("w", {8, 64}, Bnb4bitType::kFp4, 64, true);
  const std::string st = f.state;
  nlohmann::ordered_json base = nlohmann::ordered_json::parse(StateJson("fp4", 64, "float16", {8, 64}, &f.q));
  auto with = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    nlohmann::ordered_json j = base;
    edit(j);
    FileSpec s = f.spec;
    s.PutJson(st, j.dump());
    return s;
  };
  auto at = [&](const FileSpec& s) { return s.DataOffset(st); };
  FileSpec s = with([](auto& j) { j.erase("nested_offset"); });
  ExpectRefused(s, "BNB-004", st, "nested_offset", at(s));
  s = with([](auto& j) { j.erase("nested_blocksize"); });
  ExpectRefused(s, "BNB-004", st, "nested_blocksize", at(s));
  s = with([](auto& j) { j["nested_blocksize"] = 100; });
  ExpectRefused(s, "BNB-004", st, "nested_blocksize", at(s));
  s = with([](auto& j) { j["nested_dtype"] = "float16"; });
  ExpectRefused(s, "BNB-004", st, "nested_dtype", at(s));
  s = f.spec;
  s.Erase("w.nested_absmax");
  ExpectRefused(s, "BNB-004", "w", "nested_absmax", 8);
  s = f.spec;
  s.Erase("w.nested_quant_map");
  ExpectRefused(s, "BNB-004", "w", "nested_quant_map", 8);
  // A nested tensor alone makes the layer nested (the peer's missing-offset case).
  FourBit flat = Make4bit("w", {8, 64}, Bnb4bitType::kFp4, 64, false);
  flat.spec.PutF32("w.nested_absmax", {1.0f});
  ExpectRefused(flat.spec, "BNB-004", flat.state, "nested_offset", flat.spec.DataOffset(flat.state));
  // Any nested_* key does too.
  FourBit keyed = Make4bit("w", {8, 64}, Bnb4bitType::kFp4, 64, false);
  keyed.spec.PutJson(keyed.state, R"({"quant_type":"fp4","blocksize":64,"dtype":"float16","shape":[8,64],"nested_whatever":1})");
  ExpectRefused(keyed.spec, "BNB-004", keyed.state, "nested_offset", keyed.spec.DataOffset(keyed.state));
  // Counts and dtypes of the nested tensors (step 11).
  s = f.spec;
  s.PutF32("w.nested_absmax", {1.0f, 2.0f});
  ExpectRefused(s, "BNB-004", "w.nested_absmax", "nested_absmax", 8);
  s = f.spec;
  s.PutF32("w.nested_quant_map", std::vector<float>(255, 0.0f));
  ExpectRefused(s, "BNB-004", "w.nested_quant_map", "nested_quant_map", 8);
}

TEST(BnbRules, Bnb002AndAbsmaxShape) {
  FourBit f = Make4bit("w", {3, 37}, Bnb4bitType::kNf4, 64, false);  // n = 111: 56 bytes
  FileSpec s = f.spec;
  std::vector<std::uint8_t> shorter = f.q.packed;
  shorter.pop_back();
  s.Put("w", "U8", {shorter.size(), 1}, shorter);
  ExpectRefused(s, "BNB-002", "w", "weight", 8);
  s = f.spec;
  s.PutJson(f.state, StateJson("nf4", 64, "float16", {1ull << 40, 1ull << 40}, nullptr));
  ExpectRefused(s, "BNB-002", "w", "weight", 8);
  s = f.spec;
  s.Put("w.absmax", "F16", {2}, {0, 0, 0, 0});
  ExpectRefused(s, "BNB-102", "w.absmax", "absmax", 8);
  s = f.spec;
  s.PutF32("w.absmax", {1.0f});
  ExpectRefused(s, "BNB-001", "w.absmax", "absmax", 8);
  s = f.spec;
  s.PutF32("w.quant_map", std::vector<float>(15, 0.0f));
  ExpectRefused(s, "BNB-102", "w.quant_map", "quant_map", 8);
  // quant_map is optional.
  s = f.spec;
  s.Erase("w.quant_map");
  EXPECT_FALSE(Decode(s).refused);
  // A nested layer's absmax must be U8.
  FourBit n = Make4bit("w", {3, 37}, Bnb4bitType::kNf4, 64, true);
  n.spec.PutF32("w.absmax", {1.0f, 2.0f});
  ExpectRefused(n.spec, "BNB-102", "w.absmax", "absmax", 8);
}

TEST(BnbRules, Bnb104FirstInStorageOrder) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 32, false);
  std::vector<float> absmax = f.q.absmax;
  absmax[5] = INFINITY;
  absmax[6] = NAN;
  FileSpec s = f.spec;
  s.PutF32("w.absmax", absmax);
  ExpectRefused(s, "BNB-104", "w.absmax", "absmax", s.DataOffset("w.absmax") + 20, 5, -1);
  // Nested: nested_absmax comes before nested_quant_map in the file.
  FourBit n = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 32, true);
  std::vector<float> map = n.q.nested_quant_map;
  map[200] = NAN;
  s = n.spec;
  s.PutF32("w.nested_quant_map", map);
  ExpectRefused(s, "BNB-104", "w.nested_quant_map", "nested_quant_map",
                s.DataOffset("w.nested_quant_map") + 800, -1, 200);
  s.PutF32("w.nested_absmax", {-INFINITY});
  ExpectRefused(s, "BNB-104", "w.nested_absmax", "nested_absmax", s.DataOffset("w.nested_absmax"), 0, -1);
}

TEST(BnbRules, Bnb106WarnsAndDecodesWithTheTable) {
  FourBit f = Make4bit("w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FileSpec s = f.spec;
  s.PutF32("w.quant_map", Table(Bnb4bitType::kFp4));
  const qd::Outcome o = Decode(s);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.findings.size(), 1u);
  EXPECT_EQ(o.findings[0].rule, "BNB-106");
  EXPECT_EQ(o.findings[0].severity, qd::Severity::kWarning);
  EXPECT_EQ(o.findings[0].tensor, "w.quant_map");
  EXPECT_EQ(o.findings[0].field, "quant_map");
  EXPECT_EQ(o.findings[0].byte_offset, s.DataOffset("w.quant_map"));  // code 0 differs first
  EXPECT_EQ(o.findings[0].element, 0);
  std::string where;
  EXPECT_TRUE(SameBits(o.tensors[0].values, Reference4bit(f, Bnb4bitType::kNf4, 256, 64, BnbDtype::kFloat16), &where));
}

TEST(BnbRules, LayersAreCheckedInByteOrderOfW) {
  FourBit a = Make4bit("b.w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FourBit b = Make4bit("a.w", {4, 64}, Bnb4bitType::kNf4, 64, false);
  FileSpec s = a.spec;
  for (const auto& [name, t] : b.spec.tensors) s.tensors[name] = t;
  s.PutJson(a.state, StateJson("nf4", 48, "float16", {4, 64}, nullptr));  // BNB-001 on b.w
  s.PutJson(b.state, StateJson("nf4", 64, "float64", {4, 64}, nullptr));  // BNB-103 on a.w
  ExpectRefused(s, "BNB-103", b.state, "dtype", s.DataOffset(b.state));
}

// ---- reader: 8-bit blockwise and int8 -----------------------------------------------

FileSpec MakeBlockwise8(bool nested, std::uint64_t n = 1000, std::uint64_t blocksize = 256) {
  const std::vector<float> x = Normal(n, 3);
  const std::vector<float> map = qd::codec::CreateDynamicMap();
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  std::string error;
  EXPECT_TRUE(qd::codec::QuantizeBlockwise8(x.data(), n, map.data(), blocksize, &codes, &absmax, &error));
  FileSpec s;
  s.Put("p.weight", "U8", {n}, codes);
  s.PutF32("p.weight.quant_map", map);
  nlohmann::ordered_json j;
  j["quant_type"] = nullptr;
  j["blocksize"] = blocksize;
  j["dtype"] = "bfloat16";
  j["shape"] = nullptr;
  if (nested) {
    const float offset = qd::codec::TorchMeanF32(absmax.data(), absmax.size());
    std::vector<float> centered(absmax.size());
    for (std::size_t b = 0; b < absmax.size(); ++b) centered[b] = absmax[b] - offset;
    std::vector<std::uint8_t> ncodes;
    std::vector<float> nabs;
    EXPECT_TRUE(qd::codec::QuantizeBlockwise8(centered.data(), centered.size(), map.data(), 256, &ncodes, &nabs, &error));
    s.Put("p.weight.absmax", "U8", {ncodes.size()}, ncodes);
    s.PutF32("p.weight.nested_absmax", nabs);
    s.PutF32("p.weight.nested_quant_map", map);
    j["nested_blocksize"] = 256;
    j["nested_dtype"] = "float32";
    j["nested_offset"] = offset;
  } else {
    s.PutF32("p.weight.absmax", absmax);
  }
  s.metadata = qd::codec::MetadataList{{"bnb_blockwise8_quant_state", j.dump()}, {"format", "pt"}};
  return s;
}

TEST(BnbBlockwise8, DecodesAndChecks) {
  for (bool nested : {false, true}) {
    const FileSpec s = MakeBlockwise8(nested);
    for (Kernel k : qd::codec::AvailableKernels()) {
      const qd::Outcome o = Decode(s, k);
      ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
      ASSERT_EQ(o.tensors.size(), 1u);
      EXPECT_EQ(o.tensors[0].name, "p.weight");
      EXPECT_EQ(o.tensors[0].shape, std::vector<std::uint64_t>{1000});
    }
  }
  const std::string key = "bnb_blockwise8_quant_state";
  auto with_state = [&](const std::string& text, bool nested = false) {
    FileSpec s = MakeBlockwise8(nested);
    (*s.metadata)[0].second = text;
    return s;
  };
  ExpectRefused(with_state("{"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":256})"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","shape":"x"})"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","shape":[1000],"shape":[1000]})"), "BNB-101", "", key, 8);
  ExpectRefused(with_state(R"({"blocksize":100,"dtype":"float16"})"), "BNB-107", "", "blocksize", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"int8"})"), "BNB-103", "", "dtype", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","nested_offset":0.5})"), "BNB-004", "", "nested_blocksize", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","nested_offset":0.5,"nested_blocksize":256,"nested_dtype":"float32"})"),
                "BNB-004", "p.weight", "nested_absmax", 8);
  ExpectRefused(with_state(R"({"blocksize":256,"dtype":"float16","shape":[10,100]})"), "BNB-102", "p.weight", "shape", 8);
  EXPECT_FALSE(Decode(with_state(R"({"blocksize":256,"dtype":"float16","shape":[1000]})")).refused);
  FileSpec s = MakeBlockwise8(false);
  s.Put("p.weight", "I8", {1000}, std::vector<std::uint8_t>(1000, 0));
  ExpectRefused(s, "BNB-107", "p.weight", "weight", 8);
  s = MakeBlockwise8(false);
  s.PutF32("p.weight.quant_map", std::vector<float>(16, 0.0f));
  ExpectRefused(s, "BNB-107", "p.weight.quant_map", "quant_map", 8);
  s = MakeBlockwise8(false);
  s.PutF32("p.weight.absmax", {1.0f});
  ExpectRefused(s, "BNB-107", "p.weight.absmax", "absmax", 8);
  s = MakeBlockwise8(false);
  s.Put("p.weight.absmax", "U8", {4}, {0, 0, 0, 0});
  ExpectRefused(s, "BNB-102", "p.weight.absmax", "absmax", 8);
  s = MakeBlockwise8(false);
  std::vector<float> map = qd::codec::CreateDynamicMap();
  map[9] = NAN;
  s.PutF32("p.weight.quant_map", map);
  ExpectRefused(s, "BNB-104", "p.weight.quant_map", "quant_map", s.DataOffset("p.weight.quant_map") + 36, -1, 9);
}

FileSpec MakeInt8(const std::string& m, bool gptq) {
  const std::uint64_t rows = 6, columns = 37;
  const std::vector<float> w = Normal(rows * columns, 5);
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  std::string error;
  EXPECT_TRUE(qd::codec::QuantizeBnbInt8Rows(w.data(), rows, columns, &cb, &scb, &error));
  FileSpec s;
  s.Put(m + "weight", "I8", {rows, columns}, std::vector<std::uint8_t>(cb.begin(), cb.end()));
  if (gptq) {
    s.PutF32(m + "weight_scb", scb);
  } else {
    s.PutF32(m + "SCB", scb);
    s.Put(m + "weight_format", "U8", {}, {0});
  }
  s.PutF32(m + "bias", {0.5f});
  return s;
}

TEST(BnbInt8, DecodesAndChecks) {
  for (bool gptq : {false, true}) {
    const FileSpec s = MakeInt8("l.", gptq);
    const qd::Outcome o = Decode(s);
    ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
    ASSERT_EQ(o.tensors.size(), 2u);
    EXPECT_EQ(o.tensors[0].name, "l.bias");
    EXPECT_EQ(o.tensors[1].name, "l.weight");
    EXPECT_EQ(o.tensors[1].shape, (std::vector<std::uint64_t>{6, 37}));
  }
  FileSpec s = MakeInt8("l.", false);
  s.Erase("l.weight");
  ExpectRefused(s, "BNB-105", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.PutF32("l.weight_scb", std::vector<float>(6, 1.0f));  // two scales name l.weight
  ExpectRefused(s, "BNB-105", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.Put("l.weight", "U8", {6, 37}, std::vector<std::uint8_t>(222, 0));
  ExpectRefused(s, "BNB-108", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.Put("l.weight", "I8", {222}, std::vector<std::uint8_t>(222, 0));
  ExpectRefused(s, "BNB-108", "l.weight", "weight", 8);
  s = MakeInt8("l.", false);
  s.PutF32("l.SCB", std::vector<float>(5, 1.0f));
  ExpectRefused(s, "BNB-108", "l.SCB", "SCB", 8);
  s = MakeInt8("l.", false);
  s.Put("l.weight_format", "U8", {1}, {1});
  ExpectRefused(s, "BNB-108", "l.weight_format", "weight_format", s.DataOffset("l.weight_format"));
  s = MakeInt8("l.", false);
  s.Put("l.weight_format", "I8", {}, {0});
  ExpectRefused(s, "BNB-108", "l.weight_format", "weight_format", 8);
  s = MakeInt8("", false);
  std::vector<float> scb(6, 1.0f);
  scb[4] = NAN;
  s.PutF32("SCB", scb);
  ExpectRefused(s, "BNB-104", "SCB", "SCB", s.DataOffset("SCB") + 16, -1, 4);
}

// ---- robustness ------------------------------------------------------------------

// Random byte edits of valid files: the reader never crashes (run under
// ASan/UBSan), a refusal has exactly one error and it is last, and every
// kernel decodes an accepted file to the same bits.
TEST(BnbRobustness, MutatedFilesNeverCrashAndKernelsAgree) {
  std::vector<std::vector<std::uint8_t>> seeds = {
      Make4bit("w", {5, 70}, Bnb4bitType::kNf4, 32, false).spec.Bytes(),
      Make4bit("m.w", {3, 37}, Bnb4bitType::kFp4, 64, true, "bfloat16").spec.Bytes(),
      MakeBlockwise8(true, 600, 64).Bytes(),
      MakeBlockwise8(false).Bytes(),
      MakeInt8("l.", false).Bytes(),
  };
  std::mt19937_64 rng(2024);
  int accepted = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::vector<std::uint8_t> bytes = seeds[iteration % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0: bytes[at] = static_cast<std::uint8_t>(rng()); break;
        case 1: bytes[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8)); break;
        case 2: bytes[at] = static_cast<std::uint8_t>("0123456789[]{},:\"-.e"[rng() % 20]); break;
        default: bytes[at] = static_cast<std::uint8_t>(bytes[at] + 1); break;
      }
    }
    std::vector<qd::Outcome> outcomes;
    for (Kernel k : qd::codec::AvailableKernels()) {
      outcomes.push_back(qd::codec::DecodeBnbFile({bytes.data(), bytes.size()}, "m", k));
    }
    const qd::Outcome& first = outcomes.front();
    int errors = 0;
    for (const qd::Finding& f : first.findings) errors += f.severity == qd::Severity::kError;
    ASSERT_EQ(errors, first.refused ? 1 : 0);
    if (first.refused) {
      ASSERT_EQ(first.findings.back().severity, qd::Severity::kError);
      continue;
    }
    ++accepted;
    for (const qd::Outcome& o : outcomes) {
      ASSERT_EQ(o.tensors.size(), first.tensors.size());
      for (std::size_t t = 0; t < o.tensors.size(); ++t) {
        std::string where;
        ASSERT_TRUE(SameBits(o.tensors[t].values, first.tensors[t].values, &where))
            << "iteration " << iteration << " tensor " << o.tensors[t].name << " " << where;
      }
    }
  }
  EXPECT_GT(accepted, 100);
}

// ---- encoders ---------------------------------------------------------------------

TEST(BnbEncoder, PaddingZeroBlocksAndStatistics) {
  // Odd n: the pad nibble is the code of 0.0 (7 for nf4, 0 for fp4).
  for (Bnb4bitType type : {Bnb4bitType::kNf4, Bnb4bitType::kFp4}) {
    const std::vector<float> x = {0.5f, -0.25f, 0.125f};
    qd::codec::Bnb4bitQuantized q;
    std::string error;
    ASSERT_TRUE(qd::codec::QuantizeBnb4bit(x.data(), 3, type, 64, false, &q, &error));
    ASSERT_EQ(q.packed.size(), 2u);
    EXPECT_EQ(q.packed[1] & 0x0f, type == Bnb4bitType::kNf4 ? 7 : 0);
  }
  // A zero full block stores 0; a zero partial block stores the 1e-38 floor.
  std::vector<float> zeros(96, 0.0f);
  qd::codec::Bnb4bitQuantized q;
  std::string error;
  ASSERT_TRUE(qd::codec::QuantizeBnb4bit(zeros.data(), 96, Bnb4bitType::kNf4, 64, false, &q, &error));
  ASSERT_EQ(q.absmax.size(), 2u);
  EXPECT_EQ(Bits(q.absmax[0]), 0u);
  EXPECT_EQ(Bits(q.absmax[1]), 0x006ce3eeu);
  for (std::uint8_t b : q.packed) EXPECT_EQ(b, 0x77);
  // Non-finite input is refused, as is nesting nothing.
  std::vector<float> bad = {1.0f, NAN};
  EXPECT_FALSE(qd::codec::QuantizeBnb4bit(bad.data(), 2, Bnb4bitType::kNf4, 64, false, &q, &error));
  EXPECT_FALSE(qd::codec::QuantizeBnb4bit(nullptr, 0, Bnb4bitType::kNf4, 64, true, &q, &error));
  EXPECT_TRUE(qd::codec::QuantizeBnb4bit(nullptr, 0, Bnb4bitType::kNf4, 64, false, &q, &error));
  // Int8: a zero row keeps SCB 0 and codes 0.
  std::vector<float> w = {0.0f, 0.0f, 0.5f, -1.0f};
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  ASSERT_TRUE(qd::codec::QuantizeBnbInt8Rows(w.data(), 2, 2, &cb, &scb, &error));
  EXPECT_EQ(scb, (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ(cb, (std::vector<std::int8_t>{0, 0, 64, -127}));
}

TEST(BnbEncoder, RoundTripsThroughTheReader) {
  for (Bnb4bitType type : {Bnb4bitType::kNf4, Bnb4bitType::kFp4}) {
    FourBit f = Make4bit("w", {33, 65}, type, 128, true, "float32", 9);
    const qd::Outcome o = Decode(f.spec);
    ASSERT_FALSE(o.refused);
    const std::vector<float> x = Normal(33 * 65, 9);
    double worst = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(o.tensors[0].values[i]) - x[i]));
    }
    EXPECT_LT(worst, 0.05) << "4-bit error bound for std 0.02 data";
  }
}

TEST(BnbEncoder, DynamicMapAndMean) {
  const std::vector<float> map = qd::codec::CreateDynamicMap();
  ASSERT_EQ(map.size(), 256u);
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(map[127], 0.0f);
  EXPECT_EQ(map[255], 1.0f);
  EXPECT_EQ(qd::codec::CreateDynamicMap(false, 7, 8).size(), 256u);
  EXPECT_TRUE(qd::codec::CreateDynamicMap(true, 9, 8).empty());
  std::vector<float> ones(1000, 1.0f);
  EXPECT_EQ(qd::codec::TorchMeanF32(ones.data(), ones.size()), 1.0f);
  const std::vector<float> few = {1.0f, 2.0f, 4.0f};
  EXPECT_EQ(qd::codec::TorchMeanF32(few.data(), few.size()), 7.0f / 3.0f);
}

}  // namespace
