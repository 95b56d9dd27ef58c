// gguf_ggml_test.cc: quantdiff's .gguf readers against ggml's own
// gguf_init_from_file_ptr on generated files (docs/gguf.md section 6).
//   - ggml's type table (block size, type size) is section 2.4's;
//   - on valid files (no nested arrays) both quantdiff readers and ggml
//     accept, and ggml's version, alignment, data offset and every tensor's
//     name, type, offset and byte size are the oracle's;
//   - on every rule's generated violation, quantdiff refuses (or warns) with
//     the rule and ggml gives the verdict section 6 records for it, so that a
//     ggml that changes its reading shows up here;
//   - files ggml's own writer makes (every metadata value type, arrays of
//     several, tensors of every decoded block type and of 1 to 4 dims): both
//     quantdiff readers accept them, read ggml's dims, and decode every
//     tensor to ggml's dequantize_row_<type> bit for bit.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/gguf.h"
#include "generators/generators.h"
#include "generators/gguf.h"
#include "oracles/gguf.h"
#include "tests/peer/peer_file.h"
#include "thirdparty/ggml/ggml_library.h"

namespace {

const qd::ggml::Library& Ggml() {
  const qd::ggml::Library* library = qd::ggml::SharedDefaultLibrary();
  if (library == nullptr) {
    ADD_FAILURE() << "ggml library does not open: " << qd::ggml::DefaultLibraryPath();
    std::abort();
  }
  return *library;
}

qd::ggml::GgufTable GgmlReads(const std::vector<std::uint8_t>& bytes) {
  qd::ggml::GgufTable table;
  EXPECT_TRUE(Ggml().ReadGgufTable(bytes.data(), bytes.size(), &table)) << "ggml has no gguf reader";
  return table;
}

TEST(GgufGgml, TypeTableIsGgmls) {
  int compared = 0;
  for (std::uint32_t id = 0; id <= 39; ++id) {
    std::int64_t values = 0;
    std::size_t bytes = 0;
    const bool ggml_sizes = Ggml().BlockGeometry(static_cast<int>(id), &values, &bytes);
    const qd::codec::GgufTypeRow* row = qd::codec::FindGgufType(id);
    ASSERT_EQ(ggml_sizes, row != nullptr) << "type id " << id;
    if (row == nullptr) continue;
    EXPECT_EQ(values, row->block_values) << row->name;
    EXPECT_EQ(bytes, row->block_bytes) << row->name;
    ++compared;
  }
  EXPECT_EQ(compared, 32);
}

TEST(GgufGgml, ValidFilesReadAlike) {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    qd::gen::Rng rng(seed);
    const qd::gen::GgufSpec spec = qd::gen::RandomGgufSpec(rng, /*allow_nested_arrays=*/false);
    const std::vector<std::uint8_t> bytes = qd::gen::WriteGguf(spec).bytes;
    const qd::ByteView view{bytes.data(), bytes.size()};
    const qd::codec::GgufResult codec = qd::codec::ReadGguf(view, "g.gguf");
    ASSERT_FALSE(codec.refused) << "seed " << seed;
    std::vector<qd::oracle::GgufTensorInfo> infos;
    std::uint64_t alignment = 0;
    std::uint64_t data_start = 0;
    ASSERT_TRUE(qd::oracle::GgufTable(view, &infos, &alignment, &data_start)) << "seed " << seed;
    const qd::ggml::GgufTable ggml = GgmlReads(bytes);
    ASSERT_TRUE(ggml.accepted) << "seed " << seed;
    EXPECT_EQ(ggml.version, spec.version);
    EXPECT_EQ(ggml.alignment, alignment);
    EXPECT_EQ(ggml.data_offset, data_start);
    ASSERT_EQ(ggml.tensors.size(), infos.size());
    std::map<std::string, std::uint64_t> codec_nbytes;
    for (const qd::codec::GgufTensor& t : codec.tensors) codec_nbytes[t.name] = t.nbytes;
    for (std::size_t i = 0; i < infos.size(); ++i) {
      EXPECT_EQ(ggml.tensors[i].name, infos[i].name) << "seed " << seed;
      EXPECT_EQ(ggml.tensors[i].type, static_cast<int>(infos[i].type)) << infos[i].name;
      EXPECT_EQ(ggml.tensors[i].offset, infos[i].offset) << infos[i].name;
      EXPECT_EQ(ggml.tensors[i].size, codec_nbytes[infos[i].name]) << infos[i].name;
      // The test's own arithmetic: elements / QK * B.
      std::uint64_t count = 1;
      for (std::uint64_t d : infos[i].ne) count *= d;
      const qd::codec::GgufTypeRow* row = qd::codec::FindGgufType(infos[i].type);
      EXPECT_EQ(ggml.tensors[i].size, count / row->block_values * row->block_bytes) << infos[i].name;
    }
  }
}

