// convert_pt_test.cc: `quantdiff convert IN.pt --to safetensors` (the built
// binary) on .pt files built byte by byte (tests/pt_test_builder.h). Expected
// bytes are computed here from the storages and strides (docs/pt.md 5.3),
// dtype names are the safetensors README's, metadata strings are docs/pt.md
// 13.2's forms written out by hand, and OUT is read by
// tests/safetensors_by_the_tests.h, never by quantdiff's readers.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/hostile/run_quantdiff.h"
#include "tests/pt_test_builder.h"
#include "tests/safetensors_by_the_tests.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace qd::pt_test;  // NOLINT: the builders are this file's vocabulary

class ConvertPt : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = qd::hostile::FreshFolder(fs::path(QD_TEST_TMPDIR) /
                                    testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  fs::path WriteInput(const Bytes& bytes) {
    const fs::path path = dir_ / "in.pt";
    qd::hostile::WriteWhole(path, std::string(bytes.begin(), bytes.end()));
    return path;
  }
  qd::hostile::RunResult Run(const std::vector<std::string>& args) {
    return qd::hostile::Quantdiff(args, dir_ / "scratch");
  }
  qd::hostile::RunResult Convert(const Bytes& pt) {
    return Run({"convert", WriteInput(pt).string(), "--to", "safetensors", "--out", Out().string()});
  }
  fs::path Out() const { return dir_ / "out.safetensors"; }
  std::vector<std::uint8_t> OutBytes() const {
    const std::string s = qd::hostile::ReadWhole(Out());
    return std::vector<std::uint8_t>(s.begin(), s.end());
  }
  // Nothing but the input (and the scratch folder) in the test folder.
  bool NothingWritten() const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename() != "in.pt" && e.path().filename() != "scratch") return false;
    }
    return true;
  }
  fs::path dir_;
};

// C-order elements of a view of STORAGE (docs/pt.md 5.3: element (i0..ik) is
// storage[offset + sum(i_d * stride_d)]), as little-endian F32 bytes.
Bytes StridedF32(const std::vector<float>& storage, std::uint64_t offset,
                 const std::vector<std::uint64_t>& shape, const std::vector<std::uint64_t>& stride) {
  std::uint64_t count = 1;
  for (std::uint64_t d : shape) count *= d;
  std::vector<float> out;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t rest = i, at = offset;
    for (std::size_t d = shape.size(); d-- > 0;) {
      at += (rest % shape[d]) * stride[d];
      rest /= shape[d];
    }
    out.push_back(storage[at]);
  }
  return F32s(out);
}

TEST_F(ConvertPt, ViewsWrittenContiguousInCOrder) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i) + 0.25f;
  Pk p;
  p.proto().dict().mark();
  p.str("t").tensor("0", "FloatStorage", 12, 0, {4, 3}, {1, 4});  // a transposed 3x4
  p.str("b").tensor("0", "FloatStorage", 12, 11, {3}, {0});        // stride 0: one element thrice
  p.str("r").tensor("0", "FloatStorage", 12, 2, {2, 3}, {0, 1});   // stride-0 rows
  p.str("s").tensor("0", "FloatStorage", 12, 5, {2, 2}, {4, 1});   // an offset slice
  p.str("z").tensor("0", "FloatStorage", 12, 7, {}, {});           // rank 0
  p.str("e").tensor("0", "FloatStorage", 12, 12, {0, 5}, {5, 1});  // no element
  p.op('u').stop();
  const qd::hostile::RunResult r = Convert(Archive(p.b, {{"0", F32s(v)}}).bytes);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::uint8_t> out = OutBytes();
  struct Want {
    const char* name;
    std::vector<std::uint64_t> shape;
    Bytes bytes;
  };
  const std::vector<Want> wants = {
      {"t", {4, 3}, StridedF32(v, 0, {4, 3}, {1, 4})},
      {"b", {3}, F32s({11.25f, 11.25f, 11.25f})},
      {"r", {2, 3}, F32s({2.25f, 3.25f, 4.25f, 2.25f, 3.25f, 4.25f})},
      {"s", {2, 2}, F32s({5.25f, 6.25f, 9.25f, 10.25f})},
      {"z", {}, F32s({7.25f})},
      {"e", {0, 5}, {}},
  };
  // The transpose spelled out: row i of t is column i of the 3x4.
  EXPECT_EQ(wants[0].bytes, F32s({0.25f, 4.25f, 8.25f, 1.25f, 5.25f, 9.25f, 2.25f, 6.25f, 10.25f,
                                  3.25f, 7.25f, 11.25f}));
  for (const Want& w : wants) {
    const qdtest::RawTensor t = qdtest::TensorReadByTheTests(out, w.name);
    ASSERT_TRUE(t.found) << w.name;
    EXPECT_EQ(t.dtype, "F32") << w.name;
    EXPECT_EQ(t.shape, w.shape) << w.name;
    EXPECT_EQ(t.bytes, w.bytes) << w.name;
  }
  const json header = qdtest::HeaderReadByTheTests(out);
  EXPECT_EQ(header.size(), wants.size());  // no __metadata__: the state dict holds no value
  EXPECT_EQ(Run({"check", Out().string()}).exit_code, 0);
}

