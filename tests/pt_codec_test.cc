// pt_codec_test: the torch .pt reader (codecs/pt.h) on hand-built files
// (tests/pt_test_builder.h), its ZIP container: accepted files, warnings,
// PT-001..PT-010. Every expected rule, field and byte offset comes from
// docs/pt.md. The opcode walk is in tests/pt_pickle_codec_test.cc.
#include <gtest/gtest.h>

#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "codecs/bnb_pt_layers.h"
#include "codecs/pt.h"
#include "codecs/safetensors.h"
#include "tests/pt_test_builder.h"
#include "tests/pt_codec_test_support.h"

namespace {

using namespace qd::pt_test;          // NOLINT: the builders are this file's vocabulary
using namespace qd::pt_codec_test;    // NOLINT: Read, IsError, OneTensor
using qd::codec::Dtype;
using qd::codec::PtKind;
using qd::codec::PtResult;

// ==== accept cases ===================================================================

TEST(PtAccept, MinimalStateDict) {
  const Zip z = Archive(OneTensor().b, {{"0", kFour}});
  EXPECT_EQ(z.ds[0], 64u);  // 30 + 16 + 4 + 14 bytes of Z: data at 64
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_TRUE(r.findings.empty());
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0].name, "w");
  const auto& t = r.TableTensor(0);
  EXPECT_EQ(t.dtype, Dtype::kF32);
  EXPECT_EQ(t.shape, (std::vector<std::uint64_t>{2, 2}));
  EXPECT_EQ(qd::codec::PtTensorBytes(t), kFour);
  EXPECT_EQ(t.begin, z.ds[1]);
  EXPECT_EQ(t.end, z.ds[1] + 16);
  EXPECT_EQ(r.pickle_begin, 64u);
  EXPECT_EQ(r.prefix, "archive");
  EXPECT_TRUE(qd::codec::ClaimsPt(z.View()));
  const qd::Outcome o = qd::codec::DecodePtFile(z.View(), "m.pt");
  ASSERT_FALSE(o.refused);
  ASSERT_EQ(o.tensors.size(), 1u);
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1, 2, 3, 4}));
}

TEST(PtAccept, ZipfileLayoutWithoutZip64) {
  const Pk p = OneTensor();
  const std::string v = "3\n";
  const Zip z = WriteZip({{"archive/data.pkl", p.b, false},
                          {"archive/data/0", kFour, false},
                          {"archive/version", Bytes(v.begin(), v.end()), false}},
                         false);
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_EQ(r.pickle_begin, 30u + 16u);
}

TEST(PtAccept, ViewsAndStrides) {
  // Storage of 12 floats 0..11; views: transpose of a 3x4, offset slice, stride 0 broadcast.
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i);
  Pk p;
  p.proto().dict().mark();
  p.str("t").tensor("0", "FloatStorage", 12, 0, {4, 3}, {1, 4});
  p.str("s").tensor("0", "FloatStorage", 12, 5, {2, 2}, {4, 1});
  p.str("b").tensor("0", "FloatStorage", 12, 11, {3}, {0});
  p.str("e").tensor("0", "FloatStorage", 12, 12, {0, 5}, {5, 1});
  p.str("z").tensor("0", "FloatStorage", 12, 7, {}, {});
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", F32s(v)}});
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  ASSERT_EQ(r.tensors.size(), 5u);
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("t")),
            F32s({0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("s")), F32s({5, 6, 9, 10}));
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("b")), F32s({11, 11, 11}));
  EXPECT_TRUE(qd::codec::PtTensorBytes(*r.Tensor("e")).empty());
  EXPECT_EQ(r.Tensor("z")->numel, 1u);
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("z")), F32s({7}));
  EXPECT_EQ(qd::codec::PtElementOffset(*r.Tensor("s"), 2), z.ds[1] + 9 * 4);
  // Decoded output sorted by (begin, end, name): t [0,48), s 20, z 28, b 44, e 48.
  const qd::Outcome o = qd::codec::DecodePtFile(z.View(), "m.pt");
  ASSERT_EQ(o.tensors.size(), 5u);
  EXPECT_EQ(o.tensors[0].name, "t");
  EXPECT_EQ(o.tensors[1].name, "s");
  EXPECT_EQ(o.tensors[2].name, "z");
  EXPECT_EQ(o.tensors[3].name, "b");
  EXPECT_EQ(o.tensors[4].name, "e");
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(o.tensors[3].values, (std::vector<float>{11, 11, 11}));
}

