// oracle_test.cc: unit tests of the oracle readers.
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

namespace qd::oracle {
namespace {

using Bytes = std::vector<std::uint8_t>;

const char kFileName[] = "model.safetensors";

// 8-byte little-endian N, the header, the data. pad appends spaces until N
// is a multiple of 8 (so that no ST-102 warning appears).
Bytes MakeFile(std::string header, const Bytes& data = {}, bool pad = true) {
  if (pad) {
    while (header.size() % 8 != 0) header += ' ';
  }
  Bytes file;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

// A file whose length prefix says n, followed by `rest`.
Bytes RawFile(std::uint64_t n, std::size_t rest) {
  Bytes file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  file.resize(8 + rest, ' ');
  return file;
}

qd::ByteView View(const Bytes& bytes) { return qd::ByteView{bytes.data(), bytes.size()}; }

qd::Outcome Read(const Bytes& file) { return ReadSafetensors(View(file), kFileName); }
qd::Outcome ReadRbq(const Bytes& file) { return ReadRbqFile(View(file), kFileName); }

// "ST-101,ST-004 refused": the rule IDs in order, then whether refused.
std::string Summary(const qd::Outcome& outcome) {
  std::string text;
  for (const qd::Finding& finding : outcome.findings) {
    if (!text.empty()) text += ",";
    text += finding.rule;
  }
  return text + (outcome.refused ? " refused" : " accepted");
}

std::string Entry(const std::string& dtype, const std::string& shape, std::uint64_t begin,
                  std::uint64_t end) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

void PutU16(Bytes* out, std::uint16_t v) {
  out->push_back(static_cast<std::uint8_t>(v));
  out->push_back(static_cast<std::uint8_t>(v >> 8));
}
void PutU32(Bytes* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void PutU64(Bytes* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint32_t Bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// An RBQ block: the scale, then the payload bytes (the rest zero).
Bytes Block(int bits, std::uint16_t scale, const Bytes& payload) {
  Bytes block;
  PutU16(&block, scale);
  Bytes body(bits == 4 ? 16 : 32, 0);
  for (std::size_t i = 0; i < payload.size(); ++i) body[i] = payload[i];
  block.insert(block.end(), body.begin(), body.end());
  return block;
}

void Append(Bytes* out, const Bytes& more) { out->insert(out->end(), more.begin(), more.end()); }

const char kQ4Metadata[] = R"("__metadata__":{"format":"rabbit-q4b32","block":"32","scale":"f16"})";
const char kQ8Metadata[] = R"("__metadata__":{"format":"rabbit-q8b32","block":"32","scale":"f16"})";

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

// ===========================================================================
// RBQ reader.

TEST(Rbq, NonRbqFileReadsLikeTheContainer) {
  // A two dimensional F32 tensor in a file without block tensors or a
  // rabbit- format: no RBQ-101.
  Bytes data;
  PutU32(&data, 0x3F800000);
  const std::string header = "{\"__metadata__\":{\"format\":\"pt\"},\"w\":" + Entry("F32", "[1,1]", 0, 4) + "}";
  const Bytes file = MakeFile(header, data);
  const qd::Outcome rbq = ReadRbq(file);
  const qd::Outcome container = Read(file);
  EXPECT_EQ(Summary(rbq), " accepted");
  ASSERT_EQ(rbq.tensors.size(), 1u);
  EXPECT_EQ(rbq.tensors[0].values, container.tensors[0].values);
  // Refused by the container: the same finding.
  const Bytes bad = MakeFile(" {\"__metadata__\":1}", {}, false);
  EXPECT_EQ(Summary(ReadRbq(bad)), "ST-101,ST-102,ST-006 refused");
}

TEST(Rbq, MixedWidthsAreRBQ001) {
  Bytes data = Block(4, 0x3C00, {});
  Append(&data, Block(8, 0x3C00, {}));
  // Sorted by offsets: "b" (Q4B32, [0,18]) then "a" (Q8B32, [18,52]).
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"b\":" + Entry("Q4B32", "[1,32]", 0, 18) +
                             ",\"a\":" + Entry("Q8B32", "[1,32]", 18, 52) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), "RBQ-001 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "a");
  EXPECT_EQ(outcome.findings.back().field, "dtype");
  EXPECT_EQ(outcome.findings.back().byte_offset, 8);
  // The other way round, and no metadata at all: RBQ-001 still comes first.
  Bytes swapped = Block(8, 0x3C00, {});
  Append(&swapped, Block(4, 0x3C00, {}));
  const std::string header2 = "{\"b\":" + Entry("Q8B32", "[1,32]", 0, 34) + ",\"a\":" +
                              Entry("Q4B32", "[1,32]", 34, 52) + "}";
  const qd::Outcome outcome2 = ReadRbq(MakeFile(header2, swapped));
  EXPECT_EQ(Summary(outcome2), "RBQ-001 refused");
  EXPECT_EQ(outcome2.findings.back().tensor, "a");
}

TEST(Rbq, WrongDeclarationIsRBQ002) {
  const Bytes q4 = Block(4, 0x3C00, {});
  const std::string tensor = "\"w\":" + Entry("Q4B32", "[1,32]", 0, 18) + "}";
  struct Case {
    std::string metadata;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"", "__metadata__"},
      {"\"__metadata__\":{}", "format"},
      {"\"__metadata__\":{\"format\":\"rabbit-q8b32\",\"block\":\"32\",\"scale\":\"f16\"}", "format"},
      {"\"__metadata__\":{\"format\":\"RABBIT-Q4B32\",\"block\":\"32\",\"scale\":\"f16\"}", "format"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"scale\":\"f16\"}", "block"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"64\",\"scale\":\"f16\"}", "block"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\" 32\",\"scale\":\"f16\"}", "block"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\"}", "scale"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"F16\"}", "scale"},
      {"\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"bf16\"}", "scale"},
  };
  for (const Case& c : cases) {
    const std::string header = "{" + c.metadata + (c.metadata.empty() ? "" : ",") + tensor;
    const qd::Outcome outcome = ReadRbq(MakeFile(header, q4));
    EXPECT_EQ(Summary(outcome), "RBQ-002 refused") << header;
    if (!outcome.findings.empty()) {
      EXPECT_EQ(outcome.findings.back().field, c.field) << header;
      EXPECT_EQ(outcome.findings.back().tensor, "") << header;
    }
  }
  // Extra keys are fine.
  const std::string extra =
      "{\"__metadata__\":{\"format\":\"rabbit-q4b32\",\"block\":\"32\",\"scale\":\"f16\",\"by\":\"me\"}," + tensor;
  EXPECT_EQ(Summary(ReadRbq(MakeFile(extra, q4))), " accepted");
}

TEST(Rbq, WidthFromFormatWhenNoBlockTensor) {
  // A rabbit- format that is neither width, no block tensor: RBQ-002 on format.
  qd::Outcome outcome = ReadRbq(MakeFile("{\"__metadata__\":{\"format\":\"rabbit-q5\",\"block\":\"32\",\"scale\":\"f16\"}}"));
  EXPECT_EQ(Summary(outcome), "RBQ-002 refused");
  EXPECT_EQ(outcome.findings.back().field, "format");
  // rabbit-q8b32 with no block tensor: width 8, checks block and scale.
  outcome = ReadRbq(MakeFile("{\"__metadata__\":{\"format\":\"rabbit-q8b32\",\"block\":\"16\",\"scale\":\"f16\"}}"));
  EXPECT_EQ(Summary(outcome), "RBQ-002 refused");
  EXPECT_EQ(outcome.findings.back().field, "block");
  EXPECT_EQ(Summary(ReadRbq(MakeFile("{" + std::string(kQ8Metadata) + "}"))), " accepted");
}

TEST(Rbq, BadBlockShapesAreRBQ003) {
  const std::vector<std::string> shapes = {"[32]", "[1,16]", "[1,2,32]", "[]", "[1,33]"};
  for (const std::string& shape : shapes) {
    const std::string header = "{" + std::string(kQ4Metadata) + ",\"w\":" + Entry("Q4B32", shape, 0, 18) + "}";
    const qd::Outcome outcome = ReadRbq(MakeFile(header, Block(4, 0x3C00, {})));
    EXPECT_EQ(Summary(outcome), "RBQ-003 refused") << shape;
    EXPECT_EQ(outcome.findings.back().tensor, "w");
    EXPECT_EQ(outcome.findings.back().field, "shape");
  }
}

TEST(Rbq, EmptyMatricesAreAccepted) {
  // rows = 0, and columns = 0 with a huge row count: no block, no loop.
  const std::string header = "{" + std::string(kQ8Metadata) + ",\"a\":" + Entry("Q8B32", "[0,64]", 0, 0) +
                             ",\"b\":" + Entry("Q8B32", "[18446744073709551615,0]", 0, 0) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header));
  EXPECT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 2u);
  EXPECT_TRUE(outcome.tensors[0].values.empty());
  EXPECT_TRUE(outcome.tensors[1].values.empty());
}