TEST_F(ConvertPt, EveryStorageDtypeKeepsItsBytes) {
  struct Case {
    const char* storage_class;
    const char* safetensors_dtype;  // the safetensors README's name
    std::uint64_t item_size;
  };
  const std::vector<Case> cases = {
      {"DoubleStorage", "F64", 8}, {"FloatStorage", "F32", 4},   {"HalfStorage", "F16", 2},
      {"BFloat16Storage", "BF16", 2}, {"LongStorage", "I64", 8}, {"IntStorage", "I32", 4},
      {"ShortStorage", "I16", 2},  {"CharStorage", "I8", 1},     {"ByteStorage", "U8", 1},
      {"BoolStorage", "BOOL", 1},
  };
  Pk p;
  p.proto().dict().mark();
  std::vector<Record> storages;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::string key = std::to_string(k);
    p.str(std::string("x_") + cases[k].safetensors_dtype)
        .tensor(key, cases[k].storage_class, 3, 0, {3}, {1});
    Bytes data(3 * cases[k].item_size);
    // Bytes every dtype holds as they are (a BOOL byte is 0 or 1).
    for (std::size_t i = 0; i < data.size(); ++i) {
      data[i] = cases[k].item_size == 1 ? static_cast<std::uint8_t>(i % 2)
                                        : static_cast<std::uint8_t>(17 * k + i);
    }
    storages.push_back({key, data});
  }
  p.op('u').stop();
  const qd::hostile::RunResult r = Convert(Archive(p.b, storages).bytes);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::uint8_t> out = OutBytes();
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const qdtest::RawTensor t =
        qdtest::TensorReadByTheTests(out, std::string("x_") + cases[k].safetensors_dtype);
    ASSERT_TRUE(t.found) << cases[k].storage_class;
    EXPECT_EQ(t.dtype, cases[k].safetensors_dtype);
    EXPECT_EQ(t.shape, (std::vector<std::uint64_t>{3}));
    EXPECT_EQ(t.bytes, storages[k].data) << cases[k].storage_class;
  }
}

TEST_F(ConvertPt, BigEndianFileWrittenLittleEndian) {
  Pk p;
  p.proto().dict().mark().str("w").tensor("0", "FloatStorage", 2, 0, {2}, {1}).op('u').stop();
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000, stored most significant byte first.
  const Bytes big = {0x3f, 0x80, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x00};
  const qd::hostile::RunResult r =
      Convert(Archive(p.b, {{"0", big}}, {{"byteorder", {'b', 'i', 'g'}}}).bytes);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const qdtest::RawTensor t = qdtest::TensorReadByTheTests(OutBytes(), "w");
  ASSERT_TRUE(t.found);
  EXPECT_EQ(t.bytes, (Bytes{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0}));
}

