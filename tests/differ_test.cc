// differ_test.cc: what qd::harness::Compare and CompareDetection call a
// divergence, and that the codec's and the oracle's format detection follow
// the Detection rules (README "Which format a file is", docs/bnb.md,
// docs/gptq.md section 2, docs/pt.md 1.1) on hand-built files.
//
// Expected formats come from those rules applied by hand to the bytes built
// here with the tests' own safetensors writer (property_tests/gen/files.h),
// never from either reader.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/differ.h"
#include "harness/registry.h"
#include "property_tests/gen/files.h"

namespace {

using qdtest::RawTensor;

qd::Finding ConfigFinding(const std::string& file, const std::string& message) {
  qd::Finding f;
  f.rule = "CFG-010";
  f.severity = qd::Severity::kError;
  f.file = file;
  f.field = "bits";
  f.message = message;
  return f;
}

qd::Outcome RefusedWith(const qd::Finding& finding) { return qd::Outcome{true, {finding}, {}}; }

TEST(Compare, FindingsDifferingOnlyInFileDivergeAsPosition) {
  const qd::Outcome codec = RefusedWith(ConfigFinding("dir/quantize_config.json", "same"));
  const qd::Outcome oracle = RefusedWith(ConfigFinding("dir/config.json", "same"));
  const auto d = qd::harness::Compare(codec, oracle, "gptq");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->signature, "DIFF:gptq:position:CFG-010");
  EXPECT_NE(d->detail.find("file=dir/quantize_config.json"), std::string::npos) << d->detail;
  EXPECT_NE(d->detail.find("file=dir/config.json"), std::string::npos) << d->detail;
}

TEST(Compare, FindingsDifferingOnlyInMessageAgree) {
  const qd::Outcome codec = RefusedWith(ConfigFinding("dir/config.json", "bits 4 against 8"));
  const qd::Outcome oracle = RefusedWith(ConfigFinding("dir/config.json", "the sources disagree"));
  EXPECT_FALSE(qd::harness::Compare(codec, oracle, "gptq").has_value());
}

TEST(Compare, EveryOtherPositionFieldDiverges) {
  const qd::Finding base = ConfigFinding("f", "m");
  std::vector<qd::Finding> changed(6, base);
  changed[0].tensor = "w";
  changed[1].field = "group_size";
  changed[2].byte_offset = 8;
  changed[3].row = 1;
  changed[4].block = 2;
  changed[5].element = 3;
  for (const qd::Finding& other : changed) {
    const auto d = qd::harness::Compare(RefusedWith(base), RefusedWith(other), "t");
    ASSERT_TRUE(d.has_value()) << qd::harness::Describe(other);
    EXPECT_EQ(d->signature, "DIFF:t:position:CFG-010");
  }
}

TEST(CompareDetection, DifferentFormatsDivergeWithTheDetectSignature) {
  const auto d = qd::harness::CompareDetection("safetensors", "bnb", "diff");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->signature, "DIFF:diff:detect:safetensors!=bnb");
  EXPECT_FALSE(qd::harness::CompareDetection("bnb", "bnb", "diff").has_value());
}

// A tensor of n U8 bytes.
RawTensor Bytes(const std::string& name, std::uint64_t n) {
  return RawTensor{name, "U8", {n}, std::vector<std::uint8_t>(n, 0)};
}

std::vector<std::uint8_t> File(const std::vector<RawTensor>& tensors,
                               const qdtest::Metadata* metadata = nullptr) {
  return qdtest::SafetensorsFile(tensors, metadata);
}

struct DetectionCase {
  const char* what;
  std::vector<std::uint8_t> file;
  const char* format;  // what the Detection rules say, applied by hand
};

std::vector<std::uint8_t> Zip() {
  // A local header signature and nothing valid after it (PT-002 later).
  std::vector<std::uint8_t> f = {0x50, 0x4B, 0x03, 0x04};
  f.resize(40, 0);
  return f;
}

// A safetensors file whose one tensor name puts "ustar" at file offset 257;
// leading_space opens the header with a blank, so byte 8 is not '{'.
std::vector<std::uint8_t> UstarAt257(bool leading_space) {
  const std::string open = leading_space ? " {" : "{";
  // 8 length bytes, then open, then the quote that starts the name.
  const std::size_t name_start = 8 + open.size() + 1;
  const std::string name = std::string(257 - name_start, 'a') + "ustar";
  std::string header = open + qdtest::JsonQuote(name) +
                       ":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::vector<std::uint8_t> file = qdtest::FileFromHeader(header, {0, 0, 0, 0});
  EXPECT_EQ(std::string(file.begin() + 257, file.begin() + 262), "ustar");
  return file;
}

