// safetensors_header_sax.h: the SAX consumer the codec's container reader
// (safetensors.cc, its only includer) parses a header with: the schema facts
// the ST rules need, the entries' compact records and the first problem an
// entry shows. Rule order and meaning: oracles/rules.json.
#ifndef QUANTDIFF_CODECS_SAFETENSORS_HEADER_SAX_H_
#define QUANTDIFF_CODECS_SAFETENSORS_HEADER_SAX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/safetensors.h"

namespace qd::codec::header_sax {

inline constexpr std::size_t kMaxNesting = 64;  // ST-004 decision
inline constexpr std::size_t kMaxRank = 64;     // ST-007 decision

// What a header entry said, before any rule past ST-005 is applied: bits of
// a std::uint16_t kept beside each TensorEntry while the header is checked.
enum EntryFact : std::uint16_t {
  kNotObject = 1 << 0,
  kHasDtype = 1 << 1,
  kDtypeBad = 1 << 2,  // not a string, or not a known dtype
  kHasShape = 1 << 3,
  kShapeBad = 1 << 4,
  kHasOffsets = 1 << 5,
  kOffsetsBad = 1 << 6,  // not an array of exactly two unsigned integers
};

// ST-007: the problem an entry's facts show, checked in this order; a null
// problem when there is none.
struct EntryProblem {
  const char* problem = nullptr;
  const char* field = "";
};
inline EntryProblem St007Problem(std::uint16_t f) {
  if (f & kNotObject) return {"entry is not an object", ""};
  if (!(f & kHasDtype)) return {"entry lacks dtype", "dtype"};
  if (!(f & kHasShape)) return {"entry lacks shape", "shape"};
  if (!(f & kHasOffsets)) return {"entry lacks data_offsets", "data_offsets"};
  if (f & kDtypeBad) return {"dtype is not a known dtype string", "dtype"};
  if (f & kShapeBad) return {"shape is not an array of non-negative integers", "shape"};
  return {};
}

// Which part of the schema a JSON container or scalar stands for.
enum class Role : std::uint8_t {
  kTop, kMetadata, kEntry, kShape, kOffsets, kIgnored,
};

struct Frame {
  Role role;
  bool is_object;
  std::uint32_t ordinal;     // objects opened before this one (document order)
  std::uint32_t keys_begin;  // this object's keys in HeaderSax::key_spans_
  std::uint32_t items;       // shape or data_offsets items seen so far
  std::uint32_t items_begin; // a shape's first item in EntryStore::shape_items
};

// A SAX consumer for nlohmann::json::sax_parse that records the schema facts
// the ST rules need and keeps parsing to the end, so that a later grammar
// error (ST-004) still wins over a schema error found earlier.
//
// Memory follows the entries, not a hash set of them (issue 9, section 3):
// run once with `counting` to size the entries and shape items exactly, then
// again to fill them, so neither vector grows by reallocation (which peaks
// at three times its size). The top object's duplicate keys are found by
// sorting the entries by name afterwards; an inner object's keys are kept
// (as spans of one scratch string) only until it closes, then sorted.
//
// When the first pass meets an entry with an ST-007 problem, the file is
// refused at ST-005, ST-006 or ST-007, and those read only the entries'
// names and facts. The second pass then keeps just those (names_only): a
// header of many members like "k1":0 cost a 64-byte TensorEntry each, 7
// times its text (issue 9, section 3).
class HeaderSax {
 public:
  HeaderSax() : counting_(true) {}
  // The second pass: storage sized by the first, so that no vector or
  // string regrows and the entries' views into store stay valid.
  explicit HeaderSax(const HeaderSax& first)
      : names_only(first.entry_problem_seen), store(std::make_shared<Container::EntryStore>()),
        counting_(false) {
    if (names_only) {
      names.reserve(first.entry_count);
    } else {
      tensors.reserve(first.entry_count);
      store->shape_items.reserve(first.shape_item_count);
    }
    facts.reserve(first.entry_count);
    store->names.reserve(first.name_bytes);
    metadata.reserve(first.metadata_values);
    store->metadata_text.reserve(first.metadata_bytes);
  }

  // The first pass: some entry has an ST-007 problem (St007Problem).
  bool entry_problem_seen = false;
  // The second pass keeps names and facts only (entry_problem_seen).
  const bool names_only = false;
  // Entry i's name in either kind of pass.
  std::string_view Name(std::size_t i) const { return names_only ? names[i] : tensors[i].name; }

