// pt.h: the production reader for torch .pt / .pth / .bin files (the
// torch.save zip format; docs/pt.md; rules PT-001..PT-017, PT-101, PT-102,
// PT-104; peer vectors ../shared/peer/pt/).
//
// ReadPt checks the ZIP subset torch.save writes (docs/pt.md section 2), then
// walks the opcodes of data.pkl over a closed value model (section 4): nothing
// named by the file is imported, called or instantiated, and a global outside
// the allow-list stops the walk at the opcode that names it. Every length,
// count and offset read from the file is checked against the file, the entry
// or a limit of section 4.4 before anything is allocated from it. Tensors are
// kept as views into the caller's bytes (storage record, offset, size,
// stride); PtTensorBytes / CopyPtTensorBytes materialise them in C order,
// little-endian (section 5.3).
//
//   qd::codec::PtResult r = qd::codec::ReadPt(bytes, "model.pt");
//   if (!r.refused) for (const auto& e : r.tensors) Use(e.name, qd::codec::PtTensorBytes(r.all_tensors[e.tensor]));
//   const qd::codec::PtNode* q = r.Value("w.quant_state");  // the value table
//
// The result's tensors point into `file`: keep the bytes alive while using them.
#ifndef QUANTDIFF_CODECS_PT_H_
#define QUANTDIFF_CODECS_PT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quantdiff/tensor_sink.h"
#include "codecs/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

// One tensor (section 5): a view of a storage record, read in C order. Held
// once per _rebuild_tensor_v2 the pickle ran (PtResult::all_tensors), however
// many names the memo gives it.
struct PtTensor {
  Dtype dtype = Dtype::kU8;  // F64, F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> stride;   // in elements
  std::uint64_t storage_offset = 0;    // in elements
  std::uint64_t numel = 1;             // prod(shape); 1 for rank 0
  std::string storage_key;             // the record is data/<storage_key>
  std::uint64_t storage_numel = 0;
  std::uint64_t storage_begin = 0;     // ds of the storage record (absolute)
  const std::uint8_t* storage = nullptr;  // file bytes at storage_begin
  bool big_endian = false;             // `byteorder` = big: elements byte-swapped on read
  // Section 6.4: begin = storage_begin + storage_offset * isz, end = begin + numel * isz.
  std::uint64_t begin = 0, end = 0;
};

// Item size in bytes of a pt dtype (8, 4, 2, 2, 8, 4, 2, 1, 1, 1); 0 for others.
std::uint64_t PtItemSize(Dtype dtype);
// True when the view is the whole run [storage_offset, storage_offset + numel) in C order.
bool PtIsContiguous(const PtTensor& tensor);
// Storage element s(i) of C-order element i (section 5.3); i < numel.
std::uint64_t PtStorageIndex(const PtTensor& tensor, std::uint64_t i);
// Absolute byte offset of C-order element i: storage_begin + s(i) * isz (section 6.4).
std::uint64_t PtElementOffset(const PtTensor& tensor, std::uint64_t i);
// numel * isz bytes, C order, little-endian (section 5.3) into out.
void CopyPtTensorBytes(const PtTensor& tensor, std::uint8_t* out);
std::vector<std::uint8_t> PtTensorBytes(const PtTensor& tensor);
// Floating tensors (F32, F16, BF16, F64) to binary32 in C order (section 6.3);
// false for another dtype.
bool DecodePtTensor(const PtTensor& tensor, float* out);
// C-order elements [first, first + count) of a floating tensor to binary32
// (first + count <= numel): a view decoded a chunk at a time, never whole.
bool DecodePtRange(const PtTensor& tensor, std::uint64_t first, std::uint64_t count, float* out);

// ---- the value model (sections 4.2, 6.2) ---------------------------------------
enum class PtKind : std::uint8_t {
  kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kSize, kToken, kStorage, kTensor,
};
enum class PtTokenKind : std::uint8_t { kCallable, kStorageClass, kDtype };

inline constexpr std::uint32_t kPtNoNode = 0xffffffffu;

// One value. Containers refer to other nodes by index into PtResult::nodes,
// so shared (memo) and cyclic values are represented as the pickle built them.
struct PtNode {
  PtKind kind = PtKind::kNone;
  bool boolean = false;   // kBool
  bool ordered = false;   // kDict: built by collections.OrderedDict()
  PtTokenKind token = PtTokenKind::kCallable;  // kToken
  Dtype dtype = Dtype::kU8;  // kToken of a storage class or dtype; kStorage
  std::int64_t integer = 0;  // kInt; kStorage: numel
  double real = 0.0;         // kFloat
  // kStr: the text; kToken: the global's name ("float16", "FloatStorage",
  // "OrderedDict", "_rebuild_tensor_v2", "Size"); kStorage: the key.
  std::string text;
  // kTuple, kList, kSize: the items (kSize: kInt nodes);
  // kDict: key, value, key, value, ... in insertion order.
  std::vector<std::uint32_t> items;
  std::uint32_t attributes = kPtNoNode;  // kDict: the BUILD state (a plain dict)
  std::uint32_t tensor = kPtNoNode;      // kTensor: index into PtResult::all_tensors
};

// One entry of the tensor table (section 6.1): a flattened name and the
// tensor it names, by index into PtResult::all_tensors (a table entry costs
// its name and an index, not a copy of the view).
struct PtTableEntry {
  std::string name;
  std::uint32_t tensor = 0;
};

struct PtResult {
  bool refused = false;
  std::vector<qd::Finding> findings;  // warnings in the order met, then at most one error
  // Everything below is complete only when !refused.
  std::uint64_t pickle_begin = 0;  // ds of data.pkl: byte_offset of header-level findings
  bool big_endian = false;
  std::string prefix;              // P, the archive prefix
  std::vector<PtTableEntry> tensors;  // the tensor table, in flattening order
  std::vector<std::pair<std::string, std::uint32_t>> values;  // the value table: name, node
  std::vector<PtNode> nodes;       // every value built by the pickle
  std::uint32_t root = kPtNoNode;
  std::vector<PtTensor> all_tensors;  // every tensor the pickle built (kTensor nodes), unnamed

  const PtNode& Node(std::uint32_t index) const { return nodes[index]; }
  // The view of tensor table entry i.
  const PtTensor& TableTensor(std::size_t i) const { return all_tensors[tensors[i].tensor]; }
  const PtNode* Value(std::string_view name) const;     // value table entry, or null
  const PtTensor* Tensor(std::string_view name) const;  // tensor table entry, or null
  // Dict lookup by str key; null when node is not a dict or has no such key.
  const PtNode* Item(const PtNode& dict, std::string_view key) const;
};

PtResult ReadPt(qd::ByteView file, const std::string& file_name);

// Cheap: a ZIP local-header signature at 0, the legacy pickle magic prefix, or
// a tar header (`ustar` at 257); never a safetensors file (byte 8 is `{`).
bool ClaimsPt(qd::ByteView file);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_PT_H_