std::vector<DetectionCase> Cases() {
  const qdtest::Metadata rabbit = {{"format", "rabbit-q8b32"}};
  const qdtest::Metadata blockwise8 = {{"bnb_blockwise8_quant_state", "{}"}};
  const qdtest::Metadata other = {{"format", "pt"}};
  std::vector<std::uint8_t> refused = File({Bytes("m.SCB", 4)});
  refused[0] += 1;  // the length prefix points past the header: ST-*
  return {
      {"plain F32 tensor", File({RawTensor{"w", "F32", {1}, {0, 0, 0, 0}}}), "safetensors"},
      {"metadata format other than rabbit-", File({Bytes("w", 4)}, &other), "safetensors"},
      {"rabbit- declaration without block tensors", File({Bytes("w", 4)}, &rabbit), "rbq"},
      {"a Q4B32 tensor", File({RawTensor{"w", "Q4B32", {1, 32}, std::vector<std::uint8_t>(18, 0)}}),
       "rbq"},
      {"HF 4-bit state, W missing (BNB-105 later)", File({Bytes("x.quant_state.bitsandbytes__nf4", 4)}),
       "bnb"},
      {"GPT-QModel 4-bit state", File({Bytes("m.weight_quant_state", 4)}), "bnb"},
      {"int8 SCB", File({Bytes("m.SCB", 4)}), "bnb"},
      {"int8 weight_scb", File({Bytes("m.weight_scb", 4)}), "bnb"},
      {"GPT-QModel 4-bit state with an empty M.", File({Bytes("weight_quant_state", 4)}), "bnb"},
      {"blockwise8 key with W, W.absmax, W.quant_map",
       File({Bytes("w", 4), Bytes("w.absmax", 4), Bytes("w.quant_map", 4)}, &blockwise8), "bnb"},
      {"blockwise8 key, quant_map missing", File({Bytes("w", 4), Bytes("w.absmax", 4)}, &blockwise8),
       "safetensors"},
      {"W.absmax and W.quant_map without the key",
       File({Bytes("w", 4), Bytes("w.absmax", 4), Bytes("w.quant_map", 4)}), "safetensors"},
      {"name ending in SCB without the dot", File({Bytes("mSCB", 4)}), "safetensors"},
      {"a lone g_idx (GPTQ-101 later)", File({Bytes("layer.g_idx", 4)}), "gptq"},
      // A U8 qweight whose prefix has no qzeros, scales or g_idx is a GGUF
      // layer (docs/ggml_safetensors.md, Detection); GPTQ's words are I32.
      {"U8 qweight without a prefix", File({Bytes("qweight", 4)}), "ggml_st"},
      {"I32 qweight without a prefix",
       File({RawTensor{"qweight", "I32", {1}, std::vector<std::uint8_t>(4, 0)}}), "gptq"},
      {"GPTQ and bnb names: bnb first", File({Bytes("a.qweight", 4), Bytes("b.SCB", 4)}), "bnb"},
      {"bnb names and a Q4B32 tensor: RBQ first",
       File({Bytes("b.SCB", 4), RawTensor{"w", "Q4B32", {1, 32}, std::vector<std::uint8_t>(18, 0)}}),
       "rbq"},
      {"container refused, bnb name inside", refused, "safetensors"},
      {"ZIP local header", Zip(), "pt"},
      {"legacy torch stream",
       {0x80, 0x02, 0x8A, 0x0A, 0x6C, 0xFC, 0x9C, 0x46, 0xF9, 0x20, 0x6A, 0xA8, 0x50, 0x19, '.'},
       "pt"},
      {"ustar at 257, byte 8 '{'", UstarAt257(false), "safetensors"},
      {"ustar at 257, header opening with a blank", UstarAt257(true), "pt"},
      {"empty file", {}, "safetensors"},
  };
}

TEST(Detection, CodecAndOracleFollowTheContract) {
  for (const DetectionCase& c : Cases()) {
    const qd::ByteView view{c.file.data(), c.file.size()};
    EXPECT_EQ(qd::harness::DetectFormat(view, {}).name, c.format) << "codec: " << c.what;
    EXPECT_EQ(qd::harness::OracleDetectFormat(view, {}).name, c.format) << "oracle: " << c.what;
  }
}

