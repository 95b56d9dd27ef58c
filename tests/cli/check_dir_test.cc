// check_dir_test.cc: `quantdiff check DIR` (the built binary) on sharded
// safetensors directories written here byte by byte: the report is the same
// whatever --jobs says (docs/model_dir.md 3: the first refused shard in shard
// order is the one reported, however the threads finish), and the progress
// line appears only on a terminal (a pseudo-terminal here) and never with
// --quiet. The same for `decode DIR` and `diff DIR` (issue 10 item 6).
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/hostile/run_quantdiff.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kShards = 6;

std::string ShardName(int k) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k, kShards);
  return name;
}

// A safetensors file (the format's README): u64 LE header length, the JSON
// header padded with spaces to a multiple of 8, then the data: one F32
// tensor NAME of two values, and EXTRA bytes.
std::string Shard(const std::string& name, const std::string& extra = "") {
  std::string header =
      json{{name, {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}.dump();
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string file;
  for (int i = 0; i < 8; ++i) file += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return file + header + std::string("\0\0\x80\x3f\0\0\0\x40", 8) + extra;
}

class CheckDir : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(QD_TEST_TMPDIR) / info->name();
    fs::remove_all(root_);
    fs::create_directories(Dir());
    fs::create_directories(root_ / "scratch");
    json weight_map = json::object();
    for (int k = 1; k <= kShards; ++k) {
      const std::string tensor = "layer" + std::to_string(k) + ".weight";
      qd::hostile::WriteWhole(Dir() / ShardName(k), Shard(tensor));
      weight_map[tensor] = ShardName(k);
    }
    qd::hostile::WriteWhole(Dir() / "model.safetensors.index.json",
                            json{{"metadata", {{"total_size", 8 * kShards}}},
                                 {"weight_map", weight_map}}.dump());
  }
  fs::path Dir() const { return root_ / "model"; }
  qd::hostile::RunResult Run(const std::vector<std::string>& args) {
    return qd::hostile::Quantdiff(args, root_ / "scratch");
  }
  fs::path root_;
};

TEST_F(CheckDir, SameReportForAnyNumberOfJobs) {
  const qd::hostile::RunResult one = Run({"check", "--jobs", "1", Dir().string()});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("ok [safetensors; 6 shards, total_size counts tensor bytes]"),
            std::string::npos)
      << one.out;
  EXPECT_EQ(one.err, "");  // not a terminal: no progress line
  for (const char* jobs : {"2", "6", "64"}) {
    const qd::hostile::RunResult many = Run({"check", "--jobs", jobs, Dir().string()});
    EXPECT_EQ(many.exit_code, 0) << jobs;
    EXPECT_EQ(many.out, one.out) << jobs;
    EXPECT_EQ(many.err, "") << jobs;
  }
}

// Shards 3 and 5 refused for different rules: every run reports shard 3's
// finding alone, whichever thread finished first.
TEST_F(CheckDir, FirstRefusedShardInShardOrderWhateverTheJobs) {
  qd::hostile::WriteWhole(Dir() / ShardName(3), Shard("layer3.weight", "trailing"));
  std::string five = Shard("layer5.weight");
  five[0] = '\x7f';  // a header length past the end of the file
  qd::hostile::WriteWhole(Dir() / ShardName(5), five);
  const qd::hostile::RunResult one = Run({"check", "--jobs", "1", "--report", "json", Dir().string()});
  ASSERT_EQ(one.exit_code, 1) << one.err;
  const json report = json::parse(one.out);
  const std::string dumped = report.dump();
  EXPECT_NE(dumped.find(ShardName(3)), std::string::npos) << dumped;
  EXPECT_NE(dumped.find("ST-012"), std::string::npos) << dumped;  // trailing bytes
  EXPECT_EQ(dumped.find(ShardName(5)), std::string::npos) << dumped;
  for (int run = 0; run < 5; ++run) {
    const qd::hostile::RunResult many =
        Run({"check", "--jobs", "8", "--report", "json", Dir().string()});
    EXPECT_EQ(many.exit_code, 1);
    EXPECT_EQ(many.out, one.out) << "run " << run;
  }
}