// docs/gguf.md section 6: what ggml does with each generated violation
// (by rule and, where the generator's variants differ for ggml, by its
// description); nullopt where ggml's verdict varies with the instance.
std::optional<bool> GgmlAccepts(const std::string& rule, const std::string& description) {
  // An empty name (ggml reads it) and a tensor past the end of a truncated
  // file (ggml without a context does not look at the data section).
  if (description == "empty tensor name" || description == "the file ends inside a tensor's data") return true;
  // An element count that wraps 2^64 in ggml's own overflow check: an
  // upstream finding (corpus/upstream/ggml/gguf/), pinned there.
  if (description == "element count beyond 2^63 - 1") return std::nullopt;
  // A BOOL byte other than 0 or 1: ggml reads any non-zero byte as true.
  if (rule == "GGUF-020") return true;
  // The recognised types load; everything else is refused (GGUF-018's far
  // offset, GGUF-019 and GGUF-102 because they break ggml's packing).
  return rule == "GGUF-101";
}

bool HasNestedArray(const qd::gen::GgufSpec& spec) {
  for (const qd::gen::GgufKv& kv : spec.kvs) {
    if (kv.type == 9 && kv.value.size() >= 4 && kv.value[0] == 9) return true;
  }
  return false;
}

TEST(GgufGgml, EveryRuleAsSectionSixSays) {
  for (const std::string& rule : qd::gen::GgufViolableRules()) {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
      qd::gen::Rng rng(seed);
      const qd::gen::Generated g = qd::gen::GgufViolation(rule, rng);
      const qd::ByteView view{g.bytes.data(), g.bytes.size()};
      const qd::Outcome codec = qd::codec::DecodeGgufFile(view, "g.gguf");
      bool named = false;
      for (const qd::Finding& f : codec.findings) named = named || f.rule == rule;
      ASSERT_TRUE(named) << rule << " seed " << seed << ": " << g.description;
      const qd::ggml::GgufTable ggml = GgmlReads(g.bytes);
      // A generated violation may carry a nested array from the valid
      // file it started from; ggml refuses those files whatever the rule.
      qd::gen::Rng again(seed);
      const bool nested = HasNestedArray(qd::gen::RandomGgufSpec(again, true));
      const std::optional<bool> accepts = GgmlAccepts(rule, g.description);
      if (!accepts) continue;
      EXPECT_EQ(ggml.accepted, *accepts && !nested) << rule << " seed " << seed << ": " << g.description;
    }
  }
}

TEST(GgufGgml, NestedArraysQuantdiffReadsGgmlRefuses) {
  int nested_files = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    qd::gen::Rng rng(seed);
    const qd::gen::GgufSpec spec = qd::gen::RandomGgufSpec(rng, true);
    if (!HasNestedArray(spec)) continue;
    ++nested_files;
    const std::vector<std::uint8_t> bytes = qd::gen::WriteGguf(spec).bytes;
    const qd::ByteView view{bytes.data(), bytes.size()};
    EXPECT_FALSE(qd::codec::ReadGguf(view, "g.gguf").refused) << "seed " << seed;
    EXPECT_FALSE(qd::oracle::ReadGgufFile(view, "g.gguf").refused) << "seed " << seed;
    EXPECT_FALSE(GgmlReads(bytes).accepted) << "seed " << seed << ": ggml now reads nested arrays";
  }
  EXPECT_GT(nested_files, 5);
}

std::vector<std::uint8_t> UpstreamFile(const std::string& stem) {
  for (const auto& e : std::filesystem::directory_iterator(QD_UPSTREAM_GGUF_DIR)) {
    if (e.path().filename().string().rfind(stem + "-", 0) != 0) continue;
    std::ifstream in(e.path(), std::ios::binary);
    return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), {});
  }
  ADD_FAILURE() << "no " << stem << " in " << QD_UPSTREAM_GGUF_DIR;
  return {};
}

