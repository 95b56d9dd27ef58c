// safetensors.cc: container reader (nlohmann SAX into compact records) and
// writer. Rule order and meaning: oracles/rules.json.
#include "codecs/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "codecs/float16.h"
#include "codecs/finding.h"

namespace qd::codec {
namespace {

constexpr std::uint64_t kMaxHeaderLength = 100'000'000;  // ST-002
constexpr std::size_t kMaxNesting = 64;                   // ST-004 decision
constexpr std::size_t kMaxRank = 64;                      // ST-007 decision

constexpr std::array<DtypeInfo, 22> kDtypes = {{
    {"BOOL", 8, false},     {"F4", 4, false},       {"F6_E2M3", 6, false},
    {"F6_E3M2", 6, false},  {"U8", 8, false},       {"I8", 8, false},
    {"F8_E5M2", 8, false},  {"F8_E4M3", 8, false},  {"F8_E8M0", 8, false},
    {"I16", 16, false},     {"U16", 16, false},     {"F16", 16, false},
    {"BF16", 16, false},    {"I32", 32, false},     {"U32", 32, false},
    {"F32", 32, false},     {"C64", 64, false},     {"F64", 64, false},
    {"I64", 64, false},     {"U64", 64, false},     {"Q4B32", 0, true},
    {"Q8B32", 0, true},
}};

std::uint64_t LoadU64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool IsJsonWhitespace(std::uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

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
EntryProblem St007Problem(std::uint16_t f) {
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
      if (!counting_) metadata.emplace_back(Hold(k), std::string_view());
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
        const std::size_t at = store->names.size();
        store->names += k;  // within the reserved size: no view moves
        const std::string_view name = std::string_view(store->names).substr(at);
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

  // TEXT appended to store->metadata_text, within its reserved size (so no
  // earlier view moves); the view of it there.
  std::string_view Hold(const std::string& text) {
    std::string& held = store->metadata_text;
    const std::size_t at = held.size();
    held += text;
    return std::string_view(held).substr(at);
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
      if (!counting_) metadata.back().second = Hold(*text);
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

// Builds findings with the file name filled in.
class FindingSink {
 public:
  FindingSink(ContainerResult* result, const std::string& file)
      : result_(result), file_(file) {}
  void Warn(std::string rule, std::string field, std::int64_t offset,
            std::string message) {
    Add(std::move(rule), qd::Severity::kWarning, "", std::move(field), offset,
        std::move(message));
  }
  ContainerResult& Refuse(std::string rule, std::string_view tensor,
                          std::string field, std::int64_t offset,
                          std::string message) {
    Add(std::move(rule), qd::Severity::kError, std::string(tensor),
        std::move(field), offset, std::move(message));
    result_->refused = true;
    return *result_;
  }

 private:
  void Add(std::string rule, qd::Severity severity, std::string tensor,
           std::string field, std::int64_t offset, std::string message) {
    result_->findings.push_back(MakeFinding(std::move(rule), severity, file_, std::move(tensor),
                                            std::move(field), offset, std::move(message)));
  }
  ContainerResult* result_;
  const std::string& file_;
};

// data_start + relative as a finding offset, saturated at INT64_MAX.
std::int64_t SaturatedOffset(std::uint64_t data_start, std::uint64_t relative) {
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(INT64_MAX);
  return static_cast<std::int64_t>(relative > kMax - data_start ? kMax : data_start + relative);
}

bool MulOverflows(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (std::size_t i = 0; i < kDtypes.size(); ++i) {
    if (kDtypes[i].name == name) return static_cast<Dtype>(i);
  }
  return std::nullopt;
}

const DtypeInfo& InfoOf(Dtype dtype) {
  return kDtypes[static_cast<std::size_t>(dtype)];
}

const std::string_view* Container::Metadata(std::string_view key) const {
  auto it = std::lower_bound(
      metadata.begin(), metadata.end(), key,
      [](const auto& entry, std::string_view k) { return entry.first < k; });
  if (it == metadata.end() || it->first != key) return nullptr;
  return &it->second;
}

ContainerResult ReadContainer(qd::ByteView file, const std::string& file_name) {
  ContainerResult result;
  FindingSink sink(&result, file_name);
  if (file.size < 8) {
    return sink.Refuse("ST-001", "", "header", 0,
                       "file has " + std::to_string(file.size) +
                           " bytes, fewer than the 8-byte header length");
  }
  const std::uint64_t n = LoadU64(file.data);
  if (n > kMaxHeaderLength) {
    return sink.Refuse("ST-002", "", "header", 0,
                       "header length " + std::to_string(n) +
                           " exceeds 100000000");
  }
  if (n > file.size - 8) {
    return sink.Refuse("ST-003", "", "header", 0,
                       "header of " + std::to_string(n) + " bytes ends past "
                       "the end of the " + std::to_string(file.size) +
                       "-byte file");
  }
  const std::uint8_t* header = file.data + 8;
  // nlohmann's lexer skips a UTF-8 byte order mark; JSON does not (ST-004).
  const bool has_bom = n >= 3 && header[0] == 0xef && header[1] == 0xbb &&
                       header[2] == 0xbf;
  // nlohmann's lexer also takes a NUL byte for the end of input, so "{}\0x"
  // would pass; a NUL is never valid JSON text, raw or inside a string.
  const bool has_nul = std::memchr(header, 0, n) != nullptr;
  auto parse = [&](HeaderSax* sax) {
    return !has_bom && !has_nul &&
           nlohmann::json::sax_parse(header, header + n, sax, nlohmann::json::input_format_t::json,
                                     /*strict=*/true, /*ignore_comments=*/false);
  };
  HeaderSax counter;
  if (!parse(&counter)) {
    std::string why = "header is not UTF-8 JSON with an object at the top";
    if (counter.depth_exceeded) why = "header nests deeper than 64 containers";
    if (has_bom) why = "header starts with a byte order mark";
    if (has_nul) why = "header contains a NUL byte";
    return sink.Refuse("ST-004", "", "header", 8, why);
  }
  if (n > 0 && IsJsonWhitespace(header[0])) {
    sink.Warn("ST-101", "header", 8, "header starts with whitespace");
  }
  if (n % 8 != 0) {
    sink.Warn("ST-102", "header", 8,
              "header length " + std::to_string(n) +
                  " is not padded to a multiple of 8");
  }
  // The same text again, into storage the first pass sized exactly.
  HeaderSax sax(counter);
  parse(&sax);
  std::vector<TensorEntry>& tensors = sax.tensors;
  const std::size_t entry_count = sax.facts.size();

  // Entries by name: the order ST-007..ST-010 visit them in, and where the
  // top object's duplicate keys sit side by side (ST-005).
  std::vector<std::uint32_t> by_name(entry_count);
  for (std::uint32_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  // Merge sort, not introsort: on names like t0..t999999 std::sort's
  // partitions degrade and its heapsort fallback, jumping through the
  // indices, took 3.4 s of a million-entry header against 0.4 s.
  std::stable_sort(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
    return sax.Name(a) < sax.Name(b);
  });
  // ST-005: the top object is the first in document order, so its smallest
  // duplicated key wins over any inner object's.
  std::optional<std::string> duplicate;
  for (std::size_t i = 1; i < by_name.size() && !duplicate; ++i) {
    if (sax.Name(by_name[i]) == sax.Name(by_name[i - 1])) {
      duplicate = sax.Name(by_name[i]);
    }
  }
  if (sax.metadata_keys > 1 && (!duplicate || std::string_view("__metadata__") < *duplicate)) {
    duplicate = "__metadata__";
  }
  // An inner object's: the first in document order that has one, its
  // smallest duplicated key; __metadata__'s from its sorted list.
  std::sort(sax.metadata.begin(), sax.metadata.end());
  const auto metadata_same = std::adjacent_find(
      sax.metadata.begin(), sax.metadata.end(),
      [](const auto& a, const auto& b) { return a.first == b.first; });
  if (!duplicate && metadata_same != sax.metadata.end() &&
      (!sax.inner_duplicate || sax.metadata_ordinal < sax.inner_duplicate_ordinal)) {
    duplicate = std::string(metadata_same->first);
  }
  if (!duplicate && sax.inner_duplicate) duplicate = sax.inner_duplicate_key;
  if (duplicate) {
    return sink.Refuse("ST-005", "", "header", 8,
                       "key \"" + *duplicate + "\" appears twice in one object");
  }
  if (sax.metadata_bad) {
    return sink.Refuse("ST-006", "", "__metadata__", 8,
                       "__metadata__ is not an object of string values");
  }

  for (std::uint32_t i : by_name) {  // ST-007
    const EntryProblem p = St007Problem(sax.facts[i]);
    if (p.problem != nullptr) return sink.Refuse("ST-007", sax.Name(i), p.field, 8, p.problem);
  }
  if (sax.names_only) {  // both passes read the same text, so not reached
    return sink.Refuse("ST-007", "", "", 8, "entry problem seen by the first reading only");
  }
  for (std::uint32_t i : by_name) {  // ST-008
    TensorEntry& t = tensors[i];
    std::uint64_t count = 1;
    bool overflow = false;
    for (std::uint64_t d : t.shape) overflow |= MulOverflows(count, d, &count);
    std::uint64_t bits = 0;
    const DtypeInfo& info = InfoOf(t.dtype);
    if (!overflow && !info.is_block) overflow = MulOverflows(count, info.bits, &bits);
    if (overflow) {
      return sink.Refuse("ST-008", t.name, "shape", 8,
                         "element count or size in bits overflows 64 bits");
    }
    t.element_count = count;
  }
  for (std::uint32_t i : by_name) {  // ST-009
    const TensorEntry& t = tensors[i];
    if ((sax.facts[i] & kOffsetsBad) || t.begin > t.end) {
      return sink.Refuse("ST-009", t.name, "data_offsets", 8,
                         "data_offsets is not [begin, end] with begin <= end");
    }
  }
  for (std::uint32_t i : by_name) {  // ST-010
    const TensorEntry& t = tensors[i];
    const DtypeInfo& info = InfoOf(t.dtype);
    if (info.is_block) continue;  // RBQ-004 checks block dtypes
    const std::uint64_t bits = t.element_count * info.bits;  // ST-008 passed
    if (bits % 8 != 0 || t.end - t.begin != bits / 8) {
      return sink.Refuse(
          "ST-010", t.name, "data_offsets", 8,
          "data_offsets cover " + std::to_string(t.end - t.begin) +
              " bytes but shape and dtype need " +
              (bits % 8 != 0 ? std::to_string(bits) + " bits (not whole bytes)"
                             : std::to_string(bits / 8)));
    }
  }
  sax.facts = {};
  // Data order for ST-011: by (begin, end), ties by name. by_name is in name
  // order already, so a stable sort of it by the offsets compares integers
  // only (sorting the entries themselves compared names of a million
  // zero-size tensors, a third of `check`'s time on such a header).
  std::stable_sort(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (tensors[a].begin != tensors[b].begin) return tensors[a].begin < tensors[b].begin;
    return tensors[a].end < tensors[b].end;
  });
  // tensors[k] = old tensors[by_name[k]], in place along each cycle (a
  // second vector of entries would double the records' peak); a finished
  // slot is marked by by_name[j] = j.
  for (std::uint32_t k = 0; k < by_name.size(); ++k) {
    if (by_name[k] == k) continue;
    TensorEntry held = std::move(tensors[k]);
    std::uint32_t j = k;
    while (by_name[j] != k) {
      const std::uint32_t next = by_name[j];
      tensors[j] = std::move(tensors[next]);
      by_name[j] = j;
      j = next;
    }
    tensors[j] = std::move(held);
    by_name[j] = j;
  }
  by_name = {};
  const std::uint64_t data_start = 8 + n;
  std::uint64_t expected = 0;
  for (const TensorEntry& t : tensors) {  // ST-011
    if (t.begin != expected) {
      return sink.Refuse(
          "ST-011", t.name, "data_offsets", 8,
          std::string(t.begin > expected ? "hole" : "overlap") +
              ": tensor begins at " + std::to_string(t.begin) +
              ", the previous one ends at " + std::to_string(expected));
    }
    expected = t.end;
  }
  const std::uint64_t data_length = file.size - data_start;
  if (expected < data_length) {
    return sink.Refuse("ST-012", "", "data", SaturatedOffset(data_start, expected),
                       std::to_string(data_length - expected) +
                           " trailing bytes after the last tensor");
  }
  if (expected > data_length) {
    return sink.Refuse("ST-013", tensors.back().name, "data",
                       SaturatedOffset(data_start, tensors.back().begin),
                       "tensor data ends " + std::to_string(expected - data_length) +
                           " bytes past the end of the file");
  }

  Container& c = result.container;
  c.file = file;
  c.header_length = n;
  c.data_start = data_start;
  c.has_metadata = sax.has_metadata;
  c.metadata = std::move(sax.metadata);  // sorted for ST-005 above
  c.tensors = std::move(tensors);
  c.store = std::move(sax.store);  // the views point into it, not into sax
  return result;
}

bool DecodeFloatTensor(const Container& container, const TensorEntry& tensor,
                       float* out) {
  return DecodeFloatRange(container, tensor, 0, tensor.element_count, out);
}

bool DecodeFloatRange(const Container& container, const TensorEntry& tensor,
                      std::uint64_t first, std::uint64_t n, float* out) {
  const std::uint8_t* p = container.Data(tensor) + first * (InfoOf(tensor.dtype).bits / 8);
  switch (tensor.dtype) {
    case Dtype::kF32:
      if (n != 0) std::memcpy(out, p, n * 4);  // out may be null when n == 0
      return true;
    case Dtype::kF16:
      for (std::uint64_t i = 0; i < n; ++i) {
        out[i] = F16ToF32(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      }
      return true;
    case Dtype::kBF16:
      for (std::uint64_t i = 0; i < n; ++i) {
        out[i] = BF16ToF32(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      }
      return true;
    case Dtype::kF64:
      for (std::uint64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return true;
    default:
      return false;
  }
}

bool IsFloatDtype(Dtype d) {
  return d == Dtype::kF32 || d == Dtype::kF16 || d == Dtype::kBF16 || d == Dtype::kF64;
}

bool StreamFloatTensor(const Container& container, const TensorEntry& tensor,
                       std::size_t index, TensorSink& sink) {
  // Values decode one by one: rows of one value, chunks of kChunkValues.
  return StreamRows(sink, index, tensor.element_count, 1,
                    [&](std::uint64_t first, std::uint64_t count, float* out) {
                      DecodeFloatRange(container, tensor, first, count, out);
                    });
}

namespace {

// The container's floating tensors as a plan: views of its own entries, so a
// header of many tensors is not copied to be announced (issue 9, section 3).
class FloatTensorPlan final : public TensorPlan {
 public:
  explicit FloatTensorPlan(const Container& container) : tensors_(container.tensors) {
    // Sized once: a vector grown by reallocation peaks at three times its
    // entries.
    floats_.reserve(static_cast<std::size_t>(std::count_if(
        tensors_.begin(), tensors_.end(), [](const TensorEntry& t) { return IsFloatDtype(t.dtype); })));
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      if (IsFloatDtype(tensors_[i].dtype)) floats_.push_back(static_cast<std::uint32_t>(i));
    }
  }
  std::size_t size() const override { return floats_.size(); }
  std::string_view name(std::size_t i) const override { return entry(i).name; }
  std::span<const std::uint64_t> shape(std::size_t i) const override {
    return {entry(i).shape.begin(), entry(i).shape.size()};
  }
  const TensorEntry& entry(std::size_t i) const { return tensors_[floats_[i]]; }

 private:
  const std::vector<TensorEntry>& tensors_;
  // Indices of the floating entries; a header of at most 100,000,000 bytes
  // (ST-002) holds far fewer than 2^32 entries.
  std::vector<std::uint32_t> floats_;
};

}  // namespace

bool StreamFloatTensors(const Container& container, TensorSink& sink) {
  const FloatTensorPlan plan(container);
  if (!sink.Plan(plan)) return false;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (!StreamFloatTensor(container, plan.entry(i), i, sink)) return false;
  }
  return true;
}

void AppendFloatTensors(const Container& container,
                        std::vector<qd::DecodedTensor>* out) {
  CollectingSink sink(out);
  StreamFloatTensors(container, sink);
}

namespace {

// One JSON object written member by member, in first-insertion order, with
// the text nlohmann::ordered_json::dump() gives (compact, its string
// escaping). A key set again keeps its first place and takes the new value,
// as ordered_json's operator[] does. Members are resolved by sorting their
// keys once (O(n log n); ordered_json's linear key search made a header of
// n tensors O(n^2), issue 9), and a member costs a view of its key and its
// value text in one buffer, so the text is the one large allocation
// (issue 9, section 3: a decoded header of 1M tiny entries).
class JsonObjectWriter {
 public:
  // KEY is viewed, not copied: it must outlive the writer.
  void Set(std::string_view key, std::string_view value_json) {
    members_.push_back({key, values_.size(), value_json.size()});
    values_.append(value_json);
  }
  // The bytes Append will add.
  std::size_t TextSize() {
    Resolve();
    std::size_t size = 2;  // the braces
    bool first = true;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (value_of_[i] == kDropped) continue;
      size += (first ? 0 : 1) + HeaderKeyJson(members_[i].key).size() + 1 +
              members_[value_of_[i]].value_size;
      first = false;
    }
    return size;
  }
  void Append(std::string* out) {
    Resolve();
    out->push_back('{');
    bool first = true;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (value_of_[i] == kDropped) continue;
      if (!first) out->push_back(',');
      first = false;
      out->append(HeaderKeyJson(members_[i].key)).push_back(':');
      const Member& value = members_[value_of_[i]];
      out->append(values_, value.value_begin, value.value_size);
    }
    out->push_back('}');
  }
  std::string Text() {
    std::string out;
    out.reserve(TextSize());
    Append(&out);
    return out;
  }

 private:
  static constexpr std::size_t kDropped = SIZE_MAX;
  struct Member {
    std::string_view key;
    std::size_t value_begin, value_size;  // in values_
  };
  // value_of_[i]: for the first member of each key, the last member with
  // that key (whose value is written there); kDropped for the others.
  void Resolve() {
    if (value_of_.size() == members_.size()) return;
    std::vector<std::size_t> by_key(members_.size());
    for (std::size_t i = 0; i < by_key.size(); ++i) by_key[i] = i;
    std::stable_sort(by_key.begin(), by_key.end(), [&](std::size_t a, std::size_t b) {
      return members_[a].key < members_[b].key;
    });
    value_of_.assign(members_.size(), kDropped);
    for (std::size_t run = 0; run < by_key.size();) {
      std::size_t last = run;
      while (last + 1 < by_key.size() && members_[by_key[last + 1]].key == members_[by_key[run]].key) {
        ++last;
      }
      value_of_[by_key[run]] = by_key[last];
      run = last + 1;
    }
  }
  std::vector<Member> members_;
  std::string values_;
  std::vector<std::size_t> value_of_;
};

void AppendUnsignedArray(std::string* out, const std::uint64_t* values, std::size_t count) {
  out->push_back('[');
  for (std::size_t i = 0; i < count; ++i) {
    if (i != 0) out->push_back(',');
    *out += std::to_string(values[i]);
  }
  out->push_back(']');
}

}  // namespace

std::string HeaderKeyJson(std::string_view key) { return nlohmann::json(key).dump(); }

void AppendHeaderEntryJson(std::string* out, std::string_view dtype,
                           std::span<const std::uint64_t> shape, std::uint64_t begin,
                           std::uint64_t end) {
  *out += "{\"dtype\":";
  *out += nlohmann::json(dtype).dump();
  *out += ",\"shape\":";
  AppendUnsignedArray(out, shape.data(), shape.size());
  *out += ",\"data_offsets\":";
  const std::uint64_t offsets[2] = {begin, end};
  AppendUnsignedArray(out, offsets, 2);
  out->push_back('}');
}

std::string BuildHeader(const std::vector<TensorToWrite>& tensors,
                        const MetadataList* metadata) {
  JsonObjectWriter header;
  if (metadata != nullptr) {
    JsonObjectWriter meta;
    for (const auto& [k, v] : *metadata) meta.Set(k, nlohmann::json(v).dump());
    header.Set("__metadata__", meta.Text());
  }
  std::uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    std::string entry;
    AppendHeaderEntryJson(&entry, t.dtype, t.shape, offset, offset + t.byte_size);
    header.Set(t.name, entry);
    offset += t.byte_size;
  }
  const std::size_t text_size = header.TextSize();
  const std::uint64_t n = text_size + (8 - text_size % 8) % 8;  // ST-102 padding
  std::string out(8, '\0');
  out.reserve(8 + n);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  header.Append(&out);
  out.append(n - text_size, ' ');
  return out;
}

std::vector<std::uint8_t> SerializeSafetensors(
    const std::vector<TensorWithBytes>& tensors, const MetadataList* metadata) {
  std::vector<TensorToWrite> specs;
  std::size_t total = 0;
  for (const TensorWithBytes& t : tensors) {
    specs.push_back(t.spec);
    specs.back().byte_size = t.bytes.size();
    total += t.bytes.size();
  }
  const std::string header = BuildHeader(specs, metadata);
  std::vector<std::uint8_t> out(header.begin(), header.end());
  out.reserve(out.size() + total);
  for (const TensorWithBytes& t : tensors) {
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  }
  return out;
}

}  // namespace qd::codec