TEST(PtAccept, ByteorderBig) {
  Pk p;
  p.proto().dict().mark();
  p.str("f").tensor("0", "FloatStorage", 2, 0, {2}, {1});
  p.str("h").tensor("1", "HalfStorage", 2, 0, {2}, {1});
  p.str("i").tensor("2", "IntStorage", 1, 0, {1}, {1});
  p.str("d").tensor("3", "DoubleStorage", 1, 0, {}, {});
  p.op('u').stop();
  // Big-endian storages: 1.0f = 3F 80 00 00, -2.0f = C0 00 00 00; f16 1.0 = 3C 00, 2.0 = 40 00.
  const Bytes f = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0};
  const Bytes h = {0x3c, 0x00, 0x40, 0x00};
  const Bytes i = {0x01, 0x02, 0x03, 0x04};
  const Bytes d = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0x01};  // 1 + 2^-52: rounds to 1.0f
  const Zip z = Archive(p.b, {{"0", f}, {"1", h}, {"2", i}, {"3", d}}, {{"byteorder", {'b', 'i', 'g'}}});
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_TRUE(r.big_endian);
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("f")), F32s({1.0f, -2.0f}));
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("h")), (Bytes{0x00, 0x3c, 0x00, 0x40}));
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("i")), (Bytes{0x04, 0x03, 0x02, 0x01}));
  const qd::Outcome o = qd::codec::DecodePtFile(z.View(), "m.pt");
  ASSERT_EQ(o.tensors.size(), 3u);  // I32 left out
  EXPECT_EQ(o.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(o.tensors[1].values, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(o.tensors[2].values, (std::vector<float>{1.0f}));
}

TEST(PtAccept, ByteorderLittleExplicit) {
  const Zip z = Archive(OneTensor().b, {{"0", kFour}}, {{"byteorder", {'l', 'i', 't', 't', 'l', 'e'}}});
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused);
  EXPECT_FALSE(r.big_endian);
  EXPECT_EQ(qd::codec::PtTensorBytes(r.TableTensor(0)), kFour);
}

TEST(PtAccept, NestedDictsIntKeysValuesAndOrderedRoot) {
  // OrderedDict root with _metadata (BUILD), nested plain dicts, int keys, values.
  Pk p;
  p.proto().od().put(0).mark();
  p.str("layer").dict().mark();
  p.str("w").tensor("0", "FloatStorage", 4, 0, {4}, {1});
  p.i1(3).dict().mark().str("step").i1(7).i1(0).str("zero").op('u');
  p.op('u');
  p.str("meta").dict().mark();
  p.str("quant_type").str("nf4").str("blocksize").i1(32);
  p.str("shape").mark().i1(40).i1(30).tuple();
  p.str("size").glob("torch", "Size").mark().i1(2).i2(300).tuple().op(0x85).reduce();
  p.str("dtype").glob("torch", "float16");
  p.str("x").fl(0.5).str("n").none().str("t").op(0x88).str("neg").i4(-5).str("big").i8(-(1LL << 40));
  p.str("l").list().mark().i1(1).str("a").op('e');
  p.op('u');
  p.op('u');
  p.dict().str("_metadata").od().mark().str("").dict().str("version").i1(1).op('s').op('u').op('s');
  p.op('b').stop();
  const Zip z = Archive(p.b, {{"0", kFour}});
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().field << " "
                          << r.findings.back().message;
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0].name, "layer.w");
  ASSERT_NE(r.Value("layer.3.step"), nullptr);
  EXPECT_EQ(r.Value("layer.3.step")->integer, 7);
  EXPECT_EQ(r.Value("layer.3.0")->text, "zero");
  EXPECT_EQ(r.Value("meta.quant_type")->text, "nf4");
  EXPECT_EQ(r.Value("meta.blocksize")->integer, 32);
  const auto* shape = r.Value("meta.shape");
  ASSERT_EQ(shape->kind, PtKind::kTuple);
  EXPECT_EQ(r.Node(shape->items[1]).integer, 30);
  const auto* size = r.Value("meta.size");
  ASSERT_EQ(size->kind, PtKind::kSize);
  ASSERT_EQ(size->items.size(), 2u);
  EXPECT_EQ(r.Node(size->items[1]).integer, 300);
  EXPECT_EQ(r.Value("meta.dtype")->kind, PtKind::kToken);
  EXPECT_EQ(r.Value("meta.dtype")->text, "float16");
  EXPECT_EQ(r.Value("meta.dtype")->dtype, Dtype::kF16);
  EXPECT_EQ(r.Value("meta.x")->real, 0.5);
  EXPECT_EQ(r.Value("meta.n")->kind, PtKind::kNone);
  EXPECT_EQ(r.Value("meta.t")->kind, PtKind::kBool);
  EXPECT_TRUE(r.Value("meta.t")->boolean);
  EXPECT_EQ(r.Value("meta.neg")->integer, -5);
  EXPECT_EQ(r.Value("meta.big")->integer, -(1LL << 40));
  EXPECT_EQ(r.Value("meta.l")->items.size(), 2u);
  EXPECT_EQ(r.values.size(), 13u);
  EXPECT_EQ(r.values[0].first, "layer.3.step");
  // The root keeps its _metadata as attributes, not as items.
  const auto& root = r.Node(r.root);
  EXPECT_TRUE(root.ordered);
  ASSERT_NE(root.attributes, qd::codec::kPtNoNode);
  EXPECT_NE(r.Item(r.Node(root.attributes), "_metadata"), nullptr);
  EXPECT_EQ(r.Value("_metadata"), nullptr);
}

