// cli_test_support.h: what the CLI programs share: running the built
// quantdiff binary (CliTest: a fresh folder per test, Quantdiff(args) with
// every argument quoted, exit code and both streams), safetensors files
// written by hand from literal header text, and an independent reader of
// the F32 files decode writes. Used by tests/cli/cli_test.cc and
// tests/cli/cli_quant_formats_test.cc.
#ifndef QUANTDIFF_TESTS_CLI_CLI_TEST_SUPPORT_H_
#define QUANTDIFF_TESTS_CLI_CLI_TEST_SUPPORT_H_

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

namespace qd::cli_test {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using Json = nlohmann::json;

// ---------------------------------------------------------------------------
// Running the binary

struct Result {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

inline std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(QD_TEST_TMPDIR) / (std::string(info->test_suite_name()) + "." + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Runs `quantdiff ARGS...` with every argument quoted.
  Result Quantdiff(const std::vector<std::string>& args) {
    std::string command = Quote(QUANTDIFF_BIN);
    for (const std::string& a : args) command += " " + Quote(a);
    const fs::path err_path = dir_ / "stderr.txt";
    command += " 2>" + Quote(err_path.string());
    Result run;
    std::FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed: " << command;
      return run;
    }
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) run.out.append(buf, n);
    const int status = pclose(pipe);
    // A crash (signal) is never an acceptable answer from the tool.
    EXPECT_TRUE(WIFEXITED(status)) << "quantdiff did not exit normally: " << command;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.err = ReadText(err_path);
    return run;
  }

  fs::path Write(const std::string& name, const Bytes& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  fs::path dir_;
};

// ---------------------------------------------------------------------------
// Building files by hand

inline void AppendLength(Bytes* file, std::uint64_t n) {
  for (int i = 0; i < 8; ++i) file->push_back(static_cast<std::uint8_t>(n >> (8 * i)));
}

// The 8-byte little-endian length, the header (padded with spaces to a
// multiple of 8 unless pad is false), then the data.
inline Bytes File(std::string header, const Bytes& data = {}, bool pad = true) {
  if (pad) {
    while (header.size() % 8 != 0) header += ' ';
  }
  Bytes file;
  AppendLength(&file, header.size());
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

inline std::uint64_t HeaderLength(const Bytes& file) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(file[i]) << (8 * i);
  return n;
}

inline Bytes Zeros(std::size_t n) { return Bytes(n, 0); }

// The rabbit-infer metadata for four-bit files (spec "The file").
inline const std::string kQ4Metadata =
    R"("__metadata__":{"format":"rabbit-q4b32","block":"32","scale":"f16"})";

inline std::string U8Entry(const std::string& name, const std::string& shape, const std::string& offsets) {
  return "\"" + name + R"(":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}


// The error finding of a JSON check report (the readers stop at the first).
inline const Json* ErrorFinding(const Json& report) {
  for (const Json& f : report["findings"]) {
    if (f["severity"] == "error") return &f;
  }
  return nullptr;
}

struct SafetensorsTensor {
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<float> values;  // F32 only
};

// A small independent reader of what decode writes: F32 tensors only.
inline std::map<std::string, SafetensorsTensor> ReadF32File(const fs::path& path) {
  const std::string bytes = ReadText(path);
  std::map<std::string, SafetensorsTensor> out;
  if (bytes.size() < 8) {
    ADD_FAILURE() << path << " is shorter than 8 bytes";
    return out;
  }
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u) << "decode output header is not padded";
  const Json header = Json::parse(bytes.substr(8, n));
  std::uint64_t total = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    SafetensorsTensor t;
    t.dtype = entry["dtype"];
    t.shape = entry["shape"].get<std::vector<std::uint64_t>>();
    const std::uint64_t begin = entry["data_offsets"][0];
    const std::uint64_t end = entry["data_offsets"][1];
    EXPECT_EQ(t.dtype, "F32");
    EXPECT_LE(8 + n + end, bytes.size());
    t.values.resize((end - begin) / 4);
    std::memcpy(t.values.data(), bytes.data() + 8 + n + begin, end - begin);
    total += end - begin;
    out[name] = t;
  }
  EXPECT_EQ(8 + n + total, bytes.size()) << "decode output has trailing or missing bytes";
  return out;
}

}  // namespace qd::cli_test

#endif  // QUANTDIFF_TESTS_CLI_CLI_TEST_SUPPORT_H_
