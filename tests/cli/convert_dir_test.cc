// convert_dir_test.cc: `quantdiff convert DIR --to safetensors --out OUTDIR`
// (the built binary) on torch model directories built here from .pt files
// made byte by byte (tests/pt_test_builder.h). Expected tensor bytes are the
// storages' bytes in C order, shard names and the index are docs/model_dir.md
// section 7's written out by hand, and OUTDIR's files are read by
// tests/safetensors_by_the_tests.h, never by quantdiff's readers.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <set>
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

std::string Text(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::vector<std::uint8_t> FileBytes(const fs::path& path) {
  const std::string s = qd::hostile::ReadWhole(path);
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

// {"w": F32 [2] = 1, 2} plus, when STEP >= 0, the value entry "step".
Bytes OneTensorPt(const std::string& name, int step = -1) {
  Pk p;
  p.proto().dict().mark().str(name).tensor("0", "FloatStorage", 2, 0, {2}, {1});
  if (step >= 0) p.str("step").i1(step);
  p.op('u').stop();
  return Archive(p.b, {{"0", F32s({1, 2})}}).bytes;
}

class ConvertDir : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(QD_TEST_TMPDIR) / info->name();
    fs::remove_all(root_);
    fs::create_directories(In());
    fs::create_directories(root_ / "scratch");
  }
  fs::path In() const { return root_ / "in"; }
  fs::path Out() const { return root_ / "out"; }
  void Put(const std::string& name, const std::string& bytes) { qd::hostile::WriteWhole(In() / name, bytes); }
  qd::hostile::RunResult Run(const std::vector<std::string>& args) {
    return qd::hostile::Quantdiff(args, root_ / "scratch");
  }
  qd::hostile::RunResult Convert() {
    return Run({"convert", In().string(), "--to", "safetensors", "--out", Out().string()});
  }
  std::set<std::string> Names(const fs::path& dir) const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }
  // Beside the input only what the test made: no OUTDIR, no temporary directory.
  bool NothingWritten() const { return Names(root_) == std::set<std::string>{"in", "scratch"}; }
  fs::path root_;
};

TEST_F(ConvertDir, OneWeightFileBecomesModelSafetensorsWithItsConfigs) {
  Pk p;
  std::vector<float> storage = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
  p.proto().dict().mark();
  p.str("lm_head.weight").tensor("0", "FloatStorage", 6, 0, {2, 3}, {1, 2});  // a transposed view
  p.str("norm.weight").tensor("1", "HalfStorage", 3, 0, {3}, {1});
  p.str("epoch").i1(3);
  p.op('u').stop();
  const Bytes half = {0x00, 0x3c, 0x00, 0x40, 0x00, 0x42};  // 1.0, 2.0, 3.0 in F16
  Put("pytorch_model.bin", Text(Archive(p.b, {{"0", F32s(storage)}, {"1", half}}).bytes));
  Put("config.json", "{\"model_type\": \"llama\"}\n");
  Put("pytorch_model.quantize_config.json", "{\"note\": \"not GPTQ weights\"}\n");
  Put("generation_config.json", "{}\n");
  Put("tokenizer.json", "{}\n");
  const qd::hostile::RunResult r = Convert();
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The configs the directory rules read, the stem's one under the new stem;
  // nothing else.
  EXPECT_EQ(Names(Out()), (std::set<std::string>{"model.safetensors", "config.json",
                                                  "model.quantize_config.json"}));
  EXPECT_EQ(qd::hostile::ReadWhole(Out() / "config.json"), "{\"model_type\": \"llama\"}\n");
  EXPECT_EQ(qd::hostile::ReadWhole(Out() / "model.quantize_config.json"),
            "{\"note\": \"not GPTQ weights\"}\n");
  const std::vector<std::uint8_t> out = FileBytes(Out() / "model.safetensors");
  const qdtest::RawTensor head = qdtest::TensorReadByTheTests(out, "lm_head.weight");
  ASSERT_TRUE(head.found);
  EXPECT_EQ(head.dtype, "F32");
  EXPECT_EQ(head.shape, (std::vector<std::uint64_t>{2, 3}));
  // Element (i, j) is storage[i + 2j].
  EXPECT_EQ(head.bytes, F32s({0.5f, 2.5f, 4.5f, 1.5f, 3.5f, 5.5f}));
  const qdtest::RawTensor norm = qdtest::TensorReadByTheTests(out, "norm.weight");
  ASSERT_TRUE(norm.found);
  EXPECT_EQ(norm.dtype, "F16");
  EXPECT_EQ(norm.bytes, half);
  EXPECT_EQ(qdtest::HeaderReadByTheTests(out)["__metadata__"], (json{{"epoch", "3"}}));
  EXPECT_EQ(Run({"check", Out().string()}).exit_code, 0);
  EXPECT_EQ(Names(root_), (std::set<std::string>{"in", "out", "scratch"}));  // no temporary left
}

