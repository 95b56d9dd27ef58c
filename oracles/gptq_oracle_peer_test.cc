// gptq_oracle_peer_test.cc: the oracle against the GPTQ peer vectors
// (QD_GPTQ_PEER_DIR: manifest.json and, per case, <id>.safetensors,
// <id>.quantize_config.json and for accept cases <id>.expected.safetensors)
// and the GPTQ model directories (QD_MODELS_PEER_DIR: gptq4-autogptq,
// broken-e-bits-mismatch, broken-f-group-size-disagree), all read in place.
// They record what AutoGPTQ 9f7d370 and GPT-QModel f4c327a write and read.
//
// For every case of manifest.json:
//   accept   ReadGptqFile accepts; the layer's codes and zeros equal
//            expected.codes / expected.zeros; P+weight equals expected.dequant
//            bit for bit (signs of zero included: docs/gptq.md section 11 says
//            the contract reproduces them, which is stricter than the
//            manifest's "-0.0 == +0.0"); PackGptq gives the stored qweight and
//            qzeros words back from expected.codes / expected.zeros; the only
//            findings are the warnings the contract predicts (GPTQ-107 on the
//            zero-0 edge files, CFG-101 on the legacy config).
//   reject   ReadGptqFile refuses with the manifest's rule; the finding's
//            file, tensor, field and byte_offset are the ones docs/gptq.md
//            section 3 gives (the manifest records none of them).
//   pairs    the GPTQ-006 v1 / v2 pairs decode to the same bits.
// The config sources are found as docs/gptq.md section 1 says (here and for
// the model directories). JSON is read with the oracle's own parser.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "oracles/gptq.h"
#include "oracles/json.h"
#include "oracles/peer_test_support.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

#ifndef QD_GPTQ_PEER_DIR
#error "QD_GPTQ_PEER_DIR must name the GPTQ peer vector folder"
#endif
#ifndef QD_MODELS_PEER_DIR
#error "QD_MODELS_PEER_DIR must name the peer model folder"
#endif

