// pt_bnb_properties.cc: the public .pt state-dict writer (generators.h,
// PtWriteStateDict) and bitsandbytes layers in .pt files (docs/pt.md 6.4, 7),
// through the registry's "pt" and "bnb" readers, codec and oracle.
//
//  * Writer: a random state dict of every value kind (None, bool, int,
//    binary64, str, tuple, list, torch.Size, dtype and other torch tokens,
//    nested dicts, tensors at the root and inside lists, every dtype and
//    layout, both byte orders, protocols 2..5) is accepted cleanly by both
//    pt readers; their tensor tables are the flattened root tensors in order
//    (docs/pt.md 6.1) with the given C-order bytes; the oracle's value table
//    renders every other entry as oracles/pt.h documents; the codec's value
//    nodes have the same structure, tokens, numbers and tensors.
//  * One 4-bit layer written as the bitsandbytes generator's HF safetensors
//    file, as a .pt list layout and as .pt HF / GPT-QModel tensors decodes to
//    the same tensor, bit for bit, through the codec and oracle of each
//    format; the expected tensor is the bnb oracle's reading of the
//    safetensors file (bnb_properties and the peer vectors test that reading).
//  * A non-contiguous W (and other tensors), or a big-endian file, decodes
//    like the contiguous little-endian file.
//  * Every BNB rule pt lists is reached by PtViolation from codec_read,
//    codec_check and oracle_read, over fixed seeds that hit every sub-check
//    of docs/pt.md 7.4 the generator has, with the field and tensor 7.4 gives.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codecs/pt.h"
#include "generators/generators.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/pt.h"
#include "property_tests/gen/half.h"
#include "property_tests/gen/rc_gen.h"

namespace {

using qd::gen::PtObject;
using qd::gen::PtTensorData;
using Kind = PtObject::Kind;

constexpr char kFile[] = "pt-bnb-property.pt";

std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) s += " | " + qd::harness::Describe(f);
  return s;
}

const qd::harness::FormatEntry& Format(const char* name) { return *qd::harness::FindFormat(name); }

qd::Outcome Read(const qd::harness::FormatEntry& f, bool oracle, const std::vector<std::uint8_t>& file) {
  const qd::ByteView view{file.data(), file.size()};
  return oracle ? f.oracle_read(view, kFile, {}) : f.codec_read(view, kFile, {});
}

// ---- the writer ------------------------------------------------------------------------

