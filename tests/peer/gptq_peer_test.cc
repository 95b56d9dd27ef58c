// gptq_peer_test: the GPTQ codec against vectors AutoGPTQ's and GPT-QModel's
// own pack code made (${QD_PEER_DIR}/gptq: manifest.json, one test per case)
// and the model directories of ${QD_PEER_DIR}/models:
//  * accept: the codec accepts the file (warnings only where docs/gptq.md
//    says: CFG-101 for is_marlin_format false, GPTQ-107 where a v1 zero is
//    2^bits), and for every kernel the decoded <prefix>weight equals the
//    expected `dequant` bit for bit, signs of zero included (stricter than
//    the manifest's "-0.0 == +0.0"); GptqUnpack gives `codes` and `zeros`;
//  * reject: the codec refuses with the manifest's rule, at the tensor and
//    field docs/gptq.md section 3 names;
//  * GPTQ-006 pairs: v1 and v2 decode to the same bits;
//  * models: gptq4-autogptq decodes to EXPECTED bit for bit, broken-f is
//    CFG-010 naming quantize_config.json, broken-e is GPTQ-002 in both shards.
// Config sources are built here by hand as docs/gptq.md section 1 discovers them.
#include <gtest/gtest.h>

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "tests/peer/peer_file.h"

namespace {

namespace fs = std::filesystem;
using qdtest::peer::Case;
using qdtest::peer::CaseName;
using nlohmann::json;

const fs::path kDir = QD_PEER_GPTQ_DIR;
const fs::path kModels = QD_PEER_MODELS_DIR;

using qdtest::peer::File;
using qdtest::peer::FirstDifference;
using qdtest::peer::FloatsReadByTheTests;
using qdtest::peer::ReadBytes;
constexpr auto Load = qdtest::peer::LoadFile;

// docs/gptq.md section 1, done by hand: the candidates beside FILE that exist
// as regular files, in priority order, named by their path string; a
// config.json counts only with a non-null quantization_config.
std::vector<qd::SideFile> DiscoverConfigs(const std::string& file) {
  const std::size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : file.substr(0, slash + 1);
  std::string stem = file.substr(dir.size());
  const std::string ext = ".safetensors";
  if (stem.size() >= ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0) {
    stem.resize(stem.size() - ext.size());
  }
  std::vector<qd::SideFile> out;
  for (const std::string& candidate : {dir + stem + ".quantize_config.json", dir + "quantize_config.json",
                                       dir + "quant_config.json", dir + "config.json"}) {
    if (!fs::is_regular_file(candidate)) continue;
    std::vector<std::uint8_t> bytes = ReadBytes(candidate);
    if (candidate.size() >= 11 && candidate.compare(candidate.size() - 11, 11, "config.json") == 0 &&
        (candidate.size() == 11 || candidate[candidate.size() - 12] == '/')) {
      const json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
      if (doc.is_object() && (!doc.contains("quantization_config") || doc["quantization_config"].is_null())) {
        continue;
      }
    }
    out.push_back(qd::SideFile{candidate, std::move(bytes)});
  }
  return out;
}

json Manifest() {
  std::ifstream in(kDir / "manifest.json");
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<Case> LoadCases() { return qdtest::peer::LoadCases(kDir / "manifest.json"); }

std::string TensorPath(const std::string& id) { return (kDir / (id + ".safetensors")).string(); }
std::string ConfigPath(const std::string& id) { return (kDir / (id + ".quantize_config.json")).string(); }

std::string Describe(const qd::Outcome& o) {
  std::string s;
  for (const qd::Finding& f : o.findings) s += f.rule + " (" + f.tensor + " " + f.field + ": " + f.message + ") ";
  return s;
}

// The decoded layer weight of an accepted case, for one kernel.
std::vector<float> DecodeWeight(const std::string& id, const std::string& prefix, qd::codec::Kernel kernel) {
  const auto file = Load(TensorPath(id));
  const qd::Outcome o = qd::codec::DecodeGptqFile(file->View(), TensorPath(id), DiscoverConfigs(TensorPath(id)), kernel);
  for (const auto& t : o.tensors) {
    if (t.name == prefix + "weight") return t.values;
  }
  return {};
}

void CheckAccept(const Case& c) {
  const json& s = c.spec;
  const json& p = s["params"];
  const std::string prefix = p["tensor_prefix"].get<std::string>() + ".";
  const std::string path = TensorPath(c.id);
  const auto file = Load(path);
  const auto expected = Load(kDir / (c.id + ".expected.safetensors"));
  ASSERT_TRUE(file->ok && expected->ok);
  const std::vector<qd::SideFile> configs = DiscoverConfigs(path);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].name, ConfigPath(c.id));

