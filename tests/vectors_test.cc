// vectors_test: replays corpus/vectors/<format>.json, the portable vectors
// other implementations consume, through both readers of every format.
//
// The vectors record the oracle's reading at export time, so this test fails
// when either reader's verdict or rule IDs drift from what was published:
// a change of behaviour must come with re-exported vectors (and a note).
// Beside that (issue 13 item 1): every input's SHA-256; every expected
// output holds both readers' tensors bit for bit (read by this test's own
// safetensors parser); every MUST rule of oracles/rules.json has an invalid
// vector refused with it, or is listed below as an exception with its
// reason; every flag has a note; the upstream findings are exported with
// the contract's reading. The model directories (model_dir.json, one folder
// a test) are replayed through both directory readers from their folders.
#include <gtest/gtest.h>
#include <nettle/sha2.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/registry.h"

namespace {

namespace fs = std::filesystem;
const fs::path kVectors = fs::path(QD_SOURCE_DIR) / "corpus" / "vectors";

std::vector<std::uint8_t> ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string Sha256Hex(const std::vector<std::uint8_t>& bytes) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, bytes.size(), bytes.data());
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
  std::string hex;
  for (const std::uint8_t b : digest) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The name of every exported vector file: each registered format, then
// model_dir (the model directories, docs/model_dir.md).
std::vector<std::string> ExportedNames() {
  std::vector<std::string> names;
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) names.emplace_back(f.name);
  names.emplace_back(qd::harness::ModelDirFormat().name);
  return names;
}

// Every test of every exported format with its format's name.
std::vector<std::pair<std::string, nlohmann::json>> AllTests() {
  std::vector<std::pair<std::string, nlohmann::json>> tests;
  for (const std::string& name : ExportedNames()) {
    const nlohmann::json doc = ReadJson(kVectors / (name + ".json"));
    for (const auto& group : doc["testGroups"]) {
      for (const auto& test : group["tests"]) tests.emplace_back(name, test);
    }
  }
  return tests;
}

// A model_dir test's folder as both directory readers get it, from the
// folder on disk, each entry held to what the test lists: a regular file
// with its SHA-256, a subdirectory, or a symbolic link to a regular file
// outside the folder. BYTES keeps the files' bytes alive.
qd::ModelDirListing DirListing(const nlohmann::json& test, std::vector<std::vector<std::uint8_t>>* bytes) {
  qd::ModelDirListing listing;
  listing.dir = test["file"].get<std::string>();
  listing.prefix = listing.dir + "/";
  const fs::path folder = kVectors / listing.dir;
  std::size_t on_disk = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(folder)) ++on_disk;
  EXPECT_EQ(on_disk, test["entries"].size()) << listing.dir << ": entries on disk";
  bytes->reserve(test["entries"].size());
  for (const auto& e : test["entries"]) {
    qd::DirEntry entry;
    entry.name = e["name"].get<std::string>();
    const fs::path path = folder / entry.name;
    const std::string kind = e["kind"];
    if (kind == "regular") {
      entry.kind = qd::DirEntryKind::kRegular;
      EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path))) << path;
      const std::vector<std::uint8_t>& b = bytes->emplace_back(ReadBytes(path));
      EXPECT_EQ(e["sha256"], Sha256Hex(b)) << path;
      entry.bytes = {b.data(), b.size()};
    } else if (kind == "other") {
      entry.kind = qd::DirEntryKind::kOther;
      EXPECT_TRUE(fs::is_directory(fs::symlink_status(path))) << path;
    } else {
      entry.kind = qd::DirEntryKind::kEscaping;
      EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path))) << path;
      const fs::path target = fs::canonical(path);
      EXPECT_TRUE(fs::is_regular_file(target)) << path;
      EXPECT_NE(target.parent_path(), fs::canonical(folder)) << path << " must point out of its folder";
    }
    listing.entries.push_back(std::move(entry));
  }
  std::sort(listing.entries.begin(), listing.entries.end(),
            [](const qd::DirEntry& a, const qd::DirEntry& b) { return a.name < b.name; });
  return listing;
}

