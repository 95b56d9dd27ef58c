// fp_contract_test.cc: the oracle is built with -ffp-contract=off and without
// fast-math (DESIGN.md: "built without fast-math and with -ffp-contract=off"),
// so its binary32 arithmetic is the spec's, one rounding per operation.
//
// Two views of the same fact: the COMPILE_OPTIONS of target qd_oracles as
// CMake saw them at configure time (fp_contract_config.h), and the command
// line every oracle library source is really compiled with
// (compile_commands.json, last flag wins).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fp_contract_config.h"

namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The -ffp-contract value in effect for a list of flags (the last one wins);
// "" when none is given.
std::string FpContract(const std::vector<std::string>& flags) {
  std::string value;
  for (const std::string& f : flags) {
    if (f.rfind("-ffp-contract=", 0) == 0) value = f.substr(14);
  }
  return value;
}

bool FastMath(const std::vector<std::string>& flags) {
  bool on = false;
  for (const std::string& f : flags) {
    if (f == "-ffast-math" || f == "-Ofast" || f == "-funsafe-math-optimizations" ||
        f == "-fassociative-math") {
      on = true;
    }
    if (f == "-fno-fast-math") on = false;
  }
  return on;
}

TEST(FpContract, OracleTargetHasFpContractOff) {
  const std::vector<std::string> options = Split(QD_ORACLE_COMPILE_OPTIONS, ';');
  EXPECT_EQ(FpContract(options), "off") << "qd_oracles COMPILE_OPTIONS: " << QD_ORACLE_COMPILE_OPTIONS;
  EXPECT_FALSE(FastMath(options)) << QD_ORACLE_COMPILE_OPTIONS;
  const std::vector<std::string> global = Split(QD_GLOBAL_CXX_FLAGS, ' ');
  EXPECT_FALSE(FastMath(global)) << "CMAKE_CXX_FLAGS: " << QD_GLOBAL_CXX_FLAGS;
}

TEST(FpContract, EveryOracleSourceIsCompiledWithFpContractOff) {
  std::ifstream in(QD_COMPILE_COMMANDS);
  ASSERT_TRUE(in.good()) << "no " << QD_COMPILE_COMMANDS << " (CMAKE_EXPORT_COMPILE_COMMANDS)";
  const nlohmann::json commands = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(commands.is_array());
  const std::vector<std::string> sources = Split(QD_ORACLE_SOURCES, ';');
  ASSERT_FALSE(sources.empty());
  for (const std::string& source : sources) {
    const std::string path =
        source.front() == '/' ? source : std::string(QD_ORACLE_SOURCE_DIR) + "/" + source;
    int seen = 0;
    for (const auto& entry : commands) {
      if (entry.value("file", "") != path) continue;
      // The oracle's own object files (not another target compiling the same file).
      const std::string output = entry.value("output", "");
      const std::string command = entry.value("command", "");
      if (output.find("qd_oracles.dir") == std::string::npos &&
          command.find("qd_oracles.dir") == std::string::npos) {
        continue;
      }
      ++seen;
      const std::vector<std::string> flags = Split(command, ' ');
      EXPECT_EQ(FpContract(flags), "off") << path << ": " << command;
      EXPECT_FALSE(FastMath(flags)) << path << ": " << command;
    }
    EXPECT_GT(seen, 0) << path << " is not in " << QD_COMPILE_COMMANDS;
  }
}

}  // namespace