TEST(PtAccept, EveryStorageClass) {
  struct C { const char* cls; Dtype dtype; std::uint64_t isz; };
  const C cs[] = {{"DoubleStorage", Dtype::kF64, 8}, {"FloatStorage", Dtype::kF32, 4},
                  {"HalfStorage", Dtype::kF16, 2},   {"BFloat16Storage", Dtype::kBF16, 2},
                  {"LongStorage", Dtype::kI64, 8},   {"IntStorage", Dtype::kI32, 4},
                  {"ShortStorage", Dtype::kI16, 2},  {"CharStorage", Dtype::kI8, 1},
                  {"ByteStorage", Dtype::kU8, 1},    {"BoolStorage", Dtype::kBool, 1}};
  Pk p;
  p.proto().dict().mark();
  std::vector<Record> st;
  int k = 0;
  for (const C& c : cs) {
    const std::string key = "k" + std::to_string(k++);
    p.str(c.cls).tensor(key, c.cls, 3, 1, {2}, {1});
    Bytes data(3 * c.isz);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i);
    st.push_back({key, data});
  }
  p.op('u').stop();
  const Zip z = Archive(p.b, st);  // the tensors are views into z
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  ASSERT_EQ(r.tensors.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(r.TableTensor(i).dtype, cs[i].dtype) << cs[i].cls;
    const Bytes got = qd::codec::PtTensorBytes(r.TableTensor(i));
    ASSERT_EQ(got.size(), 2 * cs[i].isz);
    EXPECT_EQ(got[0], cs[i].isz);  // element 1 of bytes 0,1,2,...
  }
}

TEST(PtAccept, EveryDtypeToken) {
  const char* names[] = {"float64", "float32", "float16", "bfloat16", "int64",
                         "int32",   "int16",   "int8",    "uint8",    "bool"};
  const Dtype dtypes[] = {Dtype::kF64, Dtype::kF32, Dtype::kF16, Dtype::kBF16, Dtype::kI64,
                          Dtype::kI32, Dtype::kI16, Dtype::kI8,  Dtype::kU8,   Dtype::kBool};
  Pk p;
  p.proto().dict().mark();
  for (const char* n : names) p.str(n).glob("torch", n);
  p.op('u').stop();
  const PtResult r = Read(Archive(p.b));
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  for (int i = 0; i < 10; ++i) {
    const auto* v = r.Value(names[i]);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->kind, PtKind::kToken);
    EXPECT_EQ(v->token, qd::codec::PtTokenKind::kDtype);
    EXPECT_EQ(v->text, names[i]);
    EXPECT_EQ(v->dtype, dtypes[i]);
  }
}

