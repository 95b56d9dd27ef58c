// awq_oracle_peer_test: the AWQ oracle against the vectors GPT-QModel's and
// AutoAWQ's pack code made (QD_AWQ_PEER_DIR: manifest.json and, per case,
// <id>.safetensors, <id>.quantize_config.json, <id>.expected.safetensors).
// For every case (all accept): ReadAwqFile accepts with no finding; the
// layer's codes equal expected.codes, its zeros expected.zeros (GEMM, GEMV)
// or its scaled zeros expected.scaled_zeros (GEMV_FAST); P+weight equals
// expected.dequant bit for bit; PackAwq gives the stored qweight and qzeros
// words back; the GPTQ oracle refuses the same file and config with CFG-005.
// LLM_AWQ, from each GEMV_FAST case as spec 004 describes it (no upstream
// LLM_AWQ vector exists here): the same bytes with the scaled zeros named
// P.scaled_zeros and the config tagged backend llm-awq decode to the case's
// dequant; either half alone is AWQ-101 naming the missing zero member.
// JSON is read with the oracle's own parser.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "oracles/awq.h"
#include "oracles/gptq.h"
#include "oracles/peer_test_support.h"

#ifndef QD_AWQ_PEER_DIR
#error "QD_AWQ_PEER_DIR must name the AWQ peer vector folder"
#endif

namespace qd::oracle {
namespace {

using peer_test::Bytes;
using peer_test::Describe;
using peer_test::FindDecoded;
using peer_test::FirstBitDifference;
using peer_test::FirstDifference;
using peer_test::Floats;
using peer_test::IntegerMember;
using peer_test::Json;
using peer_test::LoadJson;
using peer_test::RawTensor;
using peer_test::ReadBytes;
using peer_test::ReadRawTensor;
using peer_test::StringMember;
using peer_test::View;
using peer_test::Words;

const std::string kPeerDir = QD_AWQ_PEER_DIR;

struct PeerCase {
  std::string id;
  std::string version;  // gemm, gemv, gemv_fast
  std::string prefix;   // with its dot
  std::int64_t group_size = 0;
  bool bias = false;
};

void PrintTo(const PeerCase& peer, std::ostream* os) { *os << peer.id; }

std::vector<PeerCase> LoadCases() {
  std::vector<PeerCase> cases;
  const Json manifest = LoadJson(kPeerDir + "/manifest.json");
  if (!manifest.ok) return cases;
  const JsonDocument& d = manifest.document;
  const std::uint32_t list = d.FindMember(0, "cases");
  if (list == kNoNode) return cases;
  for (std::uint32_t c = d.nodes[list].first_child; c != kNoNode; c = d.nodes[c].next_sibling) {
    PeerCase peer;
    peer.id = StringMember(d, c, "id");
    const std::uint32_t params = d.FindMember(c, "params");
    peer.version = StringMember(d, params, "version");
    peer.prefix = StringMember(d, params, "tensor_prefix") + ".";
    // group_size is -1 in one case: IntegerMember reads unsigned values only.
    const std::uint32_t gs = d.FindMember(params, "group_size");
    peer.group_size = std::string(d.Text(gs)) == "-1" ? -1 : static_cast<std::int64_t>(IntegerMember(d, params, "group_size"));
    peer.bias = d.nodes[d.FindMember(params, "bias")].kind == JsonKind::kTrue;
    cases.push_back(peer);
  }
  return cases;
}

// A tensor's words: I32 as they are, I16 sign-extended.
std::vector<std::int32_t> StoredWords(const RawTensor& t) {
  if (t.dtype != "I16") return Words(t);
  std::vector<std::int32_t> out;
  for (std::size_t i = 0; i + 1 < t.bytes.size(); i += 2) {
    out.push_back(static_cast<std::int16_t>(t.bytes[i] | (t.bytes[i + 1] << 8)));
  }
  return out;
}

TEST(AwqPeer, ManifestHasTenCases) { EXPECT_EQ(LoadCases().size(), 10u); }

class AwqPeerCase : public ::testing::TestWithParam<PeerCase> {};

TEST_P(AwqPeerCase, MatchesTheUpstreamPackers) {
  const PeerCase& peer = GetParam();
  const std::string path = kPeerDir + "/" + peer.id + ".safetensors";
  const std::string config_path = kPeerDir + "/" + peer.id + ".quantize_config.json";
  const Bytes file = ReadBytes(path);
  const Bytes expected = ReadBytes(kPeerDir + "/" + peer.id + ".expected.safetensors");
  const std::vector<qd::SideFile> configs = {{config_path, ReadBytes(config_path)}};

  EXPECT_TRUE(IsAwqFile(View(file)));
  std::vector<AwqLayerCodes> layers;
  const qd::Outcome outcome = ReadAwqFile(View(file), path, configs, &layers);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  ASSERT_EQ(layers.size(), 1u);
  const AwqLayerCodes& layer = layers[0];

  RawTensor codes, dequant, zeros;
  ASSERT_TRUE(ReadRawTensor(expected, "codes", &codes));
  ASSERT_TRUE(ReadRawTensor(expected, "dequant", &dequant));
  ASSERT_TRUE(ReadRawTensor(expected, "zeros", &zeros));
  EXPECT_EQ(layer.in_features, static_cast<std::int64_t>(codes.shape[0]));
  EXPECT_EQ(layer.out_features, static_cast<std::int64_t>(codes.shape[1]));
  EXPECT_EQ(layer.groups, static_cast<std::int64_t>(zeros.shape[0]));
  EXPECT_EQ(FirstDifference(layer.codes, Words(codes)), -1);
  if (peer.version == "gemv_fast") {
    RawTensor scaled;
    ASSERT_TRUE(ReadRawTensor(expected, "scaled_zeros", &scaled));
    EXPECT_EQ(FirstBitDifference(layer.scaled_zeros, Floats(scaled)), -1);
  } else {
    EXPECT_EQ(FirstDifference(layer.zeros, Words(zeros)), -1);
  }
  const qd::DecodedTensor* weight = FindDecoded(outcome, peer.prefix + "weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->shape, (std::vector<std::uint64_t>{codes.shape[1], codes.shape[0]}));
  EXPECT_EQ(FirstBitDifference(weight->values, Floats(dequant)), -1);
  EXPECT_EQ(outcome.tensors.size(), peer.bias ? 2u : 1u);

  // The reference packer gives the stored words back.
  std::vector<std::int32_t> qweight, qzeros;
  std::string error;
  ASSERT_TRUE(PackAwq(peer.version, layer.in_features, layer.out_features, peer.group_size,
                      Words(codes), Words(zeros), &qweight, &qzeros, &error))
      << error;
  RawTensor stored_qweight, stored_qzeros;
  ASSERT_TRUE(ReadRawTensor(file, peer.prefix + "qweight", &stored_qweight));
  ASSERT_TRUE(ReadRawTensor(file, peer.prefix + "qzeros", &stored_qzeros));
  EXPECT_EQ(FirstDifference(qweight, StoredWords(stored_qweight)), -1);
  if (peer.version != "gemv_fast") {
    EXPECT_EQ(FirstDifference(qzeros, Words(stored_qzeros)), -1);
  }

  // The GPTQ oracle on the same file and config: CFG-005 (docs/awq.md 2).
  const qd::Outcome gptq = ReadGptqFile(View(file), path, configs);
  ASSERT_TRUE(gptq.refused);
  EXPECT_EQ(gptq.findings.back().rule, "CFG-005") << Describe(gptq);
}

// FILE with its tensor FROM renamed TO (the header rebuilt, data unchanged).
Bytes Renamed(const Bytes& file, const std::string& from, const std::string& to) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n * 256 + file[static_cast<std::size_t>(i)];
  std::string header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  header.replace(header.find("\"" + from + "\""), from.size() + 2, "\"" + to + "\"");
  header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), file.begin() + 8 + static_cast<std::ptrdiff_t>(n), file.end());
  return out;
}

