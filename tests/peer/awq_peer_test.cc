// awq_peer_test: the AWQ codec against vectors GPT-QModel's and AutoAWQ's own
// pack code made (${QD_PEER_DIR}/awq: manifest.json, one test per case; all
// ten are accept cases):
//  * the file is claimed as AWQ and accepted with no finding; the config
//    (GPT-QModel quantize_config.json, AutoAWQ's transformers object or its
//    legacy w_bit / q_group_size / zero_point payload) resolves to the case's
//    version, bits and group size;
//  * AwqUnpack gives `codes` and (GEMM, GEMV) `zeros`; the decoded
//    <prefix>weight equals `dequant` bit for bit, signs of zero included; a
//    bias passes through widened;
//  * AwqEncode reproduces the packers' qweight and qzeros words;
//  * GEMM: the upstream bug the manifest records (GPT-QModel convert_awq_file
//    unpacks columns without AWQ's order) is real: the natural-order reading
//    gives other codes;
//  * the GPTQ reader, handed the same file and config, refuses it with
//    CFG-005 naming awq (docs/awq.md section 2);
//  * `convert` (docs/awq.md section 11) to gptq_v2, gptq_p, awq_gemm and
//    awq_gemv writes a file that, read with the config written beside it,
//    decodes to the manifest's `dequant` bit for bit; to gptq (v1) the same,
//    or, where expected.zeros holds a 0, AWQ-201 at its first (group,
//    column); a GEMV_FAST case is AWQ-203 for every target.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/convert.h"
#include "codecs/awq.h"
#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "tests/peer/peer_file.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qdtest::peer::Case;
using qdtest::peer::CaseName;
using qdtest::peer::FirstDifference;
using qdtest::peer::FloatsReadByTheTests;
using qdtest::peer::ReadBytes;
constexpr auto Load = qdtest::peer::LoadFile;

const fs::path kDir = QD_PEER_AWQ_DIR;

std::vector<Case> LoadCases() { return qdtest::peer::LoadCases(kDir / "manifest.json"); }

std::string TensorPath(const std::string& id) { return (kDir / (id + ".safetensors")).string(); }

// The one source docs/gptq.md section 1 finds beside a peer file.
std::vector<qd::SideFile> Configs(const std::string& id) {
  const std::string path = (kDir / (id + ".quantize_config.json")).string();
  return {qd::SideFile{path, ReadBytes(path)}};
}

// A tensor's raw words as int32 (I32) or sign-extended int16 (I16).
std::vector<std::int32_t> Words(const qdtest::peer::File& f, const std::string& name) {
  const qd::codec::TensorEntry* t = f.Find(name);
  if (t == nullptr) return {};
  const std::vector<std::uint8_t> raw = f.Raw(name);
  std::vector<std::int32_t> out;
  if (t->dtype == qd::codec::Dtype::kI16) {
    for (std::size_t i = 0; i + 1 < raw.size(); i += 2) {
      out.push_back(static_cast<std::int16_t>(raw[i] | (raw[i + 1] << 8)));
    }
  } else {
    out.resize(raw.size() / 4);
    if (!out.empty()) std::memcpy(out.data(), raw.data(), raw.size());
  }
  return out;
}

qd::codec::AwqFormat FormatOf(const std::string& version) {
  if (version == "gemv") return qd::codec::AwqFormat::kGemv;
  if (version == "gemv_fast") return qd::codec::AwqFormat::kGemvFast;
  return qd::codec::AwqFormat::kGemm;
}

// Every kernel (codecs/kernels.h: scalar, and AVX2 for GEMM, GEMV and
// GEMV_FAST) decodes the one layer of R to the case's dequant bit for bit.
void ExpectEveryKernelGivesTheDequant(const qd::codec::AwqResult& r, const std::vector<std::uint8_t>& expected) {
  ASSERT_EQ(r.layers.size(), 1u);
  const qd::codec::AwqLayerView view = qd::codec::ViewOf(r, r.layers[0]);
  const std::vector<float> dequant = FloatsReadByTheTests(expected, "dequant");
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    std::vector<float> rows(static_cast<std::size_t>(view.out_features * view.in_features));
    qd::codec::AwqDequantizeRows(view, 0, view.out_features, rows.data(), kernel);
    EXPECT_EQ(FirstDifference(rows, dequant), "") << qd::codec::KernelName(kernel);
  }
}

class AwqPeer : public testing::TestWithParam<Case> {};

