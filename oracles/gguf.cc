// gguf.cc: the oracle's .gguf reader, docs/gguf.md step by step.
#include "oracles/gguf.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/ggml_blocks.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

const std::uint64_t kLargest = 9223372036854775807ull;  // 2^63 - 1

// docs/gguf.md section 2.4, one type per line: id, name, QK, B, decoded.
struct GgmlTypeLine {
  std::uint32_t id;
  const char* name;
  std::uint64_t qk;
  std::uint64_t b;
  bool decoded;
};
const GgmlTypeLine kGgmlTypes[] = {
    {0, "f32", 1, 4, true},
    {1, "f16", 1, 2, true},
    {2, "q4_0", 32, 18, true},
    {3, "q4_1", 32, 20, true},
    {6, "q5_0", 32, 22, true},
    {7, "q5_1", 32, 24, true},
    {8, "q8_0", 32, 34, true},
    {9, "q8_1", 32, 36, false},
    {10, "q2_K", 256, 84, true},
    {11, "q3_K", 256, 110, true},
    {12, "q4_K", 256, 144, true},
    {13, "q5_K", 256, 176, true},
    {14, "q6_K", 256, 210, true},
    {15, "q8_K", 256, 292, false},
    {16, "iq2_xxs", 256, 66, false},
    {17, "iq2_xs", 256, 74, false},
    {18, "iq3_xxs", 256, 98, false},
    {19, "iq1_s", 256, 50, false},
    {20, "iq4_nl", 32, 18, true},
    {21, "iq3_s", 256, 110, false},
    {22, "iq2_s", 256, 82, false},
    {23, "iq4_xs", 256, 136, false},
    {24, "i8", 1, 1, false},
    {25, "i16", 1, 2, false},
    {26, "i32", 1, 4, false},
    {27, "i64", 1, 8, false},
    {28, "f64", 1, 8, true},
    {29, "iq1_m", 256, 56, false},
    {30, "bf16", 1, 2, true},
    {34, "tq1_0", 256, 54, false},
    {35, "tq2_0", 256, 66, false},
    {39, "mxfp4", 32, 17, true},
    {40, "nvfp4", 64, 36, false},
    {41, "q1_0", 128, 18, false},
    {42, "q2_0", 64, 18, false},
};

const GgmlTypeLine* TypeLine(std::uint32_t id) {
  for (const GgmlTypeLine& line : kGgmlTypes) {
    if (line.id == id) return &line;
  }
  return nullptr;
}

// Section 2.2: the smallest bytes a value of a metadata type takes.
std::uint64_t SmallestValue(std::uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 9: return 12;
    default: return 8;  // 8 (string length), 10, 11, 12
  }
}

struct Tensor {
  GgufTensorInfo info;
  std::uint64_t count = 0;
  std::uint64_t nbytes = 0;
};

struct Parse {
  qd::ByteView file;
  std::string file_name;
  qd::Outcome* outcome;
  std::uint64_t pos = 0;
  std::uint64_t alignment = 32;
  std::uint64_t data_start = 0;
  std::vector<Tensor> tensors;  // file order

  std::uint64_t Left() const { return file.size - pos; }

  void Note(const char* rule, qd::Severity severity, std::uint64_t at, const char* field,
            const std::string& tensor) {
    outcome->findings.push_back(NewFinding(rule, severity, file_name, tensor, field,
                                           static_cast<std::int64_t>(at < kLargest ? at : kLargest),
                                           std::string(rule) + ": see docs/gguf.md section 3"));
  }

  bool Error(const char* rule, std::uint64_t at, const char* field, const std::string& tensor) {
    Note(rule, qd::Severity::kError, at, field, tensor);
    outcome->refused = true;
    return false;
  }

  void Warning(const char* rule, std::uint64_t at, const char* field, const std::string& tensor) {
    Note(rule, qd::Severity::kWarning, at, field, tensor);
  }

