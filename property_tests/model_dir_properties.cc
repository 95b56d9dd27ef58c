// model_dir_properties.cc: the model-directory generators (generators/model_dir*.cc)
// against the directory readers (docs/model_dir.md): the codec's
// (codecs/model_dir.h) and the oracle's (oracles/model_dir.h), which must
// agree with it throughout.
//
//  * Every ModelDirViolation(rule) is refused with exactly that rule as its
//    one error, last, in the file, field and byte offset the contract's
//    section 3 gives the rule (50 seeds per rule).
//  * ModelDirValid is accepted, check and decode agreeing.
//  * A valid GPTQ, bitsandbytes or plain safetensors file cut into shards at
//    any tensor boundaries checks and decodes exactly like the file alone
//    with the same configs (the registry's reading of the file, codec with
//    codec and oracle with oracle): the same verdict and findings apart from
//    `file` and the message, byte offsets in tensor data taken from where
//    the data starts, the same decoded tensors by name, bit for bit; the
//    index's total_size convention is the one the test computes from the
//    written files. The same for GPTQ, bitsandbytes and container violations.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cctype>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "codecs/model_dir.h"
#include "generators/generators.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/model_dir.h"
#include "property_tests/gen/outcome_text.h"

namespace {

constexpr char kDir[] = "models/m";
constexpr char kIndex[] = "model.safetensors.index.json";
constexpr char kTorchIndex[] = "pytorch_model.bin.index.json";
constexpr int kSeedsPerRule = 50;

using qdtest::ErrorCount;
using qdtest::Findings;

// docs/model_dir.md 3: where each rule's finding points. file: "dir" (the
// directory as given), "index" (prefix + the index), "shard" (prefix + a
// .safetensors name).
struct Place {
  const char* file;
  const char* field;
  std::int64_t byte_offset;
};
const std::map<std::string, Place>& Places() {
  static const std::map<std::string, Place> places = {
      {"IDX-001", {"dir", "weight_set", -1}},   {"IDX-002", {"dir", "weight_set", -1}},
      {"IDX-003", {"index", "weight_map", -1}},  // or metadata: checked below
      {"IDX-004", {"index", "weight_map", -1}}, {"IDX-005", {"shard", "weight_map", -1}},
      {"IDX-006", {"shard", "weight_map", -1}}, {"IDX-007", {"shard", "weight_map", 8}},
      {"IDX-008", {"shard", "weight_map", 8}},  {"IDX-009", {"shard", "weight_map", 8}},
      {"IDX-010", {"shard", "weight_map", 8}},  {"IDX-011", {"index", "total_size", -1}},
      {"IDX-012", {"shard", "__metadata__", 8}}, {"IDX-013", {"shard", "dtype", 8}},
  };
  return places;
}

// "" when o refuses with exactly `rule`, placed as section 3 says.
std::string RefusedWith(const qd::Outcome& o, const std::string& rule) {
  if (!o.refused || ErrorCount(o) != 1 || o.findings.back().severity != qd::Severity::kError ||
      o.findings.back().rule != rule) {
    return "should refuse with exactly " + rule + ": " + Findings(o);
  }
  const qd::Finding& f = o.findings.back();
  const Place& p = Places().at(rule);
  const std::string prefix = std::string(kDir) + "/";
  bool file_ok = p.file == std::string("dir")     ? f.file == kDir
                 : p.file == std::string("index") ? f.file == prefix + kIndex
                                                  : f.file.rfind(prefix, 0) == 0 &&
                                                        f.file.size() > prefix.size() &&
                                                        f.file.find(".safetensors") != std::string::npos;
  const bool field_ok = f.field == p.field || (rule == "IDX-003" && f.field == "metadata");
  if (!file_ok || !field_ok || f.byte_offset != p.byte_offset) {
    return rule + " placed wrong: " + qd::harness::Describe(f);
  }
  return "";
}

// The oracle's reading of the same listing (oracles/model_dir.h) against
// the codec's: no divergence (verdict, every finding, every decoded value),
// the same format and total_size convention. "" when they agree.
std::string OracleAgrees(const qd::ModelDirListing& listing, const qd::Outcome& codec,
                         const qd::codec::ModelDirRead& codec_read) {
  qd::oracle::ModelDirRead read;
  const qd::Outcome oracle = qd::oracle::ReadModelDir(listing, &read);
  if (auto d = qd::harness::Compare(codec, oracle, "model_dir")) return d->signature + ": " + d->detail;
  if (read.format != codec_read.format || read.total_size_convention != codec_read.total_size_convention) {
    return "format / total_size: codec " + codec_read.format + " / " + codec_read.total_size_convention +
           ", oracle " + read.format + " / " + read.total_size_convention;
  }
  return "";
}

class ModelDirViolation : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelDirViolation, RefusedWithThatRule) {
  const std::string& rule = GetParam();
  for (int seed = 0; seed < kSeedsPerRule; ++seed) {
    qd::gen::Rng rng(seed);
    const qd::gen::GeneratedDir g = qd::gen::ModelDirViolation(rule, rng);
    ASSERT_EQ(g.expected_rule, rule);
    const qd::ModelDirListing listing = g.Listing(kDir);
    qd::codec::ModelDirRead read;
    const qd::Outcome check = qd::codec::CheckModelDir(listing, &read);
    const qd::Outcome decode = qd::codec::DecodeModelDir(listing);
    EXPECT_EQ(RefusedWith(check, rule), "") << "seed " << seed << ": " << g.description;
    EXPECT_EQ(Findings(check), Findings(decode)) << "seed " << seed << ": check and decode differ";
    EXPECT_FALSE(read.unsupported) << read.unsupported_why;
    EXPECT_EQ(OracleAgrees(listing, decode, read), "") << "seed " << seed << ": " << g.description;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIdxRule, ModelDirViolation,
                         ::testing::ValuesIn(qd::gen::ModelDirViolableRules()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(ModelDirProperties, EveryIdxRuleOfTheCatalogueIsGenerated) {
  std::vector<std::string> expected;
  for (int i = 1; i <= 13; ++i) expected.push_back((i < 10 ? "IDX-00" : "IDX-0") + std::to_string(i));
  EXPECT_EQ(qd::gen::ModelDirViolableRules(), expected);
}

// docs/model_dir.md 3 step 8, from the written files: "file bytes" when
// total_size is the sum of the shard files' sizes, else (an accepted
// directory) "tensor bytes"; "" without an index or total_size.
std::string ExpectedConvention(const qd::gen::GeneratedDir& g) {
  std::map<std::string, std::size_t> sizes;
  const qd::gen::GeneratedDirFile* index = nullptr;
  for (const auto& f : g.files) {
    sizes[f.name] = f.bytes.size();
    if (f.name == kIndex || f.name == kTorchIndex) index = &f;
  }
  if (index == nullptr) return "";
  const auto j = nlohmann::json::parse(index->bytes.begin(), index->bytes.end());
  if (!j.contains("metadata") || !j["metadata"].contains("total_size")) return "";
  std::map<std::string, bool> shards;
  for (const auto& [tensor, shard] : j["weight_map"].items()) shards[shard.get<std::string>()] = true;
  std::uint64_t file_bytes = 0;
  for (const auto& [shard, unused] : shards) file_bytes += sizes[shard];
  return j["metadata"]["total_size"].get<std::uint64_t>() == file_bytes ? "file bytes" : "tensor bytes";
}

// The weight files a valid directory's reader reads: its regular
// *.safetensors entries (the shards, or the one file) or pytorch_model*.bin.
std::size_t WeightFiles(const qd::gen::GeneratedDir& g) {
  std::size_t n = 0;
  for (const auto& f : g.files) {
    const bool safetensors = f.name.size() > 12 && f.name.substr(f.name.size() - 12) == ".safetensors";
    const bool torch = f.name.rfind("pytorch_model", 0) == 0 && f.name.size() > 4 &&
                       f.name.substr(f.name.size() - 4) == ".bin";
    n += f.kind == qd::DirEntryKind::kRegular && (safetensors || torch);
  }
  return n;
}

TEST(ModelDirProperties, ValidDirectoriesAreAccepted) {
  for (int seed = 0; seed < 40; ++seed) {
    qd::gen::Rng rng(seed);
    const qd::gen::GeneratedDir g = qd::gen::ModelDirValid(rng);
    ASSERT_EQ(g.expected_rule, "");
    const qd::ModelDirListing listing = g.Listing(kDir);
    qd::codec::ModelDirRead read;
    const qd::Outcome check = qd::codec::CheckModelDir(listing, &read);
    const qd::Outcome decode = qd::codec::DecodeModelDir(listing);
    EXPECT_FALSE(check.refused) << "seed " << seed << ": " << g.description << ": " << Findings(check);
    EXPECT_EQ(ErrorCount(check), 0);
    EXPECT_EQ(read.shards, WeightFiles(g)) << "seed " << seed << ": " << g.description;
    EXPECT_EQ(read.total_size_convention, ExpectedConvention(g)) << "seed " << seed;
    EXPECT_EQ(Findings(check), Findings(decode)) << "seed " << seed;
    EXPECT_FALSE(read.unsupported) << read.unsupported_why;
    EXPECT_EQ(OracleAgrees(listing, decode, read), "") << "seed " << seed << ": " << g.description;
  }
}

// ---- a model and its shards ------------------------------------------------------

// Where tensor `name`'s data starts in a safetensors file (8 + N + begin,
// read from the header here), or -1.
std::int64_t DataStart(const std::vector<std::uint8_t>& file, const std::string& name) {
  if (file.size() < 8) return -1;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n * 256 + file[i];
  if (n > file.size() - 8) return -1;
  const auto header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n),
                                            nullptr, /*allow_exceptions=*/false);
  if (!header.is_object() || !header.contains(name) || !header[name].is_object()) return -1;
  const auto& offsets = header[name].value("data_offsets", nlohmann::json());
  if (!offsets.is_array() || offsets.empty() || !offsets[0].is_number_unsigned()) return -1;
  return static_cast<std::int64_t>(8 + n + offsets[0].get<std::uint64_t>());
}

// A finding with `file` and the message dropped and a byte offset inside its tensor's data
// made relative to where that data starts in its own file (a shard's
// tensors sit elsewhere than the model file's).
using FileOf = std::function<const std::vector<std::uint8_t>*(const std::string&)>;
qd::Finding Comparable(qd::Finding f, const FileOf& file_of) {
  const std::vector<std::uint8_t>* bytes = file_of(f.file);
  const std::int64_t start = bytes != nullptr && !f.tensor.empty() ? DataStart(*bytes, f.tensor) : -1;
  if (start >= 0 && f.byte_offset >= start) f.field += " @data+" + std::to_string(f.byte_offset - start);
  if (start >= 0 && f.byte_offset >= start) f.byte_offset = 0;
  f.file = "";
  f.message = "";  // free text naming files; never compared (harness/differ.h)
  return f;
}

// The findings of a directory and of the file alone compared field by field
// but `file` (a shard's or a config's path here, the file's name there).
std::string SameFindings(const qd::Outcome& dir, const FileOf& dir_file, const qd::Outcome& file,
                         const FileOf& file_file) {
  if (dir.refused != file.refused || dir.findings.size() != file.findings.size()) {
    return "directory: " + Findings(dir) + "\n  file: " + Findings(file);
  }
  for (std::size_t i = 0; i < dir.findings.size(); ++i) {
    const qd::Finding a = Comparable(dir.findings[i], dir_file);
    const qd::Finding b = Comparable(file.findings[i], file_file);
    if (qd::harness::Describe(a) != qd::harness::Describe(b)) {
      return "finding " + std::to_string(i) + ": " + qd::harness::Describe(dir.findings[i]) +
             " vs " + qd::harness::Describe(file.findings[i]);
    }
  }
  return "";
}

// The decoded tensors by name (a sharded GPTQ model decodes in (shard,
// begin, end, name) order), bit for bit.
std::string SameTensors(const qd::Outcome& dir, const qd::Outcome& file) {
  std::map<std::string, const qd::DecodedTensor*> by_name;
  for (const qd::DecodedTensor& t : file.tensors) by_name[t.name] = &t;
  if (dir.tensors.size() != file.tensors.size() || by_name.size() != file.tensors.size()) {
    return std::to_string(dir.tensors.size()) + " tensors from the directory, " +
           std::to_string(file.tensors.size()) + " from the file";
  }
  for (const qd::DecodedTensor& t : dir.tensors) {
    const auto it = by_name.find(t.name);
    if (it == by_name.end()) return "tensor " + t.name + " is not decoded from the file";
    const qd::DecodedTensor& u = *it->second;
    if (t.shape != u.shape || t.values.size() != u.values.size() ||
        (!t.values.empty() &&  // an empty vector's data() may be null, which memcmp may not get
         std::memcmp(t.values.data(), u.values.data(), t.values.size() * sizeof(float)) != 0)) {
      return "tensor " + t.name + " differs";
    }
  }
  return "";
}

// MODEL as the registry reads it (its detected format's codec reading, the
// side files as configs) and cut into shards: the same verdict and findings,
// the same decoded tensors, the format and total_size convention read.
void ShardsReadLikeTheFile(const qd::gen::Generated& model, std::uint64_t seed, qd::gen::Rng& rng) {
  // Cut points: tensor indexes in the file's data order; out of range ones
  // are ignored, so any boundary and any count of shards is reached.
  const auto cuts = *rc::gen::container<std::vector<std::size_t>>(rc::gen::inRange<std::size_t>(0, 14));
  const qd::ByteView view{model.bytes.data(), model.bytes.size()};
  const qd::harness::FormatEntry& entry = qd::harness::DetectFormat(view, model.side_files);
  const qd::Outcome file = entry.codec_read(view, "model.safetensors", model.side_files);

  const qd::gen::GeneratedDir dir = qd::gen::ShardModelAt(model, cuts, rng);
  const qd::ModelDirListing listing = dir.Listing(kDir);
  qd::codec::ModelDirRead read;
  const qd::Outcome decoded = qd::codec::DecodeModelDir(listing, &read);
  const qd::Outcome checked = qd::codec::CheckModelDir(listing);
  const std::string context = model.description + " / " + dir.description + " (seed " +
                              std::to_string(seed) + ")";
  const FileOf in_dir = [&](const std::string& path) -> const std::vector<std::uint8_t>* {
    for (const auto& f : dir.files) {
      if (listing.prefix + f.name == path) return &f.bytes;
    }
    return nullptr;
  };
  const FileOf alone = [&](const std::string& path) {
    return path == "model.safetensors" ? &model.bytes : nullptr;
  };
  const std::string findings = SameFindings(decoded, in_dir, file, alone);
  if (!findings.empty()) RC_FAIL(context + ": " + findings);
  const std::string tensors = SameTensors(decoded, file);
  if (!tensors.empty()) RC_FAIL(context + ": " + tensors);
  if (!file.refused) RC_ASSERT(read.format == entry.name);
  RC_ASSERT(read.total_size_convention == ExpectedConvention(dir));
  RC_ASSERT(Findings(checked) == Findings(decoded));
  // The oracle's directory reading against the oracle's reading of the file.
  const qd::harness::FormatEntry& oracle_entry = qd::harness::OracleDetectFormat(view, model.side_files);
  const qd::Outcome oracle_file = oracle_entry.oracle_read(view, "model.safetensors", model.side_files);
  qd::oracle::ModelDirRead oracle_read;
  const qd::Outcome oracle_dir = qd::oracle::ReadModelDir(listing, &oracle_read);
  const std::string oracle_findings = SameFindings(oracle_dir, in_dir, oracle_file, alone);
  if (!oracle_findings.empty()) RC_FAIL(context + ": oracle: " + oracle_findings);
  const std::string oracle_tensors = SameTensors(oracle_dir, oracle_file);
  if (!oracle_tensors.empty()) RC_FAIL(context + ": oracle: " + oracle_tensors);
  if (!oracle_file.refused) RC_ASSERT(oracle_read.format == oracle_entry.name);
  RC_ASSERT(oracle_read.total_size_convention == ExpectedConvention(dir));
}

void ValidShardsReadLikeTheFile(qd::gen::Generated (*make)(qd::gen::Rng&), std::string_view format) {
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::gen::Generated model = make(rng);
  RC_ASSERT(qd::harness::DetectFormat({model.bytes.data(), model.bytes.size()}, model.side_files).name == format);
  ShardsReadLikeTheFile(model, seed, rng);
}

RC_GTEST_PROP(ModelDirProperties, ShardedGptqReadsLikeTheFile, ()) {
  ValidShardsReadLikeTheFile(qd::gen::GptqValid, "gptq");
}

RC_GTEST_PROP(ModelDirProperties, ShardedBnbReadsLikeTheFile, ()) {
  ValidShardsReadLikeTheFile(qd::gen::BnbValid, "bnb");
}

RC_GTEST_PROP(ModelDirProperties, ShardedFp8ReadsLikeTheFile, ()) {
  ValidShardsReadLikeTheFile(qd::gen::Fp8Valid, "fp8");
}

RC_GTEST_PROP(ModelDirProperties, ShardedSafetensorsReadsLikeTheFile, ()) {
  ValidShardsReadLikeTheFile(qd::gen::SafetensorsValid, "safetensors");
}

// A broken model is refused alike: the violations of GPTQ, bitsandbytes, FP8
// and container rules, sharded where the container reads (a file it refuses is
// put in alone, and refused as that file alone).
RC_GTEST_PROP(ModelDirProperties, ShardedViolationsReadLikeTheFile, ()) {
  const auto format = *rc::gen::element<std::string>("gptq", "bnb", "fp8", "safetensors");
  const qd::harness::FormatEntry* entry = qd::harness::FindFormat(format);
  RC_ASSERT(entry != nullptr);
  // Not the container's warnings (ST-1xx): they are about the header's
  // spelling, which the shards' writer makes anew.
  std::vector<std::string> rules;
  for (const std::string& r : entry->violable_rules()) {
    if (r.rfind("ST-1", 0) != 0) rules.push_back(r);
  }
  const auto rule = *rc::gen::elementOf(rules);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::gen::Generated model = entry->generate_violation(rule, rng);
  ShardsReadLikeTheFile(model, seed, rng);
}

// A torch model cut into .bin shards with pytorch_model.bin.index.json
// (docs/model_dir.md 3 steps 6-8 over docs/pt.md) reads like the one .pt
// file, on each side: accepted, format "pt", the same findings, the same
// decoded tensors in the same order (shards hold the root items in order,
// so (shard rank, begin, end, name) is the file's (begin, end, name)), bit
// for bit; the total_size convention the test computes; check as decode.
RC_GTEST_PROP(ModelDirProperties, ShardedTorchReadsLikeTheFile, ()) {
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::gen::PtModelDir model = qd::gen::PtShardedModel(rng);
  const qd::ByteView view{model.file.bytes.data(), model.file.bytes.size()};
  const qd::harness::FormatEntry& entry = *qd::harness::FindFormat("pt");
  const qd::Outcome file = entry.codec_read(view, "model.pt", {});
  const qd::Outcome oracle_file = entry.oracle_read(view, "model.pt", {});
  RC_ASSERT(!file.refused);

  const qd::ModelDirListing listing = model.dir.Listing(kDir);
  qd::codec::ModelDirRead read;
  const qd::Outcome decoded = qd::codec::DecodeModelDir(listing, &read);
  const qd::Outcome checked = qd::codec::CheckModelDir(listing);
  qd::oracle::ModelDirRead oracle_read;
  const qd::Outcome oracle_dir = qd::oracle::ReadModelDir(listing, &oracle_read);
  const std::string context = model.dir.description + " (seed " + std::to_string(seed) + ")";
  const FileOf none = [](const std::string&) -> const std::vector<std::uint8_t>* { return nullptr; };
  for (const auto& [dir, one, side] : {std::tuple{&decoded, &file, "codec"},
                                       std::tuple{&oracle_dir, &oracle_file, "oracle"}}) {
    const std::string findings = SameFindings(*dir, none, *one, none);
    if (!findings.empty()) RC_FAIL(context + ": " + side + ": " + findings);
    const std::string tensors = SameTensors(*dir, *one);
    if (!tensors.empty()) RC_FAIL(context + ": " + side + ": " + tensors);
    for (std::size_t i = 0; i < dir->tensors.size(); ++i) {
      RC_ASSERT(dir->tensors[i].name == one->tensors[i].name);
    }
  }
  RC_ASSERT(!read.unsupported);
  RC_ASSERT(read.format == "pt");
  RC_ASSERT(oracle_read.format == "pt");
  RC_ASSERT(read.shards == WeightFiles(model.dir));
  RC_ASSERT(read.total_size_convention == ExpectedConvention(model.dir));
  RC_ASSERT(oracle_read.total_size_convention == ExpectedConvention(model.dir));
  RC_ASSERT(Findings(checked) == Findings(decoded));
  RC_ASSERT(OracleAgrees(listing, decoded, read) == "");
  RC_TAG(read.shards > 1 ? "several shards" : "one shard", read.total_size_convention,
         decoded.tensors.empty() ? "no floating tensor" : "floating tensors");
}

// ---- GPTQ and AWQ in torch .bin files (docs/pt.md 6.5) ---------------------------

// A finding as the two containers must both give it: all but `file`, the
// message and byte_offset (a .bin places a tensor's bytes and its header
// facts elsewhere than a .safetensors file does).
std::string ContainerFree(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) {
    s += "\n  " + f.rule + " " + (f.severity == qd::Severity::kError ? "error" : "warning") + " tensor=" +
         f.tensor + " field=" + f.field + " row=" + std::to_string(f.row) + " element=" +
         std::to_string(f.element);
  }
  return s;
}