TEST(Rbq, TwoDimensionalFloatTensorWarnsRBQ101) {
  // "a" F32 [1,1] at [0,4] warns; "b" Q4B32 [1,16] at [4,22] is RBQ-003.
  Bytes data(4, 0);
  Append(&data, Block(4, 0x3C00, {}));
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"a\":" + Entry("F32", "[1,1]", 0, 4) +
                             ",\"b\":" + Entry("Q4B32", "[1,16]", 4, 22) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), "RBQ-101,RBQ-003 refused");
  EXPECT_EQ(outcome.findings[0].severity, qd::Severity::kWarning);
  EXPECT_EQ(outcome.findings[0].tensor, "a");
  EXPECT_EQ(outcome.findings[0].field, "dtype");
  EXPECT_EQ(outcome.findings[1].tensor, "b");
}

TEST(Rbq, ByteLengthMismatchIsRBQ004) {
  // Q4B32 [1,32] needs 18 bytes.
  std::string header = "{" + std::string(kQ4Metadata) + ",\"w\":" + Entry("Q4B32", "[1,32]", 0, 17) + "}";
  qd::Outcome outcome = ReadRbq(MakeFile(header, Bytes(17, 0)));
  EXPECT_EQ(Summary(outcome), "RBQ-004 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "w");
  EXPECT_EQ(outcome.findings.back().field, "data_offsets");
  // Q8B32 [2,32] needs 68 bytes, not 34.
  header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[2,32]", 0, 34) + "}";
  EXPECT_EQ(Summary(ReadRbq(MakeFile(header, Bytes(34, 0)))), "RBQ-004 refused");
  // 2^57 rows x 2 blocks x 34 bytes overflows 64 bits: disagrees with 0.
  header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[144115188075855872,64]", 0, 0) + "}";
  EXPECT_EQ(Summary(ReadRbq(MakeFile(header))), "RBQ-004 refused");
}