namespace qd::oracle {
namespace {

using peer_test::Bits;
using peer_test::Bytes;
using peer_test::Describe;
using peer_test::FindDecoded;
using peer_test::IntegerMember;
using peer_test::Json;
using peer_test::LoadJson;
using peer_test::ReadBytes;
using peer_test::StringMember;
using peer_test::View;
using peer_test::RawTensor;
using peer_test::ReadRawTensor;
using peer_test::Words;
using peer_test::Floats;
using peer_test::FirstBitDifference;
using peer_test::FirstDifference;

const std::string kPeerDir = QD_GPTQ_PEER_DIR;
const std::string kModelsDir = QD_MODELS_PEER_DIR;

bool IsRegularFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// ---------------------------------------------------------------------------
// Config discovery, docs/gptq.md section 1 (no --config): the candidates
// beside FILE that exist as regular files, in priority order, named by path.
// ReadGptqFile itself reads a source named .../config.json nested.
std::vector<qd::SideFile> ConfigSources(const std::string& file) {
  const std::size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : file.substr(0, slash + 1);
  std::string stem = file.substr(dir.size());
  const std::string extension = ".safetensors";
  if (stem.size() >= extension.size() &&
      stem.compare(stem.size() - extension.size(), extension.size(), extension) == 0) {
    stem.resize(stem.size() - extension.size());
  }
  std::vector<qd::SideFile> sources;
  for (const std::string& candidate :
       {dir + stem + ".quantize_config.json", dir + "quantize_config.json",
        dir + "quant_config.json", dir + "config.json"}) {
    if (!IsRegularFile(candidate)) continue;
    sources.push_back(qd::SideFile{candidate, ReadBytes(candidate)});
  }
  return sources;
}

// ---------------------------------------------------------------------------
// The manifest.

const Json& Manifest() {
  static const Json manifest = LoadJson(kPeerDir + "/manifest.json");
  return manifest;
}

const Json& ModelsManifest() {
  static const Json manifest = LoadJson(kModelsDir + "/manifest.json");
  return manifest;
}

struct PeerCase {
  std::string id;
  std::string family;  // gptq_v1, gptq_v2, gptq_p
  std::string verdict;
  std::string rule;
  std::string pair;
  std::string prefix;  // tensor_prefix with its dot
  std::string tensors_path;
  std::string expected_path;
  int bits = 0;
};

std::vector<PeerCase> LoadCases() {
  std::vector<PeerCase> cases;
  const Json& manifest = Manifest();
  if (!manifest.ok) return cases;
  const JsonDocument& d = manifest.document;
  const std::uint32_t list = d.FindMember(0, "cases");
  if (list == kNoNode || d.nodes[list].kind != JsonKind::kArray) return cases;
  for (std::uint32_t c = d.nodes[list].first_child; c != kNoNode; c = d.nodes[c].next_sibling) {
    PeerCase peer;
    peer.id = StringMember(d, c, "id");
    peer.family = StringMember(d, c, "family");
    peer.verdict = StringMember(d, c, "verdict");
    peer.rule = StringMember(d, c, "rule");
    peer.pair = StringMember(d, c, "pair");
    const std::uint32_t params = d.FindMember(c, "params");
    peer.prefix = StringMember(d, params, "tensor_prefix") + ".";
    peer.bits = static_cast<int>(IntegerMember(d, params, "bits"));
    const std::uint32_t files = d.FindMember(c, "files");
    const std::uint32_t tensors = files == kNoNode ? kNoNode : d.FindMember(files, "tensors");
    const std::uint32_t expected = files == kNoNode ? kNoNode : d.FindMember(files, "expected");
    peer.tensors_path = StringMember(d, tensors, "path");
    peer.expected_path = StringMember(d, expected, "path");
    cases.push_back(peer);
  }
  return cases;
}

std::string FormatOf(const PeerCase& peer) {
  if (peer.family == "gptq_v2") return "gptq_v2";
  if (peer.family == "gptq_p") return "gptq_p";
  return "gptq";
}

qd::Outcome ReadCase(const PeerCase& peer, std::vector<GptqLayerCodes>* layers) {
  const std::string path = kPeerDir + "/" + peer.tensors_path;
  const Bytes file = ReadBytes(path);
  return ReadGptqFile(View(file), path, ConfigSources(path), layers);
}

// ---------------------------------------------------------------------------
// The peer vectors.

TEST(GptqPeer, ManifestIsReadByTheOraclesParser) {
  ASSERT_TRUE(Manifest().ok);
  const std::vector<PeerCase> cases = LoadCases();
  EXPECT_EQ(cases.size(), 51u);
  int accepts = 0, rejects = 0;
  for (const PeerCase& peer : cases) {
    accepts += peer.verdict == "accept";
    rejects += peer.verdict == "reject";
  }
  EXPECT_EQ(accepts, 41);
  EXPECT_EQ(rejects, 10);
}

void PrintTo(const PeerCase& peer, std::ostream* os) { *os << peer.id; }

class GptqPeerCase : public ::testing::TestWithParam<PeerCase> {};

// The finding fields docs/gptq.md section 3 gives the manifest's reject
// cases (the manifest records the rule only).
struct ExpectedFinding {
  std::string file;  // "config" for the config source, else the tensor file
  std::string tensor;
  std::string field;
  std::int64_t byte_offset = 8;
  std::int64_t element = -1;
};

TEST_P(GptqPeerCase, OracleAgreesWithUpstream) {
  const PeerCase& peer = GetParam();
  const std::string path = kPeerDir + "/" + peer.tensors_path;
  const Bytes file = ReadBytes(path);
  ASSERT_FALSE(file.empty()) << path;
  const std::vector<qd::SideFile> configs = ConfigSources(path);
  ASSERT_EQ(configs.size(), 1u) << "the <stem>.quantize_config.json beside the file";
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome outcome = ReadGptqFile(View(file), path, configs, &layers);

  if (peer.verdict == "reject") {
    ASSERT_TRUE(outcome.refused) << Describe(outcome);
    const qd::Finding& f = outcome.findings.back();
    EXPECT_EQ(f.rule, peer.rule) << Describe(outcome);
    EXPECT_EQ(f.severity, qd::Severity::kError);
    EXPECT_EQ(f.block, -1);
    // The contract's finding fields for each reject case.
    ExpectedFinding want;
    const std::string& p = peer.prefix;
    if (peer.id == "neg-gptq001-bits1" || peer.id == "neg-gptq001-bits5-labeled-gptq") {
      want = {"config", "", "bits", -1};
    } else if (peer.id == "neg-gptq005-checkpoint-format-marlin") {
      want = {"config", "", "checkpoint_format", -1};
    } else if (peer.id == "neg-gptq005-is-marlin-format-true") {
      want = {"config", "", "is_marlin_format", -1};
    } else if (peer.rule == "GPTQ-002") {
      want = {"file", p + "qweight", "shape", 8};
    } else if (peer.rule == "GPTQ-003") {
      want = {"file", p + "qzeros", "shape", 8};
    } else if (peer.id == "neg-gptq004-gidx-short") {
      want = {"file", p + "g_idx", "shape", 8};
    } else if (peer.id == "neg-gptq004-gidx-out-of-range") {
      // "g_idx[5] = n_groups (2)": byte 4 * 5 of g_idx's data.
      RawTensor g_idx;
      ASSERT_TRUE(ReadRawTensor(file, p + "g_idx", &g_idx));
      want = {"file", p + "g_idx", "g_idx", g_idx.data_offset + 20, 5};
    } else {
      FAIL() << "no expectation for reject case " << peer.id;
    }
    EXPECT_EQ(f.file, want.file == "config" ? configs[0].name : path);
    EXPECT_EQ(f.tensor, want.tensor);
    EXPECT_EQ(f.field, want.field);
    EXPECT_EQ(f.byte_offset, want.byte_offset);
    EXPECT_EQ(f.row, -1);
    EXPECT_EQ(f.element, want.element);
    return;
  }

  ASSERT_EQ(peer.verdict, "accept");
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  // The warnings the contract predicts, and no other finding.
  std::vector<std::string> want_rules;
  if (peer.id.find("edge-zero0") != std::string::npos) want_rules = {"GPTQ-107"};
  if (peer.id.find("legacycfg") != std::string::npos) want_rules = {"CFG-101"};
  std::vector<std::string> rules;
  for (const qd::Finding& f : outcome.findings) rules.push_back(f.rule);
  EXPECT_EQ(rules, want_rules) << Describe(outcome);

  ASSERT_EQ(layers.size(), 1u);
  const GptqLayerCodes& layer = layers[0];
  EXPECT_EQ(layer.prefix, peer.prefix);

  const Bytes expected_file = ReadBytes(kPeerDir + "/" + peer.expected_path);
  RawTensor codes, zeros, dequant;
  ASSERT_TRUE(ReadRawTensor(expected_file, "codes", &codes));
  ASSERT_TRUE(ReadRawTensor(expected_file, "zeros", &zeros));
  ASSERT_TRUE(ReadRawTensor(expected_file, "dequant", &dequant));
  ASSERT_EQ(codes.shape.size(), 2u);
  ASSERT_EQ(zeros.shape.size(), 2u);
  EXPECT_EQ(layer.in_features, static_cast<std::int64_t>(codes.shape[0]));
  EXPECT_EQ(layer.out_features, static_cast<std::int64_t>(codes.shape[1]));
  EXPECT_EQ(layer.groups, static_cast<std::int64_t>(zeros.shape[0]));

  const std::vector<std::int32_t> want_codes = Words(codes);
  const std::vector<std::int32_t> want_zeros = Words(zeros);
  const std::int64_t code_diff = FirstDifference(layer.codes, want_codes);
  EXPECT_EQ(code_diff, -1) << "first differing code index " << code_diff;
  const std::int64_t zero_diff = FirstDifference(layer.zeros, want_zeros);
  EXPECT_EQ(zero_diff, -1) << "first differing zero index " << zero_diff;

  // P+weight [N, K] equals expected.dequant bit for bit.
  const qd::DecodedTensor* weight = FindDecoded(outcome, peer.prefix + "weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->shape, dequant.shape);
  const std::vector<float> want_dequant = Floats(dequant);
  const std::int64_t diff = FirstBitDifference(weight->values, want_dequant);
  EXPECT_EQ(diff, -1) << "first differing dequant element " << diff << ": oracle bits "
                      << std::hex
                      << (diff >= 0 && diff < static_cast<std::int64_t>(weight->values.size())
                              ? Bits(weight->values[diff])
                              : 0u)
                      << ", expected bits "
                      << (diff >= 0 && diff < static_cast<std::int64_t>(want_dequant.size())
                              ? Bits(want_dequant[diff])
                              : 0u);

  // The reference packer gives the stored words back from the expected
  // codes and zeros.
  RawTensor qweight, qzeros;
  ASSERT_TRUE(ReadRawTensor(file, peer.prefix + "qweight", &qweight));
  ASSERT_TRUE(ReadRawTensor(file, peer.prefix + "qzeros", &qzeros));
  std::vector<std::int32_t> packed_weight, packed_zeros;
  std::string error;
  ASSERT_TRUE(PackGptq(FormatOf(peer), peer.bits, static_cast<std::int64_t>(codes.shape[0]),
                       static_cast<std::int64_t>(codes.shape[1]),
                       static_cast<std::int64_t>(zeros.shape[0]), want_codes, want_zeros,
                       &packed_weight, &packed_zeros, &error))
      << error;
  const std::int64_t weight_diff = FirstDifference(packed_weight, Words(qweight));
  EXPECT_EQ(weight_diff, -1) << "first differing qweight word " << weight_diff;
  const std::int64_t zeros_diff = FirstDifference(packed_zeros, Words(qzeros));
  EXPECT_EQ(zeros_diff, -1) << "first differing qzeros word " << zeros_diff;

  // A GPTQ-006 pair decodes to the same bits as its partner.
  if (!peer.pair.empty()) {
    PeerCase partner;
    for (const PeerCase& other : LoadCases()) {
      if (other.id == peer.pair) partner = other;
    }
    ASSERT_EQ(partner.id, peer.pair);
    const qd::Outcome other = ReadCase(partner, nullptr);
    ASSERT_FALSE(other.refused) << Describe(other);
    const qd::DecodedTensor* other_weight = FindDecoded(other, partner.prefix + "weight");
    ASSERT_NE(other_weight, nullptr);
    EXPECT_EQ(FirstBitDifference(weight->values, other_weight->values), -1);
  }
}

std::string CaseName(const ::testing::TestParamInfo<PeerCase>& info) {
  std::string name;
  for (const char c : info.param.id) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    name += word ? c : '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Manifest, GptqPeerCase, ::testing::ValuesIn(LoadCases()), CaseName);

// ---------------------------------------------------------------------------
// The model directories.

// The directory entry `name` of models/manifest.json, or kNoNode.
std::uint32_t ModelEntry(const std::string& name) {
  const JsonDocument& d = ModelsManifest().document;
  const std::uint32_t list = d.FindMember(0, "directories");
  if (list == kNoNode) return kNoNode;
  for (std::uint32_t e = d.nodes[list].first_child; e != kNoNode; e = d.nodes[e].next_sibling) {
    if (StringMember(d, e, "name") == name) return e;
  }
  return kNoNode;
}

TEST(GptqPeerModels, Gptq4AutogptqDecodesEveryLayerBitForBit) {
  ASSERT_TRUE(ModelsManifest().ok);
  const std::uint32_t entry = ModelEntry("gptq4-autogptq");
  ASSERT_NE(entry, kNoNode);
  const JsonDocument& d = ModelsManifest().document;
  EXPECT_EQ(StringMember(d, entry, "verdict"), "accept");
  const std::uint32_t expected_entry = d.FindMember(entry, "expected");
  const std::string expected_path = kModelsDir + "/" + StringMember(d, expected_entry, "path");
  const std::uint64_t expected_count = IntegerMember(d, expected_entry, "tensors");
  EXPECT_EQ(expected_count, 14u);

  const std::string path = kModelsDir + "/gptq4-autogptq/model.safetensors";
  const Bytes file = ReadBytes(path);
  ASSERT_FALSE(file.empty());
  const std::vector<qd::SideFile> configs = ConfigSources(path);
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].name, kModelsDir + "/gptq4-autogptq/quantize_config.json");
  EXPECT_EQ(configs[1].name, kModelsDir + "/gptq4-autogptq/config.json");
  std::vector<GptqLayerCodes> layers;
  const qd::Outcome outcome = ReadGptqFile(View(file), path, configs, &layers);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  EXPECT_EQ(layers.size(), expected_count);

  const qd::Outcome expected = ReadSafetensors(View(ReadBytes(expected_path)), expected_path);
  ASSERT_FALSE(expected.refused);
  ASSERT_EQ(expected.tensors.size(), expected_count);
  for (const qd::DecodedTensor& want : expected.tensors) {
    SCOPED_TRACE(want.name);
    const qd::DecodedTensor* got = FindDecoded(outcome, want.name);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->shape, want.shape);
    EXPECT_EQ(FirstBitDifference(got->values, want.values), -1);
  }
  // And the packer gives every layer's words back.
  for (const GptqLayerCodes& layer : layers) {
    SCOPED_TRACE(layer.prefix);
    RawTensor qweight, qzeros;
    ASSERT_TRUE(ReadRawTensor(file, layer.prefix + "qweight", &qweight));
    ASSERT_TRUE(ReadRawTensor(file, layer.prefix + "qzeros", &qzeros));
    std::vector<std::int32_t> packed_weight, packed_zeros;
    std::string error;
    ASSERT_TRUE(PackGptq("gptq", 4, layer.in_features, layer.out_features, layer.groups,
                         layer.codes, layer.zeros, &packed_weight, &packed_zeros, &error))
        << error;
    EXPECT_EQ(FirstDifference(packed_weight, Words(qweight)), -1);
    EXPECT_EQ(FirstDifference(packed_zeros, Words(qzeros)), -1);
  }
}

TEST(GptqPeerModels, BrokenFGroupSizeDisagreeIsCfg010NamingQuantizeConfig) {
  ASSERT_TRUE(ModelsManifest().ok);
  const std::uint32_t entry = ModelEntry("broken-f-group-size-disagree");
  ASSERT_NE(entry, kNoNode);
  const std::string manifest_file = StringMember(ModelsManifest().document, entry, "file");
  EXPECT_EQ(manifest_file, "quantize_config.json");
  const std::string dir = kModelsDir + "/broken-f-group-size-disagree/";
  const std::string path = dir + "model.safetensors";
  const Bytes file = ReadBytes(path);
  const qd::Outcome outcome = ReadGptqFile(View(file), path, ConfigSources(path));
  ASSERT_TRUE(outcome.refused) << Describe(outcome);
  const qd::Finding& f = outcome.findings.back();
  EXPECT_EQ(f.rule, "CFG-010") << Describe(outcome);
  EXPECT_EQ(f.file, dir + manifest_file);
  EXPECT_EQ(f.tensor, "");
  EXPECT_EQ(f.field, "group_size");
  EXPECT_EQ(f.byte_offset, -1);
}

TEST(GptqPeerModels, BrokenEBitsMismatchIsGptq002InBothShards) {
  ASSERT_TRUE(ModelsManifest().ok);
  ASSERT_NE(ModelEntry("broken-e-bits-mismatch"), kNoNode);
  const std::string dir = kModelsDir + "/broken-e-bits-mismatch/";
  for (const std::string shard :
       {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    SCOPED_TRACE(shard);
    const std::string path = dir + shard;
    const Bytes file = ReadBytes(path);
    ASSERT_FALSE(file.empty());
    const std::vector<qd::SideFile> configs = ConfigSources(path);
    ASSERT_EQ(configs.size(), 1u);
    EXPECT_EQ(configs[0].name, dir + "config.json");
    const qd::Outcome outcome = ReadGptqFile(View(file), path, configs);
    ASSERT_TRUE(outcome.refused) << Describe(outcome);
    const qd::Finding& f = outcome.findings.back();
    EXPECT_EQ(f.rule, "GPTQ-002") << Describe(outcome);
    EXPECT_EQ(f.file, path);
    EXPECT_EQ(f.field, "shape");
    EXPECT_EQ(f.byte_offset, 8);
    EXPECT_NE(f.tensor.find(".qweight"), std::string::npos) << f.tensor;
  }
}

}  // namespace
}  // namespace qd::oracle
