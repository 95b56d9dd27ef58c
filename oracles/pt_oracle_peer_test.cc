// pt_oracle_peer_test.cc: the oracle torch.save reader against every case of
// the peer vectors (QD_PT_PEER_DIR: manifest.json and the .pt files, read in
// place). They were written by torch.save of torch 1.13 and by Python's
// pickle and zipfile modules (README.md there).
//
// For every case of manifest.json:
//   accept   ReadPtFile accepts with no finding; the tensor table has exactly
//            the manifest's tensors, each with the manifest's dtype and shape
//            and the SHA-256 of its C-order bytes equal to tensor_sha256;
//            views.pt's stride/offset views are materialised (their hashes
//            differ from a plain read of the storage); bnb_like_mixed.pt's
//            value table holds meta.quant_type 'nf4', meta.blocksize 32 and
//            meta.shape (40, 30) (docs/pt.md section 6.2).
//   reject   ReadPtFile refuses with the rule docs/pt.md maps the category
//            to, with the field and byte_offset docs/pt.md section 12 gives.
// After all of them, /tmp/quantdiff_pwned does not exist.
//
// SHA-256 is written here from FIPS 180-4 (oracle tests link nothing else).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "oracles/json.h"
#include "oracles/peer_test_support.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "quantdiff/plain_data.h"

#ifndef QD_PT_PEER_DIR
#error "QD_PT_PEER_DIR must name the pt peer vector folder"
#endif

