// model_dir_oracle_test.cc: hand-built model directories for the oracle's
// model-directory reader (oracles/model_dir.h). Every file is made here from
// the safetensors format text (u64 little-endian header length N, the JSON
// header padded with spaces to a multiple of 8, the data in the order
// given), so each byte offset below is worked out by hand. Expected rules,
// files, tensors, fields and offsets are docs/model_dir.md's; decoded values
// are test-side arithmetic or the single-file oracle read of the same model.
//
// The base directory "d" is a two-shard float model:
//   model-00001-of-00002.safetensors  a F32 [2] = {1, 2} at [0, 8), b F32 [1] = {3} at [8, 12)
//   model-00002-of-00002.safetensors  c F16 [2] = {1.0, -2.0} at [0, 4)
//   model.safetensors.index.json      weight_map a, b -> shard 1, c -> shard 2
// Tensor bytes: 8 + 4 + 4 = 16.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "oracles/gptq.h"
#include "oracles/model_dir.h"
#include "oracles/peer_test_support.h"
#include "oracles/pt_test_support.h"
#include "oracles/rbq.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {
namespace {

using peer_test::Bits;
using peer_test::Describe;
using peer_test::FindDecoded;
using peer_test::FirstTensorNotHeld;
using Bytes = std::vector<std::uint8_t>;

const std::string kShard1 = "model-00001-of-00002.safetensors";
const std::string kShard2 = "model-00002-of-00002.safetensors";
const std::string kIndex = "model.safetensors.index.json";

// ---------------------------------------------------------------------------
// Test-side files.

struct Spec {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  Bytes data;
};

Bytes LittleEndian(std::uint64_t value, int bytes) {
  Bytes out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  return out;
}

Bytes F32s(const std::vector<float>& values) {
  Bytes out;
  for (const float v : values) {
    const Bytes word = LittleEndian(Bits(v), 4);
    out.insert(out.end(), word.begin(), word.end());
  }
  return out;
}

Bytes Words(const std::vector<std::uint64_t>& values, int bytes_per_value) {
  Bytes out;
  for (const std::uint64_t v : values) {
    const Bytes word = LittleEndian(v, bytes_per_value);
    out.insert(out.end(), word.begin(), word.end());
  }
  return out;
}

// A safetensors file: METADATA is the text of the __metadata__ object's
// members ("" for none), the tensors are laid out in the order given.
Bytes Safetensors(const std::vector<Spec>& tensors, const std::string& metadata = "") {
  std::string header = "{";
  if (!metadata.empty()) header += "\"__metadata__\":{" + metadata + "}";
  std::uint64_t begin = 0;
  for (const Spec& t : tensors) {
    if (header.size() > 1) header += ",";
    std::string shape;
    for (const std::uint64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(begin + t.data.size()) + "]}";
    begin += t.data.size();
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';  // no ST-102 warning
  Bytes file = LittleEndian(header.size(), 8);
  file.insert(file.end(), header.begin(), header.end());
  for (const Spec& t : tensors) file.insert(file.end(), t.data.begin(), t.data.end());
  return file;
}

Bytes Text(const std::string& text) { return Bytes(text.begin(), text.end()); }

// An index: weight_map as given (JSON member text "\"t\":\"s\""), METADATA
// the text of the metadata object's members ("" for no metadata member).
std::string IndexText(const std::map<std::string, std::string>& weight_map,
                      const std::string& metadata = "") {
  std::string members;
  for (const auto& [tensor, shard] : weight_map) {
    members += (members.empty() ? "" : ",") + ("\"" + tensor + "\":\"" + shard + "\"");
  }
  std::string text = "{";
  if (!metadata.empty()) text += "\"metadata\":{" + metadata + "},";
  return text + "\"weight_map\":{" + members + "}}";
}

// A directory: regular files with their bytes and entries of other kinds.
struct Dir {
  std::string dir = "d";
  std::map<std::string, Bytes> files;
  std::map<std::string, qd::DirEntryKind> special;

  // docs/model_dir.md section 1: sorted by name bytes (std::map's order of
  // std::string is byte order), bytes of regular entries.
  qd::ModelDirListing Listing() const {
    qd::ModelDirListing listing;
    listing.dir = dir;
    listing.prefix = dir.back() == '/' ? dir : dir + "/";
    std::map<std::string, qd::DirEntry> entries;
    for (const auto& [name, bytes] : files) {
      entries[name] = qd::DirEntry{name, qd::DirEntryKind::kRegular, {bytes.data(), bytes.size()}};
    }
    for (const auto& [name, kind] : special) entries[name] = qd::DirEntry{name, kind, {}};
    for (const auto& [name, entry] : entries) listing.entries.push_back(entry);
    return listing;
  }
};

Spec TensorA() { return {"a", "F32", {2}, F32s({1.0f, 2.0f})}; }
Spec TensorB() { return {"b", "F32", {1}, F32s({3.0f})}; }
Spec TensorC() { return {"c", "F16", {2}, Words({0x3C00, 0xC000}, 2)}; }  // 1.0, -2.0

std::map<std::string, std::string> BaseMap() {
  return {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}};
}

Dir BaseDir() {
  Dir d;
  d.files[kShard1] = Safetensors({TensorA(), TensorB()});
  d.files[kShard2] = Safetensors({TensorC()});
  d.files[kIndex] = Text(IndexText(BaseMap()));
  d.files["config.json"] = Text("{\"model_type\":\"llama\"}");
  d.files["tokenizer.json"] = Text("{}");
  return d;
}

qd::Outcome Read(const Dir& d, ModelDirRead* dir_read = nullptr) {
  return ReadModelDir(d.Listing(), dir_read);
}

// The outcome is refused and its one error is RULE with these fields.
void ExpectRefused(const qd::Outcome& outcome, const std::string& rule, const std::string& file,
                   const std::string& tensor, const std::string& field, std::int64_t byte_offset) {
  ASSERT_TRUE(outcome.refused) << Describe(outcome);
  const qd::Finding& f = outcome.findings.back();
  EXPECT_EQ(f.severity, qd::Severity::kError);
  EXPECT_EQ(f.rule, rule) << Describe(outcome);
  EXPECT_EQ(f.file, file) << Describe(outcome);
  EXPECT_EQ(f.tensor, tensor) << Describe(outcome);
  EXPECT_EQ(f.field, field) << Describe(outcome);
  EXPECT_EQ(f.byte_offset, byte_offset) << Describe(outcome);
  EXPECT_TRUE(outcome.tensors.empty());
}

// ---------------------------------------------------------------------------
// The base directory is accepted.

TEST(ModelDirOracle, TheBaseTwoShardDirectoryDecodesEveryTensorInTableOrder) {
  ModelDirRead dir_read;
  const qd::Outcome outcome = Read(BaseDir(), &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  EXPECT_EQ(dir_read.format, "safetensors");
  EXPECT_EQ(dir_read.shards, 2u);
  EXPECT_FALSE(dir_read.unsupported);
  EXPECT_EQ(dir_read.total_size_convention, "");  // no metadata
  // (shard rank, begin, end, name): a, b of shard 1, then c of shard 2.
  ASSERT_EQ(outcome.tensors.size(), 3u);
  EXPECT_EQ(outcome.tensors[0].name, "a");
  EXPECT_EQ(outcome.tensors[1].name, "b");
  EXPECT_EQ(outcome.tensors[2].name, "c");
  EXPECT_EQ(outcome.tensors[0].values, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(outcome.tensors[1].values, (std::vector<float>{3.0f}));
  EXPECT_EQ(outcome.tensors[2].values, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(outcome.tensors[2].shape, (std::vector<std::uint64_t>{2}));
}

TEST(ModelDirOracle, StreamGivesWhatReadGives) {
  const Dir d = BaseDir();
  const qd::ModelDirListing listing = d.Listing();
  const qd::Outcome read = ReadModelDir(listing);
  std::vector<qd::DecodedTensor> streamed;
  qd::CollectingSink sink(&streamed);
  const qd::Outcome stream = StreamModelDir(listing, sink);
  EXPECT_EQ(Describe(stream), Describe(read));
  EXPECT_TRUE(stream.tensors.empty());
  ASSERT_EQ(streamed.size(), read.tensors.size());
  for (std::size_t i = 0; i < streamed.size(); ++i)
    EXPECT_EQ(streamed[i].name, read.tensors[i].name);
  EXPECT_EQ(FirstTensorNotHeld(read, streamed), "");
}

// ---------------------------------------------------------------------------
// Section 2: the weight set.

TEST(ModelDirOracle, Idx001NoWeightFile) {
  Dir d;
  d.files["config.json"] = Text("{}");
  d.files["training_args.bin"] = Text("x");  // not pytorch_model*: ignored
  d.files["weights.pt"] = Text("x");         // *.pt: ignored
  ExpectRefused(Read(d), "IDX-001", "d", "", "weight_set", -1);
}

TEST(ModelDirOracle, Idx001AnEscapingLinkIsNoWeightFileAndTheDirIsNamedAsGiven) {
  Dir d;
  d.dir = "models/x/";
  d.special["model.safetensors"] = qd::DirEntryKind::kEscaping;
  d.files["config.json"] = Text("{}");
  ExpectRefused(Read(d), "IDX-001", "models/x/", "", "weight_set", -1);
}

TEST(ModelDirOracle, Idx002BothKinds) {
  Dir d;
  d.files["model.safetensors"] = Safetensors({TensorA()});
  d.files["pytorch_model.bin"] = Text("x");
  ExpectRefused(Read(d), "IDX-002", "d", "", "weight_set", -1);
}

TEST(ModelDirOracle, Idx002TwoWeightFilesAndNoIndex) {
  Dir d;
  d.files["model.safetensors"] = Safetensors({TensorA()});
  d.files["model-q4.safetensors"] = Safetensors({TensorB()});
  const qd::Outcome outcome = Read(d);
  ExpectRefused(outcome, "IDX-002", "d", "", "weight_set", -1);
  // The message names the candidates.
  EXPECT_NE(outcome.findings.back().message.find("model-q4.safetensors"), std::string::npos);
  EXPECT_NE(outcome.findings.back().message.find("model.safetensors"), std::string::npos);
}

TEST(ModelDirOracle, Idx002TwoIndexes) {
  Dir d = BaseDir();
  d.files["other.safetensors.index.json"] = d.files[kIndex];
  ExpectRefused(Read(d), "IDX-002", "d", "", "weight_set", -1);
}

// ---------------------------------------------------------------------------
// Section 3, steps 2-5: the index.

TEST(ModelDirOracle, Idx003IndexIsNotStrictJsonOrHasNoWeightMap) {
  const std::string index = "d/" + kIndex;
  const std::map<std::string, std::string> cases = {
      {"not JSON", "{\"weight_map\":{"},
      {"BOM", "\xEF\xBB\xBF{\"weight_map\":{}}"},
      {"top level an array", "[1]"},
      {"duplicate key", "{\"weight_map\":{\"a\":\"x\",\"a\":\"x\"}}"},
      {"no weight_map", "{\"metadata\":{}}"},
      {"weight_map not an object", "{\"weight_map\":[]}"},
      {"a value not a string", "{\"weight_map\":{\"a\":1}}"},
      {"a number overflowing binary64", "{\"x\":1e400,\"weight_map\":{}}"},
      {"nested 65 deep", "{\"x\":" + std::string(64, '[') + std::string(64, ']') +
                             ",\"weight_map\":{}}"},
  };
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    Dir d = BaseDir();
    d.files[kIndex] = Text(text);
    ExpectRefused(Read(d), "IDX-003", index, "", "weight_map", -1);
  }
  Dir d = BaseDir();
  d.files[kIndex] = Text("{\"metadata\":\"x\",\"weight_map\":{\"a\":\"" + kShard1 + "\"}}");
  ExpectRefused(Read(d), "IDX-003", index, "", "metadata", -1);
}

TEST(ModelDirOracle, Idx004ShardNamesThatEscape) {
  // c (the first tensor in byte order mapped to the bad name) is named.
  for (const std::string& bad : {"../" + kShard2, "/abs/" + kShard2, std::string(".."),
                                 std::string(""), std::string("."), "a\\\\" + kShard2,
                                 "a\\u0000" + kShard2}) {
    SCOPED_TRACE(bad);
    Dir d = BaseDir();
    std::map<std::string, std::string> map = BaseMap();
    map["c"] = bad;
    d.files[kIndex] = Text(IndexText(map));
    ExpectRefused(Read(d), "IDX-004", "d/" + kIndex, "c", "weight_map", -1);
  }
  // A shard that is a link out of the directory.
  Dir d = BaseDir();
  d.files.erase(kShard2);
  d.special[kShard2] = qd::DirEntryKind::kEscaping;
  ExpectRefused(Read(d), "IDX-004", "d/" + kIndex, "c", "weight_map", -1);
}

TEST(ModelDirOracle, Idx005AShardIsMissingOrNotRegular) {
  Dir d = BaseDir();
  d.files.erase(kShard2);
  ExpectRefused(Read(d), "IDX-005", "d/" + kShard2, "c", "weight_map", -1);
  d.special[kShard2] = qd::DirEntryKind::kOther;  // a subdirectory of that name
  ExpectRefused(Read(d), "IDX-005", "d/" + kShard2, "c", "weight_map", -1);
}

TEST(ModelDirOracle, Idx006AWeightFileTheIndexDoesNotName) {
  Dir d = BaseDir();
  d.files["model-extra.safetensors"] = Safetensors({TensorB()});
  ExpectRefused(Read(d), "IDX-006", "d/model-extra.safetensors", "", "weight_map", -1);
}

// Step 6: the container rules on each shard, as for that file alone.
TEST(ModelDirOracle, ContainerRulesRunOnEachShardNamingIt) {
  Dir d = BaseDir();
  d.files[kShard2].push_back(0);  // one trailing byte after c
  // Shard 2's header: {"c":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}
  // is 54 bytes, padded to 56: the first trailing byte is at 8 + 56 + 4.
  ModelDirRead dir_read;
  ExpectRefused(Read(d, &dir_read), "ST-012", "d/" + kShard2, "", "data", 68);
  EXPECT_EQ(dir_read.format, "");  // refused before detection
}

TEST(ModelDirOracle, ASingleFileTheContainerRefusesHasNoFormat) {
  Dir d;
  d.files["model.safetensors"] = Safetensors({TensorA()});
  d.files["model.safetensors"].resize(7);  // shorter than the length prefix
  ModelDirRead dir_read;
  ExpectRefused(Read(d, &dir_read), "ST-001", "d/model.safetensors", "", "header", 0);
  EXPECT_EQ(dir_read.format, "");
  EXPECT_EQ(dir_read.shards, 1u);
}

// ---------------------------------------------------------------------------
// Section 3, step 7: the tensors against the index.

TEST(ModelDirOracle, Idx007ATensorInTwoShards) {
  Dir d = BaseDir();
  d.files[kShard2] = Safetensors({TensorC(), TensorB()});  // b also in shard 2
  ExpectRefused(Read(d), "IDX-007", "d/" + kShard2, "b", "weight_map", 8);
}

TEST(ModelDirOracle, Idx008ATensorNotInTheIndex) {
  Dir d = BaseDir();
  d.files[kShard2] = Safetensors({TensorC(), {"extra", "F32", {1}, F32s({0.5f})}});
  ExpectRefused(Read(d), "IDX-008", "d/" + kShard2, "extra", "weight_map", 8);
}

TEST(ModelDirOracle, Idx009TheIndexPutsATensorInAnotherShard) {
  Dir d = BaseDir();
  std::map<std::string, std::string> map = BaseMap();
  map["b"] = kShard2;  // b is in shard 1
  d.files[kIndex] = Text(IndexText(map));
  ExpectRefused(Read(d), "IDX-009", "d/" + kShard1, "b", "weight_map", 8);
}

TEST(ModelDirOracle, Idx010ATensorOfTheIndexInNoShard) {
  Dir d = BaseDir();
  std::map<std::string, std::string> map = BaseMap();
  map["ghost"] = kShard2;
  d.files[kIndex] = Text(IndexText(map));
  ExpectRefused(Read(d), "IDX-010", "d/" + kShard2, "ghost", "weight_map", 8);
}

// ---------------------------------------------------------------------------
// Step 8: metadata.total_size.

TEST(ModelDirOracle, Idx011TotalSizeAcceptsBothConventionsAndNamesTheOneThatMatched) {
  Dir d = BaseDir();
  d.files[kIndex] = Text(IndexText(BaseMap(), "\"total_size\":16"));  // 8 + 4 + 4
  ModelDirRead dir_read;
  qd::Outcome outcome = Read(d, &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_EQ(dir_read.total_size_convention, "tensor bytes");

  const std::uint64_t file_bytes = d.files[kShard1].size() + d.files[kShard2].size();
  d.files[kIndex] = Text(IndexText(BaseMap(), "\"total_size\":" + std::to_string(file_bytes)));
  outcome = Read(d, &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_EQ(dir_read.total_size_convention, "file bytes");

  // metadata without total_size passes, naming no convention.
  d.files[kIndex] = Text(IndexText(BaseMap(), "\"format\":\"x\""));
  outcome = Read(d, &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_EQ(dir_read.total_size_convention, "");
}

TEST(ModelDirOracle, Idx011TotalSizeOfNeitherConventionOrNotAnInteger) {
  for (const std::string value : {"15", "17", "16.0", "\"16\"", "-16", "null", "1e1"}) {
    SCOPED_TRACE(value);
    Dir d = BaseDir();
    d.files[kIndex] = Text(IndexText(BaseMap(), "\"total_size\":" + value));
    ModelDirRead dir_read;
    ExpectRefused(Read(d, &dir_read), "IDX-011", "d/" + kIndex, "", "total_size", -1);
    EXPECT_EQ(dir_read.format, "");  // refused before detection
  }
}

// ---------------------------------------------------------------------------
// Steps 9 and 10.

TEST(ModelDirOracle, Idx012ShardsDisagreeOnAMetadataKey) {
  Dir d = BaseDir();
  d.files[kShard1] = Safetensors({TensorA(), TensorB()}, "\"format\":\"pt\"");
  d.files[kShard2] = Safetensors({TensorC()}, "\"format\":\"pt\"");
  ASSERT_FALSE(Read(d).refused);  // the same value in both: one __metadata__
  d.files[kShard2] = Safetensors({TensorC()}, "\"format\":\"tf\"");
  ExpectRefused(Read(d), "IDX-012", "d/" + kShard2, "", "__metadata__", 8);
}

// A Q4B32 block of 32 codes: scale F16 1.0, then 16 bytes of nibbles 0.
Spec Q4Tensor(const std::string& name) {
  Bytes block = Words({0x3C00}, 2);
  block.resize(18, 0x00);
  return {name, "Q4B32", {1, 32}, block};
}

TEST(ModelDirOracle, Idx013ARbqTensorInAShardOfAnIndex) {
  Dir d = BaseDir();
  d.files[kShard2] = Safetensors({TensorC(), Q4Tensor("q")});
  std::map<std::string, std::string> map = BaseMap();
  map["q"] = kShard2;
  d.files[kIndex] = Text(IndexText(map));
  ExpectRefused(Read(d), "IDX-013", "d/" + kShard2, "q", "dtype", 8);
}

// A set of one weight file and no index is read exactly as the file alone,
// RBQ included.
TEST(ModelDirOracle, ASingleWeightFileIsReadAsTheFileAlone) {
  Dir d;
  d.files["model.safetensors"] = Safetensors(
      {Q4Tensor("q")}, "\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"f16\"");
  d.files["config.json"] = Text("{}");
  ModelDirRead dir_read;
  const qd::Outcome outcome = Read(d, &dir_read);
  EXPECT_EQ(dir_read.format, "rbq");
  const Bytes& file = d.files["model.safetensors"];
  const qd::Outcome alone = ReadRbqFile({file.data(), file.size()}, "d/model.safetensors");
  ASSERT_FALSE(alone.refused) << Describe(alone);
  EXPECT_EQ(Describe(outcome), Describe(alone));
  ASSERT_EQ(outcome.tensors.size(), 1u);
  // Spec 002: nibble 0 is q = (0 ^ 8) - 8 = 0, times the scale 1.0: 0.
  EXPECT_EQ(FirstTensorNotHeld(outcome, alone.tensors), "");
  EXPECT_EQ(outcome.tensors[0].values, std::vector<float>(32, 0.0f));
}

// ---------------------------------------------------------------------------
// Sections 4 and 5: a GPTQ layer split across two shards.
//
// One 4-bit v1 layer "l." with K = N = 32, group_size 32 (G = 1): qweight
// [4, 32] I32, qzeros [1, 4] I32, scales [1, 32] F16, g_idx [32] I32 = 0,
// and a float bias [32]. Word values vary so that a mix-up of shards shows.

std::vector<Spec> LayerTensors() {
  std::vector<std::uint64_t> qweight, qzeros, scales, g_idx(32, 0);
  for (std::uint64_t i = 0; i < 4 * 32; ++i)
    qweight.push_back((0x76543210u + i * 0x11111111u) & 0xFFFFFFFFu);
  for (std::uint64_t i = 0; i < 4; ++i) qzeros.push_back(0x33333333u + i);
  for (std::uint64_t n = 0; n < 32; ++n) scales.push_back(0x3C00 + 0x40 * n);  // 1.0, 1.0625, ...
  std::vector<float> bias;
  for (int n = 0; n < 32; ++n) bias.push_back(0.25f * static_cast<float>(n));
  return {{"l.qweight", "I32", {4, 32}, Words(qweight, 4)},
          {"l.qzeros", "I32", {1, 4}, Words(qzeros, 4)},
          {"l.scales", "F16", {1, 32}, Words(scales, 2)},
          {"l.g_idx", "I32", {32}, Words(g_idx, 4)},
          {"l.bias", "F32", {32}, F32s(bias)}};
}

const char kGptqConfig[] = "{\"bits\":4,\"group_size\":32,\"desc_act\":false,\"sym\":true}";

// Shard 1: qweight, qzeros; shard 2: scales, g_idx, bias.
Dir SplitLayerDir(std::vector<Spec> tensors) {
  Dir d;
  d.files[kShard1] = Safetensors({tensors[0], tensors[1]});
  d.files[kShard2] = Safetensors({tensors[2], tensors[3], tensors[4]});
  d.files[kIndex] = Text(IndexText({{"l.qweight", kShard1},
                                    {"l.qzeros", kShard1},
                                    {"l.scales", kShard2},
                                    {"l.g_idx", kShard2},
                                    {"l.bias", kShard2}}));
  d.files["quantize_config.json"] = Text(kGptqConfig);
  return d;
}

TEST(ModelDirOracle, ALayerSplitAcrossTwoShardsDecodesAsTheSingleFileModel) {
  const Bytes single = Safetensors(LayerTensors());
  const qd::SideFile config{"d/quantize_config.json", Text(kGptqConfig)};
  const qd::Outcome alone =
      ReadGptqFile({single.data(), single.size()}, "d/model.safetensors", {config});
  ASSERT_FALSE(alone.refused) << Describe(alone);
  ASSERT_EQ(alone.tensors.size(), 2u);  // l.weight and l.bias

  // The single file in a directory: read as the file alone.
  Dir one;
  one.files["model.safetensors"] = single;
  one.files["quantize_config.json"] = Text(kGptqConfig);
  ModelDirRead dir_read;
  qd::Outcome outcome = Read(one, &dir_read);
  EXPECT_EQ(dir_read.format, "gptq");
  EXPECT_EQ(Describe(outcome), Describe(alone));
  EXPECT_EQ(FirstTensorNotHeld(outcome, alone.tensors), "");

  // Split across two shards: one layer, the same values.
  outcome = Read(SplitLayerDir(LayerTensors()), &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  EXPECT_EQ(dir_read.format, "gptq");
  ASSERT_EQ(outcome.tensors.size(), 2u);
  EXPECT_EQ(FirstTensorNotHeld(outcome, alone.tensors), "");
  // Test-side check of one value: weight[n = 0][k = 0] = (code - zero) *
  // scale[0]; code = low nibble of qweight word (0, 0) = 0x0, zero = stored
  // field 0x3 + 1 = 4, scale 1.0: -4.
  const qd::DecodedTensor* weight = FindDecoded(outcome, "l.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->values[0], -4.0f);
}

TEST(ModelDirOracle, FormatFindingsNameTheShardHoldingTheirTensor) {
  // An infinite scale in shard 2: GPTQ-106 at scales[0][1], byte 2 of its
  // data. Shard 2's header
  //   {"l.scales":{"dtype":"F16","shape":[1,32],"data_offsets":[0,64]},
  //    "l.g_idx":{"dtype":"I32","shape":[32],"data_offsets":[64,192]},
  //    "l.bias":{"dtype":"F32","shape":[32],"data_offsets":[192,320]}}
  // is 63 + 62 + 62 + 2 commas + 2 braces = 191 bytes, padded to 192.
  std::vector<Spec> tensors = LayerTensors();
  tensors[2].data[2] = 0x00;
  tensors[2].data[3] = 0x7C;  // F16 +infinity
  const qd::Outcome outcome = Read(SplitLayerDir(tensors));
  ExpectRefused(outcome, "GPTQ-106", "d/" + kShard2, "l.scales", "scales", 8 + 192 + 2);
  // A finding of the qweight's shard: drop qzeros' last column group, so
  // GPTQ-003 names l.qzeros in shard 1.
  tensors = LayerTensors();
  tensors[1] = {"l.qzeros", "I32", {1, 3}, Words({0, 0, 0}, 4)};
  ExpectRefused(Read(SplitLayerDir(tensors)), "GPTQ-003", "d/" + kShard1, "l.qzeros", "shape", 8);
}

TEST(ModelDirOracle, FindingsOfNoTensorAndNoConfigNameTheDirectory) {
  Dir d = SplitLayerDir(LayerTensors());
  d.files.erase("quantize_config.json");
  ExpectRefused(Read(d), "CFG-003", "d", "", "config", -1);
  // A config finding names the config.
  d.files["config.json"] = Text("{\"quantization_config\":{\"bits\":4,\"group_size\":16}}");
  d.files["quantize_config.json"] = Text(kGptqConfig);
  ExpectRefused(Read(d), "CFG-010", "d/quantize_config.json", "", "group_size", -1);
}

// The directory's config decides BitBLAS (docs/recognised.md 2): the same
// split layer under a bitblas label is a BitBLAS layer over the merged
// table, whose scales [1, 32] say N = 1, G = 32, so qzeros [1, 4] in shard 1
// has the wrong row count (docs/recognised.md 4).
TEST(ModelDirOracle, ABitblasLabelMakesTheSplitGptqNamesABitblasLayer) {
  Dir d = SplitLayerDir(LayerTensors());
  d.files["quantize_config.json"] = Text(R"({"bits":4,"group_size":32,"format":"bitblas"})");
  ModelDirRead dir_read;
  const qd::Outcome outcome = Read(d, &dir_read);
  EXPECT_EQ(dir_read.format, "recognised");
  ExpectRefused(outcome, "REC-004", "d/" + kShard1, "l.qzeros", "shape", 8);
  // config.json without quantization_config is no source: the label is not read there.
  d.files.erase("quantize_config.json");
  d.files["config.json"] = Text(R"({"format":"bitblas"})");
  Read(d, &dir_read);
  EXPECT_EQ(dir_read.format, "gptq");
}

TEST(ModelDirOracle, ConfigsAreTakenInPriorityOrderWithTheSetsStem) {
  // model.quantize_config.json (stem "model") outranks quantize_config.json:
  // it is the winner CFG-010 names.
  Dir d = SplitLayerDir(LayerTensors());
  d.files["model.quantize_config.json"] = Text("{\"bits\":4,\"group_size\":-1}");
  ExpectRefused(Read(d), "CFG-010", "d/model.quantize_config.json", "", "group_size", -1);
}

// ---------------------------------------------------------------------------
// Torch sets: pytorch_model-0000k-of-00002.bin with their .bin.index.json.
// Each shard is a torch.save archive built by pt_test_support.h: a/data.pkl
// first (its data at 30 + 10 = 40: ds of data.pkl, where a shard's
// header-level dir_read point, docs/pt.md 6.4), a/data/0, a/version.

const std::string kPtShard1 = "pytorch_model-00001-of-00002.bin";
const std::string kPtShard2 = "pytorch_model-00002-of-00002.bin";
const std::string kPtIndex = "pytorch_model.bin.index.json";

// {NAME: F32 tensor of shape [count] over storage "0" holding VALUES}.
Bytes PtShard(const std::string& name, const std::vector<float>& values) {
  pt_test::Pkl p;
  const std::int64_t count = static_cast<std::int64_t>(values.size());
  p.proto()
      .dict()
      .mark()
      .str(name)
      .tensor("FloatStorage", "0", count, 0, {count}, {1})
      .setitems()
      .stop();
  return pt_test::Zip(
      {{"a/data.pkl", p.b}, {"a/data/0", pt_test::F32s(values)}, {"a/version", Text("3\n")}});
}

Dir TorchDir() {
  Dir d;
  d.files[kPtShard1] = PtShard("w", {1.5f, -2.0f, 3.0f});
  d.files[kPtShard2] = PtShard("v", {0.25f});
  d.files[kPtIndex] =
      Text(IndexText({{"w", kPtShard1}, {"v", kPtShard2}}, "\"total_size\":16"));  // 12 + 4
  d.files["config.json"] = Text("{}");
  return d;
}

TEST(ModelDirOracle, ATorchSetDecodesItsShardsInShardOrder) {
  ModelDirRead dir_read;
  const qd::Outcome outcome = Read(TorchDir(), &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_EQ(dir_read.format, "pt");
  EXPECT_EQ(dir_read.total_size_convention, "tensor bytes");
  ASSERT_EQ(outcome.tensors.size(), 2u);
  EXPECT_EQ(outcome.tensors[0].name, "w");
  EXPECT_EQ(outcome.tensors[0].values, (std::vector<float>{1.5f, -2.0f, 3.0f}));
  EXPECT_EQ(outcome.tensors[1].name, "v");
  EXPECT_EQ(outcome.tensors[1].values, (std::vector<float>{0.25f}));
}

TEST(ModelDirOracle, TorchSetsMeetTheIndexRulesWithTheirPickleOffset) {
  Dir d = TorchDir();
  d.files[kPtShard2] = PtShard("extra", {0.25f});
  ExpectRefused(Read(d), "IDX-008", "d/" + kPtShard2, "extra", "weight_map", 40);
  d = TorchDir();
  d.files["pytorch_model-00003-of-00003.bin"] = PtShard("x", {1.0f});
  ExpectRefused(Read(d), "IDX-006", "d/pytorch_model-00003-of-00003.bin", "", "weight_map", -1);
  d = TorchDir();
  d.files[kPtShard2] = Text("PK not a zip");
  const qd::Outcome outcome = Read(d);
  ASSERT_TRUE(outcome.refused);
  EXPECT_EQ(outcome.findings.back().rule.substr(0, 3), "PT-") << Describe(outcome);
  EXPECT_EQ(outcome.findings.back().file, "d/" + kPtShard2);
}

// A bitsandbytes layer in a torch set (here the int8 layer "l." an l.SCB
// claims, docs/bnb.md "Layers") is not read yet: said so, with no verdict.
TEST(ModelDirOracle, BitsandbytesInATorchSetIsUnsupportedNotRefused) {
  Dir d = TorchDir();
  d.files[kPtShard2] = PtShard("l.SCB", {0.25f});
  d.files[kPtIndex] = Text(IndexText({{"w", kPtShard1}, {"l.SCB", kPtShard2}}));
  ModelDirRead dir_read;
  const qd::Outcome outcome = Read(d, &dir_read);
  EXPECT_TRUE(dir_read.unsupported);
  EXPECT_NE(dir_read.unsupported_why.find("not read yet"), std::string::npos);
  EXPECT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  EXPECT_TRUE(outcome.tensors.empty());
}

}  // namespace
}  // namespace qd::oracle
