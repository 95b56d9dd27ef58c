// bnb_oracle_peer_test.cc: the oracle against the bitsandbytes peer vectors
// (QD_BNB_PEER_DIR, read in place: manifest.json, TABLES.json and the case
// files), which record what bitsandbytes' own code returns.
//
// For every case of manifest.json:
//   positive          ReadBnbFile accepts, with no finding, and decodes W to
//                     the expected file's dequant_f32 bit for bit (NaN
//                     payloads aside), in the manifest's dequant_shape; for a
//                     4-bit case the reference quantizer gives the packed
//                     bytes from `input` (and, without nested statistics, the
//                     absmax).
//   reject negative   ReadBnbFile refuses with the manifest's rule, naming the
//                     tensor, field and byte offset docs/bnb.md gives
//                     (oracles/bnb_peer_reject_places.h).
//   decoy negative    ReadBnbFile accepts, gives the expected dequant_f32
//                     and not the decoy's.
// The manifest and TABLES.json are read with the oracle's own JSON parser.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/bnb_peer_reject_places.h"
#include "oracles/json.h"
#include "oracles/peer_test_support.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

#ifndef QD_BNB_PEER_DIR
#error "QD_BNB_PEER_DIR must name the peer vector folder"
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
using peer_test::RawTensor;
using peer_test::ReadRawTensor;
using peer_test::ReadBytes;
using peer_test::StringMember;
using peer_test::View;

const std::string kPeerDir = QD_BNB_PEER_DIR;

bool IsNan(float value) { return (Bits(value) & 0x7FFFFFFFu) > 0x7F800000u; }

std::uint32_t ParseHex32(std::string_view hex) {
  std::uint32_t value = 0;
  for (const char c : hex) {
    value <<= 4;
    if (c >= '0' && c <= '9')
      value |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      value |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      value |= static_cast<std::uint32_t>(c - 'A' + 10);
  }
  return value;
}

// ---------------------------------------------------------------------------
// The JSON documents.

const Json& Manifest() {
  static const Json manifest = LoadJson(kPeerDir + "/manifest.json");
  return manifest;
}

const Json& Tables() {
  static const Json tables = LoadJson(kPeerDir + "/TABLES.json");
  return tables;
}

bool TrueMember(const JsonDocument& d, std::uint32_t object, const char* key) {
  const std::uint32_t node = d.FindMember(object, key);
  return node != kNoNode && d.nodes[node].kind == JsonKind::kTrue;
}

std::vector<std::uint64_t> ShapeMember(const JsonDocument& d, std::uint32_t object,
                                       const char* key) {
  std::vector<std::uint64_t> shape;
  const std::uint32_t node = d.FindMember(object, key);
  if (node == kNoNode || d.nodes[node].kind != JsonKind::kArray) return shape;
  for (std::uint32_t item = d.nodes[node].first_child; item != kNoNode;
       item = d.nodes[item].next_sibling) {
    std::uint64_t value = 0;
    JsonToUint64(d, item, &value);
    shape.push_back(value);
  }
  return shape;
}

// One case of manifest.json, the fields this test uses.
struct PeerCase {
  std::string id;
  std::string kind;  // positive / negative
  std::string format;
  std::string file;
  std::string expected_file;
  std::string decoy_file;
  std::string rule;
  std::string expected_result;
  std::string tensor_prefix;
  std::string quant_type;
  std::string dtype;
  std::uint64_t blocksize = 0;
  bool nested = false;  // compress_statistics (4-bit) or nested (blockwise8)
  std::vector<std::uint64_t> dequant_shape;
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
    peer.kind = StringMember(d, c, "kind");
    peer.format = StringMember(d, c, "format");
    peer.file = StringMember(d, c, "file");
    peer.expected_file = StringMember(d, c, "expected_file");
    peer.decoy_file = StringMember(d, c, "decoy_file");
    peer.rule = StringMember(d, c, "rule");
    peer.expected_result = StringMember(d, c, "expected_result");
    peer.tensor_prefix = StringMember(d, c, "tensor_prefix");
    peer.quant_type = StringMember(d, c, "quant_type");
    peer.dtype = StringMember(d, c, "dtype");
    peer.blocksize = IntegerMember(d, c, "blocksize");
    peer.nested = TrueMember(d, c, "compress_statistics") || TrueMember(d, c, "nested");
    peer.dequant_shape = ShapeMember(d, c, "dequant_shape");
    cases.push_back(peer);
  }
  return cases;
}

// ---------------------------------------------------------------------------
// Safetensors files read with the oracle's own container reader.

// The decoded tensor `name` of a plain safetensors file.
bool ReadFloatTensor(const std::string& path, const std::string& name, qd::DecodedTensor* out) {
  const Bytes bytes = ReadBytes(path);
  const qd::Outcome outcome = ReadSafetensors(View(bytes), path);
  if (outcome.refused) return false;
  for (const qd::DecodedTensor& tensor : outcome.tensors) {
    if (tensor.name == name) {
      *out = tensor;
      return true;
    }
  }
  return false;
}

