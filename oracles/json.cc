// json.cc: the oracle's strict JSON reader (RFC 8259) and UTF-8 check
// (RFC 3629), moved out of safetensors.cc (same behaviour) so that the
// bitsandbytes reader and the oracle tests share it; see json.h for the
// rules it enforces.
#include "oracles/json.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

namespace qd::oracle {
namespace {

constexpr int kMaxJsonDepth = 64;  // ST-004
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// The JSON text (RFC 8259). The parser keeps the whole document as a flat
// list of nodes (document order) so that callers can look at any object.
// Strings are stored unescaped in one text arena; numbers keep their token
// as written. Nesting is capped at kMaxJsonDepth, so the recursion is
// bounded.

class JsonParser {
 public:
  JsonParser(const std::uint8_t* bytes, std::size_t size, std::uint32_t array_items_kept,
             const std::vector<std::string_view>* members_kept,
             const JsonMemberVisitor* visit_member, JsonDocument* document)
      : bytes_(bytes),
        size_(size),
        array_items_kept_(array_items_kept),
        members_kept_(members_kept),
        visit_member_(visit_member),
        document_(document) {}

  // JSON-text = ws object ws  (this format requires the value to be an object).
  bool ParseText() {
    SkipWhitespace();
    if (AtEnd() || bytes_[pos_] != '{') return Fail("the top-level value is not an object");
    const std::uint32_t top = NewNode(JsonKind::kObject);
    if (!ParseObject(1, top)) return false;
    SkipWhitespace();
    if (!AtEnd()) return Fail("bytes other than JSON whitespace follow the top-level object");
    return true;
  }

  const std::string& error() const { return error_; }
  std::size_t error_position() const { return error_position_; }

 private:
  bool AtEnd() const { return pos_ >= size_; }

  bool Fail(const char* what) {
    error_ = what;
    error_position_ = pos_;
    return false;
  }

  // ws = *( %x20 / %x09 / %x0A / %x0D )
  void SkipWhitespace() {
    while (!AtEnd()) {
      const std::uint8_t c = bytes_[pos_];
      if (c != 0x20 && c != 0x09 && c != 0x0A && c != 0x0D) break;
      ++pos_;
    }
  }

  // A node in the document, or kNoNode while skipping (array items past
  // array_items_kept_ and everything inside them are parsed and checked but
  // not kept, so that memory follows what callers read, not the text size).
  std::uint32_t NewNode(JsonKind kind) {
    if (skipping_ > 0) return kNoNode;
    JsonNode node;
    node.kind = kind;
    document_->nodes.push_back(node);
    return static_cast<std::uint32_t>(document_->nodes.size() - 1);
  }

  // Links child as the last child of parent (last is the previous last child).
  void AppendChild(std::uint32_t parent, std::uint32_t* last, std::uint32_t child) {
    std::deque<JsonNode>& nodes = document_->nodes;
    if (parent == kNoNode) return;
    if (child == kNoNode) {  // skipped: counted, not linked
      nodes[parent].child_count += 1;
      return;
    }
    if (*last == kNoNode) {
      nodes[parent].first_child = child;
    } else {
      nodes[*last].next_sibling = child;
    }
    *last = child;
    nodes[parent].child_count += 1;
  }

  // value = false / null / true / object / array / number / string
  // depth is the nesting depth the value has if it is an object or array.
  bool ParseValue(int depth, std::uint32_t* node) {
    if (AtEnd()) return Fail("a value is expected");
    const std::uint8_t c = bytes_[pos_];
    if (c == '{' || c == '[') {
      if (depth > kMaxJsonDepth) return Fail("more than 64 nested objects and arrays");
      if (c == '{') {
        *node = NewNode(JsonKind::kObject);
        return ParseObject(depth, *node);
      }
      *node = NewNode(JsonKind::kArray);
      return ParseArray(depth, *node);
    }
    if (c == '"') {
      *node = NewNode(JsonKind::kString);
      std::uint32_t begin = 0;
      std::uint32_t size = 0;
      if (!ParseString(&begin, &size)) return false;
      if (*node == kNoNode) {
        document_->text.resize(begin);  // a skipped string is not kept
        return true;
      }
      document_->nodes[*node].text_begin = begin;
      document_->nodes[*node].text_size = size;
      return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      *node = NewNode(JsonKind::kNumber);
      return ParseNumber(*node);
    }
    if (c == 't') {
      *node = NewNode(JsonKind::kTrue);
      return ParseLiteral("true");
    }
    if (c == 'f') {
      *node = NewNode(JsonKind::kFalse);
      return ParseLiteral("false");
    }
    if (c == 'n') {
      *node = NewNode(JsonKind::kNull);
      return ParseLiteral("null");
    }
    return Fail("a value is expected");
  }