TEST_P(AwqPeer, Case) {
  const Case& c = GetParam();
  const json& p = c.spec["params"];
  ASSERT_EQ(c.spec["verdict"], "accept");
  const std::string prefix = p["tensor_prefix"].get<std::string>() + ".";
  const std::string version = p["version"].get<std::string>();
  const std::int64_t k = p["in_features"].get<std::int64_t>();
  const std::int64_t n = p["out_features"].get<std::int64_t>();
  const std::int64_t g = p["n_groups"].get<std::int64_t>();
  const std::string path = TensorPath(c.id);
  const auto file = Load(path);
  const auto expected = Load(kDir / (c.id + ".expected.safetensors"));
  ASSERT_TRUE(file->ok && expected->ok);
  const std::vector<qd::SideFile> configs = Configs(c.id);

  EXPECT_TRUE(qd::codec::ClaimsAwq(file->View()));
  const qd::codec::AwqResult r = qd::codec::ReadAwq(file->View(), path, configs);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(qd::codec::AwqFormatName(r.format), version);
  EXPECT_EQ(r.config.method, "awq");
  EXPECT_EQ(r.config.bits, p["bits"].get<int>());
  EXPECT_EQ(r.config.group_size, p["group_size"].get<std::int64_t>());
  ASSERT_TRUE(r.config.sym.has_value());
  EXPECT_EQ(*r.config.sym, p["sym"].get<bool>());
  ASSERT_EQ(r.layers.size(), 1u);
  const qd::codec::AwqLayer& layer = r.layers[0];
  EXPECT_EQ(layer.prefix, prefix);
  EXPECT_EQ(layer.in_features, k);
  EXPECT_EQ(layer.out_features, n);
  EXPECT_EQ(layer.groups, g);
  if (p.contains("zeros_width")) {
    EXPECT_EQ(layer.zeros_width, p["zeros_width"].get<std::int64_t>());
  }

  const std::vector<std::int32_t> want_codes = expected->Ints("codes");
  const std::vector<std::int32_t> want_zeros = expected->Ints("zeros");
  std::vector<std::int32_t> codes, zeros;
  qd::codec::AwqUnpack(qd::codec::ViewOf(r, layer), &codes, &zeros);
  EXPECT_TRUE(codes == want_codes) << "codes";
  if (version != "gemv_fast") {
    EXPECT_TRUE(zeros == want_zeros) << "zeros";
  }

  const qd::Outcome o = qd::codec::DecodeAwqFile(file->View(), path, configs);
  ASSERT_FALSE(o.refused);
  const bool bias = p["bias"].get<bool>();
  ASSERT_EQ(o.tensors.size(), bias ? 2u : 1u);
  std::map<std::string, const qd::DecodedTensor*> by_name;
  for (const auto& t : o.tensors) by_name[t.name] = &t;
  ASSERT_TRUE(by_name.count(prefix + "weight"));
  const qd::DecodedTensor& w = *by_name[prefix + "weight"];
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(k)}));
  EXPECT_EQ(FirstDifference(w.values, FloatsReadByTheTests(expected->bytes, "dequant")), "");
  ExpectEveryKernelGivesTheDequant(r, expected->bytes);
  if (bias) {
    ASSERT_TRUE(by_name.count(prefix + "bias"));
    EXPECT_EQ(FirstDifference(by_name[prefix + "bias"]->values,
                              FloatsReadByTheTests(file->bytes, prefix + "bias")),
              "");
  }

  // The encoder gives the packers' words back (GEMV_FAST stores no integer
  // zeros: its qzeros are the writer's scaled zeros).
  qd::codec::AwqPacked packed;
  std::string error;
  ASSERT_TRUE(qd::codec::AwqEncode(FormatOf(version), k, n, p["group_size"].get<std::int64_t>(), want_codes,
                                   want_zeros, &packed, &error))
      << error;
  EXPECT_TRUE(packed.qweight == Words(*file, prefix + "qweight")) << "qweight words";
  if (version != "gemv_fast") {
    EXPECT_TRUE(packed.qzeros == Words(*file, prefix + "qzeros")) << "qzeros words";
  }

  // The manifest's upstream bug: reading GEMM words in natural column order
  // (nibble i = column 8c + i), as convert_awq_file does, gives other codes.
  if (version == "gemm") {
    EXPECT_NE(c.spec["upstream_checks"].dump().find("DIFFERS"), std::string::npos);
    const std::vector<std::int32_t> words = Words(*file, prefix + "qweight");
    std::size_t differing = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      for (std::int64_t nn = 0; nn < n; ++nn) {
        const std::uint32_t word = static_cast<std::uint32_t>(words[kk * (n / 8) + nn / 8]);
        const std::int32_t natural = static_cast<std::int32_t>((word >> (4 * (nn % 8))) & 0xFu);
        differing += natural != want_codes[kk * n + nn] ? 1 : 0;
      }
    }
    EXPECT_GT(differing, 0u);
  }

  // The other family's reader names both (docs/awq.md section 2).
  const qd::codec::GptqResult gptq = qd::codec::ReadGptq(file->View(), path, configs);
  ASSERT_TRUE(gptq.refused);
  EXPECT_EQ(gptq.findings.back().rule, "CFG-005");
  std::string message = gptq.findings.back().message;
  for (char& ch : message) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  EXPECT_NE(message.find("awq"), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Manifest, AwqPeer, testing::ValuesIn(LoadCases()), CaseName);

