// vectors_test: replays corpus/vectors/<format>.json, the portable vectors
// other implementations consume, through both readers of every format.
//
// The vectors record the oracle's reading at export time, so this test fails
// when either reader's verdict or rule IDs drift from what was published:
// a change of behaviour must come with re-exported vectors (and a note).
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/registry.h"

namespace {

namespace fs = std::filesystem;
const fs::path kVectors = fs::path(QD_SOURCE_DIR) / "corpus" / "vectors";

std::vector<std::uint8_t> ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// "valid" (accepted, no finding), "acceptable" (accepted with warnings) or
// "invalid" (refused), and the rule IDs in finding order.
std::pair<std::string, std::vector<std::string>> Reading(const qd::Outcome& o) {
  std::vector<std::string> rules;
  for (const qd::Finding& f : o.findings) rules.push_back(f.rule);
  if (o.refused) return {"invalid", rules};
  return {rules.empty() ? "valid" : "acceptable", rules};
}

TEST(Vectors, EveryRegisteredFormatHasVectors) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    EXPECT_TRUE(fs::exists(kVectors / (std::string(f.name) + ".json"))) << f.name;
  }
}

// The FP4 code-8 sign is an upstream disagreement, published as a variant
// flag rather than a failure (issue #3): the bnb vectors must carry it.
TEST(Vectors, BnbVectorsFlagTheFp4Code8Variant) {
  std::ifstream in(kVectors / "bnb.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  int flagged = 0;
  for (const auto& group : doc["testGroups"]) {
    for (const auto& test : group["tests"]) {
      for (const auto& v : test.value("variantFlags", nlohmann::json::array())) {
        flagged += v == "fp4-code8-negzero";
      }
    }
  }
  EXPECT_GT(flagged, 0);
  EXPECT_TRUE(doc["notes"].contains("fp4-code8-negzero"));
}

TEST(Vectors, BothReadersGiveThePublishedVerdictAndRules) {
  int checked = 0;
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    const fs::path manifest = kVectors / (std::string(f.name) + ".json");
    if (!fs::exists(manifest)) continue;
    std::ifstream in(manifest);
    const nlohmann::json doc = nlohmann::json::parse(in);
    ASSERT_EQ(doc["algorithm"], f.name);
    for (const auto& group : doc["testGroups"]) {
      for (const auto& test : group["tests"]) {
        const std::string file = test["file"];
        const std::vector<std::uint8_t> bytes = ReadBytes(kVectors / file);
        char crc[16];
        std::snprintf(crc, sizeof crc, "%08lx",
                      crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
        ASSERT_EQ(test["crc32"], crc) << file << " changed on disk";
        const qd::ByteView view{bytes.data(), bytes.size()};
        const auto want = std::make_pair(test["result"].get<std::string>(),
                                         test["flags"].get<std::vector<std::string>>());
        std::vector<std::string> variants;
        if (f.variants != nullptr) {
          for (const auto& v : f.variants(view)) variants.push_back(v.flag);
        }
        EXPECT_EQ(test.value("variantFlags", std::vector<std::string>{}), variants) << file;
        // Side files (a GPTQ config), named by their path as exported.
        qd::harness::SideFiles side_files;
        for (const auto& config : test.value("configs", nlohmann::json::array())) {
          side_files.push_back({config.get<std::string>(), ReadBytes(kVectors / config)});
        }
        EXPECT_EQ(Reading(f.codec_read(view, file, side_files)), want) << "codec, " << file;
        EXPECT_EQ(Reading(f.oracle_read(view, file, side_files)), want) << "oracle, " << file;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