  // object = begin-object [ member *( value-separator member ) ] end-object
  // member = string name-separator value
  // Every object's keys are checked for duplicates when it closes
  // (NoteDuplicateKeys), so skipped objects are checked too.
  bool ParseObject(int depth, std::uint32_t object) {
    const std::size_t start = pos_;
    const std::size_t arena_start = document_->text.size();
    ++pos_;  // '{'
    SkipWhitespace();
    if (!AtEnd() && bytes_[pos_] == '}') {
      ++pos_;
      return true;
    }
    std::vector<std::pair<std::uint32_t, std::uint32_t>> keys;  // arena (begin, size)
    // The top-level object's members handed to the visitor: their keys are
    // not kept, not even for duplicates (json.h).
    const bool visited = depth == 1 && visit_member_ != nullptr;
    std::uint32_t last = kNoNode;
    while (true) {
      if (AtEnd() || bytes_[pos_] != '"') return Fail("an object key string is expected");
      std::uint32_t key_begin = 0;
      std::uint32_t key_size = 0;
      if (!ParseString(&key_begin, &key_size)) return false;
      SkipWhitespace();
      if (AtEnd() || bytes_[pos_] != ':') return Fail("':' is expected after an object key");
      ++pos_;
      SkipWhitespace();
      std::uint32_t child = kNoNode;
      if (!visited) keys.emplace_back(key_begin, key_size);
      // A top-level member the caller does not read keeps its key and the
      // kind of its value; the value is parsed and checked, not kept.
      const bool dropped = depth == 1 && skipping_ == 0 && members_kept_ != nullptr &&
                           !IsKept(std::string_view(document_->text).substr(key_begin, key_size));
      const JsonKind dropped_kind = KindAt(pos_);
      skipping_ += dropped ? 1 : 0;
      const bool parsed = ParseValue(depth + 1, &child);
      skipping_ -= dropped ? 1 : 0;
      if (!parsed) return false;
      if (dropped) child = NewNode(dropped_kind);
      if (child != kNoNode) {
        document_->nodes[child].key_begin = key_begin;
        document_->nodes[child].key_size = key_size;
      }
      if (visited) {
        // Handed over, then dropped with its key: the member's nodes, value
        // text and key text go (json.h).
        (*visit_member_)(*document_, child);
        document_->nodes[object].child_count += 1;
        document_->nodes.resize(child);
        document_->text.resize(key_begin);
      } else {
        AppendChild(object, &last, child);
      }
      SkipWhitespace();
      if (AtEnd()) return Fail("the object is not closed");
      if (bytes_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      if (bytes_[pos_] == '}') {
        ++pos_;
        if (!visited) NoteDuplicateKeys(start, &keys);
        if (object == kNoNode) document_->text.resize(arena_start);  // skipped keys
        return true;
      }
      return Fail("',' or '}' is expected in an object");
    }
  }

  // array = begin-array [ value *( value-separator value ) ] end-array
  bool ParseArray(int depth, std::uint32_t array) {
    ++pos_;  // '['
    SkipWhitespace();
    if (!AtEnd() && bytes_[pos_] == ']') {
      ++pos_;
      return true;
    }
    std::uint32_t last = kNoNode;
    std::uint32_t items = 0;
    while (true) {
      std::uint32_t child = kNoNode;
      const bool skip = array != kNoNode && items >= array_items_kept_;
      skipping_ += skip ? 1 : 0;
      const bool parsed = ParseValue(depth + 1, &child);
      skipping_ -= skip ? 1 : 0;
      if (!parsed) return false;
      ++items;
      AppendChild(array, &last, child);
      SkipWhitespace();
      if (AtEnd()) return Fail("the array is not closed");
      if (bytes_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      if (bytes_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("',' or ']' is expected in an array");
    }
  }

  // The first object in document order (the smallest start) with a key
  // twice wins; its smallest such key in byte order is reported (json.h).
  // KEYS (arena begin, size) are sorted in place by their text, not copied
  // into views first (issue 9, section 3: 16 more bytes a key of an object
  // of millions).
  void NoteDuplicateKeys(std::size_t start, std::vector<std::pair<std::uint32_t, std::uint32_t>>* keys) {
    if (document_->has_duplicate_key && document_->duplicate_key_object <= start) return;
    const std::string_view text = document_->text;
    auto key_text = [&](const std::pair<std::uint32_t, std::uint32_t>& key) {
      return text.substr(key.first, key.second);
    };
    // Byte order: char_traits compares as unsigned char.
    std::sort(keys->begin(), keys->end(),
              [&](const auto& a, const auto& b) { return key_text(a) < key_text(b); });
    for (std::size_t i = 1; i < keys->size(); ++i) {
      if (key_text((*keys)[i]) == key_text((*keys)[i - 1])) {
        document_->has_duplicate_key = true;
        document_->duplicate_key = std::string(key_text((*keys)[i]));
        document_->duplicate_key_object = start;
        return;
      }
    }
  }

  // 4HEXDIG, either case.
  bool ParseHex4(std::uint32_t* unit) {
    if (size_ - pos_ < 4) return Fail("\\u needs four hex digits");
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const std::uint8_t c = bytes_[pos_ + i];
      std::uint32_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return Fail("\\u needs four hex digits");
      }
      value = (value << 4) | digit;
    }
    pos_ += 4;
    *unit = value;
    return true;
  }

  void AppendUtf8(std::uint32_t code_point) {
    std::string& out = document_->text;
    if (code_point < 0x80) {
      out.push_back(static_cast<char>(code_point));
    } else if (code_point < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else if (code_point < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
    }
  }

  // string = quotation-mark *char quotation-mark. The unescaped bytes are
  // appended to the arena; *begin and *size locate them.
  bool ParseString(std::uint32_t* begin, std::uint32_t* size) {
    std::string& out = document_->text;
    *begin = static_cast<std::uint32_t>(out.size());
    ++pos_;  // opening '"'
    while (true) {
      if (AtEnd()) return Fail("the string is not closed");
      const std::uint8_t c = bytes_[pos_];
      if (c == '"') {
        ++pos_;
        break;
      }
      if (c < 0x20) return Fail("a raw control character inside a string");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));  // UTF-8 was validated beforehand
        ++pos_;
        continue;
      }
      ++pos_;  // '\\'
      if (AtEnd()) return Fail("the string ends inside an escape");
      const std::uint8_t e = bytes_[pos_];
      ++pos_;
      if (e == '"') {
        out.push_back('"');
      } else if (e == '\\') {
        out.push_back('\\');
      } else if (e == '/') {
        out.push_back('/');
      } else if (e == 'b') {
        out.push_back('\b');
      } else if (e == 'f') {
        out.push_back('\f');
      } else if (e == 'n') {
        out.push_back('\n');
      } else if (e == 'r') {
        out.push_back('\r');
      } else if (e == 't') {
        out.push_back('\t');
      } else if (e == 'u') {
        std::uint32_t unit = 0;
        if (!ParseHex4(&unit)) return false;
        std::uint32_t code_point = unit;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          // A high surrogate must be followed at once by \u and a low one.
          if (size_ - pos_ < 2 || bytes_[pos_] != '\\' || bytes_[pos_ + 1] != 'u') {
            return Fail("a lone high surrogate escape");
          }
          pos_ += 2;
          std::uint32_t low = 0;
          if (!ParseHex4(&low)) return false;
          if (low < 0xDC00 || low > 0xDFFF) return Fail("a high surrogate without its low surrogate");
          code_point = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
          return Fail("a lone low surrogate escape");
        }
        AppendUtf8(code_point);
      } else {
        return Fail("an unknown escape in a string");
      }
    }
    *size = static_cast<std::uint32_t>(out.size() - *begin);
    return true;
  }

