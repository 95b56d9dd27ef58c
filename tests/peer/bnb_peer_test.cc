// bnb_peer_test: the bnb codec against vectors bitsandbytes' own code made
// (${QD_PEER_DIR}/bnb: README.md, TABLES.json, manifest.json), one test per
// manifest case:
//  * positive: the codec accepts the file with no finding, and the decoded W
//    equals `dequant_f32` bit for bit with `dequant`'s shape, for every
//    kernel; the encoder, run on `input`, reproduces the stored packed bytes /
//    codes, absmax and, when nested, the absmax codes, nested_absmax,
//    nested_quant_map and nested_offset; FP4 outputs differ from
//    `dequant_fp4_code8_negzero` exactly where code 8 occurs;
//  * reject: the codec refuses the file with the manifest's rule, naming the
//    tensor, field and byte offset docs/bnb.md gives (oracles/bnb_peer_reject_places.h);
//  * decoy: the codec accepts, equals the expected output and differs from
//    the rule-breaking decoder's.
// Plus the tables: NF4/FP4, their midpoints and sort orders, and
// CreateDynamicMap against the recorded dynamic map (ulp differences listed).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/float16.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "oracles/bnb_peer_reject_places.h"
#include "tests/peer/peer_file.h"

namespace {

namespace fs = std::filesystem;
using qdtest::peer::Case;
using qdtest::peer::CaseName;
using nlohmann::json;
using qd::codec::Bnb4bitType;

const fs::path kDir = QD_PEER_BNB_DIR;

using qdtest::peer::File;
using qdtest::peer::FirstDifference;
using qdtest::peer::ReadBytes;

// A file of the peer folder.
std::unique_ptr<qdtest::peer::File> Load(const std::string& name) {
  return qdtest::peer::LoadFile(kDir / name);
}

std::vector<std::uint32_t> Bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<std::uint32_t>(v[i]);
  return b;
}

