// bnb_pt_codec_test: the codec's bitsandbytes readers on a .pt file's tensor
// table (docs/pt.md 6.4) and the QuantState list layout (docs/pt.md 7), on
// hand-built files (tests/pt_test_builder.h).
//
// Expected values come from the pages: NF4 code 15 is +1, code 0 is -1 and
// code 7 is 0 (spec 000's table), so a packed pair F0 7F with absmax 2
// decodes to [2, -2, 0, 2]; nested absmax is fl(fl(map[c] * nested) + offset)
// (docs/bnb.md); every rule, field, tensor name and byte offset is docs/pt.md
// 7.4's or docs/bnb.md's. The codec's own tables only build inputs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/bnb_pt_layers.h"
#include "codecs/pt.h"
#include "tests/pt_test_builder.h"

namespace {

using namespace qd::pt_test;  // NOLINT: the builders are this file's vocabulary

using ItemOps = std::function<void(Pk&)>;

std::vector<float> Nf4Table() {
  const auto& t = qd::codec::Bnb4bitTable(qd::codec::Bnb4bitType::kNf4);
  return {t.begin(), t.end()};
}

// One list-layout layer `w` (docs/pt.md 7.3) and what may replace its parts.
// Storages: 0 packed W, 1 absmax, 2 quant_map, 3 offset, 4 code (nested
// map), 5 nested_absmax, 6 extras.
struct ListLayer {
  int items = 7;
  bool tuple = false;
  int shape_kind = 0;  // 0 torch.Size, 1 tuple, 2 list
  std::vector<std::int64_t> shape = {2, 2};
  std::string dtype = "float32";
  std::int64_t blocksize = 64;
  std::string quant_type = "nf4";
  Bytes packed = {0xF0, 0x7F};
  std::vector<std::int64_t> packed_shape = {2, 1};
  std::vector<float> absmax = {2.0f};
  std::vector<float> quant_map = Nf4Table();
  // Nested statistics.
  bool nested = false;
  Bytes absmax_codes = {3};
  int offset_kind = 0;  // 0 a 0-d F32 tensor, 1 a float
  double offset = 1.0;
  std::vector<float> code = [] {
    std::vector<float> c(256, 0.0f);
    c[3] = 0.5f;
    return c;
  }();
  std::vector<float> nested_absmax = {4.0f};
  int state2_items = 7;
  std::int64_t blocksize2 = 256;
  bool nested2 = false;
  std::string dtype2 = "float32";
  // Replace outer item i, a nested item ("offset"), or a state2 item j.
  std::map<int, ItemOps> item;
  ItemOps offset_ops;
  std::map<int, ItemOps> state2_item;
  ItemOps state2_ops;
  // More root entries after w and w.quant_state, with their storages.
  std::function<void(Pk&)> extra_entries;
  std::vector<Record> extra_storages;
};

void Seq(Pk& p, bool tuple, const std::vector<ItemOps>& items) {
  if (tuple) {
    p.mark();
    for (const ItemOps& f : items) f(p);
    p.tuple();
  } else {
    p.list().mark();
    for (const ItemOps& f : items) f(p);
    p.op('e');  // APPENDS
  }
}

ItemOps F32Tensor(const std::string& key, std::int64_t n) {
  return [=](Pk& p) { p.tensor(key, "FloatStorage", n, 0, {n}, {1}); };
}

Zip Write(const ListLayer& l) {
  Pk p;
  p.proto().dict().mark();
  p.str("w").tensor("0", "ByteStorage", static_cast<std::int64_t>(l.packed.size()), 0, l.packed_shape,
                    l.packed_shape.size() == 2 ? std::vector<std::int64_t>{l.packed_shape[1], 1}
                                               : std::vector<std::int64_t>{1});
  p.str("w.quant_state");
  std::vector<ItemOps> outer;
  const auto nblocks = static_cast<std::int64_t>(l.nested ? l.absmax_codes.size() : l.absmax.size());
  outer.push_back(l.nested ? ItemOps([=](Pk& q) { q.tensor("1", "ByteStorage", nblocks, 0, {nblocks}, {1}); })
                           : F32Tensor("1", nblocks));
  outer.push_back([&](Pk& q) {
    if (l.shape_kind == 0) {
      q.glob("torch", "Size").ints(l.shape).op(0x85).reduce();
    } else {
      std::vector<ItemOps> dims;
      for (std::int64_t d : l.shape) dims.push_back([=](Pk& r) { r.i8(d); });
      Seq(q, l.shape_kind == 1, dims);
    }
  });
  outer.push_back([&](Pk& q) { q.glob("torch", l.dtype); });
  outer.push_back([&](Pk& q) { q.i8(l.blocksize); });
  outer.push_back([&](Pk& q) {
    if (!l.nested) {
      q.none();
      return;
    }
    std::vector<ItemOps> pair;
    pair.push_back(l.offset_ops ? l.offset_ops : ItemOps([&](Pk& r) {
      if (l.offset_kind == 1) {
        r.fl(l.offset);
      } else {
        r.tensor("3", "FloatStorage", 1, 0, {}, {});
      }
    }));
    pair.push_back(l.state2_ops ? l.state2_ops : ItemOps([&](Pk& r) {
      std::vector<ItemOps> s2;
      if (l.state2_items == 6) {  // the docstring's form: [absmax, shape, dtype, blocksize, None, quant_type]
        s2 = {F32Tensor("5", static_cast<std::int64_t>(l.nested_absmax.size())),
              [](Pk& t) { t.ints({4}); }, [](Pk& t) { t.glob("torch", "float32"); },
              [](Pk& t) { t.i8(256); }, [](Pk& t) { t.none(); }, [](Pk& t) { t.str("nf4"); }};
      } else {
        s2 = {F32Tensor("5", static_cast<std::int64_t>(l.nested_absmax.size())),
              F32Tensor("4", static_cast<std::int64_t>(l.code.size())),
              [&](Pk& t) { t.i8(l.blocksize2); },
              [&](Pk& t) { t.op(l.nested2 ? 0x88 : 0x89); },
              [&](Pk& t) { t.glob("torch", l.dtype2); }, [](Pk& t) { t.none(); },
              [](Pk& t) { t.none(); }};
      }
      for (const auto& [j, ops] : l.state2_item) s2[j] = ops;
      Seq(r, false, s2);
    }));
    Seq(q, false, pair);
  });
  outer.push_back([&](Pk& q) { q.str(l.quant_type); });
  if (l.items == 7) outer.push_back(F32Tensor("2", static_cast<std::int64_t>(l.quant_map.size())));
  for (const auto& [i, ops] : l.item) {
    if (i < static_cast<int>(outer.size())) {
      outer[i] = ops;
    } else {
      outer.push_back(ops);
    }
  }
  Seq(p, l.tuple, outer);
  if (l.extra_entries) l.extra_entries(p);
  p.op('u').stop();
  std::vector<Record> storages = {{"0", l.packed}};
  storages.push_back({"1", l.nested ? l.absmax_codes : F32s(l.absmax)});
  if (l.items == 7) storages.push_back({"2", F32s(l.quant_map)});
  if (l.nested) {
    if (l.offset_kind == 0 && !l.offset_ops) storages.push_back({"3", F32s({static_cast<float>(l.offset)})});
    if (l.state2_items == 7) storages.push_back({"4", F32s(l.code)});
    storages.push_back({"5", F32s(l.nested_absmax)});
  }
  for (const Record& r : l.extra_storages) storages.push_back(r);
  return Archive(p.b, storages);
}

qd::codec::BnbResult Read(const Zip& z) { return qd::codec::ReadPtLayers(z.View(), "m.pt"); }

// The single error, with every field docs/pt.md 7.4 fixes.
::testing::AssertionResult IsError(const qd::codec::BnbResult& r, const std::string& rule,
                                   const std::string& tensor, const std::string& field,
                                   std::int64_t offset, std::int64_t block = -1,
                                   std::int64_t element = -1) {
  if (!r.refused || r.findings.empty()) return ::testing::AssertionFailure() << "accepted";
  const qd::Finding& f = r.findings.back();
  int errors = 0;
  for (const auto& x : r.findings) errors += x.severity == qd::Severity::kError ? 1 : 0;
  if (f.rule != rule || f.tensor != tensor || f.field != field || f.byte_offset != offset ||
      f.block != block || f.element != element || f.row != -1 || errors != 1 || f.file != "m.pt") {
    return ::testing::AssertionFailure()
           << "got " << f.rule << " tensor=" << f.tensor << " field=" << f.field
           << " offset=" << f.byte_offset << " block=" << f.block << " element=" << f.element
           << " errors=" << errors << " (" << f.message << "); want " << rule << " " << tensor
           << " " << field << " " << offset;
  }
  return ::testing::AssertionSuccess();
}

// The decoded tensor `name` of an accepted file.
std::vector<float> Decoded(const Zip& z, const std::string& name,
                           std::vector<std::uint64_t>* shape = nullptr) {
  const qd::Outcome o = qd::codec::DecodePtFile(z.View(), "m.pt");
  EXPECT_FALSE(o.refused) << (o.findings.empty() ? "" : o.findings.back().rule + " " + o.findings.back().message);
  for (const qd::DecodedTensor& t : o.tensors) {
    if (t.name != name) continue;
    if (shape != nullptr) *shape = t.shape;
    return t.values;
  }
  ADD_FAILURE() << "no decoded tensor " << name;
  return {};
}

const std::vector<float> kTwoMinusTwoZeroTwo = {2.0f, -2.0f, 0.0f, 2.0f};

// ==== accepted list layers ==========================================================

TEST(BnbPtList, FlatSevenItems) {
  const Zip z = Write(ListLayer{});
  const qd::codec::BnbResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_TRUE(r.findings.empty());
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_EQ(r.layers[0].name, "w");
  EXPECT_FALSE(r.layers[0].nested);
  std::vector<std::uint64_t> shape;
  EXPECT_EQ(Decoded(z, "w", &shape), kTwoMinusTwoZeroTwo);
  EXPECT_EQ(shape, (std::vector<std::uint64_t>{2, 2}));
  // Only W is output: the list's tensors are not table entries.
  const qd::Outcome o = qd::codec::DecodePtFile(z.View(), "m.pt");
  EXPECT_EQ(o.tensors.size(), 1u);
}

TEST(BnbPtList, SixItemTupleWithListShapeAndFloat16) {
  ListLayer l;
  l.items = 6;
  l.tuple = true;
  l.shape_kind = 2;
  l.dtype = "float16";
  EXPECT_EQ(Decoded(Write(l), "w"), kTwoMinusTwoZeroTwo);
  l.shape_kind = 1;  // a tuple of ints
  EXPECT_EQ(Decoded(Write(l), "w"), kTwoMinusTwoZeroTwo);
}

TEST(BnbPtList, NestedWithTensorOrFloatOffset) {
  // absmax_eff = fl(fl(code[3] * nested_absmax[0]) + offset) = 0.5 * 4 + 1 = 3.
  ListLayer l;
  l.nested = true;
  const Zip z = Write(l);
  const qd::codec::BnbResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_TRUE(r.layers[0].nested);
  EXPECT_EQ(r.layers[0].nested_blocksize, 256u);
  EXPECT_EQ(Decoded(z, "w"), (std::vector<float>{3.0f, -3.0f, 0.0f, 3.0f}));
  l.offset_kind = 1;
  l.offset = 0.25;
  EXPECT_EQ(Decoded(Write(l), "w"), (std::vector<float>{2.25f, -2.25f, 0.0f, 2.25f}));
}

TEST(BnbPtList, NestedOffsetRoundsOnceToBinary32) {
  // A float offset of 1 + 2^-30 is fl32 -> 1.0 (docs/pt.md 7.3), so the
  // effective absmax is exactly 3.
  ListLayer l;
  l.nested = true;
  l.offset_kind = 1;
  l.offset = 1.0 + std::ldexp(1.0, -30);
  EXPECT_EQ(Decoded(Write(l), "w"), (std::vector<float>{3.0f, -3.0f, 0.0f, 3.0f}));
}

TEST(BnbPtList, CompatibilityTransposeWhenFirstDimensionIsOne) {
  ListLayer l;
  l.packed_shape = {1, 2};
  std::vector<std::uint64_t> shape;
  // [[2, -2], [0, 2]] transposed (docs/bnb.md "Shape").
  EXPECT_EQ(Decoded(Write(l), "w", &shape), (std::vector<float>{2.0f, 0.0f, -2.0f, 2.0f}));
  EXPECT_EQ(shape, (std::vector<std::uint64_t>{2, 2}));
}

TEST(BnbPtList, PackedWeightStoredAsAViewIsReadInCOrder) {
  // W = storage[1::2] of {11, F0, 22, 7F}: C-order bytes F0 7F (docs/pt.md 5.3, 6.4).
  Pk p;
  p.proto().dict().mark();
  p.str("w").tensor("0", "ByteStorage", 4, 1, {2}, {2});
  p.str("w.quant_state").list().mark();
  p.tensor("1", "FloatStorage", 1, 0, {1}, {1});
  p.glob("torch", "Size").ints({4}).op(0x85).reduce();
  p.glob("torch", "float32").i8(64).none().str("nf4");
  p.op('e').op('u').stop();
  const Zip z = Archive(p.b, {{"0", {0x11, 0xF0, 0x22, 0x7F}}, {"1", F32s({2.0f})}});
  EXPECT_EQ(Decoded(z, "w"), kTwoMinusTwoZeroTwo);
}

TEST(BnbPtList, PlainTensorsBesideTheLayerAreOutputByName) {
  ListLayer l;
  l.extra_entries = [](Pk& p) {
    p.str("bias").tensor("6", "FloatStorage", 2, 0, {2}, {1});
  };
  l.extra_storages = {{"6", F32s({0.5f, -0.5f})}};
  const qd::Outcome o = qd::codec::DecodePtFile(Write(l).View(), "m.pt");
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 2u);
  EXPECT_EQ(o.tensors[0].name, "bias");  // name order, docs/bnb.md
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(o.tensors[1].name, "w");
}

