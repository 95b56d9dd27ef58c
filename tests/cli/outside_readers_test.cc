// outside_readers_test.cc: the readers of examples/ that are not quantdiff's
// run through `quantdiff test-impl` (README "Outside readers under test"):
// examples/py_reader (Python and numpy, from the contracts, and the same
// reader with one planted fault) and examples/torch_load (Debian's torch
// 1.13.1 torch.load). Compiled in the plain build when their Python modules
// are there (cli/CMakeLists.txt). The expected outcomes come from the
// committed export (corpus/vectors/*.json) and from the triage of torch's
// divergences, never from test-impl's own output.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/test_impl_test_support.h"

namespace {

using namespace qd_test_impl;  // NOLINT(google-build-using-namespace): the suites' shared vocabulary

#ifdef QD_PY_READER_TESTS
// The committed export of FORMAT: every test object of every group.
std::vector<Json> ExportedTests(const std::string& format) {
  const Json doc = ExportedDocument(format);
  std::vector<Json> tests;
  for (const Json& group : doc["testGroups"]) {
    for (const Json& test : group["tests"]) tests.push_back(test);
  }
  return tests;
}

// examples/py_reader: bitsandbytes and GPTQ read from the contracts in
// Python with numpy only, and the same reader with one planted fault.
std::string PyReader(const std::string& broken) {
  return Quote(QD_PYTHON3) + " " + Quote(std::string(QD_SOURCE_DIR) + "/examples/py_reader/read.py") +
         (broken.empty() ? "" : " --broken " + broken) + " {input} {output}";
}

// The tensor names of a committed safetensors vector (its JSON header).
std::vector<std::string> HeaderNames(const std::string& file) {
  std::ifstream in(fs::path(QD_SOURCE_DIR) / "corpus" / "vectors" / file, std::ios::binary);
  unsigned char length_bytes[8] = {};
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | length_bytes[i];
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  // Held in a variable: items() of a temporary would dangle in the loop.
  const Json parsed = Json::parse(header);
  std::vector<std::string> names;
  for (const auto& [name, entry] : parsed.items()) names.push_back(name);
  return names;
}

TEST(PyReader, PassesEveryBitsandbytesAndGptqVector) {
  const Result r = Quantdiff({"test-impl", "--cmd", PyReader(""), "--format", "bnb,gptq", "--jobs", "2",
                              "--timeout", "120", "--report", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const Json report = Json::parse(r.out);
  EXPECT_EQ(report["vectors"].get<std::uint64_t>(), ExportedResults("bnb").size() + ExportedResults("gptq").size());
  EXPECT_EQ(report["failed"].get<std::uint64_t>(), 0u);
}

TEST(PyReader, Fp4CodeEightAsNegativeZeroFailsExactlyTheFlaggedVectors) {
  // The export flags every accepted vector whose FP4 layer holds code 8
  // (variantFlags fp4-code8-negzero, docs/bnb.md "FP4 code 8"); only zeros'
  // signs change, so each is signed-zero and nothing else fails.
  std::map<std::uint64_t, std::string> expected;
  for (const Json& test : ExportedTests("bnb")) {
    const Json flags = test.value("variantFlags", Json::array());
    if (std::find(flags.begin(), flags.end(), "fp4-code8-negzero") != flags.end()) {
      expected[test["tcId"].get<std::uint64_t>()] = "signed-zero";
    }
  }
  ASSERT_FALSE(expected.empty());
  const Result r = Quantdiff({"test-impl", "--cmd", PyReader("fp4-code8-negzero"), "--format", "bnb", "--jobs", "2",
                              "--timeout", "120", "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(Failures(Json::parse(r.out), "bnb"), expected) << r.out;
}

TEST(PyReader, SwappedNibblesFailExactlyTheAcceptedFourBitVectors) {
  // BNB-002 reversed changes every accepted file with a 4-bit layer (a
  // quant_state tensor, HF or GPT-QModel names) and no refusal.
  std::map<std::uint64_t, std::string> expected;
  for (const Json& test : ExportedTests("bnb")) {
    if (test["result"] == "invalid") continue;
    for (const std::string& name : HeaderNames(test["file"])) {
      const bool hf = name.find(".quant_state.bitsandbytes__") != std::string::npos;
      const bool gptqmodel = name.size() >= 18 && name.compare(name.size() - 18, 18, "weight_quant_state") == 0;
      if (hf || gptqmodel) expected[test["tcId"].get<std::uint64_t>()] = "wrong-output";
    }
  }
  ASSERT_FALSE(expected.empty());
  const Result r = Quantdiff({"test-impl", "--cmd", PyReader("nibble-order"), "--format", "bnb", "--jobs", "2",
                              "--timeout", "120", "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(Failures(Json::parse(r.out), "bnb"), expected) << r.out;
}
#endif  // QD_PY_READER_TESTS

#ifdef QD_TORCH_LOAD_TESTS
// examples/torch_load: torch.load(weights_only=True) of Debian's
// python3-torch 1.13.1 under the process protocol. The expected outcomes
// are the triage of its divergences (README "Outside readers under test",
// corpus/upstream/torch/README.md), not torch's output: a torch that reads
// differently fails here, and the triage is then redone.
std::string TorchLoad() {
  return Quote(QD_PYTHON3) + " " + Quote(std::string(QD_SOURCE_DIR) + "/examples/torch_load/torch_load.py");
}

// Every pt vector is a torch process (about 2 s of CPU each, mostly torch's
// import): minutes, so the nightly job runs it (a Nightly suite is not a
// ctest test, cmake/qd_gtest_suites.cmake); ctest keeps the two cases below.
TEST(NightlyTorchLoad, PtVectorsFailExactlyTheTriagedSet) {
  std::map<std::uint64_t, std::string> expected;
  // Valid and acceptable vectors torch 1.13 cannot read: protocol-4 FRAME,
  // BINFLOAT, the 7-item _rebuild_tensor_v2 of torch 2, requires_grad on an
  // integer tensor, version records outside 1..10, a constants.pkl record
  // (handed to torch.jit.load).
  for (std::uint64_t id : {1, 2, 4, 73, 74, 75, 76, 78, 79, 80, 81, 82, 83, 84, 117, 118}) expected[id] = "refused-valid";
  // Invalid by quantdiff's contract, read by torch: ZIP leniency (end
  // records, names, duplicates, local headers, overlaps), the byteorder
  // record ignored, quantdiff's own depth and name-collision rules.
  for (std::uint64_t id : {10, 18, 22, 25, 26, 27, 28, 29, 32, 44, 51, 71, 72}) expected[id] = "accepted-invalid";
  // The bitsandbytes QuantState list layout: the adapter stops (exit 3).
  for (std::uint64_t id : {89, 101, 119, 120}) expected[id] = "crashed";
  const Result r = Quantdiff({"test-impl", "--cmd", TorchLoad() + " {input} {output}", "--format", "pt", "--jobs", "2",
                              "--timeout", "120", "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(Failures(Json::parse(r.out), "pt"), expected) << r.out;
}

// The same vectors with the pt files shaped as torch 1.13's torch.save
// writes them (test-impl --pt-shape torch-1.13: protocol 2, the 6-item
// _rebuild_tensor_v2, requires_grad False on integer tensors, no float
// values), so torch reads them and each invalid one is judged for its own
// rule (issue 13 triage, section C's suggestion). What is left:
TEST(NightlyTorchLoad, Torch113ShapedPtVectorsFailExactlyTheTriagedSet) {
  std::map<std::uint64_t, std::string> expected;
  // The bitsandbytes QuantState list layout, now reached in every file that
  // holds one: the adapter stops (exit 3).
  for (std::uint64_t id : {2, 4, 85, 89, 91, 99, 100, 101, 103, 104, 106, 113, 116, 117, 119, 120}) {
    expected[id] = "crashed";
  }
  // A constants.pkl record (torch hands the file to torch.jit.load) and
  // version records outside torch's 1..10 (warning PT-104 for quantdiff).
  for (std::uint64_t id : {74, 81, 82, 83}) expected[id] = "refused-valid";
  // Read by torch, invalid by the contract: ZIP leniency (end records, an
  // extra field, names, duplicate names, local headers, overlaps: PT-002..007),
  // CRC-32 never checked (PT-008, an upstream finding), the byteorder record
  // ignored (PT-010), quantdiff's depth limit (PT-012), OrderedDict's REDUCE
  // arguments as a list (PT-014: torch's Python unpickler calls func(*args)),
  // a storage record longer than numel * item size (PT-015), a dict key
  // neither str nor int and flattened names that collide (PT-017).
  for (std::uint64_t id : {10, 15, 18, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 35, 36, 42, 43, 44, 51, 52,
                           58, 61, 64, 69, 71, 72}) {
    expected[id] = "accepted-invalid";
  }
  const Result r = Quantdiff({"test-impl", "--cmd", TorchLoad() + " {input} {output}", "--format", "pt",
                              "--pt-shape", "torch-1.13", "--jobs", "2", "--timeout", "120", "--report", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(Failures(Json::parse(r.out), "pt"), expected) << r.out;
}

TEST(TorchLoad, HostilePicklesAreRefusedAndRunNothing) {
  const fs::path peer = fs::path(QD_PEER_DIR) / "pt";
  if (!fs::exists(peer / "manifest.json")) GTEST_SKIP() << "no peer vectors at " << peer;
  // Each payload would write this file (peer README); it must never appear.
  const fs::path pwned = "/tmp/quantdiff_pwned";
  ASSERT_FALSE(fs::exists(pwned)) << "remove " << pwned << " first";
  const fs::path out = fs::path(QD_TEST_TMPDIR) / "hostile.safetensors";
  fs::create_directories(out.parent_path());
  for (const char* name : {"hostile_os_system.pt", "hostile_stack_global.pt", "hostile_eval.pt", "hostile_deep_marks.pt"}) {
    const Result r = Shell(TorchLoad() + " " + Quote((peer / name).string()) + " " + Quote(out.string()) + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << name << ": " << r.out;
    EXPECT_FALSE(fs::exists(pwned)) << name;
  }
}

TEST(TorchLoad, UpstreamFindingsStillHold) {
  // corpus/upstream/torch/README.md: what torch does with each file, beside
  // what quantdiff's contract says (check: 0 accepted, 1 refused).
  struct Finding {
    std::string prefix;
    int torch_exit;
    std::string torch_says;
    int quantdiff_exit;
  };
  const std::vector<Finding> findings = {
      {"float-value-refused-", 1, "Unsupported operand 71", 0},
      {"bfloat16-dtype-refused-", 1, "Unsupported class torch.bfloat16", 0},
      {"crc-not-checked-", 0, "", 1},
      {"constants-pkl-jit-dispatch-", 1, "TorchScript archive", 0},
  };
  const fs::path folder = fs::path(QD_SOURCE_DIR) / "corpus" / "upstream" / "torch";
  const fs::path out = fs::path(QD_TEST_TMPDIR) / "upstream.safetensors";
  fs::create_directories(out.parent_path());
  std::size_t seen = 0;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() != ".pt") continue;
    const std::string file = entry.path().filename().string();
    const auto finding = std::find_if(findings.begin(), findings.end(),
                                      [&](const Finding& f) { return file.rfind(f.prefix, 0) == 0; });
    ASSERT_NE(finding, findings.end()) << file << " is not described";
    ++seen;
    const Result torch = Shell(TorchLoad() + " " + Quote(entry.path().string()) + " " + Quote(out.string()) + " 2>&1");
    EXPECT_EQ(torch.exit_code, finding->torch_exit) << file << ": " << torch.out;
    EXPECT_NE(torch.out.find(finding->torch_says), std::string::npos) << file << ": " << torch.out;
    EXPECT_EQ(Quantdiff({"check", entry.path().string()}).exit_code, finding->quantdiff_exit) << file;
  }
  EXPECT_EQ(seen, findings.size());
}
#endif  // QD_TORCH_LOAD_TESTS

}  // namespace