const char* const kCodes[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
const char* const kDtypeTokens[] = {"float64", "float32", "float16", "bfloat16", "int64",
                                    "int32",   "int16",   "int8",    "uint8",    "bool"};

PtTensorData RandomTensor() {
  PtTensorData t;
  t.dtype = *rc::gen::elementOf(std::vector<std::string>(std::begin(kCodes), std::end(kCodes)));
  const int rank = *rc::gen::inRange(0, 4);
  std::uint64_t numel = 1;
  for (int k = 0; k < rank; ++k) {
    t.shape.push_back(*rc::gen::inRange<std::uint64_t>(0, 5));
    numel *= t.shape.back();
  }
  t.bytes = *rc::gen::container<std::vector<std::uint8_t>>(numel * qd::gen::PtItemSize(t.dtype),
                                                            rc::gen::arbitrary<std::uint8_t>());
  t.layout = static_cast<PtTensorData::Layout>(*rc::gen::inRange(0, 4));
  return t;
}

PtObject RandomValue(int depth) {
  switch (*rc::gen::inRange(0, depth > 2 ? 9 : 13)) {
    case 0: return PtObject::None();
    case 1: return PtObject::Bool(*rc::gen::arbitrary<bool>());
    case 2: return PtObject::Int(*rc::gen::element<std::int64_t>(0, 1, -1, 255, 256, 65535, 65536, -129, INT32_MIN,
                                                                 INT32_MAX, std::int64_t{1} << 40, INT64_MAX, INT64_MIN));
    case 3: return PtObject::Float(*rc::gen::element(0.5, -0.0, 1e-300, 3.25, 1e300, 0.1, 2.0, -INFINITY));
    case 4: return PtObject::Str(*rc::gen::element<std::string>("nf4", "", "it's", "a\\b", "\xc3\xa9t\xc3\xa9", "x y"));
    case 5: return PtObject::Token(*rc::gen::elementOf(std::vector<std::string>(std::begin(kDtypeTokens), std::end(kDtypeTokens))));
    case 6: return PtObject::Token(*rc::gen::element<std::string>("FloatStorage", "ByteStorage", "Size"));
    case 7: {
      std::vector<std::int64_t> dims = *rc::gen::container<std::vector<std::int64_t>>(
          static_cast<std::size_t>(*rc::gen::inRange(0, 4)), rc::gen::inRange<std::int64_t>(0, 5000));
      return PtObject::Size(dims);
    }
    case 8: return PtObject::Tensor(RandomTensor());
    default: {
      std::vector<PtObject> items;
      for (int k = *rc::gen::inRange(0, 4); k > 0; --k) items.push_back(RandomValue(depth + 1));
      const int container = *rc::gen::inRange(0, 3);
      if (container == 0) return PtObject::Tuple(std::move(items));
      if (container == 1) return PtObject::List(std::move(items));
      std::vector<std::pair<std::string, PtObject>> entries;
      for (std::size_t k = 0; k < items.size(); ++k) entries.emplace_back("k" + std::to_string(k), std::move(items[k]));
      return PtObject::Dict(std::move(entries), *rc::gen::arbitrary<bool>());
    }
  }
}

// The value rendering oracles/pt.h documents for PtValueEntry::text.
std::string Render(const PtObject& o) {
  switch (o.kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return o.boolean ? "True" : "False";
    case Kind::kInt: return std::to_string(o.integer);
    case Kind::kFloat: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", o.real);
      return buf;
    }
    case Kind::kStr: {
      std::string s = "'";
      for (char c : o.text) {
        if (c == '\\' || c == '\'') s += '\\';
        s += c;
      }
      return s + "'";
    }
    case Kind::kToken: {
      for (const char* d : kDtypeTokens) {
        if (o.text == d) return o.text;
      }
      return "torch." + o.text;
    }
    case Kind::kTensor: {
      std::string s = "tensor(" + o.tensor.dtype + ", [";
      for (std::size_t k = 0; k < o.tensor.shape.size(); ++k) s += (k ? ", " : "") + std::to_string(o.tensor.shape[k]);
      return s + "])";
    }
    case Kind::kDict: {
      std::string s = "{";
      for (std::size_t k = 0; k < o.entries.size(); ++k) {
        s += (k ? ", '" : "'") + o.entries[k].first + "': " + Render(o.entries[k].second);
      }
      s += "}";
      return o.boolean ? "OrderedDict(" + s + ")" : s;
    }
    default: {
      std::string s;
      for (std::size_t k = 0; k < o.items.size(); ++k) s += (k ? ", " : "") + Render(o.items[k]);
      if (o.kind == Kind::kList) return "[" + s + "]";
      if (o.kind == Kind::kSize) return "torch.Size([" + s + "])";
      return "(" + s + (o.items.size() == 1 ? ",)" : ")");
    }
  }
}

// docs/pt.md 6.1: root tensors (through dicts) in the tensor table, every
// other leaf in the value table, both in flattening order.
void Flatten(const std::vector<std::pair<std::string, PtObject>>& dict, const std::string& prefix,
             std::vector<std::pair<std::string, const PtObject*>>* tensors,
             std::vector<std::pair<std::string, const PtObject*>>* values) {
  for (const auto& [k, v] : dict) {
    if (v.kind == Kind::kDict) {
      Flatten(v.entries, prefix + k + ".", tensors, values);
    } else {
      (v.kind == Kind::kTensor ? tensors : values)->emplace_back(prefix + k, &v);
    }
  }
}