TEST(BnbPtList, AQuantStateThatIsNoListIsAPlainValue) {
  // docs/pt.md 7.2: `w.quant_state` = "nf4" (a str) is no layer.
  Pk p;
  p.proto().dict().mark();
  p.str("w").tensor("0", "FloatStorage", 2, 0, {2}, {1});
  p.str("w.quant_state").str("nf4");
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", F32s({1.0f, 2.0f})}});
  const qd::codec::BnbResult r = Read(z);
  ASSERT_FALSE(r.refused);
  EXPECT_FALSE(r.is_bnb);
  EXPECT_EQ(Decoded(z, "w"), (std::vector<float>{1.0f, 2.0f}));
}

// ==== refusals, in docs/pt.md 7.4's order =============================================

std::int64_t Ds(const Zip& z, std::size_t entry) { return static_cast<std::int64_t>(z.ds[entry]); }

TEST(BnbPtListRules, Bnb105TwoStatesOrNoWeight) {
  ListLayer l;
  l.extra_entries = [](Pk& p) {
    p.str("w.quant_state.bitsandbytes__nf4").tensor("6", "ByteStorage", 2, 0, {2}, {1});
  };
  l.extra_storages = {{"6", {'{', '}'}}};
  Zip z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-105", "w", "quant_state", Ds(z, 0)));

  // A list and an int8 scale for the same W (M.SCB with W = M.weight).
  Pk p;
  p.proto().dict().mark();
  p.str("m.weight").tensor("0", "ByteStorage", 2, 0, {2, 1}, {1, 1});
  p.str("m.weight.quant_state").list().mark();
  p.tensor("1", "FloatStorage", 1, 0, {1}, {1});
  p.ints({2, 2}).glob("torch", "float32").i8(64).none().str("nf4").op('e');
  p.str("m.SCB").tensor("2", "FloatStorage", 2, 0, {2}, {1});
  p.op('u').stop();
  z = Archive(p.b, {{"0", {0xF0, 0x7F}}, {"1", F32s({2.0f})}, {"2", F32s({1.0f, 1.0f})}});
  EXPECT_TRUE(IsError(Read(z), "BNB-105", "m.weight", "quant_state", Ds(z, 0)));

  // No tensor `w`: the packed weight is missing.
  Pk q;
  q.proto().dict().mark();
  q.str("w.quant_state").list().mark();
  q.tensor("0", "FloatStorage", 1, 0, {1}, {1});
  q.ints({2, 2}).glob("torch", "float32").i8(64).none().str("nf4").op('e');
  q.op('u').stop();
  z = Archive(q.b, {{"0", F32s({2.0f})}});
  EXPECT_TRUE(IsError(Read(z), "BNB-105", "w", "quant_state", Ds(z, 0)));
}