TEST_F(CheckDir, JobsMustBeAPositiveNumber) {
  for (const char* jobs : {"0", "x", "-1", "100000"}) {
    const qd::hostile::RunResult r = Run({"check", "--jobs", jobs, Dir().string()});
    EXPECT_EQ(r.exit_code, 2) << jobs;
    EXPECT_NE(r.err.find("--jobs"), std::string::npos) << r.err;
  }
}

// Runs quantdiff with standard error on a pseudo-terminal; returns what
// appeared there (standard output goes to /dev/null).
std::string TerminalStderr(const std::vector<std::string>& args) {
  int terminal = -1;
  const pid_t pid = ::forkpty(&terminal, nullptr, nullptr, nullptr);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::vector<char*> argv = {const_cast<char*>(QUANTDIFF_BIN)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(QUANTDIFF_BIN, argv.data());
    ::_exit(127);
  }
  std::string seen;
  char buffer[4096];
  for (ssize_t n; (n = ::read(terminal, buffer, sizeof buffer)) > 0;) seen.append(buffer, n);
  ::close(terminal);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return seen;
}

TEST_F(CheckDir, ProgressOnATerminalOnlyAndNotWithQuiet) {
  const std::string shown = TerminalStderr({"check", "--jobs", "1", Dir().string()});
  // One line per shard, rewritten in place, then erased before the report.
  EXPECT_NE(shown.find("1/6 shards (" + ShardName(1) + ")"), std::string::npos) << shown;
  EXPECT_NE(shown.find("5/6 shards (" + ShardName(5) + ")"), std::string::npos) << shown;
  EXPECT_NE(shown.find("6/6 shards, now the format's rules"), std::string::npos) << shown;
  EXPECT_EQ(shown.substr(shown.size() - 4), "\r\x1b[K") << shown;
  EXPECT_EQ(TerminalStderr({"check", "--quiet", Dir().string()}), "");
}

TEST_F(CheckDir, DecodeAndDiffShowProgressOnATerminalToo) {
  const std::string out = (root_ / "scratch" / "decoded.safetensors").string();
  const std::string decoding = TerminalStderr({"decode", "--jobs", "2", Dir().string(), "--out", out});
  EXPECT_NE(decoding.find("6/6 shards, now decoding"), std::string::npos) << decoding;
  EXPECT_NE(decoding.find("tensor 6/6 (layer6.weight)"), std::string::npos) << decoding;
  // The line is erased before decode's own summary line.
  EXPECT_NE(decoding.find("\r\x1b[Kquantdiff decode: "), std::string::npos) << decoding;
  EXPECT_TRUE(fs::exists(out));
  fs::remove(out);
  const std::string quiet = TerminalStderr({"decode", "--quiet", Dir().string(), "--out", out});
  EXPECT_EQ(quiet.find("shards"), std::string::npos) << quiet;
  EXPECT_EQ(quiet.find("tensor "), std::string::npos) << quiet;
  EXPECT_NE(quiet.find("quantdiff decode: "), std::string::npos) << quiet;

  const std::string diffing = TerminalStderr({"diff", "--jobs", "3", Dir().string()});
  EXPECT_NE(diffing.find("1/6 shards"), std::string::npos) << diffing;
  EXPECT_NE(diffing.find("6/6 shards, now both readers' format rules"), std::string::npos) << diffing;
  EXPECT_EQ(diffing.substr(diffing.size() - 4), "\r\x1b[K") << diffing;
  EXPECT_EQ(TerminalStderr({"diff", "--quiet", Dir().string()}), "");
}

TEST_F(CheckDir, DiffReportIsTheSameForAnyNumberOfJobs) {
  const qd::hostile::RunResult one = Run({"diff", "--jobs", "1", "--report", "json", Dir().string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.err, "");  // not a terminal: no progress line
  for (const char* jobs : {"2", "7"}) {
    const qd::hostile::RunResult many = Run({"diff", "--jobs", jobs, "--report", "json", Dir().string()});
    EXPECT_EQ(many.exit_code, 0) << jobs;
    EXPECT_EQ(many.out, one.out) << jobs;
  }
  for (const char* verb : {"diff", "decode"}) {
    const qd::hostile::RunResult r = Run({verb, "--jobs", "0", Dir().string(), "--out", "x.safetensors"});
    EXPECT_EQ(r.exit_code, 2) << verb;
    EXPECT_NE(r.err.find("--jobs"), std::string::npos) << r.err;
  }
}

}  // namespace