TEST(PtAccept, RebuildParameterSizeArgsAndTensorsInsideValues) {
  Pk p;
  p.proto().dict().mark();
  p.str("p").glob("torch._utils", "_rebuild_parameter").mark();
  // size given as torch.Size((2, 2)), metadata (7th) None
  p.glob("torch._utils", "_rebuild_tensor_v2").mark().pid("0", "FloatStorage", 4).i1(0);
  p.glob("torch", "Size").mark().i1(2).i1(2).tuple().op(0x85).reduce();
  p.ints({2, 1}).op(0x89).od().none().tuple().reduce();
  p.op(0x88).od().tuple().reduce();
  p.str("q").list().tensor("0", "FloatStorage", 4, 1, {3}, {1}).op('a');
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", kFour}});
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(qd::codec::PtTensorBytes(*r.Tensor("p")), kFour);
  const auto* q = r.Value("q");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->kind, PtKind::kList);
  const auto& inner = r.Node(q->items[0]);
  ASSERT_EQ(inner.kind, PtKind::kTensor);
  EXPECT_EQ(qd::codec::PtTensorBytes(r.all_tensors[inner.tensor]), F32s({2, 3, 4}));
}

TEST(PtAccept, Protocol4FramesMemoizeAndAllowedStackGlobal) {
  Pk p;
  p.proto(4).op(0x95);
  PutN(p.b, 0, 8);  // FRAME of 0 bytes: no other effect
  p.dict().op(0x94).mark();
  p.sstr("w");
  p.sstr("torch._utils").op(0x94).sstr("_rebuild_tensor_v2").op(0x94).op(0x93);
  p.mark().pid("0", "FloatStorage", 4).i1(0).ints({4}).ints({1}).op(0x89).od().tuple().reduce();
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", kFour}});
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(qd::codec::PtTensorBytes(r.TableTensor(0)), kFour);
}

TEST(PtAccept, SharedDictThroughMemo) {
  // root = {"inner": D, "k": D, "again": D}; D filled through BINGET after it was shared.
  Pk p;
  p.proto().dict().mark().str("inner").dict().put(1).op('u');
  p.str("k").get(1).op('s');
  p.str("again").get(1).mark().str("x").i1(5).op('u').op('s');
  p.stop();
  const PtResult r = Read(Archive(p.b));
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_EQ(r.Value("inner.x")->integer, 5);
  EXPECT_EQ(r.Value("k.x")->integer, 5);
  EXPECT_EQ(r.Value("again.x")->integer, 5);
}

// ==== warnings (sections 2.5, 8 step 7) =============================================

TEST(PtWarnings, VersionUnknownRecordsUnreferencedStorage) {
  const Zip z = Archive(OneTensor().b, {{"0", kFour}, {"9", {1, 2}}},
                        {{"foo", {1}}, {"data/0/x", {2}}, {".data/serialization_id", {3}}}, "2\n");
  // entries: data.pkl, data/0, data/9, foo, data/0/x, .data/serialization_id, version
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  ASSERT_EQ(r.findings.size(), 4u);
  EXPECT_EQ(r.findings[0].rule, "PT-104");
  EXPECT_EQ(r.findings[0].field, "version");
  EXPECT_EQ(r.findings[0].byte_offset, static_cast<std::int64_t>(z.ds[6]));
  EXPECT_EQ(r.findings[1].rule, "PT-101");
  EXPECT_EQ(r.findings[1].field, "record");
  EXPECT_EQ(r.findings[1].byte_offset, static_cast<std::int64_t>(z.h[3]));
  EXPECT_EQ(r.findings[2].rule, "PT-101");
  EXPECT_EQ(r.findings[2].byte_offset, static_cast<std::int64_t>(z.h[4]));
  EXPECT_EQ(r.findings[3].rule, "PT-102");
  EXPECT_EQ(r.findings[3].field, "storage");
  EXPECT_EQ(r.findings[3].byte_offset, static_cast<std::int64_t>(z.h[2]));
  for (const auto& f : r.findings) EXPECT_EQ(f.severity, qd::Severity::kWarning);
}