json Tables() {
  std::ifstream in(kDir / "TABLES.json");
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<float> TableValues(const json& values) {
  std::vector<float> out;
  for (const json& v : values) {
    out.push_back(std::bit_cast<float>(
        static_cast<std::uint32_t>(std::stoul(v["hex"].get<std::string>(), nullptr, 16))));
  }
  return out;
}

std::vector<Case> LoadCases() { return qdtest::peer::LoadCases(kDir / "manifest.json"); }

std::vector<qd::codec::Kernel> Kernels() { return qd::codec::AvailableKernels(); }

// Decodes with every kernel; the outcome must accept and hold W as expected.
void ExpectDecodes(const File& file, const std::string& file_name, const std::string& weight,
                   const std::vector<std::uint64_t>& shape, const std::vector<float>& want,
                   bool allow_warnings) {
  for (qd::codec::Kernel k : Kernels()) {
    SCOPED_TRACE(std::string("kernel ") + std::string(qd::codec::KernelName(k)));
    const qd::Outcome o = qd::codec::DecodeBnbFile(file.View(), file_name, k);
    ASSERT_FALSE(o.refused) << (o.findings.empty() ? "" : o.findings.back().rule + " " +
                                                             o.findings.back().message);
    if (!allow_warnings) {
      EXPECT_TRUE(o.findings.empty()) << o.findings.front().rule;
    }
    ASSERT_EQ(o.tensors.size(), 1u);
    EXPECT_EQ(o.tensors[0].name, weight);
    EXPECT_EQ(o.tensors[0].shape, shape);
    EXPECT_EQ(FirstDifference(o.tensors[0].values, want), "");
  }
}

std::vector<std::uint64_t> ShapeOf(const json& j) { return j.get<std::vector<std::uint64_t>>(); }

// The state JSON of a 4-bit file (the tensor named ...quant_state...).
json StateJson(const File& f) {
  for (const auto& t : f.container.tensors) {
    if (t.name.find(".quant_state.") != std::string::npos) {
      const std::uint8_t* p = f.container.Data(t);
      return json::parse(p, p + (t.end - t.begin), nullptr, false);
    }
  }
  return json();
}

void CheckPositive4bit(const Case& c) {
  const json& s = c.spec;
  const auto file = Load(s["file"]);
  const auto expected = Load(s["expected_file"]);
  ASSERT_TRUE(file->ok && expected->ok);
  const std::string w = s["tensor_prefix"].get<std::string>() + "weight";
  const std::vector<float> want = expected->Floats("dequant_f32");
  EXPECT_EQ(FirstDifference(expected->Floats("dequant"), want), "") << "dequant vs dequant_f32";
  ExpectDecodes(*file, s["file"], w, ShapeOf(s["dequant_shape"]), want, false);

  // Encoder: input -> the stored bytes.
  const Bnb4bitType type = s["quant_type"] == "nf4" ? Bnb4bitType::kNf4 : Bnb4bitType::kFp4;
  const std::vector<float> input = expected->Floats("input");
  const bool nested = s["compress_statistics"].get<bool>();
  const json state = StateJson(*file);
  ASSERT_TRUE(state.is_object());
  const std::vector<float> stored_nested_map = file->Floats(w + ".nested_quant_map");
  qd::codec::Bnb4bitQuantized q;
  std::string error;
  ASSERT_TRUE(qd::codec::QuantizeBnb4bit(
      input.data(), input.size(), type, s["blocksize"].get<std::uint64_t>(), nested, &q, &error,
      nested ? stored_nested_map.data() : nullptr,
      nested ? state["nested_blocksize"].get<std::uint64_t>() : 256))
      << error;
  EXPECT_EQ(q.packed, file->Raw(w)) << "packed bytes";
  if (!nested) {
    EXPECT_EQ(FirstDifference(q.absmax, file->Floats(w + ".absmax")), "") << "absmax";
  } else {
    EXPECT_EQ(q.absmax_codes, file->Raw(w + ".absmax")) << "nested absmax codes";
    EXPECT_EQ(FirstDifference(q.nested_absmax, file->Floats(w + ".nested_absmax")), "")
        << "nested_absmax";
    EXPECT_EQ(static_cast<double>(q.nested_offset), state["nested_offset"].get<double>())
        << "nested_offset";
    EXPECT_EQ(q.nested_blocksize, state["nested_blocksize"].get<std::uint64_t>());
    EXPECT_EQ(Bits(q.nested_quant_map), Bits(stored_nested_map));
    // The stored map is bnb's recorded dynamic map.
    EXPECT_EQ(Bits(stored_nested_map), Bits(TableValues(Tables()["dynamic_map_signed_8bit"]["values"])));
    // Our codes and statistics give bnb's effective block scales.
    std::vector<float> eff(q.absmax_codes.size());
    qd::codec::BnbNestedAbsmax(q.absmax_codes.data(), eff.size(), q.nested_quant_map.data(),
                               q.nested_absmax.data(), q.nested_blocksize, q.nested_offset,
                               eff.data());
    EXPECT_EQ(FirstDifference(eff, expected->Floats("absmax_f32")), "") << "absmax_f32";
  }

  // FP4 code 8: the -0.0 variant differs exactly at code 8.
  if (s.contains("fp4_code8_negzero_differs")) {
    const std::vector<float> negzero = expected->Floats("dequant_fp4_code8_negzero");
    const std::vector<std::uint8_t> packed = file->Raw(w);
    ASSERT_EQ(negzero.size(), want.size());
    std::size_t code8 = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const unsigned code = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 0x0f;
      const bool differs =
          std::bit_cast<std::uint32_t>(want[i]) != std::bit_cast<std::uint32_t>(negzero[i]);
      code8 += code == 8;
      ASSERT_EQ(differs, code == 8) << "element " << i;
    }
    EXPECT_EQ(code8 > 0, s["fp4_code8_negzero_differs"].get<bool>());
    EXPECT_EQ(code8, s["stats"]["fp4_code8_count"].get<std::size_t>());
  }
}