  // number = [ minus ] int [ frac ] [ exp ]
  // int = zero / ( digit1-9 *DIGIT ); frac = "." 1*DIGIT; exp = e [ - / + ] 1*DIGIT
  bool ParseNumber(std::uint32_t node) {
    const std::size_t start = pos_;
    if (bytes_[pos_] == '-') ++pos_;
    if (AtEnd()) return Fail("a number needs digits");
    if (bytes_[pos_] == '0') {
      ++pos_;
    } else if (bytes_[pos_] >= '1' && bytes_[pos_] <= '9') {
      while (!AtEnd() && IsDigit(bytes_[pos_])) ++pos_;
    } else {
      return Fail("a number needs digits");
    }
    if (!AtEnd() && bytes_[pos_] == '.') {
      ++pos_;
      if (AtEnd() || !IsDigit(bytes_[pos_])) return Fail("a fraction needs digits");
      while (!AtEnd() && IsDigit(bytes_[pos_])) ++pos_;
    }
    if (!AtEnd() && (bytes_[pos_] == 'e' || bytes_[pos_] == 'E')) {
      ++pos_;
      if (!AtEnd() && (bytes_[pos_] == '+' || bytes_[pos_] == '-')) ++pos_;
      if (AtEnd() || !IsDigit(bytes_[pos_])) return Fail("an exponent needs digits");
      while (!AtEnd() && IsDigit(bytes_[pos_])) ++pos_;
    }
    // ST-004 decision (rules.json): a number whose value rounds to infinity
    // in binary64 is refused, as the reference reader's JSON library does.
    const std::string token(reinterpret_cast<const char*>(bytes_ + start), pos_ - start);
    if (std::isinf(std::strtod(token.c_str(), nullptr))) {
      return Fail("a number overflows binary64");
    }
    if (node == kNoNode) return true;  // a skipped number is not kept
    std::string& out = document_->text;
    document_->nodes[node].text_begin = static_cast<std::uint32_t>(out.size());
    document_->nodes[node].text_size = static_cast<std::uint32_t>(pos_ - start);
    out.append(reinterpret_cast<const char*>(bytes_ + start), pos_ - start);
    return true;
  }

