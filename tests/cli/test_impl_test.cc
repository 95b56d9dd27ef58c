// test_impl_test.cc: `quantdiff test-impl` judging commands whose behaviour
// the test knows (issue 13, the process protocol), on the built-in vectors
// and on an exported folder (--vectors), and the export's --gzip bundle.
//
// The expected counts come from the committed export (corpus/vectors/*.json,
// written with test-impl's defaults: count 4, seed 1, so tcIds and results
// match), never from test-impl's own output: quantdiff's own decoder must
// pass every vector; a command that refuses everything must fail exactly
// the valid and acceptable ones; crashes, hangs and garbage are named.
// The outside readers' suites (examples/) are outside_readers_test.cc.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/test_impl_test_support.h"

namespace {

using namespace qd_test_impl;  // NOLINT(google-build-using-namespace): the suites' shared vocabulary

TEST(TestImpl, QuantdiffDecodePassesEveryVectorOfEveryFormat) {
  const Result r = Quantdiff({"test-impl", "--cmd", Quote(QUANTDIFF_BIN) + " decode {input} --out {output}",
                              "--jobs", "2", "--report", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json report = Json::parse(r.out);
  std::uint64_t exported = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(QD_SOURCE_DIR) / "corpus" / "vectors")) {
    if (entry.path().extension() == ".json" && entry.path().filename() != "schema.json") {
      exported += ExportedResults(entry.path().stem().string()).size();
    }
  }
  EXPECT_EQ(report["vectors"].get<std::uint64_t>(), exported);
  EXPECT_EQ(report["failed"].get<std::uint64_t>(), 0u);
}

// --pt-shape torch-1.13 (one vector a group, for time): quantdiff's own
// decode still passes every vector, and every valid or acceptable file's
// data.pkl (read by Python's zipfile and pickletools, not by quantdiff) opens
// with PROTO 2 and holds no FRAME and no BINFLOAT opcode.
TEST(TestImpl, Torch113ShapedPtVectorsAreProtocolTwoWithoutFloatsAndStillConform) {
  const fs::path out = fs::path(QD_TEST_TMPDIR) / "torch113";
  fs::remove_all(out);
  ASSERT_EQ(Quantdiff({"export-vectors", "--format", "pt", "--pt-shape", "torch-1.13", "--count", "1", "--out",
                       out.string()})
                .exit_code,
            0);
  const Result r = Quantdiff({"test-impl", "--cmd", Quote(QUANTDIFF_BIN) + " decode {input} --out {output}", "--format",
                              "pt", "--pt-shape", "torch-1.13", "--count", "1", "--jobs", "2", "--report", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json exported = Json::parse(Slurp(out / "pt.json"));
  EXPECT_EQ(Json::parse(r.out)["vectors"], exported["numberOfTests"]);
  const std::string script =
      "import json, pickletools, sys, zipfile\n"
      "d = json.load(open(sys.argv[1] + '/pt.json'))\n"
      "n = 0\n"
      "for g in d['testGroups']:\n"
      "  for t in g['tests']:\n"
      "    if t['result'] == 'invalid': continue\n"
      "    z = zipfile.ZipFile(sys.argv[1] + '/' + t['file'])\n"
      "    pkl = z.read(next(i for i in z.namelist() if i.endswith('/data.pkl')))\n"
      "    ops = [op.name for op, arg, pos in pickletools.genops(pkl)]\n"
      "    assert pkl[:2] == b'\\x80\\x02', t['file']\n"
      "    assert 'FRAME' not in ops and 'BINFLOAT' not in ops, t['file']\n"
      "    n += 1\n"
      "print(n)\n";
  const fs::path check = out / "check.py";
  std::ofstream(check) << script;
  const Result py = Shell(Quote(QD_PYTHON3) + " " + Quote(check.string()) + " " + Quote(out.string()) + " 2>&1");
  EXPECT_EQ(py.exit_code, 0) << py.out;
  std::uint64_t accepted = 0;
  for (const Json& group : exported["testGroups"]) {
    for (const Json& test : group["tests"]) accepted += test["result"] != "invalid" ? 1 : 0;
  }
  EXPECT_GT(accepted, 0u);
  EXPECT_EQ(py.out, std::to_string(accepted) + "\n");
}

TEST(TestImpl, ARefuseEverythingCommandFailsExactlyTheAcceptedVectors) {
  // `false` exits 1 for every vector and names no rule.
  const Result r = Quantdiff({"test-impl", "--cmd", "false {input} {output}", "--format", "safetensors",
                              "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  const std::map<std::uint64_t, std::string> failures = Failures(Json::parse(r.out), "safetensors");
  std::map<std::uint64_t, std::string> expected;
  for (const auto& [id, result] : ExportedResults("safetensors")) {
    if (result != "invalid") expected[id] = "refused-valid";
  }
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(failures, expected);
}

TEST(TestImpl, CrashHangGarbageAndWrongOutputAreNamed) {
  // rbq tcId 1 is a valid file with at least one decoded value (the export).
  ASSERT_EQ(ExportedResults("rbq").at(1), "valid");
  const std::string decode = Quote(QUANTDIFF_BIN) + " decode {input} --out {output}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kill -SEGV $$; : {input} {output}", "crashed"},
      {"exit 3; : {input} {output}", "crashed"},
      {"head -c 10 {input} > {output}", "garbage"},
      {"true {input} {output}", "garbage"},  // accepted, nothing written
      // The last byte of the data is the top byte of the last F32 value.
      {decode + " && printf '\\377' | dd of={output} bs=1 seek=$(($(stat -c %s {output}) - 1)) conv=notrunc 2>/dev/null",
       "wrong-output"},
  };
  for (const auto& [command, outcome] : cases) {
    const Result r = Quantdiff({"test-impl", "--cmd", command, "--format", "rbq", "--only", "1", "--report", "json"});
    ASSERT_EQ(r.exit_code, 1) << command << "\n" << r.out;
    EXPECT_EQ(Failures(Json::parse(r.out), "rbq"), (std::map<std::uint64_t, std::string>{{1, outcome}})) << command;
  }
}

TEST(TestImpl, AHangingCommandIsKilledAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const Result r = Quantdiff({"test-impl", "--cmd", "sleep 30; : {input} {output}", "--format", "rbq", "--only", "1",
                              "--timeout", "0.5", "--report", "json"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(Failures(Json::parse(r.out), "rbq"), (std::map<std::uint64_t, std::string>{{1, "hung"}}));
  EXPECT_LT(seconds, 20.0);  // killed, not waited for (30 s)
}

// --vectors DIR (issue 13 item 2) on a fresh export (one test a group, so
// every format and rule at a fraction of the time): quantdiff's own decoder
// passes every vector of the folder, judged by the results and expected
// outputs recorded there.
class ExportedFolder : public ::testing::Test {
 protected:
  static fs::path Dir() { return fs::path(QD_TEST_TMPDIR) / "export"; }
  // Only its own folder: ctest runs the program's other suites at the same
  // time, in their own folders of QD_TEST_TMPDIR.
  static void SetUpTestSuite() {
    fs::remove_all(Dir());
    fs::create_directories(QD_TEST_TMPDIR);
    export_exit_ = Quantdiff({"export-vectors", "--count", "1", "--out", Dir().string()}).exit_code;
  }
  // Every test of the folder's FORMAT.json files: (format, tcId) -> result.
  static std::map<std::pair<std::string, std::uint64_t>, std::string> Exported() {
    std::map<std::pair<std::string, std::uint64_t>, std::string> tests;
    for (const auto& entry : fs::directory_iterator(Dir())) {
      if (entry.path().extension() != ".json" || entry.path().filename() == "schema.json") continue;
      std::ifstream in(entry.path());
      const Json doc = Json::parse(in);
      for (const Json& group : doc["testGroups"]) {
        for (const Json& test : group["tests"]) tests[{doc["algorithm"], test["tcId"]}] = test["result"];
      }
    }
    return tests;
  }
  static int export_exit_;
};
int ExportedFolder::export_exit_ = -1;

TEST_F(ExportedFolder, QuantdiffDecodePassesEveryExportedVector) {
  ASSERT_EQ(export_exit_, 0);
  const Result r = Quantdiff({"test-impl", "--cmd", Quote(QUANTDIFF_BIN) + " decode {input} --out {output}",
                              "--vectors", Dir().string(), "--jobs", "2", "--report", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json report = Json::parse(r.out);
  EXPECT_EQ(report["vectors"].get<std::uint64_t>(), Exported().size());
  EXPECT_GT(Exported().size(), 150u);  // one per group of every format
  EXPECT_EQ(report["failed"].get<std::uint64_t>(), 0u);
}

TEST_F(ExportedFolder, ARefuseEverythingCommandFailsExactlyTheAcceptedVectors) {
  ASSERT_EQ(export_exit_, 0);
  const Result r = Quantdiff({"test-impl", "--cmd", "false {input} {output}", "--format", "rbq",
                              "--vectors", Dir().string(), "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  std::map<std::uint64_t, std::string> expected;
  for (const auto& [key, result] : Exported()) {
    if (key.first == "rbq" && result != "invalid") expected[key.second] = "refused-valid";
  }
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(Failures(Json::parse(r.out), "rbq"), expected);
}

TEST_F(ExportedFolder, AnExpectedOutputChangedSinceTheExportIsAnIoError) {
  ASSERT_EQ(export_exit_, 0);
  const fs::path copy = fs::path(QD_TEST_TMPDIR) / "changed";
  fs::remove_all(copy);
  fs::copy(Dir(), copy, fs::copy_options::recursive);
  std::ofstream(copy / "rbq" / "1.expected.safetensors", std::ios::app) << "x";
  const std::string decode = Quote(QUANTDIFF_BIN) + " decode {input} --out {output}";
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", decode, "--format", "rbq", "--vectors", copy.string()}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", decode, "--vectors", (copy / "nothing").string()}).exit_code, 2);
}

// --gzip (README "Portable vectors"): one gzip-compressed ustar file that
// the system's tar extracts into exactly the folder export, file for file.
// One format (gptq: tcId folders with configs) keeps it quick; its files are
// the folder export's gptq files.
TEST_F(ExportedFolder, TheGzipBundleExtractsToTheFolderExport) {
  ASSERT_EQ(export_exit_, 0);
  const fs::path bundle = fs::path(QD_TEST_TMPDIR) / "vectors.tar.gz";
  const std::vector<std::string> gzip_gptq = {"export-vectors", "--gzip", "--format", "gptq", "--count", "1", "--out"};
  std::vector<std::string> args = gzip_gptq;
  args.push_back(bundle.string());
  ASSERT_EQ(Quantdiff(args).exit_code, 0);
  const std::string bytes = Slurp(bundle);
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 3), std::string("\x1f\x8b\x08", 3));  // gzip, deflate (RFC 1952)
  const fs::path extracted = fs::path(QD_TEST_TMPDIR) / "extracted";
  fs::remove_all(extracted);
  fs::create_directories(extracted);
  const std::string tar = "tar -xzf " + Quote(bundle.string()) + " -C " + Quote(extracted.string());
  ASSERT_EQ(std::system(tar.c_str()), 0) << tar;
  auto files = [](const fs::path& root) {
    std::map<std::string, std::string> contents;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = fs::relative(entry.path(), root).string();
      if (name != "schema.json" && name != "gptq.json" && name.rfind("gptq/", 0) != 0) continue;
      contents[name] = Slurp(entry.path());
    }
    return contents;
  };
  const std::map<std::string, std::string> folder = files(Dir());
  EXPECT_GT(folder.size(), 40u);  // 25 gptq tests, most with a config and an expected output
  EXPECT_TRUE(files(extracted) == folder) << "the bundle's files differ from the folder export's";
  // The same arguments write the same bundle.
  const fs::path again = fs::path(QD_TEST_TMPDIR) / "again.tar.gz";
  args = gzip_gptq;
  args.push_back(again.string());
  ASSERT_EQ(Quantdiff(args).exit_code, 0);
  EXPECT_TRUE(Slurp(again) == bytes);
}

TEST(TestImpl, UsageErrorsExitTwo) {
  EXPECT_EQ(Quantdiff({"test-impl"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", "cat {input}"}).exit_code, 2);  // no {output}
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", "true {input} {output}", "--only", "1"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", "true {input} {output}", "--format", "nope"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", "true {input} {output}", "--timeout", "0"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", "true {input} {output}", "--vectors", "x", "--seed", "2"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"export-vectors", "--gzip"}).exit_code, 2);  // --gzip needs --out
  EXPECT_EQ(Quantdiff({"test-impl", "--cmd", "true {input} {output}", "--pt-shape", "torch-2"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"export-vectors", "--format", "pt", "--pt-shape", "torch-1.13"}).exit_code, 2);  // needs --out
  // report-merge takes test-impl JSON reports only.
  EXPECT_EQ(Quantdiff({"report-merge"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"report-merge", "/nonexistent/a.json"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"report-merge", fs::path(QD_SOURCE_DIR) / "corpus" / "vectors" / "rbq.json"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"report-merge", "x.json", "--report", "sarif"}).exit_code, 2);
}

// test-impl --module (interface/quantdiff/impl_module.h): a reader run
// in-process, judged like a command.
TEST(TestImplModule, QuantdiffsOwnOracleAsAModuleConformsOnEveryGgufVector) {
  const Result r = Quantdiff({"test-impl", "--module", QD_ORACLE_MODULE, "--format", "gguf", "--jobs", "2",
                              "--report", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json report = Json::parse(r.out);
  EXPECT_EQ(report["vectors"].get<std::uint64_t>(), ExportedResults("gguf").size());
  EXPECT_EQ(report["failed"].get<std::uint64_t>(), 0u);
  EXPECT_NE(report["command"].get<std::string>().find("quantdiff-oracle-gguf"), std::string::npos);
}

TEST(TestImplModule, WhatAModuleMustNotHandBackIsNamedNotACrash) {
  // gguf tcId 1 is valid: the garbage module's tensor would otherwise be
  // judged, its refusals would be refused-valid.
  ASSERT_EQ(ExportedResults("gguf").at(1), "valid");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"null-name", "garbage"},        {"unmapped-name", "garbage"},     {"huge-name", "garbage"},
      {"non-utf8-name", "garbage"},    {"unterminated-rule", "garbage"}, {"unmapped-values", "garbage"},
      {"count-not-shape", "garbage"},  {"huge-shape", "garbage"},        {"non-utf8-rule", "garbage"},
      {"not-a-rule", "garbage"},       {"bad-status", "garbage"},        {"failed", "crashed"},
      {"twice", "wrong-output"},       // the same tensor twice: the table holds up, the decode is wrong
      {"", "wrong-output"},  // well-formed, wrong tensors: the control
  };
  for (const auto& [kind, outcome] : cases) {
    ASSERT_EQ(setenv("QD_GARBAGE", kind.c_str(), 1), 0);
    const Result r = Quantdiff({"test-impl", "--module", QD_GARBAGE_MODULE, "--format", "gguf", "--only", "1",
                                "--report", "json"});
    ASSERT_EQ(r.exit_code, 1) << kind << "\n" << r.out;
    const Json report = Json::parse(r.out);
    EXPECT_EQ(Failures(report, "gguf"), (std::map<std::uint64_t, std::string>{{1, outcome}})) << kind;
    if (kind == "twice") {
      EXPECT_EQ(report["failures"][0]["detail"], "tensor blk.0.weight twice");
    }
  }
  unsetenv("QD_GARBAGE");
}

TEST(TestImplModule, AModuleOfAnotherAbiOrNoModuleIsAnErrorAndBothWaysAtOnceAUsageError) {
  ASSERT_EQ(setenv("QD_GARBAGE_ABI", "2", 1), 0);
  EXPECT_EQ(Quantdiff({"test-impl", "--module", QD_GARBAGE_MODULE, "--format", "gguf"}).exit_code, 2);
  unsetenv("QD_GARBAGE_ABI");
  EXPECT_EQ(Quantdiff({"test-impl", "--module", QUANTDIFF_BIN, "--format", "gguf"}).exit_code, 2);  // no entry
  EXPECT_EQ(Quantdiff({"test-impl", "--module", "/nonexistent/x.so"}).exit_code, 2);
  EXPECT_EQ(Quantdiff({"test-impl", "--module", QD_GARBAGE_MODULE, "--cmd", "true {input} {output}"}).exit_code, 2);
  // A module reads files; the model_dir vectors are directories.
  EXPECT_EQ(Quantdiff({"test-impl", "--module", QD_ORACLE_MODULE, "--format", "gguf,model_dir"}).exit_code, 2);
}

// campaign --module: the modules decode every generated gguf instance beside
// codec and oracle (issue 13 item 3). Two at once: quantdiff's own oracle as a
// module never diverges; the garbage module's control (QD_GARBAGE unset: it
// accepts every file with one tensor blk.0.weight [2] = {1, 2}) diverges on
// every instance, each an invalid one it accepts (verdict) or a valid one
// whose tensors are not its one (tensor count, shape or values), and its
// divergences are grouped by signature with the bytes saved.
TEST(TestImplModule, CampaignRunsEveryModuleBesideCodecAndOracleAndGroupsTheirDivergences) {
  unsetenv("QD_GARBAGE");
  const fs::path out = fs::path(QD_TEST_TMPDIR) / "campaign-modules";
  fs::remove_all(out);
  constexpr std::uint64_t kInstances = 30;
  const Result r = Quantdiff({"campaign", "--format", "gguf", "--instances", std::to_string(kInstances), "--seed", "7",
                              "--seconds", "120", "--module", QD_ORACLE_MODULE, "--module",
                              std::string(QD_GARBAGE_MODULE) + "=gguf", "--out", out.string()});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  const Json doc = Json::parse(Slurp(out / "report.json"));
  ASSERT_EQ(doc["instances"], kInstances);
  ASSERT_EQ(doc["modules"].size(), 2u);
  EXPECT_EQ(doc["modules"][0]["name"], "quantdiff-oracle-gguf");
  EXPECT_EQ(doc["modules"][0]["decodes"], kInstances);
  EXPECT_EQ(doc["modules"][0]["divergences"], 0u);
  EXPECT_EQ(doc["modules"][1]["name"], "garbage");
  EXPECT_EQ(doc["modules"][1]["formats"], Json::array({"gguf"}));
  EXPECT_EQ(doc["modules"][1]["decodes"], kInstances);
  EXPECT_EQ(doc["modules"][1]["divergences"], kInstances);
  EXPECT_EQ(doc["divergences"], kInstances);  // codec and oracle agree: every one is the garbage module's
  std::uint64_t counted = 0;
  std::set<std::string> kinds;
  for (const Json& d : doc["divergence_signatures"]) {
    const std::string signature = d["signature"];
    ASSERT_EQ(signature.rfind("DIFF:gguf:module:garbage:", 0), 0u) << signature;
    const std::size_t kind_begin = std::string("DIFF:gguf:module:garbage:").size();
    kinds.insert(signature.substr(kind_begin, signature.find(':', kind_begin) - kind_begin));
    counted += d["count"].get<std::uint64_t>();
    ASSERT_FALSE(d["files"].empty()) << signature;
    EXPECT_TRUE(fs::is_regular_file(out / d["files"][0].get<std::string>())) << d["files"][0];
  }
  EXPECT_EQ(counted, kInstances);
  EXPECT_LT(doc["divergence_signatures"].size(), kInstances);  // deduplicated
  EXPECT_TRUE(kinds.count("verdict")) << r.out;
  EXPECT_TRUE(kinds.count("tensor") || kinds.count("bytes")) << r.out;
  const std::string summary = Slurp(out / "summary.txt");
  EXPECT_NE(summary.find("DIFF:gguf:module:garbage:verdict:GGUF-"), std::string::npos) << summary;
  EXPECT_NE(summary.find("quantdiff-oracle-gguf"), std::string::npos) << summary;

  // A module given a format the run does not have, or a library that is no
  // module, is a usage error before anything runs.
  EXPECT_EQ(Quantdiff({"campaign", "--format", "gguf", "--instances", "1", "--module",
                       std::string(QD_ORACLE_MODULE) + "=safetensors", "--out", (out / "x").string()})
                .exit_code,
            2);
  EXPECT_EQ(Quantdiff({"campaign", "--format", "gguf", "--instances", "1", "--module", "/nonexistent/x.so", "--out",
                       (out / "y").string()})
                .exit_code,
            2);
  EXPECT_FALSE(fs::exists(out / "x"));
}

#ifdef QD_GGML_MODULE
// The shape of every tensor an exported vector's expected output holds (its
// safetensors header, read here).
std::vector<std::vector<std::uint64_t>> ExpectedShapes(const std::string& expected_file) {
  const std::string bytes = Slurp(fs::path(QD_SOURCE_DIR) / "corpus" / "vectors" / expected_file);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0 && bytes.size() >= 8; --i) header = header << 8 | static_cast<unsigned char>(bytes[i]);
  std::vector<std::vector<std::uint64_t>> shapes;
  const Json tensors = Json::parse(bytes.substr(8, header));
  for (const auto& [name, entry] : tensors.items()) {
    if (name != "__metadata__") shapes.push_back(entry["shape"].get<std::vector<std::uint64_t>>());
  }
  return shapes;
}

// ggml's gguf reader and row converters as a module (examples/ggml_module).
// ggml states no rule IDs and its reader refuses every invalid vector, so
// each invalid group passes; the failures follow from the vectors alone
// (docs/gguf.md 6, docs/ggml_blocks.md 5):
// - GGUF-102 (a layout other than ggml's packing): ggml refuses it;
// - GGUF-101 (a type quantdiff recognises and does not decode): quantdiff
//   writes nothing for that tensor, ggml decodes or refuses it;
// - a valid vector flagged as an upstream finding (upstreamFlags: the two
//   MXFP4 readings where ggml parts from the OCP format);
// - a valid vector with a tensor of n_dims 0, or whose outermost dimension
//   is 1 (its last ggml ne): ggml keeps no n_dims, so its shape reads
//   shorter;
// - GGUF-020 (a BOOL byte other than 0 or 1): ggml reads any non-zero byte
//   as true and accepts the file, unless something else in it makes ggml
//   refuse (an array of arrays, which its reader does not take, may come
//   with the generated metadata): at least one such vector fails, and any
//   of them may.
TEST(TestImplModule, GgmlFailsExactlyTheVectorsItsReadingPredicts) {
  const Result r = Quantdiff({"test-impl", "--module", QD_GGML_MODULE, "--format", "gguf", "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  std::set<std::uint64_t> failed;
  for (const auto& [id, outcome] : Failures(Json::parse(r.out), "gguf")) failed.insert(id);
  std::set<std::uint64_t> expected;
  std::set<std::uint64_t> bool_bytes;  // the GGUF-020 vectors
  const Json exported = ExportedDocument("gguf");
  for (const Json& group : exported["testGroups"]) {
    const std::string rule = group.value("rule", Json()).is_string() ? group["rule"].get<std::string>() : "";
    for (const Json& test : group["tests"]) {
      bool fails = rule == "GGUF-101" || rule == "GGUF-102" || (rule.empty() && test.contains("upstreamFlags"));
      if (rule.empty() && test.contains("expectedOutput")) {
        for (const std::vector<std::uint64_t>& shape : ExpectedShapes(test["expectedOutput"]["file"])) {
          fails = fails || shape.empty() || (shape.size() > 1 && shape.front() == 1);
        }
      }
      if (fails) expected.insert(test["tcId"].get<std::uint64_t>());
      if (rule == "GGUF-020") bool_bytes.insert(test["tcId"].get<std::uint64_t>());
    }
  }
  ASSERT_FALSE(expected.empty());
  std::set<std::uint64_t> failed_bool_bytes;
  std::set_intersection(failed.begin(), failed.end(), bool_bytes.begin(), bool_bytes.end(),
                        std::inserter(failed_bool_bytes, failed_bool_bytes.end()));
  EXPECT_FALSE(failed_bool_bytes.empty()) << "ggml refused every BOOL byte other than 0 or 1";
  expected.insert(failed_bool_bytes.begin(), failed_bool_bytes.end());
  EXPECT_EQ(failed, expected);
}
#endif  // QD_GGML_MODULE

#if QD_REPORT_TOOLS
// The reports held to outside validators (issue 13 item 5): JUnit XML to
// reports/junit.xsd with xmllint, SARIF to the SARIF 2.1.0 schema with
// jsonschema, the HTML page in headless Chromium. Registered only when the
// tools are there (cli/CMakeLists.txt; with CI=true they must be).
//
// The implementation under test is quantdiff's decoder with the top byte of
// the last value it writes set to 0xff: every accepted rbq vector decodes
// wrong at that one element, every invalid one is refused correctly. It
// prints hostile HTML to standard error first (the report quotes it), and
// its command ends in a shell comment holding a script tag.
std::string BrokenDecoder() {
  return "printf '%s\\n' '<img src=x onerror=console.error(1)>' >&2; " + Quote(QUANTDIFF_BIN) +
         " decode {input} --out {output} && printf '\\377' | dd of={output} bs=1 "
         "seek=$(($(stat -c %s {output}) - 1)) conv=notrunc 2>/dev/null # </pre><script>console.error(2)</script>";
}

fs::path Scratch(const std::string& name) {
  const fs::path dir = fs::path(QD_TEST_TMPDIR) / "reports";
  fs::create_directories(dir);
  return dir / name;
}

// test-impl --report FORMAT of the broken decoder on the rbq vectors, in a file.
fs::path BrokenReport(const std::string& format) {
  const fs::path out = Scratch("rbq." + format);
  fs::remove(out);
  const Result r = Quantdiff({"test-impl", "--cmd", BrokenDecoder(), "--format", "rbq", "--jobs", "2", "--report",
                              format, "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1) << format;
  return out;
}

// `quantdiff check` on the first eight exported rbq vectors (one valid, the
// others refused), --report FORMAT in a file.
fs::path CheckReport(const std::string& format) {
  std::vector<std::string> args = {"check", "--report", format, "--out", Scratch("check." + format).string()};
  for (std::uint64_t id = 1; id <= 8; ++id) {
    args.push_back((fs::path(QD_SOURCE_DIR) / "corpus" / "vectors" / ExportedVectors("rbq").at(id).file).string());
  }
  EXPECT_EQ(Quantdiff(args).exit_code, 1) << format;  // refusals found
  return Scratch("check." + format);
}

// The rbq vectors the broken decoder fails: the accepted ones (valid and
// acceptable), by the committed export.
std::set<std::uint64_t> AcceptedRbqVectors() {
  std::set<std::uint64_t> ids;
  for (const auto& [id, v] : ExportedVectors("rbq")) {
    if (v.result != "invalid") ids.insert(id);
  }
  return ids;
}

std::size_t Occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string XPath(const fs::path& xml, const std::string& expression) {
  std::string out = Shell(Quote(QD_XMLLINT) + " --xpath " + Quote(expression) + " " + Quote(xml.string())).out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(TestImplReports, JUnitValidatesAgainstTheXsdWithATestcasePerVector) {
  const std::map<std::uint64_t, ExportedVector> vectors = ExportedVectors("rbq");
  const std::set<std::uint64_t> failing = AcceptedRbqVectors();
  ASSERT_FALSE(failing.empty());
  const fs::path xml = BrokenReport("junit");
  const std::string validate = Quote(QD_XMLLINT) + " --noout --schema " + Quote(QD_JUNIT_XSD) + " ";
  EXPECT_EQ(Shell(validate + Quote(xml.string()) + " 2>&1").exit_code, 0) << Slurp(xml);
  EXPECT_EQ(XPath(xml, "count(//testsuite)"), "1");
  EXPECT_EQ(XPath(xml, "count(//testcase)"), std::to_string(vectors.size()));
  EXPECT_EQ(XPath(xml, "string(//testsuite/@failures)"), std::to_string(failing.size()));
  EXPECT_EQ(XPath(xml, "count(//testcase/failure[@type='wrong-output'])"), std::to_string(failing.size()));
  for (const auto& [id, v] : vectors) {
    const std::string testcase = "//testcase[@name='tcId " + std::to_string(id) + " " + v.file + "']";
    EXPECT_EQ(XPath(xml, "count(" + testcase + "/failure)"), failing.count(id) ? "1" : "0") << id;
    const std::string group = v.rule.empty() ? "valid" : v.rule;
    EXPECT_EQ(XPath(xml, "string(" + testcase + "/@classname)"), "quantdiff.test-impl.rbq." + group) << id;
  }
  // check's JUnit report is held to the same schema.
  const fs::path check = CheckReport("junit");
  EXPECT_EQ(Shell(validate + Quote(check.string()) + " 2>&1").exit_code, 0) << Slurp(check);
  EXPECT_EQ(XPath(check, "count(//testcase)"), "8");
}

TEST(TestImplReports, SarifValidatesAgainstTheSarif210SchemaWithAResultPerVector) {
  const std::map<std::uint64_t, ExportedVector> vectors = ExportedVectors("rbq");
  const std::set<std::uint64_t> failing = AcceptedRbqVectors();
  const fs::path sarif = BrokenReport("sarif");
  const std::string validate =
      Quote(QD_PYTHON3) + " -c 'import json, sys, jsonschema; jsonschema.Draft4Validator(json.load(open(sys.argv[1])))"
      ".validate(json.load(open(sys.argv[2])))' " + Quote(QD_SARIF_SCHEMA) + " ";
  EXPECT_EQ(Shell(validate + Quote(sarif.string()) + " 2>&1").exit_code, 0) << Slurp(sarif).substr(0, 2000);

  const Json doc = Json::parse(Slurp(sarif));
  const Json& run = doc["runs"][0];
  const Json& rules = run["tool"]["driver"]["rules"];
  std::set<std::string> rule_ids;
  for (const Json& r : rules) rule_ids.insert(r["id"].get<std::string>());
  std::ifstream catalogue_file(fs::path(QD_SOURCE_DIR) / "oracles" / "rules.json");
  const Json catalogue = Json::parse(catalogue_file);
  for (const Json& r : catalogue["rules"]) EXPECT_TRUE(rule_ids.count(r["id"].get<std::string>())) << r["id"];
  ASSERT_EQ(run["results"].size(), vectors.size());
  for (const Json& result : run["results"]) {
    const std::uint64_t id = result["properties"]["tcId"];
    const ExportedVector& v = vectors.at(id);
    const bool fails = failing.count(id) > 0;
    EXPECT_EQ(result["ruleId"], v.rule.empty() ? "QD-VALID" : v.rule) << id;
    EXPECT_EQ(rules[result["ruleIndex"].get<std::size_t>()]["id"], result["ruleId"]) << id;
    EXPECT_EQ(result["kind"], fails ? "fail" : "pass") << id;
    EXPECT_EQ(result["level"], fails ? "error" : "none") << id;
    EXPECT_EQ(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], v.file) << id;
  }
  // check's SARIF report is held to the same schema.
  const fs::path check = CheckReport("sarif");
  EXPECT_EQ(Shell(validate + Quote(check.string()) + " 2>&1").exit_code, 0) << Slurp(check).substr(0, 2000);
}

TEST(TestImplReports, MarkdownHasARowPerRuleAndAReproducerPerFailingVector) {
  const std::set<std::uint64_t> failing = AcceptedRbqVectors();
  std::map<std::string, std::pair<int, int>> groups;  // rule -> (pass, fail), by the export
  for (const auto& [id, v] : ExportedVectors("rbq")) {
    auto& [pass, fail] = groups[v.rule.empty() ? "valid" : v.rule];
    ++(failing.count(id) ? fail : pass);
  }
  const std::string md = Slurp(BrokenReport("markdown"));
  EXPECT_NE(md.find("does not conform, " + std::to_string(failing.size()) + " of " +
                    std::to_string(ExportedVectors("rbq").size()) + " vectors fail"),
            std::string::npos)
      << md;
  for (const auto& [rule, counts] : groups) {
    std::string escaped;  // Markdown escapes ASCII punctuation
    for (const char c : rule) escaped += c == '-' ? std::string("\\-") : std::string(1, c);
    const std::string row = std::string("| ") + (counts.second > 0 ? "**FAIL**" : "pass") + " | rbq | " + escaped +
                            " | " + std::to_string(counts.first) + " | " + std::to_string(counts.second) + " |\n";
    EXPECT_NE(md.find(row), std::string::npos) << row << md;
  }
  for (const std::uint64_t id : failing) {
    EXPECT_EQ(Occurrences(md, " --format rbq --only " + std::to_string(id) + "\n```"), 1u) << id << md;
  }
  // The quoted standard error stays text: raw only inside code blocks.
  std::string prose;
  bool in_code = false;
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("```", 0) == 0) {
      in_code = !in_code;
    } else if (!in_code) {
      prose += line + "\n";
    }
  }
  EXPECT_EQ(Occurrences(prose, "<img"), Occurrences(prose, "\\<img src\\=x")) << prose;
  EXPECT_EQ(Occurrences(prose, "\\<img src\\=x"), failing.size()) << prose;  // in each "got"
}

TEST(TestImplReports, HtmlLoadsInChromiumWithNoConsoleMessageAndShowsTheMatrixAndBothBitPatterns) {
  const std::set<std::uint64_t> failing = AcceptedRbqVectors();
  const std::size_t vectors = ExportedVectors("rbq").size();
  const Json json = Json::parse(Slurp(BrokenReport("json")));
  // Chromium's own log on standard error carries the page's console
  // messages as ":CONSOLE" lines (errors, CSP refusals, uncaught exceptions).
  const auto load = [](const fs::path& page, std::string* log) {
    const fs::path err = Scratch(page.filename().string() + ".log");
    const Result r = Shell(Quote(QD_CHROMIUM) + " --headless --disable-gpu --no-sandbox --user-data-dir=" +
                           Quote(Scratch("chromium-profile").string()) + " --enable-logging=stderr --v=0 --dump-dom " +
                           Quote("file://" + fs::absolute(page).string()) + " 2>" + Quote(err.string()));
    EXPECT_EQ(r.exit_code, 0) << page;
    *log = Slurp(err);
    return r.out;
  };
  std::string log;
  const std::string dom = load(BrokenReport("html"), &log);
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
  EXPECT_EQ(Occurrences(dom, "<table id=\"matrix\""), 1u) << dom.substr(0, 2000);
  EXPECT_EQ(Occurrences(dom, "class=\"cell o-wrong-output\""), failing.size());
  EXPECT_EQ(Occurrences(dom, "class=\"cell o-pass\""), vectors - failing.size());
  // Hostile text from the implementation and the command stays text.
  EXPECT_EQ(dom.find("<img"), std::string::npos);
  EXPECT_EQ(Occurrences(dom, "<script"), 1u);  // the page's own
  EXPECT_NE(dom.find("&lt;img src=x onerror=console.error(1)&gt;"), std::string::npos);
  // Each failure's drill-down shows both bit patterns; the broken decoder
  // set the top byte of the expected value to 0xff.
  ASSERT_EQ(json["failures"].size(), failing.size());
  for (const Json& f : json["failures"]) {
    const std::string want = f["difference"]["expected_bits"];
    const std::string got = f["difference"]["got_bits"];
    EXPECT_EQ(std::stoul(got, nullptr, 16), (std::stoul(want, nullptr, 16) & 0x00ffffffu) | 0xff000000u) << f;
    EXPECT_NE(dom.find(">" + want + "<"), std::string::npos) << want;
    EXPECT_NE(dom.find(">" + got + "<"), std::string::npos) << got;
  }
  EXPECT_EQ(Occurrences(dom, "<table class=\"bits\""), failing.size());

  // check's page: the rules x files matrix, loaded as cleanly.
  const std::string check_dom = load(CheckReport("html"), &log);
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
  EXPECT_EQ(Occurrences(check_dom, "<table id=\"matrix\""), 1u);

  // report-merge's page: rules x implementations, the broken decoder beside
  // quantdiff's own decode on the rbq vectors. Quantdiff's column passes
  // every group; the broken one fails (wholly or partly) exactly the groups
  // holding an accepted vector, and a hostile implementation name stays text.
  const fs::path good = Scratch("good.json");
  fs::remove(good);
  ASSERT_EQ(Quantdiff({"test-impl", "--cmd", Quote(QUANTDIFF_BIN) + " decode {input} --out {output}", "--format",
                       "rbq", "--report", "json", "--out", good.string()})
                .exit_code,
            0);
  const fs::path merged = Scratch("merged.html");
  fs::remove(merged);
  ASSERT_EQ(Quantdiff({"report-merge", "<img src=x onerror=console.error(3)>=" + BrokenReport("json").string(),
                       "quantdiff=" + good.string(), "--report", "html", "--out", merged.string()})
                .exit_code,
            0);
  std::set<std::string> groups, failing_groups;
  for (const auto& [id, v] : ExportedVectors("rbq")) {
    groups.insert(v.rule);
    if (failing.count(id)) failing_groups.insert(v.rule);
  }
  const std::string merged_dom = load(merged, &log);
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
  EXPECT_EQ(Occurrences(merged_dom, "<table id=\"impl-matrix\""), 1u) << merged_dom.substr(0, 2000);
  EXPECT_EQ(Occurrences(merged_dom, "<td class=\"pf "), 2 * groups.size());
  EXPECT_EQ(Occurrences(merged_dom, "<td class=\"pf o-pass\""), 2 * groups.size() - failing_groups.size());
  EXPECT_EQ(Occurrences(merged_dom, "<td class=\"pf o-fail\"") + Occurrences(merged_dom, "<td class=\"pf o-mixed\""),
            failing_groups.size());
  EXPECT_EQ(merged_dom.find("<img"), std::string::npos);
  EXPECT_NE(merged_dom.find("&lt;img src=x onerror=console.error(3)&gt;"), std::string::npos);
}
#endif  // QD_REPORT_TOOLS

}  // namespace