// Each side's claim of every format on its own, before the order decides:
// the file with bnb names and a Q4B32 tensor is claimed by both.
TEST(Detection, ClaimsAreIndependentOfTheOrder) {
  const std::vector<std::uint8_t> file =
      File({Bytes("b.SCB", 4), RawTensor{"w", "Q4B32", {1, 32}, std::vector<std::uint8_t>(18, 0)}});
  const qd::ByteView view{file.data(), file.size()};
  for (const char* name : {"rbq", "bnb"}) {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat(name);
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->claims(view, {})) << name;
    EXPECT_TRUE(f->oracle_claims(view, {})) << name;
  }
  for (const char* name : {"gptq", "pt"}) {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat(name);
    ASSERT_NE(f, nullptr);
    EXPECT_FALSE(f->claims(view, {})) << name;
    EXPECT_FALSE(f->oracle_claims(view, {})) << name;
  }
}

// Two files the rules classify differently, one detection from each side:
// the pair CompareDetection receives when one side misses a layer.
TEST(Detection, DisagreeingDetectionsGiveTheDetectSignature) {
  const std::vector<std::uint8_t> bnb = File({Bytes("m.SCB", 4)});
  const std::vector<std::uint8_t> plain = File({Bytes("m.scale", 4)});
  const auto d = qd::harness::CompareDetection(
      qd::harness::DetectFormat({plain.data(), plain.size()}, {}).name,
      qd::harness::OracleDetectFormat({bnb.data(), bnb.size()}, {}).name, "bnb_file");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->signature, "DIFF:bnb_file:detect:safetensors!=bnb");
}

// ST-005 in __metadata__ (rules.json: a key twice in one object, compared
// after unescaping; the first object in document order with one, its
// smallest such key), as both readers find it: the codec from its sorted
// metadata list, the oracle from its parser. The key is the one named
// between the first pair of quotes of the finding's message.
std::string St005KeyOf(const qd::Outcome& outcome) {
  if (!outcome.refused || outcome.findings.empty() || outcome.findings.back().rule != "ST-005") {
    return "(not ST-005)";
  }
  const std::string& message = outcome.findings.back().message;
  const std::size_t open = message.find('"');
  return message.substr(open + 1, message.find('"', open + 1) - open - 1);
}

std::vector<std::uint8_t> HeaderOnlyFile(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> file(8, 0);
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  file.insert(file.end(), header.begin(), header.end());
  return file;
}

TEST(DuplicateMetadataKeys, BothReadersNameTheRuleSameKey) {
  const std::string w = "\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]";
  const struct {
    std::string header;
    std::string key;
  } cases[] = {
      {"{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"a\":\"3\"}," + w + "}}", "a"},
      // A value that is not a string (ST-006) still has its key compared.
      {"{\"__metadata__\":{\"b\":\"1\",\"b\":2}," + w + "}}", "b"},
      // After unescaping: \u0063 is c.
      {"{\"__metadata__\":{\"c\":\"1\",\"\\u0063\":\"2\"}," + w + "}}", "c"},
      // The smallest duplicated key of the object, not the first met.
      {"{\"__metadata__\":{\"z\":\"1\",\"y\":\"1\",\"z\":\"2\",\"y\":\"2\"}," + w + "}}", "y"},
      // __metadata__ opens before the entry's unknown object: its key, though larger.
      {"{\"__metadata__\":{\"z\":\"1\",\"z\":\"2\"}," + w + ",\"x\":{\"a\":0,\"a\":1}}}", "z"},
      // The entry's object opens first: its key, though __metadata__'s is smaller.
      {"{" + w + ",\"x\":{\"q\":0,\"q\":1}},\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", "q"},
      // An object inside a metadata value (ST-006) is an object of its own.
      {"{\"__metadata__\":{\"m\":{\"k\":0,\"k\":1}}," + w + "}}", "k"},
      {"{\"__metadata__\":{\"a\":\"1\",\"b\":\"1\"}," + w + "}}", "(not ST-005)"},
  };
  const qd::harness::FormatEntry& safetensors = *qd::harness::FindFormat("safetensors");
  for (const auto& c : cases) {
    const std::vector<std::uint8_t> file = HeaderOnlyFile(c.header);
    const qd::ByteView view{file.data(), file.size()};
    EXPECT_EQ(St005KeyOf(safetensors.codec_read(view, "f", {})), c.key) << "codec: " << c.header;
    EXPECT_EQ(St005KeyOf(safetensors.oracle_read(view, "f", {})), c.key) << "oracle: " << c.header;
  }
}

}  // namespace