// An F32 safetensors file read by the format's README alone (8-byte
// little-endian header length, a JSON header, the data), as another
// implementation would: name -> (shape, value bits). Empty on any
// deviation, with a test failure.
std::map<std::string, std::pair<std::vector<std::uint64_t>, std::vector<std::uint32_t>>> ReadF32Safetensors(
    const std::vector<std::uint8_t>& bytes, const std::string& what) {
  std::map<std::string, std::pair<std::vector<std::uint64_t>, std::vector<std::uint32_t>>> tensors;
  std::uint64_t n = 0;
  if (bytes.size() < 8) return ADD_FAILURE() << what << ": shorter than 8 bytes", tensors;
  for (int i = 7; i >= 0; --i) n = n << 8 | bytes[static_cast<std::size_t>(i)];
  if (8 + n > bytes.size()) return ADD_FAILURE() << what << ": header past the end", tensors;
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  for (const auto& [name, info] : header.items()) {
    EXPECT_EQ(info["dtype"], "F32") << what << " " << name;
    const std::uint64_t begin = info["data_offsets"][0], end = info["data_offsets"][1];
    if (8 + n + end > bytes.size() || end < begin || (end - begin) % 4 != 0) {
      ADD_FAILURE() << what << ": " << name << " data outside the file";
      return {};
    }
    std::vector<std::uint32_t> bits((end - begin) / 4);
    if (!bits.empty()) std::memcpy(bits.data(), bytes.data() + 8 + n + begin, end - begin);  // little-endian host
    tensors[name] = {info["shape"].get<std::vector<std::uint64_t>>(), std::move(bits)};
  }
  return tensors;
}

// The same map made from a reader's decoded tensors.
std::map<std::string, std::pair<std::vector<std::uint64_t>, std::vector<std::uint32_t>>> Bits(
    const std::vector<qd::DecodedTensor>& decoded) {
  std::map<std::string, std::pair<std::vector<std::uint64_t>, std::vector<std::uint32_t>>> tensors;
  for (const qd::DecodedTensor& t : decoded) {
    std::vector<std::uint32_t> bits(t.values.size());
    if (!bits.empty()) std::memcpy(bits.data(), t.values.data(), 4 * t.values.size());
    tensors[t.name] = {t.shape, std::move(bits)};
  }
  return tensors;
}

// "valid" (accepted, no finding), "acceptable" (accepted with warnings) or
// "invalid" (refused), and the rule IDs in finding order.
std::pair<std::string, std::vector<std::string>> Reading(const qd::Outcome& o) {
  std::vector<std::string> rules;
  for (const qd::Finding& f : o.findings) rules.push_back(f.rule);
  if (o.refused) return {"invalid", rules};
  return {rules.empty() ? "valid" : "acceptable", rules};
}

TEST(Vectors, EveryRegisteredFormatHasVectors) {
  for (const std::string& name : ExportedNames()) EXPECT_TRUE(fs::exists(kVectors / (name + ".json"))) << name;
}

// The model directories (model_dir.json): each folder holds exactly the
// entries its test lists, and both directory readers give the published
// verdict and rules; a valid one's expectedOutput holds both readers'
// tensors bit for bit. One group per IDX rule, each refused with its rule.
TEST(Vectors, BothDirectoryReadersGiveThePublishedVerdictRulesAndTensors) {
  const qd::harness::DirFormatEntry& dir = qd::harness::ModelDirFormat();
  const nlohmann::json doc = ReadJson(kVectors / (std::string(dir.name) + ".json"));
  std::set<std::string> refused_with;
  int decoded = 0;
  for (const auto& group : doc["testGroups"]) {
    for (const auto& test : group["tests"]) {
      std::vector<std::vector<std::uint8_t>> bytes;
      const qd::ModelDirListing listing = DirListing(test, &bytes);
      const std::string file = test["file"];
      const auto want = std::make_pair(test["result"].get<std::string>(), test["flags"].get<std::vector<std::string>>());
      const qd::Outcome oracle = dir.oracle_read(listing);
      EXPECT_EQ(Reading(dir.codec_read(listing)), want) << "codec, " << file;
      EXPECT_EQ(Reading(oracle), want) << "oracle, " << file;
      if (test["result"] == "invalid") {
        refused_with.insert(test["flags"].back().get<std::string>());
        continue;
      }
      ASSERT_TRUE(test.contains("expectedOutput")) << file;
      const std::vector<std::uint8_t> expected = ReadBytes(kVectors / test["expectedOutput"]["file"].get<std::string>());
      EXPECT_EQ(test["expectedOutput"]["sha256"], Sha256Hex(expected)) << file;
      const auto written = ReadF32Safetensors(expected, file);
      EXPECT_EQ(written, Bits(oracle.tensors)) << "oracle, " << file;
      EXPECT_EQ(written, Bits(dir.codec_read(listing).tensors)) << "codec, " << file;
      ++decoded;
    }
  }
  EXPECT_GT(decoded, 0);
  for (const std::string& rule : dir.violable_rules()) EXPECT_TRUE(refused_with.count(rule)) << rule;
}