  const std::int64_t k = p["in_features"].get<std::int64_t>();
  const std::int64_t n = p["out_features"].get<std::int64_t>();
  const int bits = p["bits"].get<int>();
  const std::vector<float> want = FloatsReadByTheTests(expected->bytes, "dequant");
  const std::vector<std::int32_t> want_codes = expected->Ints("codes");
  const std::vector<std::int32_t> want_zeros = expected->Ints("zeros");
  ASSERT_EQ(want.size(), static_cast<std::size_t>(n * k));

  // Warnings the contract predicts from the case itself.
  const std::string format = p.contains("format") ? p["format"].get<std::string>() : "gptq";
  std::vector<std::string> warnings;
  for (const json& flag : s["flags"]) {
    if (flag == "legacy_config_is_marlin_format_false") warnings.push_back("CFG-101");
  }
  bool flooded = false;
  for (std::int32_t z : want_zeros) flooded |= z == (1 << bits);
  if (format == "gptq" && flooded) warnings.push_back("GPTQ-107");

  const qd::codec::GptqResult r = qd::codec::ReadGptq(file->View(), path, configs);
  ASSERT_FALSE(r.refused) << (r.findings.empty() ? "" : r.findings.back().rule + " " + r.findings.back().message);
  std::vector<std::string> got;
  for (const qd::Finding& f : r.findings) got.push_back(f.rule);
  EXPECT_EQ(got, warnings);
  EXPECT_EQ(qd::codec::GptqFormatName(r.config.format), format);
  EXPECT_EQ(r.config.bits, bits);
  EXPECT_EQ(r.config.group_size, p["group_size"].get<std::int64_t>());
  ASSERT_EQ(r.layers.size(), 1u);
  const qd::codec::GptqLayer& layer = r.layers[0];
  EXPECT_EQ(layer.prefix, prefix);
  EXPECT_EQ(layer.in_features, k);
  EXPECT_EQ(layer.out_features, n);
  EXPECT_EQ(layer.groups, p["n_groups"].get<std::int64_t>());

  // GptqUnpack: codes [K][N] and zeros [G][N] as dequantization uses them.
  std::vector<std::int32_t> codes, zeros;
  qd::codec::GptqUnpack(qd::codec::ViewOf(r, layer), &codes, &zeros);
  EXPECT_TRUE(codes == want_codes) << "codes";
  EXPECT_TRUE(zeros == want_zeros) << "zeros";

  const bool bias = p["bias"].get<bool>();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string("kernel ") + std::string(qd::codec::KernelName(kernel)));
    const qd::Outcome o = qd::codec::DecodeGptqFile(file->View(), path, configs, kernel);
    ASSERT_FALSE(o.refused) << Describe(o);
    ASSERT_EQ(o.tensors.size(), bias ? 2u : 1u);
    // Output order: the weight where its qweight lies, the bias where it lies.
    std::map<std::string, const qd::DecodedTensor*> by_name;
    for (const auto& t : o.tensors) by_name[t.name] = &t;
    ASSERT_TRUE(by_name.count(prefix + "weight"));
    const qd::DecodedTensor& w = *by_name[prefix + "weight"];
    EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(k)}));
    EXPECT_EQ(FirstDifference(w.values, want), "");
    if (bias) {
      // The expected file holds no bias; docs/gptq.md section 7 passes it
      // through widened to binary32, which the tests do on their own.
      ASSERT_TRUE(by_name.count(prefix + "bias"));
      const std::vector<float> want_bias = FloatsReadByTheTests(file->bytes, prefix + "bias");
      ASSERT_EQ(want_bias.size(), static_cast<std::size_t>(n));
      EXPECT_EQ(FirstDifference(by_name[prefix + "bias"]->values, want_bias), "");
    }
    // Each kernel on its own, through the layer view.
    std::vector<float> direct(want.size());
    qd::codec::GptqDequantize(qd::codec::ViewOf(r, layer), direct.data(), kernel);
    EXPECT_EQ(FirstDifference(direct, want), "") << "GptqDequantize";
  }

  // GPTQ-006 pairs: v1 and v2 of the same weights decode to the same bits.
  if (s.contains("pair")) {
    const std::string other = s["pair"].get<std::string>();
    for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
      SCOPED_TRACE(std::string("pair, kernel ") + std::string(qd::codec::KernelName(kernel)));
      const std::vector<float> mine = DecodeWeight(c.id, prefix, kernel);
      const std::vector<float> theirs = DecodeWeight(other, prefix, kernel);
      ASSERT_FALSE(mine.empty());
      EXPECT_EQ(FirstDifference(mine, theirs), "");
    }
  }
}

// Where docs/gptq.md section 3 puts each reject case's error.
struct RejectPlace {
  std::string tensor;  // "" for a config finding (then file = the config source)
  std::string field;
  std::int64_t element = -1;
};