TEST(BnbPtListRules, Bnb101OuterItems) {
  const std::vector<std::pair<std::string, std::function<void(ListLayer&)>>> cases = {
      {"S0 int", [](ListLayer& l) { l.item[0] = [](Pk& p) { p.i1(2); }; }},
      {"S1 negative", [](ListLayer& l) { l.shape_kind = 1; l.shape = {2, -2}; }},
      {"S1 bool", [](ListLayer& l) { l.item[1] = [](Pk& p) { p.mark().op(0x88).i1(2).tuple(); }; }},
      {"S1 str", [](ListLayer& l) { l.item[1] = [](Pk& p) { p.str("2x2"); }; }},
      {"S2 str", [](ListLayer& l) { l.item[2] = [](Pk& p) { p.str("float32"); }; }},
      {"S2 storage class", [](ListLayer& l) { l.item[2] = [](Pk& p) { p.glob("torch", "FloatStorage"); }; }},
      {"S3 bool", [](ListLayer& l) { l.item[3] = [](Pk& p) { p.op(0x88); }; }},
      {"S3 negative", [](ListLayer& l) { l.blocksize = -64; }},
      {"S3 float", [](ListLayer& l) { l.item[3] = [](Pk& p) { p.fl(64.0); }; }},
      {"S4 one item", [](ListLayer& l) { l.item[4] = [](Pk& p) { p.list().mark().none().op('e'); }; }},
      {"S4 int", [](ListLayer& l) { l.item[4] = [](Pk& p) { p.i1(0); }; }},
      {"S5 int", [](ListLayer& l) { l.item[5] = [](Pk& p) { p.i1(4); }; }},
      {"S6 None", [](ListLayer& l) { l.item[6] = [](Pk& p) { p.none(); }; }},
      {"8 items", [](ListLayer& l) { l.item[7] = [](Pk& p) { p.none(); }; }},
  };
  for (const auto& [what, edit] : cases) {
    SCOPED_TRACE(what);
    ListLayer l;
    edit(l);
    const Zip z = Write(l);
    EXPECT_TRUE(IsError(Read(z), "BNB-101", "w.quant_state", "quant_state", Ds(z, 0)));
  }
  // 5 items: the 6-item form without its quant_type.
  Pk p;
  p.proto().dict().mark();
  p.str("w").tensor("0", "ByteStorage", 2, 0, {2, 1}, {1, 1});
  p.str("w.quant_state").list().mark();
  p.tensor("1", "FloatStorage", 1, 0, {1}, {1});
  p.ints({2, 2}).glob("torch", "float32").i8(64).none().op('e');
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", {0xF0, 0x7F}}, {"1", F32s({2.0f})}});
  EXPECT_TRUE(IsError(Read(z), "BNB-101", "w.quant_state", "quant_state", Ds(z, 0)));
}