class AwqPeerConvert : public testing::TestWithParam<Case> {};

TEST_P(AwqPeerConvert, EveryTargetDecodesToTheManifestDequant) {
  const Case& c = GetParam();
  const json& p = c.spec["params"];
  const std::string prefix = p["tensor_prefix"].get<std::string>() + ".";
  const bool fast = p["version"] == "gemv_fast";
  const std::string path = TensorPath(c.id);
  const auto file = Load(path);
  const auto expected = Load(kDir / (c.id + ".expected.safetensors"));
  ASSERT_TRUE(file->ok && expected->ok);
  const std::vector<float> dequant = FloatsReadByTheTests(expected->bytes, "dequant");
  // The first zero point 0 in row-major order: what gptq (v1) cannot hold.
  const std::vector<std::int32_t> zeros = expected->Ints("zeros");
  const std::int64_t n = p["out_features"].get<std::int64_t>();
  std::int64_t first_zero = -1;
  for (std::size_t i = 0; i < zeros.size() && first_zero < 0 && !fast; ++i) {
    if (zeros[i] == 0) first_zero = static_cast<std::int64_t>(i);
  }

  for (const char* to : {"gptq", "gptq_v2", "gptq_p", "awq_gemm", "awq_gemv"}) {
    SCOPED_TRACE(to);
    qd::cli::ConvertTarget target;
    ASSERT_TRUE(qd::cli::ParseConvertTarget(to, &target));
    qd::cli::GptqConversion converted;
    std::string error;
    const int verdict = qd::cli::ConvertQuantized(
        file->View(), path, Configs(c.id), target, "converted.safetensors",
        [](const qd::harness::SideFiles& pending, qd::harness::SideFiles* found, std::string*) {
          *found = pending;
          return true;
        },
        &converted, &error);
    const bool cannot_hold = fast || (std::string(to) == "gptq" && first_zero >= 0);
    if (cannot_hold) {
      EXPECT_EQ(verdict, 1);
      EXPECT_EQ(converted.refusal, qd::cli::ConvertRefusal::kTargetCannotHold);
      continue;
    }
    ASSERT_EQ(verdict, 0) << error;
    const std::vector<qd::SideFile> beside = {
        {converted.config_path, std::vector<std::uint8_t>(converted.config_text.begin(), converted.config_text.end())}};
    const qd::ByteView out{converted.file.data(), converted.file.size()};
    const qd::Outcome o = target.awq ? qd::codec::DecodeAwqFile(out, "converted.safetensors", beside)
                                     : qd::codec::DecodeGptqFile(out, "converted.safetensors", beside);
    ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
    EXPECT_TRUE(o.findings.empty());
    bool found = false;
    for (const qd::DecodedTensor& t : o.tensors) {
      if (t.name != prefix + "weight") continue;
      found = true;
      EXPECT_EQ(FirstDifference(t.values, dequant), "");
    }
    EXPECT_TRUE(found);
  }

  // The refusals' rule and place, from the plain fields.
  const qd::codec::AwqResult r = qd::codec::ReadAwq(file->View(), path, Configs(c.id));
  ASSERT_FALSE(r.refused);
  qd::codec::QuantFields fields;
  qd::codec::GptqPackError e;
  if (fast) {
    EXPECT_FALSE(qd::codec::FieldsOfAwq(qd::codec::ViewOf(r, r.layers[0]), &fields, &e));
    EXPECT_EQ(e.rule, "AWQ-203");
    return;
  }
  ASSERT_TRUE(qd::codec::FieldsOfAwq(qd::codec::ViewOf(r, r.layers[0]), &fields, &e));
  qd::codec::QuantTensors t;
  EXPECT_EQ(qd::codec::PackFieldsAsGptq(fields, qd::codec::GptqFormat::kV1, &t, &e), first_zero < 0);
  if (first_zero >= 0) {
    EXPECT_EQ(e.rule, "AWQ-201");
    EXPECT_EQ(e.row, first_zero / n);
    EXPECT_EQ(e.column, first_zero % n);
  }
}