TEST(Rbq, NonFiniteScaleIsRBQ005WithRowAndBlock) {
  // Q8B32 [2,64]: blocks (0,0) (0,1) (1,0) (1,1). Zero, -0, negative,
  // subnormal and the largest finite scale are fine; (1,1) is +inf.
  Bytes data = Block(8, 0x0000, {});
  Append(&data, Block(8, 0x8000, {}));
  Append(&data, Block(8, 0x0001, {}));
  Append(&data, Block(8, 0x7C00, {}));
  const std::string header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[2,64]", 0, 136) + "}";
  const Bytes file = MakeFile(header, data);
  const std::int64_t data_start = static_cast<std::int64_t>(file.size() - 136);
  const qd::Outcome outcome = ReadRbq(file);
  EXPECT_EQ(Summary(outcome), "RBQ-005 refused");
  const qd::Finding& finding = outcome.findings.back();
  EXPECT_EQ(finding.tensor, "w");
  EXPECT_EQ(finding.field, "scale");
  EXPECT_EQ(finding.row, 1);
  EXPECT_EQ(finding.block, 1);
  EXPECT_EQ(finding.byte_offset, data_start + 3 * 34);
}

TEST(Rbq, NaNScaleInTheSecondTensorIsRBQ005) {
  // "z" Q4B32 [1,64] at [0,36] is fine (scales 0xFBFF, 0x3C00); "a" Q4B32
  // [1,64] at [36,72] has a NaN scale (0x7E01) in block (0,1).
  Bytes data = Block(4, 0xFBFF, {});
  Append(&data, Block(4, 0x3C00, {}));
  Append(&data, Block(4, 0x3C00, {}));
  Append(&data, Block(4, 0x7E01, {}));
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"a\":" + Entry("Q4B32", "[1,64]", 36, 72) +
                             ",\"z\":" + Entry("Q4B32", "[1,64]", 0, 36) + "}";
  const Bytes file = MakeFile(header, data);
  const std::int64_t data_start = static_cast<std::int64_t>(file.size() - 72);
  const qd::Outcome outcome = ReadRbq(file);
  EXPECT_EQ(Summary(outcome), "RBQ-005 refused");
  EXPECT_EQ(outcome.findings.back().tensor, "a");
  EXPECT_EQ(outcome.findings.back().row, 0);
  EXPECT_EQ(outcome.findings.back().block, 1);
  EXPECT_EQ(outcome.findings.back().byte_offset, data_start + 36 + 18);
}