TEST(BnbPtListRules, Bnb101NestedOffset) {
  const std::vector<std::pair<std::string, ItemOps>> cases = {
      {"int", [](Pk& p) { p.i1(1); }},
      {"None", [](Pk& p) { p.none(); }},
      {"two values", [](Pk& p) { p.tensor("3", "FloatStorage", 2, 0, {2}, {1}); }},
      {"int tensor", [](Pk& p) { p.tensor("3", "IntStorage", 1, 0, {}, {}); }},
      {"infinite float", [](Pk& p) { p.fl(std::numeric_limits<double>::infinity()); }},
      {"NaN float", [](Pk& p) { p.fl(std::numeric_limits<double>::quiet_NaN()); }},
      {"F64 beyond binary32", [](Pk& p) { p.tensor("3", "DoubleStorage", 1, 0, {}, {}); }},
  };
  for (const auto& [what, ops] : cases) {
    SCOPED_TRACE(what);
    ListLayer l;
    l.nested = true;
    l.offset_ops = ops;
    // The storage "3" the tensors above name: two F32 values, an int32 or 1e300 as F64.
    if (what == "two values") l.extra_storages = {{"3", F32s({1.0f, 1.0f})}};
    if (what == "int tensor") l.extra_storages = {{"3", {1, 0, 0, 0}}};
    if (what == "F64 beyond binary32") {
      Bytes d(8);
      const auto bits = std::bit_cast<std::uint64_t>(1e300);
      for (int i = 0; i < 8; ++i) d[i] = static_cast<std::uint8_t>(bits >> (8 * i));
      l.extra_storages = {{"3", d}};
    }
    const Zip z = Write(l);
    // A tensor whose value is not finite points at that value (docs/pt.md 7.4 2b):
    // storage "3" is the last entry before the version record.
    const std::int64_t at = what == "F64 beyond binary32" ? Ds(z, z.ds.size() - 2) : Ds(z, 0);
    EXPECT_TRUE(IsError(Read(z), "BNB-101", "w.quant_state", "nested_offset", at));
  }
}

