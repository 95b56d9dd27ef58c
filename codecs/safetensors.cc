// safetensors.cc: container reader (nlohmann SAX into compact records) and
// writer. Rule order and meaning: oracles/rules.json.
#include "codecs/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <unordered_set>

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

// What a header entry said, before any rule past ST-005 is applied.
struct EntryRecord {
  std::string name;
  bool not_object = false;
  bool has_dtype = false, dtype_bad = false;
  std::string dtype;
  bool has_shape = false, shape_bad = false;
  std::vector<std::uint64_t> shape;
  bool has_offsets = false, offsets_bad = false;
  std::vector<std::uint64_t> offsets;
};

// Which part of the schema a JSON container or scalar stands for.
enum class Role : std::uint8_t {
  kTop, kMetadata, kEntry, kShape, kOffsets, kIgnored,
};

struct Frame {
  Role role;
  bool is_object;
  std::unordered_set<std::string> keys;  // ST-005, objects only
  std::string pending_key;
};

// A SAX consumer for nlohmann::json::sax_parse that records the schema facts
// the ST rules need and keeps parsing to the end, so that a later grammar
// error (ST-004) still wins over a schema error found earlier.
class HeaderSax {
 public:
  bool depth_exceeded = false;
  bool top_not_object = false;
  bool duplicate_key = false;
  std::string duplicate_key_name;
  bool has_metadata = false, metadata_bad = false;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<EntryRecord> entries;

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
  bool end_object() { stack_.pop_back(); return true; }
  bool end_array() { stack_.pop_back(); return true; }
  bool key(std::string& k) {
    Frame& frame = stack_.back();
    if (!frame.keys.insert(k).second && !duplicate_key) {
      duplicate_key = true;  // ST-005
      duplicate_key_name = k;
    }
    frame.pending_key = k;
    if (frame.role == Role::kTop && k != "__metadata__") {
      entries.push_back(EntryRecord{});
      entries.back().name = k;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) {
    return false;
  }

 private:
  enum class Kind { kUnsigned, kString, kOther };
  std::vector<Frame> stack_;

  // The role a value takes in the current frame; marks schema errors.
  Role ChildRole(bool is_container, bool is_object, Kind kind) {
    Frame& frame = stack_.back();
    switch (frame.role) {
      case Role::kTop:
        if (frame.pending_key == "__metadata__") {
          has_metadata = true;
          metadata.clear();
          if (is_object) return Role::kMetadata;
          metadata_bad = true;  // ST-006
          return Role::kIgnored;
        }
        if (is_object) return Role::kEntry;
        entries.back().not_object = true;  // ST-007
        return Role::kIgnored;
      case Role::kMetadata:
        if (is_container || kind != Kind::kString) metadata_bad = true;
        return Role::kIgnored;
      case Role::kEntry: {
        EntryRecord& entry = entries.back();
        const std::string& k = frame.pending_key;
        if (k == "dtype") {
          entry.has_dtype = true;
          entry.dtype_bad = is_container || kind != Kind::kString;
          return Role::kIgnored;
        }
        if (k == "shape") {
          entry.has_shape = true;
          entry.shape.clear();
          entry.shape_bad = !(is_container && !is_object);
          return entry.shape_bad ? Role::kIgnored : Role::kShape;
        }
        if (k == "data_offsets") {
          entry.has_offsets = true;
          entry.offsets.clear();
          entry.offsets_bad = !(is_container && !is_object);
          return entry.offsets_bad ? Role::kIgnored : Role::kOffsets;
        }
        return Role::kIgnored;
      }
      case Role::kShape:
        if (kind != Kind::kUnsigned || is_container) entries.back().shape_bad = true;
        return Role::kIgnored;
      case Role::kOffsets:
        if (kind != Kind::kUnsigned || is_container) entries.back().offsets_bad = true;
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
    stack_.push_back(Frame{role, is_object, {}, {}});
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
      EntryRecord& entry = entries.back();
      if (entry.shape.size() == kMaxRank) {
        entry.shape_bad = true;  // ST-007 decision: rank above 64; keeps memory bounded
      } else {
        entry.shape.push_back(value);
      }
    } else if (parent == Role::kOffsets && kind == Kind::kUnsigned) {
      entries.back().offsets.push_back(value);
    } else if (parent == Role::kMetadata && kind == Kind::kString) {
      metadata.emplace_back(frame.pending_key, *text);
    } else if (parent == Role::kEntry && kind == Kind::kString &&
               frame.pending_key == "dtype") {
      entries.back().dtype = *text;
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
  ContainerResult& Refuse(std::string rule, std::string tensor,
                          std::string field, std::int64_t offset,
                          std::string message) {
    Add(std::move(rule), qd::Severity::kError, std::move(tensor),
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

const std::string* Container::Metadata(std::string_view key) const {
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
  HeaderSax sax;
  const bool parsed =
      !has_bom && !has_nul && nlohmann::json::sax_parse(header, header + n, &sax,
                                            nlohmann::json::input_format_t::json,
                                            /*strict=*/true,
                                            /*ignore_comments=*/false);
  if (!parsed) {
    std::string why = "header is not UTF-8 JSON with an object at the top";
    if (sax.depth_exceeded) why = "header nests deeper than 64 containers";
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
  if (sax.duplicate_key) {
    return sink.Refuse("ST-005", "", "header", 8,
                       "key \"" + sax.duplicate_key_name +
                           "\" appears twice in one object");
  }
  if (sax.metadata_bad) {
    return sink.Refuse("ST-006", "", "__metadata__", 8,
                       "__metadata__ is not an object of string values");
  }

  std::vector<EntryRecord>& entries = sax.entries;
  std::sort(entries.begin(), entries.end(),
            [](const EntryRecord& a, const EntryRecord& b) { return a.name < b.name; });
  std::vector<TensorEntry> tensors(entries.size());

  for (std::size_t i = 0; i < entries.size(); ++i) {  // ST-007
    const EntryRecord& e = entries[i];
    std::string problem;
    std::string field;
    if (e.not_object) {
      problem = "entry is not an object", field = "";
    } else if (!e.has_dtype) {
      problem = "entry lacks dtype", field = "dtype";
    } else if (!e.has_shape) {
      problem = "entry lacks shape", field = "shape";
    } else if (!e.has_offsets) {
      problem = "entry lacks data_offsets", field = "data_offsets";
    } else if (e.dtype_bad || !ParseDtype(e.dtype)) {
      problem = "dtype is not a known dtype string", field = "dtype";
    } else if (e.shape_bad) {
      problem = "shape is not an array of non-negative integers",
      field = "shape";
    }
    if (!problem.empty()) return sink.Refuse("ST-007", e.name, field, 8, problem);
    tensors[i].name = e.name;
    tensors[i].dtype = *ParseDtype(e.dtype);
    tensors[i].shape = e.shape;
  }
  for (TensorEntry& t : tensors) {  // ST-008
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
  for (std::size_t i = 0; i < entries.size(); ++i) {  // ST-009
    const EntryRecord& e = entries[i];
    if (e.offsets_bad || e.offsets.size() != 2 || e.offsets[0] > e.offsets[1]) {
      return sink.Refuse("ST-009", e.name, "data_offsets", 8,
                         "data_offsets is not [begin, end] with begin <= end");
    }
    tensors[i].begin = e.offsets[0];
    tensors[i].end = e.offsets[1];
  }
  for (const TensorEntry& t : tensors) {  // ST-010
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
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.end != b.end) return a.end < b.end;
              return a.name < b.name;
            });
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
  c.metadata = std::move(sax.metadata);
  std::sort(c.metadata.begin(), c.metadata.end());
  c.tensors = std::move(tensors);
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

bool StreamFloatTensors(const Container& container, TensorSink& sink) {
  std::vector<TensorInfo> plan;
  for (const TensorEntry& t : container.tensors) {
    if (IsFloatDtype(t.dtype)) plan.push_back({t.name, t.shape});
  }
  if (!sink.Plan(plan)) return false;
  std::size_t index = 0;
  for (const TensorEntry& t : container.tensors) {
    if (!IsFloatDtype(t.dtype)) continue;
    if (!StreamFloatTensor(container, t, index++, sink)) return false;
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
// as ordered_json's operator[] does; the index makes that O(log n) per
// member instead of ordered_json's linear key search, which made a header of
// n tensors O(n^2) (issue 9, 100k tensors took 14 s).
class JsonObjectWriter {
 public:
  void Set(const std::string& key, std::string value_json) {
    const auto [it, inserted] = index_.emplace(key, members_.size());
    if (inserted) {
      members_.emplace_back(nlohmann::json(key).dump(), std::move(value_json));
    } else {
      members_[it->second].second = std::move(value_json);
    }
  }
  std::string Text() const {
    std::string out = "{";
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (i != 0) out.push_back(',');
      out.append(members_[i].first).push_back(':');
      out.append(members_[i].second);
    }
    return out + "}";
  }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<std::pair<std::string, std::string>> members_;  // escaped key, value text
};

std::string JsonUnsignedArray(const std::vector<std::uint64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out.push_back(',');
    out += std::to_string(values[i]);
  }
  return out + "]";
}

}  // namespace

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
    header.Set(t.name, "{\"dtype\":" + nlohmann::json(t.dtype).dump() +
                           ",\"shape\":" + JsonUnsignedArray(t.shape) +
                           ",\"data_offsets\":" +
                           JsonUnsignedArray({offset, offset + t.byte_size}) + "}");
    offset += t.byte_size;
  }
  std::string json = header.Text();
  json.append((8 - json.size() % 8) % 8, ' ');  // ST-102 padding
  std::string out(8, '\0');
  const std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
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
