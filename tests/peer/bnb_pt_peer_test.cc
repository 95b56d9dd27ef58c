// bnb_pt_peer_test: the bitsandbytes peer vectors (${QD_PEER_DIR}/bnb),
// moved into torch .pt files, through both readers of the `pt` format
// (docs/pt.md 6.4 and 7). bitsandbytes wrote these tensors; only their
// container changes here, so the expected outputs stay the peer's:
//  * "table": every tensor of the vector copied into a .pt state dict under
//    its own name, dtype, shape and bytes (docs/bnb.md's layouts inside a
//    .pt). Positive 4-bit and int8 cases decode to `dequant_f32` bit for bit;
//    reject cases are refused with the manifest's rule; decoys decode to the
//    expected output, not the decoy's.
//  * "list": each positive 4-bit case (and the tampered-map decoy) with its
//    JSON state replaced by the old QuantState list docs/pt.md 7.3 maps onto
//    it: [absmax, Size(shape), torch.<dtype>, blocksize, None or [offset,
//    [nested_absmax, nested_quant_map, nested_blocksize, False,
//    torch.float32, None, None]], quant_type(, quant_map)], the offset a
//    Python float or a 0-d float32 tensor (alternating by case). The same
//    bits must come out.
// Codec and oracle are both run (harness registry, format `pt`).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/safetensors.h"
#include "harness/registry.h"
#include "tests/peer/peer_file.h"
#include "tests/pt_test_builder.h"

namespace {

namespace fs = std::filesystem;
using qdtest::peer::Case;
using qdtest::peer::CaseName;
using nlohmann::json;
using namespace qd::pt_test;  // NOLINT: the builders are this file's vocabulary

const fs::path kDir = QD_PEER_BNB_DIR;

// The 8-bit blockwise layout lives in __metadata__, which a .pt has not
// (docs/pt.md 6.4): those cases are not movable.
std::vector<Case> LoadCases() {
  return qdtest::peer::LoadCases(kDir / "manifest.json", [](const json& c) {
    return c.value("format", "") != "bnb-8bit-blockwise";
  });
}

// torch's storage class of a safetensors dtype (docs/pt.md 4.3), or "".
std::string StorageClass(qd::codec::Dtype d) {
  using qd::codec::Dtype;
  switch (d) {
    case Dtype::kF64: return "DoubleStorage";
    case Dtype::kF32: return "FloatStorage";
    case Dtype::kF16: return "HalfStorage";
    case Dtype::kBF16: return "BFloat16Storage";
    case Dtype::kI64: return "LongStorage";
    case Dtype::kI32: return "IntStorage";
    case Dtype::kI16: return "ShortStorage";
    case Dtype::kI8: return "CharStorage";
    case Dtype::kU8: return "ByteStorage";
    case Dtype::kBool: return "BoolStorage";
    default: return "";
  }
}

// Writes a state dict: tensors get storages "0", "1", ... in order.
class StateDict {
 public:
  StateDict() { p_.proto().dict().mark(); }
  // A tensor value (also inside a list): pushes the _rebuild_tensor_v2 call.
  void Tensor(const qd::codec::TensorEntry& t, const std::uint8_t* data) {
    const std::string key = std::to_string(storages_.size());
    std::vector<std::int64_t> size(t.shape.begin(), t.shape.end()), stride(size.size());
    std::int64_t step = 1;
    for (std::size_t k = size.size(); k-- > 0;) {
      stride[k] = step;
      step *= size[k];
    }
    p_.tensor(key, StorageClass(t.dtype), static_cast<std::int64_t>(t.element_count), 0, size, stride);
    storages_.push_back({key, Bytes(data, data + (t.end - t.begin))});
  }
  Pk& pickle() { return p_; }
  Zip Finish() {
    p_.op('u').stop();
    return Archive(p_.b, storages_);
  }