// One model read from its safetensors directory and from its torch twin,
// by the codec's and by the oracle's directory reader, and (when the set is
// one file) the twin's lone .bin with the configs beside it through the
// registry: the same verdict and findings, the same decoded tensors bit
// for bit. Returns the safetensors reading's error rule ("" accepted).
std::string TwinsReadAlike(const qd::gen::Generated& model, std::uint64_t seed, qd::gen::Rng& rng) {
  const auto cuts = *rc::gen::container<std::vector<std::size_t>>(rc::gen::inRange<std::size_t>(0, 14));
  const qd::gen::TorchTwinDirs twins = qd::gen::TorchTwinAt(model, cuts, rng);
  RC_PRE(twins.has_torch);
  const qd::ModelDirListing st = twins.safetensors.Listing(kDir);
  const qd::ModelDirListing pt = twins.torch.Listing(kDir);
  const std::string context = model.description + " / " + twins.torch.description + " (seed " +
                              std::to_string(seed) + ")";
  qd::codec::ModelDirRead st_read, pt_read;
  const qd::Outcome codec_st = qd::codec::DecodeModelDir(st, &st_read);
  const qd::Outcome codec_pt = qd::codec::DecodeModelDir(pt, &pt_read);
  qd::oracle::ModelDirRead oracle_st_read, oracle_pt_read;
  const qd::Outcome oracle_st = qd::oracle::ReadModelDir(st, &oracle_st_read);
  const qd::Outcome oracle_pt = qd::oracle::ReadModelDir(pt, &oracle_pt_read);
  for (const auto& [a, b, side] : {std::tuple{&codec_st, &codec_pt, "codec"},
                                   std::tuple{&oracle_st, &oracle_pt, "oracle"}}) {
    if (ContainerFree(*a) != ContainerFree(*b)) {
      RC_FAIL(context + ": " + side + ": safetensors " + ContainerFree(*a) + "\n.bin " + ContainerFree(*b));
    }
    const std::string tensors = SameTensors(*b, *a);
    if (!tensors.empty()) RC_FAIL(context + ": " + side + ": " + tensors);
  }
  RC_ASSERT(!pt_read.unsupported);
  RC_ASSERT(pt_read.format == st_read.format);
  RC_ASSERT(oracle_pt_read.format == oracle_st_read.format);
  RC_ASSERT(Findings(qd::codec::CheckModelDir(pt)) == Findings(codec_pt));
  RC_ASSERT(OracleAgrees(pt, codec_pt, pt_read) == "");
  // A lone .bin (no index) with its configs beside it, as `check FILE` reads it.
  const qd::gen::GeneratedDirFile* bin = nullptr;
  std::vector<qd::SideFile> configs;
  for (const qd::gen::GeneratedDirFile& f : twins.torch.files) {
    if (f.name == "pytorch_model.bin") bin = &f;
  }
  for (const char* name : {"pytorch_model.quantize_config.json", "quantize_config.json",
                           "quant_config.json", "config.json"}) {
    for (const qd::gen::GeneratedDirFile& f : twins.torch.files) {
      if (f.name == name) configs.push_back({f.name, f.bytes});
    }
  }
  if (bin != nullptr) {
    const qd::ByteView view{bin->bytes.data(), bin->bytes.size()};
    const qd::harness::FormatEntry& entry = qd::harness::DetectFormat(view, configs);
    RC_ASSERT(entry.name == std::string_view("pt"));
    const qd::Outcome codec_file = entry.codec_read(view, "pytorch_model.bin", configs);
    const qd::Outcome oracle_file = entry.oracle_read(view, "pytorch_model.bin", configs);
    RC_ASSERT(ContainerFree(codec_file) == ContainerFree(codec_st));
    RC_ASSERT(ContainerFree(oracle_file) == ContainerFree(codec_st));
    RC_ASSERT(SameTensors(codec_file, codec_st) == "");
    RC_ASSERT(SameTensors(oracle_file, codec_st) == "");
  }
  RC_TAG(pt_read.format, pt_read.shards > 1 ? "several shards" : "one shard",
         codec_st.refused ? "refused" : "accepted");
  return codec_st.refused ? codec_st.findings.back().rule : "";
}