TEST(Rbq, DecodesQ4NibblesLowThenHigh) {
  // Block 0, scale 0x3C00 (1.0), payload bytes:
  //   0x80: n0 = 0x0 -> 0,   n1 = 0x8 -> (8^8)-8 = -8
  //   0xF7: n2 = 0x7 -> 7,   n3 = 0xF -> (15^8)-8 = -1
  //   0x21: n4 = 0x1 -> 1,   n5 = 0x2 -> 2
  //   0x9E: n6 = 0xE -> (14^8)-8 = -2, n7 = 0x9 -> (9^8)-8 = -7
  //   the rest zero.
  // Block 1, scale 0xB800 (-0.5), payload 0x87: n0 = 7 -> -3.5, n1 = -8 -> 4.0;
  // the rest q = 0 -> 0 * -0.5 = -0.0.
  Bytes data = Block(4, 0x3C00, {0x80, 0xF7, 0x21, 0x9E});
  Append(&data, Block(4, 0xB800, {0x87}));
  // A BF16 norm weight after the blocks: 0x4040 = 3.0.
  PutU16(&data, 0x4040);
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"norm\":" + Entry("BF16", "[1]", 36, 38) +
                             ",\"w\":" + Entry("Q4B32", "[1,64]", 0, 36) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  ASSERT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 2u);
  const qd::DecodedTensor& w = outcome.tensors[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.shape, (std::vector<std::uint64_t>{1, 64}));
  ASSERT_EQ(w.values.size(), 64u);
  const std::vector<float> first = {0, -8, 7, -1, 1, 2, -2, -7};
  for (int n = 0; n < 8; ++n) EXPECT_EQ(w.values[n], first[n]) << n;
  for (int n = 8; n < 32; ++n) EXPECT_EQ(Bits(w.values[n]), 0x00000000u) << n;
  EXPECT_EQ(w.values[32], -3.5f);
  EXPECT_EQ(w.values[33], 4.0f);
  for (int n = 34; n < 64; ++n) EXPECT_EQ(Bits(w.values[n]), 0x80000000u) << n;
  EXPECT_EQ(outcome.tensors[1].name, "norm");
  EXPECT_EQ(outcome.tensors[1].values, (std::vector<float>{3.0f}));
}

TEST(Rbq, DecodesQ8SignedBytes) {
  // Scale 0x3800 (0.5): 0x80 = -128 -> -64, 0x7F = 127 -> 63.5, 0x03 -> 1.5,
  // 0xFF = -1 -> -0.5. Row 1: scale 0x0001 (2^-24), q = 3 -> 3 * 2^-24.
  Bytes data = Block(8, 0x3800, {0x80, 0x7F, 0x03, 0xFF});
  Append(&data, Block(8, 0x0001, {0x03}));
  const std::string header = "{" + std::string(kQ8Metadata) + ",\"w\":" + Entry("Q8B32", "[2,32]", 0, 68) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  ASSERT_EQ(Summary(outcome), " accepted");
  const std::vector<float>& v = outcome.tensors[0].values;
  ASSERT_EQ(v.size(), 64u);
  EXPECT_EQ(v[0], -64.0f);
  EXPECT_EQ(v[1], 63.5f);
  EXPECT_EQ(v[2], 1.5f);
  EXPECT_EQ(v[3], -0.5f);
  EXPECT_EQ(v[32], std::ldexp(3.0f, -24));
  EXPECT_EQ(v[33], 0.0f);
}

