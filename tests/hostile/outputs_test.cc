// outputs_test.cc: quantdiff never destroys what it did not create, and what
// it writes it accepts (issue 9 sections 1 and 2; DESIGN.md "Outputs never
// destroy anything"). Each test is one of the ways a user or another process
// can point an output at something precious, run against the built binary.
//
// Expected values are the contract's: exit codes from README "Exit codes"
// (0 ok, 1 findings, 2 usage or I/O), rule IDs from oracles/rules.json, and
// the bytes of files the test wrote itself (which must be unchanged).
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/hostile/run_quantdiff.h"
#include "tests/pt_test_builder.h"

namespace {

namespace fs = std::filesystem;
using qd::hostile::Quantdiff;
using qd::hostile::ReadWhole;
using qd::hostile::RunResult;
using qd::hostile::WriteWhole;

// A safetensors file written from the format text: one F32 tensor "w" of
// shape [2] holding 1.0 and 2.0, header padded with spaces to 8 bytes.
std::string SmallSafetensors() {
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header;
  const unsigned char values[8] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};  // 1.0f, 2.0f
  file.append(reinterpret_cast<const char*>(values), 8);
  return file;
}

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(QD_TEST_TMPDIR) / (std::string(info->test_suite_name()) + "." + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "scratch");
  }

  RunResult Q(const std::vector<std::string>& args, const qd::hostile::RunOptions& options = {}) {
    return Quantdiff(args, dir_ / "scratch", options);
  }

  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  // The names in FOLDER, so a test can say nothing was left behind.
  static std::vector<std::string> Names(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  // A GPTQ vector of corpus/vectors (a folder: model.safetensors beside its
  // config), copied into the test's folder; the vector's JSON says it is valid.
  fs::path CopyGptqVector(const std::string& id, const std::string& to) {
    const fs::path from = fs::path(QD_SOURCE_DIR) / "corpus/vectors/gptq" / id;
    const fs::path dest = dir_ / to;
    fs::create_directories(dest);
    for (const auto& e : fs::directory_iterator(from)) fs::copy_file(e.path(), dest / e.path().filename());
    return dest;
  }

  fs::path dir_;
};

// ---- 1. Never destroy or overwrite what quantdiff did not create -----------

TEST_F(OutputsTest, InputNamedLikeTheOldTemporaryFileSurvivesDecode) {
  // quantdiff once wrote OUT through OUT.tmp: `decode X.tmp --out X`
  // truncated its own input and died of SIGBUS.
  const std::string input = SmallSafetensors();
  WriteWhole(P("x.safetensors.tmp"), input);
  const RunResult r = Q({"decode", P("x.safetensors.tmp"), "--out", P("x.safetensors")});
  EXPECT_EQ(r.signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWhole(P("x.safetensors.tmp")), input);
  EXPECT_EQ(ReadWhole(P("x.safetensors")), input);  // F32 in, the same F32 out
}

TEST_F(OutputsTest, DecodeRefusesToWriteOverItsInputThroughAnyPath) {
  const std::string input = SmallSafetensors();
  WriteWhole(P("in.safetensors"), input);
  fs::create_symlink(P("in.safetensors"), P("link.safetensors"));
  fs::create_hard_link(P("in.safetensors"), P("hard.safetensors"));
  fs::create_directories(dir_ / "sub");
  for (const std::string& out :
       {P("in.safetensors"), P("link.safetensors"), P("hard.safetensors"),
        P("sub/../in.safetensors")}) {
    const RunResult r = Q({"decode", P("in.safetensors"), "--out", out});
    EXPECT_EQ(r.exit_code, 2) << out << ": " << r.err;
    EXPECT_NE(r.err.find("same file"), std::string::npos) << r.err;
    EXPECT_EQ(ReadWhole(P("in.safetensors")), input) << out;
  }
  EXPECT_TRUE(fs::is_symlink(P("link.safetensors")));
}