RejectPlace PlaceOf(const std::string& id) {
  static const std::map<std::string, RejectPlace> places = {
      {"neg-gptq001-bits1", {"", "bits"}},
      {"neg-gptq001-bits5-labeled-gptq", {"", "bits"}},
      {"neg-gptq002-k48-autogptq", {"layer.qweight", "shape"}},
      {"neg-gptq002-extra-qweight-row", {"layer.qweight", "shape"}},
      {"neg-gptq003-n48-autogptq", {"layer.qzeros", "shape"}},
      {"neg-gptq003-extra-qzeros-col", {"layer.qzeros", "shape"}},
      {"neg-gptq004-gidx-short", {"layer.g_idx", "shape"}},
      {"neg-gptq004-gidx-out-of-range", {"layer.g_idx", "g_idx", 5}},  // "g_idx[5] = n_groups (2)"
      {"neg-gptq005-checkpoint-format-marlin", {"", "checkpoint_format"}},
      {"neg-gptq005-is-marlin-format-true", {"", "is_marlin_format"}},
  };
  const auto it = places.find(id);
  return it == places.end() ? RejectPlace{"?", "?"} : it->second;
}

void CheckReject(const Case& c) {
  const std::string path = TensorPath(c.id);
  const auto file = Load(path);
  ASSERT_TRUE(file->ok);
  const std::vector<qd::SideFile> configs = DiscoverConfigs(path);
  ASSERT_EQ(configs.size(), 1u);
  const RejectPlace place = PlaceOf(c.id);
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string("kernel ") + std::string(qd::codec::KernelName(kernel)));
    const qd::Outcome o = qd::codec::DecodeGptqFile(file->View(), path, configs, kernel);
    ASSERT_TRUE(o.refused) << Describe(o);
    EXPECT_TRUE(o.tensors.empty());
    const qd::Finding& f = o.findings.back();
    EXPECT_EQ(f.rule, c.spec["rule"].get<std::string>()) << Describe(o);
    EXPECT_EQ(f.severity, qd::Severity::kError);
    EXPECT_EQ(f.tensor, place.tensor);
    EXPECT_EQ(f.field, place.field);
    EXPECT_EQ(f.element, place.element);
    if (place.tensor.empty()) {
      EXPECT_EQ(f.file, ConfigPath(c.id));
      EXPECT_EQ(f.byte_offset, -1);
    } else {
      EXPECT_EQ(f.file, path);
      if (place.element < 0) {
        EXPECT_EQ(f.byte_offset, 8);
      } else {  // g_idx element k at 8 + header length + begin + 4k
        const auto* g = file->Find(place.tensor);
        ASSERT_NE(g, nullptr);
        EXPECT_EQ(f.byte_offset,
                  static_cast<std::int64_t>(8 + file->container.header_length + g->begin + 4 * place.element));
      }
    }
  }
}

class GptqPeer : public testing::TestWithParam<Case> {};