// The codec's node for a value against the object it was written from.
std::string NodeDiffers(const qd::codec::PtResult& r, std::uint32_t index, const PtObject& o) {
  const qd::codec::PtNode& n = r.Node(index);
  using PK = qd::codec::PtKind;
  const std::string where = Render(o);
  switch (o.kind) {
    case Kind::kNone: return n.kind == PK::kNone ? "" : where;
    case Kind::kBool: return n.kind == PK::kBool && n.boolean == o.boolean ? "" : where;
    case Kind::kInt: return n.kind == PK::kInt && n.integer == o.integer ? "" : where;
    case Kind::kFloat:
      return n.kind == PK::kFloat && std::memcmp(&n.real, &o.real, 8) == 0 ? "" : where;
    case Kind::kStr: return n.kind == PK::kStr && n.text == o.text ? "" : where;
    case Kind::kToken: {
      const bool dtype = Render(o) == o.text;
      const auto want = dtype ? qd::codec::PtTokenKind::kDtype
                        : o.text == "Size" ? qd::codec::PtTokenKind::kCallable
                                           : qd::codec::PtTokenKind::kStorageClass;
      return n.kind == PK::kToken && n.token == want && n.text == o.text ? "" : where;
    }
    case Kind::kTensor: {
      if (n.kind != PK::kTensor) return where;
      const qd::codec::PtTensor& t = r.all_tensors[n.tensor];
      const bool same = std::string(qd::codec::InfoOf(t.dtype).name) == o.tensor.dtype && t.shape == o.tensor.shape &&
                        qd::codec::PtTensorBytes(t) == o.tensor.bytes;
      return same ? "" : where;
    }
    case Kind::kDict: {
      if (n.kind != PK::kDict || n.ordered != o.boolean || n.items.size() != 2 * o.entries.size()) return where;
      for (std::size_t k = 0; k < o.entries.size(); ++k) {
        const qd::codec::PtNode& key = r.Node(n.items[2 * k]);
        if (key.kind != PK::kStr || key.text != o.entries[k].first) return where;
        const std::string inner = NodeDiffers(r, n.items[2 * k + 1], o.entries[k].second);
        if (!inner.empty()) return inner;
      }
      return "";
    }
    default: {
      const PK want = o.kind == Kind::kList ? PK::kList : o.kind == Kind::kTuple ? PK::kTuple : PK::kSize;
      if (n.kind != want || n.items.size() != o.items.size()) return where;
      for (std::size_t k = 0; k < o.items.size(); ++k) {
        const std::string inner = NodeDiffers(r, n.items[k], o.items[k]);
        if (!inner.empty()) return inner;
      }
      return "";
    }
  }
}

}  // namespace

RC_GTEST_PROP(PtBnbProperties, WriterRoundTripsEveryValueKindThroughBothReaders, ()) {
  qd::gen::PtStateDict root;
  const int items = *rc::gen::inRange(1, 7);
  for (int i = 0; i < items; ++i) {
    const std::string name = "v" + std::to_string(i);
    if (*rc::gen::inRange(0, 3) == 0) {
      root.emplace_back(name, PtObject::Tensor(RandomTensor()));
    } else {
      // A dotted name nested into dicts (PtPut), or a value at the root.
      qd::gen::PtPut(&root, name + ".a" + std::to_string(i) + ".b", RandomValue(0), *rc::gen::inRange(0, 3));
    }
  }
  qd::gen::PtWriteOptions options;
  options.protocol = *rc::gen::inRange(2, 6);
  options.ordered = *rc::gen::arbitrary<bool>();
  options.big_endian = *rc::gen::arbitrary<bool>();
  const std::vector<std::uint8_t> file = qd::gen::PtWriteStateDict(root, options);
  const qd::ByteView view{file.data(), file.size()};

  std::vector<qd::oracle::PtTensorBytes> oracle_tensors;
  std::vector<qd::oracle::PtValueEntry> oracle_values;
  const qd::Outcome oracle = qd::oracle::ReadPtFile(view, kFile, &oracle_tensors, &oracle_values);
  const qd::codec::PtResult codec = qd::codec::ReadPt(view, kFile);
  if (oracle.refused || !oracle.findings.empty() || codec.refused || !codec.findings.empty()) {
    RC_FAIL("not accepted cleanly: oracle " + Findings(oracle) + "; codec refused " +
            std::to_string(codec.refused) + "\nfile: " + qdtest::gen::ShowBytes(file));
  }
  std::vector<std::pair<std::string, const PtObject*>> tensors, values;
  Flatten(root, "", &tensors, &values);
  RC_ASSERT(oracle_tensors.size() == tensors.size());
  RC_ASSERT(codec.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const PtTensorData& want = tensors[i].second->tensor;
    RC_ASSERT(oracle_tensors[i].name == tensors[i].first);
    RC_ASSERT(oracle_tensors[i].dtype == want.dtype);
    RC_ASSERT(oracle_tensors[i].shape == want.shape);
    RC_ASSERT(oracle_tensors[i].bytes == want.bytes);
    RC_ASSERT(codec.tensors[i].name == tensors[i].first);
    RC_ASSERT(qd::codec::PtTensorBytes(codec.TableTensor(i)) == want.bytes);
  }
  RC_ASSERT(oracle_values.size() == values.size());
  RC_ASSERT(codec.values.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    RC_ASSERT(oracle_values[i].name == values[i].first);
    if (oracle_values[i].text != Render(*values[i].second)) {
      RC_FAIL(values[i].first + ": oracle renders " + oracle_values[i].text + ", written " + Render(*values[i].second));
    }
    RC_ASSERT(codec.values[i].first == values[i].first);
    const std::string differs = NodeDiffers(codec, codec.values[i].second, *values[i].second);
    if (!differs.empty()) RC_FAIL(values[i].first + ": the codec's node differs at " + differs);
  }
  RC_TAG(options.big_endian ? "big-endian" : "little-endian");
}

