// oracle_test.cc: unit tests of the oracle's safetensors container reader
// (ST-001..ST-013, ST-101, ST-102), its JSON document and binary16
// conversions. The RBQ reader, quantizer and matvec are in
// rbq_oracle_test.cc.
//
// Every expected value below comes from the spec text or the rule catalogue
// and is worked out by hand in the comments next to it; none is a recorded
// output of the code under test.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/json.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"
#include "oracles/oracle_test_files.h"

namespace qd::oracle {
namespace {

using namespace test_files;  // NOLINT: the shared file builders

// ===========================================================================
// ST-001 .. ST-003: the length prefix.

TEST(LengthPrefix, ShorterThanEightBytesIsST001) {
  const Bytes file(7, 0);
  const qd::Outcome outcome = Read(file);
  EXPECT_EQ(Summary(outcome), "ST-001 refused");
  EXPECT_EQ(outcome.findings[0].file, kFileName);
  EXPECT_EQ(outcome.findings[0].byte_offset, 0);
  EXPECT_EQ(outcome.findings[0].severity, qd::Severity::kError);
  EXPECT_EQ(Summary(ReadSafetensors(qd::ByteView{nullptr, 0}, kFileName)), "ST-001 refused");
}

TEST(LengthPrefix, HeaderLengthAboveOneHundredMillionIsST002) {
  // 100,000,001 > 100,000,000; the file holds nothing after the prefix.
  EXPECT_EQ(Summary(Read(RawFile(100000001, 0))), "ST-002 refused");
  EXPECT_EQ(Summary(Read(RawFile(0xFFFFFFFFFFFFFFFFull, 4))), "ST-002 refused");
  EXPECT_EQ(Read(RawFile(100000001, 0)).findings[0].byte_offset, 0);
}

TEST(LengthPrefix, HeaderPastTheEndIsST003) {
  // Exactly 100,000,000 is allowed by ST-002 but the file is 18 bytes long.
  EXPECT_EQ(Summary(Read(RawFile(100000000, 10))), "ST-003 refused");
  // N = 16 with 15 bytes after the prefix.
  EXPECT_EQ(Summary(Read(RawFile(16, 15))), "ST-003 refused");
}

TEST(LengthPrefix, EmptyObjectIsAccepted) {
  const qd::Outcome outcome = Read(MakeFile("{}"));
  EXPECT_EQ(Summary(outcome), " accepted");
  EXPECT_TRUE(outcome.tensors.empty());
}

// ===========================================================================
// ST-004: strict UTF-8 JSON, top-level object.

TEST(HeaderJson, MalformedHeadersAreST004) {
  const std::vector<std::string> headers = {
      std::string(),                              // N = 0: no value at all
      "\xEF\xBB\xBF{}",                           // a UTF-8 BOM is not whitespace
      std::string("{}\0\0", 4),                   // NUL padding
      "{}{}",                                     // a second top-level value
      "{} []",                                    // a second value after whitespace
      "[]",                                       // top level is not an object
      "\"x\"",                                    // top level is a string
      "1",                                        // top level is a number
      "{\"a\":1,}",                               // trailing comma
      "{,}",                                      // comma without member
      "{\"a\" 1}",                                // missing colon
      "{'a':1}",                                  // single quotes
      "{a:1}",                                    // bare key
      "{1:1}",                                    // number key
      "{\"a\":01}",                               // leading zero
      "{\"a\":1.}",                               // fraction without digits
      "{\"a\":.5}",                               // no integer part
      "{\"a\":-}",                                // minus alone
      "{\"a\":1e}",                               // exponent without digits
      "{\"a\":1e+}",                              // exponent sign without digits
      "{\"a\":+1}",                               // plus sign
      "{\"a\":0x1}",                              // hex
      "{\"a\":NaN}",                              // not a literal
      "{\"a\":tru}",                              // truncated literal
      "{\"a\":True}",                             // wrong case
      "{\"a\":nul}",                              // truncated literal
      "{\"a\":\"\\x\"}",                          // unknown escape
      "{\"a\":\"\\u12G4\"}",                      // bad hex digit
      "{\"a\":\"\\u12\"}",                        // short \u
      "{\"a\":\"\\uD800\"}",                      // lone high surrogate
      "{\"a\":\"\\uDC00\"}",                      // lone low surrogate
      "{\"a\":\"\\uD800\\u0041\"}",               // high surrogate then not a low one
      "{\"a\":\"\\uD800x\"}",                     // high surrogate then a plain char
      "{\"a\":\"\\uDBFF\\uDBFF\"}",               // two high surrogates
      "{\"a\":\"\t\"}",                           // raw tab inside a string
      "{\"a\":\"\x01\"}",                         // raw control character
      std::string("{\"a\":\"\0\"}", 8),           // raw NUL inside a string
      "{\"a\":\"\xC0\xAF\"}",                     // overlong 2-byte '/'
      "{\"a\":\"\xC1\xBF\"}",                     // overlong 2-byte
      "{\"a\":\"\xE0\x80\xAF\"}",                 // overlong 3-byte
      "{\"a\":\"\xF0\x80\x80\xAF\"}",             // overlong 4-byte
      "{\"a\":\"\xED\xA0\x80\"}",                 // UTF-8 encoded surrogate U+D800
      "{\"a\":\"\xED\xBF\xBF\"}",                 // UTF-8 encoded surrogate U+DFFF
      "{\"a\":\"\xF4\x90\x80\x80\"}",             // U+110000
      "{\"a\":\"\xF5\x80\x80\x80\"}",             // lead byte 0xF5
      "{\"a\":\"\xF8\x88\x80\x80\x80\"}",         // 5-byte form
      "{\"a\":\"\xC3\"}",                         // truncated sequence
      "{\"a\":\"\x80\"}",                         // lone continuation byte
      "{\"a\":\"\xE2\x82\"}",                     // truncated 3-byte
      "{\"a\":\"\xFF\"}",                         // 0xFF
      "{\"a\":1}\x0C",                            // form feed is not JSON whitespace
      "\x0B{}",                                   // vertical tab is not JSON whitespace
      "\xC2\xA0{}",                               // no-break space is not JSON whitespace
      "{\"a\":1",                                 // unclosed object
      "{\"a\":[1,2}",                             // unclosed array
      "{\"a\":\"abc",                             // unclosed string
      "{\"a\":\"abc\\",                           // string ends inside an escape
      "{\"a\"",                                   // key without value
      "{\"a\":}",                                 // missing value
      "{\"a\":[1 2]}",                            // missing comma in array
      "{\"a\":1 \"b\":2}",                        // missing comma in object
      "{\"a\":[,1]}",                             // leading comma in array
      "{\"a\":[1,]}",                             // trailing comma in array
      "{\"a\":1e400}",                            // overflows binary64 (rules.json ST-004)
      "{\"a\":-1.8e308}",                         // rounds to -infinity
      "{\"a\":1" + std::string(400, '0') + "}",   // a 401-digit integer overflows too
  };
  for (const std::string& header : headers) {
    // No padding: ST-004 comes before ST-101 / ST-102, so it is the only finding.
    const qd::Outcome outcome = Read(MakeFile(header, {}, /*pad=*/false));
    EXPECT_EQ(Summary(outcome), "ST-004 refused") << "header: " << header;
    if (!outcome.findings.empty()) {
      EXPECT_EQ(outcome.findings.back().byte_offset, 8);
      EXPECT_EQ(outcome.findings.back().field, "header");
    }
  }
}

TEST(HeaderJson, ValidJsonCornersAreAccepted) {
  // Extra keys of a tensor entry may hold any JSON value.
  const std::string header =
      "{\"t\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
      "\"x\":[-0, 0, 1.5e+10, 0E-0, -12.25E3, 1.7976931348623157e308, 1e-400, true, false, null, {}, [], \"\"],"
      "\"y\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\u00E9 \\uD83D\\uDE00 \\u0000\","
      "\"z\":\"\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \x7F\","
      "\"\\u0000\":{\"\":1}}}";
  const qd::Outcome outcome = Read(MakeFile(header, Bytes(4, 0)));
  EXPECT_EQ(Summary(outcome), " accepted");
}

TEST(HeaderJson, WhitespaceInsideAndAfterIsAccepted) {
  const std::string header = "{ \"t\" :\t{\"dtype\" : \"U8\",\r\n\"shape\":[ 1 ],\"data_offsets\":[ 0 , 1 ] }\n}\t\r\n ";
  EXPECT_EQ(Summary(Read(MakeFile(header, Bytes(1, 0)))), " accepted");
}

// Top object (depth 1), tensor entry (depth 2), then `arrays` nested arrays.
std::string DeepHeader(int arrays) {
  return "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"deep\":" +
         std::string(arrays, '[') + std::string(arrays, ']') + "}}";
}

TEST(HeaderJson, SixtyFourContainersAreAcceptedSixtyFiveAreST004) {
  // 1 + 1 + 62 = 64 open containers: accepted.
  EXPECT_EQ(Summary(Read(MakeFile(DeepHeader(62), Bytes(1, 0)))), " accepted");
  // 1 + 1 + 63 = 65: refused.
  EXPECT_EQ(Summary(Read(MakeFile(DeepHeader(63), Bytes(1, 0)))), "ST-004 refused");
  // Objects count the same way: {"a":{"a":...}} with 64 and 65 levels. The
  // top-level key "a" is then a tensor whose entry lacks dtype (ST-007), which
  // shows that ST-004 passed.
  std::string objects64;
  for (int i = 0; i < 63; ++i) objects64 += "{\"a\":";
  objects64 += "{}" + std::string(63, '}');
  EXPECT_EQ(Summary(Read(MakeFile(objects64))), "ST-007 refused");
  std::string objects65;
  for (int i = 0; i < 64; ++i) objects65 += "{\"a\":";
  objects65 += "{}" + std::string(64, '}');
  EXPECT_EQ(Summary(Read(MakeFile(objects65))), "ST-004 refused");
}

TEST(HeaderJson, VeryDeepNestingIsRefusedWithoutRecursing) {
  const std::string header = "{\"a\":" + std::string(200000, '[');
  EXPECT_EQ(Summary(Read(MakeFile(header))), "ST-004 refused");
}

// ===========================================================================
// ST-101, ST-102: warnings after ST-004.

TEST(HeaderPadding, LeadingWhitespaceWarnsST101) {
  const qd::Outcome outcome = Read(MakeFile(" {}     "));  // N = 8
  EXPECT_EQ(Summary(outcome), "ST-101 accepted");
  EXPECT_EQ(outcome.findings[0].severity, qd::Severity::kWarning);
  EXPECT_EQ(outcome.findings[0].byte_offset, 8);
  EXPECT_EQ(Summary(Read(MakeFile("\n{}\t\t\t\t\t"))), "ST-101 accepted");
}

TEST(HeaderPadding, UnpaddedLengthWarnsST102) {
  EXPECT_EQ(Summary(Read(MakeFile("{}", {}, /*pad=*/false))), "ST-102 accepted");
  // Both, in catalogue order: ST-101 then ST-102.
  EXPECT_EQ(Summary(Read(MakeFile(" {}", {}, /*pad=*/false))), "ST-101,ST-102 accepted");
}

TEST(HeaderPadding, WarningsAreKeptBeforeALaterError) {
  // ST-101 and ST-102, then ST-006 (__metadata__ is null).
  EXPECT_EQ(Summary(Read(MakeFile(" {\"__metadata__\":null}", {}, false))),
            "ST-101,ST-102,ST-006 refused");
}

// ===========================================================================
// ST-005: duplicate keys anywhere.

TEST(DuplicateKeys, DuplicateInANestedObjectIsST005) {
  const std::string header =
      "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":[{\"a\":1,\"b\":2,\"a\":3}]}}";
  const qd::Outcome outcome = Read(MakeFile(header, Bytes(1, 0)));
  EXPECT_EQ(Summary(outcome), "ST-005 refused");
  EXPECT_EQ(outcome.findings[0].byte_offset, 8);
}

TEST(DuplicateKeys, KeysAreComparedAfterUnescaping) {
  // "a" and "\u0061" are the same key.
  EXPECT_EQ(Summary(Read(MakeFile("{\"__metadata__\":{\"a\":\"1\",\"\\u0061\":\"2\"}}"))),
            "ST-005 refused");
  // "a" and "A" are different keys.
  EXPECT_EQ(Summary(Read(MakeFile("{\"__metadata__\":{\"a\":\"1\",\"A\":\"2\"}}"))), " accepted");
  // Same tensor name twice at the top level.
  const std::string twice = "{\"t\":" + Entry("U8", "[0]", 0, 0) + ",\"t\":" + Entry("U8", "[0]", 0, 0) + "}";
  EXPECT_EQ(Summary(Read(MakeFile(twice))), "ST-005 refused");
}

TEST(DuplicateKeys, FoundInArrayItemsThatAreNotKept) {
  // The header parse keeps 64 items of an array as nodes; the object after
  // 100 zeros is parsed without nodes and its duplicate still found.
  std::string junk = "[";
  for (int i = 0; i < 100; ++i) junk += "0,";
  junk += "{\"a\":1,\"a\":2}]";
  const std::string header =
      "{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":" + junk + "}}";
  const qd::Outcome outcome = Read(MakeFile(header, Bytes(1, 0)));
  EXPECT_EQ(Summary(outcome), "ST-005 refused");
}

TEST(DuplicateKeys, FirstObjectInDocumentOrderAndItsSmallestKey) {
  // The object at "x" opens before the one inside its array, which closes
  // first; document order is by opening brace, so "x"'s smallest duplicate.
  const std::string text = "{\"x\":{\"a\":[{\"c\":1,\"c\":2}],\"d\":1,\"b\":1,\"d\":2,\"b\":2}}";
  for (const std::uint32_t kept : {kNoNode, 0u}) {
    JsonDocument document;
    JsonError error;
    ASSERT_TRUE(ParseJsonObjectText(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(),
                                    &document, &error, kept));
    std::string key;
    ASSERT_TRUE(FindDuplicateKey(document, &key));
    EXPECT_EQ(key, "b") << kept;
  }
}

// The header's own keys are not kept by the parser (json.h, visit_member);
// the reader finds their duplicates from the entries' names and its count of
// __metadata__ members. The top-level object opens first, so its smallest
// duplicated key is the one named, before any inner object's.
std::string St005Key(const std::string& header) {
  const qd::Outcome outcome = Read(MakeFile(header));
  if (outcome.findings.empty() || outcome.findings.back().rule != "ST-005") return "(none)";
  const std::string& message = outcome.findings.back().message;
  const std::size_t open = message.find('"');
  return message.substr(open + 1, message.find('"', open + 1) - open - 1);
}

TEST(DuplicateKeys, TheHeadersOwnKeysAreFoundByTheReader) {
  const std::string t = Entry("F32", "[0]", 0, 0);
  const std::string m = "\"__metadata__\":{}";
  // '_' (0x5F) sorts after 'A' (0x41) and before 'a' (0x61).
  EXPECT_EQ(St005Key("{\"a\":" + t + ",\"a\":" + t + "}"), "a");
  EXPECT_EQ(St005Key("{" + m + ",\"a\":" + t + "," + m + "}"), "__metadata__");
  EXPECT_EQ(St005Key("{\"a\":" + t + "," + m + ",\"a\":" + t + "," + m + "}"), "__metadata__");
  EXPECT_EQ(St005Key("{\"A\":" + t + "," + m + ",\"A\":" + t + "," + m + "}"), "A");
  // Compared after unescaping: \u0061 is a.
  EXPECT_EQ(St005Key("{\"a\":" + t + ",\"\\u0061\":" + t + "}"), "a");
  // The header's duplicate is named before an inner object's, wherever
  // that inner object is.
  EXPECT_EQ(St005Key("{\"z\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[0],"
                     "\"data_offsets\":[0,0]},\"y\":" + t + ",\"y\":" + t + "}"),
            "y");
  // Without one, the first inner object's smallest.
  EXPECT_EQ(St005Key("{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"shape\":[0],"
                     "\"data_offsets\":[0,0]},\"y\":" + t + "}"),
            "shape");
  EXPECT_EQ(St005Key("{\"a\":" + t + ",\"b\":" + t + "," + m + "}"), "(none)");
}

TEST(JsonDocument, ArrayItemsPastTheKeptOnesAreCountedNotStored) {
  std::string text = "{\"a\":[";
  for (int i = 0; i < 1000; ++i) text += "\"xyz\",";
  text += "[1,2]]}";
  JsonDocument document;
  JsonError error;
  ASSERT_TRUE(ParseJsonObjectText(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(),
                                  &document, &error, 3));
  // The object, its array and three strings; the arena holds "a" and three "xyz".
  EXPECT_EQ(document.nodes.size(), 5u);
  EXPECT_EQ(document.nodes[1].child_count, 1001u);
  EXPECT_EQ(document.text, "axyzxyzxyz");
}

TEST(JsonDocument, TopLevelMembersNotKeptKeepKeyAndKindOnly) {
  const std::vector<std::string_view> kept = {"b"};
  const std::string text = "{\"a\":[1,{\"q\":\"zz\"}],\"b\":[7],\"c\":\"long\"}";
  JsonDocument document;
  JsonError error;
  ASSERT_TRUE(ParseJsonObjectText(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(),
                                  &document, &error, kNoNode, &kept));
  // top, a (array, no children), b, b's 7, c (string, no text).
  ASSERT_EQ(document.nodes.size(), 5u);
  EXPECT_EQ(document.Key(1), "a");
  EXPECT_EQ(document.nodes[1].kind, JsonKind::kArray);
  EXPECT_EQ(document.nodes[1].first_child, kNoNode);
  EXPECT_EQ(document.Text(document.nodes[document.FindMember(0, "b")].first_child), "7");
  EXPECT_EQ(document.nodes[document.FindMember(0, "c")].kind, JsonKind::kString);
  EXPECT_EQ(document.text, "ab7c");  // no "q", "zz" or "long"
  // What is not kept is still checked: a duplicate key inside it, nesting.
  for (const std::string& bad : std::vector<std::string>{"{\"a\":{\"k\":1,\"k\":2},\"b\":1}",
                                "{\"a\":" + std::string(64, '[') + std::string(64, ']') + "}",
                                "{\"a\":[1,}"}) {
    JsonDocument d;
    const bool parsed = ParseJsonObjectText(reinterpret_cast<const std::uint8_t*>(bad.data()),
                                            bad.size(), &d, &error, kNoNode, &kept);
    std::string key;
    EXPECT_TRUE(!parsed || FindDuplicateKey(d, &key)) << bad;
  }
}

TEST(DuplicateKeys, ST005ComesBeforeTensorRules) {
  // "t" is not an object (ST-007) but the duplicate is found first.
  EXPECT_EQ(Summary(Read(MakeFile("{\"t\":5,\"u\":{\"k\":1,\"k\":1}}"))), "ST-005 refused");
}

// ===========================================================================
// ST-006: __metadata__.

TEST(Metadata, NotAnObjectOfStringsIsST006) {
  for (const std::string value : {"null", "[]", "\"x\"", "1", "{\"a\":1}", "{\"a\":\"b\",\"c\":null}",
                                  "{\"a\":{}}"}) {
    const qd::Outcome outcome = Read(MakeFile("{\"__metadata__\":" + value + "}"));
    EXPECT_EQ(Summary(outcome), "ST-006 refused") << value;
    EXPECT_EQ(outcome.findings.back().field, "__metadata__");
  }
  EXPECT_EQ(Summary(Read(MakeFile("{\"__metadata__\":{}}"))), " accepted");
  EXPECT_EQ(Summary(Read(MakeFile("{\"__metadata__\":{\"a\":\"b\"}}"))), " accepted");
}

// ===========================================================================
// ST-007: tensor entries.

struct EntryCase {
  std::string entry;
  std::string field;
};

TEST(TensorEntries, BadEntriesAreST007) {
  const std::vector<EntryCase> cases = {
      {"5", ""},
      {"[]", ""},
      {"null", ""},
      {"\"F32\"", ""},
      {"{\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"{\"dtype\":\"F32\",\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[1]}", "data_offsets"},
      {"{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"{\"dtype\":\"Q4B64\",\"shape\":[1],\"data_offsets\":[0,4]}", "dtype"},
      {"{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[-0],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[1e2],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}", "shape"},
      // 2^64 does not fit.
      {"{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}", "shape"},
      {"{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}", "shape"},
  };
  for (const EntryCase& c : cases) {
    const qd::Outcome outcome = Read(MakeFile("{\"w\":" + c.entry + "}", Bytes(4, 0)));
    EXPECT_EQ(Summary(outcome), "ST-007 refused") << c.entry;
    if (!outcome.findings.empty()) {
      EXPECT_EQ(outcome.findings.back().tensor, "w") << c.entry;
      EXPECT_EQ(outcome.findings.back().field, c.field) << c.entry;
      EXPECT_EQ(outcome.findings.back().byte_offset, 8) << c.entry;
    }
  }
}

TEST(TensorEntries, ShapeOfMoreThan64ItemsIsST007) {
  // rules.json ST-007 decision: rank at most 64. All ones: one F32 element.
  const auto entry_of_rank = [](int rank) {
    std::string shape = "[";
    for (int i = 0; i < rank; ++i) shape += i == 0 ? "1" : ",1";
    return "{\"w\":{\"dtype\":\"F32\",\"shape\":" + shape + "],\"data_offsets\":[0,4]}}";
  };
  EXPECT_EQ(Summary(Read(MakeFile(entry_of_rank(64), Bytes(4, 0)))), " accepted");
  for (const int rank : {65, 100000}) {
    const qd::Outcome outcome = Read(MakeFile(entry_of_rank(rank), Bytes(4, 0)));
    EXPECT_EQ(Summary(outcome), "ST-007 refused") << rank;
    ASSERT_FALSE(outcome.findings.empty());
    EXPECT_EQ(outcome.findings.back().tensor, "w");
    EXPECT_EQ(outcome.findings.back().field, "shape");
    EXPECT_EQ(outcome.findings.back().byte_offset, 8);
  }
}

TEST(TensorEntries, EveryKnownDtypeIsAccepted) {
  // One element each; sizes from the catalogue's bit widths (sub-byte dtypes
  // use a shape that fills whole bytes: F4 x2 = 1 byte, F6 x4 = 3 bytes).
  struct Known {
    const char* dtype;
    const char* shape;
    std::uint64_t bytes;
  };
  const std::vector<Known> known = {
      {"BOOL", "[1]", 1},    {"F4", "[2]", 1},      {"F6_E2M3", "[4]", 3}, {"F6_E3M2", "[4]", 3},
      {"U8", "[1]", 1},      {"I8", "[1]", 1},      {"F8_E5M2", "[1]", 1}, {"F8_E4M3", "[1]", 1},
      {"F8_E8M0", "[1]", 1}, {"I16", "[1]", 2},     {"U16", "[1]", 2},     {"F16", "[1]", 2},
      {"BF16", "[1]", 2},    {"I32", "[1]", 4},     {"U32", "[1]", 4},     {"F32", "[1]", 4},
      {"C64", "[1]", 8},     {"F64", "[1]", 8},     {"I64", "[1]", 8},     {"U64", "[1]", 8},
      {"Q4B32", "[1,32]", 18}, {"Q8B32", "[1,32]", 34},
  };
  for (const Known& k : known) {
    const std::string header = "{\"w\":" + Entry(k.dtype, k.shape, 0, k.bytes) + "}";
    EXPECT_EQ(Summary(Read(MakeFile(header, Bytes(k.bytes, 0)))), " accepted") << k.dtype;
  }
}

TEST(TensorEntries, TensorsAreVisitedInNameByteOrder) {
  // Both entries are bad; "Z" (0x5A) sorts before "a" (0x61).
  const std::string header = "{\"a\":5,\"Z\":6}";
  EXPECT_EQ(Read(MakeFile(header)).findings.back().tensor, "Z");
  // "\xC3\xA9" (é) sorts after "z": bytes compare unsigned.
  const std::string utf8 = "{\"\xC3\xA9\":5,\"z\":6}";
  EXPECT_EQ(Read(MakeFile(utf8)).findings.back().tensor, "z");
}

TEST(TensorEntries, RuleByRuleNotTensorByTensor) {
  // "a" overflows (ST-008) and "b" has an unknown dtype (ST-007): every
  // tensor is checked for ST-007 before any for ST-008.
  const std::string header = "{\"a\":" + Entry("F32", "[4294967296,4294967296]", 0, 0) +
                             ",\"b\":" + Entry("XX", "[1]", 0, 4) + "}";
  const qd::Outcome outcome = Read(MakeFile(header, Bytes(4, 0)));
  EXPECT_EQ(Summary(outcome), "ST-007 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "b");
}

// ===========================================================================
// ST-008: sizes overflow.

TEST(TensorSizes, OverflowIsST008) {
  struct Case {
    const char* dtype;
    const char* shape;
  };
  const std::vector<Case> cases = {
      {"U8", "[4294967296,4294967296]"},       // 2^64 elements
      {"F32", "[4294967296,4294967295]"},      // 2^64 - 2^32 elements, x 32 bits overflows
      {"U8", "[2305843009213693952]"},         // 2^61 elements x 8 bits = 2^64
      {"F32", "[18446744073709551615]"},       // (2^64-1) x 32
      {"Q4B32", "[576460752303423488,32]"},    // 2^59 x 32 = 2^64 elements
      {"U8", "[4294967296,4294967296,0]"},     // running product overflows before the 0
  };
  for (const Case& c : cases) {
    const std::string header = "{\"w\":" + Entry(c.dtype, c.shape, 0, 0) + "}";
    const qd::Outcome outcome = Read(MakeFile(header));
    EXPECT_EQ(Summary(outcome), "ST-008 refused") << c.shape;
    EXPECT_EQ(outcome.findings.back().tensor, "w");
    EXPECT_EQ(outcome.findings.back().field, "shape");
  }
}

TEST(TensorSizes, BlockDtypesOnlyCheckTheElementCount) {
  // Q8B32 with 2^58 x 32 = 2^63 elements: no ST-008 (no bit width); the
  // file is then only a container (ReadSafetensors), so RBQ-004 does not run
  // here and ST-009..ST-013 pass with [0,0].
  const std::string header = "{\"w\":" + Entry("Q8B32", "[288230376151711744,32]", 0, 0) + "}";
  EXPECT_EQ(Summary(Read(MakeFile(header))), " accepted");
}

TEST(TensorSizes, ZeroDimensionsMakeEmptyTensors) {
  // (2^64-1) x 0 = 0 elements, left to right without overflow.
  const std::string header = "{\"w\":" + Entry("F32", "[18446744073709551615,0]", 0, 0) + "}";
  const qd::Outcome outcome = Read(MakeFile(header));
  EXPECT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 1u);
  EXPECT_EQ(outcome.tensors[0].shape, (std::vector<std::uint64_t>{18446744073709551615ull, 0}));
  EXPECT_TRUE(outcome.tensors[0].values.empty());
}

// ===========================================================================
// ST-009: data_offsets.

TEST(DataOffsets, BadDataOffsetsAreST009) {
  const std::vector<std::string> offsets = {
      "[4,0]", "[0]", "[]", "[0,4,8]", "\"0,4\"", "{}", "null", "[\"0\",4]", "[-1,4]",
      "[0,4.0]", "[0,4e0]", "[0,18446744073709551616]", "[0,null]", "[[0],4]",
  };
  for (const std::string& value : offsets) {
    const std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":" + value + "}}";
    const qd::Outcome outcome = Read(MakeFile(header, Bytes(4, 0)));
    EXPECT_EQ(Summary(outcome), "ST-009 refused") << value;
    EXPECT_EQ(outcome.findings.back().tensor, "w");
    EXPECT_EQ(outcome.findings.back().field, "data_offsets");
  }
}

// ===========================================================================
// ST-010: byte lengths of non-block dtypes.

TEST(ByteLengths, LengthMismatchIsST010) {
  // F32 [2] needs 8 bytes, not 4.
  EXPECT_EQ(Summary(Read(MakeFile("{\"w\":" + Entry("F32", "[2]", 0, 4) + "}", Bytes(4, 0)))),
            "ST-010 refused");
  // F4 [3] is 12 bits: not whole bytes.
  EXPECT_EQ(Summary(Read(MakeFile("{\"w\":" + Entry("F4", "[3]", 0, 2) + "}", Bytes(2, 0)))),
            "ST-010 refused");
  // F6_E2M3 [3] is 18 bits.
  EXPECT_EQ(Summary(Read(MakeFile("{\"w\":" + Entry("F6_E2M3", "[3]", 0, 3) + "}", Bytes(3, 0)))),
            "ST-010 refused");
  // F32 [] is one element: 4 bytes.
  EXPECT_EQ(Summary(Read(MakeFile("{\"w\":" + Entry("F32", "[]", 0, 4) + "}", Bytes(4, 0)))), " accepted");
  // Q4B32 lengths are not checked by the container (RBQ-004 does).
  EXPECT_EQ(Summary(Read(MakeFile("{\"w\":" + Entry("Q4B32", "[1,32]", 0, 5) + "}", Bytes(5, 0)))),
            " accepted");
}

// ===========================================================================
// ST-011 .. ST-013: data layout.

TEST(DataLayout, HoleOrOverlapIsST011) {
  // "a" [0,4], "b" [8,12]: a hole before "b".
  std::string header = "{\"a\":" + Entry("F32", "[1]", 0, 4) + ",\"b\":" + Entry("F32", "[1]", 8, 12) + "}";
  qd::Outcome outcome = Read(MakeFile(header, Bytes(12, 0)));
  EXPECT_EQ(Summary(outcome), "ST-011 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "b");
  EXPECT_EQ(outcome.findings.back().field, "data_offsets");
  // "a" [0,8], "b" [4,8]: sorted (0,8,a), (4,8,b); "b" overlaps.
  header = "{\"b\":" + Entry("F32", "[1]", 4, 8) + ",\"a\":" + Entry("F32", "[2]", 0, 8) + "}";
  outcome = Read(MakeFile(header, Bytes(8, 0)));
  EXPECT_EQ(Summary(outcome), "ST-011 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "b");
  // The first tensor does not begin at 0.
  header = "{\"z\":" + Entry("F32", "[1]", 4, 8) + "}";
  outcome = Read(MakeFile(header, Bytes(8, 0)));
  EXPECT_EQ(Summary(outcome), "ST-011 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "z");
  // Two tensors on the same bytes: (0,4,a), (0,4,b): "b" begins at 0, not 4.
  header = "{\"b\":" + Entry("F32", "[1]", 0, 4) + ",\"a\":" + Entry("F32", "[1]", 0, 4) + "}";
  outcome = Read(MakeFile(header, Bytes(4, 0)));
  EXPECT_EQ(Summary(outcome), "ST-011 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "b");
}

TEST(DataLayout, EmptyTensorsShareAnOffset) {
  // (0,0,z), (0,4,a), (4,4,b): contiguous.
  const std::string header = "{\"a\":" + Entry("F32", "[1]", 0, 4) + ",\"z\":" + Entry("F32", "[0]", 0, 0) +
                             ",\"b\":" + Entry("U8", "[0,3]", 4, 4) + "}";
  EXPECT_EQ(Summary(Read(MakeFile(header, Bytes(4, 0)))), " accepted");
}

TEST(DataLayout, TrailingBytesAreST012) {
  const std::string header = "{\"a\":" + Entry("F32", "[1]", 0, 4) + "}";
  const Bytes file = MakeFile(header, Bytes(5, 0));
  const std::uint64_t n = file.size() - 8 - 5;
  const qd::Outcome outcome = Read(file);
  EXPECT_EQ(Summary(outcome), "ST-012 refused");
  EXPECT_EQ(outcome.findings.back().field, "data");
  EXPECT_EQ(outcome.findings.back().tensor, "");
  EXPECT_EQ(outcome.findings.back().byte_offset, static_cast<std::int64_t>(8 + n + 4));
  // No tensor and one data byte.
  EXPECT_EQ(Summary(Read(MakeFile("{}", Bytes(1, 0)))), "ST-012 refused");
}

TEST(DataLayout, ShortDataIsST013) {
  const std::string header = "{\"a\":" + Entry("F32", "[1]", 0, 4) + ",\"b\":" + Entry("F32", "[1]", 4, 8) + "}";
  const Bytes file = MakeFile(header, Bytes(7, 0));
  const std::uint64_t n = file.size() - 8 - 7;
  const qd::Outcome outcome = Read(file);
  EXPECT_EQ(Summary(outcome), "ST-013 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "b");
  EXPECT_EQ(outcome.findings.back().field, "data");
  EXPECT_EQ(outcome.findings.back().byte_offset, static_cast<std::int64_t>(8 + n + 4));
  // A huge declared tensor is refused without allocating it.
  const std::string huge = "{\"a\":" + Entry("U8", "[4000000000000]", 0, 4000000000000) + "}";
  EXPECT_EQ(Summary(Read(MakeFile(huge, Bytes(3, 0)))), "ST-013 refused");
}

// ===========================================================================
// Decoding.

TEST(Decode, FloatDtypesInDataOrder) {
  Bytes data;
  // "z" F32 [2] at [0,8]: 1.0 (0x3F800000), -2.5 (0xC0200000).
  PutU32(&data, 0x3F800000);
  PutU32(&data, 0xC0200000);
  // "y" F16 [2,2] at [8,16]: 1.0, 2^-24 (0x0001), -inf (0xFC00), 65504 (0x7BFF).
  PutU16(&data, 0x3C00);
  PutU16(&data, 0x0001);
  PutU16(&data, 0xFC00);
  PutU16(&data, 0x7BFF);
  // "x" BF16 [2] at [16,20]: 1.0 (0x3F80), -0.0 (0x8000).
  PutU16(&data, 0x3F80);
  PutU16(&data, 0x8000);
  // "w" I32 [1] at [20,24]: skipped.
  PutU32(&data, 7);
  // "v" F64 [3] at [24,48]: 1.0; 1 + 2^-24 (a tie between 1 and 1 + 2^-23:
  // to even, 1.0); 1 + 3 * 2^-24 (a tie between 1 + 2^-23 and 1 + 2^-22:
  // to even, 1 + 2^-22).
  PutU64(&data, 0x3FF0000000000000ull);
  PutU64(&data, 0x3FF0000010000000ull);  // mantissa bit 28 = 2^-24
  PutU64(&data, 0x3FF0000030000000ull);  // 3 * 2^-24
  const std::string header = "{\"v\":" + Entry("F64", "[3]", 24, 48) + ",\"w\":" + Entry("I32", "[1]", 20, 24) +
                             ",\"x\":" + Entry("BF16", "[2]", 16, 20) + ",\"y\":" + Entry("F16", "[2,2]", 8, 16) +
                             ",\"z\":" + Entry("F32", "[2]", 0, 8) + "}";
  const qd::Outcome outcome = Read(MakeFile(header, data));
  ASSERT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 4u);
  EXPECT_EQ(outcome.tensors[0].name, "z");
  EXPECT_EQ(outcome.tensors[0].values, (std::vector<float>{1.0f, -2.5f}));
  EXPECT_EQ(outcome.tensors[1].name, "y");
  EXPECT_EQ(outcome.tensors[1].shape, (std::vector<std::uint64_t>{2, 2}));
  EXPECT_EQ(Bits(outcome.tensors[1].values[0]), 0x3F800000u);
  EXPECT_EQ(Bits(outcome.tensors[1].values[1]), 0x33800000u);  // 2^-24: exponent 127-24 = 103
  EXPECT_EQ(Bits(outcome.tensors[1].values[2]), 0xFF800000u);
  EXPECT_EQ(outcome.tensors[1].values[3], 65504.0f);
  EXPECT_EQ(outcome.tensors[2].name, "x");
  EXPECT_EQ(Bits(outcome.tensors[2].values[0]), 0x3F800000u);
  EXPECT_EQ(Bits(outcome.tensors[2].values[1]), 0x80000000u);
  EXPECT_EQ(outcome.tensors[3].name, "v");
  EXPECT_EQ(Bits(outcome.tensors[3].values[0]), 0x3F800000u);
  EXPECT_EQ(Bits(outcome.tensors[3].values[1]), 0x3F800000u);
  EXPECT_EQ(Bits(outcome.tensors[3].values[2]), 0x3F800002u);
}

TEST(Decode, BlockDtypesAreSkippedByTheContainerReader) {
  Bytes data = Block(4, 0x3C00, {0x77});
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"q\":" + Entry("Q4B32", "[1,32]", 0, 18) + "}";
  const qd::Outcome outcome = Read(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), " accepted");
  EXPECT_TRUE(outcome.tensors.empty());
}

// ===========================================================================
// binary16 conversions.

TEST(Half, HalfToFloatIsExact) {
  EXPECT_EQ(Bits(HalfToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3800), 0.5f);
  // 0x0001 = 2^-24.
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  // 0x03FF = 1023 * 2^-24, the largest subnormal.
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  // 0x0400 = 2^-14, the smallest normal.
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));
  // 0x7BFF = (2 - 2^-10) * 2^15 = 65504.
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  // NaN payloads move left by 13 bits.
  EXPECT_EQ(Bits(HalfToFloat(0x7E00)), 0x7FC00000u);
  EXPECT_EQ(Bits(HalfToFloat(0xFE01)), 0xFFC02000u);
}

TEST(Half, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  // 1 + 2^-11 is halfway between 0x3C00 and 0x3C01: to even, 0x3C00.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 is halfway between 0x3C01 and 0x3C02: to even, 0x3C02.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above the tie rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23)), 0x3C01);
  EXPECT_EQ(FloatToHalf(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  // 0.1f = 0x3DCCCCCD: significand 0xCCCCCD, keep 0x666, rest 0xCCD < 0x1000:
  // biased exponent 11 -> 0x2C00 + 0x266 = 0x2E66.
  EXPECT_EQ(FloatToHalf(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  // 65519 is below the tie 65520 between 65504 and 65536.
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  // 65520 is the tie; 65504's mantissa is odd, so it rounds up to infinity.
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  // Subnormal results count units of 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // half a unit: tie to even 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f + std::ldexp(1.0f, -23), -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to even 2
  EXPECT_EQ(FloatToHalf(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 units: tie to even 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);
  // 1023.5 units: tie between 0x03FF and 0x0400, to even: 0x0400.
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  const std::uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

}  // namespace
}  // namespace qd::oracle