TEST(BnbPtListRules, Bnb101State2) {
  std::vector<std::pair<std::string, std::function<void(ListLayer&)>>> cases = {
      {"int", [](ListLayer& l) { l.state2_ops = [](Pk& p) { p.i1(0); }; }},
      {"5 items", [](ListLayer& l) {
         l.state2_ops = [](Pk& p) { p.list().mark().none().none().none().none().none().op('e'); };
       }},
      {"nested2 int", [](ListLayer& l) { l.state2_item[3] = [](Pk& p) { p.i1(0); }; }},
      {"dtype2 str", [](ListLayer& l) { l.state2_item[4] = [](Pk& p) { p.str("float32"); }; }},
      {"absmax2 None", [](ListLayer& l) { l.state2_item[0] = [](Pk& p) { p.none(); }; }},
      {"code None", [](ListLayer& l) { l.state2_item[1] = [](Pk& p) { p.none(); }; }},
      {"blocksize2 negative", [](ListLayer& l) { l.blocksize2 = -256; }},
  };
  for (const auto& [what, edit] : cases) {
    SCOPED_TRACE(what);
    ListLayer l;
    l.nested = true;
    edit(l);
    const Zip z = Write(l);
    EXPECT_TRUE(IsError(Read(z), "BNB-101", "w.quant_state", "quant_state", Ds(z, 0)));
  }
}