TEST_F(ConvertPt, ValuesBecomeMetadataStrings) {
  // An OrderedDict root (with the _metadata attribute torch writes), a nested
  // dict, and one value of every kind convert represents.
  Pk p;
  p.proto().od().put(0).mark();
  p.str("w").tensor("0", "FloatStorage", 2, 0, {2}, {1});
  p.str("name").str("llama").str("step").i1(7).str("neg").i4(-5).str("big").i8(1LL << 40);
  p.str("lr").fl(0.1).str("two").fl(2.0).str("tiny").fl(1e-300);
  p.str("flag").op(0x88).str("off").op(0x89);
  p.str("shape").mark().i1(40).i1(30).tuple();
  p.str("mixed").list().mark().i1(1).str("a\"b").op(0x88).fl(0.5).mark().tuple().op('e');
  p.str("size").glob("torch", "Size").mark().i1(2).i2(300).tuple().op(0x85).reduce();
  p.str("cfg").dict().mark().str("k").i1(1).op('u');
  p.op('u');
  p.dict().str("_metadata").od().mark().str("").dict().str("version").i1(1).op('s').op('u').op('s');
  p.op('b').stop();
  const qd::hostile::RunResult r = Convert(Archive(p.b, {{"0", F32s({1, 2})}}).bytes);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json header = qdtest::HeaderReadByTheTests(OutBytes());
  ASSERT_TRUE(header.contains("__metadata__"));
  const json want = {
      {"name", "llama"},   {"step", "7"},        {"neg", "-5"},
      {"big", "1099511627776"}, {"lr", "0.1"},   {"two", "2.0"},
      {"tiny", "1e-300"},  {"flag", "true"},     {"off", "false"},
      {"shape", "[40, 30]"}, {"mixed", "[1, \"a\\\"b\", true, 0.5, []]"},
      {"size", "[2, 300]"}, {"cfg.k", "1"},
  };
  EXPECT_EQ(header["__metadata__"], want);
  EXPECT_EQ(header.size(), 2u);  // __metadata__ and w
  EXPECT_EQ(Run({"check", Out().string()}).exit_code, 0);
}

// An entry convert cannot represent, or a name a safetensors header cannot
// hold: refused with the rule, exit 1, and an existing OUT left as it was.
TEST_F(ConvertPt, UnrepresentableEntriesAndNamesRefused) {
  struct Case {
    const char* what;
    void (*entry)(Pk&);
    const char* finding;  // rule, severity, field as PrintFindings writes them
  };
  const std::vector<Case> cases = {
      {"None", [](Pk& p) { p.str("n").none(); }, "ST-006 error tensor=n field=metadata"},
      {"tensor in a list",
       [](Pk& p) { p.str("q").list().tensor("0", "FloatStorage", 2, 1, {1}, {1}).op('a'); },
       "ST-006 error tensor=q field=metadata"},
      {"None in a tuple", [](Pk& p) { p.str("t").mark().i1(1).none().tuple(); },
       "ST-006 error tensor=t field=metadata"},
      {"dtype token", [](Pk& p) { p.str("d").glob("torch", "float16"); },
       "ST-006 error tensor=d field=metadata"},
      {"tensor named __metadata__",
       [](Pk& p) { p.str("__metadata__").tensor("0", "FloatStorage", 2, 0, {2}, {1}); },
       "ST-006 error tensor=__metadata__ field=name"},
  };
  for (const Case& c : cases) {
    Pk p;
    p.proto().dict().mark().str("w").tensor("0", "FloatStorage", 2, 0, {2}, {1});
    c.entry(p);
    p.op('u').stop();
    qd::hostile::WriteWhole(Out(), "old");
    const qd::hostile::RunResult r = Convert(Archive(p.b, {{"0", F32s({1, 2})}}).bytes);
    EXPECT_EQ(r.exit_code, 1) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(Out().string() + ": " + c.finding), std::string::npos)
        << c.what << ": " << r.err;
    EXPECT_EQ(qd::hostile::ReadWhole(Out()), "old") << c.what;
    fs::remove(Out());
    EXPECT_TRUE(NothingWritten()) << c.what;
  }
}

// A name that is not UTF-8 never reaches the output: the reader refuses the
// string (PT-013, docs/pt.md 4.1), so convert refuses the input.
TEST_F(ConvertPt, NameNotUtf8RefusedByTheReader) {
  Pk p;
  p.proto().dict().mark().str("x\xff").tensor("0", "FloatStorage", 2, 0, {2}, {1}).op('u').stop();
  const qd::hostile::RunResult r = Convert(Archive(p.b, {{"0", F32s({1, 2})}}).bytes);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find((dir_ / "in.pt").string() + ": PT-013 error field=opcode"), std::string::npos)
      << r.err;
  EXPECT_TRUE(NothingWritten());
}

