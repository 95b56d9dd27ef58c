// pt_model.h: the internals of the oracle's torch.save reader (oracles/pt.h),
// shared by the units written from docs/pt.md's sections: pt_zip.cc
// (section 2: the ZIP container and its records), pt_pickle.cc (section 4:
// the opcode walk through an opcode -> handler table, and 5.1), pt_flatten.cc
// (section 6: flattening, the value walk and the value table) and
// pt_views.cc (5.2, 5.3, 6.3, 6.4); pt.cc runs section 8's steps in order.
// Not an interface: include oracles/pt.h.
//
// Section 6 counts every item of a flattened dict, then every node of the
// value walk, in one node count (so a file cannot name 2^64 entries through
// shared dicts), and section 3 bounds the table entries' names plus the
// materialised tensor bytes by file size + 2^26 bytes (PT-012, "container"),
// so a broadcast view (stride 0) cannot demand unbounded memory.
#ifndef QUANTDIFF_ORACLES_PT_MODEL_H_
#define QUANTDIFF_ORACLES_PT_MODEL_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oracles/finding.h"
#include "oracles/pt.h"

namespace qd::oracle::pt_internal {

using u128 = unsigned __int128;

// Section 4.4 limits.
constexpr std::uint64_t kMaxMarks = 256;
constexpr std::uint64_t kMaxStack = 1048576;
constexpr std::uint64_t kMaxMemo = 1048576;
constexpr std::uint64_t kMaxString = 1048576;
constexpr std::uint64_t kMaxLong = 8;
constexpr std::uint64_t kMaxItems = 1048576;
constexpr std::uint64_t kMaxRank = 64;
constexpr std::uint64_t kMaxDepth = 64;
constexpr std::uint64_t kMaxNodes = 1048576;
constexpr std::uint64_t kMaxValuesMade = 2097152;
// The oracle-side output guard (see the top of the file).
constexpr std::uint64_t kOutputSlack = std::uint64_t{1} << 26;
constexpr std::size_t kRenderCap = 4096;

// ---------------------------------------------------------------------------
// Section 1: helpers (little-endian loads: oracles/bytes.h).

// Where the first error goes. The reader functions return false after
// calling Refuse.
struct Report {
  const std::string& file_name;
  qd::Outcome* outcome;

  bool Refuse(const char* rule, const char* field, std::uint64_t offset,
              const std::string& message, const std::string& tensor = std::string()) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kError, file_name, tensor, field,
                                           static_cast<std::int64_t>(offset), message));
    outcome->refused = true;
    return false;
  }
  void Warn(const char* rule, const char* field, std::uint64_t offset, const std::string& message) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kWarning, file_name, std::string(),
                                           field, static_cast<std::int64_t>(offset), message));
  }
};

// ---------------------------------------------------------------------------
// Section 2: the ZIP container (pt_zip.cc).

struct Entry {
  std::uint64_t central = 0;  // offset of the central directory entry
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;   // compressed == uncompressed
  std::uint64_t local = 0;  // local header offset h
  std::string name;
  std::uint64_t data_start = 0;  // ds
  std::uint64_t data_end = 0;    // de
  std::uint64_t entry_end = 0;   // de, or after the descriptor
};

struct Archive {
  std::uint64_t cd_off = 0;
  std::uint64_t dir_end = 0;
  std::uint64_t count = 0;
  std::string prefix;  // P
  std::vector<Entry> entries;
};

struct Record {
  std::uint64_t local = 0;
  std::uint64_t data_start = 0;
  std::uint64_t size = 0;
};

struct Records {
  std::map<std::string, Record> by_name;  // record name (without "P/")
  std::vector<std::string> local_order;   // record names in local header order
  bool big_endian = false;
  std::uint64_t pkl_start = 0;
  std::uint64_t pkl_size = 0;
};

// 2.2 to 2.4, then 2.5: section 8 steps 1 to 4, in this order.
bool ReadEndRecords(qd::ByteView file, Report& report, Archive* archive);
bool ReadCentralDirectory(qd::ByteView file, Report& report, Archive* archive);
bool ReadEntries(qd::ByteView file, Report& report, Archive* archive);
bool ReadRecords(qd::ByteView file, Report& report, const Archive& archive, Records* records);

// 2.5: a record name data/<key> (without the prefix).
bool IsStorageRecord(const std::string& name);

// ---------------------------------------------------------------------------
// Section 4: the value model and the allow-list.

struct DtypeInfo {
  const char* storage_class;
  const char* torch_name;
  const char* code;
  std::uint64_t item_size;
};

constexpr DtypeInfo kDtypes[10] = {
    {"DoubleStorage", "float64", "F64", 8}, {"FloatStorage", "float32", "F32", 4},
    {"HalfStorage", "float16", "F16", 2},   {"BFloat16Storage", "bfloat16", "BF16", 2},
    {"LongStorage", "int64", "I64", 8},     {"IntStorage", "int32", "I32", 4},
    {"ShortStorage", "int16", "I16", 2},    {"CharStorage", "int8", "I8", 1},
    {"ByteStorage", "uint8", "U8", 1},      {"BoolStorage", "bool", "BOOL", 1}};

// Token ids: callables 0..3, storage classes 10 + dtype index, dtypes 20 + dtype index.
constexpr int kOrderedDict = 0;
constexpr int kRebuildTensorV2 = 1;
constexpr int kRebuildParameter = 2;
constexpr int kTorchSize = 3;
constexpr int kStorageBase = 10;
constexpr int kDtypeBase = 20;

// The text of a token as the value table renders it (pt.h).
std::string TokenText(int token);

enum class Kind : std::uint8_t {
  kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kSize, kToken, kStorage, kTensor
};