RC_GTEST_PROP(ModelDirProperties, GptqAndAwqInTorchBinReadLikeSafetensors, ()) {
  const auto format = *rc::gen::element<std::string>("gptq", "awq");
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::gen::Generated model = qd::harness::FindFormat(format)->generate_valid(rng);
  RC_ASSERT(TwinsReadAlike(model, seed, rng) == "");
}

// Broken GPTQ and AWQ models (their own rules and their configs': not the
// container's, which a .bin does not have) are refused alike, with the same
// rule in both containers. Not CFG-003 (no config source at all): without a
// config a .bin's GPTQ-like names are ordinary tensors (docs/pt.md 6.5).
RC_GTEST_PROP(ModelDirProperties, BrokenGptqAndAwqInTorchBinAreRefusedAlike, ()) {
  const auto format = *rc::gen::element<std::string>("gptq", "awq");
  const qd::harness::FormatEntry* entry = qd::harness::FindFormat(format);
  std::vector<std::string> rules;
  for (const std::string& r : entry->violable_rules()) {
    if (r.rfind("ST-", 0) != 0 && r != "CFG-003") rules.push_back(r);
  }
  const auto rule = *rc::gen::elementOf(rules);
  const auto seed = *rc::gen::arbitrary<std::uint64_t>();
  qd::gen::Rng rng(seed);
  const qd::gen::Generated model = entry->generate_violation(rule, rng);
  RC_TAG(rule, TwinsReadAlike(model, seed, rng));
}