INSTANTIATE_TEST_SUITE_P(Manifest, AwqPeerConvert, testing::ValuesIn(LoadCases()), CaseName);

// The GEMV_FAST cases, read as LLM_AWQ.
std::vector<Case> GemvFastCases() {
  return qdtest::peer::LoadCases(kDir / "manifest.json",
                                 [](const json& c) { return c["params"]["version"] == "gemv_fast"; });
}

class AwqPeerLlmAwq : public testing::TestWithParam<Case> {};

TEST_P(AwqPeerLlmAwq, DecodesAsTheGemvFastCase) {
  const Case& c = GetParam();
  const std::string prefix = c.spec["params"]["tensor_prefix"].get<std::string>() + ".";
  const std::string path = TensorPath(c.id);
  const auto file = Load(path);
  const auto expected = Load(kDir / (c.id + ".expected.safetensors"));
  ASSERT_TRUE(file->ok && expected->ok);
  // The header with P.qzeros renamed P.scaled_zeros; the data unchanged.
  json header = json::parse(file->bytes.begin() + 8, file->bytes.begin() + 8 + file->container.header_length);
  header[prefix + "scaled_zeros"] = header[prefix + "qzeros"];
  header.erase(prefix + "qzeros");
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> renamed;
  for (int i = 0; i < 8; ++i) renamed.push_back(static_cast<std::uint8_t>(text.size() >> (8 * i)));
  renamed.insert(renamed.end(), text.begin(), text.end());
  renamed.insert(renamed.end(), file->bytes.begin() + 8 + file->container.header_length, file->bytes.end());
  json config = json::parse(Configs(c.id)[0].bytes);
  config["backend"] = "LLM-AWQ";  // read case-insensitively
  const std::string tagged_text = config.dump();
  const std::vector<qd::SideFile> tagged = {{Configs(c.id)[0].name, {tagged_text.begin(), tagged_text.end()}}};
  const qd::ByteView llm{renamed.data(), renamed.size()};

  const qd::codec::AwqResult r = qd::codec::ReadAwq(llm, path, tagged);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(r.llm_awq);
  EXPECT_EQ(r.config.format_name, "llm-awq");
  EXPECT_EQ(r.config.method, "awq");
  const qd::Outcome o = qd::codec::DecodeAwqFile(llm, path, tagged);
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);  // scaled_zeros consumed
  EXPECT_EQ(o.tensors[0].name, prefix + "weight");
  EXPECT_EQ(FirstDifference(o.tensors[0].values, FloatsReadByTheTests(expected->bytes, "dequant")), "");
  ExpectEveryKernelGivesTheDequant(r, expected->bytes);

  const qd::codec::AwqResult names_alone = qd::codec::ReadAwq(file->View(), path, tagged);
  ASSERT_TRUE(names_alone.refused);
  EXPECT_EQ(names_alone.findings.back().rule, "AWQ-101");
  EXPECT_EQ(names_alone.findings.back().field, "scaled_zeros");
  const qd::codec::AwqResult tag_alone = qd::codec::ReadAwq(llm, path, Configs(c.id));
  ASSERT_TRUE(tag_alone.refused);
  EXPECT_EQ(tag_alone.findings.back().rule, "AWQ-101");
  EXPECT_EQ(tag_alone.findings.back().field, "qzeros");
  const qd::codec::GptqResult gptq = qd::codec::ReadGptq(llm, path, tagged);
  ASSERT_TRUE(gptq.refused);
  EXPECT_EQ(gptq.findings.back().rule, "CFG-005");
  EXPECT_EQ(gptq.findings.back().field, "backend");
}

INSTANTIATE_TEST_SUITE_P(GemvFast, AwqPeerLlmAwq, testing::ValuesIn(GemvFastCases()), CaseName);

TEST(AwqPeerManifest, HasEveryCase) {
  const std::vector<Case> cases = LoadCases();
  EXPECT_EQ(cases.size(), 10u);
  std::map<std::string, int> families;
  for (const Case& c : cases) ++families[c.spec["family"].get<std::string>()];
  EXPECT_EQ(families["awq_gemm"], 4);
  EXPECT_EQ(families["awq_gemv"], 3);
  EXPECT_EQ(families["awq_gemv_fast"], 3);
}

}  // namespace