TEST(PtWarnings, DataVersionWinsAndLeadingZeroIsThree) {
  const Zip z = Archive(OneTensor().b, {{"0", kFour}}, {{".data/version", {'0', '3'}}}, "bad\n");
  const PtResult r = Read(z);
  ASSERT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
  EXPECT_TRUE(r.findings.empty());
}

// ==== PT-001, PT-002 ================================================================

TEST(PtZip, Legacy) {
  Bytes legacy = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
  EXPECT_TRUE(IsError(ReadBytes(legacy), "PT-001", "format", 0));
  EXPECT_TRUE(qd::codec::ClaimsPt({legacy.data(), legacy.size()}));
  Bytes tar(1024, 0);
  std::memcpy(tar.data(), "model/data.pkl", 14);
  std::memcpy(tar.data() + 257, "ustar\0", 6);
  EXPECT_TRUE(IsError(ReadBytes(tar), "PT-001", "format", 0));
  legacy[13] = 0x18;  // not the magic: a plain pickle stream
  EXPECT_TRUE(IsError(ReadBytes(legacy), "PT-002", "eocd", 0));
}

TEST(PtZip, ClaimsNotSafetensors) {
  Bytes st = {0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0, '{', '}'};
  EXPECT_FALSE(qd::codec::ClaimsPt({st.data(), st.size()}));
  Bytes st2 = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_FALSE(qd::codec::ClaimsPt({st2.data(), st2.size()}));
  EXPECT_FALSE(qd::codec::ClaimsPt({nullptr, 0}));
}

TEST(PtZip, EndRecord) {
  EXPECT_TRUE(IsError(ReadBytes({}), "PT-002", "eocd", 0));
  EXPECT_TRUE(IsError(ReadBytes({0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0, 0, 0}), "PT-002", "eocd", 0));
  EXPECT_TRUE(IsError(ReadBytes(Bytes(100, 'x')), "PT-002", "eocd", 0));
  const Zip base = Archive(OneTensor().b, {{"0", kFour}});
  const auto e = static_cast<std::int64_t>(base.eocd);
  {
    Zip z = base;
    Set16(z.bytes, z.eocd + 20, 1);  // comment length
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
  }
  {
    Zip z = base;
    z.bytes.push_back(0);  // the end record is no longer at n - 22
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e + 1));
  }
  {
    Zip z = base;
    z.bytes.pop_back();  // truncated
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e - 1));
  }
  {
    Zip z = base;
    Set16(z.bytes, z.eocd + 4, 1);
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
  }
  {
    Zip z = base;
    Set16(z.bytes, z.eocd + 8, 2);
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
  }
  {  // lying directory size and entry count: classic disagrees with zip64
    Zip z = base;
    Set32(z.bytes, z.eocd + 12, 0xfffffff0u);
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
    z = base;
    Set16(z.bytes, z.eocd + 8, 60000);
    Set16(z.bytes, z.eocd + 10, 60000);
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
  }
  {  // zip64 record size 45, locator disk count 2
    Zip z = base;
    const std::size_t zr = z.eocd - 20 - 56;
    z.bytes[zr + 4] = 45;
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
    z = base;
    z.bytes[z.eocd - 20 + 16] = 2;
    EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
  }
  {  // saturated classic values are fine with zip64 records
    Zip z = base;
    Set16(z.bytes, z.eocd + 8, 0xffff);
    Set16(z.bytes, z.eocd + 10, 0xffff);
    Set32(z.bytes, z.eocd + 12, 0xffffffffu);
    Set32(z.bytes, z.eocd + 16, 0xffffffffu);
    EXPECT_FALSE(Read(z).refused);
  }
}