// ds of data.pkl in a torch ZIP, from its local header (APPNOTE 4.3.7:
// 30 fixed bytes, the name, the extra field): where docs/pt.md 6.4 points
// header-level findings. -1 when absent.
std::int64_t DataPklStart(const std::vector<std::uint8_t>& zip) {
  auto u16 = [&](std::size_t at) { return static_cast<std::size_t>(zip[at] | zip[at + 1] << 8); };
  for (std::size_t at = 0; at + 30 <= zip.size(); ++at) {
    if (zip[at] != 'P' || zip[at + 1] != 'K' || zip[at + 2] != 3 || zip[at + 3] != 4) continue;
    const std::size_t n = u16(at + 26), m = u16(at + 28);
    const std::string name(zip.begin() + static_cast<std::ptrdiff_t>(at + 30),
                           zip.begin() + static_cast<std::ptrdiff_t>(at + 30 + n));
    if (name.size() >= 9 && name.substr(name.size() - 9) == "/data.pkl") {
      return static_cast<std::int64_t>(at + 30 + n + m);
    }
  }
  return -1;
}

// The case the issue names: a wrong qzeros shape, GPTQ-003 in both, its
// byte_offset the header's (8) in the .safetensors shard and ds of data.pkl
// in the .bin shard that holds the qzeros.
TEST(ModelDirProperties, WrongQzerosShapeIsGptq003InBothContainers) {
  qd::gen::Rng rng(7);
  const qd::gen::Generated model = qd::gen::GptqViolation("GPTQ-003", rng);
  const qd::gen::TorchTwinDirs twins = qd::gen::TorchTwinAt(model, {1}, rng);
  ASSERT_TRUE(twins.has_torch);
  for (const qd::gen::GeneratedDir* dir : {&twins.safetensors, &twins.torch}) {
    const qd::ModelDirListing listing = dir->Listing(kDir);
    for (const qd::Outcome& o : {qd::codec::CheckModelDir(listing), qd::oracle::ReadModelDir(listing)}) {
      ASSERT_TRUE(o.refused) << dir->description << ": " << Findings(o);
      EXPECT_EQ(o.findings.back().rule, "GPTQ-003") << dir->description;
      EXPECT_EQ(o.findings.back().field, "shape");
      EXPECT_EQ(o.findings.back().tensor.substr(o.findings.back().tensor.size() - 7), ".qzeros");
      const qd::gen::GeneratedDirFile* shard = nullptr;
      for (const auto& f : dir->files) {
        if (listing.prefix + f.name == o.findings.back().file) shard = &f;
      }
      ASSERT_NE(shard, nullptr) << o.findings.back().file;
      EXPECT_EQ(o.findings.back().byte_offset, dir == &twins.torch ? DataPklStart(shard->bytes) : 8);
    }
  }
}

}  // namespace