// ---- one layer, three files ------------------------------------------------------------

namespace {

// The single decoded tensor of an accepted file with no finding.
std::string Decoded(const qd::Outcome& o, const std::string& who, const qd::DecodedTensor** out) {
  if (o.refused || !o.findings.empty()) return who + " did not accept cleanly: " + Findings(o);
  if (o.tensors.size() != 1) return who + " decoded " + std::to_string(o.tensors.size()) + " tensors";
  *out = &o.tensors[0];
  return "";
}

std::string SameTensor(const qd::DecodedTensor& want, const qd::DecodedTensor& got, const std::string& who) {
  if (got.name != want.name) return who + ": name " + got.name + ", expected " + want.name;
  if (got.shape != want.shape) return who + ": shape differs";
  if (got.values.size() != want.values.size()) return who + ": value count differs";
  for (std::size_t i = 0; i < want.values.size(); ++i) {
    if (qdtest::FloatBits(got.values[i]) != qdtest::FloatBits(want.values[i])) {
      return who + ": element " + std::to_string(i) + " is " + std::to_string(got.values[i]) + ", expected " +
             std::to_string(want.values[i]);
    }
  }
  return "";
}

struct LayerCase {
  qd::gen::Bnb4bitLayer layer;
  std::string storage;
  qd::gen::BnbListOptions list;
  bool gptqmodel = false;
};

LayerCase RandomLayerCase() {
  LayerCase c;
  qd::harness::Rng rng(*rc::gen::arbitrary<std::uint64_t>());
  c.layer = qd::gen::RandomBnb4bitLayer(rng);
  c.storage = qd::gen::RandomBnbQuantStorage(c.layer.q.packed.size(), rng);
  c.list = qd::gen::RandomBnbListOptions(c.layer, rng);
  // W as the HF file stores it ([bytes / size, 1] in the same dtype), so
  // that bnb's compatibility transpose (first dimension 1) applies alike.
  c.list.w_storage = c.storage;
  c.list.w_flat = false;
  c.gptqmodel = *rc::gen::arbitrary<bool>();
  return c;
}

// The expected tensor: the bnb oracle's reading of the HF safetensors file.
std::vector<std::uint8_t> SafetensorsFile(const LayerCase& c) {
  return qd::gen::BnbWriteSafetensors(qd::gen::Bnb4bitTensors(c.layer, false, c.storage));
}

qd::gen::PtStateDict ListDict(const LayerCase& c) {
  qd::gen::PtStateDict d;
  qd::gen::PtPutBnbListLayer(&d, c.layer, c.list);
  return d;
}

qd::gen::PtStateDict TensorDict(const LayerCase& c) {
  qd::gen::PtStateDict d;
  qd::gen::PtPutTensors(&d, qd::gen::Bnb4bitTensors(c.layer, c.gptqmodel, c.storage));
  return d;
}

}  // namespace

