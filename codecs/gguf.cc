// gguf.cc: the codec's .gguf reader (docs/gguf.md). One forward pass over
// the header, metadata and tensor infos with a bounds-checked cursor; scalar
// arrays are skipped in one step once their count is bounded; keys and
// names are checked for duplicates as views into the file.
#include "codecs/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>
#include <utility>

#include "codecs/finding.h"
#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"

namespace qd::codec {
namespace {

constexpr std::uint64_t kInt64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::uint32_t kTypeBool = 7;
constexpr std::uint32_t kTypeString = 8;
constexpr std::uint32_t kTypeArray = 9;
constexpr std::uint32_t kHighestValueType = 12;
constexpr int kMaxArrayDepth = 8;            // docs/gguf.md 2.2, GGUF-007
constexpr std::size_t kMaxTensorName = 63;   // 2.3, GGUF-012
constexpr std::uint64_t kDefaultAlignment = 32;

// docs/gguf.md section 2.4.
constexpr GgufTypeRow kTypes[] = {
    {0, "f32", 1, 4, true},         {1, "f16", 1, 2, true},         {2, "q4_0", 32, 18, true},
    {3, "q4_1", 32, 20, true},      {6, "q5_0", 32, 22, true},      {7, "q5_1", 32, 24, true},
    {8, "q8_0", 32, 34, true},      {9, "q8_1", 32, 36, false},     {10, "q2_K", 256, 84, true},
    {11, "q3_K", 256, 110, true},   {12, "q4_K", 256, 144, true},   {13, "q5_K", 256, 176, true},
    {14, "q6_K", 256, 210, true},   {15, "q8_K", 256, 292, false},  {16, "iq2_xxs", 256, 66, false},
    {17, "iq2_xs", 256, 74, false}, {18, "iq3_xxs", 256, 98, false}, {19, "iq1_s", 256, 50, false},
    {20, "iq4_nl", 32, 18, true},   {21, "iq3_s", 256, 110, false}, {22, "iq2_s", 256, 82, false},
    {23, "iq4_xs", 256, 136, false}, {24, "i8", 1, 1, false},       {25, "i16", 1, 2, false},
    {26, "i32", 1, 4, false},       {27, "i64", 1, 8, false},       {28, "f64", 1, 8, true},
    {29, "iq1_m", 256, 56, false},  {30, "bf16", 1, 2, true},       {34, "tq1_0", 256, 54, false},
    {35, "tq2_0", 256, 66, false},  {39, "mxfp4", 32, 17, true},    {40, "nvfp4", 64, 36, false},
    {41, "q1_0", 128, 18, false},   {42, "q2_0", 64, 18, false},
};

// Smallest encoding of a value of each metadata type (2.2), indexed by type.
constexpr std::uint64_t kMinValueSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};
// Fixed width of the scalar types; 0 for STRING and ARRAY.
constexpr std::uint64_t kFixedSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

class Cursor {
 public:
  explicit Cursor(qd::ByteView file) : data_(file.data), size_(file.size) {}
  std::size_t pos() const { return pos_; }
  std::uint64_t left() const { return size_ - pos_; }
  bool Fits(std::uint64_t n) const { return left() >= n; }
  std::uint32_t U32() {
    std::uint32_t v;
    std::memcpy(&v, data_ + pos_, 4);
    pos_ += 4;
    return v;
  }
  std::uint64_t U64() {
    std::uint64_t v;
    std::memcpy(&v, data_ + pos_, 8);
    pos_ += 8;
    return v;
  }
  std::string_view Bytes(std::uint64_t n) {
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  void Skip(std::uint64_t n) { pos_ += static_cast<std::size_t>(n); }
  std::uint32_t U32At(std::size_t at) const {
    std::uint32_t v;
    std::memcpy(&v, data_ + at, 4);
    return v;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

std::uint64_t Saturated(std::uint64_t v) { return std::min(v, kInt64Max); }

struct Reader {
  const std::string& file_name;
  GgufResult* result;

  void Add(const char* rule, qd::Severity severity, std::uint64_t at, std::string field,
           std::string tensor, std::string message) {
    result->findings.push_back(MakeFinding(rule, severity, file_name, std::move(tensor), std::move(field),
                                           static_cast<std::int64_t>(Saturated(at)), std::move(message)));
  }

  bool Refuse(const char* rule, std::uint64_t at, std::string field, std::string tensor,
              std::string message) {
    Add(rule, qd::Severity::kError, at, std::move(field), std::move(tensor), std::move(message));
    result->refused = true;
    return false;
  }

  void Warn(const char* rule, std::uint64_t at, std::string field, std::string tensor,
            std::string message) {
    Add(rule, qd::Severity::kWarning, at, std::move(field), std::move(tensor), std::move(message));
  }

  // A string's length field and bytes (GGUF-005 when either does not fit).
  bool String(Cursor& c, std::string_view* out, const char* field, const std::string& tensor) {
    const std::size_t at = c.pos();
    if (!c.Fits(8)) return Refuse("GGUF-005", at, field, tensor, "the file ends inside a string length");
    const std::uint64_t n = c.U64();
    if (n > c.left()) return Refuse("GGUF-005", at, field, tensor, "a string is longer than the bytes left");
    *out = c.Bytes(n);
    return true;
  }

  // GGUF-020: the next N bytes (known to fit) are BOOL values, each 0 or 1
  // (section 2.2); the first other byte is refused where it lies.
  bool Bools(Cursor& c, std::uint64_t n) {
    const std::size_t at = c.pos();
    const std::string_view bytes = c.Bytes(n);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const auto b = static_cast<std::uint8_t>(bytes[i]);
      if (b > 1) {
        return Refuse("GGUF-020", at + i, "metadata", "", "a BOOL value is " + std::to_string(b) + ", not 0 or 1");
      }
    }
    return true;
  }

  // One metadata value of TYPE (already known to be <= 12) at DEPTH (0 for
  // a pair's own value), depth first (section 3 step 4).
  bool Value(Cursor& c, std::uint32_t type, int depth) {
    if (type == kTypeString) {
      std::string_view ignored;
      return String(c, &ignored, "metadata", "");
    }
    if (type != kTypeArray) {
      if (!c.Fits(kFixedSize[type])) return Refuse("GGUF-005", c.pos(), "metadata", "", "the file ends inside a value");
      if (type == kTypeBool) return Bools(c, 1);
      c.Skip(kFixedSize[type]);
      return true;
    }
    const std::size_t type_at = c.pos();
    if (!c.Fits(4)) return Refuse("GGUF-005", type_at, "metadata", "", "the file ends inside an array's element type");
    const std::uint32_t element = c.U32();
    if (element > kHighestValueType) return Refuse("GGUF-006", type_at, "metadata", "", "unknown array element type");
    if (element == kTypeArray) result->nested_arrays = true;
    if (element == kTypeArray && depth + 1 >= kMaxArrayDepth) {
      return Refuse("GGUF-007", type_at, "metadata", "", "arrays nested deeper than 8");
    }
    const std::size_t count_at = c.pos();
    if (!c.Fits(8)) return Refuse("GGUF-005", count_at, "metadata", "", "the file ends inside an array count");
    const std::uint64_t count = c.U64();
    if (count > c.left() / kMinValueSize[element]) {
      return Refuse("GGUF-005", count_at, "metadata", "", "an array count exceeds what the bytes left can hold");
    }
    if (element == kTypeBool) return Bools(c, count);  // count <= left
    if (kFixedSize[element] != 0) {  // bounded above: count * size <= left
      c.Skip(count * kFixedSize[element]);
      return true;
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      if (!Value(c, element, depth + 1)) return false;
    }
    return true;
  }

  struct Alignment {
    std::size_t pair_at = 0;
    std::uint32_t type = 0;
    std::uint64_t value = 0;
    bool present = false;
  };

  bool Metadata(Cursor& c, std::uint64_t kv_count, Alignment* alignment) {
    std::unordered_set<std::string_view> keys;
    for (std::uint64_t i = 0; i < kv_count; ++i) {
      const std::size_t pair_at = c.pos();
      std::string_view key;
      if (!String(c, &key, "metadata", "")) return false;
      if (key.empty()) return Refuse("GGUF-010", pair_at, "metadata", "", "an empty metadata key");
      if (!keys.insert(key).second) {
        return Refuse("GGUF-008", pair_at, "metadata", "", "duplicate metadata key " + std::string(key));
      }
      const std::size_t type_at = c.pos();
      if (!c.Fits(4)) return Refuse("GGUF-005", type_at, "metadata", "", "the file ends inside a value type");
      const std::uint32_t type = c.U32();
      if (type > kHighestValueType) return Refuse("GGUF-006", type_at, "metadata", "", "unknown value type");
      const std::size_t value_at = c.pos();
      if (!Value(c, type, 0)) return false;
      if (key == "general.alignment") {
        alignment->present = true;
        alignment->pair_at = pair_at;
        alignment->type = type;
        if (type == 4) alignment->value = c.U32At(value_at);
      }
    }
    return true;
  }

  bool TensorInfo(Cursor& c, std::unordered_set<std::string_view>* names, GgufTensor* t) {
    const std::size_t at = c.pos();
    std::string_view name;
    if (!String(c, &name, "tensor_info", "")) return false;
    t->name = std::string(name);
    if (name.empty() || name.size() > kMaxTensorName) {
      return Refuse("GGUF-012", at, "name", t->name, "a tensor name must be 1 to 63 bytes");
    }
    if (!names->insert(name).second) return Refuse("GGUF-011", at, "name", t->name, "duplicate tensor name");
    if (!c.Fits(4)) return Refuse("GGUF-005", c.pos(), "tensor_info", t->name, "the file ends inside n_dims");
    const std::uint32_t n_dims = c.U32();
    if (n_dims > 4) return Refuse("GGUF-013", at, "n_dims", t->name, "more than 4 dimensions");
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      if (!c.Fits(8)) return Refuse("GGUF-005", c.pos(), "tensor_info", t->name, "the file ends inside a dimension");
      t->ne.push_back(c.U64());
    }
    if (!c.Fits(4)) return Refuse("GGUF-005", c.pos(), "tensor_info", t->name, "the file ends inside the type");
    t->type = c.U32();
    if (!c.Fits(8)) return Refuse("GGUF-005", c.pos(), "tensor_info", t->name, "the file ends inside the offset");
    t->offset = c.U64();

    const GgufTypeRow* row = FindGgufType(t->type);
    if (row == nullptr) return Refuse("GGUF-015", at, "type", t->name, "unknown ggml type");
    std::uint64_t count = 1;
    bool overflow = false;
    bool zero = false;
    for (std::uint64_t d : t->ne) {
      if (d > kInt64Max) overflow = true;
      if (d == 0) zero = true;
    }
    if (!overflow && !zero) {
      for (std::uint64_t d : t->ne) {
        if (count > kInt64Max / d) {
          overflow = true;
          break;
        }
        count *= d;
      }
    }
    if (zero && !overflow) count = 0;
    if (!overflow && count / row->block_values > kInt64Max / row->block_bytes) overflow = true;
    if (overflow) return Refuse("GGUF-014", at, "ne", t->name, "the element count or byte size exceeds 2^63 - 1");
    t->element_count = count;
    t->nbytes = count / row->block_values * row->block_bytes;
    const std::uint64_t ne0 = t->ne.empty() ? 1 : t->ne[0];
    if (ne0 % row->block_values != 0) {
      return Refuse("GGUF-016", at, "ne", t->name, "a row is not a whole number of blocks");
    }
    if (t->offset % result->alignment != 0) {
      return Refuse("GGUF-017", at, "offset", t->name, "the offset is not a multiple of the alignment");
    }
    return true;
  }

  bool Read(qd::ByteView file) {
    Cursor c(file);
    if (file.size < 4 || std::memcmp(file.data, "GGUF", 4) != 0) {
      return Refuse("GGUF-001", 0, "magic", "", "the file does not start with GGUF");
    }
    c.Skip(4);
    if (!c.Fits(4)) return Refuse("GGUF-005", 4, "header", "", "the file ends inside the version");
    const std::uint32_t version = c.U32();
    if (version == 0x02000000u || version == 0x03000000u) {
      return Refuse("GGUF-003", 4, "version", "", "a big-endian GGUF file");
    }
    if (version != 2 && version != 3) return Refuse("GGUF-002", 4, "version", "", "version is not 2 or 3");
    result->version = version;
    if (!c.Fits(16)) return Refuse("GGUF-005", c.Fits(8) ? 16 : 8, "header", "", "the file ends inside the counts");
    const std::uint64_t tensor_count = c.U64();
    const std::uint64_t kv_count = c.U64();
    if (kv_count > c.left() / 13) {
      return Refuse("GGUF-004", 16, "metadata_kv_count", "", "more pairs than the bytes left can hold");
    }
    if (tensor_count > c.left() / 24) {
      return Refuse("GGUF-004", 8, "tensor_count", "", "more tensor infos than the bytes left can hold");
    }
    Alignment alignment;
    if (!Metadata(c, kv_count, &alignment)) return false;
    if (alignment.present) {
      if (alignment.type != 4 || alignment.value == 0 || (alignment.value & (alignment.value - 1)) != 0) {
        return Refuse("GGUF-009", alignment.pair_at, "general.alignment", "",
                      "general.alignment is not a UINT32 power of two");
      }
      result->alignment = alignment.value;
    }
    std::unordered_set<std::string_view> names;
    std::vector<GgufTensor> tensors;
    tensors.reserve(static_cast<std::size_t>(tensor_count));  // bounded by step 3
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
      tensors.emplace_back();
      if (!TensorInfo(c, &names, &tensors.back())) return false;
    }
    const std::uint64_t a = result->alignment;
    const std::uint64_t data_start = (c.pos() + a - 1) / a * a;
    result->data_start = data_start;
    std::vector<std::size_t> info_order(tensors.size());
    for (std::size_t i = 0; i < info_order.size(); ++i) info_order[i] = i;
    std::vector<std::size_t> sorted = info_order;
    std::sort(sorted.begin(), sorted.end(), [&](std::size_t x, std::size_t y) {
      const GgufTensor& l = tensors[x];
      const GgufTensor& r = tensors[y];
      if (l.offset != r.offset) return l.offset < r.offset;
      if (l.nbytes != r.nbytes) return l.nbytes < r.nbytes;
      return l.name < r.name;
    });
    const std::uint64_t size = file.size;
    auto absolute = [&](const GgufTensor& t) {
      return t.offset > kInt64Max - std::min(data_start, kInt64Max) ? kInt64Max : data_start + t.offset;
    };
    std::uint64_t max_end = 0;
    for (std::size_t i : sorted) {
      const GgufTensor& t = tensors[i];
      const bool past = data_start > size || t.offset > size - data_start ||
                        t.nbytes > size - data_start - t.offset;
      if (past) return Refuse("GGUF-018", absolute(t), "offset", t.name, "the tensor's data runs past the end of the file");
      if (t.nbytes > 0 && t.offset < max_end) {
        return Refuse("GGUF-019", absolute(t), "offset", t.name, "the tensor's data overlaps another tensor's");
      }
      max_end = std::max(max_end, t.offset + t.nbytes);
      if (!FindGgufType(t.type)->decoded) {
        Warn("GGUF-101", absolute(t), "type", t.name, "a ggml type quantdiff recognises but does not decode");
      }
    }
    std::uint64_t expected = 0;
    for (std::size_t i : info_order) {
      const GgufTensor& t = tensors[i];
      if (t.offset != expected) {
        Warn("GGUF-102", absolute(t), "offset", t.name, "not packed in tensor-info order (ggml refuses this layout)");
        break;
      }
      expected += (t.nbytes + a - 1) / a * a;
    }
    result->tensors.reserve(tensors.size());
    for (std::size_t i : sorted) result->tensors.push_back(std::move(tensors[i]));
    return true;
  }
};

const GgmlTypeInfo* BlockTypeOf(std::uint32_t id) {
  for (const GgmlTypeInfo& info : GgmlTypes()) {
    if (static_cast<std::uint32_t>(info.ggml_id) == id) return &info;
  }
  return nullptr;
}

// Decodes `count` values of a float type starting at `p` into `out`.
void DecodeFloats(std::uint32_t type, const std::uint8_t* p, std::uint64_t count, float* out) {
  switch (type) {
    case 0:
      std::memcpy(out, p, count * 4);
      return;
    case 1:
      for (std::uint64_t i = 0; i < count; ++i) out[i] = F16ToF32(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      return;
    case 30:
      for (std::uint64_t i = 0; i < count; ++i) out[i] = BF16ToF32(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      return;
    default:  // 28, f64
      for (std::uint64_t i = 0; i < count; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      return;
  }
}

}  // namespace

const GgufTypeRow* FindGgufType(std::uint32_t id) {
  for (const GgufTypeRow& row : kTypes) {
    if (row.id == id) return &row;
  }
  return nullptr;
}

bool ClaimsGguf(qd::ByteView file) { return file.size >= 4 && std::memcmp(file.data, "GGUF", 4) == 0; }

GgufResult ReadGguf(qd::ByteView file, const std::string& file_name) {
  GgufResult result;
  result.alignment = kDefaultAlignment;
  Reader reader{file_name, &result};
  reader.Read(file);
  if (result.refused) result.tensors.clear();
  return result;
}

qd::Outcome StreamGgufFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink,
                           Kernel kernel) {
  GgufResult r = ReadGguf(file, file_name);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (r.refused) return outcome;
  std::vector<TensorInfo> plan;
  for (const GgufTensor& t : r.tensors) {
    if (!FindGgufType(t.type)->decoded) continue;
    plan.push_back({t.name, std::vector<std::uint64_t>(t.ne.rbegin(), t.ne.rend())});
  }
  if (!sink.Plan(plan)) return outcome;
  std::size_t index = 0;
  for (const GgufTensor& t : r.tensors) {
    const GgufTypeRow& row = *FindGgufType(t.type);
    if (!row.decoded) continue;
    const std::uint8_t* data = file.data + r.data_start + t.offset;
    const std::uint64_t row_values = t.ne.empty() ? 1 : t.ne[0];
    const std::uint64_t rows = row_values == 0 ? 0 : t.element_count / row_values;
    const std::uint64_t row_bytes = row_values / row.block_values * row.block_bytes;
    const GgmlTypeInfo* block = BlockTypeOf(t.type);
    const bool go = StreamRows(sink, index++, rows, row_values, [&](std::uint64_t first, std::uint64_t count, float* out) {
      const std::uint8_t* p = data + first * row_bytes;
      if (block != nullptr) {
        GgmlDecode(block->type, p, static_cast<std::size_t>(count * (row_values / row.block_values)), out, kernel);
      } else {
        DecodeFloats(t.type, p, count * row_values, out);
      }
    });
    if (!go) break;
  }
  return outcome;
}

qd::Outcome DecodeGgufFile(qd::ByteView file, const std::string& file_name, Kernel kernel) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamGgufFile(file, file_name, sink, kernel); });
}

}  // namespace qd::codec