// Two shards: model-0000k-of-00002.safetensors in shard order, and Hugging
// Face's index (tensor bytes as total_size, every tensor mapped to its shard).
TEST_F(ConvertDir, TwoShardsGetShardNamesAndAnIndex) {
  Pk first;
  first.proto().dict().mark();
  first.str("a.weight").tensor("0", "FloatStorage", 2, 0, {2}, {1});
  first.str("a.bias").tensor("1", "IntStorage", 3, 0, {3}, {1});
  first.str("step").i1(7);
  first.op('u').stop();
  const Bytes ints = {1, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  Pk second;
  second.proto().dict().mark();
  second.str("b.weight").tensor("0", "FloatStorage", 4, 0, {2, 2}, {1, 2});  // transposed
  second.op('u').stop();
  Put("pytorch_model-00001-of-00002.bin",
      Text(Archive(first.b, {{"0", F32s({1, 2})}, {"1", ints}}).bytes));
  Put("pytorch_model-00002-of-00002.bin", Text(Archive(second.b, {{"0", F32s({1, 2, 3, 4})}}).bytes));
  const json in_index = {{"weight_map",
                          {{"a.weight", "pytorch_model-00001-of-00002.bin"},
                           {"a.bias", "pytorch_model-00001-of-00002.bin"},
                           {"b.weight", "pytorch_model-00002-of-00002.bin"}}}};
  Put("pytorch_model.bin.index.json", in_index.dump());
  Put("config.json", "{}");
  const qd::hostile::RunResult r = Convert();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Names(Out()), (std::set<std::string>{"model-00001-of-00002.safetensors",
                                                  "model-00002-of-00002.safetensors",
                                                  "model.safetensors.index.json", "config.json"}));
  const json index = json::parse(qd::hostile::ReadWhole(Out() / "model.safetensors.index.json"));
  const json want_index = {{"metadata", {{"total_size", 8 + 12 + 16}}},
                           {"weight_map",
                            {{"a.weight", "model-00001-of-00002.safetensors"},
                             {"a.bias", "model-00001-of-00002.safetensors"},
                             {"b.weight", "model-00002-of-00002.safetensors"}}}};
  EXPECT_EQ(index, want_index);
  const std::vector<std::uint8_t> one = FileBytes(Out() / "model-00001-of-00002.safetensors");
  const std::vector<std::uint8_t> two = FileBytes(Out() / "model-00002-of-00002.safetensors");
  EXPECT_EQ(qdtest::TensorReadByTheTests(one, "a.weight").bytes, F32s({1, 2}));
  const qdtest::RawTensor bias = qdtest::TensorReadByTheTests(one, "a.bias");
  EXPECT_EQ(bias.dtype, "I32");
  EXPECT_EQ(bias.bytes, ints);
  EXPECT_EQ(qdtest::HeaderReadByTheTests(one)["__metadata__"], (json{{"step", "7"}}));
  EXPECT_FALSE(qdtest::TensorReadByTheTests(one, "b.weight").found);
  const qdtest::RawTensor b = qdtest::TensorReadByTheTests(two, "b.weight");
  EXPECT_EQ(b.shape, (std::vector<std::uint64_t>{2, 2}));
  EXPECT_EQ(b.bytes, F32s({1, 3, 2, 4}));
  EXPECT_FALSE(qdtest::HeaderReadByTheTests(two).contains("__metadata__"));
  EXPECT_EQ(qd::hostile::ReadWhole(Out() / "config.json"), "{}");
  const qd::hostile::RunResult check = Run({"check", Out().string()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("2 shards, total_size counts tensor bytes"), std::string::npos) << check.out;
}

// OUTDIR exists (an empty directory, a file, a dangling link): exit 2, left
// as it was.
TEST_F(ConvertDir, ExistingOutdirRefused) {
  Put("pytorch_model.bin", Text(OneTensorPt("w")));
  fs::create_directories(Out());
  qd::hostile::RunResult r = Convert();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("it exists"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(Out()));
  fs::remove(Out());
  qd::hostile::WriteWhole(Out(), "mine");
  r = Convert();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(qd::hostile::ReadWhole(Out()), "mine");
  fs::remove(Out());
  // A dangling link: creating OUTDIR would create its target elsewhere.
  fs::create_symlink(root_ / "elsewhere", Out());
  r = Convert();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(Out())));
  EXPECT_FALSE(fs::exists(root_ / "elsewhere"));
  fs::remove(Out());
  EXPECT_TRUE(NothingWritten());
}

