// test_impl_test_support.h: what the test-impl suites share (test_impl_test.cc,
// outside_readers_test.cc): running quantdiff and shell commands, and the
// committed export of the vectors (corpus/vectors/*.json) that gives the
// expected results, never test-impl's own output.
#ifndef QUANTDIFF_TESTS_CLI_TEST_IMPL_TEST_SUPPORT_H_
#define QUANTDIFF_TESTS_CLI_TEST_IMPL_TEST_SUPPORT_H_

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace qd_test_impl {

namespace fs = std::filesystem;
using Json = nlohmann::json;

inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The whole file at PATH ("" when it cannot be read).
inline std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Result {
  int exit_code = -1;
  std::string out;
};

// Runs COMMAND through /bin/sh: its exit code and standard output.
inline Result Shell(const std::string& command) {
  Result run;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) run.out.append(buf, n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status)) << "did not exit normally: " << command;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// Runs `quantdiff ARGS...` (every argument quoted), standard error dropped.
inline Result Quantdiff(const std::vector<std::string>& args) {
  std::string command = Quote(QUANTDIFF_BIN);
  for (const std::string& a : args) command += " " + Quote(a);
  return Shell(command + " 2>/dev/null");
}

struct ExportedVector {
  std::string rule;    // the group's rule, "" for the valid group
  std::string file;    // relative to the vector folder
  std::string result;  // "valid", "acceptable", "invalid"
};

// The committed export of FORMAT (corpus/vectors/FORMAT.json).
inline Json ExportedDocument(const std::string& format) {
  std::ifstream in(fs::path(QD_SOURCE_DIR) / "corpus" / "vectors" / (format + ".json"));
  return Json::parse(in);
}

// The committed export of FORMAT by tcId.
inline std::map<std::uint64_t, ExportedVector> ExportedVectors(const std::string& format) {
  const Json doc = ExportedDocument(format);
  std::map<std::uint64_t, ExportedVector> vectors;
  for (const Json& group : doc["testGroups"]) {
    const std::string rule = group.value("rule", Json()).is_string() ? group["rule"].get<std::string>() : "";
    for (const Json& test : group["tests"]) {
      vectors[test["tcId"].get<std::uint64_t>()] = {rule, test["file"], test["result"]};
    }
  }
  return vectors;
}

// tcId -> result ("valid", "acceptable", "invalid").
inline std::map<std::uint64_t, std::string> ExportedResults(const std::string& format) {
  std::map<std::uint64_t, std::string> results;
  for (const auto& [id, v] : ExportedVectors(format)) results[id] = v.result;
  return results;
}

// test-impl's JSON report: failures as (tcId, outcome) of one format.
inline std::map<std::uint64_t, std::string> Failures(const Json& report, const std::string& format) {
  std::map<std::uint64_t, std::string> failures;
  for (const Json& f : report["failures"]) {
    if (f["format"] == format) failures[f["tcId"].get<std::uint64_t>()] = f["outcome"];
  }
  return failures;
}

}  // namespace qd_test_impl

#endif  // QUANTDIFF_TESTS_CLI_TEST_IMPL_TEST_SUPPORT_H_