TEST(BnbPtListRules, Bnb001Bnb103QuantTypeBlocksizeDtype) {
  ListLayer l;
  l.quant_type = "int4";
  Zip z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-001", "w.quant_state", "quant_type", Ds(z, 0)));
  l = ListLayer{};
  l.blocksize = 48;
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-001", "w.quant_state", "blocksize", Ds(z, 0)));
  l = ListLayer{};
  l.dtype = "int8";
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-103", "w.quant_state", "dtype", Ds(z, 0)));
  // quant_type before blocksize before dtype (steps 3, 5, 6).
  l.quant_type = "nf3";
  l.blocksize = 48;
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-001", "w.quant_state", "quant_type", Ds(z, 0)));
}

TEST(BnbPtListRules, Bnb004NestedPieces) {
  const std::vector<std::tuple<std::string, std::function<void(ListLayer&)>, std::string>> cases = {
      {"docstring state2", [](ListLayer& l) { l.state2_items = 6; }, "nested_quant_map"},
      {"nested2 True", [](ListLayer& l) { l.nested2 = true; }, "nested_blocksize"},
      {"offset2 set", [](ListLayer& l) { l.state2_item[5] = [](Pk& p) { p.fl(0.0); }; }, "nested_blocksize"},
      {"state2b set", [](ListLayer& l) { l.state2_item[6] = [](Pk& p) { p.list(); }; }, "nested_blocksize"},
      {"blocksize2 100", [](ListLayer& l) { l.blocksize2 = 100; }, "nested_blocksize"},
      {"blocksize2 8192", [](ListLayer& l) { l.blocksize2 = 8192; }, "nested_blocksize"},
      {"dtype2 float16", [](ListLayer& l) { l.dtype2 = "float16"; }, "nested_dtype"},
      // The 6-item check comes first even when the outer dtype is fine and
      // nothing else is wrong; nested2 True before a bad blocksize2.
      {"nested2 and blocksize2", [](ListLayer& l) { l.nested2 = true; l.blocksize2 = 100; }, "nested_blocksize"},
      {"blocksize2 and dtype2", [](ListLayer& l) { l.blocksize2 = 100; l.dtype2 = "float16"; }, "nested_blocksize"},
  };
  for (const auto& [what, edit, field] : cases) {
    SCOPED_TRACE(what);
    ListLayer l;
    l.nested = true;
    edit(l);
    const Zip z = Write(l);
    EXPECT_TRUE(IsError(Read(z), "BNB-004", "w.quant_state", field, Ds(z, 0)));
  }
}

