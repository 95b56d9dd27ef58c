// cli_test.cc: runs the built quantdiff binary on hand-made files.
//
// Every bad file here is written byte by byte from literal header text, not
// with the generators, so the expected rule IDs come from the rule catalogue
// (oracles/rules.json) and the format text, not from quantdiff's own code.
// Each test asserts the exit code (0 conforming, 1 findings, 2 usage or I/O
// error) and, for check, that the JSON report's error finding names the rule.
//
// The GPTQ and AWQ verbs are in tests/cli/cli_quant_formats_test.cc.
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/pt_test_builder.h"
#include "tests/safetensors_by_the_tests.h"
#include "tests/cli/cli_test_support.h"

namespace {

using namespace qd::cli_test;  // NOLINT: the shared runner and file builders

// ---------------------------------------------------------------------------
// check: one file per rule

struct RuleCase {
  const char* rule;
  const char* what;
  Bytes file;
};

std::vector<RuleCase> ContainerCases() {
  std::vector<RuleCase> cases;
  cases.push_back({"ST-001", "three bytes, shorter than the length prefix", {0x01, 0x02, 0x03}});
  {
    Bytes f;
    AppendLength(&f, 100'000'001);  // N > 100,000,000
    f.insert(f.end(), {'{', '}', ' ', ' ', ' ', ' ', ' ', ' '});
    cases.push_back({"ST-002", "header length 100,000,001", f});
  }
  {
    Bytes f;
    AppendLength(&f, 64);  // 8 + 64 is past the end of this 16-byte file
    f.insert(f.end(), {'{', '}', ' ', ' ', ' ', ' ', ' ', ' '});
    cases.push_back({"ST-003", "header runs past the end", f});
  }
  cases.push_back({"ST-004", "header is not JSON", File(R"({"a":)")});
  cases.push_back({"ST-004", "top level is an array", File("[]")});
  cases.push_back({"ST-004", "a second value after the object", File("{} {}")});
  cases.push_back({"ST-005", "duplicate tensor name",
                   File("{" + U8Entry("t", "[1]", "[0,1]") + "," + U8Entry("t", "[1]", "[0,1]") + "}",
                        {7})});
  cases.push_back({"ST-006", "__metadata__ value is not a string",
                   File(R"({"__metadata__":{"k":1},)" + U8Entry("t", "[1]", "[0,1]") + "}", {7})});
  cases.push_back({"ST-007", "unknown dtype",
                   File(R"({"t":{"dtype":"F33","shape":[1],"data_offsets":[0,1]}})", {7})});
  cases.push_back({"ST-007", "missing data_offsets", File(R"({"t":{"dtype":"U8","shape":[1]}})", {7})});
  // 2^32 * 2^32 = 2^64 elements: the element count overflows 64 bits.
  cases.push_back({"ST-008", "element count overflows",
                   File("{" + U8Entry("t", "[4294967296,4294967296]", "[0,1]") + "}", {7})});
  cases.push_back({"ST-009", "begin > end", File("{" + U8Entry("t", "[1]", "[1,0]") + "}", {7})});
  // Two F32 elements need 8 bytes, the offsets give 4.
  cases.push_back({"ST-010", "byte length disagrees with the shape",
                   File(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", Zeros(4))});
  // a covers [0,1), b starts at 2: a hole at byte 1.
  cases.push_back({"ST-011", "a hole between two tensors",
                   File("{" + U8Entry("a", "[1]", "[0,1]") + "," + U8Entry("b", "[1]", "[2,3]") + "}",
                        Zeros(3))});
  cases.push_back({"ST-012", "a trailing byte after the last tensor",
                   File("{" + U8Entry("t", "[1]", "[0,1]") + "}", Zeros(2))});
  cases.push_back({"ST-013", "the last tensor runs past the end of the file",
                   File("{" + U8Entry("t", "[2]", "[0,2]") + "}", Zeros(1))});
  return cases;
}

std::vector<RuleCase> RbqCases() {
  std::vector<RuleCase> cases;
  // Q4B32 [1,32] is 18 bytes, Q8B32 [1,32] is 34 bytes.
  cases.push_back(
      {"RBQ-001", "Q4B32 and Q8B32 in one file",
       File("{" + kQ4Metadata +
                R"(,"a":{"dtype":"Q4B32","shape":[1,32],"data_offsets":[0,18]},)"
                R"("b":{"dtype":"Q8B32","shape":[1,32],"data_offsets":[18,52]}})",
            Zeros(52))});
  cases.push_back({"RBQ-002", "no __metadata__",
                   File(R"({"w":{"dtype":"Q4B32","shape":[1,32],"data_offsets":[0,18]}})", Zeros(18))});
  cases.push_back(
      {"RBQ-002", "block is not \"32\"",
       File(R"({"__metadata__":{"format":"rabbit-q4b32","block":"64","scale":"f16"},)"
            R"("w":{"dtype":"Q4B32","shape":[1,32],"data_offsets":[0,18]}})",
            Zeros(18))});
  cases.push_back({"RBQ-003", "16 columns, not a multiple of 32",
                   File("{" + kQ4Metadata +
                            R"(,"w":{"dtype":"Q4B32","shape":[1,16],"data_offsets":[0,18]}})",
                        Zeros(18))});
  cases.push_back({"RBQ-003", "a one-dimensional block tensor",
                   File("{" + kQ4Metadata +
                            R"(,"w":{"dtype":"Q4B32","shape":[32],"data_offsets":[0,18]}})",
                        Zeros(18))});
  cases.push_back({"RBQ-004", "16 bytes for a block of 18",
                   File("{" + kQ4Metadata +
                            R"(,"w":{"dtype":"Q4B32","shape":[1,32],"data_offsets":[0,16]}})",
                        Zeros(16))});
  return cases;
}

// [2,64] Q4B32: four blocks of 18 bytes; the scale of row 1, block 1 (the
// fourth block, data offset 54) is 0x7c00, binary16 +infinity.
Bytes InfiniteScaleFile() {
  Bytes data = Zeros(72);
  data[54] = 0x00;
  data[55] = 0x7c;
  return File("{" + kQ4Metadata + R"(,"w":{"dtype":"Q4B32","shape":[2,64],"data_offsets":[0,72]}})",
              data);
}

void ExpectRefusedWith(const fs::path& path, const std::string& rule,
                       const std::string& what, const Result& run) {
  EXPECT_EQ(run.exit_code, 1) << rule << " (" << what << "): " << run.out << run.err;
  Json report;
  ASSERT_NO_THROW(report = Json::parse(run.out)) << run.out;
  const Json* error = ErrorFinding(report);
  ASSERT_NE(error, nullptr) << rule << " (" << what << "): no error finding in " << run.out;
  EXPECT_EQ((*error)["rule"], rule) << what << ": " << run.out;
  EXPECT_EQ((*error)["file"], path.string());
  EXPECT_EQ(report["summary"]["refused"], 1);
  EXPECT_EQ(report["summary"]["errors"], 1);
  EXPECT_EQ(report["summary"]["by_rule"][rule], 1);
}

TEST_F(CliTest, CheckRefusesEveryContainerRule) {
  int i = 0;
  for (const RuleCase& c : ContainerCases()) {
    const fs::path path = Write(std::string(c.rule) + "-" + std::to_string(i++) + ".safetensors", c.file);
    const Result run = Quantdiff({"check", path.string(), "--report", "json"});
    ExpectRefusedWith(path, c.rule, c.what, run);
  }
}

TEST_F(CliTest, CheckRefusesEveryRbqRule) {
  int i = 0;
  for (const RuleCase& c : RbqCases()) {
    const fs::path path = Write(std::string(c.rule) + "-" + std::to_string(i++) + ".safetensors", c.file);
    const Result run = Quantdiff({"check", path.string(), "--report", "json"});
    ExpectRefusedWith(path, c.rule, c.what, run);
  }
}

TEST_F(CliTest, CheckRbq005NamesTensorRowBlockAndOffset) {
  const Bytes file = InfiniteScaleFile();
  const fs::path path = Write("rbq-005.safetensors", file);
  const Result run = Quantdiff({"check", path.string(), "--report", "json"});
  ExpectRefusedWith(path, "RBQ-005", "infinite scale", run);
  const Json report = Json::parse(run.out);
  const Json& f = *ErrorFinding(report);
  EXPECT_EQ(f["tensor"], "w");
  EXPECT_EQ(f["position"]["row"], 1);
  EXPECT_EQ(f["position"]["block"], 1);
  // The scale's absolute offset: 8 length bytes, the header, then block 3.
  EXPECT_EQ(f["position"]["byte_offset"], 8 + HeaderLength(file) + 54);
}

// Decisions the catalogue spells out for ST-004 (NUL padding, a number that
// overflows binary64, a lone surrogate escape).
TEST_F(CliTest, CheckRefusesCatalogueSt004Decisions) {
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"NUL padding", File(std::string("{}\0\0\0\0\0\0", 8), {}, false)},
      {"number rounding to infinity", File(R"({"a":1e400})")},
      {"lone surrogate escape", File(R"({"a":"\ud800"})")},
  };
  int i = 0;
  for (const auto& [what, bytes] : cases) {
    const fs::path path = Write("st004-" + std::to_string(i++) + ".safetensors", bytes);
    const Result run = Quantdiff({"check", path.string(), "--report", "json"});
    ExpectRefusedWith(path, "ST-004", what, run);
  }
}

// ---------------------------------------------------------------------------
// check: accepted files, warnings, several files, other report formats

Bytes GoodContainer() {
  // Two F32 values, 1.0 and -2.0, little endian.
  return File(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
              {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0});
}

// Row 0: scale 0x3c00 = 1.0; nibble bytes 0x21 0x87 0xf9, the rest zero.
//   byte 0x21: position 0 = low nibble 1 -> q 1;  position 1 = 2 -> q 2
//   byte 0x87: position 2 = 7 -> q 7;             position 3 = 8 -> q -8
//   byte 0xf9: position 4 = 9 -> q -7;            position 5 = 15 -> q -1
// Row 1: scale 0x4000 = 2.0; nibble byte 0x9f, the rest zero.
//   byte 0x9f: position 0 = 15 -> q -1 -> -2.0;   position 1 = 9 -> q -7 -> -14.0
// Then a one-dimensional F32 norm of two values, 1.5 and -0.25.
Bytes GoodQ4File() {
  Bytes data = Zeros(36 + 8);
  data[0] = 0x00;
  data[1] = 0x3c;
  data[2] = 0x21;
  data[3] = 0x87;
  data[4] = 0xf9;
  data[18] = 0x00;
  data[19] = 0x40;
  data[20] = 0x9f;
  const std::uint8_t norm[8] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x80, 0xbe};
  std::memcpy(&data[36], norm, 8);
  return File("{" + kQ4Metadata +
                  R"(,"w":{"dtype":"Q4B32","shape":[2,32],"data_offsets":[0,36]},)"
                  R"("norm":{"dtype":"F32","shape":[2],"data_offsets":[36,44]}})",
              data);
}

// A directory is one input (docs/model_dir.md): what its entries are is
// decided from where links lead (section 1), gathered by cli/model_dir_input.
TEST_F(CliTest, DirectoryEntriesAreJudgedByWhereTheyLead) {
  const fs::path outside = Write("outside.safetensors", GoodContainer());
  const std::string index =
      R"({"metadata":{"total_size":8},"weight_map":{"t":"model-00001-of-00001.safetensors"}})";
  auto make = [&](const std::string& name) {
    fs::create_directories(dir_ / name);
    return dir_ / name;
  };
  // A link inside the directory is the file it leads to: accepted, 8 bytes
  // of tensor data counted as the index says.
  const fs::path inside = make("inside");
  fs::create_directories(inside / "blobs");
  Write("inside/blobs/w", GoodContainer());
  fs::create_symlink("blobs/w", inside / "model-00001-of-00001.safetensors");
  Write("inside/model.safetensors.index.json", Bytes(index.begin(), index.end()));
  // `check DIR` exits with EXIT and prints LINE.
  auto expect_check = [&](const fs::path& dir, int exit, const std::string& line) {
    const Result r = Quantdiff({"check", dir.string()});
    EXPECT_EQ(r.exit_code, exit) << r.out << r.err;
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  };
  expect_check(inside, 0, "ok [safetensors; 1 shard, total_size counts tensor bytes]");
  // The same shard as a link out of the directory escapes it: IDX-004.
  const fs::path escaping = make("escaping");
  fs::create_symlink(outside, escaping / "model-00001-of-00001.safetensors");
  Write("escaping/model.safetensors.index.json", Bytes(index.begin(), index.end()));
  expect_check(escaping, 1, "model.safetensors.index.json: IDX-004 error tensor=t field=weight_map");
  // A weight file that is a link out, or a dangling link, is no weight file.
  const fs::path lone = make("lone");
  fs::create_symlink(outside, lone / "model.safetensors");
  fs::create_symlink(dir_ / "nowhere", lone / "pytorch_model.bin");
  expect_check(lone, 1, "IDX-001 error field=weight_set");
  // decode DIR writes the one file; diff DIR finds both readers agreeing.
  const fs::path out = dir_ / "decoded.safetensors";
  Result run = Quantdiff({"decode", inside.string(), "--out", out.string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(ReadText(out), ReadText(outside)) << "1.0 and -2.0 as F32 under the name t";
  run = Quantdiff({"diff", inside.string(), escaping.string(), lone.string()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

// {NAME: F32 tensor [n] over storage "0" holding VALUES}, a torch.save
// archive built byte by byte (tests/pt_test_builder.h): archive/data.pkl
// first, its local header (30 bytes + 16 of name) padded with an FB extra
// field as torch pads it, so its data starts at 64 (ds, where a torch
// shard's header-level findings point, docs/pt.md 2.1, 6.4).
Bytes TorchFileOf(const std::string& name, const std::vector<float>& values) {
  namespace pt = qd::pt_test;
  const auto n = static_cast<std::int64_t>(values.size());
  pt::Pk p;
  p.proto().dict().mark().str(name).tensor("0", "FloatStorage", n, 0, {n}, {1}).op('u').stop();
  return pt::Archive(p.b, {{"0", pt::F32s(values)}}).bytes;
}

// A sharded torch checkpoint (docs/model_dir.md 3 over docs/pt.md) is read
// shard by shard, meets the index rules at its pickle's offset, decodes its
// floating tensors in shard order; a bitsandbytes layer in it is not read
// yet (exit 2, no verdict).
TEST_F(CliTest, ShardedTorchCheckpointsAreRead) {
  const std::string shard1 = "pytorch_model-00001-of-00002.bin";
  const std::string shard2 = "pytorch_model-00002-of-00002.bin";
  auto make = [&](const std::string& name, const std::string& second_tensor) {
    fs::create_directories(dir_ / name);
    Write(name + "/" + shard1, TorchFileOf("w", {1.5f, -2.0f, 3.0f}));
    Write(name + "/" + shard2, TorchFileOf(second_tensor, {0.25f}));
    // 3 + 1 F32 values: 16 tensor bytes (docs/model_dir.md 3 step 8).
    const std::string index = R"({"metadata":{"total_size":16},"weight_map":{"w":")" + shard1 +
                              R"(","v":")" + shard2 + R"("}})";
    Write(name + "/pytorch_model.bin.index.json", Bytes(index.begin(), index.end()));
    return dir_ / name;
  };
  const fs::path good = make("good", "v");
  Result run = Quantdiff({"check", good.string()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("ok [pt; 2 shards, total_size counts tensor bytes]"), std::string::npos) << run.out;
  const fs::path out = dir_ / "decoded.safetensors";
  run = Quantdiff({"decode", good.string(), "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string text = ReadText(out);
  const Bytes decoded(text.begin(), text.end());
  const qdtest::RawTensor w = qdtest::TensorReadByTheTests(decoded, "w");
  const qdtest::RawTensor v = qdtest::TensorReadByTheTests(decoded, "v");
  ASSERT_TRUE(w.found && v.found) << text.substr(0, 200);
  EXPECT_EQ(w.dtype, "F32");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(w.bytes, qd::pt_test::F32s({1.5f, -2.0f, 3.0f}));
  EXPECT_EQ(v.bytes, qd::pt_test::F32s({0.25f}));
  // The shards' order: w (shard 1) before v (shard 2) in the data section.
  const nlohmann::json header = qdtest::HeaderReadByTheTests(decoded);
  EXPECT_LT(header["w"]["data_offsets"][0].get<std::uint64_t>(),
            header["v"]["data_offsets"][0].get<std::uint64_t>());
  run = Quantdiff({"diff", good.string()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;

  // A tensor in a shard and not in the index: IDX-008 at ds of data.pkl, 64.
  const fs::path extra = make("extra", "x");
  run = Quantdiff({"check", extra.string(), "--report", "json"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << run.out;
  const nlohmann::json& f = report["findings"].back();
  EXPECT_EQ(f["rule"], "IDX-008") << run.out;
  EXPECT_EQ(f["tensor"], "x");
  EXPECT_EQ(f["field"], "weight_map");
  EXPECT_EQ(f["position"]["byte_offset"], 64);
  EXPECT_EQ(f["file"], (extra / shard2).string());

  // An int8 bitsandbytes scale (docs/bnb.md "Layers": l.SCB claims layer l.)
  // in a shard: not read yet, said so, whichever verb.
  const fs::path bnb = make("bnb", "l.SCB");
  const std::string index = R"({"weight_map":{"w":")" + shard1 + R"(","l.SCB":")" + shard2 + R"("}})";
  Write("bnb/pytorch_model.bin.index.json", Bytes(index.begin(), index.end()));
  for (const char* verb : {"check", "diff"}) {
    run = Quantdiff({verb, bnb.string()});
    EXPECT_EQ(run.exit_code, 2) << verb << ": " << run.out << run.err;
    EXPECT_NE(run.err.find("not read yet"), std::string::npos) << verb << ": " << run.err;
  }
}

TEST_F(CliTest, CheckAcceptsGoodFiles) {
  const fs::path container = Write("good.safetensors", GoodContainer());
  const fs::path q4 = Write("good-q4.safetensors", GoodQ4File());
  const Result run = Quantdiff({"check", container.string(), q4.string(), "--report", "json"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const Json report = Json::parse(run.out);
  EXPECT_TRUE(report["findings"].empty()) << run.out;
  EXPECT_EQ(report["summary"]["files"], 2);
  EXPECT_EQ(report["summary"]["refused"], 0);
  EXPECT_EQ(report["summary"]["errors"], 0);
  EXPECT_TRUE(report["divergences"].empty());

  const Result text = Quantdiff({"check", container.string(), q4.string()});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find(container.string() + ": ok [safetensors]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(q4.string() + ": ok [rbq]"), std::string::npos) << text.out;
}

TEST_F(CliTest, CheckWarningsAloneExitZero) {
  // ST-102: N = 2 is not a multiple of 8. RBQ-101: a 2-D F32 tensor in an RBQ file.
  const fs::path unpadded = Write("st102.safetensors", File("{}", {}, false));
  Bytes rbq101_data = Zeros(18 + 8);
  const fs::path rbq101 = Write(
      "rbq101.safetensors",
      File("{" + kQ4Metadata +
               R"(,"w":{"dtype":"Q4B32","shape":[1,32],"data_offsets":[0,18]},)"
               R"("f":{"dtype":"F32","shape":[1,2],"data_offsets":[18,26]}})",
           rbq101_data));
  for (const auto& [path, rule] : {std::pair{unpadded, "ST-102"}, std::pair{rbq101, "RBQ-101"}}) {
    const Result run = Quantdiff({"check", path.string(), "--report", "json"});
    EXPECT_EQ(run.exit_code, 0) << rule << ": " << run.out << run.err;
    const Json report = Json::parse(run.out);
    ASSERT_EQ(report["findings"].size(), 1u) << run.out;
    EXPECT_EQ(report["findings"][0]["rule"], rule);
    EXPECT_EQ(report["findings"][0]["severity"], "warning");
    EXPECT_EQ(report["summary"]["warnings"], 1);
    EXPECT_EQ(report["summary"]["refused"], 0);
  }
}

TEST_F(CliTest, CheckMixedFilesExitOneAndReportEach) {
  const fs::path good = Write("good.safetensors", GoodContainer());
  const fs::path bad = Write("bad.safetensors", File("{" + U8Entry("t", "[1]", "[0,1]") + "}", Zeros(2)));
  const Result run = Quantdiff({"check", good.string(), bad.string(), "--report", "json"});
  EXPECT_EQ(run.exit_code, 1);
  const Json report = Json::parse(run.out);
  EXPECT_EQ(report["summary"]["files"], 2);
  EXPECT_EQ(report["summary"]["refused"], 1);
  ASSERT_EQ(report["findings"].size(), 1u);
  EXPECT_EQ(report["findings"][0]["rule"], "ST-012");
  EXPECT_EQ(report["findings"][0]["file"], bad.string());
  // Absent parts are null, present ones numbers.
  EXPECT_TRUE(report["findings"][0]["position"]["row"].is_null());
  EXPECT_TRUE(report["findings"][0]["position"]["block"].is_null());
  EXPECT_TRUE(report["findings"][0]["position"]["element"].is_null());
}

TEST_F(CliTest, CheckOtherReportFormats) {
  const fs::path bad = Write("bad.safetensors", InfiniteScaleFile());
  const fs::path good = Write("good.safetensors", GoodContainer());

  const Result text = Quantdiff({"check", bad.string()});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find(bad.string() + ": RBQ-005 error tensor=w field=scale"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("row=1 block=1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("1 file: 1 refused, 1 error, 0 warnings, 0 divergences"), std::string::npos)
      << text.out;

  const Result junit = Quantdiff({"check", bad.string(), good.string(), "--report", "junit"});
  EXPECT_EQ(junit.exit_code, 1);
  EXPECT_EQ(junit.out.rfind("<?xml", 0), 0u) << junit.out;
  EXPECT_NE(junit.out.find("tests=\"2\" failures=\"1\""), std::string::npos) << junit.out;
  EXPECT_NE(junit.out.find("<failure type=\"RBQ-005\""), std::string::npos) << junit.out;

  const Result sarif = Quantdiff({"check", bad.string(), "--report", "sarif"});
  EXPECT_EQ(sarif.exit_code, 1);
  const Json doc = Json::parse(sarif.out);
  EXPECT_EQ(doc["version"], "2.1.0");
  const Json& result = doc["runs"][0]["results"][0];
  EXPECT_EQ(result["ruleId"], "RBQ-005");
  EXPECT_EQ(result["level"], "error");
  EXPECT_EQ(result["locations"][0]["physicalLocation"]["region"]["byteOffset"],
            8 + HeaderLength(InfiniteScaleFile()) + 54);
  const Json& rules = doc["runs"][0]["tool"]["driver"]["rules"];
  EXPECT_EQ(rules[result["ruleIndex"].get<int>()]["id"], "RBQ-005");
}

TEST_F(CliTest, CheckWritesOut) {
  const fs::path bad = Write("bad.safetensors", File("[]"));
  const fs::path out = dir_ / "report.json";
  const Result run = Quantdiff({"check", bad.string(), "--report=json", "--out", out.string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(run.out.empty()) << run.out;
  const Json report = Json::parse(ReadText(out));
  EXPECT_EQ(report["findings"][0]["rule"], "ST-004");
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

TEST_F(CliTest, CheckEmptyFileAndOddInputsNeverCrash) {
  const fs::path empty = Write("empty.safetensors", {});
  const Result run = Quantdiff({"check", empty.string(), "--report", "json"});
  ExpectRefusedWith(empty, "ST-001", "empty file", run);
  // A length prefix of all ones, a header of invalid UTF-8, a huge shape.
  const std::vector<Bytes> odd = {
      Bytes(8, 0xff),
      File("{\"\xff\xfe\":1}"),
      File(R"({"t":{"dtype":"Q4B32","shape":[18446744073709551615,18446744073709551584],"data_offsets":[0,18]}})",
           Zeros(18)),
      File("{" + kQ4Metadata + R"(,"w":{"dtype":"Q8B32","shape":[1,32],"data_offsets":[0,34]}})", Zeros(34)),
  };
  int i = 0;
  for (const Bytes& b : odd) {
    const fs::path path = Write("odd-" + std::to_string(i++) + ".safetensors", b);
    for (const char* verb : {"check", "diff"}) {
      const Result r = Quantdiff({verb, path.string(), "--report", "json"});
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << verb << " " << path << ": " << r.err;
      EXPECT_TRUE(Json::accept(r.out)) << r.out;
    }
    const Result d = Quantdiff({"decode", path.string(), "--out", (dir_ / "odd.out").string()});
    EXPECT_TRUE(d.exit_code == 0 || d.exit_code == 1) << d.err;
    // Both answers end with the tool's own line, so a sanitizer's exit 1 fails here.
    EXPECT_NE(d.err.find("quantdiff decode: "), std::string::npos) << d.err;
  }
}

// ---------------------------------------------------------------------------
// decode

TEST_F(CliTest, DecodeQ4GivesHandComputedValues) {
  const fs::path in = Write("q4.safetensors", GoodQ4File());
  const fs::path out = dir_ / "q4-f32.safetensors";
  const Result run = Quantdiff({"decode", in.string(), "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
  const auto tensors = ReadF32File(out);
  ASSERT_EQ(tensors.size(), 2u);
  ASSERT_TRUE(tensors.count("w"));
  const SafetensorsTensor& w = tensors.at("w");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{2, 32}));
  std::vector<float> expected(64, 0.0f);
  // Row 0, scale 1.0: q = 1, 2, 7, -8, -7, -1, then zeros.
  expected[0] = 1.0f;
  expected[1] = 2.0f;
  expected[2] = 7.0f;
  expected[3] = -8.0f;
  expected[4] = -7.0f;
  expected[5] = -1.0f;
  // Row 1, scale 2.0: q = -1, -7, then zeros.
  expected[32] = -2.0f;
  expected[33] = -14.0f;
  ASSERT_EQ(w.values.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(w.values[i], expected[i]) << "element " << i;
  }
  ASSERT_TRUE(tensors.count("norm"));
  EXPECT_EQ(tensors.at("norm").shape, (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(tensors.at("norm").values, (std::vector<float>{1.5f, -0.25f}));

  // The output is itself a conforming safetensors file.
  const Result check = Quantdiff({"check", out.string()});
  EXPECT_EQ(check.exit_code, 0) << check.out;
}

TEST_F(CliTest, DecodeRefusedWritesNothing) {
  const fs::path in = Write("bad.safetensors", InfiniteScaleFile());
  const fs::path out = dir_ / "never.safetensors";
  const Result run = Quantdiff({"decode", in.string(), "--out", out.string()});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("RBQ-005"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

TEST_F(CliTest, DecodePlainContainer) {
  const fs::path in = Write("good.safetensors", GoodContainer());
  const fs::path out = dir_ / "out.safetensors";
  const Result run = Quantdiff({"decode", in.string(), "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto tensors = ReadF32File(out);
  ASSERT_TRUE(tensors.count("t"));
  EXPECT_EQ(tensors.at("t").values, (std::vector<float>{1.0f, -2.0f}));
}

// ---------------------------------------------------------------------------
// diff

TEST_F(CliTest, DiffAgreesOnHandMadeFiles) {
  std::vector<std::string> args = {"diff", "--report", "json"};
  int i = 0;
  for (const auto& cases : {ContainerCases(), RbqCases()}) {
    for (const RuleCase& c : cases) {
      args.push_back(Write("case-" + std::to_string(i++) + ".safetensors", c.file).string());
    }
  }
  args.push_back(Write("good.safetensors", GoodContainer()).string());
  args.push_back(Write("good-q4.safetensors", GoodQ4File()).string());
  args.push_back(Write("rbq005.safetensors", InfiniteScaleFile()).string());
  const Result run = Quantdiff(args);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const Json report = Json::parse(run.out);
  EXPECT_TRUE(report["divergences"].empty()) << report["divergences"].dump(2);
  EXPECT_EQ(report["summary"]["files"], i + 3);
  ASSERT_EQ(report["verdicts"].size(), static_cast<std::size_t>(i + 3));
  EXPECT_EQ(report["verdicts"][i + 1]["codec"], "accepted");
  EXPECT_EQ(report["verdicts"][i + 1]["oracle"], "accepted");
  EXPECT_EQ(report["verdicts"][i + 2]["oracle"], "refused RBQ-005");
}

// ---------------------------------------------------------------------------
// Usage and I/O errors: exit 2

TEST_F(CliTest, UsageErrorsExitTwo) {
  const std::string good = Write("good.safetensors", GoodContainer()).string();
  const std::string missing = (dir_ / "missing.safetensors").string();
  const std::string unwritable = (dir_ / "no-such-dir" / "out.json").string();
  std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"--frobnicate"},
      {"check"},
      {"check", good, "--frobnicate"},
      {"check", good, "--report"},
      {"check", good, "--report", "xml"},
      {"check", good, "--format", "no-such-format"},
      {"check", missing},
      {"check", good, missing},
      // A directory is one input (docs/model_dir.md); its format is its own.
      {"check", dir_.string(), "--format", "gptq"},
      {"check", good, "--out", unwritable},
      {"diff"},
      {"diff", missing},
      {"diff", good, "--out", unwritable},
      {"decode", good},
      {"decode", "--out", (dir_ / "x.safetensors").string()},
      {"decode", missing, "--out", (dir_ / "x.safetensors").string()},
      {"decode", good, "--out", unwritable},
      {"campaign", "--seconds", "abc"},
      {"campaign", "--seconds", "-1"},
      {"campaign", "--seconds", "99999999999999999999"},
      {"campaign", "--seed", "12x"},
      {"campaign", "--format", "no-such-format"},
      {"campaign", "stray-argument"},
      {"campaign", "--seconds", "1", "--out", (dir_ / "file-not-dir").string()},
      {"export-vectors", "--count", "0"},
      {"export-vectors", "--count", "many"},
      {"rules", "ST-999"},
      {"rules", "--frobnicate"},
      {"help", "frobnicate"},
  };
  Write("file-not-dir", {1});
  // A FIFO with no writer: opening it would block, so it must be refused first.
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  cases.push_back({"check", fifo});
  cases.push_back({"decode", fifo, "--out", (dir_ / "x.safetensors").string()});
  for (const auto& args : cases) {
    const Result run = Quantdiff(args);
    std::string joined;
    for (const std::string& a : args) joined += " " + a;
    EXPECT_EQ(run.exit_code, 2) << "quantdiff" << joined << "\n" << run.out << run.err;
    EXPECT_FALSE(run.err.empty()) << "quantdiff" << joined << " said nothing on stderr";
  }
  EXPECT_FALSE(fs::exists(dir_ / "x.safetensors"));
}

// ---------------------------------------------------------------------------
// Help

TEST_F(CliTest, HelpOnEveryVerbExitsZero) {
  const std::vector<std::string> verbs = {"check", "decode", "diff", "campaign",
                                          "export-vectors", "report-merge", "rules", "help"};
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}, {"--version"}}) {
    const Result run = Quantdiff(args);
    EXPECT_EQ(run.exit_code, 0) << args[0];
    EXPECT_FALSE(run.out.empty()) << args[0];
  }
  const Result overview = Quantdiff({"--help"});
  for (const std::string& verb : verbs) {
    EXPECT_NE(overview.out.find("  " + verb + " "), std::string::npos) << verb;
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {verb, "--help"}, {verb, "-h"}, {"help", verb}, {verb, "--bogus", "--help"}}) {
      const Result run = Quantdiff(args);
      EXPECT_EQ(run.exit_code, 0) << verb;
      EXPECT_EQ(run.out.rfind("usage: quantdiff " + verb, 0), 0u) << verb << ": " << run.out;
    }
  }
}

// Every verb with --format lists the formats the overview lists (the
// registry's, FormatNames()), and those include the ten formats quantdiff
// reads: a list written by hand went stale once (campaign named six).
TEST_F(CliTest, HelpFormatListsNameEveryRegisteredFormat) {
  const std::string overview = Quantdiff({"--help"}).out;
  const std::size_t line = overview.find("\nformats: ");
  ASSERT_NE(line, std::string::npos) << overview;
  const std::size_t begin = line + std::string("\nformats: ").size();
  const std::string names = overview.substr(begin, overview.find('\n', begin) - begin);
  for (const char* format :
       {"gguf", "rbq", "bnb", "recognised", "ggml_st", "awq", "gptq", "fp8", "pt", "safetensors"}) {
    EXPECT_NE((", " + names + ",").find(std::string(", ") + format + ","), std::string::npos) << format << ": " << names;
  }
  for (const std::string verb : {"check", "decode", "diff", "campaign", "export-vectors", "test-impl"}) {
    const std::string help = Quantdiff({verb, "--help"}).out;
    EXPECT_NE(help.find("--format"), std::string::npos) << verb;
    EXPECT_NE(help.find(names), std::string::npos) << verb << ":\n" << help;
    EXPECT_EQ(help.find("{formats}"), std::string::npos) << verb;
  }
}

// ---------------------------------------------------------------------------
// rules, campaign, export-vectors

TEST_F(CliTest, RulesListsTheCatalogue) {
  const Result text = Quantdiff({"rules"});
  EXPECT_EQ(text.exit_code, 0);
  for (const char* id : {"ST-001", "ST-013", "ST-101", "ST-102", "RBQ-001", "RBQ-005", "RBQ-101"}) {
    EXPECT_NE(text.out.find(id), std::string::npos) << id;
  }
  const Result json = Quantdiff({"rules", "--json"});
  EXPECT_EQ(json.exit_code, 0);
  const Json doc = Json::parse(json.out);
  std::set<std::string> ids;
  for (const Json& r : doc["rules"]) ids.insert(r["id"]);
  for (const RuleCase& c : ContainerCases()) EXPECT_TRUE(ids.count(c.rule)) << c.rule;
  for (const RuleCase& c : RbqCases()) EXPECT_TRUE(ids.count(c.rule)) << c.rule;
  const Result one = Quantdiff({"rules", "RBQ-005"});
  EXPECT_EQ(one.exit_code, 0);
  EXPECT_NE(one.out.find("decision:"), std::string::npos) << one.out;
}

TEST_F(CliTest, CampaignWritesSummaryAndReport) {
  const fs::path out = dir_ / "campaign";
  const Result run = Quantdiff({"campaign", "--seconds", "30", "--instances", "400", "--seed", "7",
                             "--out", out.string()});
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.err;
  const Json report = Json::parse(ReadText(out / "report.json"));
  EXPECT_EQ(report["instances"], 400);
  EXPECT_EQ(report["seed"], 7);
  std::uint64_t per_format = 0;
  for (const auto& [name, f] : report["formats"].items()) {
    per_format += f["instances"].get<std::uint64_t>();
    EXPECT_EQ(f["instances"], f["valid"].get<std::uint64_t>() + f["violations"].get<std::uint64_t>() +
                                  f["mutants"].get<std::uint64_t>());
    EXPECT_GT(f["mutants"].get<std::uint64_t>(), 0u) << name;
    EXPECT_GT(f["by_rule"].size(), 1u) << name;
  }
  EXPECT_EQ(per_format, 400u);
  EXPECT_TRUE(report["formats"].contains("rbq"));
  EXPECT_TRUE(report["formats"].contains("safetensors"));
  const bool found = report["divergences"] > 0 || report["expectation_failures"] > 0;
  EXPECT_EQ(run.exit_code, found ? 1 : 0);
  // Every saved instance exists.
  for (const char* key : {"divergence_signatures", "expectation_failure_signatures"}) {
    for (const Json& p : report[key]) {
      for (const Json& file : p["files"]) EXPECT_TRUE(fs::exists(out / file.get<std::string>())) << file;
    }
  }
  const std::string summary = ReadText(out / "summary.txt");
  EXPECT_NE(summary.find("400 instances"), std::string::npos) << summary;
  EXPECT_EQ(run.out, summary);
  EXPECT_NE(run.err.find("seed 7"), std::string::npos) << run.err;

  // The same seed gives the same run.
  const fs::path again = dir_ / "again";
  const Result rerun = Quantdiff({"campaign", "--instances", "400", "--seed", "7", "--out", again.string()});
  Json a = Json::parse(ReadText(again / "report.json"));
  Json b = report;
  a.erase("elapsed_seconds");
  b.erase("elapsed_seconds");
  EXPECT_EQ(rerun.exit_code, run.exit_code);
  EXPECT_EQ(a["formats"], b["formats"]);
}

TEST_F(CliTest, ExportVectorsFollowTheOracle) {
  const fs::path out = dir_ / "vectors";
  const Result run = Quantdiff({"export-vectors", "--out", out.string(), "--count", "2", "--seed", "3"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* format : {"rbq", "safetensors"}) {
    const Json doc = Json::parse(ReadText(out / (std::string(format) + ".json")));
    EXPECT_EQ(doc["algorithm"], format);
    std::uint64_t tests = 0;
    for (const Json& group : doc["testGroups"]) {
      for (const Json& t : group["tests"]) {
        ++tests;
        const std::string bytes = ReadText(out / t["file"].get<std::string>());
        char crc[16];
        std::snprintf(crc, sizeof crc, "%08lx",
                      crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
        EXPECT_EQ(t["crc32"], crc) << t["file"];
        const std::string result = t["result"];
        EXPECT_TRUE(result == "valid" || result == "invalid" || result == "acceptable") << result;
        for (const Json& flag : t["flags"]) EXPECT_TRUE(doc["notes"].contains(flag.get<std::string>()));
        if (result == "valid") {
          EXPECT_TRUE(t["flags"].empty());
        }
      }
    }
    EXPECT_EQ(doc["numberOfTests"], tests);
    EXPECT_GT(tests, 2u);
  }
  // rbq's RBQ-005 group: the oracle refuses with RBQ-005, and so does check.
  const Json rbq = Json::parse(ReadText(out / "rbq.json"));
  bool seen = false;
  for (const Json& group : rbq["testGroups"]) {
    if (group["rule"] != "RBQ-005") continue;
    for (const Json& t : group["tests"]) {
      seen = true;
      EXPECT_EQ(t["result"], "invalid");
      EXPECT_EQ(t["flags"].back(), "RBQ-005");
      const Result check = Quantdiff({"check", (out / t["file"].get<std::string>()).string(), "--report", "json"});
      EXPECT_EQ(check.exit_code, 1);
    }
  }
  EXPECT_TRUE(seen);
  // Same seed, same bytes.
  const fs::path again = dir_ / "again";
  ASSERT_EQ(Quantdiff({"export-vectors", "--out", again.string(), "--count", "2", "--seed", "3"}).exit_code, 0);
  EXPECT_EQ(ReadText(out / "rbq.json"), ReadText(again / "rbq.json"));
  EXPECT_EQ(ReadText(out / "safetensors.json"), ReadText(again / "safetensors.json"));
}

}  // namespace
