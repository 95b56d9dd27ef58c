// recognised_test.cc: docs/recognised.md on hand-built files, each side on
// its own (codec_read, codec_check and oracle_read of the registry entry):
// the rule, tensor and field of every finding, the decoded dense tensors,
// detection against the other formats, and decode's REC-001 refusal.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "tests/recognised_files.h"

namespace {

using qdtest::Bytes;
using qdtest::MakeFile;
using qdtest::T;

qd::SideFile Config(const std::string& name, const std::string& text) {
  return {name, Bytes(text.begin(), text.end())};
}

const qd::harness::FormatEntry& Recognised() { return *qd::harness::FindFormat("recognised"); }

struct Expected {
  std::string rule;  // the error, or "" for an accepted file
  std::string tensor;
  std::string field;
  std::string file = "m.safetensors";
};

// Every side refuses with exactly the expected error (or accepts), and an
// accepted file warns REC-101 for WARNED families.
void ExpectEverySide(const Bytes& file, const std::vector<qd::SideFile>& configs, const Expected& want,
                     const std::vector<std::string>& warned = {}) {
  const qd::ByteView view{file.data(), file.size()};
  const qd::harness::FormatEntry& f = Recognised();
  EXPECT_TRUE(f.claims(view, configs));
  EXPECT_TRUE(f.oracle_claims(view, configs));
  EXPECT_EQ(qd::harness::DetectFormat(view, configs).name, "recognised");
  EXPECT_EQ(qd::harness::OracleDetectFormat(view, configs).name, "recognised");
  for (const auto& [side, outcome] :
       {std::pair<std::string, qd::Outcome>{"codec_read", f.codec_read(view, "m.safetensors", configs)},
        {"codec_check", f.codec_check(view, "m.safetensors", configs)},
        {"oracle_read", f.oracle_read(view, "m.safetensors", configs)}}) {
    SCOPED_TRACE(side);
    if (want.rule.empty()) {
      ASSERT_FALSE(outcome.refused) << outcome.findings.back().rule << " " << outcome.findings.back().message;
      ASSERT_EQ(outcome.findings.size(), warned.size());
      for (std::size_t i = 0; i < warned.size(); ++i) {
        EXPECT_EQ(outcome.findings[i].rule, "REC-101");
        EXPECT_EQ(outcome.findings[i].severity, qd::Severity::kWarning);
        EXPECT_EQ(outcome.findings[i].field, warned[i]);
      }
      continue;
    }
    ASSERT_TRUE(outcome.refused);
    const qd::Finding& e = outcome.findings.back();
    EXPECT_EQ(e.rule, want.rule) << e.message;
    EXPECT_EQ(e.severity, qd::Severity::kError);
    EXPECT_EQ(e.tensor, want.tensor);
    EXPECT_EQ(e.field, want.field);
    EXPECT_EQ(e.file, want.file);
  }
}

std::vector<T> Qqq() {
  // K = 2 * 16 = 32, N = 8 / 2 = 4; group_size 16: s_group [2, 4].
  return {{"norm", "F32", {2}},          {"l.B", "I32", {2, 8}}, {"l.s_channel", "F32", {1, 4}},
          {"l.s_group", "F16", {2, 4}}, {"l.bias", "F16", {4}}};
}

TEST(RecognisedQqq, AcceptedWithTheFamilyNamedAndOnlyTheDenseTensorDecoded) {
  const Bytes file = MakeFile(Qqq());
  ExpectEverySide(file, {}, {}, {"qqq"});
  const qd::ByteView view{file.data(), file.size()};
  for (const qd::Outcome& o : {Recognised().codec_read(view, "m.safetensors", {}),
                               Recognised().oracle_read(view, "m.safetensors", {})}) {
    ASSERT_EQ(o.tensors.size(), 1u);  // s_channel is F32 too, but a layer member
    EXPECT_EQ(o.tensors[0].name, "norm");
    EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.5f, -2.0f}));
    EXPECT_EQ(o.findings[0].tensor, "l.B");  // the anchor: first member present
  }
}

TEST(RecognisedQqq, EmptySGroupIsTheWholeRowGroup) {
  std::vector<T> t = Qqq();
  t[3].shape = {0};
  ExpectEverySide(MakeFile(t), {}, {}, {"qqq"});
}

// A base file with one edit and the error it must give.
struct Broken {
  std::function<void(std::vector<T>&)> edit;
  Expected want;
};

