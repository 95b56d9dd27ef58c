// independence_test.cc: the codec and the oracle stay independent
// (DESIGN.md, "Independence of codec and oracle").
//
//  * Nothing under oracles/ includes codecs/, harness/, generators/ or
//    nlohmann; nothing under codecs/ includes oracles/. The only project
//    header both include is interface/quantdiff/plain_data.h.
//  * Nothing under generators/ includes harness/ (generators sit below the
//    registry); on each side the .pt and bitsandbytes readers meet only in
//    bnb_pt_layers.{h,cc}.
//  * The oracle library is not linked against codec-side targets.
//  * plain_data.h is plain data: no functions, no inline code, no constants,
//    no tables, only standard headers.
// The source tree is read from QD_SOURCE_DIR (a compile definition).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = QD_SOURCE_DIR;
constexpr char kInterface[] = "quantdiff/plain_data.h";
// The interface headers (interface/quantdiff/): plain data and the sink
// plumbing, the only headers both sides may include.
bool IsInterface(const std::string& path) {
  return path == kInterface || path == "quantdiff/tensor_sink.h";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool IsSource(const fs::path& p) {
  static const std::set<std::string> kExtensions = {".h",   ".hh",  ".hpp", ".hxx", ".c",  ".cc",
                                                    ".cpp", ".cxx", ".inc", ".ipp", ".tcc", ".inl"};
  return kExtensions.count(p.extension().string()) != 0;
}

std::vector<fs::path> SourcesUnder(const std::string& dir) {
  std::vector<fs::path> files;
  const fs::path root = kRoot / dir;
  if (!fs::exists(root)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file() && IsSource(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Include {
  std::string path;  // as written between the quotes or angle brackets
  bool quoted = false;
  int line = 0;
};

// Every #include / #import / #include_next and __has_include of a text.
std::vector<Include> Includes(const std::string& text) {
  static const std::regex kDirective(R"(^\s*#\s*(include|include_next|import)\s*([<"])([^>"]+)[>"])");
  static const std::regex kHasInclude(R"(__has_include(_next)?\s*\(\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::smatch m;
    if (std::regex_search(line, m, kDirective)) out.push_back({m[3].str(), m[2].str() == "\"", number});
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kHasInclude);
         it != std::sregex_iterator(); ++it) {
      out.push_back({(*it)[3].str(), (*it)[2].str() == "\"", number});
    }
  }
  return out;
}

// True when a path component of the include names dir ("codecs/x.h",
// "../codecs/x.h", "quantdiff/../codecs/x.h").
bool NamesDirectory(const std::string& include, const std::string& dir) {
  std::string component;
  std::istringstream parts(include);
  while (std::getline(parts, component, '/')) {
    if (component == dir) return true;
  }
  return false;
}

std::string Relative(const fs::path& p) { return fs::relative(p, kRoot).string(); }

// Project headers (quoted includes) a tree includes.
std::set<std::string> QuotedIncludes(const std::string& dir) {
  std::set<std::string> out;
  for (const fs::path& file : SourcesUnder(dir)) {
    for (const Include& inc : Includes(ReadFile(file))) {
      if (inc.quoted) out.insert(inc.path);
    }
  }
  return out;
}

// The scanner itself: a test that finds nothing must not pass silently.
TEST(Independence, ScannerFindsEveryIncludeSpelling) {
  const std::vector<Include> found = Includes(
      "#include \"codecs/rbq.h\"\n"
      "  #  include <nlohmann/json.hpp>\n"
      "#include_next \"x.h\"\n"
      "#if __has_include(<generators/raw_file.h>)\n"
      "// #include is mentioned in a comment only\n");
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[0].path, "codecs/rbq.h");
  EXPECT_TRUE(found[0].quoted);
  EXPECT_EQ(found[1].path, "nlohmann/json.hpp");
  EXPECT_FALSE(found[1].quoted);
  EXPECT_EQ(found[3].path, "generators/raw_file.h");
  EXPECT_TRUE(NamesDirectory("../codecs/rbq.h", "codecs"));
  EXPECT_FALSE(NamesDirectory("quantdiff/plain_data.h", "codecs"));
}