// One value. kBool/kInt: a; kFloat: b (bits); kStr: a = absolute offset,
// b = length; kTuple/kList: a = index into seqs; kDict: index into dicts;
// kSize: index into sizes; kToken: a = token id; kStorage: index into
// storages; kTensor: index into tensors.
struct Node {
  Kind kind = Kind::kNone;
  std::int64_t a = 0;
  std::uint64_t b = 0;
};

struct KeyRef {
  bool is_str = false;
  std::int64_t integer = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct KeyLess {
  const std::uint8_t* file = nullptr;
  bool operator()(const KeyRef& x, const KeyRef& y) const {
    if (x.is_str != y.is_str) return x.is_str < y.is_str;
    if (!x.is_str) return x.integer < y.integer;
    const std::string_view sx(reinterpret_cast<const char*>(file + x.offset), x.length);
    const std::string_view sy(reinterpret_cast<const char*>(file + y.offset), y.length);
    return sx < sy;
  }
};

struct Dict {
  explicit Dict(const std::uint8_t* file) : keys(KeyLess{file}) {}
  bool ordered = false;
  bool built = false;
  std::int64_t attrs = -1;  // node of the BUILD state
  std::vector<std::pair<std::uint32_t, std::uint32_t>> items;  // (key node, value node)
  std::set<KeyRef, KeyLess> keys;
};

struct Storage {
  int dtype = 0;
  std::string key;
  std::int64_t numel = 0;
  std::uint64_t data_start = 0;
};

struct Tensor {
  std::uint32_t storage = 0;  // index into storages
  std::int64_t offset = 0;
  std::vector<std::int64_t> size;
  std::vector<std::int64_t> stride;
  std::uint64_t numel = 1;
};

struct Model {
  explicit Model(const std::uint8_t* f) : file(f) {}
  const std::uint8_t* file;
  std::vector<Node> nodes;
  std::vector<std::vector<std::uint32_t>> seqs;
  std::vector<Dict> dicts;
  std::vector<std::vector<std::int64_t>> sizes;
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;

  std::uint32_t Add(Kind kind, std::int64_t a, std::uint64_t b) {
    Node node;
    node.kind = kind;
    node.a = a;
    node.b = b;
    nodes.push_back(node);
    return static_cast<std::uint32_t>(nodes.size() - 1);
  }
  std::uint32_t AddSeq(Kind kind, std::vector<std::uint32_t> items) {
    seqs.push_back(std::move(items));
    return Add(kind, static_cast<std::int64_t>(seqs.size() - 1), 0);
  }
  std::uint32_t AddDict(bool ordered) {
    dicts.emplace_back(file);
    dicts.back().ordered = ordered;
    return Add(Kind::kDict, static_cast<std::int64_t>(dicts.size() - 1), 0);
  }
  std::string_view Str(std::uint32_t node) const {
    return std::string_view(reinterpret_cast<const char*>(file + nodes[node].a), nodes[node].b);
  }
  bool IsEmptyDict(std::uint32_t node) const {
    if (nodes[node].kind != Kind::kDict) return false;
    const Dict& d = dicts[nodes[node].a];
    return d.items.empty() && d.attrs < 0;
  }
  // A tuple or Size of ints, copied out.
  bool IntSequence(std::uint32_t node, std::vector<std::int64_t>* values) const {
    values->clear();
    if (nodes[node].kind == Kind::kSize) {
      *values = sizes[nodes[node].a];
      return true;
    }
    if (nodes[node].kind != Kind::kTuple) return false;
    for (const std::uint32_t item : seqs[nodes[node].a]) {
      if (nodes[item].kind != Kind::kInt) return false;
      values->push_back(nodes[item].a);
    }
    return true;
  }
};

// Section 8 step 5 (pt_pickle.cc): walks data.pkl into *model; the root
// dict's node in *root, and the storage keys named by persistent IDs in
// *named.
bool WalkPickle(qd::ByteView file, Report& report, const Records& records, Model* model,
                std::uint32_t* root, std::set<std::string>* named);

// ---------------------------------------------------------------------------
// Section 6: flattening and the value walk (pt_flatten.cc).

struct TableEntry {
  std::string name;
  std::uint32_t node = 0;
  bool is_tensor = false;
  std::uint64_t depth = 0;  // of the value itself: its dict's depth + 1
};

// Section 8 step 6: the root flattened into *table (6.1), then every value
// entry walked (6.2).
bool FlattenTable(Report& report, const Model& model, std::uint64_t pkl_start,
                  std::uint64_t file_size, std::uint32_t root, std::vector<TableEntry>* table);

// The value table's text form (pt.h): appends node's rendering to *out.
void Render(const Model& model, std::uint32_t node, std::string* out);

// The structured value table (pt.h's PtValueGraph). Each model node is
// exported once, so sharing stays sharing and the graph is no larger than
// what data.pkl built; the recursion is as deep as the value walk's 64.
class GraphExport {
 public:
  GraphExport(const Model& model, bool big_endian, PtValueGraph* graph)
      : model_(model), big_endian_(big_endian), graph_(graph) {}

  std::uint32_t Add(std::uint32_t node);

 private:
  const Model& model_;
  bool big_endian_;
  PtValueGraph* graph_;
  std::map<std::uint32_t, std::uint32_t> done_;
};

// ---------------------------------------------------------------------------
// 5.3, 6.4: a tensor's layout and shape (pt_views.cc).

PtTensorLayout LayoutOf(const Model& model, const Tensor& tensor, bool big_endian);
std::vector<std::uint64_t> ShapeOf(const Tensor& tensor);

}  // namespace qd::oracle::pt_internal

#endif  // QUANTDIFF_ORACLES_PT_MODEL_H_