void ExpectEveryEdit(const std::vector<T>& base, const std::vector<Broken>& cases,
                     const std::vector<qd::SideFile>& configs = {}) {
  for (const Broken& c : cases) {
    std::vector<T> tensors = base;
    c.edit(tensors);
    SCOPED_TRACE(c.want.rule + " " + c.want.tensor + " " + c.want.field);
    ExpectEverySide(MakeFile(tensors), configs, c.want);
  }
}

TEST(RecognisedQqq, EveryStructuralRule) {
  // Qqq(): norm, B, s_channel, s_group, bias.
  ExpectEveryEdit(Qqq(), {
      {[](auto& t) { t.push_back({"l.g_idx", "I32", {32}}); }, {"REC-005", "l.g_idx", "g_idx"}},
      {[](auto& t) { t[2].shape = {1, 5}; }, {"REC-004", "l.s_channel", "shape"}},
      {[](auto& t) { t[3].shape = {3, 4}; }, {"REC-004", "l.s_group", "shape"}},  // 32 % 3 != 0
      {[](auto& t) { t[1].shape = {2, 7}; }, {"REC-004", "l.B", "shape"}},        // N*16/8 is even
      {[](auto& t) { t[4].shape = {5}; }, {"REC-004", "l.bias", "shape"}},
      {[](auto& t) { t.erase(t.begin() + 1); }, {"REC-002", "l.s_channel", "B"}},
      {[](auto& t) { t[2].dtype = "F16"; }, {"REC-003", "l.s_channel", "dtype"}},
      {[](auto& t) { t[1].shape = {16}; }, {"REC-003", "l.B", "shape"}},
  });
}

TEST(RecognisedVptq, GroupNumAndTheOutlierPair) {
  const std::vector<T> good = {{"l.centroids.weight", "F16", {2, 8}}, {"l.indices", "I32", {2, 3, 1}}};
  ExpectEverySide(MakeFile(good), {}, {}, {"vptq"});
  ExpectEverySide(MakeFile({good[0], {"l.indices", "I32", {3, 1, 1}}}), {},
                  {"REC-004", "l.indices", "shape"});
  ExpectEverySide(MakeFile({good[0], good[1], {"l.outlier_indices", "I32", {4}}}), {},
                  {"REC-002", "l.centroids.weight", "outlier_centroids.weight"});
  ExpectEverySide(MakeFile({good[0], {"l.indices", "I32", {2, 3}}}), {},
                  {"REC-003", "l.indices", "shape"});
}

std::vector<T> Paro() {
  // K = 16, N = 8 (one word of eight 4-bit codes), G = 2.
  return {{"l.qweight", "I32", {16, 1}}, {"l.qzeros", "I32", {2, 1}}, {"l.scales", "F16", {2, 8}},
          {"l.theta", "F32", {1, 8}},    {"l.pairs", "I16", {1, 16}}, {"l.channel_scales", "F16", {1, 16}}};
}

TEST(RecognisedParoQuant, ClaimedBeforeGptqAndChecked) {
  ExpectEverySide(MakeFile(Paro()), {}, {}, {"paroquant"});
  // Paro(): qweight, qzeros, scales, theta, pairs, channel_scales.
  ExpectEveryEdit(Paro(), {
      {[](auto& t) { t[2].shape = {3, 8}; }, {"REC-004", "l.scales", "shape"}},  // 16 % 3 != 0
      {[](auto& t) { t[1].shape = {2, 2}; }, {"REC-004", "l.qzeros", "shape"}},
      {[](auto& t) { t.erase(t.begin() + 4); }, {"REC-002", "l.qweight", "pairs"}},
      {[](auto& t) { t[2].dtype = "I32"; }, {"REC-003", "l.scales", "dtype"}},
  });
}

TEST(RecognisedDetection, GptqFilesAndBareNamesAreNotClaimed) {
  // A GPTQ layer (no marker) and a tensor named like QQQ's B alone.
  for (const std::vector<T>& tensors :
       {std::vector<T>{{"l.qweight", "I32", {16, 1}}, {"l.qzeros", "I32", {2, 1}},
                       {"l.scales", "F16", {2, 8}}, {"l.g_idx", "I32", {16}}, {"l.perm", "I32", {16}}},
        std::vector<T>{{"x.B", "I32", {2, 8}}, {"x.bias", "F16", {4}}}}) {
    const Bytes file = MakeFile(tensors);
    const qd::ByteView view{file.data(), file.size()};
    EXPECT_FALSE(Recognised().claims(view, {}));
    EXPECT_FALSE(Recognised().oracle_claims(view, {}));
    EXPECT_NE(qd::harness::DetectFormat(view, {}).name, "recognised");
  }
}