  static bool IsDigit(std::uint8_t c) { return c >= '0' && c <= '9'; }

  bool ParseLiteral(const char* word) {
    const std::size_t length = std::strlen(word);
    if (size_ - pos_ < length || std::memcmp(bytes_ + pos_, word, length) != 0) {
      return Fail("an unknown literal");
    }
    pos_ += length;
    return true;
  }

  bool IsKept(std::string_view key) const {
    return std::find(members_kept_->begin(), members_kept_->end(), key) != members_kept_->end();
  }
  // The kind of the value starting at position at (a number for anything
  // else: ParseValue has refused a bad first byte by the time it matters).
  JsonKind KindAt(std::size_t at) const {
    if (at >= size_) return JsonKind::kNull;
    switch (bytes_[at]) {
      case '{': return JsonKind::kObject;
      case '[': return JsonKind::kArray;
      case '"': return JsonKind::kString;
      case 't': return JsonKind::kTrue;
      case 'f': return JsonKind::kFalse;
      case 'n': return JsonKind::kNull;
      default: return JsonKind::kNumber;
    }
  }

  const std::uint8_t* bytes_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::uint32_t array_items_kept_;
  const std::vector<std::string_view>* members_kept_;  // null: every member
  const JsonMemberVisitor* visit_member_;              // null: every member kept
  int skipping_ = 0;  // > 0 while inside an array item that is not kept
  JsonDocument* document_;
  std::string error_;
  std::size_t error_position_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------
// Strict UTF-8 (RFC 3629, section 4): every character is a
// scalar value U+0000..U+10FFFF, not a surrogate U+D800..U+DFFF, written in
// its shortest form.

bool IsStrictUtf8(const std::uint8_t* bytes, std::size_t size, std::size_t* bad_position) {
  std::size_t i = 0;
  while (i < size) {
    const std::uint8_t lead = bytes[i];
    if (lead < 0x80) {  // 0xxxxxxx
      i += 1;
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code_point = 0;
    std::uint32_t smallest = 0;  // below this the encoding is overlong
    if ((lead & 0xE0) == 0xC0) {  // 110xxxxx 10xxxxxx
      length = 2;
      code_point = lead & 0x1F;
      smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {  // 1110xxxx 10xxxxxx 10xxxxxx
      length = 3;
      code_point = lead & 0x0F;
      smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {  // 11110xxx 10xxxxxx 10xxxxxx 10xxxxxx
      length = 4;
      code_point = lead & 0x07;
      smallest = 0x10000;
    } else {  // a continuation byte as lead, or 0xF8..0xFF
      *bad_position = i;
      return false;
    }
    if (size - i < length) {  // truncated sequence
      *bad_position = i;
      return false;
    }
    for (std::size_t k = 1; k < length; ++k) {
      const std::uint8_t next = bytes[i + k];
      if ((next & 0xC0) != 0x80) {
        *bad_position = i;
        return false;
      }
      code_point = (code_point << 6) | (next & 0x3F);
    }
    const bool overlong = code_point < smallest;
    const bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
    const bool too_large = code_point > 0x10FFFF;
    if (overlong || surrogate || too_large) {
      *bad_position = i;
      return false;
    }
    i += length;
  }
  return true;
}


// ---------------------------------------------------------------------------
// The public entry points.

bool ParseJsonObjectText(const std::uint8_t* bytes, std::size_t size, JsonDocument* document,
                         JsonError* error, std::uint32_t array_items_kept,
                         const std::vector<std::string_view>* members_kept,
                         const JsonMemberVisitor* visit_member) {
  *document = JsonDocument{};
  JsonParser parser(bytes, size, array_items_kept, members_kept, visit_member, document);
  if (!parser.ParseText()) {
    error->what = parser.error();
    error->position = parser.error_position();
    return false;
  }
  return true;
}

bool ParseStrictJsonObject(const std::uint8_t* bytes, std::size_t size, JsonDocument* document,
                           JsonError* error, const std::vector<std::string_view>* members_kept) {
  std::size_t bad = 0;
  if (!IsStrictUtf8(bytes, size, &bad)) {
    error->what = "not strict UTF-8";
    error->position = bad;
    return false;
  }
  return ParseJsonObjectText(bytes, size, document, error, kNoNode, members_kept);
}

bool FindDuplicateKey(const JsonDocument& document, std::string* key) {
  if (!document.has_duplicate_key) return false;
  *key = document.duplicate_key;
  return true;
}

bool JsonToUint64(const JsonDocument& document, std::uint32_t node, std::uint64_t* value) {
  if (document.nodes[node].kind != JsonKind::kNumber) return false;
  const std::string_view token = document.Text(node);
  if (token.empty()) return false;
  std::uint64_t result = 0;
  for (const char c : token) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (result > (kU64Max - digit) / 10) return false;  // > 2^64 - 1
    result = result * 10 + digit;
  }
  *value = result;
  return true;
}

bool JsonToDouble(const JsonDocument& document, std::uint32_t node, double* value) {
  if (document.nodes[node].kind != JsonKind::kNumber) return false;
  // The token is a valid JSON number (the parser checked the grammar and
  // that it does not overflow), so strtod reads all of it.
  const std::string token(document.Text(node));
  *value = std::strtod(token.c_str(), nullptr);
  return true;
}

}  // namespace qd::oracle
