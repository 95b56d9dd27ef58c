// bnb_pt_oracle_test_files.h: the .pt files and checks the bitsandbytes-in-.pt
// oracle tests share (bnb_pt_oracle_test.cc, bnb_pt_rejects_oracle_test.cc):
// a pickle writer of torch values (tensors, views, shared storages, lists,
// tuples), the files it builds and where their data starts, and the
// expectations on an outcome. The layout the offsets follow is the one
// bnb_pt_oracle_test.cc's header describes.
#ifndef QUANTDIFF_ORACLES_BNB_PT_ORACLE_TEST_FILES_H_
#define QUANTDIFF_ORACLES_BNB_PT_ORACLE_TEST_FILES_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oracles/bnb_test_tables.h"
#include "oracles/bnb_pt_layers.h"
#include "oracles/oracle_test_files.h"
#include "oracles/pt.h"
#include "oracles/pt_test_support.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle::bnb_pt_test {

using pt_test::Bytes;
using pt_test::Pkl;
using pt_test::Put16;
using pt_test::Put32;
using pt_test::Put64;
using pt_test::Text;
using pt_test::Zip;
using pt_test::ZipEntry;
using qd::oracle::test::Bits;

inline const std::string kFile = "dir/model.pt";
inline constexpr std::int64_t kPkl = 40;  // ds of a/data.pkl, the first entry

using qd::oracle::test::kFp4;
using qd::oracle::test::kNf4;

inline constexpr std::uint32_t kInf = 0x7F800000;
inline constexpr std::uint32_t kNaN = 0x7FC00000;

inline std::uint32_t BitsOf(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline Bytes F32Bytes(const Bits& bits) {
  Bytes out;
  for (const std::uint32_t b : bits) Put32(&out, b);
  return out;
}

inline Bytes F64Bytes(double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  Bytes out;
  Put64(&out, bits);
  return out;
}

// ---------------------------------------------------------------------------
// Building .pt files: a root dict of items, each value written by an Item.

struct Record {
  std::string cls;
  Bytes data;
};

struct Writer {
  Pkl p;
  std::vector<Record> records;  // data/<index>

  std::string AddRecord(const std::string& cls, const Bytes& data) {
    records.push_back({cls, data});
    return std::to_string(records.size() - 1);
  }
};

using Item = std::function<void(Writer&)>;

inline std::uint64_t ItemSize(const std::string& cls) {
  if (cls == "DoubleStorage" || cls == "LongStorage") return 8;
  if (cls == "FloatStorage" || cls == "IntStorage") return 4;
  if (cls == "HalfStorage" || cls == "BFloat16Storage" || cls == "ShortStorage") return 2;
  return 1;  // Char, Byte, Bool
}

inline std::vector<std::int64_t> Contiguous(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> stride(shape.size(), 1);
  for (std::size_t d = shape.size(); d > 1; --d) stride[d - 2] = stride[d - 1] * shape[d - 1];
  return stride;
}

// A view of a new storage holding data.
inline Item View(const std::string& cls, const Bytes& data, std::int64_t offset,
          const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& stride) {
  return [=](Writer& w) {
    const std::string key = w.AddRecord(cls, data);
    w.p.tensor(cls, key, static_cast<std::int64_t>(data.size() / ItemSize(cls)), offset, shape,
               stride);
  };
}

// A contiguous tensor over a new storage holding exactly its data.
inline Item Tensor(const std::string& cls, const Bytes& data, const std::vector<std::int64_t>& shape) {
  return View(cls, data, 0, shape, Contiguous(shape));
}

inline Item F32(const Bits& bits, const std::vector<std::int64_t>& shape) {
  return Tensor("FloatStorage", F32Bytes(bits), shape);
}
inline Item U8(const Bytes& bytes, const std::vector<std::int64_t>& shape) {
  return Tensor("ByteStorage", bytes, shape);
}

// One storage several views name (its record is added at the first view).
struct SharedStorage {
  std::string cls;
  Bytes data;
  std::string key;
};

inline Item ViewOf(const std::shared_ptr<SharedStorage>& storage, std::int64_t offset,
            const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& stride) {
  return [=](Writer& w) {
    if (storage->key.empty()) storage->key = w.AddRecord(storage->cls, storage->data);
    w.p.tensor(storage->cls, storage->key,
               static_cast<std::int64_t>(storage->data.size() / ItemSize(storage->cls)), offset,
               shape, stride);
  };
}

inline Item Size(const std::vector<std::int64_t>& dims) {
  return [=](Writer& w) { w.p.global("torch", "Size").ints(dims).op(0x85).reduce(); };
}
inline Item Dtype(const std::string& name) {
  return [=](Writer& w) { w.p.global("torch", name); };
}
inline Item Int(std::int64_t value) {
  return [=](Writer& w) { w.p.integer(value); };
}
inline Item Str(const std::string& text) {
  return [=](Writer& w) { w.p.str(text); };
}
inline Item None() {
  return [](Writer& w) { w.p.op(0x4E); };
}
inline Item Bool(bool value) {
  return [=](Writer& w) { w.p.op(value ? 0x88 : 0x89); };
}
// BINFLOAT: the binary64 bits, big-endian.
inline Item Float(double value) {
  return [=](Writer& w) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    w.p.op(0x47);
    for (int i = 7; i >= 0; --i) w.p.op(static_cast<std::uint8_t>(bits >> (8 * i)));
  };
}
inline Item List(const std::vector<Item>& items) {
  return [=](Writer& w) {
    w.p.op(0x5D);  // EMPTY_LIST
    if (items.empty()) return;
    w.p.mark();
    for (const Item& item : items) item(w);
    w.p.op(0x65);  // APPENDS
  };
}
inline Item Tuple(const std::vector<Item>& items) {
  return [=](Writer& w) {
    w.p.mark();
    for (const Item& item : items) item(w);
    w.p.tuple();
  };
}