RC_GTEST_PROP(PtBnbProperties, OneLayerDecodesAlikeAsSafetensorsListAndPtTensors, ()) {
  const LayerCase c = RandomLayerCase();
  const std::vector<std::uint8_t> st = SafetensorsFile(c);
  const qd::Outcome expected_outcome = Read(Format("bnb"), true, st);
  const qd::DecodedTensor* expected = nullptr;
  const std::string why = Decoded(expected_outcome, "bnb oracle on the safetensors file", &expected);
  if (!why.empty()) RC_FAIL(why);
  RC_ASSERT(expected->name == c.layer.module + ".weight");

  qd::gen::PtWriteOptions options;
  options.protocol = *rc::gen::element(2, 4);
  const std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files = {
      {"bnb codec, safetensors", st},
      {"list layout", qd::gen::PtWriteStateDict(ListDict(c), options)},
      {c.gptqmodel ? "GPT-QModel tensors in a .pt" : "HF tensors in a .pt", qd::gen::PtWriteStateDict(TensorDict(c), options)},
  };
  for (std::size_t k = 0; k < files.size(); ++k) {
    for (const bool oracle : {false, true}) {
      if (k == 0 && oracle) continue;  // the expectation itself
      const std::string who = files[k].first + (oracle ? " (oracle)" : " (codec)");
      const qd::Outcome o = Read(Format(k == 0 ? "bnb" : "pt"), oracle, files[k].second);
      const qd::DecodedTensor* got = nullptr;
      std::string problem = Decoded(o, who, &got);
      if (problem.empty()) problem = SameTensor(*expected, *got, who);
      if (!problem.empty()) RC_FAIL(problem);
    }
  }
  RC_TAG(c.layer.q.nested ? "nested" : "flat");
}

// Views and byte order change how the bytes are stored, not what they mean.
RC_GTEST_PROP(PtBnbProperties, NonContiguousAndBigEndianDecodeLikeContiguous, ()) {
  const LayerCase c = RandomLayerCase();
  const bool list = *rc::gen::arbitrary<bool>();
  const qd::gen::PtStateDict plain = list ? ListDict(c) : TensorDict(c);
  qd::gen::PtStateDict views = plain;
  std::vector<PtTensorData*> all = qd::gen::PtTensorsIn(&views);
  // W is the first tensor of both layouts; it is never contiguous here.
  all[0]->layout = static_cast<PtTensorData::Layout>(*rc::gen::inRange(1, 4));
  for (std::size_t k = 1; k < all.size(); ++k) all[k]->layout = static_cast<PtTensorData::Layout>(*rc::gen::inRange(0, 4));
  qd::gen::PtWriteOptions options;
  options.big_endian = *rc::gen::arbitrary<bool>();
  for (const bool oracle : {false, true}) {
    const qd::Outcome a = Read(Format("pt"), oracle, qd::gen::PtWriteStateDict(plain));
    const qd::Outcome b = Read(Format("pt"), oracle, qd::gen::PtWriteStateDict(views, options));
    const qd::DecodedTensor *ta = nullptr, *tb = nullptr;
    const std::string who = std::string(oracle ? "oracle" : "codec") + (list ? ", list layout" : ", tensors");
    std::string problem = Decoded(a, who + ", contiguous", &ta);
    if (problem.empty()) problem = Decoded(b, who + ", views", &tb);
    if (problem.empty()) problem = SameTensor(*ta, *tb, who + ", views");
    if (!problem.empty()) RC_FAIL(problem);
  }
  RC_TAG(options.big_endian ? "big-endian" : "little-endian");
}

// ---- violations ------------------------------------------------------------------------