  bool depth_exceeded = false;
  bool top_not_object = false;
  // ST-005 in an inner object: the first such object in document order, its
  // smallest duplicated key (the oracle's choice, oracles/json.h).
  bool inner_duplicate = false;
  std::uint32_t inner_duplicate_ordinal = 0;
  std::string inner_duplicate_key;
  int metadata_keys = 0;  // __metadata__ members of the top object
  bool has_metadata = false, metadata_bad = false;
  // Filled by the second pass only, views into store->metadata_text, both
  // sized by the first (counted over every __metadata__ member): a header's
  // metadata was held twice as std::string pairs, 64 bytes a member, and
  // regrown, while the first pass's copy lived (issue 9, section 3).
  std::vector<std::pair<std::string_view, std::string_view>> metadata;
  std::size_t metadata_values = 0;
  std::size_t metadata_bytes = 0;
  std::uint32_t metadata_ordinal = 0;  // of __metadata__'s object, in document order
  std::vector<TensorEntry> tensors;   // header order; filled unless counting or names_only
  std::vector<std::string_view> names;  // header order; filled when names_only
  std::vector<std::uint16_t> facts;   // EntryFact bits, beside the entries
  std::shared_ptr<Container::EntryStore> store;  // null while counting
  std::size_t entry_count = 0;        // counted in both passes
  std::size_t name_bytes = 0;         // the entries' names, unescaped
  std::size_t shape_item_count = 0;