namespace qd::oracle {
namespace {

using peer_test::Bytes;
using peer_test::ReadBytes;

const std::string kPeerDir = QD_PT_PEER_DIR;

// ---------------------------------------------------------------------------
// SHA-256, FIPS 180-4 sections 4.1.2, 4.2.2, 5.1.1, 5.3.3, 6.2.

std::uint32_t Rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

std::string Sha256Hex(const Bytes& message) {
  static const std::uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  // Padding (5.1.1): a 1 bit, zeros to 448 mod 512, the bit length in 64 bits.
  Bytes padded = message;
  padded.push_back(0x80);
  while (padded.size() % 64 != 56) padded.push_back(0x00);
  const std::uint64_t bit_length = static_cast<std::uint64_t>(message.size()) * 8;
  for (int i = 7; i >= 0; --i) padded.push_back(static_cast<std::uint8_t>(bit_length >> (8 * i)));
  for (std::size_t block = 0; block < padded.size(); block += 64) {
    std::uint32_t w[64];
    for (int t = 0; t < 16; ++t) {
      w[t] = (static_cast<std::uint32_t>(padded[block + 4 * t]) << 24) |
             (static_cast<std::uint32_t>(padded[block + 4 * t + 1]) << 16) |
             (static_cast<std::uint32_t>(padded[block + 4 * t + 2]) << 8) |
             static_cast<std::uint32_t>(padded[block + 4 * t + 3]);
    }
    for (int t = 16; t < 64; ++t) {
      const std::uint32_t s0 = Rotr(w[t - 15], 7) ^ Rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const std::uint32_t s1 = Rotr(w[t - 2], 17) ^ Rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; ++t) {
      const std::uint32_t big_s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      const std::uint32_t ch = (e & f) ^ (~e & g);
      const std::uint32_t t1 = hh + big_s1 + ch + k[t] + w[t];
      const std::uint32_t big_s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      const std::uint32_t t2 = big_s0 + maj;
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  std::string hex;
  char buffer[9];
  for (const std::uint32_t word : h) {
    std::snprintf(buffer, sizeof buffer, "%08x", word);
    hex += buffer;
  }
  return hex;
}

TEST(PtPeer, Sha256KnownAnswers) {
  // FIPS 180-4 examples (NIST CSRC): "abc" and the empty message.
  EXPECT_EQ(Sha256Hex(Bytes{'a', 'b', 'c'}),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(Bytes{}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(Sha256Hex(Bytes(two_blocks.begin(), two_blocks.end())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

// ---------------------------------------------------------------------------
// The manifest.

struct Case {
  std::string file;
  std::string verdict;
  std::string category;
  std::map<std::string, std::string> sha256;  // tensor -> hex
  // tensor -> (dtype code, shape, stride, offset); stride empty when absent.
  struct Geometry {
    std::string dtype;
    std::vector<std::uint64_t> shape;
    std::vector<std::uint64_t> stride;
    std::int64_t offset = -1;
  };
  std::map<std::string, Geometry> tensors;
};

std::string DtypeCode(std::string_view torch_name) {
  if (torch_name == "torch.float32") return "F32";
  if (torch_name == "torch.float16") return "F16";
  if (torch_name == "torch.bfloat16") return "BF16";
  if (torch_name == "torch.float64") return "F64";
  if (torch_name == "torch.int64") return "I64";
  if (torch_name == "torch.int32") return "I32";
  if (torch_name == "torch.int16") return "I16";
  if (torch_name == "torch.int8") return "I8";
  if (torch_name == "torch.uint8") return "U8";
  if (torch_name == "torch.bool") return "BOOL";
  return "?" + std::string(torch_name);
}

std::vector<std::uint64_t> UintArray(const JsonDocument& doc, std::uint32_t node) {
  std::vector<std::uint64_t> values;
  for (std::uint32_t c = doc.nodes[node].first_child; c != kNoNode; c = doc.nodes[c].next_sibling) {
    std::uint64_t v = 0;
    EXPECT_TRUE(JsonToUint64(doc, c, &v));
    values.push_back(v);
  }
  return values;
}

std::vector<Case> LoadManifest() {
  const Bytes text = ReadBytes(kPeerDir + "/manifest.json");
  JsonDocument doc;
  JsonError error;
  EXPECT_TRUE(ParseStrictJsonObject(text.data(), text.size(), &doc, &error)) << error.what;
  std::vector<Case> cases;
  const std::uint32_t list = doc.FindMember(0, "cases");
  if (list == kNoNode) return cases;
  for (std::uint32_t n = doc.nodes[list].first_child; n != kNoNode; n = doc.nodes[n].next_sibling) {
    Case item;
    item.file = std::string(doc.Text(doc.FindMember(n, "file")));
    item.verdict = std::string(doc.Text(doc.FindMember(n, "verdict")));
    const std::uint32_t rule = doc.FindMember(n, "rule");
    if (rule != kNoNode && doc.nodes[rule].kind == JsonKind::kString) item.category = std::string(doc.Text(rule));
    const std::uint32_t hashes = doc.FindMember(n, "tensor_sha256");
    if (hashes != kNoNode) {
      for (std::uint32_t c = doc.nodes[hashes].first_child; c != kNoNode; c = doc.nodes[c].next_sibling) {
        item.sha256[std::string(doc.Key(c))] = std::string(doc.Text(c));
      }
    }
    const std::uint32_t tensors = doc.FindMember(n, "tensors");
    if (tensors != kNoNode) {
      for (std::uint32_t c = doc.nodes[tensors].first_child; c != kNoNode; c = doc.nodes[c].next_sibling) {
        Case::Geometry g;
        std::uint32_t part = doc.nodes[c].first_child;
        g.dtype = DtypeCode(doc.Text(part));
        part = doc.nodes[part].next_sibling;
        g.shape = UintArray(doc, part);
        part = doc.nodes[part].next_sibling;
        if (part != kNoNode) {
          g.stride = UintArray(doc, part);
          part = doc.nodes[part].next_sibling;
          std::uint64_t offset = 0;
          EXPECT_TRUE(JsonToUint64(doc, part, &offset));
          g.offset = static_cast<std::int64_t>(offset);
        }
        item.tensors[std::string(doc.Key(c))] = g;
      }
    }
    cases.push_back(item);
  }
  return cases;
}

// docs/pt.md section 12: the finding each reject case gets (rule, field,
// byte_offset), and section 9's category of each rule.
// crc_mismatch.pt (corrected upstream) has one data byte flipped, byte 709
// of gptq4_sd/data/0, whose stored data starts at 704: from the end record
// (cd_off 10770), the second central entry (at 10833: local header at 597),
// and that local header (30 fixed bytes, name 15, FB extra 62): 597 + 107.
// Headers all agree, so the refusal is the CRC-32's: PT-008 at the data start.
struct Expected {
  const char* rule;
  const char* category;
  const char* field;
  std::int64_t offset;
};

const std::map<std::string, Expected>& ExpectedRejects() {
  static const std::map<std::string, Expected> expected = {
      {"legacy_format.pt", {"PT-001", "PT-legacy", "format", 0}},
      {"hostile_os_system.pt", {"PT-011", "PT-global", "global", 59}},
      {"hostile_stack_global.pt", {"PT-011", "PT-global", "global", 80}},
      {"hostile_eval.pt", {"PT-011", "PT-global", "global", 51}},
      {"hostile_deep_marks.pt", {"PT-012", "PT-limits", "marks", 304}},
      {"zip_traversal.pt", {"PT-004", "PT-zip", "name", 62}},
      {"crc_mismatch.pt", {"PT-008", "PT-zip", "crc32", 704}},
  };
  return expected;
}

TEST(PtPeer, EveryManifestCase) {
  const std::vector<Case> cases = LoadManifest();
  ASSERT_EQ(cases.size(), 12u);
  int accepted = 0;
  int refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const Bytes bytes = ReadBytes(kPeerDir + "/" + c.file);
    ASSERT_FALSE(bytes.empty());
    std::vector<PtTensorBytes> table;
    std::vector<PtValueEntry> values;
    const qd::Outcome outcome =
        ReadPtFile(qd::ByteView{bytes.data(), bytes.size()}, c.file, &table, &values);
    if (c.verdict == "accept") {
      EXPECT_FALSE(outcome.refused);
      EXPECT_TRUE(outcome.findings.empty());
      for (const qd::Finding& f : outcome.findings) ADD_FAILURE() << f.rule << " " << f.field << " " << f.byte_offset;
      EXPECT_EQ(table.size(), c.sha256.size());
      std::size_t decoded_floats = 0;
      for (const PtTensorBytes& t : table) {
        SCOPED_TRACE(t.name);
        const auto hash = c.sha256.find(t.name);
        ASSERT_NE(hash, c.sha256.end());
        EXPECT_EQ(Sha256Hex(t.bytes), hash->second);
        const auto geometry = c.tensors.find(t.name);
        if (geometry != c.tensors.end()) {
          EXPECT_EQ(t.dtype, geometry->second.dtype);
          EXPECT_EQ(t.shape, geometry->second.shape);
        }
        std::uint64_t numel = 1;
        for (const std::uint64_t s : t.shape) numel *= s;
        std::uint64_t isz = 1;
        if (t.dtype == "F32" || t.dtype == "I32") isz = 4;
        if (t.dtype == "F16" || t.dtype == "BF16" || t.dtype == "I16") isz = 2;
        if (t.dtype == "F64" || t.dtype == "I64") isz = 8;
        EXPECT_EQ(t.bytes.size(), numel * isz);
        if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16" || t.dtype == "F64") ++decoded_floats;
      }
      EXPECT_EQ(outcome.tensors.size(), decoded_floats);
      ++accepted;
    } else {
      ASSERT_EQ(c.verdict, "reject");
      const auto expected = ExpectedRejects().find(c.file);
      ASSERT_NE(expected, ExpectedRejects().end());
      EXPECT_EQ(c.category, expected->second.category);
      EXPECT_TRUE(outcome.refused);
      ASSERT_FALSE(outcome.findings.empty());
      const qd::Finding& f = outcome.findings.back();
      EXPECT_EQ(f.rule, expected->second.rule);
      EXPECT_EQ(f.severity, qd::Severity::kError);
      EXPECT_EQ(f.file, c.file);
      EXPECT_EQ(f.tensor, "");
      EXPECT_EQ(f.field, expected->second.field);
      EXPECT_EQ(f.byte_offset, expected->second.offset);
      EXPECT_EQ(f.row, -1);
      EXPECT_EQ(f.block, -1);
      EXPECT_EQ(f.element, -1);
      EXPECT_EQ(outcome.findings.size(), 1u);
      EXPECT_TRUE(outcome.tensors.empty());
      EXPECT_TRUE(table.empty());
      ++refused;
    }
  }
  EXPECT_EQ(accepted, 5);
  EXPECT_EQ(refused, 7);
  struct stat info;
  EXPECT_NE(stat("/tmp/quantdiff_pwned", &info), 0) << "/tmp/quantdiff_pwned exists";
}

TEST(PtPeer, ViewsAreMaterialised) {
  const Bytes bytes = ReadBytes(kPeerDir + "/views.pt");
  std::vector<PtTensorBytes> table;
  const qd::Outcome outcome = ReadPtFile(qd::ByteView{bytes.data(), bytes.size()}, "views.pt", &table);
  ASSERT_FALSE(outcome.refused);
  std::map<std::string, const PtTensorBytes*> by_name;
  for (const PtTensorBytes& t : table) by_name[t.name] = &t;
  ASSERT_EQ(by_name.size(), 4u);
  const PtTensorBytes& full = *by_name.at("t_full");  // [64, 48], stride (48, 1), offset 0
  const PtTensorBytes& tr = *by_name.at("t_transposed");  // [48, 64], stride (1, 48)
  const PtTensorBytes& slice = *by_name.at("t_slice");  // [7, 35], stride (48, 1), offset 149
  const PtTensorBytes& strided = *by_name.at("t_strided");  // [32, 16], stride (96, 3)
  ASSERT_EQ(full.bytes.size(), 64u * 48 * 4);
  // t_full is the storage itself in order, so element s of the storage is
  // full.bytes[4s .. 4s+4). Each view's element (i, j) is storage element
  // offset + i * stride0 + j * stride1 (docs/pt.md 5.3).
  auto element = [&full](std::uint64_t s) { return Bytes(full.bytes.begin() + 4 * s, full.bytes.begin() + 4 * s + 4); };
  auto at = [](const PtTensorBytes& t, std::uint64_t i) { return Bytes(t.bytes.begin() + 4 * i, t.bytes.begin() + 4 * i + 4); };
  for (std::uint64_t i = 0; i < 48; ++i) {
    for (std::uint64_t j = 0; j < 64; ++j) ASSERT_EQ(at(tr, i * 64 + j), element(i * 1 + j * 48));
  }
  for (std::uint64_t i = 0; i < 7; ++i) {
    for (std::uint64_t j = 0; j < 35; ++j) ASSERT_EQ(at(slice, i * 35 + j), element(149 + i * 48 + j));
  }
  for (std::uint64_t i = 0; i < 32; ++i) {
    for (std::uint64_t j = 0; j < 16; ++j) ASSERT_EQ(at(strided, i * 16 + j), element(i * 96 + j * 3));
  }
}

TEST(PtPeer, BnbLikeMixedValues) {
  const Bytes bytes = ReadBytes(kPeerDir + "/bnb_like_mixed.pt");
  std::vector<PtTensorBytes> table;
  std::vector<PtValueEntry> values;
  const qd::Outcome outcome =
      ReadPtFile(qd::ByteView{bytes.data(), bytes.size()}, "bnb_like_mixed.pt", &table, &values);
  ASSERT_FALSE(outcome.refused);
  std::map<std::string, std::string> by_name;
  for (const PtValueEntry& v : values) by_name[v.name] = v.text;
  EXPECT_EQ(by_name["meta.quant_type"], "'nf4'");
  EXPECT_EQ(by_name["meta.blocksize"], "32");
  EXPECT_EQ(by_name["meta.shape"], "(40, 30)");
  for (const PtValueEntry& v : values) std::printf("  value %s = %s\n", v.name.c_str(), v.text.c_str());
  for (const PtTensorBytes& t : table) std::printf("  tensor %s %s\n", t.name.c_str(), t.dtype.c_str());
}

// docs/pt.md 6.4 and 7.2: w.weight (U8) and w.weight.absmax with no state
// tensor and no W.quant_state list make no bitsandbytes layer, so the file
// is accepted with section 6.3's output (its one floating tensor) and its
// meta values stay plain values.
TEST(PtPeer, BnbLikeMixedHasNoBnbLayer) {
  const Bytes bytes = ReadBytes(kPeerDir + "/bnb_like_mixed.pt");
  PtValueGraph graph;
  const qd::Outcome outcome = ReadPtFile(qd::ByteView{bytes.data(), bytes.size()},
                                         "bnb_like_mixed.pt", nullptr, nullptr, &graph);
  ASSERT_FALSE(outcome.refused);
  EXPECT_TRUE(outcome.findings.empty());
  ASSERT_EQ(outcome.tensors.size(), 1u);
  EXPECT_EQ(outcome.tensors[0].name, "w.weight.absmax");
  ASSERT_EQ(graph.entries.size(), 3u);
  for (const PtValueRoot& entry : graph.entries) {
    EXPECT_NE(graph.nodes[entry.node].kind, PtValueKind::kList) << entry.name;
  }
}

}  // namespace
}  // namespace qd::oracle