namespace {

// docs/pt.md 7.4: the field of each list-layout sub-check the generator
// names, and the tensor the finding names after W ("" = W.quant_state, or
// W itself for BNB-002 and BNB-105).
struct SubCheck {
  const char* what;  // rule, then the generator's description after "list layout: " ('*': any text)
  const char* field;
  const char* tensor;  // suffix of W
};
const SubCheck kListChecks[] = {
    {"BNB-001 quant_type outside nf4/fp4", "quant_type", ".quant_state"},
    {"BNB-001 blocksize not a power of two 32..4096", "blocksize", ".quant_state"},
    {"BNB-001 absmax count not ceil(n / blocksize)", "absmax", ".quant_state[0]"},
    {"BNB-002 W not ceil(n/2) bytes", "weight", ""},
    {"BNB-002 W (*) not ceil(n/2) bytes", "weight", ""},
    {"BNB-002 S[1] product not the packed length", "weight", ""},
    {"BNB-002 S[1] with a zero dimension", "weight", ""},
    {"BNB-002 S[1] product overflows", "weight", ""},
    {"BNB-004 state2 of 6 items (no code)", "nested_quant_map", ".quant_state"},
    {"BNB-004 nested2 True", "nested_blocksize", ".quant_state"},
    {"BNB-004 offset2 not None", "nested_blocksize", ".quant_state"},
    {"BNB-004 state2b not None", "nested_blocksize", ".quant_state"},
    {"BNB-004 blocksize2 not a power of two 32..4096", "nested_blocksize", ".quant_state"},
    {"BNB-004 dtype2 not float32", "nested_dtype", ".quant_state"},
    {"BNB-004 nested_absmax not F32 of ceil(nblocks / nested_blocksize)", "nested_absmax", ".quant_state[4][1][0]"},
    {"BNB-004 code not F32[256]", "nested_quant_map", ".quant_state[4][1][1]"},
    {"BNB-101 S has * items", "quant_state", ".quant_state"},
    {"BNB-101 S[0] not a tensor", "quant_state", ".quant_state"},
    {"BNB-101 S[1] not a Size/tuple/list of ints", "quant_state", ".quant_state"},
    {"BNB-101 S[2] not a dtype token", "quant_state", ".quant_state"},
    {"BNB-101 S[3] not an int", "quant_state", ".quant_state"},
    {"BNB-101 S[4] neither None nor a pair", "quant_state", ".quant_state"},
    {"BNB-101 S[5] not a str", "quant_state", ".quant_state"},
    {"BNB-101 S[6] present and not a tensor", "quant_state", ".quant_state"},
    {"BNB-101 offset an int", "nested_offset", ".quant_state"},
    {"BNB-101 offset a str / None", "nested_offset", ".quant_state"},
    {"BNB-101 offset a bool", "nested_offset", ".quant_state"},
    {"BNB-101 offset an integer tensor", "nested_offset", ".quant_state"},
    {"BNB-101 offset tensor of two elements", "nested_offset", ".quant_state"},
    {"BNB-101 offset tensor of no element", "nested_offset", ".quant_state"},
    {"BNB-101 offset F32 not finite", "nested_offset", ".quant_state"},
    {"BNB-101 offset F16 not finite", "nested_offset", ".quant_state"},
    {"BNB-101 offset BF16 not finite", "nested_offset", ".quant_state"},
    {"BNB-101 offset float not finite in binary32", "nested_offset", ".quant_state"},
    {"BNB-101 offset F64 not finite in binary32", "nested_offset", ".quant_state"},
    {"BNB-101 offset a list", "nested_offset", ".quant_state"},
    {"BNB-101 state2 not a list or tuple", "quant_state", ".quant_state"},
    {"BNB-101 state2 has * items", "quant_state", ".quant_state"},
    {"BNB-101 absmax2 not a tensor", "quant_state", ".quant_state"},
    {"BNB-101 code not a tensor", "quant_state", ".quant_state"},
    {"BNB-101 blocksize2 not an int", "quant_state", ".quant_state"},
    {"BNB-101 nested2 not a bool", "quant_state", ".quant_state"},
    {"BNB-101 dtype2 not a dtype token", "quant_state", ".quant_state"},
    {"BNB-102 flat absmax not F32", "absmax", ".quant_state[0]"},
    {"BNB-102 nested absmax not U8", "absmax", ".quant_state[0]"},
    {"BNB-102 S[6] not F32[16]", "quant_map", ".quant_state[6]"},
    {"BNB-103 S[2] not float16/bfloat16/float32", "dtype", ".quant_state"},
    {"BNB-104 non-finite flat absmax", "absmax", ".quant_state[0]"},
    {"BNB-104 non-finite nested_absmax", "nested_absmax", ".quant_state[4][1][0]"},
    {"BNB-104 non-finite nested code", "nested_quant_map", ".quant_state[4][1][1]"},
    {"BNB-105 no tensor W", "quant_state", ""},
    {"BNB-105 the list and a state tensor for one W", "quant_state", ""},
    {"BNB-105 the list and an int8 scale for one W", "quant_state", ""},
    {"BNB-106 S[6] is the other table (warning)", "quant_map", ".quant_state[6]"},
    {"BNB-106 S[6] differs from the table in one bit (warning)", "quant_map", ".quant_state[6]"},
};

// text matches pattern, where one '*' stands for any text.
bool Matches(const std::string& text, const std::string& pattern) {
  const std::size_t star = pattern.find('*');
  if (star == std::string::npos) return text == pattern;
  const std::string head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return text.size() >= head.size() + tail.size() && text.compare(0, head.size(), head) == 0 &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

const SubCheck* FindSubCheck(const std::string& rule, const std::string& description) {
  const std::string prefix = "list layout: ";
  if (description.rfind(prefix, 0) != 0) return nullptr;
  const std::string key = rule + " " + description.substr(prefix.size());
  for (const SubCheck& c : kListChecks) {
    if (Matches(key, c.what)) return &c;
  }
  return nullptr;
}


}  // namespace

// Fixed seeds (not RapidCheck's), so that the sub-check coverage asserted at
// the end is the same on every run.
TEST(PtBnbProperties, EveryListedBnbRuleIsReachedByBothReadersWithItsField) {
  const qd::harness::FormatEntry& pt = Format("pt");
  constexpr int kSeeds = 250;
  std::map<std::string, int> seen;  // sub-check (or "tensors: ...") -> hits
  for (const std::string& rule : pt.violable_rules()) {
    if (rule.rfind("BNB-", 0) != 0) continue;
    const bool warning = rule == "BNB-106";
    for (int seed = 1; seed <= kSeeds; ++seed) {
      qd::harness::Rng rng(static_cast<std::uint64_t>(seed));
      const qd::harness::Generated g = pt.generate_violation(rule, rng);
      ASSERT_EQ(g.expected_rule, rule);
      const qd::ByteView view{g.bytes.data(), g.bytes.size()};
      const qd::Outcome codec = pt.codec_read(view, kFile, {});
      const qd::Outcome check = pt.codec_check(view, kFile, {});
      const qd::Outcome oracle = pt.oracle_read(view, kFile, {});
      const std::string where = rule + " seed " + std::to_string(seed) + " (" + g.description + ")";
      for (const auto& [who, o] : {std::pair<const char*, const qd::Outcome*>{"codec_read", &codec},
                                   {"codec_check", &check},
                                   {"oracle_read", &oracle}}) {
        int errors = 0;
        const qd::Finding* hit = nullptr;
        for (const qd::Finding& f : o->findings) {
          errors += f.severity == qd::Severity::kError;
          if (f.rule == rule) hit = &f;
        }
        const bool ok = warning ? !o->refused && errors == 0 && hit != nullptr
                                : o->refused && errors == 1 && o->findings.back().rule == rule;
        EXPECT_TRUE(ok) << where << ": " << who << " " << Findings(*o);
        if (!ok || hit == nullptr) continue;
        const SubCheck* sub = FindSubCheck(rule, g.description);
        if (sub == nullptr) continue;
        EXPECT_EQ(hit->field, sub->field) << where << ": " << who;
        const std::string tensor = hit->tensor;
        EXPECT_TRUE(tensor.starts_with("model.layers.") && tensor.ends_with(std::string(".weight") + sub->tensor))
            << where << ": " << who << " names tensor " << tensor << ", expected W" << sub->tensor;
      }
      if (auto d = qd::harness::Compare(codec, oracle, "pt")) {
        ADD_FAILURE() << where << ": " << d->signature << ": " << d->detail;
      }
      const SubCheck* sub = FindSubCheck(rule, g.description);
      EXPECT_TRUE(sub != nullptr || g.description.rfind("list layout: ", 0) != 0)
          << where << ": a list-layout sub-check this test does not know";
      ++seen[sub != nullptr ? sub->what : rule + " " + g.description];
    }
  }
  // Every list-layout sub-check of the generator was reached (and so
  // checked above), and every rule also through tensors (docs/bnb.md).
  for (const SubCheck& c : kListChecks) EXPECT_GT(seen[c.what], 0) << "never generated: " << c.what;
  for (const std::string& rule : pt.violable_rules()) {
    if (rule.rfind("BNB-", 0) != 0) continue;
    int tensors = 0;
    for (const auto& [what, n] : seen) tensors += what.rfind(rule + " tensors: ", 0) == 0 || (rule == "BNB-108" && what.rfind(rule, 0) == 0) ? n : 0;
    EXPECT_GT(tensors, 0) << rule << " never generated as tensors";
  }
}