// corpus/upstream/ggml/gguf/README.md: ggml still reads these as recorded
// there (quantdiff's side: tests/gguf_test.cc). A fixed ggml fails here.
TEST(GgufGgml, UpstreamCountWrapStillAccepted) {
  const std::vector<std::uint8_t> bytes = UpstreamFile("count-wraps-2e64");
  const qd::ggml::GgufTable ggml = GgmlReads(bytes);
  EXPECT_TRUE(ggml.accepted) << "ggml now refuses a 4 x 2^62 x 8 f32 tensor";
}

TEST(GgufGgml, UpstreamDataAllocationStillAborts) {
  constexpr int kAccepted = 42;
  constexpr int kRefused = 43;
  const std::vector<std::uint8_t> bytes = UpstreamFile("data-alloc-abort");
  const qd::ggml::Library& ggml = Ggml();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("GGML_NO_BACKTRACE", "1", 1);  // no debugger attached to print a trace
    _exit(ggml.LoadGgufWithData(bytes.data(), bytes.size()) ? kAccepted : kRefused);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // ggml aborts (SIGABRT); under AddressSanitizer its malloc is the
  // sanitizer's, which reports the 4 TiB request and exits 1 instead.
  const bool returned = WIFEXITED(status) && (WEXITSTATUS(status) == kAccepted || WEXITSTATUS(status) == kRefused);
  EXPECT_FALSE(returned) << "ggml now returns from a 2^40-element f32 tensor in a 96-byte file (exit status "
                         << WEXITSTATUS(status) << ", 42 accepted, 43 refused)";
}

// ---- Files ggml's writer makes --------------------------------------------

