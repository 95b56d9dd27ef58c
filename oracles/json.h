// json.h: the oracle's own strict JSON reader (RFC 8259) and UTF-8 check
// (RFC 3629), shared by every oracle reader that meets JSON text: the
// safetensors header (ST-004, ST-005), the bitsandbytes quant_state
// (BNB-101) and the peer vector manifests read by the oracle tests.
//
// The rules it enforces are the ones ST-004 gives the header:
//   * the bytes are strict UTF-8 (IsStrictUtf8, run first by the caller or
//     by ParseStrictJsonObject): no overlong form, no surrogate, nothing
//     above U+10FFFF;
//   * the text is one JSON value that is an object, with optional JSON
//     whitespace around it (so a BOM or a NUL outside a string is refused,
//     and a raw control character inside a string is refused);
//   * objects and arrays nest at most 64 deep;
//   * a number whose value rounds to infinity in binary64 is refused.
// Duplicate keys are not refused by the parser; it notes the first object
// holding one and FindDuplicateKey reports it (ST-005 and BNB-101 refuse them).
//
// The document is a flat list of nodes in document order; nodes[0] is the
// top-level object. Strings are stored unescaped; numbers keep their token.
// A caller may keep only the first items of every array as nodes (the rest
// are parsed and checked, and counted in child_count, but not stored): a
// header of [0,0,...] would otherwise cost 16 bytes of nodes per 2 bytes of
// text (issue 9, 3).
#ifndef QUANTDIFF_ORACLES_JSON_H_
#define QUANTDIFF_ORACLES_JSON_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace qd::oracle {

// True when bytes[0, size) is strict UTF-8 (RFC 3629, section 4). When not,
// *bad_position is the offset of the first byte of the bad sequence.
bool IsStrictUtf8(const std::uint8_t* bytes, std::size_t size, std::size_t* bad_position);

enum class JsonKind : std::uint8_t { kObject, kArray, kString, kNumber, kTrue, kFalse, kNull };

inline constexpr std::uint32_t kNoNode = 0xFFFFFFFFu;

struct JsonNode {
  JsonKind kind = JsonKind::kNull;
  std::uint32_t text_begin = 0;  // kString: unescaped bytes; kNumber: the token
  std::uint32_t text_size = 0;
  std::uint32_t key_begin = 0;  // the member key (unescaped) when the parent is an object
  std::uint32_t key_size = 0;
  std::uint32_t first_child = kNoNode;
  std::uint32_t next_sibling = kNoNode;
  std::uint32_t child_count = 0;
};

struct JsonDocument {
  // nodes[0] is the top-level object. A deque: a document of millions of
  // nodes grows block by block, where a vector's regrowth held its old and
  // new arrays together, three times the nodes (issue 9, section 3).
  std::deque<JsonNode> nodes;
  std::string text;             // arena of string bytes and number tokens
  // The first object (document order) that holds a key twice, if any.
  bool has_duplicate_key = false;
  std::string duplicate_key;  // its smallest duplicated key in byte order
  std::size_t duplicate_key_object = 0;  // the offset of its '{'

  std::string_view Text(std::uint32_t node) const {
    return std::string_view(text).substr(nodes[node].text_begin, nodes[node].text_size);
  }
  std::string_view Key(std::uint32_t node) const {
    return std::string_view(text).substr(nodes[node].key_begin, nodes[node].key_size);
  }
  // The member value named key of an object node (the first one when the
  // key is duplicated), or kNoNode.
  std::uint32_t FindMember(std::uint32_t object, std::string_view key) const {
    for (std::uint32_t child = nodes[object].first_child; child != kNoNode;
         child = nodes[child].next_sibling) {
      if (Key(child) == key) return child;
    }
    return kNoNode;
  }
};

// Where and why a parse failed.
struct JsonError {
  std::string what;          // a short English phrase
  std::size_t position = 0;  // byte offset into the text
};

// Parses bytes[0, size) as a JSON text whose value is an object (RFC 8259,
// with the limits above). The bytes must already be strict UTF-8: strings
// are copied through byte by byte. Every array keeps its first
// array_items_kept items as nodes (child_count counts them all). With
// members_kept given, a member of the top-level object whose key is not
// listed is a node with its key and its value's kind only (no text, no
// children): the value is parsed and checked, duplicate keys included, but
// not kept (a quant_state with a 10 MB unknown member, issue 9, 3). On
// failure returns false and fills *error; *document is then unspecified.
//
// With visit_member given, each member of the top-level object is handed to
// it as soon as it is parsed (document.Key(member) is its key, the member
// node and its children its value), and then dropped with its key: nodes[0]
// has no children left (child_count still counts them) and the text holds
// none of its keys. A header of n tensor entries then never holds n
// entries' nodes or keys (issue 9, section 3). The top-level object's
// duplicate keys are then the visitor's to find (it is handed every key,
// and that object comes first in document order); every other object's are
// still found.
using JsonMemberVisitor = std::function<void(const JsonDocument& document, std::uint32_t member)>;
bool ParseJsonObjectText(const std::uint8_t* bytes, std::size_t size, JsonDocument* document,
                         JsonError* error, std::uint32_t array_items_kept = kNoNode,
                         const std::vector<std::string_view>* members_kept = nullptr,
                         const JsonMemberVisitor* visit_member = nullptr);

// IsStrictUtf8, then ParseJsonObjectText. A UTF-8 failure is reported as
// "not strict UTF-8" at the bad byte.
bool ParseStrictJsonObject(const std::uint8_t* bytes, std::size_t size, JsonDocument* document,
                           JsonError* error,
                           const std::vector<std::string_view>* members_kept = nullptr);

// The first object (document order, kept or not) that holds a key twice,
// compared after unescaping; *key is the smallest such key of that object
// in byte order. Returns false when no object has a duplicate key.
bool FindDuplicateKey(const JsonDocument& document, std::string* key);

// A JSON number token of digits only (no sign, fraction or exponent) whose
// value fits in 64 bits.
bool JsonToUint64(const JsonDocument& document, std::uint32_t node, std::uint64_t* value);

// Any JSON number, rounded to the nearest binary64 (ties to even).
bool JsonToDouble(const JsonDocument& document, std::uint32_t node, double* value);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_JSON_H_