TEST(Rbq, FormatOnlyFileWithFloatTensors) {
  // format rabbit-q4b32, no block tensor, one F32 [1] tensor: accepted and decoded.
  Bytes data;
  PutU32(&data, 0x40000000);  // 2.0
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"n\":" + Entry("F32", "[1]", 0, 4) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, data));
  EXPECT_EQ(Summary(outcome), " accepted");
  ASSERT_EQ(outcome.tensors.size(), 1u);
  EXPECT_EQ(outcome.tensors[0].values, (std::vector<float>{2.0f}));
}

// ===========================================================================
// Quantizer.

TEST(Quantizer, Q4BlockWithMaxSevenHasScaleOne) {
  // max |w| = 7, 7 / 7 = 1 -> 0x3C00. q = round(w / 1), half away from zero:
  //   7 -> 7, -7 -> -7, 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, 2.5 -> 3, -2.5 -> -3,
  //   3.49 -> 3, 6.5 -> 7, -6.5 -> -7, 0.4 -> 0, -0.0 -> 0, the rest 0.
  // Nibbles, low = even: (7, -7=0x9) -> 0x97; (1, -1=0xF) -> 0xF1;
  // (2, 3) -> 0x32; (-3=0xD, 3) -> 0x3D; (7, -7) -> 0x97; (0, 0) -> 0x00.
  std::vector<float> w(32, 0.0f);
  const float head[] = {7, -7, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.49f, 6.5f, -6.5f, 0.4f, -0.0f};
  for (int i = 0; i < 12; ++i) w[i] = head[i];
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 1, 32, &blocks, &error)) << error.message;
  Bytes expected(18, 0);
  const std::uint8_t bytes[] = {0x00, 0x3C, 0x97, 0xF1, 0x32, 0x3D, 0x97, 0x00};
  for (int i = 0; i < 8; ++i) expected[i] = bytes[i];
  EXPECT_EQ(blocks, expected);
}

TEST(Quantizer, Q8Blocks) {
  // Row 0: max 127 -> scale 1.0 (0x3C00): 127, -127, 0.5 -> 1, -1.5 -> -2,
  // 63.5 -> 64, 100.49 -> 100. Row 1: max 254 -> 254 / 127 = 2 -> 0x4000:
  // 3 / 2 = 1.5 -> 2, 1 / 2 = 0.5 -> 1, -1 / 2 -> -1, 254 -> 127, -254 -> -127.
  std::vector<float> w(64, 0.0f);
  const float row0[] = {127, -127, 0.5f, -1.5f, 63.5f, 100.49f};
  const float row1[] = {3, 1, -1, 254, -254};
  for (int i = 0; i < 6; ++i) w[i] = row0[i];
  for (int i = 0; i < 5; ++i) w[32 + i] = row1[i];
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(8, w.data(), 2, 32, &blocks, &error)) << error.message;
  Bytes expected(68, 0);
  const std::uint8_t b0[] = {0x00, 0x3C, 0x7F, 0x81, 0x01, 0xFE, 0x40, 0x64};
  const std::uint8_t b1[] = {0x00, 0x40, 0x02, 0x01, 0xFF, 0x7F, 0x81};
  for (int i = 0; i < 8; ++i) expected[i] = b0[i];
  for (int i = 0; i < 7; ++i) expected[34 + i] = b1[i];
  EXPECT_EQ(blocks, expected);
}

TEST(Quantizer, SubnormalScaleClampsToTheRange) {
  // w0 = 9.8 * 2^-24, w1 = -9.8 * 2^-24: max / 7 = 1.4 * 2^-24 rounds to the
  // subnormal 0x0001 (2^-24). w / 2^-24 = +-9.8 -> +-10, clamped to 7 and -8.
  // Nibbles (7, -8 = 0x8) -> 0x87.
  std::vector<float> w(32, 0.0f);
  w[0] = std::ldexp(9.8f, -24);
  w[1] = -std::ldexp(9.8f, -24);
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 1, 32, &blocks, &error));
  Bytes expected(18, 0);
  expected[0] = 0x01;
  expected[2] = 0x87;
  EXPECT_EQ(blocks, expected);
}