void CheckPositiveBlockwise8(const Case& c) {
  const json& s = c.spec;
  const auto file = Load(s["file"]);
  const auto expected = Load(s["expected_file"]);
  ASSERT_TRUE(file->ok && expected->ok);
  const std::string w = s["tensor_prefix"].get<std::string>() + "weight";
  const std::vector<float> want = expected->Floats("dequant_f32");
  ExpectDecodes(*file, s["file"], w, ShapeOf(s["dequant_shape"]), want, false);

  const json state = json::parse(*file->container.Metadata("bnb_blockwise8_quant_state"));
  const std::vector<float> input = expected->Floats("input");
  const std::vector<float> map = file->Floats(w + ".quant_map");
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  std::string error;
  ASSERT_TRUE(qd::codec::QuantizeBlockwise8(input.data(), input.size(), map.data(),
                                            state["blocksize"].get<std::uint64_t>(), &codes,
                                            &absmax, &error))
      << error;
  EXPECT_EQ(codes, file->Raw(w)) << "codes";
  if (!s["nested"].get<bool>()) {
    EXPECT_EQ(FirstDifference(absmax, file->Floats(w + ".absmax")), "") << "absmax";
    return;
  }
  // quantize_blockwise(nested=True): absmax - mean(absmax), 8-bit again.
  const float offset = qd::codec::TorchMeanF32(absmax.data(), absmax.size());
  EXPECT_EQ(static_cast<double>(offset), state["nested_offset"].get<double>());
  std::vector<float> centered(absmax.size());
  for (std::size_t b = 0; b < absmax.size(); ++b) centered[b] = absmax[b] - offset;
  const std::vector<float> nested_map = file->Floats(w + ".nested_quant_map");
  std::vector<std::uint8_t> nested_codes;
  std::vector<float> nested_absmax;
  ASSERT_TRUE(qd::codec::QuantizeBlockwise8(centered.data(), centered.size(), nested_map.data(),
                                            state["nested_blocksize"].get<std::uint64_t>(),
                                            &nested_codes, &nested_absmax, &error));
  EXPECT_EQ(nested_codes, file->Raw(w + ".absmax"));
  EXPECT_EQ(FirstDifference(nested_absmax, file->Floats(w + ".nested_absmax")), "");
}

void CheckPositiveInt8(const Case& c) {
  const json& s = c.spec;
  const auto file = Load(s["file"]);
  const auto expected = Load(s["expected_file"]);
  ASSERT_TRUE(file->ok && expected->ok);
  const std::string prefix = s["tensor_prefix"].get<std::string>();
  const std::vector<float> want = expected->Floats("dequant_f32");
  ExpectDecodes(*file, s["file"], prefix + "weight", ShapeOf(s["dequant_shape"]), want, false);

  const std::vector<std::uint64_t> shape = ShapeOf(s["shape"]);
  const std::vector<float> input = expected->Floats("input");
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  std::string error;
  ASSERT_TRUE(qd::codec::QuantizeBnbInt8Rows(input.data(), shape[0], shape[1], &cb, &scb, &error))
      << error;
  const std::vector<std::uint8_t> stored = file->Raw(prefix + "weight");
  ASSERT_EQ(stored.size(), cb.size());
  EXPECT_EQ(std::memcmp(stored.data(), cb.data(), cb.size()), 0) << "CB";
  EXPECT_EQ(FirstDifference(scb, file->Floats(prefix + "SCB")), "") << "SCB";
}

void CheckReject(const Case& c) {
  const json& s = c.spec;
  const auto file = Load(s["file"]);
  ASSERT_TRUE(file->ok) << "the container itself is refused";
  const qdtest::peer::BnbRejectPlace place = qdtest::peer::BnbRejectPlaceOf(c.id);
  for (qd::codec::Kernel k : Kernels()) {
    SCOPED_TRACE(std::string("kernel ") + std::string(qd::codec::KernelName(k)));
    const qd::Outcome o = qd::codec::DecodeBnbFile(file->View(), s["file"], k);
    ASSERT_TRUE(o.refused);
    ASSERT_FALSE(o.findings.empty());
    const qd::Finding& f = o.findings.back();
    EXPECT_EQ(f.rule, s["rule"].get<std::string>()) << f.message;
    EXPECT_EQ(f.severity, qd::Severity::kError);
    EXPECT_EQ(f.file, s["file"].get<std::string>());
    EXPECT_EQ(f.tensor, place.tensor) << f.message;
    EXPECT_EQ(f.field, place.field) << f.message;
    EXPECT_EQ(f.byte_offset, place.byte_offset) << f.message;
    EXPECT_EQ(f.row, -1);
    EXPECT_EQ(f.block, -1);
    EXPECT_EQ(f.element, -1);
    EXPECT_TRUE(o.tensors.empty());
  }
}

