// strict_json.cc: nlohmann SAX events built into a DOM, refusing what JSON
// text refuses and nlohmann lets through (see strict_json.h).
#include "codecs/strict_json.h"

#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace qd::codec {
namespace {

// Builds the value from SAX events. Every container being filled is on
// stack_; a pointer to an array element stays valid because the array does
// not grow while its last element is still open.
class StrictBuilder {
 public:
  nlohmann::json root;

  bool null() { return Put(nlohmann::json(nullptr)); }
  bool boolean(bool v) { return Put(nlohmann::json(v)); }
  bool number_integer(std::int64_t v) { return Put(nlohmann::json(v)); }
  bool number_unsigned(std::uint64_t v) { return Put(nlohmann::json(v)); }
  bool number_float(double v, const std::string&) { return Put(nlohmann::json(v)); }
  bool string(std::string& v) { return Put(nlohmann::json(std::move(v))); }
  bool binary(nlohmann::json::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) { return Open(nlohmann::json::object()); }
  bool start_array(std::size_t) { return Open(nlohmann::json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    Level& level = stack_.back();
    if (level.value->contains(k)) return false;  // duplicate key
    level.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  struct Level {
    nlohmann::json* value;
    std::string key;  // objects: the key of the next value
  };
  std::vector<Level> stack_;

  // Stores v where the grammar puts it and returns where it now lives.
  nlohmann::json* Place(nlohmann::json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    Level& level = stack_.back();
    if (level.value->is_array()) {
      level.value->push_back(std::move(v));
      return &level.value->back();
    }
    nlohmann::json& slot = (*level.value)[level.key];
    slot = std::move(v);
    return &slot;
  }
  bool Put(nlohmann::json v) {
    Place(std::move(v));
    return true;
  }
  bool Open(nlohmann::json container) {
    if (stack_.size() >= kStrictJsonMaxDepth) return false;
    nlohmann::json* where = Place(std::move(container));
    stack_.push_back(Level{where, {}});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }
};

}  // namespace

std::optional<nlohmann::json> ParseStrictJson(const std::uint8_t* data, std::size_t size) {
  if (size >= 3 && data[0] == 0xef && data[1] == 0xbb && data[2] == 0xbf) return std::nullopt;
  if (size > 0 && std::memchr(data, 0, size) != nullptr) return std::nullopt;
  try {
    StrictBuilder builder;
    const std::uint8_t* begin = size > 0 ? data : nullptr;
    const bool ok = nlohmann::json::sax_parse(begin, begin + size, &builder,
                                              nlohmann::json::input_format_t::json,
                                              /*strict=*/true, /*ignore_comments=*/false);
    if (!ok) return std::nullopt;
    return std::optional<nlohmann::json>(std::move(builder.root));
  } catch (...) {  // allocation failure or a library error: not a document
    return std::nullopt;
  }
}

std::optional<nlohmann::json> ParseStrictJson(std::string_view text) {
  return ParseStrictJson(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

}  // namespace qd::codec