template <typename T>
std::vector<std::uint8_t> LittleEndian(T value) {  // the test host is little endian
  std::vector<std::uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

// One value of every gguf_type but ARRAY (docs/gguf.md 2.2), then arrays of
// BOOL, INT16, STRING, UINT64 and an empty FLOAT32 one. ggml's writer cannot
// write a nested array (its setters take no ARRAY element type); generated
// files cover those (NestedArraysQuantdiffReadsGgmlRefuses).
std::vector<qd::ggml::GgufWriteValue> EveryValueType() {
  std::vector<std::uint8_t> i16s;
  for (const std::int16_t v : {-300, 0, 32767}) {
    const std::vector<std::uint8_t> b = LittleEndian(v);
    i16s.insert(i16s.end(), b.begin(), b.end());
  }
  std::vector<std::uint8_t> u64s = LittleEndian<std::uint64_t>(1);
  const std::vector<std::uint8_t> big = LittleEndian<std::uint64_t>(std::uint64_t{1} << 63);
  u64s.insert(u64s.end(), big.begin(), big.end());
  return {
      {"t.u8", 0, false, {200}, {}},
      {"t.i8", 1, false, LittleEndian<std::int8_t>(-5), {}},
      {"t.u16", 2, false, LittleEndian<std::uint16_t>(65000), {}},
      {"t.i16", 3, false, LittleEndian<std::int16_t>(-300), {}},
      {"t.u32", 4, false, LittleEndian<std::uint32_t>(4000000000u), {}},
      {"t.i32", 5, false, LittleEndian<std::int32_t>(-7), {}},
      {"t.f32", 6, false, LittleEndian(1.5f), {}},
      {"t.bool.true", 7, false, {1}, {}},
      {"t.bool.false", 7, false, {0}, {}},
      {"t.str", 8, false, {}, {"h\xC3\xA9llo"}},
      {"t.u64", 10, false, LittleEndian<std::uint64_t>(std::uint64_t{1} << 40), {}},
      {"t.i64", 11, false, LittleEndian<std::int64_t>(-(std::int64_t{1} << 40)), {}},
      {"t.f64", 12, false, LittleEndian(0.1), {}},
      {"t.arr.bool", 7, true, {1, 0, 1}, {}},
      {"t.arr.i16", 3, true, i16s, {}},
      {"t.arr.str", 8, true, {}, {"a", "", "ccc"}},
      {"t.arr.u64", 10, true, u64s, {}},
      {"t.arr.f32.empty", 6, true, {}, {}},
  };
}

struct WrittenTensor {
  std::string name;
  std::string type;  // ggml's name; "f32" for the plain one
  int id;
  std::vector<std::int64_t> ne;  // as given to ggml_new_tensor
  std::vector<std::uint8_t> data;
  std::vector<float> ggml_values;  // ggml's dequantize_row_<type> of data
};

// ggml_n_dims: the dims up to the last one above 1 (at least one): what
// ggml's writer stores as n_dims.
std::vector<std::uint64_t> StoredNe(const std::vector<std::int64_t>& ne) {
  std::size_t n = ne.size();
  while (n > 1 && ne[n - 1] == 1) --n;
  return std::vector<std::uint64_t>(ne.begin(), ne.begin() + static_cast<std::ptrdiff_t>(n));
}

// A tensor of each decoded block type and an f32 one, in shapes of 1 to 4
// dims (some with inner or trailing 1s), blocks made by ggml's
// quantize_row_<type>_ref of values in [-4, 4).
std::vector<WrittenTensor> TensorsOfEveryType(qd::gen::Rng& rng) {
  static const std::vector<std::pair<std::string, int>> kTypes = {
      {"q4_0", 2},  {"q4_1", 3},  {"q5_0", 6},  {"q5_1", 7},    {"q8_0", 8},   {"q2_K", 10}, {"q3_K", 11},
      {"q4_K", 12}, {"q5_K", 13}, {"q6_K", 14}, {"iq4_nl", 20}, {"mxfp4", 39}, {"f32", 0}};
  const qd::ggml::Library& ggml = Ggml();
  std::vector<WrittenTensor> tensors;
  for (const auto& [type, id] : kTypes) {
    std::int64_t block_values = 0;
    std::size_t block_bytes = 0;
    EXPECT_TRUE(ggml.BlockGeometry(id, &block_values, &block_bytes)) << type;
    const std::int64_t row = block_values * static_cast<std::int64_t>(1 + qd::gen::Pick(rng, 3));
    const std::vector<std::vector<std::int64_t>> shapes = {
        {row}, {row, 3}, {row, 1, 2}, {row, 2, 3, 1}, {row, 2, 1, 2}, {row, 1}};
    const std::vector<std::int64_t> ne = shapes[qd::gen::Pick(rng, shapes.size())];
    std::int64_t count = 1;
    for (const std::int64_t d : ne) count *= d;
    std::vector<float> input(static_cast<std::size_t>(count));
    for (float& v : input) v = static_cast<float>(static_cast<std::int64_t>(qd::gen::Pick(rng, 8000)) - 4000) / 1000;
    WrittenTensor t{"blk." + std::to_string(tensors.size()) + "." + type, type, id, ne, {}, {}};
    if (id == 0) {
      t.data.resize(input.size() * 4);
      std::memcpy(t.data.data(), input.data(), t.data.size());
      t.ggml_values = input;  // f32 is stored as it is
    } else {
      t.data.resize(static_cast<std::size_t>(count / block_values) * block_bytes);
      EXPECT_TRUE(ggml.QuantizeReference(type, input.data(), t.data.data(), count)) << type;
      t.ggml_values.resize(input.size());
      EXPECT_TRUE(ggml.Dequantize(type, t.data.data(), t.ggml_values.data(), count)) << type;
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

const qd::DecodedTensor* Named(const qd::Outcome& o, const std::string& name) {
  for (const qd::DecodedTensor& t : o.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(GgufGgml, FilesGgmlsWriterMakesReadAndDecodeAlike) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    qd::gen::Rng rng(seed);
    const std::vector<WrittenTensor> written = TensorsOfEveryType(rng);
    std::vector<qd::ggml::GgufWriteTensor> to_write;
    for (const WrittenTensor& t : written) to_write.push_back({t.name, t.id, t.ne, t.data.data()});
    std::vector<std::uint8_t> bytes;
    ASSERT_TRUE(Ggml().WriteGguf(EveryValueType(), to_write, &bytes)) << "ggml's writer failed";
    const qd::ByteView view{bytes.data(), bytes.size()};
    const qd::codec::GgufResult codec = qd::codec::ReadGguf(view, "w.gguf");
    ASSERT_FALSE(codec.refused) << "seed " << seed << ": " << codec.findings.back().rule;
    EXPECT_TRUE(codec.findings.empty()) << "seed " << seed;  // ggml packs as section 2.5 says
    std::vector<qd::oracle::GgufTensorInfo> infos;
    std::uint64_t alignment = 0;
    std::uint64_t data_start = 0;
    ASSERT_TRUE(qd::oracle::GgufTable(view, &infos, &alignment, &data_start)) << "seed " << seed;
    const qd::ggml::GgufTable ggml = GgmlReads(bytes);
    ASSERT_TRUE(ggml.accepted);
    ASSERT_EQ(infos.size(), written.size());
    ASSERT_EQ(ggml.tensors.size(), written.size());
    const qd::Outcome codec_decoded = qd::codec::DecodeGgufFile(view, "w.gguf");
    const qd::Outcome oracle_decoded = qd::oracle::ReadGgufFile(view, "w.gguf");
    ASSERT_FALSE(codec_decoded.refused);
    ASSERT_FALSE(oracle_decoded.refused);
    EXPECT_TRUE(oracle_decoded.findings.empty());
    for (std::size_t i = 0; i < written.size(); ++i) {
      const WrittenTensor& w = written[i];
      // Dims, innermost first: ggml stores ggml_n_dims of them and reports
      // all four (unused ones 1); quantdiff reads the stored ones.
      const std::vector<std::uint64_t> stored = StoredNe(w.ne);
      EXPECT_EQ(infos[i].name, w.name);
      EXPECT_EQ(infos[i].ne, stored) << w.name;
      std::vector<std::int64_t> ggml_ne(stored.begin(), stored.end());
      ggml_ne.resize(4, 1);
      EXPECT_EQ(ggml.tensors[i].ne, ggml_ne) << w.name;  // the pinned build exports gguf_get_tensor_ne
      int codec_rows = 0;
      for (const qd::codec::GgufTensor& t : codec.tensors) {
        if (t.name != w.name) continue;
        ++codec_rows;
        EXPECT_EQ(t.ne, stored) << w.name;
      }
      EXPECT_EQ(codec_rows, 1) << w.name;
      // Decoded: shape the dims reversed, values ggml's own dequantization.
      const std::vector<std::uint64_t> shape(stored.rbegin(), stored.rend());
      for (const qd::Outcome* o : {&codec_decoded, &oracle_decoded}) {
        const char* side = o == &codec_decoded ? " codec" : " oracle";
        const qd::DecodedTensor* t = Named(*o, w.name);
        ASSERT_NE(t, nullptr) << w.name << side;
        EXPECT_EQ(t->shape, shape) << w.name << side;
        EXPECT_EQ(qdtest::peer::FirstDifference(t->values, w.ggml_values), "") << w.name << side;
      }
    }
  }
}

// Upstream finding (corpus/upstream/ggml/README.md, gguf/): ggml's writer
// takes general.alignment = 64 (gguf_set_val_u32 checks it is a power of
// two) but keeps placing tensors and padding the data section by its
// default 32. Tensors of 128, 160 and 32 bytes land at 0, 128 and 288; 288
// is no multiple of 64, so ggml's own reader refuses the file it wrote, and
// quantdiff refuses it with GGUF-017 (docs/gguf.md 2.3). A fixed writer
// fails here.
TEST(GgufGgml, UpstreamWriterIgnoresGeneralAlignment) {
  const std::vector<float> values(40, 1.0f);
  const std::vector<qd::ggml::GgufWriteTensor> tensors = {
      {"a", 0, {32}, values.data()}, {"b", 0, {40}, values.data()}, {"c", 0, {8}, values.data()}};
  std::vector<std::uint8_t> bytes;
  ASSERT_TRUE(Ggml().WriteGguf({{"general.alignment", 4, false, LittleEndian<std::uint32_t>(64), {}}}, tensors,
                               &bytes));
  const qd::ByteView view{bytes.data(), bytes.size()};
  const qd::codec::GgufResult codec = qd::codec::ReadGguf(view, "w.gguf");
  ASSERT_TRUE(codec.refused);
  EXPECT_EQ(codec.findings.back().rule, "GGUF-017");
  EXPECT_EQ(codec.findings.back().tensor, "c");
  const qd::Outcome oracle = qd::oracle::ReadGgufFile(view, "w.gguf");
  ASSERT_TRUE(oracle.refused);
  EXPECT_EQ(oracle.findings.back().rule, "GGUF-017");
  EXPECT_FALSE(GgmlReads(bytes).accepted) << "ggml's writer now honours general.alignment";
}

}  // namespace