TEST(Quantizer, ZeroAndUnderflowingBlocksStoreZero) {
  // All zeros (and -0): scale 0, payload 0. max 2^-30: 2^-30 / 7 is below
  // 2^-25, the scale rounds to 0, so the block stores zeros too.
  std::vector<float> w(96, 0.0f);
  w[3] = -0.0f;
  w[32] = std::ldexp(1.0f, -30);
  w[33] = -std::ldexp(1.0f, -31);
  w[64] = 1.0f;  // third block: 1 / 127 -> scale nonzero
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(8, w.data(), 1, 96, &blocks, &error));
  ASSERT_EQ(blocks.size(), 3u * 34);
  for (int i = 0; i < 68; ++i) EXPECT_EQ(blocks[i], 0) << i;
  // 1 / 127 = 1.007874 * 2^-7: mantissa 1.007874 * 1024 = 1032.06 -> 1032,
  // binary16 (-7 + 15) << 10 | 8 = 0x2008, value 1032 / 1024 * 2^-7.
  // q = round(128 * 1024 / 1032) = round(127.0078) = 127.
  EXPECT_EQ(blocks[68] | (blocks[69] << 8), 0x2008);
  EXPECT_EQ(blocks[70], 0x7F);
}

TEST(Quantizer, LargestFiniteScale) {
  // 65504 * 7 = 458528 -> scale 65504 = 0x7BFF, q = 7.
  std::vector<float> w(32, 0.0f);
  w[5] = 458528.0f;
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 1, 32, &blocks, &error));
  EXPECT_EQ(blocks[0], 0xFF);
  EXPECT_EQ(blocks[1], 0x7B);
  EXPECT_EQ(blocks[2 + 2], 0x70);  // n = 5 is the high nibble of byte 2 + 2
}