TEST(PtZip, EndRecordWithoutZip64) {
  const Pk p = OneTensor();
  const std::string v = "3\n";
  const Zip base = WriteZip({{"archive/data.pkl", p.b, false},
                             {"archive/data/0", kFour, false},
                             {"archive/version", Bytes(v.begin(), v.end()), false}},
                            false);
  const auto e = static_cast<std::int64_t>(base.eocd);
  ASSERT_FALSE(Read(base).refused);
  Zip z = base;
  Set16(z.bytes, z.eocd + 8, 0xffff);
  Set16(z.bytes, z.eocd + 10, 0xffff);
  EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));  // saturated without zip64
  z = base;
  Set16(z.bytes, z.eocd + 8, 60000);
  Set16(z.bytes, z.eocd + 10, 60000);
  EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));  // 46 * N > cd_size
  z = base;
  Set16(z.bytes, z.eocd + 8, 0);
  Set16(z.bytes, z.eocd + 10, 0);
  EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));  // N = 0
  z = base;
  Set32(z.bytes, z.eocd + 12, 0xfffffff0u);
  EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));  // directory does not end at e
  z = base;
  Set32(z.bytes, z.eocd + 16, base.cd_off - 1);
  EXPECT_TRUE(IsError(Read(z), "PT-002", "eocd", e));
  // PT-003 after the last entry: junk between the directory and the end record.
  z = base;
  z.bytes.insert(z.bytes.begin() + static_cast<std::ptrdiff_t>(z.eocd), 5, 0);
  Set32(z.bytes, z.eocd + 5 + 12, base.cd_size + 5);
  EXPECT_TRUE(IsError(Read(z), "PT-003", "central_directory",
                      static_cast<std::int64_t>(base.cd_off + base.cd_size)));
}

// ==== PT-003 .. PT-005 ===============================================================

TEST(PtZip, CentralDirectory) {
  const Zip base = Archive(OneTensor().b, {{"0", kFour}});
  const auto c1 = static_cast<std::int64_t>(base.central[1]);
  auto with = [&](std::size_t at, int width, std::uint64_t v) {
    Zip z = base;
    if (width == 2) Set16(z.bytes, at, v); else Set32(z.bytes, at, v);
    return Read(z);
  };
  EXPECT_TRUE(IsError(with(base.central[1] + 8, 2, 0x0809), "PT-003", "central_directory", c1));
  EXPECT_TRUE(IsError(with(base.central[1] + 8, 2, 0x0848), "PT-003", "central_directory", c1));
  EXPECT_TRUE(IsError(with(base.central[1] + 10, 2, 8), "PT-003", "central_directory", c1));
  EXPECT_TRUE(IsError(with(base.central[1] + 20, 4, 15), "PT-003", "central_directory", c1));
  EXPECT_TRUE(IsError(with(base.central[1] + 34, 2, 1), "PT-003", "central_directory", c1));
  EXPECT_TRUE(IsError(with(base.central[1], 4, 0x02014b51), "PT-003", "central_directory", c1));
  // Saturated sizes without a zip64 extra field.
  {
    Zip z = base;
    Set32(z.bytes, base.central[1] + 20, 0xffffffffu);
    Set32(z.bytes, base.central[1] + 24, 0xffffffffu);
    EXPECT_TRUE(IsError(Read(z), "PT-003", "central_directory", c1));
  }
  // Name length running past the directory (last entry).
  {
    Zip z = base;
    Set16(z.bytes, base.central[2] + 28, 0xffff);
    EXPECT_TRUE(IsError(Read(z), "PT-003", "central_directory",
                        static_cast<std::int64_t>(base.central[2])));
  }
  // Extra fields: truncated record, id twice, zip64 values present.
  auto extra = [&](const Bytes& x, bool saturate) {
    std::vector<ZEntry> es = {{"archive/data.pkl", OneTensor().b}, {"archive/data/0", kFour, true, x},
                              {"archive/version", {'3', '\n'}}};
    Zip z = WriteZip(es);
    if (saturate) {
      Set32(z.bytes, z.central[1] + 20, 0xffffffffu);
      Set32(z.bytes, z.central[1] + 24, 0xffffffffu);
    }
    return std::make_pair(z, Read(z));
  };
  {
    auto [z, r] = extra({0x01, 0x02, 0x03}, false);
    EXPECT_TRUE(IsError(r, "PT-003", "central_directory", static_cast<std::int64_t>(z.central[1])));
  }
  {
    auto [z, r] = extra({0xaa, 0xaa, 0, 0, 0xaa, 0xaa, 0, 0}, false);
    EXPECT_TRUE(IsError(r, "PT-003", "central_directory", static_cast<std::int64_t>(z.central[1])));
  }
  {
    Bytes x = {0x01, 0x00, 16, 0};
    PutN(x, 16, 8);
    PutN(x, 16, 8);
    auto [z, r] = extra(x, true);
    EXPECT_FALSE(r.refused) << r.findings.back().rule << " " << r.findings.back().message;
    Bytes y = {0x01, 0x00, 8, 0};
    PutN(y, 16, 8);  // one value for two saturated fields
    auto [z2, r2] = extra(y, true);
    EXPECT_TRUE(IsError(r2, "PT-003", "central_directory", static_cast<std::int64_t>(z2.central[1])));
  }
}