  // Reads an n-byte little-endian number at pos when it fits.
  bool Number(int n, std::uint64_t* out) {
    if (Left() < static_cast<std::uint64_t>(n)) return false;
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | file.data[pos + static_cast<std::uint64_t>(i)];
    *out = v;
    pos += static_cast<std::uint64_t>(n);
    return true;
  }

  // A string: false when its length field or its bytes do not fit.
  bool ReadString(std::string* out) {
    std::uint64_t length = 0;
    if (!Number(8, &length)) return false;
    if (length > Left()) return false;
    out->assign(reinterpret_cast<const char*>(file.data + pos), static_cast<std::size_t>(length));
    pos += length;
    return true;
  }

  // A value of TYPE inside an array at array depth DEPTH (0: a pair's value).
  bool ReadValue(std::uint32_t type, int depth) {
    const std::uint64_t at = pos;
    std::uint64_t ignored = 0;
    if (type == 8) {
      std::string s;
      if (!ReadString(&s)) return Error("GGUF-005", at, "metadata", "");
      return true;
    }
    if (type == 9) {
      const int array_depth = depth + 1;
      std::uint64_t element_type = 0;
      if (!Number(4, &element_type)) return Error("GGUF-005", at, "metadata", "");
      if (element_type > 12) return Error("GGUF-006", at, "metadata", "");
      if (element_type == 9 && array_depth == 8) return Error("GGUF-007", at, "metadata", "");
      const std::uint64_t count_at = pos;
      std::uint64_t count = 0;
      if (!Number(8, &count)) return Error("GGUF-005", count_at, "metadata", "");
      if (count > Left() / SmallestValue(static_cast<std::uint32_t>(element_type))) {
        return Error("GGUF-005", count_at, "metadata", "");
      }
      for (std::uint64_t i = 0; i < count; ++i) {
        if (!ReadValue(static_cast<std::uint32_t>(element_type), array_depth)) return false;
      }
      return true;
    }
    if (!Number(static_cast<int>(SmallestValue(type)), &ignored)) return Error("GGUF-005", at, "metadata", "");
    // Section 2.2: a BOOL byte is 0 (false) or 1 (true); any other is GGUF-020.
    if (type == 7 && ignored > 1) return Error("GGUF-020", at, "metadata", "");
    return true;
  }

  bool Header(std::uint64_t* tensor_count, std::uint64_t* kv_count) {
    if (file.size < 4 || file.data[0] != 'G' || file.data[1] != 'G' || file.data[2] != 'U' || file.data[3] != 'F') {
      return Error("GGUF-001", 0, "magic", "");
    }
    pos = 4;
    std::uint64_t version = 0;
    if (!Number(4, &version)) return Error("GGUF-005", 4, "header", "");
    if (version == 0x02000000 || version == 0x03000000) return Error("GGUF-003", 4, "version", "");
    if (version != 2 && version != 3) return Error("GGUF-002", 4, "version", "");
    if (!Number(8, tensor_count)) return Error("GGUF-005", 8, "header", "");
    if (!Number(8, kv_count)) return Error("GGUF-005", 16, "header", "");
    if (*kv_count > Left() / 13) return Error("GGUF-004", 16, "metadata_kv_count", "");
    if (*tensor_count > Left() / 24) return Error("GGUF-004", 8, "tensor_count", "");
    return true;
  }