void CheckDecoy(const Case& c) {
  const json& s = c.spec;
  const auto file = Load(s["file"]);
  const auto expected = Load(s["expected_file"]);
  const auto decoy = Load(s["decoy_file"]);
  ASSERT_TRUE(file->ok && expected->ok && decoy->ok);
  const std::vector<float> want = expected->Floats("dequant_f32");
  const std::vector<float> wrong = decoy->Floats("dequant_f32");
  ASSERT_NE(FirstDifference(want, wrong), "") << "the decoy equals the expected output";
  // The weight is the packed tensor the quant_state names.
  std::string w;
  for (const auto& t : file->container.tensors) {
    const std::size_t pos = t.name.find(".quant_state.bitsandbytes__");
    if (pos != std::string::npos) w = t.name.substr(0, pos);
  }
  ASSERT_FALSE(w.empty());
  for (qd::codec::Kernel k : Kernels()) {
    SCOPED_TRACE(std::string("kernel ") + std::string(qd::codec::KernelName(k)));
    const qd::Outcome o = qd::codec::DecodeBnbFile(file->View(), s["file"], k);
    ASSERT_FALSE(o.refused) << o.findings.back().rule << " " << o.findings.back().message;
    ASSERT_EQ(o.tensors.size(), 1u);
    EXPECT_EQ(o.tensors[0].name, w);
    EXPECT_EQ(o.tensors[0].shape, ShapeOf(s["shape"]));
    EXPECT_EQ(FirstDifference(o.tensors[0].values, want), "");
    EXPECT_NE(FirstDifference(o.tensors[0].values, wrong), "");
    for (const qd::Finding& f : o.findings) {  // only the stored-map warning may appear
      EXPECT_EQ(f.rule, "BNB-106");
      EXPECT_EQ(s["id"], "neg_bnb003_tampered_quant_map");
    }
  }
}

class BnbPeer : public testing::TestWithParam<Case> {};

TEST_P(BnbPeer, Case) {
  const json& s = GetParam().spec;
  const std::string kind = s["kind"];
  const std::string format = s["format"];
  if (kind == "positive") {
    if (format == "bnb-4bit") return CheckPositive4bit(GetParam());
    if (format == "bnb-8bit-blockwise") return CheckPositiveBlockwise8(GetParam());
    if (format.rfind("bnb-int8-rowwise", 0) == 0) return CheckPositiveInt8(GetParam());
    FAIL() << "unknown format " << format;
  }
  ASSERT_EQ(kind, "negative");
  if (s["expected_result"] == "reject") return CheckReject(GetParam());
  ASSERT_TRUE(s.contains("decoy_file")) << s["expected_result"];
  CheckDecoy(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Manifest, BnbPeer, testing::ValuesIn(LoadCases()), CaseName);

TEST(BnbPeerTables, ManifestHasEveryKind) {
  const std::vector<Case> cases = LoadCases();
  EXPECT_EQ(cases.size(), 83u);
}

TEST(BnbPeerTables, FourBitTablesMatch) {
  const json t = Tables();
  ASSERT_TRUE(t.is_object()) << (kDir / "TABLES.json") << " is missing or malformed";
  EXPECT_EQ(Bits(TableValues(t["nf4"]["values"])),
            Bits({qd::codec::Bnb4bitTable(Bnb4bitType::kNf4).begin(),
                  qd::codec::Bnb4bitTable(Bnb4bitType::kNf4).end()}));
  EXPECT_EQ(Bits(TableValues(t["fp4"]["values"])),
            Bits({qd::codec::Bnb4bitTable(Bnb4bitType::kFp4).begin(),
                  qd::codec::Bnb4bitTable(Bnb4bitType::kFp4).end()}));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(qd::codec::Bnb4bitTable(Bnb4bitType::kFp4)[8]), 0u)
      << "FP4 code 8 is +0.0";
  EXPECT_EQ(t["constants"]["int8_dequant_scale"]["hex"], "3c010204");
}