TEST(BnbPtListRules, Bnb002PackedLength) {
  ListLayer l;
  l.packed = {0xF0, 0x7F, 0x00};
  l.packed_shape = {3, 1};
  Zip z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-002", "w", "weight", Ds(z, 0)));
  // Any dtype holds the bytes: an I16 [1] of two bytes is ceil(4 / 2) = 2
  // bytes (shape (4,): rank 1, so no compatibility transpose).
  Pk p;
  p.proto().dict().mark();
  p.str("w").tensor("0", "ShortStorage", 1, 0, {1}, {1});
  p.str("w.quant_state").list().mark();
  p.tensor("1", "FloatStorage", 1, 0, {1}, {1});
  p.ints({4}).glob("torch", "float32").i8(64).none().str("nf4").op('e');
  p.op('u').stop();
  z = Archive(p.b, {{"0", {0xF0, 0x7F}}, {"1", F32s({2.0f})}});
  EXPECT_EQ(Decoded(z, "w"), kTwoMinusTwoZeroTwo);
}

TEST(BnbPtListRules, StatisticsDtypesAndCounts) {
  ListLayer l;
  l.item[0] = [](Pk& p) { p.tensor("1", "IntStorage", 1, 0, {1}, {1}); };
  Zip z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-102", "w.quant_state[0]", "absmax", Ds(z, 0)));
  l = ListLayer{};
  l.absmax = {2.0f, 2.0f};
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-001", "w.quant_state[0]", "absmax", Ds(z, 0)));
  l = ListLayer{};
  l.nested = true;
  l.item[0] = [](Pk& p) { p.tensor("1", "FloatStorage", 1, 0, {1}, {1}); };
  l.absmax_codes = {0, 0, 128, 63};  // the same 4 bytes read as one F32
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-102", "w.quant_state[0]", "absmax", Ds(z, 0)));
  l = ListLayer{};
  l.nested = true;
  l.nested_absmax = {4.0f, 4.0f};
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-004", "w.quant_state[4][1][0]", "nested_absmax", Ds(z, 0)));
  l = ListLayer{};
  l.nested = true;
  l.code.resize(255);
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-004", "w.quant_state[4][1][1]", "nested_quant_map", Ds(z, 0)));
  l = ListLayer{};
  l.quant_map.resize(15);
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-102", "w.quant_state[6]", "quant_map", Ds(z, 0)));
}

TEST(BnbPtListRules, Bnb104AtTheValuesStorageOffset) {
  // Two blocks (n = 128, blocksize 64); absmax = storage[1::2] of {9, 2, 9, NaN}:
  // block 1 is storage element 3, at ds + 12 (docs/pt.md 6.4).
  Pk p;
  p.proto().dict().mark();
  p.str("w").tensor("0", "ByteStorage", 64, 0, {64, 1}, {1, 1});
  p.str("w.quant_state").list().mark();
  p.tensor("1", "FloatStorage", 4, 1, {2}, {2});
  p.ints({2, 64}).glob("torch", "float32").i8(64).none().str("nf4").op('e');
  p.op('u').stop();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Zip z = Archive(p.b, {{"0", Bytes(64, 0x77)}, {"1", F32s({9.0f, 2.0f, 9.0f, nan})}});
  EXPECT_TRUE(IsError(Read(z), "BNB-104", "w.quant_state[0]", "absmax", Ds(z, 2) + 12, 1));

  // Nested: code (storage "4") comes before nested_absmax (storage "5") in
  // the file, so its NaN at element 5 is reported although both hold one.
  ListLayer l;
  l.nested = true;
  l.code[5] = nan;
  l.nested_absmax = {nan};
  z = Write(l);
  // Entries: data.pkl, 0, 1, 2, 3, 4 (code), 5 (nested_absmax), version.
  EXPECT_TRUE(IsError(Read(z), "BNB-104", "w.quant_state[4][1][1]", "nested_quant_map",
                      Ds(z, 5) + 20, -1, 5));
  l.code[5] = 0.0f;
  z = Write(l);
  EXPECT_TRUE(IsError(Read(z), "BNB-104", "w.quant_state[4][1][0]", "nested_absmax", Ds(z, 6), 0));
}

TEST(BnbPtListRules, Bnb106WarnsAndTheTableDecodes) {
  ListLayer l;
  l.quant_map[5] = 0.125f;
  const Zip z = Write(l);
  const qd::codec::BnbResult r = Read(z);
  ASSERT_FALSE(r.refused);
  ASSERT_EQ(r.findings.size(), 1u);
  const qd::Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "BNB-106");
  EXPECT_EQ(f.severity, qd::Severity::kWarning);
  EXPECT_EQ(f.tensor, "w.quant_state[6]");
  EXPECT_EQ(f.field, "quant_map");
  EXPECT_EQ(f.element, 5);
  EXPECT_EQ(f.byte_offset, Ds(z, 3) + 20);  // entries: data.pkl, 0, 1, 2 (quant_map)
  EXPECT_EQ(Decoded(z, "w"), kTwoMinusTwoZeroTwo);
}