// A refusal at every stage leaves nothing: the input refused by the
// directory rules (before anything is created), an entry the output cannot
// hold (after the temporary directory exists), and an output `check OUTDIR`
// would refuse (after every file is written).
TEST_F(ConvertDir, RefusalLeavesNothing) {
  // IDX-002: two weight sets.
  Put("pytorch_model.bin", Text(OneTensorPt("w")));
  Put("model.safetensors", std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  qd::hostile::RunResult r = Convert();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("IDX-002 error"), std::string::npos) << r.err;
  EXPECT_TRUE(NothingWritten());
  fs::remove(In() / "model.safetensors");

  // ST-006: a None entry has no __metadata__ string.
  Pk p;
  p.proto().dict().mark().str("w").tensor("0", "FloatStorage", 2, 0, {2}, {1}).str("n").none();
  p.op('u').stop();
  Put("pytorch_model.bin", Text(Archive(p.b, {{"0", F32s({1, 2})}}).bytes));
  Put("config.json", "{}");
  r = Convert();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(Out().string() + "/model.safetensors: ST-006 error tensor=n field=metadata"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(NothingWritten());

  // GPTQ tensor names with a quantize config that is not one: the .bin is
  // read as GPTQ with the config beside it, as its safetensors twin would
  // be (docs/pt.md 6.5), so the input itself is refused (CFG-006, no
  // group_size), as `check` refuses it.
  Pk g;
  g.proto().dict().mark();
  g.str("l.qweight").tensor("0", "IntStorage", 4, 0, {1, 4}, {4, 1});
  g.str("l.qzeros").tensor("0", "IntStorage", 4, 0, {1, 1}, {1, 1});
  g.str("l.scales").tensor("1", "HalfStorage", 4, 0, {1, 4}, {4, 1});
  g.op('u').stop();
  Put("pytorch_model.bin",
      Text(Archive(g.b, {{"0", Bytes(16, 0x11)}, {"1", Bytes(8, 0x3c)}}).bytes));
  Put("quantize_config.json", "{\"bits\": 3}");
  r = Convert();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find((In() / "quantize_config.json").string() + ": CFG-006 error field=group_size"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("refused (as `quantdiff check` reads it); nothing written"), std::string::npos) << r.err;
  EXPECT_TRUE(NothingWritten());
}

TEST_F(ConvertDir, SafetensorsDirectoryIsAUsageError) {
  Put("model.safetensors", std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  const qd::hostile::RunResult r = Convert();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds safetensors weights"), std::string::npos) << r.err;
  EXPECT_TRUE(NothingWritten());
}

TEST_F(ConvertDir, HelpNamesTheDirectoryForm) {
  const qd::hostile::RunResult r = Run({"convert", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("quantdiff convert DIR --to safetensors --out OUTDIR"), std::string::npos);
}

}  // namespace