  bool Metadata(std::uint64_t kv_count) {
    std::set<std::string> keys;
    bool has_alignment = false;
    std::uint64_t alignment_pair = 0;
    std::uint64_t alignment_type = 0;
    std::uint64_t alignment_value = 0;
    for (std::uint64_t i = 0; i < kv_count; ++i) {
      const std::uint64_t pair_at = pos;
      std::string key;
      if (!ReadString(&key)) return Error("GGUF-005", pair_at, "metadata", "");
      if (key.empty()) return Error("GGUF-010", pair_at, "metadata", "");
      if (keys.count(key) != 0) return Error("GGUF-008", pair_at, "metadata", "");
      keys.insert(key);
      const std::uint64_t type_at = pos;
      std::uint64_t type = 0;
      if (!Number(4, &type)) return Error("GGUF-005", type_at, "metadata", "");
      if (type > 12) return Error("GGUF-006", type_at, "metadata", "");
      const std::uint64_t value_at = pos;
      if (!ReadValue(static_cast<std::uint32_t>(type), 0)) return false;
      if (key == "general.alignment") {
        has_alignment = true;
        alignment_pair = pair_at;
        alignment_type = type;
        if (type == 4) alignment_value = LoadU32(file.data + value_at);
      }
    }
    if (has_alignment) {
      bool power_of_two = false;
      for (int bit = 0; bit < 32; ++bit) {
        if (alignment_value == (std::uint64_t{1} << bit)) power_of_two = true;
      }
      if (alignment_type != 4 || !power_of_two) return Error("GGUF-009", alignment_pair, "general.alignment", "");
      alignment = alignment_value;
    }
    return true;
  }

  bool Info(std::set<std::string>* names) {
    const std::uint64_t at = pos;
    Tensor t;
    if (!ReadString(&t.info.name)) return Error("GGUF-005", at, "tensor_info", "");
    const std::string& name = t.info.name;
    if (name.size() < 1 || name.size() > 63) return Error("GGUF-012", at, "name", name);
    if (names->count(name) != 0) return Error("GGUF-011", at, "name", name);
    names->insert(name);
    std::uint64_t n_dims = 0;
    if (!Number(4, &n_dims)) return Error("GGUF-005", pos, "tensor_info", name);
    if (n_dims > 4) return Error("GGUF-013", at, "n_dims", name);
    for (std::uint64_t d = 0; d < n_dims; ++d) {
      std::uint64_t dim = 0;
      if (!Number(8, &dim)) return Error("GGUF-005", pos, "tensor_info", name);
      t.info.ne.push_back(dim);
    }
    std::uint64_t type = 0;
    if (!Number(4, &type)) return Error("GGUF-005", pos, "tensor_info", name);
    t.info.type = static_cast<std::uint32_t>(type);
    if (!Number(8, &t.info.offset)) return Error("GGUF-005", pos, "tensor_info", name);

    const GgmlTypeLine* line = TypeLine(t.info.type);
    if (line == nullptr) return Error("GGUF-015", at, "type", name);
    // The element count as exact arithmetic: any dimension 0 makes it 0;
    // otherwise multiply while it stays at most 2^63 - 1.
    bool too_large = false;
    bool has_zero = false;
    for (std::uint64_t dim : t.info.ne) {
      if (dim > kLargest) too_large = true;
      if (dim == 0) has_zero = true;
    }
    std::uint64_t count = 1;
    if (!too_large && has_zero) count = 0;
    if (!too_large && !has_zero) {
      for (std::uint64_t dim : t.info.ne) {
        if (count > kLargest / dim) too_large = true;
        if (too_large) break;
        count = count * dim;
      }
    }
    if (!too_large && count / line->qk > kLargest / line->b) too_large = true;
    if (too_large) return Error("GGUF-014", at, "ne", name);
    t.count = count;
    t.nbytes = count / line->qk * line->b;
    std::uint64_t row = 1;
    if (!t.info.ne.empty()) row = t.info.ne[0];
    if (row % line->qk != 0) return Error("GGUF-016", at, "ne", name);
    if (t.info.offset % alignment != 0) return Error("GGUF-017", at, "offset", name);
    tensors.push_back(t);
    return true;
  }

  std::uint64_t Absolute(const Tensor& t) const {
    if (t.info.offset >= kLargest || data_start >= kLargest - t.info.offset) return kLargest;
    return data_start + t.info.offset;
  }