// ==== docs/bnb.md layouts inside a .pt file =============================================

TEST(BnbPtTable, HfLayoutTensorsAndJsonOffsets) {
  const std::string json = R"({"quant_type":"nf4","blocksize":64,"dtype":"float32","shape":[2,2]})";
  auto file = [&](const std::string& text) {
    Pk p;
    p.proto().dict().mark();
    p.str("w").tensor("0", "ByteStorage", 2, 0, {2, 1}, {1, 1});
    p.str("w.absmax").tensor("1", "FloatStorage", 1, 0, {1}, {1});
    const auto n = static_cast<std::int64_t>(text.size());
    // The JSON bytes at offset 3 of a bigger storage: byte 0 of the text is at ds + 3.
    p.str("w.quant_state.bitsandbytes__nf4").tensor("2", "ByteStorage", n + 3, 3, {n}, {1});
    p.op('u').stop();
    Bytes state = {'x', 'y', 'z'};
    state.insert(state.end(), text.begin(), text.end());
    return Archive(p.b, {{"0", {0xF0, 0x7F}}, {"1", F32s({2.0f})}, {"2", state}});
  };
  Zip z = file(json);
  EXPECT_EQ(Decoded(z, "w"), kTwoMinusTwoZeroTwo);
  z = file(R"({"quant_type":"nf4","blocksize":64,"dtype":"float32"})");
  EXPECT_TRUE(IsError(Read(z), "BNB-101", "w.quant_state.bitsandbytes__nf4", "quant_state",
                      Ds(z, 3) + 3));
}

TEST(BnbPtTable, Int8RowScaledLayer) {
  Pk p;
  p.proto().dict().mark();
  p.str("m.weight").tensor("0", "CharStorage", 4, 0, {2, 2}, {2, 1});
  p.str("m.SCB").tensor("1", "FloatStorage", 2, 0, {2}, {1});
  p.str("m.weight_format").tensor("2", "ByteStorage", 1, 0, {}, {});
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", {127, 0x81, 1, 0}}, {"1", F32s({127.0f, 2.0f})}, {"2", {0}}});
  // out = fl(fl(w * SCB[r]) * 0x3c010204) (docs/bnb.md), computed here step by step.
  const float inv127 = std::bit_cast<float>(0x3c010204u);
  volatile float a = 127.0f * 127.0f, b = -127.0f * 127.0f, c = 1.0f * 2.0f;
  const std::vector<float> expected = {a * inv127, b * inv127, c * inv127, 0.0f * inv127};
  EXPECT_EQ(Decoded(z, "m.weight"), expected);
  // A weight_format other than 0 points at its byte (docs/bnb.md int8 step 2).
  const Zip bad = Archive(p.b, {{"0", {127, 0x81, 1, 0}}, {"1", F32s({127.0f, 2.0f})}, {"2", {1}}});
  EXPECT_TRUE(IsError(Read(bad), "BNB-108", "m.weight_format", "weight_format", Ds(bad, 3)));
}

TEST(BnbPtTable, FilesWithoutLayersKeepThePtOutput) {
  // w.weight and w.weight.absmax without a state (the peer bnb_like_mixed.pt
  // shape) are no layer: both floating tensors decode by (begin, end, name).
  Pk p;
  p.proto().dict().mark();
  p.str("w.weight").tensor("0", "FloatStorage", 2, 0, {2}, {1});
  p.str("w.weight.absmax").tensor("1", "FloatStorage", 1, 0, {1}, {1});
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", F32s({1.0f, 2.0f})}, {"1", F32s({3.0f})}});
  const qd::codec::BnbResult r = Read(z);
  ASSERT_FALSE(r.refused);
  EXPECT_FALSE(r.is_bnb);
  const qd::Outcome o = qd::codec::DecodePtFile(z.View(), "m.pt");
  ASSERT_EQ(o.tensors.size(), 2u);
  EXPECT_EQ(o.tensors[0].name, "w.weight");
  EXPECT_EQ(o.tensors[1].values, (std::vector<float>{3.0f}));
}

}  // namespace