// The index of the first value whose bits differ (NaN equals NaN), or -1.
std::int64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (IsNan(a[i]) && IsNan(b[i])) continue;
    if (Bits(a[i]) != Bits(b[i])) return static_cast<std::int64_t>(i);
  }
  return -1;
}

// ---------------------------------------------------------------------------
// The tests.

TEST(BnbPeer, ManifestAndTablesAreReadByTheOraclesParser) {
  ASSERT_TRUE(Manifest().ok);
  ASSERT_TRUE(Tables().ok);
  const std::vector<PeerCase> cases = LoadCases();
  EXPECT_EQ(cases.size(), 83u);
  int positives = 0;
  int rejects = 0;
  int decoys = 0;
  for (const PeerCase& peer : cases) {
    if (peer.kind == "positive")
      ++positives;
    else if (peer.expected_result == "reject")
      ++rejects;
    else if (!peer.decoy_file.empty())
      ++decoys;
  }
  EXPECT_EQ(positives + rejects + decoys, static_cast<int>(cases.size()));
  EXPECT_GT(positives, 0);
  EXPECT_GT(rejects, 0);
  EXPECT_GT(decoys, 0);
}

// The oracle's tables and bounds are TABLES.json's, bit for bit.
TEST(BnbPeer, TablesAndBoundsMatchTablesJson) {
  ASSERT_TRUE(Tables().ok);
  const JsonDocument& d = Tables().document;
  const std::uint32_t bounds_object = d.FindMember(0, "quantize_bounds_default_backend");
  ASSERT_NE(bounds_object, kNoNode);
  for (const std::string quant_type : {"nf4", "fp4"}) {
    SCOPED_TRACE(quant_type);
    float table[16];
    ASSERT_TRUE(Bnb4bitTable(quant_type, table));
    const std::uint32_t entry = d.FindMember(0, quant_type);
    ASSERT_NE(entry, kNoNode);
    const std::uint32_t values = d.FindMember(entry, "values");
    ASSERT_NE(values, kNoNode);
    ASSERT_EQ(d.nodes[values].child_count, 16u);
    int code = 0;
    for (std::uint32_t v = d.nodes[values].first_child; v != kNoNode;
         v = d.nodes[v].next_sibling, ++code) {
      EXPECT_EQ(IntegerMember(d, v, "index"), static_cast<std::uint64_t>(code));
      EXPECT_EQ(Bits(table[code]), ParseHex32(StringMember(d, v, "hex"))) << "code " << code;
    }
    float bounds[15];
    int sorted_codes[16];
    ASSERT_TRUE(Bnb4bitBounds(quant_type, bounds, sorted_codes));
    const std::uint32_t want_bounds = d.FindMember(bounds_object, (quant_type + "_bounds").c_str());
    ASSERT_NE(want_bounds, kNoNode);
    ASSERT_EQ(d.nodes[want_bounds].child_count, 15u);
    int k = 0;
    for (std::uint32_t v = d.nodes[want_bounds].first_child; v != kNoNode;
         v = d.nodes[v].next_sibling, ++k) {
      EXPECT_EQ(Bits(bounds[k]), ParseHex32(StringMember(d, v, "hex"))) << "bound " << k;
    }
    const std::vector<std::uint64_t> order =
        ShapeMember(d, bounds_object, (quant_type + "_sorted_order").c_str());
    ASSERT_EQ(order.size(), 16u);
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(static_cast<std::uint64_t>(sorted_codes[i]), order[i]) << i;
  }
}

// gtest prints a parameter with this rather than as raw bytes.
void PrintTo(const PeerCase& peer, std::ostream* os) { *os << peer.id; }

class BnbPeerCase : public ::testing::TestWithParam<PeerCase> {};