 private:
  Pk p_;
  std::vector<Record> storages_;
};

// The outcome of both readers of the `pt` format.
struct Both {
  qd::Outcome codec, oracle;
};
Both ReadBoth(const Zip& z) {
  const qd::harness::FormatEntry* pt = qd::harness::FindFormat("pt");
  return {pt->codec_read(z.View(), "m.pt", {}), pt->oracle_read(z.View(), "m.pt", {})};
}

void ExpectDecodes(const Zip& z, const std::string& w, const std::vector<std::uint64_t>& shape,
                   const std::vector<float>& want, bool allow_bnb106) {
  const Both b = ReadBoth(z);
  for (const auto& [side, o] : {std::pair{"codec", &b.codec}, std::pair{"oracle", &b.oracle}}) {
    SCOPED_TRACE(side);
    ASSERT_FALSE(o->refused) << o->findings.back().rule << " " << o->findings.back().tensor << " "
                             << o->findings.back().field << " " << o->findings.back().message;
    for (const qd::Finding& f : o->findings) {
      EXPECT_TRUE(allow_bnb106 && f.rule == "BNB-106") << f.rule << " " << f.message;
    }
    ASSERT_EQ(o->tensors.size(), 1u);
    EXPECT_EQ(o->tensors[0].name, w);
    EXPECT_EQ(o->tensors[0].shape, shape);
    EXPECT_EQ(qdtest::peer::FirstDifference(o->tensors[0].values, want), "");
  }
}

// Every tensor of the vector, same names, into a .pt.
Zip TableForm(const qdtest::peer::File& f) {
  StateDict sd;
  for (const qd::codec::TensorEntry& t : f.container.tensors) {
    sd.pickle().str(std::string(t.name));
    sd.Tensor(t, f.container.Data(t));
  }
  return sd.Finish();
}

// The 4-bit layer W with its JSON state replaced by the QuantState list.
Zip ListForm(const qdtest::peer::File& f, const std::string& w, bool offset_as_tensor) {
  std::map<std::string, const qd::codec::TensorEntry*> by_name;
  json state;
  for (const qd::codec::TensorEntry& t : f.container.tensors) {
    by_name[std::string(t.name)] = &t;
    if (t.name.rfind(w + ".quant_state.bitsandbytes__", 0) == 0) {
      const std::uint8_t* p = f.container.Data(t);
      state = json::parse(p, p + (t.end - t.begin), nullptr, false);
    }
  }
  StateDict sd;
  Pk& p = sd.pickle();
  auto tensor = [&](const std::string& name) { sd.Tensor(*by_name.at(name), f.container.Data(*by_name.at(name))); };
  p.str(w);
  tensor(w);
  p.str(w + ".quant_state").list().mark();
  tensor(w + ".absmax");
  std::vector<std::int64_t> shape;
  for (const json& d : state["shape"]) shape.push_back(d.get<std::int64_t>());
  p.glob("torch", "Size").ints(shape).op(0x85).reduce();
  p.glob("torch", state["dtype"].get<std::string>());
  p.i8(state["blocksize"].get<std::int64_t>());
  if (state.contains("nested_offset")) {
    p.list().mark();
    if (offset_as_tensor) {
      Bytes one = F32s({static_cast<float>(state["nested_offset"].get<double>())});
      qd::codec::TensorEntry scalar{"", qd::codec::Dtype::kF32, {}, 1, 0, 4};
      sd.Tensor(scalar, one.data());
    } else {
      p.fl(state["nested_offset"].get<double>());
    }
    p.list().mark();
    tensor(w + ".nested_absmax");
    tensor(w + ".nested_quant_map");
    p.i8(state["nested_blocksize"].get<std::int64_t>()).op(0x89);
    p.glob("torch", state["nested_dtype"].get<std::string>()).none().none();
    p.op('e').op('e');
  } else {
    p.none();
  }
  p.str(state["quant_type"].get<std::string>());
  if (by_name.count(w + ".quant_map") != 0) tensor(w + ".quant_map");
  p.op('e');
  return sd.Finish();
}

class BnbPtPeer : public testing::TestWithParam<Case> {};

TEST_P(BnbPtPeer, Case) {
  const json& s = GetParam().spec;
  const auto file = qdtest::peer::LoadFile(kDir / s["file"].get<std::string>());
  ASSERT_TRUE(file->ok);
  const Zip table = TableForm(*file);
  if (s["kind"] == "negative" && s["expected_result"] == "reject") {
    const Both b = ReadBoth(table);
    for (const qd::Outcome* o : {&b.codec, &b.oracle}) {
      ASSERT_TRUE(o->refused);
      EXPECT_EQ(o->findings.back().rule, s["rule"].get<std::string>()) << o->findings.back().message;
    }
    return;
  }
  const auto expected = qdtest::peer::LoadFile(kDir / s["expected_file"].get<std::string>());
  ASSERT_TRUE(expected->ok);
  const std::vector<float> want = expected->Floats("dequant_f32");
  const bool decoy = s["kind"] == "negative";
  std::string w;
  for (const auto& t : file->container.tensors) {
    const std::size_t pos = t.name.find(".quant_state.bitsandbytes__");
    if (pos != std::string::npos) w = t.name.substr(0, pos);
  }
  if (w.empty()) w = s["tensor_prefix"].get<std::string>() + "weight";  // int8
  const std::vector<std::uint64_t> shape =
      (decoy ? s["shape"] : s["dequant_shape"]).get<std::vector<std::uint64_t>>();
  {
    SCOPED_TRACE("table form");
    ExpectDecodes(table, w, shape, want, decoy);
  }
  if (decoy) {
    const auto wrong = qdtest::peer::LoadFile(kDir / s["decoy_file"].get<std::string>());
    const Both b = ReadBoth(table);
    EXPECT_NE(qdtest::peer::FirstDifference(b.codec.tensors.at(0).values, wrong->Floats("dequant_f32")), "");
  }
  if (s.value("format", "bnb-4bit") != "bnb-4bit" && !decoy) return;
  SCOPED_TRACE("list form");
  const bool offset_as_tensor = s.value("seed", 0) % 2 == 1;
  ExpectDecodes(ListForm(*file, w, offset_as_tensor), w, shape, want, decoy);
}

INSTANTIATE_TEST_SUITE_P(Manifest, BnbPtPeer, testing::ValuesIn(LoadCases()), CaseName);

TEST(BnbPtPeerCases, EveryMovableKindIsThere) {
  int positive4 = 0, int8 = 0, reject = 0, decoy = 0, nested_list = 0;
  for (const Case& c : LoadCases()) {
    const json& s = c.spec;
    if (s["kind"] == "positive") {
      (s["format"] == "bnb-4bit" ? positive4 : int8)++;
      nested_list += s["format"] == "bnb-4bit" && s["compress_statistics"].get<bool>();
    } else {
      (s["expected_result"] == "reject" ? reject : decoy)++;
    }
  }
  EXPECT_GT(positive4, 0);
  EXPECT_GT(nested_list, 0);
  EXPECT_GT(int8, 0);
  EXPECT_GT(reject, 0);
  EXPECT_GT(decoy, 0);
}

}  // namespace