// The FP4 code-8 sign is an upstream disagreement, published as a variant
// flag rather than a failure (issue #3): the bnb vectors must carry it.
TEST(Vectors, BnbVectorsFlagTheFp4Code8Variant) {
  std::ifstream in(kVectors / "bnb.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  int flagged = 0;
  for (const auto& group : doc["testGroups"]) {
    for (const auto& test : group["tests"]) {
      for (const auto& v : test.value("variantFlags", nlohmann::json::array())) {
        flagged += v == "fp4-code8-negzero";
      }
    }
  }
  EXPECT_GT(flagged, 0);
  EXPECT_TRUE(doc["notes"].contains("fp4-code8-negzero"));
}

TEST(Vectors, BothReadersGiveThePublishedVerdictAndRules) {
  int checked = 0;
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    const fs::path manifest = kVectors / (std::string(f.name) + ".json");
    if (!fs::exists(manifest)) continue;
    std::ifstream in(manifest);
    const nlohmann::json doc = nlohmann::json::parse(in);
    ASSERT_EQ(doc["algorithm"], f.name);
    for (const auto& group : doc["testGroups"]) {
      for (const auto& test : group["tests"]) {
        const std::string file = test["file"];
        const std::vector<std::uint8_t> bytes = ReadBytes(kVectors / file);
        char crc[16];
        std::snprintf(crc, sizeof crc, "%08lx",
                      crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
        ASSERT_EQ(test["crc32"], crc) << file << " changed on disk";
        ASSERT_EQ(test["sha256"], Sha256Hex(bytes)) << file;
        const qd::ByteView view{bytes.data(), bytes.size()};
        const auto want = std::make_pair(test["result"].get<std::string>(),
                                         test["flags"].get<std::vector<std::string>>());
        std::vector<std::string> variants;
        if (f.variants != nullptr) {
          for (const auto& v : f.variants(view)) variants.push_back(v.flag);
        }
        EXPECT_EQ(test.value("variantFlags", std::vector<std::string>{}), variants) << file;
        // Side files (a GPTQ config), named by their path as exported.
        qd::harness::SideFiles side_files;
        for (const auto& config : test.value("configs", nlohmann::json::array())) {
          side_files.push_back({config.get<std::string>(), ReadBytes(kVectors / config)});
        }
        EXPECT_EQ(Reading(f.codec_read(view, file, side_files)), want) << "codec, " << file;
        EXPECT_EQ(Reading(f.oracle_read(view, file, side_files)), want) << "oracle, " << file;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// Each valid and acceptable vector's expectedOutput is what both readers
// decode, as an F32 safetensors file: same names, shapes and value bits
// (the oracle's reading is the expectation; the codec is what `quantdiff
// decode` runs). A recognised family's file carries decodeRefusal instead.
TEST(Vectors, ExpectedOutputsHoldBothReadersTensorsBitForBit) {
  int compared = 0;
  for (const auto& [format, test] : AllTests()) {
    if (test.contains("entries")) continue;  // a model directory: its own test above
    const qd::harness::FormatEntry* f = qd::harness::FindFormat(format);
    ASSERT_NE(f, nullptr);
    const std::string file = test["file"];
    if (test["result"] == "invalid") {
      EXPECT_FALSE(test.contains("expectedOutput") || test.contains("decodeRefusal")) << file;
      continue;
    }
    if (f->decode_refusal != nullptr) {
      EXPECT_EQ(test.value("decodeRefusal", ""), "REC-001") << file;
      EXPECT_FALSE(test.contains("expectedOutput")) << file;
      continue;
    }
    ASSERT_TRUE(test.contains("expectedOutput")) << file;
    const std::vector<std::uint8_t> expected = ReadBytes(kVectors / test["expectedOutput"]["file"].get<std::string>());
    EXPECT_EQ(test["expectedOutput"]["sha256"], Sha256Hex(expected)) << file;
    EXPECT_EQ(test["expectedOutput"]["size"], expected.size()) << file;
    const std::vector<std::uint8_t> bytes = ReadBytes(kVectors / file);
    qd::harness::SideFiles side_files;
    for (const auto& config : test.value("configs", nlohmann::json::array())) {
      side_files.push_back({config.get<std::string>(), ReadBytes(kVectors / config)});
    }
    const qd::ByteView view{bytes.data(), bytes.size()};
    const auto written = ReadF32Safetensors(expected, file);
    EXPECT_EQ(written, Bits(f->oracle_read(view, file, side_files).tensors)) << "oracle, " << file;
    EXPECT_EQ(written, Bits(f->codec_read(view, file, side_files).tensors)) << "codec, " << file;
    ++compared;
  }
  EXPECT_GT(compared, 100);  // 105 valid and acceptable decoded vectors at --count 4
}

// MUST rules no exported file can be refused with, and why. A rule listed
// here that gains a vector fails the test too (the list stays true).
const std::map<std::string, std::string>& MustRuleExceptions() {
  static const std::map<std::string, std::string> kExceptions = [] {
    std::map<std::string, std::string> m;
    for (const char* id : {"BNB-003", "GPTQ-006", "AWQ-007", "AWQ-008"}) {
      m[id] = "a decoding rule (kind decode): no file is refused by it; every valid vector's "
              "expectedOutput tests it";
    }
    for (const char* id : {"AWQ-201", "AWQ-202", "AWQ-203"}) {
      m[id] = "a conversion rule (kind convert): `quantdiff convert` refuses a conversion, no "
              "reader refuses a file";
    }
    return m;
  }();
  return kExceptions;
}

TEST(Vectors, EveryMustRuleHasAnInvalidVectorOrAListedException) {
  // Covered: the refusing rule (last flag) of an invalid test, or the
  // decodeRefusal of an accepted one (REC-001).
  std::set<std::string> covered;
  for (const auto& [format, test] : AllTests()) {
    if (test["result"] == "invalid") covered.insert(test["flags"].back().get<std::string>());
    if (test.contains("decodeRefusal")) covered.insert(test["decodeRefusal"].get<std::string>());
  }
  const nlohmann::json catalogue = ReadJson(fs::path(QD_SOURCE_DIR) / "oracles" / "rules.json");
  int must = 0;
  for (const auto& rule : catalogue["rules"]) {
    if (rule["severity"] != "MUST") continue;
    ++must;
    const std::string id = rule["id"];
    const auto exception = MustRuleExceptions().find(id);
    if (exception == MustRuleExceptions().end()) {
      EXPECT_TRUE(covered.count(id)) << "MUST rule " << id << " has no invalid vector in corpus/vectors "
                                     << "and is not listed in MustRuleExceptions()";
    } else {
      EXPECT_FALSE(covered.count(id)) << id << " has a vector now: remove it from MustRuleExceptions()";
    }
  }
  for (const auto& exception : MustRuleExceptions()) {
    const std::string& id = exception.first;
    const bool catalogued = std::any_of(catalogue["rules"].begin(), catalogue["rules"].end(),
                                        [&](const auto& r) { return r["id"] == id && r["severity"] == "MUST"; });
    EXPECT_TRUE(catalogued) << id << " is listed as an exception but is no MUST rule of the catalogue";
  }
  EXPECT_GT(must, 100);
}

// Wycheproof's notes: every flag a test names is explained, a rule's with
// the catalogue's text and the bug type its severity gives.
TEST(Vectors, EveryFlagHasANote) {
  const nlohmann::json catalogue = ReadJson(fs::path(QD_SOURCE_DIR) / "oracles" / "rules.json");
  std::map<std::string, nlohmann::json> rules;
  for (const auto& r : catalogue["rules"]) rules[r["id"]] = r;
  int named = 0;
  for (const std::string& name : ExportedNames()) {
    const nlohmann::json doc = ReadJson(kVectors / (name + ".json"));
    const nlohmann::json& notes = doc["notes"];
    std::set<std::string> flags;
    for (const auto& group : doc["testGroups"]) {
      for (const auto& test : group["tests"]) {
        for (const char* key : {"flags", "variantFlags", "upstreamFlags"}) {
          for (const auto& flag : test.value(key, nlohmann::json::array())) flags.insert(flag);
        }
        if (test.contains("decodeRefusal")) flags.insert(test["decodeRefusal"].get<std::string>());
      }
    }
    for (const std::string& flag : flags) {
      ++named;
      ASSERT_TRUE(notes.contains(flag)) << name << ": flag " << flag << " has no note";
      const nlohmann::json& note = notes[flag];
      for (const char* field : {"bugType", "description", "effect"}) {
        EXPECT_FALSE(note.value(field, "").empty()) << name << " " << flag << " " << field;
      }
      const auto rule = rules.find(flag);
      if (rule == rules.end()) continue;
      EXPECT_EQ(note["description"].get<std::string>().rfind(rule->second["text"].get<std::string>(), 0), 0u)
          << flag << ": the description starts with the catalogue's text";
      const std::string want = rule->second["severity"] == "warning" ? "EDGE_CASE"
                               : flag == "REC-001"                   ? "UNDEFINED_DECODE"
                                                                     : "MISSING_CHECK";
      EXPECT_EQ(note["bugType"], want) << flag;
    }
    EXPECT_EQ(notes.size(), flags.size()) << name << ": a note explains no flag of a test";
  }
  EXPECT_GT(named, 100);
}

// corpus/upstream/ggml (its README): the two .gguf files exported as they
// are, refused with the contract's rule; the two MXFP4 blocks as one-tensor
// .gguf files decoding to the contract's values (all NaN for E8M0 0xFF, all
// -0.0 for code 8), each flagged with ggml's behaviour.
TEST(Vectors, UpstreamFindingsAreExportedWithTheContractsReading) {
  const nlohmann::json doc = ReadJson(kVectors / "gguf.json");
  std::map<std::string, nlohmann::json> by_flag;
  for (const auto& group : doc["testGroups"]) {
    if (group["type"] != "UpstreamFinding") continue;
    for (const auto& test : group["tests"]) {
      ASSERT_EQ(test["upstreamFlags"].size(), 1u);
      const std::string flag = test["upstreamFlags"][0];
      EXPECT_EQ(doc["notes"][flag]["bugType"], "KNOWN_UPSTREAM_BUG") << flag;
      by_flag[flag] = test;
    }
  }
  ASSERT_EQ(by_flag.size(), 4u);
  const fs::path upstream = fs::path(QD_SOURCE_DIR) / "corpus" / "upstream" / "ggml";
  const std::vector<std::tuple<std::string, std::string, std::string>> refused = {
      {"upstream-ggml-count-wraps", "gguf/count-wraps-2e64-4e021271.gguf", "GGUF-014"},
      {"upstream-ggml-alloc-abort", "gguf/data-alloc-abort-285f32ac.gguf", "GGUF-018"}};
  for (const auto& [flag, source, rule] : refused) {
    const nlohmann::json& test = by_flag[flag];
    EXPECT_EQ(test["sha256"], Sha256Hex(ReadBytes(upstream / source))) << flag;
    EXPECT_EQ(test["result"], "invalid") << flag;
    EXPECT_EQ(test["flags"].back(), rule) << flag;
  }
  const std::vector<std::pair<std::string, std::uint32_t>> decoded = {
      {"upstream-ggml-mxfp4-e8m0-ff", 0}, {"upstream-ggml-mxfp4-code8-positive-zero", 0x80000000u}};
  for (const auto& [flag, zero_bits] : decoded) {
    const nlohmann::json& test = by_flag[flag];
    ASSERT_EQ(test["result"], "valid") << flag;
    const auto tensors = ReadF32Safetensors(
        ReadBytes(kVectors / test["expectedOutput"]["file"].get<std::string>()), flag);
    ASSERT_EQ(tensors.size(), 1u) << flag;
    const std::vector<std::uint32_t>& bits = tensors.begin()->second.second;
    ASSERT_EQ(bits.size(), 32u) << flag;
    for (const std::uint32_t b : bits) {
      if (zero_bits == 0) {
        EXPECT_TRUE((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0) << flag << ": not NaN";
      } else {
        EXPECT_EQ(b, zero_bits) << flag;
      }
    }
  }
}

}  // namespace