TEST_P(BnbPeerCase, OracleAgreesWithBitsandbytes) {
  const PeerCase& peer = GetParam();
  const Bytes file = ReadBytes(kPeerDir + "/" + peer.file);
  ASSERT_FALSE(file.empty()) << peer.file;
  const qd::Outcome outcome = ReadBnbFile(View(file), peer.file);
  const std::string w = peer.tensor_prefix + "weight";

  if (peer.kind == "negative" && peer.expected_result == "reject") {
    ASSERT_TRUE(outcome.refused) << Describe(outcome);
    ASSERT_FALSE(outcome.findings.empty());
    const qd::Finding& f = outcome.findings.back();
    const qdtest::peer::BnbRejectPlace place = qdtest::peer::BnbRejectPlaceOf(peer.id);
    EXPECT_EQ(f.rule, peer.rule) << Describe(outcome);
    EXPECT_EQ(f.severity, qd::Severity::kError);
    EXPECT_EQ(f.file, peer.file);
    EXPECT_EQ(f.tensor, place.tensor) << Describe(outcome);
    EXPECT_EQ(f.field, place.field) << Describe(outcome);
    EXPECT_EQ(f.byte_offset, place.byte_offset) << Describe(outcome);
    EXPECT_EQ(f.row, -1);
    EXPECT_EQ(f.block, -1);
    EXPECT_EQ(f.element, -1);
    EXPECT_TRUE(outcome.tensors.empty());
    return;
  }

  // positive, or a decoy negative: accepted with the expected output.
  ASSERT_FALSE(outcome.refused) << Describe(outcome);
  ASSERT_EQ(outcome.tensors.size(), 1u) << "only W is decoded";
  // The decoy cases give no tensor_prefix: their one decoded tensor is W.
  const qd::DecodedTensor* decoded =
      peer.tensor_prefix.empty() ? &outcome.tensors.front() : FindDecoded(outcome, w);
  ASSERT_NE(decoded, nullptr) << "no decoded tensor " << w;

  qd::DecodedTensor expected;
  ASSERT_TRUE(ReadFloatTensor(kPeerDir + "/" + peer.expected_file, "dequant_f32", &expected));
  EXPECT_EQ(decoded->shape, expected.shape);
  const std::int64_t diff = FirstDifference(decoded->values, expected.values);
  EXPECT_EQ(diff, -1) << "first differing element " << diff << ": oracle "
                      << (diff >= 0 && diff < static_cast<std::int64_t>(decoded->values.size())
                              ? decoded->values[diff]
                              : 0.0f)
                      << ", bitsandbytes "
                      << (diff >= 0 && diff < static_cast<std::int64_t>(expected.values.size())
                              ? expected.values[diff]
                              : 0.0f);

  if (peer.kind == "positive") {
    EXPECT_EQ(decoded->shape, peer.dequant_shape);
    EXPECT_TRUE(outcome.findings.empty()) << Describe(outcome);
  } else {
    // A decoy: the reader must not reproduce the rule-breaking output.
    qd::DecodedTensor decoy;
    ASSERT_TRUE(ReadFloatTensor(kPeerDir + "/" + peer.decoy_file, "dequant_f32", &decoy));
    EXPECT_NE(FirstDifference(decoded->values, decoy.values), -1) << "the output equals the decoy";
    // The tampered quant_map is reported as a warning, and ignored.
    bool warned = false;
    for (const qd::Finding& f : outcome.findings) warned = warned || f.rule == "BNB-106";
    EXPECT_EQ(warned, peer.id == "neg_bnb003_tampered_quant_map") << Describe(outcome);
  }

  // The reference quantizer reproduces bnb's packed bytes (and, without
  // nested statistics, its absmax) from the input.
  if (peer.kind == "positive" && peer.format == "bnb-4bit") {
    qd::DecodedTensor input;
    ASSERT_TRUE(ReadFloatTensor(kPeerDir + "/" + peer.expected_file, "input", &input));
    std::vector<std::uint8_t> packed;
    std::vector<float> absmax;
    qd::Finding error;
    ASSERT_TRUE(QuantizeBnb4bit(peer.quant_type, static_cast<int>(peer.blocksize), peer.dtype,
                                input.values.data(), input.values.size(), &packed, &absmax, &error))
        << error.rule << " " << error.message;
    RawTensor stored_tensor;
    ASSERT_TRUE(ReadRawTensor(file, w, &stored_tensor));
    const Bytes& stored = stored_tensor.bytes;
    ASSERT_EQ(packed.size(), stored.size());
    std::int64_t first = -1;
    for (std::size_t j = 0; j < packed.size() && first < 0; ++j) {
      if (packed[j] != stored[j]) first = static_cast<std::int64_t>(j);
    }
    EXPECT_EQ(first, -1) << "packed byte " << first << ": oracle "
                         << int(packed[first < 0 ? 0 : first]) << ", bitsandbytes "
                         << int(stored[first < 0 ? 0 : first]);
    if (!peer.nested) {
      RawTensor stored_absmax_tensor;
      ASSERT_TRUE(ReadRawTensor(file, w + ".absmax", &stored_absmax_tensor));
      const Bytes& stored_absmax = stored_absmax_tensor.bytes;
      ASSERT_EQ(stored_absmax.size(), 4 * absmax.size());
      for (std::size_t b = 0; b < absmax.size(); ++b) {
        std::uint32_t want = 0;
        for (int k = 3; k >= 0; --k) want = (want << 8) | stored_absmax[4 * b + k];
        EXPECT_EQ(Bits(absmax[b]), want) << "absmax " << b;
      }
    }
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

INSTANTIATE_TEST_SUITE_P(Manifest, BnbPeerCase, ::testing::ValuesIn(LoadCases()), CaseName);

}  // namespace
}  // namespace qd::oracle