TEST_F(OutputsTest, CheckReportRefusesToWriteOverAnInput) {
  const std::string input = SmallSafetensors();
  WriteWhole(P("in.safetensors"), input);
  const RunResult r = Q({"check", P("in.safetensors"), "--report", "json", "--out", P("in.safetensors")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(ReadWhole(P("in.safetensors")), input);
}

TEST_F(OutputsTest, ConvertRefusesToWriteOverItsInput) {
  const fs::path folder = CopyGptqVector("4", "model");
  const std::string input = ReadWhole(folder / "model.safetensors");
  const RunResult r = Q({"convert", (folder / "model.safetensors").string(), "--to", "gptq_p", "--out",
                   (folder / "model.safetensors").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(ReadWhole(folder / "model.safetensors"), input);
}

TEST_F(OutputsTest, SymbolicLinksAtTheOldTemporaryNameAreNeverFollowed) {
  WriteWhole(P("in.safetensors"), SmallSafetensors());
  WriteWhole(P("victim"), "someone else's file\n");
  fs::create_symlink(P("victim"), P("out.safetensors.tmp"));
  fs::create_symlink(P("victim"), P("report.json.tmp"));
  EXPECT_EQ(Q({"decode", P("in.safetensors"), "--out", P("out.safetensors")}).exit_code, 0);
  EXPECT_EQ(Q({"check", P("in.safetensors"), "--report", "json", "--out", P("report.json")})
                .exit_code,
            0);
  EXPECT_EQ(ReadWhole(P("victim")), "someone else's file\n");
  EXPECT_TRUE(fs::is_symlink(P("out.safetensors.tmp")));
  EXPECT_TRUE(fs::is_symlink(P("report.json.tmp")));
  EXPECT_EQ(ReadWhole(P("out.safetensors")), SmallSafetensors());
  EXPECT_TRUE(nlohmann::json::accept(ReadWhole(P("report.json"))));
}

TEST_F(OutputsTest, ARefusedDecodeLeavesEverythingInPlace) {
  WriteWhole(P("bad.safetensors"), std::string("\x10\x00\x00", 3));  // ST-001: under 8 bytes
  WriteWhole(P("out.safetensors"), "an older output\n");
  WriteWhole(P("out.safetensors.tmp"), "a user's file\n");
  fs::create_directories(dir_ / "other.safetensors.tmp");  // an empty folder of that name
  const RunResult r = Q({"decode", P("bad.safetensors"), "--out", P("out.safetensors")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("ST-001"), std::string::npos) << r.err;
  const RunResult r2 = Q({"decode", P("bad.safetensors"), "--out", P("other.safetensors")});
  EXPECT_EQ(r2.exit_code, 1) << r2.err;
  EXPECT_EQ(ReadWhole(P("out.safetensors")), "an older output\n");
  EXPECT_EQ(ReadWhole(P("out.safetensors.tmp")), "a user's file\n");
  EXPECT_TRUE(fs::is_directory(dir_ / "other.safetensors.tmp"));
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"bad.safetensors", "other.safetensors.tmp",
                                                  "out.safetensors", "out.safetensors.tmp",
                                                  "scratch"}));
}

TEST_F(OutputsTest, AFailedConvertKeepsTheExistingOutput) {
  const fs::path folder = CopyGptqVector("4", "model");
  fs::create_directories(dir_ / "out");
  WriteWhole(dir_ / "out/v1.safetensors", "an older output\n");
  // The config convert writes beside OUT cannot be written: a folder holds
  // its name. Once, the failed config write removed the existing OUT.
  fs::create_directories(dir_ / "out/v1.quantize_config.json");
  const RunResult r = Q({"convert", (folder / "model.safetensors").string(), "--to", "gptq", "--out",
                   (dir_ / "out/v1.safetensors").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(ReadWhole(dir_ / "out/v1.safetensors"), "an older output\n");
  EXPECT_TRUE(fs::is_directory(dir_ / "out/v1.quantize_config.json"));
  EXPECT_EQ(Names(dir_ / "out"), (std::vector<std::string>{"v1.quantize_config.json",
                                                           "v1.safetensors"}));
}

TEST_F(OutputsTest, OutputsThatAreNotRegularFilesAreRefusedNotReplaced) {
  WriteWhole(P("in.safetensors"), SmallSafetensors());
  ASSERT_EQ(::mkfifo(P("fifo").c_str(), 0644), 0);
  fs::create_directories(dir_ / "folder");
  fs::create_symlink(P("nowhere"), P("dangling"));
  std::vector<std::string> targets = {P("fifo"), P("folder"), P("dangling")};
  // A character device of our own (the null device's numbers), where the
  // test may make one; /dev/null itself is never offered as a target.
  const bool have_device = ::mknod(P("device").c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0;
  if (have_device) targets.push_back(P("device"));
  for (const std::string& out : targets) {
    const RunResult d = Q({"decode", P("in.safetensors"), "--out", out});
    EXPECT_EQ(d.exit_code, 2) << out << ": " << d.err;
    const RunResult c = Q({"check", P("in.safetensors"), "--out", out});
    EXPECT_EQ(c.exit_code, 2) << out << ": " << c.err;
  }
  EXPECT_TRUE(fs::is_fifo(P("fifo")));
  EXPECT_TRUE(fs::is_directory(P("folder")));
  EXPECT_TRUE(fs::is_symlink(P("dangling")));
  if (have_device) {
    EXPECT_TRUE(fs::is_character_file(P("device")));
  }
}

TEST_F(OutputsTest, DashWritesToStandardOutput) {
  WriteWhole(P("in.safetensors"), SmallSafetensors());
  const RunResult d = Q({"decode", P("in.safetensors"), "--out", "-"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, SmallSafetensors());
  const RunResult c = Q({"check", P("in.safetensors"), "--report", "json", "--out", "-"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(nlohmann::json::accept(c.out)) << c.out;
  EXPECT_FALSE(fs::exists(P("-")));
}

TEST_F(OutputsTest, NewOutputsAreReadableByOthersUnlessTheUmaskSaysNo) {
  WriteWhole(P("in.safetensors"), SmallSafetensors());
  const mode_t previous = ::umask(022);
  EXPECT_EQ(Q({"decode", P("in.safetensors"), "--out", P("a.safetensors")}).exit_code, 0);
  ::umask(077);
  EXPECT_EQ(Q({"decode", P("in.safetensors"), "--out", P("b.safetensors")}).exit_code, 0);
  ::umask(previous);
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(::stat(P("a.safetensors").c_str(), &a), 0);
  ASSERT_EQ(::stat(P("b.safetensors").c_str(), &b), 0);
  EXPECT_EQ(a.st_mode & 0777, 0644u);
  EXPECT_EQ(b.st_mode & 0777, 0600u);
}

TEST_F(OutputsTest, AnInputTruncatedWhileMappedIsAnIoErrorNotASignal) {
  // The shim truncates every file whose name ends in ".shrinks" right after
  // quantdiff maps it: the first read of the mapping faults.
  WriteWhole(P("in.shrinks"), SmallSafetensors());
  qd::hostile::RunOptions options;
  options.environment = {std::string("LD_PRELOAD=") + QD_SHRINK_SHIM, "QD_SHRINK_SUFFIX=.shrinks",
                         // A sanitizer runtime must come first among the
                         // libraries; the shim is loaded before it on purpose.
                         "ASAN_OPTIONS=verify_asan_link_order=0"};
  for (const char* verb : {"decode", "check", "diff"}) {
    WriteWhole(P("in.shrinks"), SmallSafetensors());
    std::vector<std::string> args = {verb, P("in.shrinks")};
    if (std::string(verb) == "decode") args.insert(args.end(), {"--out", P("out.safetensors")});
    const RunResult r = Q(args, options);
    EXPECT_EQ(r.signal, 0) << verb << ": " << r.err;
    EXPECT_EQ(r.exit_code, 2) << verb << ": " << r.err;
    EXPECT_NE(r.err.find("in.shrinks"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("changed size while being read"), std::string::npos) << r.err;
    EXPECT_EQ(fs::file_size(P("in.shrinks")), 0u) << "the shim did not run";
  }
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"in.shrinks", "scratch"}));
}

TEST_F(OutputsTest, CampaignWritesOnlyIntoNewEmptyOrItsOwnFolders) {
  fs::create_directories(dir_ / "mine");
  WriteWhole(dir_ / "mine/summary.txt", "my notes\n");
  const RunResult refused = Q({"campaign", "--seconds", "0.2", "--format", "safetensors", "--out",
                         (dir_ / "mine").string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_EQ(ReadWhole(dir_ / "mine/summary.txt"), "my notes\n");
  const RunResult fresh = Q({"campaign", "--seconds", "0.2", "--format", "safetensors", "--out",
                       (dir_ / "new").string()});
  EXPECT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_TRUE(fs::exists(dir_ / "new/summary.txt"));
  const RunResult again = Q({"campaign", "--seconds", "0.2", "--format", "safetensors", "--out",
                       (dir_ / "new").string()});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(OutputsTest, ExportVectorsRemovesOnlyWhatItsEarlierExportListed) {
  const std::string out = (dir_ / "vectors").string();
  ASSERT_EQ(Q({"export-vectors", "--out", out, "--format", "safetensors", "--count", "1"})
                .exit_code,
            0);
  // Files of the user's in the same folders, named as export names its own.
  WriteWhole(dir_ / "vectors/safetensors/999.safetensors", "a user's file\n");
  fs::create_directories(dir_ / "vectors/safetensors/998");
  WriteWhole(dir_ / "vectors/safetensors/998/keep", "a user's file\n");
  const RunResult r = Q({"export-vectors", "--out", out, "--format", "safetensors", "--count", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWhole(dir_ / "vectors/safetensors/999.safetensors"), "a user's file\n");
  EXPECT_EQ(ReadWhole(dir_ / "vectors/safetensors/998/keep"), "a user's file\n");
  // A FORMAT.json that quantdiff did not write is not replaced.
  fs::create_directories(dir_ / "theirs");
  WriteWhole(dir_ / "theirs/safetensors.json", "{\"mine\": true}\n");
  const RunResult theirs = Q({"export-vectors", "--out", (dir_ / "theirs").string(), "--format",
                        "safetensors", "--count", "1"});
  EXPECT_EQ(theirs.exit_code, 2) << theirs.err;
  EXPECT_EQ(ReadWhole(dir_ / "theirs/safetensors.json"), "{\"mine\": true}\n");
}

// ---- 2. What quantdiff writes, it must accept ------------------------------

TEST_F(OutputsTest, DecodeRefusesANameASafetensorsHeaderCannotHold) {
  using namespace qd::pt_test;
  // A torch state dict {"__metadata__": FloatStorage "0" of 4 floats}:
  // a valid .pt (docs/pt.md), whose decoded tensor name is the key a
  // safetensors header reserves for metadata (rule ST-006).
  Pk p;
  p.proto().dict().mark().str("__metadata__").tensor("0", "FloatStorage", 4, 0, {4}, {1});
  p.op('u').stop();
  const Zip z = Archive(p.b, {{"0", F32s({1, 2, 3, 4})}});
  WriteWhole(P("m.pt"), std::string(z.bytes.begin(), z.bytes.end()));
  ASSERT_EQ(Q({"check", P("m.pt")}).exit_code, 0);
  const RunResult r = Q({"decode", P("m.pt"), "--out", P("m.safetensors")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("ST-006"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(P("m.safetensors")));
  EXPECT_EQ(Names(dir_), (std::vector<std::string>{"m.pt", "scratch"}));
}

TEST_F(OutputsTest, ConvertChecksItsOutputWithTheConfigsBesideIt) {
  const fs::path folder = CopyGptqVector("4", "model");  // quant_config.json: format gptq
  // Into the same folder, the source's quant_config.json (format "gptq")
  // would disagree with the new config (format "gptq_p"): CFG-010 for check.
  const RunResult same = Q({"convert", (folder / "model.safetensors").string(), "--to", "gptq_p",
                      "--out", (folder / "planar.safetensors").string()});
  EXPECT_EQ(same.exit_code, 1) << same.err;
  EXPECT_NE(same.err.find("CFG-010"), std::string::npos) << same.err;
  EXPECT_FALSE(fs::exists(folder / "planar.safetensors"));
  EXPECT_FALSE(fs::exists(folder / "planar.quantize_config.json"));
  // Into a folder of its own it is written, and check accepts it there.
  fs::create_directories(dir_ / "out");
  const RunResult other = Q({"convert", (folder / "model.safetensors").string(), "--to", "gptq_p",
                       "--out", (dir_ / "out/planar.safetensors").string()});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const RunResult check = Q({"check", (dir_ / "out/planar.safetensors").string()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

}  // namespace