// A GPTQ layer by docs/gptq.md (K 32, N 32, 4 bits, one group).
const std::vector<T> kGptqLayer = {{"l.qweight", "I32", {4, 32}}, {"l.qzeros", "I32", {1, 4}},
                                   {"l.scales", "F16", {1, 32}}, {"l.g_idx", "I32", {32}}};

// Both sides detect FILE with CONFIGS as FORMAT, and the GPTQ readers refuse
// it with RULE at FIELD.
void ExpectGptqRefusal(const std::vector<qd::SideFile>& configs, const char* rule, const char* field) {
  const Bytes file = MakeFile(kGptqLayer);
  const qd::ByteView view{file.data(), file.size()};
  ASSERT_EQ(qd::harness::DetectFormat(view, configs).name, "gptq");
  ASSERT_EQ(qd::harness::OracleDetectFormat(view, configs).name, "gptq");
  const qd::harness::FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  for (const qd::Outcome& o : {gptq.codec_read(view, "m.safetensors", configs),
                               gptq.oracle_read(view, "m.safetensors", configs)}) {
    ASSERT_TRUE(o.refused);
    EXPECT_EQ(o.findings.back().rule, rule);
    EXPECT_EQ(o.findings.back().field, field);
  }
}

// A Marlin-labelled checkpoint carries GPTQ names: it stays GPTQ's, GPTQ-005,
// also when another key says bitblas (docs/recognised.md 2).
TEST(RecognisedDetection, MarlinLabelledGptqStaysGptq005) {
  ExpectGptqRefusal({Config("quantize_config.json", R"({"bits":4,"group_size":-1,"format":"marlin"})")},
                    "GPTQ-005", "format");
  ExpectGptqRefusal({Config("quantize_config.json",
                            R"({"bits":4,"group_size":-1,"quant_method":"bitblas","checkpoint_format":"marlin"})")},
                    "GPTQ-005", "checkpoint_format");
  ExpectGptqRefusal({Config("q.json", R"({"bits":4,"format":"bitblas","is_marlin_format":true})")},
                    "GPTQ-005", "is_marlin_format");
}

// BitBLAS (spec 004 BITBLAS): N = 16 outputs, G = 2 groups, b = 4, I8
// storage: scales [16, 2], qzeros [2, 16*4/8] = [2, 8]; qweight is BitBLAS's
// own shape, here [N, K*b/8] with K = 64.
std::vector<T> Bitblas() {
  return {{"norm", "F32", {2}},          {"l.qweight", "I8", {16, 32}}, {"l.scales", "F16", {16, 2}},
          {"l.qzeros", "I8", {2, 8}},   {"l.bias", "F16", {16}}};
}
const char kBitblasConfig[] = R"({"bits":4,"group_size":32,"quant_method":"gptq","format":"bitblas"})";

TEST(RecognisedBitblas, TheConfigLabelMakesGptqNamesABitblasLayer) {
  const Bytes file = MakeFile(Bitblas());
  const std::vector<qd::SideFile> plain = {Config("d/quantize_config.json", kBitblasConfig)};
  ExpectEverySide(file, plain, {}, {"bitblas"});
  const qd::ByteView view{file.data(), file.size()};
  for (const qd::Outcome& o : {Recognised().codec_read(view, "m.safetensors", plain),
                               Recognised().oracle_read(view, "m.safetensors", plain)}) {
    ASSERT_EQ(o.tensors.size(), 1u);  // bias is F16 too, but a layer member
    EXPECT_EQ(o.tensors[0].name, "norm");
    EXPECT_EQ(o.findings[0].tensor, "l.qweight");  // the anchor
  }
  // Nested in config.json, the label in checkpoint_format, any integer storage.
  ExpectEverySide(file, {Config("d/config.json",
                                R"({"quantization_config":{"bits":4,"checkpoint_format":"bitblas"}})")},
                  {}, {"bitblas"});
  // config.json without quantization_config is no source: the next one wins.
  ExpectEverySide(file, {Config("d/config.json", R"({"model_type":"llama"})"),
                         Config("d/quant_config.json", R"({"bits":4,"method":"bitblas"})")},
                  {}, {"bitblas"});
  std::vector<T> i32 = Bitblas();
  i32[1] = {"l.qweight", "I32", {16, 8}};
  i32[3] = {"l.qzeros", "I32", {2, 2}};  // 16*4/32
  ExpectEverySide(MakeFile(i32), plain, {}, {"bitblas"});
  std::vector<T> empty_zeros = Bitblas();
  empty_zeros[3].shape = {0};  // "otherwise an empty buffer"
  ExpectEverySide(MakeFile(empty_zeros), plain, {}, {"bitblas"});
  empty_zeros[3].name = "l.zeros";  // the alias alone
  ExpectEverySide(MakeFile(empty_zeros), plain, {}, {"bitblas"});
}

