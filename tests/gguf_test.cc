// gguf_test.cc: hand-built .gguf files read by the codec (every kernel)
// and the oracle, against values worked out here from docs/gguf.md: the
// decoded shapes and values, the order of the output, and the rule, field
// and byte offset of the first finding of section 3's steps.
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/gguf.h"
#include "codecs/kernels.h"
#include "oracles/gguf.h"

namespace {

using Bytes = std::vector<std::uint8_t>;

void U32(Bytes* b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void U64(Bytes* b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void Str(Bytes* b, const std::string& s) {
  U64(b, s.size());
  b->insert(b->end(), s.begin(), s.end());
}
void Header(Bytes* b, std::uint64_t tensors, std::uint64_t kvs, std::uint32_t version = 3) {
  *b = {'G', 'G', 'U', 'F'};
  U32(b, version);
  U64(b, tensors);
  U64(b, kvs);
}
void Info(Bytes* b, const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type,
          std::uint64_t offset) {
  Str(b, name);
  U32(b, static_cast<std::uint32_t>(ne.size()));
  for (std::uint64_t d : ne) U64(b, d);
  U32(b, type);
  U64(b, offset);
}
void Pad(Bytes* b, std::size_t alignment = 32) {
  while (b->size() % alignment != 0) b->push_back(0);
}

struct Both {
  qd::Outcome codec;
  qd::Outcome oracle;
};

Both Read(const Bytes& file) {
  const qd::ByteView view{file.data(), file.size()};
  Both both{qd::codec::DecodeGgufFile(view, "t.gguf"), qd::oracle::ReadGgufFile(view, "t.gguf")};
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    const qd::Outcome forced = qd::codec::DecodeGgufFile(view, "t.gguf", kernel);
    EXPECT_EQ(forced.tensors.size(), both.codec.tensors.size());
    for (std::size_t i = 0; i < forced.tensors.size() && i < both.codec.tensors.size(); ++i) {
      EXPECT_EQ(std::memcmp(forced.tensors[i].values.data(), both.codec.tensors[i].values.data(),
                            4 * forced.tensors[i].values.size()),
                0);
    }
  }
  return both;
}

void ExpectRefused(const Bytes& file, const std::string& rule, const std::string& field, std::int64_t at) {
  const Both both = Read(file);
  for (const qd::Outcome* o : {&both.codec, &both.oracle}) {
    ASSERT_TRUE(o->refused) << rule;
    const qd::Finding& f = o->findings.back();
    EXPECT_EQ(f.rule, rule);
    EXPECT_EQ(f.field, field) << rule;
    EXPECT_EQ(f.byte_offset, at) << rule;
  }
}

// Two tensors: an f32 [2, 3] written second in the infos but first in the
// data, and a q8_0 row of 32 with d = 0.5 and q = 0..31.
Bytes TwoTensorFile() {
  Bytes b;
  Header(&b, 2, 1);
  Str(&b, "general.architecture");
  U32(&b, 8);
  Str(&b, "llama");
  Info(&b, "b.weight", {32}, 8, 32);
  Info(&b, "a.weight", {3, 2}, 0, 0);
  Pad(&b);
  for (int i = 1; i <= 6; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(i));
    U32(&b, bits);
  }
  Pad(&b);
  b.push_back(0x00);  // d = 0x3800 = 0.5
  b.push_back(0x38);
  for (int q = 0; q < 32; ++q) b.push_back(static_cast<std::uint8_t>(q));
  Pad(&b);
  return b;
}

TEST(Gguf, DecodesInOffsetOrderWithShapesReversed) {
  const Both both = Read(TwoTensorFile());
  for (const qd::Outcome* o : {&both.codec, &both.oracle}) {
    ASSERT_FALSE(o->refused);
    ASSERT_EQ(o->tensors.size(), 2u);
    EXPECT_EQ(o->tensors[0].name, "a.weight");
    EXPECT_EQ(o->tensors[0].shape, (std::vector<std::uint64_t>{2, 3}));
    EXPECT_EQ(o->tensors[0].values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(o->tensors[1].name, "b.weight");
    ASSERT_EQ(o->tensors[1].values.size(), 32u);
    for (int q = 0; q < 32; ++q) EXPECT_EQ(o->tensors[1].values[q], 0.5f * static_cast<float>(q));
    // b.weight comes first in the infos but not at offset 0: GGUF-102.
    ASSERT_EQ(o->findings.size(), 1u);
    EXPECT_EQ(o->findings[0].rule, "GGUF-102");
    EXPECT_EQ(o->findings[0].tensor, "b.weight");
  }
}

TEST(Gguf, F16Bf16AndARecognisedType) {
  Bytes b;
  Header(&b, 3, 0, 2);
  Info(&b, "h", {2}, 1, 0);
  Info(&b, "g", {2}, 30, 32);
  Info(&b, "i", {4}, 24, 64);
  Pad(&b);
  const std::size_t data_start = b.size();
  b.insert(b.end(), {0x00, 0x3C, 0x01, 0x80});  // f16 1.0, -2^-24
  Pad(&b);
  b.insert(b.end(), {0x80, 0x3F, 0x00, 0xC0});  // bf16 1.0, -2.0
  Pad(&b);
  b.insert(b.end(), {1, 2, 3, 4});
  Pad(&b);
  const Both both = Read(b);
  for (const qd::Outcome* o : {&both.codec, &both.oracle}) {
    ASSERT_FALSE(o->refused);
    ASSERT_EQ(o->tensors.size(), 2u);  // i8 is recognised, not decoded
    EXPECT_EQ(o->tensors[0].values, (std::vector<float>{1.0f, -0x1p-24f}));
    EXPECT_EQ(o->tensors[1].values, (std::vector<float>{1.0f, -2.0f}));
    ASSERT_EQ(o->findings.size(), 1u);
    EXPECT_EQ(o->findings[0].rule, "GGUF-101");
    EXPECT_EQ(o->findings[0].byte_offset, static_cast<std::int64_t>(data_start + 64));
  }
}

TEST(Gguf, HeaderRules) {
  ExpectRefused({'G', 'G', 'U'}, "GGUF-001", "magic", 0);
  ExpectRefused({'G', 'G', 'U', 'F', 3, 0}, "GGUF-005", "header", 4);
  Bytes b;
  Header(&b, 0, 0, 0x03000000);
  ExpectRefused(b, "GGUF-003", "version", 4);
  Header(&b, 0, 0, 1);
  ExpectRefused(b, "GGUF-002", "version", 4);
  Header(&b, 0, 0);
  b.resize(20);
  ExpectRefused(b, "GGUF-005", "header", 16);
  // 26 bytes after the header hold two pairs of 13 bytes, not three.
  Header(&b, 0, 3);
  b.resize(24 + 26);
  ExpectRefused(b, "GGUF-004", "metadata_kv_count", 16);
  Header(&b, 2, 0);
  b.resize(24 + 47);
  ExpectRefused(b, "GGUF-004", "tensor_count", 8);
}

TEST(Gguf, MetadataRules) {
  Bytes b;
  Header(&b, 0, 1);
  U64(&b, 100);  // key length beyond the 8 bytes left
  b.resize(b.size() + 8);
  ExpectRefused(b, "GGUF-005", "metadata", 24);

  Header(&b, 0, 2);
  Str(&b, "k");
  U32(&b, 0);
  b.push_back(1);
  const std::int64_t second = static_cast<std::int64_t>(b.size());
  Str(&b, "k");
  U32(&b, 0);
  b.push_back(1);
  ExpectRefused(b, "GGUF-008", "metadata", second);

  Header(&b, 0, 1);
  Str(&b, "k");
  U32(&b, 13);
  b.resize(b.size() + 16);
  ExpectRefused(b, "GGUF-006", "metadata", 24 + 9);

  // An array of 2^40 u32: its count field is at 24 + 9 + 4 + 4.
  Header(&b, 0, 1);
  Str(&b, "k");
  U32(&b, 9);
  U32(&b, 4);
  U64(&b, std::uint64_t{1} << 40);
  b.resize(b.size() + 64);
  ExpectRefused(b, "GGUF-005", "metadata", 24 + 9 + 4 + 4);

  Header(&b, 0, 1);
  Str(&b, "general.alignment");
  U32(&b, 4);
  U32(&b, 48);
  ExpectRefused(b, "GGUF-009", "general.alignment", 24);
}

// A pair whose value is DEPTH nested arrays around one u8.
Bytes Nested(int depth) {
  Bytes b;
  Header(&b, 0, 1);
  Str(&b, "n");
  U32(&b, 9);
  for (int d = 1; d < depth; ++d) {
    U32(&b, 9);
    U64(&b, 1);
  }
  U32(&b, 0);
  U64(&b, 1);
  b.push_back(7);
  return b;
}

// A file of no tensor and one pair: KEY, value type TYPE, the value's bytes.
Bytes OnePair(const std::string& key, std::uint32_t type, const Bytes& value) {
  Bytes b;
  Header(&b, 0, 1);
  Str(&b, key);
  U32(&b, type);
  b.insert(b.end(), value.begin(), value.end());
  return b;
}

// Section 2.2: a BOOL byte is 0 or 1, anything else GGUF-020 at that byte,
// a pair's own value or an element of a BOOL array at any depth. Offsets:
// a one-byte key's pair starts at 24, its type at 24 + 9, its value at 37.
TEST(Gguf, BoolValuesAreZeroOrOne) {
  Bytes b;
  Header(&b, 0, 2);
  Str(&b, "t");
  U32(&b, 7);
  b.push_back(1);
  Str(&b, "f");
  U32(&b, 7);
  b.push_back(0);
  const Both zero_and_one = Read(b);
  EXPECT_FALSE(zero_and_one.codec.refused);
  EXPECT_FALSE(zero_and_one.oracle.refused);

  ExpectRefused(OnePair("t", 7, {2}), "GGUF-020", "metadata", 37);
  // [1, 0, 255]: element type at 37, count at 41, elements at 49.
  ExpectRefused(OnePair("a", 9, {7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 255}), "GGUF-020", "metadata", 51);
  // [[0, 128]]: the inner array's element type at 49, count at 53,
  // elements at 61.
  ExpectRefused(OnePair("n", 9, {9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 128}),
                "GGUF-020", "metadata", 62);
}

TEST(Gguf, NestedArraysUpToDepthEight) {
  const Both eight = Read(Nested(8));
  EXPECT_FALSE(eight.codec.refused);
  EXPECT_FALSE(eight.oracle.refused);
  // Depth 9: the element type field of the depth-8 array, 24 + 9 + 4 + 7 * 12.
  ExpectRefused(Nested(9), "GGUF-007", "metadata", 24 + 9 + 4 + 7 * 12);
}

TEST(Gguf, TensorInfoAndDataRules) {
  Bytes b;
  auto one = [&](const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type, std::uint64_t offset) {
    Header(&b, 1, 0);
    Info(&b, name, std::move(ne), type, offset);
    Pad(&b);
    b.resize(b.size() + 64);
  };
  one(std::string(64, 'n'), {4}, 0, 0);
  ExpectRefused(b, "GGUF-012", "name", 24);
  one("t", {1, 1, 1, 1, 1}, 0, 0);
  ExpectRefused(b, "GGUF-013", "n_dims", 24);
  one("t", {4}, 31, 0);
  ExpectRefused(b, "GGUF-015", "type", 24);
  one("t", {4, std::uint64_t{1} << 62, 8}, 0, 0);
  ExpectRefused(b, "GGUF-014", "ne", 24);
  one("t", {33}, 2, 0);
  ExpectRefused(b, "GGUF-016", "ne", 24);
  one("t", {4}, 0, 16);
  ExpectRefused(b, "GGUF-017", "offset", 24);
  // Infos end at 24 + 9 + 4 + 8 + 4 + 8 = 57; data at 64; 64 bytes follow.
  one("t", {17}, 0, 0);
  ExpectRefused(b, "GGUF-018", "offset", 64);
  Header(&b, 2, 0);
  Info(&b, "a", {8}, 0, 0);
  Info(&b, "b", {4}, 0, 0);
  Pad(&b);
  const std::int64_t data_start = static_cast<std::int64_t>(b.size());
  b.resize(b.size() + 64);
  ExpectRefused(b, "GGUF-019", "offset", data_start);  // (0, 16, "b") before (0, 32, "a")
}

// corpus/upstream/ggml/gguf/ (README there): each file is refused with the
// rule its name's stem maps to, by both readers.
TEST(Gguf, UpstreamGgmlFindingsAsTheContractSays) {
  const std::map<std::string, std::string> kRules = {{"count-wraps-2e64", "GGUF-014"},
                                                     {"data-alloc-abort", "GGUF-018"}};
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(QD_SOURCE_DIR) / "corpus/upstream/ggml/gguf")) {
    const std::string name = e.path().filename().string();
    const std::string stem = name.substr(0, name.rfind('-'));
    ASSERT_TRUE(kRules.count(stem)) << name << " has no expected rule";
    std::ifstream in(e.path(), std::ios::binary);
    const Bytes file((std::istreambuf_iterator<char>(in)), {});
    const Both both = Read(file);
    EXPECT_TRUE(both.codec.refused && both.codec.findings.back().rule == kRules.at(stem)) << name;
    EXPECT_TRUE(both.oracle.refused && both.oracle.findings.back().rule == kRules.at(stem)) << name;
    ++files;
  }
  EXPECT_EQ(files, 2);
}

}  // namespace