TEST(PtZip, Names) {
  auto one = [](const std::string& bad) {
    const Zip z = WriteZip({{"archive/data.pkl", OneTensor().b}, {bad, kFour},
                            {"archive/version", {'3', '\n'}}});
    return std::make_pair(static_cast<std::int64_t>(z.central[1]), Read(z));
  };
  for (const std::string& bad : std::vector<std::string>{"archive/../x", "archive\\data/0", "/archive/x", "archive",
                                "archive//x", "archive/./x", "other/data/0", "archive/x/",
                                std::string("archive/\x01x"), std::string("archive/\x7fx"),
                                std::string("archive/\xff"), std::string("archive/\xc0\xaf"),
                                std::string("archive/\xed\xa0\x80")}) {
    auto [c, r] = one(bad);
    EXPECT_TRUE(IsError(r, "PT-004", "name", c)) << bad;
  }
  // The first entry defines P; a traversal there is caught on entry 0.
  const Zip z = WriteZip({{"../../etc/archive/data.pkl", OneTensor().b}});
  EXPECT_TRUE(IsError(Read(z), "PT-004", "name", static_cast<std::int64_t>(z.central[0])));
  // Non-ASCII UTF-8 is fine (then PT-101 for an unknown record).
  auto [c, r] = one("archive/d\xc3\xa9j\xc3\xa0");
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].rule, "PT-101");  // then PT-015: data/0 is not there
  EXPECT_EQ(r.findings.back().rule, "PT-015");
  // PT-005.
  const Zip d = WriteZip({{"archive/data.pkl", OneTensor().b}, {"archive/data/0", kFour},
                          {"archive/data/0", kFour}, {"archive/version", {'3', '\n'}}});
  EXPECT_TRUE(IsError(Read(d), "PT-005", "name", static_cast<std::int64_t>(d.central[2])));
}

// ==== PT-006 .. PT-008 ===============================================================

TEST(PtZip, LocalHeaders) {
  const Zip base = Archive(OneTensor().b, {{"0", kFour}});
  const auto c1 = static_cast<std::int64_t>(base.central[1]);
  const std::size_t h = base.h[1];
  auto patched = [&](std::size_t at, std::uint8_t v) {
    Zip z = base;
    z.bytes[at] = v;
    return Read(z);
  };
  // FB padding holds a byte other than Z (the first crc_mismatch.pt's defect).
  EXPECT_TRUE(IsError(patched(h + 30 + 14 + 4, 0xa5), "PT-006", "local_header", c1));
  EXPECT_TRUE(IsError(patched(h + 30, 'A'), "PT-006", "local_header", c1));      // name
  EXPECT_TRUE(IsError(patched(h + 6, 0x00), "PT-006", "local_header", c1));      // flags
  EXPECT_TRUE(IsError(patched(h + 8, 0x08), "PT-006", "local_header", c1));      // method
  EXPECT_TRUE(IsError(patched(h, 0x51), "PT-006", "local_header", c1));          // signature
  EXPECT_TRUE(IsError(patched(h + 14, 0x01), "PT-006", "local_header", c1));     // CRC not 0/real
  EXPECT_TRUE(IsError(patched(base.ds[1] + 16, 0x51), "PT-006", "local_header", c1));  // descriptor
  EXPECT_TRUE(IsError(patched(base.ds[1] + 16 + 8, 0x11), "PT-006", "local_header", c1));
  {  // lying local header offset and size
    Zip z = base;
    Set32(z.bytes, base.central[1] + 42, 0x7ffffff0u);
    EXPECT_TRUE(IsError(Read(z), "PT-006", "local_header", c1));
    z = base;
    Set32(z.bytes, base.central[1] + 20, 0x7fffffffu);
    Set32(z.bytes, base.central[1] + 24, 0x7fffffffu);
    EXPECT_TRUE(IsError(Read(z), "PT-006", "local_header", c1));
  }
  {  // the local header repeats the real CRC and sizes: fine
    Zip z = base;
    Set32(z.bytes, h + 14, Crc(kFour));
    Set32(z.bytes, h + 18, 16);
    Set32(z.bytes, h + 22, 16);
    EXPECT_FALSE(Read(z).refused);
  }
  {  // zipfile layout: CRC in the local header must equal the central one
    const Pk p = OneTensor();
    Zip z = WriteZip({{"archive/data.pkl", p.b, false}, {"archive/data/0", kFour, false},
                      {"archive/version", {'3', '\n'}, false}}, false);
    Set32(z.bytes, z.h[1] + 14, 0x12345678u);
    EXPECT_TRUE(IsError(Read(z), "PT-006", "local_header", static_cast<std::int64_t>(z.central[1])));
  }
}