TEST(Independence, OraclesIncludeNothingFromTheCodecSide) {
  const std::vector<fs::path> files = SourcesUnder("oracles");
  ASSERT_FALSE(files.empty()) << "no sources under " << (kRoot / "oracles");
  int includes = 0;
  for (const fs::path& file : files) {
    for (const Include& inc : Includes(ReadFile(file))) {
      ++includes;
      for (const char* dir : {"codecs", "harness", "generators", "property_tests", "tests",
                              "fuzz", "cli", "reports"}) {
        EXPECT_FALSE(NamesDirectory(inc.path, dir))
            << Relative(file) << ":" << inc.line << " includes " << inc.path;
      }
      std::string lower = inc.path;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      EXPECT_EQ(lower.find("nlohmann"), std::string::npos)
          << Relative(file) << ":" << inc.line << " includes " << inc.path;
      // A project header from the oracle side is either the oracle's own or
      // the plain-data interface.
      if (inc.quoted) {
        EXPECT_TRUE(inc.path.rfind("oracles/", 0) == 0 || IsInterface(inc.path))
            << Relative(file) << ":" << inc.line << " includes " << inc.path;
      }
    }
  }
  EXPECT_GT(includes, 0);
}

TEST(Independence, CodecsIncludeNothingFromTheOracle) {
  const std::vector<fs::path> files = SourcesUnder("codecs");
  ASSERT_FALSE(files.empty()) << "no sources under " << (kRoot / "codecs");
  for (const fs::path& file : files) {
    for (const Include& inc : Includes(ReadFile(file))) {
      EXPECT_FALSE(NamesDirectory(inc.path, "oracles"))
          << Relative(file) << ":" << inc.line << " includes " << inc.path;
      if (inc.quoted) {
        EXPECT_TRUE(inc.path.rfind("codecs/", 0) == 0 || IsInterface(inc.path))
            << Relative(file) << ":" << inc.line << " includes " << inc.path;
      }
    }
  }
}

// The generators sit below the format registry (issue 9, section 5): the
// registry includes generators/generated.h, never the reverse, so qd_harness
// linking qd_generators is no cycle.
TEST(Independence, GeneratorsIncludeNothingFromTheHarness) {
  const std::vector<fs::path> files = SourcesUnder("generators");
  ASSERT_FALSE(files.empty()) << "no sources under " << (kRoot / "generators");
  int includes = 0;
  for (const fs::path& file : files) {
    for (const Include& inc : Includes(ReadFile(file))) {
      ++includes;
      for (const char* dir : {"harness", "oracles", "reports", "cli", "fuzz"}) {
        EXPECT_FALSE(NamesDirectory(inc.path, dir))
            << Relative(file) << ":" << inc.line << " includes " << inc.path;
      }
    }
  }
  EXPECT_GT(includes, 0);
}

// The .pt and bitsandbytes readers know nothing of each other on either side
// (issue 9, section 5): bnb_pt_layers.{h,cc} joins them and is the only file
// that includes both.
TEST(Independence, PtAndBnbReadersMeetOnlyInTheirJoin) {
  for (const char* side : {"codecs", "oracles"}) {
    const std::string dir = side;
    const std::vector<std::pair<std::string, std::string>> forbidden = {
        {"pt.h", dir + "/bnb.h"},          {"pt.cc", dir + "/bnb.h"},
        {"bnb.h", dir + "/pt.h"},          {"bnb.cc", dir + "/pt.h"},
        {"tensor_table.h", dir + "/pt.h"}, {"tensor_table.h", dir + "/bnb.h"},
    };
    for (const auto& [file, header] : forbidden) {
      const fs::path path = kRoot / side / file;
      if (!fs::exists(path)) continue;  // the oracle has no tensor_table.h
      for (const Include& inc : Includes(ReadFile(path))) {
        EXPECT_NE(inc.path, header) << Relative(path) << ":" << inc.line << " includes " << inc.path;
      }
    }
    int joins = 0;
    for (const Include& inc : Includes(ReadFile(kRoot / side / "bnb_pt_layers.h"))) {
      joins += inc.path == dir + "/bnb.h" || inc.path == dir + "/pt.h";
    }
    for (const Include& inc : Includes(ReadFile(kRoot / side / "bnb_pt_layers.cc"))) {
      joins += inc.path == dir + "/bnb.h" || inc.path == dir + "/pt.h";
    }
    EXPECT_EQ(joins, 2) << side << "/bnb_pt_layers.{h,cc} should include " << dir << "/bnb.h and "
                        << dir << "/pt.h";
  }
}

TEST(Independence, TheOnlyCommonHeadersAreTheInterface) {
  const std::set<std::string> oracle = QuotedIncludes("oracles");
  const std::set<std::string> codec = QuotedIncludes("codecs");
  std::vector<std::string> common;
  std::set_intersection(oracle.begin(), oracle.end(), codec.begin(), codec.end(),
                        std::back_inserter(common));
  EXPECT_FALSE(common.empty());
  for (const std::string& path : common) EXPECT_TRUE(IsInterface(path)) << path;
}