TEST(RecognisedBitblas, EveryStructuralRule) {
  const std::vector<qd::SideFile> configs = {Config("q.json", kBitblasConfig)};
  // Bitblas(): norm, qweight, scales, qzeros, bias.
  ExpectEveryEdit(Bitblas(), {
      {[](auto& t) { t.push_back({"l.zeros", "I8", {2, 8}}); }, {"REC-008", "l.zeros", "zeros"}},
      {[](auto& t) { t.erase(t.begin() + 2); }, {"REC-002", "l.qweight", "scales"}},
      {[](auto& t) { t[1].dtype = "F16"; }, {"REC-003", "l.qweight", "dtype"}},
      {[](auto& t) { t[3].dtype = "U8"; }, {"REC-003", "l.qzeros", "dtype"}},  // not qweight's
      {[](auto& t) { t[2].shape = {32}; }, {"REC-003", "l.scales", "shape"}},
      {[](auto& t) { t[2].shape = {16, 0}; }, {"REC-004", "l.scales", "shape"}},
      {[](auto& t) { t[3].shape = {3, 8}; }, {"REC-004", "l.qzeros", "shape"}},  // G rows
      {[](auto& t) { t[3].shape = {2, 16}; }, {"REC-004", "l.qzeros", "shape"}},  // 16*4/8 = 8
      {[](auto& t) { t[4].shape = {15}; }, {"REC-004", "l.bias", "shape"}},
  }, configs);
  // Without bits in the config only the G rows are checked.
  const std::vector<qd::SideFile> no_bits = {Config("q.json", R"({"format":"bitblas"})")};
  std::vector<T> wide = Bitblas();
  wide[3].shape = {2, 16};
  ExpectEverySide(MakeFile(wide), no_bits, {}, {"bitblas"});
  wide[3].shape = {3, 16};
  ExpectEverySide(MakeFile(wide), no_bits, {"REC-004", "l.qzeros", "shape"});
}

// The label alone tells BitBLAS from GPTQ: without a bitblas config the
// same names are GPTQ's (docs/gptq.md); with it, a GPTQ-shaped layer is a
// BitBLAS layer whose group-major scales [1, 32] say N = 1, G = 32 and
// whose qzeros [1, 4] then has the wrong row count.
TEST(RecognisedBitblas, WithoutTheLabelTheTensorsStayGptq) {
  const Bytes file = MakeFile(kGptqLayer);
  const qd::ByteView view{file.data(), file.size()};
  EXPECT_FALSE(Recognised().claims(view, {}));
  EXPECT_FALSE(Recognised().oracle_claims(view, {}));
  ExpectGptqRefusal({Config("q.json", R"({"bits":4,"group_size":-1,"format":"BitBLAS"})")}, "CFG-005",
                    "format");  // the label is lowercase only
  ExpectEverySide(file, {Config("q.json", R"({"bits":4,"group_size":-1,"format":"bitblas"})")},
                  {"REC-004", "l.qzeros", "shape"});
  // The GPTQ reader, given the bitblas config anyway (`--format gptq`), refuses it at C5.
  const std::vector<qd::SideFile> configs = {Config("q.json", R"({"bits":4,"group_size":-1,"format":"bitblas"})")};
  const qd::harness::FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  for (const qd::Outcome& o : {gptq.codec_read(view, "m.safetensors", configs),
                               gptq.oracle_read(view, "m.safetensors", configs)}) {
    ASSERT_TRUE(o.refused);
    EXPECT_EQ(o.findings.back().rule, "CFG-005");
    EXPECT_EQ(o.findings.back().field, "format");
  }
}

