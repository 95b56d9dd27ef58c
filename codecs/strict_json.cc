// strict_json.cc: nlohmann SAX events built into a DOM, refusing what JSON
// text refuses and nlohmann lets through (see strict_json.h).
#include "codecs/strict_json.h"

#include <algorithm>
#include <cstdint>
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
  explicit StrictBuilder(const std::vector<std::string_view>* kept) : kept_(kept) {}

  nlohmann::json root;

  bool null() { return Put(nlohmann::json(nullptr)); }
  bool boolean(bool v) { return Put(nlohmann::json(v)); }
  bool number_integer(std::int64_t v) { return Put(nlohmann::json(v)); }
  bool number_unsigned(std::uint64_t v) { return Put(nlohmann::json(v)); }
  bool number_float(double v, const std::string&) { return Put(nlohmann::json(v)); }
  bool string(std::string& v) { return Put(nlohmann::json(std::move(v))); }
  bool binary(nlohmann::json::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) { return Open(nlohmann::json::object(), true); }
  bool start_array(std::size_t) { return Open(nlohmann::json::array(), false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    if (!skipped_.empty()) return skipped_.back().Add(k);
    Level& level = stack_.back();
    if (level.value->contains(k)) return false;  // duplicate key
    level.key = std::move(k);
    // A top-level member the caller does not read: null in the DOM, its
    // value walked in skipped_ only.
    skip_next_ = stack_.size() == 1 && kept_ != nullptr &&
                 std::find(kept_->begin(), kept_->end(), level.key) == kept_->end();
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
  // A container inside a skipped value: only its keys, to refuse a
  // duplicate, packed in one string (memory about the keys' own bytes).
  struct SkippedLevel {
    bool is_object = false;
    std::string keys;                                        // the keys back to back
    std::vector<std::pair<std::uint32_t, std::uint32_t>> at;  // (begin, size) in keys
    bool Add(const std::string& k) {
      if (keys.size() + k.size() > UINT32_MAX) return false;
      at.emplace_back(static_cast<std::uint32_t>(keys.size()), static_cast<std::uint32_t>(k.size()));
      keys += k;
      return true;
    }
    bool HasDuplicate() const {
      std::vector<std::string_view> sorted;
      sorted.reserve(at.size());
      for (const auto& [begin, size] : at) sorted.push_back(std::string_view(keys).substr(begin, size));
      std::sort(sorted.begin(), sorted.end());
      return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
    }
  };

  const std::vector<std::string_view>* kept_;
  std::vector<Level> stack_;
  std::vector<SkippedLevel> skipped_;
  bool skip_next_ = false;  // the next value belongs to a member not kept

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
    if (!skipped_.empty()) return true;
    if (skip_next_) {
      skip_next_ = false;
      v = nlohmann::json(nullptr);
    }
    Place(std::move(v));
    return true;
  }
  bool Open(nlohmann::json container, bool is_object) {
    if (stack_.size() + skipped_.size() >= kStrictJsonMaxDepth) return false;
    if (skip_next_ || !skipped_.empty()) {
      if (skip_next_) Place(nlohmann::json(nullptr));
      skip_next_ = false;
      skipped_.push_back(SkippedLevel{is_object, {}, {}});
      return true;
    }
    nlohmann::json* where = Place(std::move(container));
    stack_.push_back(Level{where, {}});
    return true;
  }
  bool Close() {
    if (!skipped_.empty()) {
      const bool duplicate = skipped_.back().is_object && skipped_.back().HasDuplicate();
      skipped_.pop_back();
      return !duplicate;
    }
    stack_.pop_back();
    return true;
  }
};

}  // namespace

std::optional<nlohmann::json> ParseStrictJson(const std::uint8_t* data, std::size_t size,
                                              const std::vector<std::string_view>* kept) {
  if (size >= 3 && data[0] == 0xef && data[1] == 0xbb && data[2] == 0xbf) return std::nullopt;
  if (size > 0 && std::memchr(data, 0, size) != nullptr) return std::nullopt;
  try {
    StrictBuilder builder(kept);
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

std::optional<nlohmann::json> ParseStrictJson(std::string_view text,
                                              const std::vector<std::string_view>* kept) {
  return ParseStrictJson(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), kept);
}

}  // namespace qd::codec