struct Built {
  Bytes bytes;
  std::vector<std::int64_t> ds;  // data start of a/data/<k>
};

inline Built Build(const std::vector<std::pair<std::string, Item>>& entries,
            const std::string& version = "3\n") {
  Writer w;
  w.p.proto().dict();
  if (!entries.empty()) {
    w.p.mark();
    for (const auto& [key, item] : entries) {
      w.p.str(key);
      item(w);
    }
    w.p.setitems();
  }
  w.p.stop();
  std::vector<ZipEntry> zip = {{"a/data.pkl", w.p.b}};
  for (std::size_t k = 0; k < w.records.size(); ++k) {
    zip.push_back({"a/data/" + std::to_string(k), w.records[k].data});
  }
  zip.push_back({"a/version", Text(version)});
  Built built;
  built.bytes = Zip(zip);
  std::int64_t h = 0;
  for (std::size_t i = 0; i < zip.size(); ++i) {
    const std::int64_t ds = h + 30 + static_cast<std::int64_t>(zip[i].name.size());
    if (i >= 1 && i <= w.records.size()) built.ds.push_back(ds);
    h = ds + static_cast<std::int64_t>(zip[i].data.size());
  }
  return built;
}

inline qd::Outcome Read(const Built& file, std::vector<PtTensorBytes>* tensors = nullptr,
                 std::vector<PtValueEntry>* values = nullptr, PtValueGraph* graph = nullptr) {
  return ReadPtFile(qd::ByteView{file.bytes.data(), file.bytes.size()}, kFile, tensors, values,
                    graph);
}

// ---------------------------------------------------------------------------
// Checking outcomes.

inline std::string Describe(const qd::Outcome& outcome) {
  std::string text = outcome.refused ? "refused" : "accepted";
  for (const qd::Finding& f : outcome.findings) {
    text += "\n  " + f.rule + (f.severity == qd::Severity::kError ? " error" : " warning") +
            " tensor=" + f.tensor + " field=" + f.field +
            " byte_offset=" + std::to_string(f.byte_offset) + " block=" + std::to_string(f.block) +
            " element=" + std::to_string(f.element) + ": " + f.message;
  }
  return text;
}

inline void ExpectFinding(const qd::Finding& f, const std::string& rule, qd::Severity severity,
                   const std::string& tensor, const std::string& field, std::int64_t byte_offset,
                   std::int64_t block, std::int64_t element) {
  test_files::ExpectFindingFields(f, rule, severity, kFile, tensor, field, byte_offset, -1, block, element);
}