// GPTQ tensor names: `check OUT` reads OUT as GPTQ. With no quantize config
// beside OUT the container is checked and a note says check needs one; with
// a config beside OUT that check refuses, nothing is written (docs/pt.md 13.3).
TEST_F(ConvertPt, GptqNamesCheckedAsCheckWouldRead) {
  Pk p;
  p.proto().dict().mark();
  p.str("l.qweight").tensor("0", "IntStorage", 4, 0, {1, 4}, {4, 1});
  p.str("l.qzeros").tensor("0", "IntStorage", 4, 0, {1, 1}, {1, 1});
  p.str("l.scales").tensor("1", "HalfStorage", 4, 0, {1, 4}, {4, 1});
  p.str("l.g_idx").tensor("2", "IntStorage", 8, 0, {8}, {1});  // GPTQ, not AWQ (docs/awq.md 2)
  p.op('u').stop();
  const Bytes pt =
      Archive(p.b, {{"0", Bytes(16, 0x11)}, {"1", Bytes(8, 0x3c)}, {"2", Bytes(32, 0)}}).bytes;
  const qd::hostile::RunResult without = Convert(pt);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_NE(without.err.find("note:"), std::string::npos) << without.err;
  EXPECT_EQ(Run({"check", Out().string()}).exit_code, 1);  // CFG-003: no config
  fs::remove(Out());
  qd::hostile::WriteWhole(dir_ / "quantize_config.json", "{\"bits\": 3}");  // not a GPTQ config
  const qd::hostile::RunResult with = Convert(pt);
  EXPECT_EQ(with.exit_code, 1) << with.err;
  EXPECT_NE(with.err.find("would be refused by `quantdiff check`"), std::string::npos) << with.err;
  EXPECT_FALSE(fs::exists(Out()));
}

// The same layer without g_idx is an AWQ layer (docs/awq.md 2), whose
// reader runs the CFG steps too: with no config beside OUT, the same note.
TEST_F(ConvertPt, AwqNamesCheckedAsCheckWouldRead) {
  Pk p;
  p.proto().dict().mark();
  p.str("l.qweight").tensor("0", "IntStorage", 4, 0, {1, 4}, {4, 1});
  p.str("l.qzeros").tensor("0", "IntStorage", 4, 0, {1, 1}, {1, 1});
  p.str("l.scales").tensor("1", "HalfStorage", 4, 0, {1, 4}, {4, 1});
  p.op('u').stop();
  const qd::hostile::RunResult r =
      Convert(Archive(p.b, {{"0", Bytes(16, 0x11)}, {"1", Bytes(8, 0x3c)}}).bytes);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("read as awq"), std::string::npos) << r.err;
  EXPECT_EQ(Run({"check", Out().string()}).exit_code, 1);  // CFG-003: no config
}

TEST_F(ConvertPt, OutputIsTheInputRefused) {
  Pk p;
  p.proto().dict().mark().str("w").tensor("0", "FloatStorage", 2, 0, {2}, {1}).op('u').stop();
  const Bytes pt = Archive(p.b, {{"0", F32s({1, 2})}}).bytes;
  const fs::path in = WriteInput(pt);
  const qd::hostile::RunResult r =
      Run({"convert", in.string(), "--to", "safetensors", "--out", in.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(qd::hostile::ReadWhole(in), std::string(pt.begin(), pt.end()));
  EXPECT_TRUE(NothingWritten());
}

TEST_F(ConvertPt, NotATorchFileIsAUsageError) {
  // A safetensors file (byte 8 is '{'): ClaimsPt never claims one (docs/pt.md 1.1).
  const std::string st = std::string("\x08\0\0\0\0\0\0\0{}      ", 16);
  const fs::path in = dir_ / "in.pt";
  qd::hostile::WriteWhole(in, st);
  const qd::hostile::RunResult r =
      Run({"convert", in.string(), "--to", "safetensors", "--out", Out().string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(NothingWritten());
}

}  // namespace
