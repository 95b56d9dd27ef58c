// gguf_ggml_test.cc: quantdiff's .gguf readers against ggml's own
// gguf_init_from_file_ptr on generated files (docs/gguf.md section 6).
//   - ggml's type table (block size, type size) is section 2.4's;
//   - on valid files (no nested arrays) both quantdiff readers and ggml
//     accept, and ggml's version, alignment, data offset and every tensor's
//     name, type, offset and byte size are the oracle's;
//   - on every rule's generated violation, quantdiff refuses (or warns) with
//     the rule and ggml gives the verdict section 6 records for it, so that a
//     ggml that changes its reading shows up here.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/gguf.h"
#include "generators/generators.h"
#include "generators/gguf.h"
#include "oracles/gguf.h"
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

}  // namespace