// Refused; the last finding is this error (every field), the ones before it
// are warnings, nothing is decoded and the tables are not given.
inline void ExpectError(const Built& file, const std::string& rule, const std::string& tensor,
                 const std::string& field, std::int64_t byte_offset, std::int64_t block = -1,
                 std::int64_t element = -1) {
  std::vector<PtTensorBytes> tensors;
  std::vector<PtValueEntry> values;
  PtValueGraph graph;
  const qd::Outcome o = Read(file, &tensors, &values, &graph);
  ASSERT_TRUE(o.refused) << Describe(o);
  ASSERT_FALSE(o.findings.empty());
  SCOPED_TRACE(Describe(o));
  ExpectFinding(o.findings.back(), rule, qd::Severity::kError, tensor, field, byte_offset, block,
                element);
  for (std::size_t i = 0; i + 1 < o.findings.size(); ++i) {
    EXPECT_EQ(o.findings[i].severity, qd::Severity::kWarning);
  }
  EXPECT_TRUE(o.tensors.empty());
  EXPECT_TRUE(tensors.empty());
  EXPECT_TRUE(values.empty());
  EXPECT_TRUE(graph.nodes.empty());
}

inline const qd::DecodedTensor* FindDecoded(const qd::Outcome& outcome, const std::string& name) {
  for (const qd::DecodedTensor& t : outcome.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

inline void ExpectValues(const qd::Outcome& outcome, const std::string& name,
                  const std::vector<std::uint64_t>& shape, const Bits& bits) {
  const qd::DecodedTensor* found = FindDecoded(outcome, name);
  ASSERT_NE(found, nullptr) << "no decoded tensor " << name << "\n" << Describe(outcome);
  EXPECT_EQ(found->shape, shape);
  ASSERT_EQ(found->values.size(), bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(BitsOf(found->values[i]), bits[i]) << name << " element " << i;
  }
}

inline std::vector<std::string> DecodedNames(const qd::Outcome& outcome) {
  std::vector<std::string> names;
  for (const qd::DecodedTensor& t : outcome.tensors) names.push_back(t.name);
  return names;
}

// ---------------------------------------------------------------------------
// The layers the tests start from.

// W "w": U8 [2] = F0 7A, codes 15, 0, 7, 10 (the high nibble is the even
// element, BNB-002).
inline Item PackedW() { return U8({0xF0, 0x7A}, {2}); }

// The flat 7-item list (docs/pt.md 7.1, quantize_4bit of 0.40):
// [absmax F32 [1] = 2.0, torch.Size([4]), torch.float32, 64, None, 'nf4',
//  quant_map F32 [16] = the NF4 table].
// With PackedW the records are data/0 = w, data/1 = absmax, data/2 = quant_map.
inline std::vector<Item> Flat7() {
  return {F32({0x40000000}, {1}), Size({4}), Dtype("float32"), Int(64), None(), Str("nf4"),
          F32(kNf4, {16})};
}

inline Built FlatFile(const std::vector<Item>& state) {
  return Build({{"w", PackedW()}, {"w.quant_state", List(state)}});
}

inline std::vector<Item> With(std::vector<Item> items, std::size_t index, const Item& item) {
  items[index] = item;
  return items;
}

// state2 as quantize_blockwise returned it: [absmax2 F32 [1] = 1 + 2^-12,
// code F32 [256] (code[5] = 1 + 2^-12, all else 0), 256, False,
// torch.float32, None, None].
inline const std::uint32_t kOnePlus12 = 0x3F800800;  // 1 + 2^-12
inline Bits Code256(const std::map<int, std::uint32_t>& entries) {
  Bits code(256, 0);
  for (const auto& [index, bits] : entries) code[index] = bits;
  return code;
}
inline std::vector<Item> State2() {
  return {F32({kOnePlus12}, {1}), F32(Code256({{5, kOnePlus12}}), {256}), Int(256), Bool(false),
          Dtype("float32"), None(), None()};
}

// The nested 6-item list: [absmax U8 [1] = code 5, Size([2]), float32, 64,
// [offset, state2], 'nf4'] with W "w" = U8 [1] F0 (codes 15, 0). Records
// with a tensor offset: 0 = w, 1 = absmax, 2 = offset, 3 = absmax2, 4 = code.
inline std::vector<Item> Nested6(const Item& offset, const std::vector<Item>& state2 = State2()) {
  return {U8({5}, {1}), Size({2}), Dtype("float32"), Int(64), List({offset, List(state2)}),
          Str("nf4")};
}

inline Built NestedFile(const std::vector<Item>& state) {
  return Build({{"w", U8({0xF0}, {1})}, {"w.quant_state", List(state)}});
}

}  // namespace qd::oracle::bnb_pt_test

#endif  // QUANTDIFF_ORACLES_BNB_PT_ORACLE_TEST_FILES_H_