TEST_P(GptqPeer, Case) {
  const Case& c = GetParam();
  const std::string verdict = c.spec["verdict"].get<std::string>();
  if (verdict == "accept") {
    CheckAccept(c);
  } else {
    ASSERT_EQ(verdict, "reject");
    CheckReject(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Manifest, GptqPeer, testing::ValuesIn(LoadCases()), CaseName);

TEST(GptqPeerManifest, HasEveryCase) {
  const json m = Manifest();
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["numberOfCases"].get<std::size_t>(), LoadCases().size());
  EXPECT_EQ(LoadCases().size(), 51u);
}

// ---- model directories -----------------------------------------------------

json ModelsManifest() {
  std::ifstream in(kModels / "manifest.json");
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

json Directory(const std::string& name) {
  const json m = ModelsManifest();
  if (!m.is_object()) return json();
  for (const json& d : m["directories"]) {
    if (d["name"] == name) return d;
  }
  return json();
}

TEST(GptqPeerModels, Gptq4AutogptqDecodesToExpected) {
  if (!fs::exists(kModels / "manifest.json")) GTEST_SKIP() << "no peer/models";
  const json dir = Directory("gptq4-autogptq");
  ASSERT_TRUE(dir.is_object());
  ASSERT_EQ(dir["verdict"], "accept");
  const std::string path = (kModels / "gptq4-autogptq" / "model.safetensors").string();
  const std::vector<qd::SideFile> configs = DiscoverConfigs(path);
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].name, (kModels / "gptq4-autogptq" / "quantize_config.json").string());
  EXPECT_EQ(configs[1].name, (kModels / "gptq4-autogptq" / "config.json").string());
  const auto file = Load(path);
  const auto expected = Load(kModels / dir["expected"]["path"].get<std::string>());
  ASSERT_TRUE(file->ok && expected->ok);
  ASSERT_EQ(expected->container.tensors.size(), dir["expected"]["tensors"].get<std::size_t>());

  const qd::codec::GptqResult r = qd::codec::ReadGptq(file->View(), path, configs);
  ASSERT_FALSE(r.refused);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.config.bits, dir["params"]["bits"].get<int>());
  EXPECT_EQ(r.config.group_size, dir["params"]["group_size"].get<std::int64_t>());
  EXPECT_EQ(qd::codec::GptqFormatName(r.config.format), dir["params"]["checkpoint_format"].get<std::string>());
  EXPECT_EQ(r.config.source, configs[0].name);
  EXPECT_EQ(r.layers.size(), dir["params"]["quantized_modules"].get<std::size_t>());

  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    SCOPED_TRACE(std::string("kernel ") + std::string(qd::codec::KernelName(kernel)));
    const qd::Outcome o = qd::codec::DecodeGptqFile(file->View(), path, configs, kernel);
    ASSERT_FALSE(o.refused) << Describe(o);
    std::map<std::string, const qd::DecodedTensor*> by_name;
    for (const auto& t : o.tensors) by_name[t.name] = &t;
    // 14 decoded linears, plus the 7 F16 tensors of no layer.
    EXPECT_EQ(o.tensors.size(), 14u + 7u);
    for (const auto& e : expected->container.tensors) {
      const std::string name(e.name);
      SCOPED_TRACE(name);
      ASSERT_TRUE(by_name.count(name));
      EXPECT_EQ(by_name[name]->shape, e.shape);
      EXPECT_EQ(FirstDifference(by_name[name]->values, FloatsReadByTheTests(expected->bytes, name)), "");
    }
    // EXPECTED holds the quantized linears only; the F16 tensors of no layer
    // are widened to binary32 (docs/gptq.md section 7), here by the tests.
    for (const std::string dense : {"lm_head.weight", "model.embed_tokens.weight", "model.norm.weight",
                                    "model.layers.0.input_layernorm.weight"}) {
      SCOPED_TRACE(dense);
      ASSERT_TRUE(by_name.count(dense));
      const std::vector<float> want_dense = FloatsReadByTheTests(file->bytes, dense);
      ASSERT_FALSE(want_dense.empty());
      EXPECT_EQ(FirstDifference(by_name[dense]->values, want_dense), "");
    }
  }
}

TEST(GptqPeerModels, BrokenFGroupSizeDisagreeIsCfg010) {
  if (!fs::exists(kModels / "manifest.json")) GTEST_SKIP() << "no peer/models";
  const json dir = Directory("broken-f-group-size-disagree");
  ASSERT_TRUE(dir.is_object());
  const fs::path root = kModels / "broken-f-group-size-disagree";
  const std::string path = (root / "model.safetensors").string();
  const std::vector<qd::SideFile> configs = DiscoverConfigs(path);
  ASSERT_EQ(configs.size(), 2u);
  const auto file = Load(path);
  ASSERT_TRUE(file->ok);
  const qd::Outcome o = qd::codec::DecodeGptqFile(file->View(), path, configs);
  ASSERT_TRUE(o.refused);
  const qd::Finding& f = o.findings.back();
  EXPECT_EQ(f.rule, "CFG-010");
  EXPECT_EQ(f.file, (root / dir["file"].get<std::string>()).string());  // quantize_config.json
  EXPECT_EQ(f.field, "group_size");
  EXPECT_EQ(f.tensor, "");
  EXPECT_EQ(f.byte_offset, -1);
}

TEST(GptqPeerModels, BrokenEBitsMismatchIsGptq002InBothShards) {
  if (!fs::exists(kModels / "manifest.json")) GTEST_SKIP() << "no peer/models";
  const json dir = Directory("broken-e-bits-mismatch");
  ASSERT_TRUE(dir.is_object());
  const fs::path root = kModels / "broken-e-bits-mismatch";
  for (const std::string shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    SCOPED_TRACE(shard);
    const std::string path = (root / shard).string();
    const std::vector<qd::SideFile> configs = DiscoverConfigs(path);
    ASSERT_EQ(configs.size(), 1u);
    EXPECT_EQ(configs[0].name, (root / "config.json").string());
    const auto file = Load(path);
    ASSERT_TRUE(file->ok);
    const qd::Outcome o = qd::codec::DecodeGptqFile(file->View(), path, configs);
    ASSERT_TRUE(o.refused) << Describe(o);
    const qd::Finding& f = o.findings.back();
    EXPECT_EQ(f.rule, "GPTQ-002") << Describe(o);
    EXPECT_EQ(f.file, path);
    EXPECT_EQ(f.field, "shape");
    EXPECT_EQ(f.byte_offset, 8);
    const std::string suffix = ".qweight";
    EXPECT_TRUE(f.tensor.size() > suffix.size() &&
                f.tensor.compare(f.tensor.size() - suffix.size(), suffix.size(), suffix) == 0)
        << f.tensor;
  }
}

}  // namespace