TEST(PtZip, OverlapAndCrc) {
  // Entry "archive/a" holds a complete zipfile-style record of data/0; the
  // central entry of data/0 is pointed into it: PT-007 at data/0's central entry.
  const std::string n0 = "archive/data/0";
  Bytes inner;
  PutN(inner, 0x04034b50, 4);
  PutN(inner, 20, 2);
  PutN(inner, 0, 2);
  PutN(inner, 0, 2);
  PutN(inner, 0, 4);
  PutN(inner, Crc(kFour), 4);
  PutN(inner, 16, 4);
  PutN(inner, 16, 4);
  PutN(inner, n0.size(), 2);
  PutN(inner, 0, 2);
  inner.insert(inner.end(), n0.begin(), n0.end());
  inner.insert(inner.end(), kFour.begin(), kFour.end());
  Zip z = WriteZip({{"archive/data.pkl", OneTensor().b}, {"archive/a", inner},
                    {n0, kFour, false}, {"archive/version", {'3', '\n'}}});
  ASSERT_FALSE(Read(z).refused);  // as written: no overlap
  Set32(z.bytes, z.central[2] + 42, z.ds[1]);
  EXPECT_TRUE(IsError(Read(z), "PT-007", "local_header", static_cast<std::int64_t>(z.central[2])));

  Zip c = Archive(OneTensor().b, {{"0", kFour}});
  c.bytes[c.ds[1] + 3] ^= 0x01;
  EXPECT_TRUE(IsError(Read(c), "PT-008", "crc32", static_cast<std::int64_t>(c.ds[1])));
}

// ==== PT-009, PT-010 =================================================================

TEST(PtZip, Records) {
  const Pk p = OneTensor();
  {
    const Zip z = WriteZip({{"archive/model.pkl", p.b}, {"archive/data/0", kFour},
                            {"archive/version", {'3', '\n'}}});
    EXPECT_TRUE(IsError(Read(z), "PT-009", "data.pkl", static_cast<std::int64_t>(z.cd_off)));
  }
  {
    const Zip z = WriteZip({{"archive/data.pkl", p.b}, {"archive/data/0", kFour}});
    EXPECT_TRUE(IsError(Read(z), "PT-009", "version", static_cast<std::int64_t>(z.cd_off)));
  }
  for (const std::string v : {"x\n", "", "\n", "3\n\n", " 3", "-3", "123456789012345678901",
                              "3\r\n"}) {
    const Zip z = Archive(p.b, {{"0", kFour}}, {}, v);
    EXPECT_TRUE(IsError(Read(z), "PT-009", "version", static_cast<std::int64_t>(z.ds[2]))) << v;
  }
  {
    const Zip z = Archive(p.b, {{"0", kFour}}, {}, "12345678901234567890");
    const PtResult r = Read(z);
    ASSERT_FALSE(r.refused);
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].rule, "PT-104");
  }
  for (const std::string b : {"LITTLE", "little\n", "", "bigg"}) {
    const Zip z = Archive(p.b, {{"0", kFour}}, {{"byteorder", Bytes(b.begin(), b.end())}});
    EXPECT_TRUE(IsError(Read(z), "PT-010", "byteorder", static_cast<std::int64_t>(z.ds[2]))) << b;
  }
}

}  // namespace