  // Step 7's order: (offset, nbytes, name bytes).
  std::vector<const Tensor*> Sorted() const {
    std::vector<const Tensor*> order;
    for (const Tensor& t : tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
      if (a->info.offset != b->info.offset) return a->info.offset < b->info.offset;
      if (a->nbytes != b->nbytes) return a->nbytes < b->nbytes;
      return a->info.name < b->info.name;
    });
    return order;
  }

  bool Data() {
    // The least multiple of the alignment at or after the end of the infos.
    data_start = pos + (alignment - pos % alignment) % alignment;
    std::uint64_t largest_end = 0;
    for (const Tensor* t : Sorted()) {
      // end = data_start + offset + nbytes > size, without overflow
      bool past = data_start > file.size;
      if (!past) past = t->info.offset > file.size - data_start;
      if (!past) past = t->nbytes > file.size - data_start - t->info.offset;
      if (past) return Error("GGUF-018", Absolute(*t), "offset", t->info.name);
      if (t->nbytes > 0 && t->info.offset < largest_end) return Error("GGUF-019", Absolute(*t), "offset", t->info.name);
      if (t->info.offset + t->nbytes > largest_end) largest_end = t->info.offset + t->nbytes;
      if (!TypeLine(t->info.type)->decoded) Warning("GGUF-101", Absolute(*t), "type", t->info.name);
    }
    std::uint64_t expected = 0;
    for (const Tensor& t : tensors) {
      if (t.info.offset != expected) {
        Warning("GGUF-102", Absolute(t), "offset", t.info.name);
        break;
      }
      expected = expected + t.nbytes + (alignment - t.nbytes % alignment) % alignment;
    }
    return true;
  }

  bool Run() {
    std::uint64_t tensor_count = 0;
    std::uint64_t kv_count = 0;
    if (!Header(&tensor_count, &kv_count)) return false;
    if (!Metadata(kv_count)) return false;
    std::set<std::string> names;
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
      if (!Info(&names)) return false;
    }
    return Data();
  }
};

}  // namespace

bool IsGgufFile(qd::ByteView file) {
  return file.size >= 4 && file.data[0] == 0x47 && file.data[1] == 0x47 && file.data[2] == 0x55 &&
         file.data[3] == 0x46;
}

qd::Outcome StreamGgufFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Parse parse{file, file_name, &outcome, 0, 32, 0, {}};
  if (!parse.Run()) return outcome;
  std::vector<const Tensor*> decoded;
  std::vector<qd::TensorInfo> plan;
  for (const Tensor* t : parse.Sorted()) {
    if (!TypeLine(t->info.type)->decoded) continue;
    decoded.push_back(t);
    std::vector<std::uint64_t> shape;
    for (std::size_t d = t->info.ne.size(); d > 0; --d) shape.push_back(t->info.ne[d - 1]);
    plan.push_back({t->info.name, shape});
  }
  if (!sink.Plan(plan)) return outcome;
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const Tensor& t = *decoded[i];
    const std::uint8_t* data = file.data + parse.data_start + t.info.offset;
    const std::string type = TypeLine(t.info.type)->name;
    bool go = true;
    if (type == "f32" || type == "f16" || type == "bf16" || type == "f64") {
      std::string dtype = type;
      std::transform(dtype.begin(), dtype.end(), dtype.begin(), [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; });
      go = StreamFloatElements(dtype, data, t.count, i, sink);
    } else {
      const std::vector<std::uint8_t> bytes(data, data + t.nbytes);
      std::vector<float> values;
      DecodeGgmlBlocks(type, bytes, &values);
      go = TakeWhole(sink, i, values);
    }
    if (!go) break;
  }
  return outcome;
}

qd::Outcome ReadGgufFile(qd::ByteView file, const std::string& file_name) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamGgufFile(file, file_name, sink); });
}

bool GgufTable(qd::ByteView file, std::vector<GgufTensorInfo>* infos, std::uint64_t* alignment,
               std::uint64_t* data_start) {
  qd::Outcome outcome;
  Parse parse{file, "", &outcome, 0, 32, 0, {}};
  if (!parse.Run()) return false;
  infos->clear();
  for (const Tensor& t : parse.tensors) infos->push_back(t.info);
  *alignment = parse.alignment;
  *data_start = parse.data_start;
  return true;
}

}  // namespace qd::oracle
