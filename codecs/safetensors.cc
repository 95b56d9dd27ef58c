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
#include "codecs/safetensors_header_sax.h"

namespace qd::codec {
namespace {

using header_sax::EntryProblem;
using header_sax::kOffsetsBad;
using header_sax::HeaderSax;
using header_sax::St007Problem;

constexpr std::uint64_t kMaxHeaderLength = 100'000'000;  // ST-002

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