// The encoder's midpoints are the recorded bounds: quantizing each bound and
// the next float up must land in neighbouring codes.
TEST(BnbPeerTables, QuantizeBoundsMatch) {
  const json q = Tables()["quantize_bounds_default_backend"];
  for (const char* name : {"nf4", "fp4"}) {
    SCOPED_TRACE(name);
    const Bnb4bitType type = std::string(name) == "nf4" ? Bnb4bitType::kNf4 : Bnb4bitType::kFp4;
    const std::vector<float> bounds = TableValues(q[std::string(name) + "_bounds"]);
    const std::vector<int> order = q[std::string(name) + "_sorted_order"].get<std::vector<int>>();
    ASSERT_EQ(bounds.size(), 15u);
    // One full block of 64 holding 1.0 (so the scale is exactly 1), each
    // bound and its successor: a value on a bound takes the lower code.
    std::vector<float> x(64, 0.0f);
    x[0] = 1.0f;
    for (std::size_t k = 0; k < bounds.size(); ++k) {
      x[1 + 2 * k] = bounds[k];
      x[2 + 2 * k] = std::nextafter(bounds[k], 2.0f);
    }
    qd::codec::Bnb4bitQuantized out;
    std::string error;
    ASSERT_TRUE(qd::codec::QuantizeBnb4bit(x.data(), x.size(), type, 64, false, &out, &error));
    auto code = [&](std::size_t i) {
      return i % 2 == 0 ? out.packed[i / 2] >> 4 : out.packed[i / 2] & 0x0f;
    };
    for (std::size_t k = 0; k < bounds.size(); ++k) {
      EXPECT_EQ(code(1 + 2 * k), order[k]) << "bound " << k;
      EXPECT_EQ(code(2 + 2 * k), order[k + 1]) << "above bound " << k;
    }
  }
}

// create_dynamic_map from its definition versus the map bnb recorded. The
// README warns the recorded values can move by an ulp across torch builds;
// the differences are printed and bounded, and decoders use the stored map.
TEST(BnbPeerTables, DynamicMapFromDefinition) {
  const std::vector<float> recorded = TableValues(Tables()["dynamic_map_signed_8bit"]["values"]);
  const std::vector<float> ours = qd::codec::CreateDynamicMap(true, 7, 8);
  ASSERT_EQ(recorded.size(), 256u);
  ASSERT_EQ(ours.size(), 256u);
  int differing = 0, max_ulps = 0;
  std::ostringstream list;
  for (int i = 0; i < 256; ++i) {
    const auto a = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(ours[i]));
    const auto b = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(recorded[i]));
    if (a == b) continue;
    ++differing;
    const int ulps = static_cast<int>(std::llabs(a - b));
    max_ulps = std::max(max_ulps, ulps);
    list << " [" << i << "] ours " << std::hex << a << " bnb " << b << std::dec << " ("
         << (a > b ? "+" : "-") << ulps << " ulp)";
    EXPECT_EQ(std::signbit(ours[i]), std::signbit(recorded[i])) << i;
  }
  std::printf("CreateDynamicMap vs TABLES.json: %d of 256 entries differ, at most %d ulp:%s\n",
              differing, max_ulps, list.str().c_str());
  EXPECT_LE(max_ulps, 2);
  EXPECT_EQ(ours[127], 0.0f);
  EXPECT_EQ(ours[255], 1.0f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(ours[0]), std::bit_cast<std::uint32_t>(recorded[0]));
}

}  // namespace