  bool null() { return Scalar(Kind::kOther, 0, nullptr); }
  bool boolean(bool) { return Scalar(Kind::kOther, 0, nullptr); }
  bool number_integer(std::int64_t) { return Scalar(Kind::kOther, 0, nullptr); }
  bool number_unsigned(std::uint64_t v) { return Scalar(Kind::kUnsigned, v, nullptr); }
  bool number_float(double, const std::string&) {
    return Scalar(Kind::kOther, 0, nullptr);
  }
  bool string(std::string& s) { return Scalar(Kind::kString, 0, &s); }
  bool binary(nlohmann::json::binary_t&) { return Scalar(Kind::kOther, 0, nullptr); }
  bool start_object(std::size_t) { return Open(true); }
  bool start_array(std::size_t) { return Open(false); }
  bool end_object() {
    const Frame& frame = stack_.back();
    // Where this object's keys start in key_text_ (taken before
    // NoteInnerDuplicates reorders its spans).
    const std::size_t text_begin =
        frame.keys_begin == key_spans_.size() ? key_text_.size() : key_spans_[frame.keys_begin].first;
    if (frame.role != Role::kTop && !counting_) NoteInnerDuplicates(frame);
    if (frame.role == Role::kTop) NoteEntryEnd();
    key_text_.resize(text_begin);
    key_spans_.resize(frame.keys_begin);
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    const Frame& frame = stack_.back();
    if (frame.role == Role::kShape && Keeps() && !(facts.back() & kShapeBad)) {
      tensors.back().shape = Shape(store->shape_items.data() + frame.items_begin, frame.items);
    }
    if (frame.role == Role::kOffsets && frame.items != 2) Mark(kOffsetsBad);
    stack_.pop_back();
    return true;
  }
  bool key(std::string& k) {
    Frame& frame = stack_.back();
    key_ = k;
    if (frame.role == Role::kMetadata) {
      // Kept in the metadata list, whatever the value: __metadata__'s
      // duplicate keys are found there once it is sorted (ReadContainer),
      // not from a second copy of its keys.
      ++metadata_values;
      metadata_bytes += k.size();
      if (!counting_) metadata.emplace_back(Hold(&store->metadata_text, k), std::string_view());
    } else if (frame.role != Role::kTop) {
      if (!counting_) {  // only the second pass looks for duplicates
        key_spans_.emplace_back(static_cast<std::uint32_t>(key_text_.size()),
                                static_cast<std::uint32_t>(k.size()));
        key_text_ += k;
      }
    } else if (k == "__metadata__") {
      ++metadata_keys;
    } else {
      NoteEntryEnd();
      ++entry_count;
      name_bytes += k.size();
      if (!counting_) {
        const std::string_view name = Hold(&store->names, k);
        if (names_only) {
          names.push_back(name);
        } else {
          tensors.emplace_back();
          tensors.back().name = name;
        }
      }
      facts.push_back(0);  // the first pass keeps the current entry's alone
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) {
    return false;
  }

 private:
  enum class Kind { kUnsigned, kString, kOther };
  const bool counting_;
  std::vector<Frame> stack_;
  std::string key_;  // the key of the value being read, in the innermost object
  std::string key_text_;  // the open inner objects' keys, back to back
  std::vector<std::pair<std::uint32_t, std::uint32_t>> key_spans_;  // (offset, size)
  std::uint32_t objects_opened_ = 0;

  // TEXT appended to *HELD, one of store's strings, within the size the
  // first pass reserved (so no earlier view moves); the view of it there.
  static std::string_view Hold(std::string* held, const std::string& text) {
    const std::size_t at = held->size();
    *held += text;
    return std::string_view(*held).substr(at);
  }

  // Marks a fact on the entry being read.
  void Mark(std::uint16_t fact) { facts.back() |= fact; }
  // Whether this pass keeps the entries' dtype, shape and offsets.
  bool Keeps() const { return !counting_ && !names_only; }
  // The first pass, at the end of an entry (the next top-level key, or the
  // end of the top object): notes an ST-007 problem, then forgets the
  // entry's facts, so that it holds one entry's at a time.
  void NoteEntryEnd() {
    if (!counting_ || facts.empty()) return;
    entry_problem_seen |= St007Problem(facts.back()).problem != nullptr;
    facts.clear();
  }

  void NoteInnerDuplicates(const Frame& frame) {
    if (inner_duplicate && inner_duplicate_ordinal <= frame.ordinal) return;
    // The object's spans sorted in place by their text (they are dropped
    // when it closes), not copied into views first: 16 bytes a key less on
    // an object of millions of keys (issue 9, section 3).
    const std::string_view text = key_text_;
    auto key_of = [&](const std::pair<std::uint32_t, std::uint32_t>& span) {
      return text.substr(span.first, span.second);
    };
    const auto first = key_spans_.begin() + frame.keys_begin;
    std::sort(first, key_spans_.end(), [&](const auto& a, const auto& b) { return key_of(a) < key_of(b); });
    const auto same = std::adjacent_find(first, key_spans_.end(),
                                         [&](const auto& a, const auto& b) { return key_of(a) == key_of(b); });
    if (same == key_spans_.end()) return;
    inner_duplicate = true;
    inner_duplicate_ordinal = frame.ordinal;
    inner_duplicate_key = std::string(key_of(*same));
  }

  // The role a value takes in the current frame; marks schema errors.
  Role ChildRole(bool is_container, bool is_object, Kind kind) {
    Frame& frame = stack_.back();
    switch (frame.role) {
      case Role::kTop:
        if (key_ == "__metadata__") {
          has_metadata = true;
          metadata.clear();
          if (is_object) return Role::kMetadata;
          metadata_bad = true;  // ST-006
          return Role::kIgnored;
        }
        if (is_object) return Role::kEntry;
        Mark(kNotObject);  // ST-007
        return Role::kIgnored;
      case Role::kMetadata:
        if (is_container || kind != Kind::kString) metadata_bad = true;
        return Role::kIgnored;
      case Role::kEntry: {
        const bool is_array = is_container && !is_object;
        if (key_ == "dtype") {
          Mark(kHasDtype);
          if (kind != Kind::kString) Mark(kDtypeBad);  // a string is parsed in Scalar
          return Role::kIgnored;
        }
        if (key_ == "shape") {
          Mark(kHasShape);
          if (!is_array) Mark(kShapeBad);
          return is_array ? Role::kShape : Role::kIgnored;
        }
        if (key_ == "data_offsets") {
          Mark(kHasOffsets);
          if (!is_array) Mark(kOffsetsBad);
          return is_array ? Role::kOffsets : Role::kIgnored;
        }
        return Role::kIgnored;
      }
      case Role::kShape:
        if (kind != Kind::kUnsigned || is_container) Mark(kShapeBad);
        return Role::kIgnored;
      case Role::kOffsets:
        if (kind != Kind::kUnsigned || is_container) Mark(kOffsetsBad);
        return Role::kIgnored;
      case Role::kIgnored:
        return Role::kIgnored;
    }
    return Role::kIgnored;
  }

  bool Open(bool is_object) {
    if (stack_.size() >= kMaxNesting) {
      depth_exceeded = true;
      return false;
    }
    Role role;
    if (stack_.empty()) {
      if (!is_object) {
        top_not_object = true;
        return false;
      }
      role = Role::kTop;
    } else {
      role = ChildRole(true, is_object, Kind::kOther);
    }
    if (role == Role::kMetadata) metadata_ordinal = objects_opened_;
    stack_.push_back(Frame{role, is_object, is_object ? objects_opened_++ : 0,
                           static_cast<std::uint32_t>(key_spans_.size()), 0,
                           Keeps() ? static_cast<std::uint32_t>(store->shape_items.size()) : 0});
    return true;
  }

  bool Scalar(Kind kind, std::uint64_t value, std::string* text) {
    if (stack_.empty()) {
      top_not_object = true;
      return false;
    }
    Frame& frame = stack_.back();
    const Role parent = frame.role;
    ChildRole(false, false, kind);
    if (parent == Role::kShape && kind == Kind::kUnsigned) {
      if (frame.items == kMaxRank) {
        Mark(kShapeBad);  // ST-007 decision: rank above 64; keeps memory bounded
      } else {
        ++frame.items;
        ++shape_item_count;
        if (Keeps()) store->shape_items.push_back(value);
      }
    } else if (parent == Role::kOffsets) {
      if (kind == Kind::kUnsigned && frame.items < 2 && Keeps()) {
        TensorEntry& entry = tensors.back();
        (frame.items == 0 ? entry.begin : entry.end) = value;
      }
      if (frame.items < 3) ++frame.items;  // 3 stands for "more than two"
    } else if (parent == Role::kMetadata && kind == Kind::kString) {
      metadata_bytes += text->size();
      if (!counting_) metadata.back().second = Hold(&store->metadata_text, *text);
    } else if (parent == Role::kEntry && kind == Kind::kString && key_ == "dtype") {
      const std::optional<Dtype> dtype = ParseDtype(*text);
      if (!dtype) {
        Mark(kDtypeBad);
      } else if (Keeps()) {
        tensors.back().dtype = *dtype;
      }
    }
    return true;
  }
};

}  // namespace qd::codec::header_sax

#endif  // QUANTDIFF_CODECS_SAFETENSORS_HEADER_SAX_H_
