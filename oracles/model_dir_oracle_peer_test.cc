// model_dir_oracle_peer_test.cc: the oracle's model-directory reader
// (oracles/model_dir.h) on every directory of the peer models
// (QD_MODELS_PEER_DIR: manifest.json, the directories and EXPECTED/), read in
// place. They record what AutoGPTQ, GPT-QModel, bitsandbytes and
// huggingface_hub's sharding code write.
//
// The listing is built here with std::filesystem, as docs/model_dir.md
// section 1 says (entries sorted by name bytes, kinds, bytes of regular
// entries held by the test).
//
//   accept   ReadModelDir accepts (no error) and every tensor of
//            EXPECTED/<name>.expected.safetensors (read with ReadSafetensors)
//            is in the outcome with its shape and float bits; StreamModelDir
//            gives the same findings.
//   reject   ReadModelDir refuses with the rule the manifest's reason and
//            rule_hint point at, naming the file, tensor, field and
//            byte_offset the contract gives (table kRejects below, each
//            row's directory and `file` checked against the manifest).
//   sharded  broken-c's shards with broken-i's index (the two directories
//            differ in exactly those bytes: the index's total_size and the
//            37 trailing bytes) are the consistent sharded 3-bit model they
//            were built from: accepted, total_size matching the tensor-bytes
//            convention, every layer decoded as ReadGptqFile decodes the
//            shard holding it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "oracles/gptq.h"
#include "oracles/json.h"
#include "oracles/model_dir.h"
#include "oracles/peer_test_support.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

#ifndef QD_MODELS_PEER_DIR
#error "QD_MODELS_PEER_DIR must name the peer model folder"
#endif

namespace qd::oracle {
namespace {

namespace fs = std::filesystem;
using peer_test::Bytes;
using peer_test::Describe;
using peer_test::FirstTensorNotHeld;
using peer_test::Json;
using peer_test::LoadJson;
using peer_test::ReadBytes;
using peer_test::StringMember;
using peer_test::View;

const std::string kModelsDir = QD_MODELS_PEER_DIR;

// A listing and the bytes its entries point into.
struct HeldListing {
  qd::ModelDirListing listing;
  std::map<std::string, Bytes> bytes;  // by entry name; never resized after the listing is built
};

// docs/model_dir.md section 1, test-side: every entry directly in DIR, sorted
// by name bytes; a regular file or a link resolving to one inside DIR is
// regular, a link resolving outside is escaping, anything else other.
void ListDirectory(const std::string& dir, HeldListing* held) {
  held->listing.dir = dir;
  held->listing.prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  const fs::path root = fs::canonical(dir);
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const fs::path path = fs::path(dir) / name;
    qd::DirEntry entry;
    entry.name = name;
    std::error_code error;
    const fs::path target = fs::canonical(path, error);
    const bool inside = !error && target.parent_path() == root;
    if (!error && !inside && fs::is_symlink(fs::symlink_status(path))) {
      entry.kind = qd::DirEntryKind::kEscaping;
    } else if (!error && fs::is_regular_file(target)) {
      entry.kind = qd::DirEntryKind::kRegular;
      held->bytes[name] = ReadBytes(path.string());
    }
    held->listing.entries.push_back(entry);
  }
  for (qd::DirEntry& entry : held->listing.entries) {
    if (entry.kind == qd::DirEntryKind::kRegular) entry.bytes = View(held->bytes[entry.name]);
  }
}

const Json& Manifest() {
  static const Json manifest = LoadJson(kModelsDir + "/manifest.json");
  return manifest;
}

std::vector<std::string> DirectoryNames() {
  std::vector<std::string> names;
  const JsonDocument& d = Manifest().document;
  const std::uint32_t list = Manifest().ok ? d.FindMember(0, "directories") : kNoNode;
  if (list == kNoNode) return names;
  for (std::uint32_t e = d.nodes[list].first_child; e != kNoNode; e = d.nodes[e].next_sibling) {
    names.push_back(StringMember(d, e, "name"));
  }
  return names;
}

std::uint32_t Entry(const std::string& name) {
  const JsonDocument& d = Manifest().document;
  const std::uint32_t list = d.FindMember(0, "directories");
  for (std::uint32_t e = d.nodes[list].first_child; e != kNoNode; e = d.nodes[e].next_sibling) {
    if (StringMember(d, e, "name") == name) return e;
  }
  return kNoNode;
}

// What the contract gives for each refused directory: the rule (the
// manifest's rule_hint points at the kind), the finding's file relative to
// the directory, and the manifest's own `file` (its reason's subject), which
// the test checks so that the table cannot drift from the manifest.
struct Reject {
  const char* name;
  const char* rule;
  const char* file;           // the finding's file, relative to the directory
  const char* manifest_file;  // the manifest's `file`
  const char* field;
  const char* tensor;
  std::int64_t byte_offset;
};
constexpr Reject kRejects[] = {
    // metadata.total_size 1058816 is neither the tensor bytes (1083392) nor
    // the file bytes: IDX-011 on the index.
    {"broken-c-index-total-size", "IDX-011", "model.safetensors.index.json",
     "model.safetensors.index.json", "total_size", "", -1},
    // config.json says 4 bits, the qweights are 3-bit: GPTQ-002 on the first
    // layer's qweight in anchor order, a header fact of the first shard,
    // whose data opens with layer 0's down_proj (g_idx at [0, 2048), qweight
    // at [2048, 51200) in its header).
    {"broken-e-bits-mismatch", "GPTQ-002", "model-00001-of-00002.safetensors", "config.json",
     "shape", "model.layers.0.mlp.down_proj.qweight", 8},
    // quantize_config.json (the winner) and config.json disagree on group_size.
    {"broken-f-group-size-disagree", "CFG-010", "quantize_config.json", "quantize_config.json",
     "group_size", "", -1},
    // 37 bytes after the last tensor of the first shard; the manifest: header
    // and data end at 544624, the first trailing byte.
    {"broken-i-trailing-bytes", "ST-012", "model-00001-of-00002.safetensors",
     "model-00001-of-00002.safetensors", "data", "", 544624},
};

const Reject* FindReject(const std::string& name) {
  for (const Reject& reject : kRejects) {
    if (name == reject.name) return &reject;
  }
  return nullptr;
}

class ModelDirPeer : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelDirPeer, GivesTheManifestVerdict) {
  ASSERT_TRUE(Manifest().ok);
  const std::string name = GetParam();
  const std::uint32_t entry = Entry(name);
  ASSERT_NE(entry, kNoNode);
  const JsonDocument& d = Manifest().document;
  const std::string verdict = StringMember(d, entry, "verdict");
  const std::string dir = kModelsDir + "/" + name;
  HeldListing held;
  ListDirectory(dir, &held);
  ModelDirRead dir_read;
  const qd::Outcome outcome = ReadModelDir(held.listing, &dir_read);