class AwqPeerLlmAwq : public ::testing::TestWithParam<PeerCase> {};

TEST_P(AwqPeerLlmAwq, DecodesAsTheGemvFastCase) {
  const PeerCase& peer = GetParam();
  const std::string path = kPeerDir + "/" + peer.id + ".safetensors";
  const std::string config_path = kPeerDir + "/" + peer.id + ".quantize_config.json";
  const Bytes file = ReadBytes(path);
  const Bytes llm_file = Renamed(file, peer.prefix + "qzeros", peer.prefix + "scaled_zeros");
  const Bytes config = ReadBytes(config_path);
  std::string tagged_text(config.begin(), config.end());
  tagged_text.insert(tagged_text.find('{') + 1, "\"backend\": \"llm-awq\", ");
  const std::vector<qd::SideFile> tagged = {{config_path, Bytes(tagged_text.begin(), tagged_text.end())}};
  RawTensor dequant;
  ASSERT_TRUE(ReadRawTensor(ReadBytes(kPeerDir + "/" + peer.id + ".expected.safetensors"), "dequant", &dequant));

  const qd::Outcome outcome = ReadAwqFile(View(llm_file), path, tagged);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  const qd::DecodedTensor* weight = FindDecoded(outcome, peer.prefix + "weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(FirstBitDifference(weight->values, Floats(dequant)), -1);
  EXPECT_EQ(outcome.tensors.size(), peer.bias ? 2u : 1u);  // scaled_zeros consumed

  // Each half alone: the zero member the label names is missing.
  const qd::Outcome untagged_names = ReadAwqFile(View(file), path, tagged);
  ASSERT_TRUE(untagged_names.refused);
  EXPECT_EQ(untagged_names.findings.back().rule, "AWQ-101");
  EXPECT_EQ(untagged_names.findings.back().field, "scaled_zeros");
  const qd::Outcome untagged_config =
      ReadAwqFile(View(llm_file), path, {{config_path, config}});
  ASSERT_TRUE(untagged_config.refused);
  EXPECT_EQ(untagged_config.findings.back().rule, "AWQ-101");
  EXPECT_EQ(untagged_config.findings.back().field, "qzeros");
  // The GPTQ oracle: the tag says awq (CFG-005 on the backend key).
  const qd::Outcome gptq = ReadGptqFile(View(llm_file), path, tagged);
  ASSERT_TRUE(gptq.refused);
  EXPECT_EQ(gptq.findings.back().rule, "CFG-005") << Describe(gptq);
  EXPECT_EQ(gptq.findings.back().field, "backend");
}

std::string CaseTestName(const ::testing::TestParamInfo<PeerCase>& info) {
  std::string name = info.param.id;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Manifest, AwqPeerCase, ::testing::ValuesIn(LoadCases()),
                         CaseTestName);

// LLM_AWQ is GEMV_FAST's layout: its cases only.
std::vector<PeerCase> GemvFastCases() {
  std::vector<PeerCase> cases;
  for (const PeerCase& c : LoadCases()) {
    if (c.version == "gemv_fast") cases.push_back(c);
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(GemvFast, AwqPeerLlmAwq, ::testing::ValuesIn(GemvFastCases()),
                         CaseTestName);

}  // namespace
}  // namespace qd::oracle