TEST(Quantizer, ScaleOverflowIsRBQ005) {
  // Row 1, block 0: max 65520 * 7 = 458640, / 7 = 65520 -> binary16 infinity.
  std::vector<float> w(64, 1.0f);
  w[32 + 9] = -458640.0f;
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  EXPECT_FALSE(QuantizeRbq(4, w.data(), 2, 32, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-005");
  EXPECT_EQ(error.severity, qd::Severity::kError);
  EXPECT_EQ(error.row, 1);
  EXPECT_EQ(error.block, 0);
}

TEST(Quantizer, NonFiniteWeightIsRBQ005) {
  std::vector<float> w(64, 1.0f);
  w[40] = std::numeric_limits<float>::quiet_NaN();  // row 0, block 1
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  EXPECT_FALSE(QuantizeRbq(8, w.data(), 1, 64, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-005");
  EXPECT_EQ(error.row, 0);
  EXPECT_EQ(error.block, 1);
  w[40] = 1.0f;
  w[0] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(QuantizeRbq(4, w.data(), 1, 64, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-005");
  EXPECT_EQ(error.block, 0);
}

TEST(Quantizer, RaggedColumnsAreRBQ003) {
  std::vector<float> w(48, 1.0f);
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  EXPECT_FALSE(QuantizeRbq(4, w.data(), 1, 48, &blocks, &error));
  EXPECT_EQ(error.rule, "RBQ-003");
}

TEST(Quantizer, GateWeightsAreExact) {
  // Spec: every block carrying +7 or -7 has scale one and integer payloads,
  // so decoding gives back the weights exactly. Round trip through a file.
  std::vector<float> w(64);
  for (int i = 0; i < 64; ++i) w[i] = static_cast<float>((i * 7) % 15 - 7);  // -7..7, both ends in each block
  std::vector<std::uint8_t> blocks;
  qd::Finding error;
  ASSERT_TRUE(QuantizeRbq(4, w.data(), 2, 32, &blocks, &error));
  const std::string header = "{" + std::string(kQ4Metadata) + ",\"w\":" + Entry("Q4B32", "[2,32]", 0, 36) + "}";
  const qd::Outcome outcome = ReadRbq(MakeFile(header, blocks));
  ASSERT_EQ(Summary(outcome), " accepted");
  EXPECT_EQ(outcome.tensors[0].values, w);
}

// ===========================================================================
// Matrix vector product.

TEST(Matvec, Q4KnownNibbles) {
  // q = 0, -8, 7, -1, 1, 2, -2, -7, then 0; x[k] = k + 1; scale 1:
  // 0 - 16 + 21 - 4 + 5 + 12 - 14 - 56 = -52.
  const Bytes blocks = Block(4, 0x3C00, {0x80, 0xF7, 0x21, 0x9E});
  std::vector<float> x(32);
  for (int k = 0; k < 32; ++k) x[k] = static_cast<float>(k + 1);
  float y = 0.0f;
  ASSERT_TRUE(MatvecRbq(4, View(blocks), 1, 32, x.data(), &y));
  EXPECT_EQ(y, -52.0f);
}

TEST(Matvec, Q8TwoRowsTwoBlocks) {
  // x = ones. Row 0: block 0 scale 1, q = 1 x32 -> 32; block 1 scale 0.5,
  // q = 2 x32 -> 64 * 0.5 = 32; y0 = 64. Row 1: block 0 scale 2, q0 = 3 ->
  // 6; block 1 scale -2, q = -1 x32 -> -32 * -2 = 64; y1 = 70.
  Bytes blocks = Block(8, 0x3C00, Bytes(32, 0x01));
  Append(&blocks, Block(8, 0x3800, Bytes(32, 0x02)));
  Append(&blocks, Block(8, 0x4000, {0x03}));
  Append(&blocks, Block(8, 0xC000, Bytes(32, 0xFF)));
  const std::vector<float> x(64, 1.0f);
  float y[2] = {0, 0};
  ASSERT_TRUE(MatvecRbq(8, View(blocks), 2, 64, x.data(), y));
  EXPECT_EQ(y[0], 64.0f);
  EXPECT_EQ(y[1], 70.0f);
}

TEST(Matvec, AccumulatesInOrderInBinary32) {
  // q = 1 x32, scale 1, x = 2^24, 1, -2^24, 0...: in order, 2^24 + 1 rounds
  // to 2^24 (tie to even), minus 2^24 gives 0. Any other order gives 1.
  const Bytes blocks = Block(8, 0x3C00, Bytes(32, 0x01));
  std::vector<float> x(32, 0.0f);
  x[0] = 16777216.0f;
  x[1] = 1.0f;
  x[2] = -16777216.0f;
  float y = -1.0f;
  ASSERT_TRUE(MatvecRbq(8, View(blocks), 1, 32, x.data(), &y));
  EXPECT_EQ(y, 0.0f);
}

TEST(Matvec, ScalesTheBlockSumNotEachWeight) {
  // Scale 0x3555 = (1 + 0x155/1024) * 2^-2 = 1365/4096. q = 1 x32 and
  // x = 3 x32: acc = 96 exactly, 96 * 1365/4096 = 131040/4096 = 31.9921875,
  // exact in binary32.
  const Bytes blocks = Block(8, 0x3555, Bytes(32, 0x01));
  const std::vector<float> x(32, 3.0f);
  float y = 0.0f;
  ASSERT_TRUE(MatvecRbq(8, View(blocks), 1, 32, x.data(), &y));
  EXPECT_EQ(y, 31.9921875f);
}

TEST(Matvec, RejectsBadArguments) {
  const Bytes blocks = Block(8, 0x3C00, {});
  const std::vector<float> x(64, 1.0f);
  float y[2] = {0, 0};
  EXPECT_FALSE(MatvecRbq(8, View(blocks), 2, 32, x.data(), y));  // needs 68 bytes
  EXPECT_FALSE(MatvecRbq(4, View(blocks), 1, 32, x.data(), y));  // needs 18 bytes
  EXPECT_FALSE(MatvecRbq(8, View(blocks), 1, 48, x.data(), y));  // ragged columns
  EXPECT_FALSE(MatvecRbq(5, View(blocks), 1, 32, x.data(), y));  // no such width
  EXPECT_FALSE(MatvecRbq(8, View(blocks), 0xFFFFFFFFFFFFFFFFull, 64, x.data(), y));  // overflow
}

}  // namespace
}  // namespace qd::oracle