  // The stream gives the same findings and verdict.
  std::vector<qd::DecodedTensor> streamed;
  qd::CollectingSink sink(&streamed);
  const qd::Outcome stream_outcome = StreamModelDir(held.listing, sink);
  EXPECT_EQ(Describe(stream_outcome), Describe(outcome));

  if (verdict == "accept") {
    ASSERT_FALSE(outcome.refused) << Describe(outcome);
    EXPECT_EQ(dir_read.format,
              StringMember(d, entry, "family").substr(0, 3) == "bnb" ? "bnb" : "gptq");
    const std::uint32_t expected_entry = d.FindMember(entry, "expected");
    const std::string expected_path = kModelsDir + "/" + StringMember(d, expected_entry, "path");
    const Bytes expected_bytes = ReadBytes(expected_path);
    const qd::Outcome expected = ReadSafetensors(View(expected_bytes), expected_path);
    ASSERT_FALSE(expected.refused) << Describe(expected);
    ASSERT_EQ(expected.tensors.size(), 14u);
    EXPECT_EQ(FirstTensorNotHeld(outcome, expected.tensors), "");
    // The stream holds the same tensors in the same order.
    ASSERT_EQ(streamed.size(), outcome.tensors.size());
    for (std::size_t i = 0; i < streamed.size(); ++i)
      EXPECT_EQ(streamed[i].name, outcome.tensors[i].name);
    EXPECT_EQ(FirstTensorNotHeld(outcome, streamed), "");
    return;
  }
  ASSERT_EQ(verdict, "reject");
  const Reject* reject = FindReject(name);
  ASSERT_NE(reject, nullptr) << "a reject directory this test does not know: " << name;
  EXPECT_EQ(StringMember(d, entry, "file"), reject->manifest_file);
  ASSERT_TRUE(outcome.refused) << Describe(outcome);
  const qd::Finding& f = outcome.findings.back();
  EXPECT_EQ(f.rule, reject->rule) << Describe(outcome);
  EXPECT_EQ(f.file, dir + "/" + reject->file) << Describe(outcome);
  EXPECT_EQ(f.field, reject->field) << Describe(outcome);
  EXPECT_EQ(f.tensor, reject->tensor) << Describe(outcome);
  EXPECT_EQ(f.byte_offset, reject->byte_offset) << Describe(outcome);
  EXPECT_TRUE(streamed.empty());
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (const char c : info.param)
    name += (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Manifest, ModelDirPeer, ::testing::ValuesIn(DirectoryNames()), TestName);

TEST(ModelDirPeerTables, EveryRejectRowIsAManifestDirectory) {
  for (const Reject& reject : kRejects) {
    EXPECT_NE(Entry(reject.name), kNoNode) << reject.name;
    EXPECT_EQ(StringMember(Manifest().document, Entry(reject.name), "verdict"), "reject");
  }
}

// broken-c's shards (no trailing bytes) with broken-i's index (the right
// total_size): the consistent sharded model both were derived from.
TEST(ModelDirPeerSharded, TheRepairedShardedModelDecodesAsItsShardsDo) {
  HeldListing held;
  ListDirectory(kModelsDir + "/broken-c-index-total-size", &held);
  const std::string index_name = "model.safetensors.index.json";
  held.bytes[index_name] = ReadBytes(kModelsDir + "/broken-i-trailing-bytes/" + index_name);
  for (qd::DirEntry& entry : held.listing.entries) {
    if (entry.name == index_name) entry.bytes = View(held.bytes[index_name]);
  }
  ModelDirRead dir_read;
  const qd::Outcome outcome = ReadModelDir(held.listing, &dir_read);
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  EXPECT_EQ(dir_read.format, "gptq");
  EXPECT_EQ(dir_read.total_size_convention, "tensor bytes");

  // Each shard read alone with the directory's config.json.
  const std::string dir = held.listing.prefix;
  const std::vector<qd::SideFile> configs = {
      qd::SideFile{dir + "config.json", held.bytes["config.json"]}};
  std::size_t layers = 0;
  for (const std::string shard :
       {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    std::vector<GptqLayerCodes> codes;
    const qd::Outcome alone = ReadGptqFile(View(held.bytes[shard]), dir + shard, configs, &codes);
    ASSERT_FALSE(alone.refused) << Describe(alone);
    layers += codes.size();
    EXPECT_EQ(FirstTensorNotHeld(outcome, alone.tensors), "") << shard;
  }
  EXPECT_EQ(layers, 14u);
}

}  // namespace
}  // namespace qd::oracle