// The oracle library links only the interface: a codec-side target in its
// link line would make codec headers reachable.
TEST(Independence, OracleLibraryLinksNoCodecSideTarget) {
  const std::string cmake = ReadFile(kRoot / "oracles" / "CMakeLists.txt");
  ASSERT_FALSE(cmake.empty());
  static const std::regex kLink(R"(target_link_libraries\s*\(\s*qd_oracles\b([^)]*)\))");
  int links = 0;
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), kLink);
       it != std::sregex_iterator(); ++it) {
    ++links;
    const std::string deps = (*it)[1].str();
    for (const char* bad : {"qd_codecs", "qd_harness", "qd_generators", "nlohmann", "qd_reports"}) {
      EXPECT_EQ(deps.find(bad), std::string::npos) << "qd_oracles links " << bad << ": " << deps;
    }
  }
  EXPECT_GT(links, 0) << "no target_link_libraries(qd_oracles ...) found";
  const std::string codecs = ReadFile(kRoot / "codecs" / "CMakeLists.txt");
  EXPECT_EQ(codecs.find("qd_oracles"), std::string::npos) << "codecs/CMakeLists.txt names qd_oracles";
}

// ---- plain_data.h is plain data ------------------------------------------------

// The text without comments and with string / character literals emptied.
std::string StripComments(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const std::size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
      out += ' ';
    } else if (text[i] == '"' || text[i] == '\'') {
      const char quote = text[i];
      out += quote;
      ++i;
      while (i < text.size() && text[i] != quote) i += text[i] == '\\' ? 2 : 1;
      out += quote;
      ++i;
    } else {
      out += text[i++];
    }
  }
  return out;
}

TEST(Independence, InterfaceHeaderIsPlainData) {
  const std::string raw = ReadFile(kRoot / "interface" / "quantdiff" / "plain_data.h");
  ASSERT_FALSE(raw.empty());
  const std::string code = StripComments(raw);

  // No function, no function-like macro, no call: plain data has no parentheses.
  EXPECT_EQ(code.find('('), std::string::npos) << "a function or macro in plain_data.h";

  // No code-carrying or storage keywords.
  static const std::regex kIdentifier(R"([A-Za-z_][A-Za-z_0-9]*)");
  const std::set<std::string> forbidden = {
      "inline", "constexpr", "consteval", "constinit", "static", "template", "operator",
      "virtual", "extern", "friend", "thread_local", "mutable", "asm", "typedef", "class"};
  // "enum class" is allowed: an enum is data.
  static const std::regex kEnumClass(R"(\benum\s+class\b)");
  const std::string without_enum_class = std::regex_replace(code, kEnumClass, "enum");
  std::set<std::string> found_outside_enum;
  for (auto it = std::sregex_iterator(without_enum_class.begin(), without_enum_class.end(),
                                      kIdentifier);
       it != std::sregex_iterator(); ++it) {
    if (forbidden.count(it->str())) found_outside_enum.insert(it->str());
  }
  EXPECT_TRUE(found_outside_enum.empty())
      << "plain_data.h uses " << *found_outside_enum.begin();

  // No tables: no brace-initialised lists and no arrays.
  EXPECT_FALSE(std::regex_search(code, std::regex(R"(=\s*\{)"))) << "an initialiser list";
  EXPECT_FALSE(std::regex_search(code, std::regex(R"(\[)"))) << "an array";

  // No constants: the only number literals are 0 and 1 (defaults such as
  // -1 for "does not apply", and enumerator values).
  static const std::regex kNumber(R"((^|[^A-Za-z_0-9])([0-9][0-9A-Za-z'.]*))");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), kNumber);
       it != std::sregex_iterator(); ++it) {
    const std::string number = (*it)[2].str();
    EXPECT_TRUE(number == "0" || number == "1") << "number literal " << number << " in plain_data.h";
  }

  // Only the include guard is defined, and only standard headers included.
  static const std::regex kDefine(R"(^\s*#\s*define\s+(\w+)(.*)$)");
  int defines = 0;
  std::istringstream lines(code);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kDefine)) {
      ++defines;
      EXPECT_EQ(m[1].str(), "QUANTDIFF_PLAIN_DATA_H_");
      const std::string value = m[2].str();
      EXPECT_TRUE(std::all_of(value.begin(), value.end(),
                              [](unsigned char c) { return std::isspace(c); }))
          << "the include guard carries a value: " << line;
    }
  }
  EXPECT_EQ(defines, 1);
  for (const Include& inc : Includes(raw)) {
    EXPECT_FALSE(inc.quoted) << "plain_data.h includes a project header: " << inc.path;
    EXPECT_EQ(inc.path.find('/'), std::string::npos) << "plain_data.h includes " << inc.path;
    EXPECT_EQ(inc.path.find('.'), std::string::npos) << "not a standard header: " << inc.path;
  }
}

}  // namespace