const std::vector<T> kExl3 = {{"l.trellis", "I16", {1, 1, 16}}, {"l.suh", "F16", {16}}, {"l.svh", "F16", {16}}};

std::string Storage(const std::string& suh_dtype, bool list_svh, bool list_sv) {
  std::string stored = R"("l.trellis":{"shape":[1,1,16],"torch_dtype":"torch.int16"},)"
                       R"("l.suh":{"shape":[16],"torch_dtype":")" + suh_dtype + R"("})";
  if (list_svh) stored += R"(,"l.svh":{"shape":[16],"torch_dtype":"half"})";
  if (list_sv) stored += R"(,"l.sv":{"shape":[16],"torch_dtype":"float16"})";
  return R"({"tensor_storage":{"l":{"stored_tensors":{)" + stored + "}}}}";
}

TEST(RecognisedExl3, TensorStorageAgainstTheTensors) {
  const Bytes file = MakeFile(kExl3);
  ExpectEverySide(file, {Config("d/quantize_config.json", Storage("torch.float16", true, false))}, {},
                  {"exl3"});
  ExpectEverySide(file, {Config("d/config.json", R"({"quantization_config":)" +
                                                     Storage("float16", true, false) + "}")},
                  {}, {"exl3"});
  ExpectEverySide(file, {}, {"REC-006", "", "config"});
  ExpectEverySide(file, {Config("d/config.json", Storage("float16", true, false))},
                  {"REC-006", "", "quantization_config", "d/config.json"});
  ExpectEverySide(file, {Config("q.json", R"({"tensor_storage":{"l":{"stored_tensors":{"l.suh":{"shape":[1.0],"torch_dtype":"half"}}}}})")},
                  {"REC-006", "", "shape", "q.json"});
  ExpectEverySide(file, {Config("q.json", Storage("torch.float32", true, false))},
                  {"REC-007", "l.suh", "torch_dtype"});
  ExpectEverySide(file, {Config("q.json", Storage("float16", false, false))},
                  {"REC-007", "l.svh", "tensor_storage"});
  ExpectEverySide(file, {Config("q.json", Storage("float16", true, true))},
                  {"REC-007", "l.sv", "name"});
}

// Modules and stored tensors are visited in key byte order, not document
// order (docs/recognised.md 5): the first wrong entry by bytes is named.
TEST(RecognisedExl3, TensorStorageIsVisitedInKeyByteOrder) {
  const Bytes file = MakeFile(kExl3);
  const std::string config =
      R"({"tensor_storage":{"z":{"stored_tensors":{"l.trellis":{"shape":[1,1,16],"torch_dtype":"int16"}}},)"
      R"("l":{"stored_tensors":{"l.svh":{"shape":[16],"torch_dtype":"int8"},)"
      R"("l.suh":{"shape":[16],"torch_dtype":"int8"}}}}})";
  ExpectEverySide(file, {Config("q.json", config)}, {"REC-007", "l.suh", "torch_dtype"});
}

TEST(RecognisedDecode, AnAcceptedFileIsRefusedWithRec001) {
  const Bytes file = MakeFile(Qqq());
  const qd::ByteView view{file.data(), file.size()};
  ASSERT_NE(Recognised().decode_refusal, nullptr);
  const qd::Outcome o = Recognised().decode_refusal(view, "m.safetensors", {});
  ASSERT_TRUE(o.refused);
  ASSERT_EQ(o.findings.size(), 2u);
  EXPECT_EQ(o.findings[0].rule, "REC-101");
  EXPECT_EQ(o.findings[1].rule, "REC-001");
  EXPECT_EQ(o.findings[1].tensor, "l.B");
  EXPECT_EQ(o.findings[1].field, "decode");
  // A structural error is reported as it is, not as REC-001.
  std::vector<T> broken = Qqq();
  broken[2].shape = {1, 5};
  const Bytes bad = MakeFile(broken);
  const qd::Outcome refused = Recognised().decode_refusal({bad.data(), bad.size()}, "m.safetensors", {});
  ASSERT_TRUE(refused.refused);
  EXPECT_EQ(refused.findings.back().rule, "REC-004");
  // No other format refuses decoding this way.
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    EXPECT_EQ(f.decode_refusal != nullptr, f.name == "recognised") << f.name;
  }
}

}  // namespace
