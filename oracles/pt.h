// pt.h: the oracle's reader for torch.save files (.pt, .pth, .bin), written
// plainly from docs/pt.md sections 1..8 and 9: section 8 steps 1..7 and the
// tables they give. Step 8 (docs/bnb.md's readers on the tensor table, 6.4,
// and the bitsandbytes list layout, section 7) is oracles/bnb_pt_layers.h,
// which joins this reader and oracles/bnb.h; neither knows the other.
//
// Nothing in the file is ever imported, called or unpickled: the ZIP
// container is checked field by field and data.pkl is walked opcode by
// opcode over a closed value model (docs/pt.md section 4). Shares no code
// with codecs/; the differential tests compare the two bit for bit.
//
//   qd::oracle::PtTables tables;
//   qd::Outcome o = qd::oracle::ReadPtTables(bytes, "model.pt", false, nullptr, &tables);
#ifndef QUANTDIFF_ORACLES_PT_H_
#define QUANTDIFF_ORACLES_PT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::oracle {

// Where a tensor's elements lie in the file (docs/pt.md 5.1, 5.3, 6.4).
// Element i of the C-order enumeration (multi-index i_0..i_{r-1} over the
// tensor's shape) is storage element s(i) = storage_offset + sum(i_k *
// stride[k]), at bytes [storage_start + s(i) * item_size, + item_size).
struct PtTensorLayout {
  std::uint64_t storage_start = 0;   // ds of the storage record data/<key>
  std::uint64_t item_size = 1;       // isz of the storage's dtype
  std::uint64_t storage_offset = 0;  // in elements
  std::vector<std::uint64_t> stride;  // in elements, one per dimension
  // 6.4: begin = ds + storage_offset * isz, end = begin + numel * isz, the
  // keys of "sorted by (data begin, data end, name bytes)". Saturated at
  // 2^64 - 1 for a broadcast view inside a value that would pass it (such a
  // tensor is never read: its element count fails a check first).
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool big_endian = false;  // byteorder "big": each element's bytes reversed on read (5.2)
};

// One entry of the tensor table (docs/pt.md sections 5.3 and 6.1).
struct PtTensorBytes {
  std::string name;   // flattened name, e.g. "model.layers.0.qweight"
  std::string dtype;  // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;  // numel * item size bytes, C order, little-endian
  PtTensorLayout layout;            // where bytes came from (6.4's begin, end, byte offsets)
};

// docs/pt.md 6.4: the file offset of byte k of a tensor's C-order bytes,
// ds + s(k div isz) * isz + (k mod isz) (k = 0 gives begin, also for an
// empty tensor). k must be below numel * isz, except k = 0.
std::uint64_t PtByteOffset(const std::vector<std::uint64_t>& shape, const PtTensorLayout& layout,
                           std::uint64_t k);

// docs/pt.md 5.3: a tensor's numel * isz bytes in C order, little-endian
// (big-endian files byte-swapped per element). The layout must be one this
// reader accepted for the same file bytes; a layout whose last element
// lies outside the file gives an empty vector instead of a read.
std::vector<std::uint8_t> PtTensorCOrderBytes(qd::ByteView file,
                                              const std::vector<std::uint64_t>& shape,
                                              const PtTensorLayout& layout);

// The value table as structured values (docs/pt.md 4.2, 6.2), for readers
// that look inside values, such as the bitsandbytes list layout (section
// 7). Nodes form a graph with the pickle's sharing kept: a list or dict
// reached twice through the memo is one node, so the graph never has more
// nodes than data.pkl built (and the value walk of 6.2 has already refused
// cycles and more than 2^20 visits).
enum class PtValueKind : std::uint8_t {
  kNone,
  kBool,     // integer: 0 or 1 (a bool is never an int, 4.2)
  kInt,      // integer
  kFloat,    // number (binary64, from BINFLOAT)
  kStr,      // text: the UTF-8 bytes
  kTuple,    // items
  kList,     // items
  kDict,     // items: key, value, key, value, ... in insertion order; ordered; attrs
  kSize,     // ints (torch.Size)
  kDtype,    // a dtype token, text: its torch name ("float16", "float32", "int8", ...)
  kToken,    // any other allow-listed global not reduced, text as PtValueEntry renders it
  kStorage,  // dtype, text: the storage key, integer: its numel
  kTensor,   // dtype, shape, layout; bytes through PtTensorCOrderBytes
};

struct PtValueNode {
  PtValueKind kind = PtValueKind::kNone;
  std::int64_t integer = 0;
  double number = 0.0;
  std::string text;
  std::vector<std::uint32_t> items;  // node indices
  std::vector<std::int64_t> ints;
  bool ordered = false;     // kDict: from collections.OrderedDict()
  std::int64_t attrs = -1;  // kDict: the node of its BUILD state, or -1
  std::string dtype;        // kTensor, kStorage: "F32", ..., "BOOL"
  std::vector<std::uint64_t> shape;  // kTensor
  PtTensorLayout layout;             // kTensor
};

// A value table entry: its flattened name and its node.
struct PtValueRoot {
  std::string name;
  std::uint32_t node = 0;
};

struct PtValueGraph {
  std::vector<PtValueNode> nodes;
  std::vector<PtValueRoot> entries;  // the value table in table order
};

// One entry of the value table (docs/pt.md section 6.2), rendered as text:
//   None, True, False, 32, -7, 0.5 (printf %.17g), 'nf4' (single quotes,
//   \\ and \' escaped, other bytes as they are), (40, 30), (1,), (),
//   [1, 2], {'a': 1} (plain dict), OrderedDict({'a': 1}) (ordered dict;
//   attributes shown after the items as " attrs={...}" inside the
//   parentheses), torch.Size([40, 30]), float16 (a dtype token, its name),
//   collections.OrderedDict / torch.FloatStorage (other tokens),
//   tensor(F32, [2, 3]) and storage(F32, '0', 6).
// A rendering longer than 4096 bytes is cut there and ends in "...".
struct PtValueEntry {
  std::string name;
  std::string text;
};

// What a .pt file holds once docs/pt.md section 8 steps 1..7 accept it, for
// step 8 (the readers of the formats a tensor table may hold run on it:
// oracles/bnb_pt_layers.h's ReadPtFile).
struct PtTables {
  std::int64_t pickle_start = 0;       // ds of data.pkl: header-level findings point here (6.4)
  std::vector<PtTensorBytes> tensors;  // the tensor table, in table order
  std::vector<PtValueEntry> values;    // the value table as text, when asked for
  PtValueGraph graph;                  // the value table entries asked for, as structured values
};

// Which value table entries go into PtTables::graph: called with the entry's
// name and whether its value is a list or tuple; null: every entry.
using PtGraphWanted = bool (*)(const std::string& name, bool is_sequence);

// The checks of docs/pt.md section 8 steps 1..7 in order (warnings as met,
// at most one error, last); on accept, *tables filled (cleared first). The
// outcome carries no tensors. An entry of more than materialise_limit
// C-order bytes keeps its bytes empty (read them through the layout:
// PtDecodeRange, PtTensorCOrderBytes).
qd::Outcome ReadPtTables(qd::ByteView file, const std::string& file_name, bool want_values,
                         PtGraphWanted graph_wanted, PtTables* tables,
                         std::uint64_t materialise_limit = UINT64_MAX);

// Section 6.3's decoded output of an accepted file's tensor table: the
// indices of its F32, F16, BF16 and F64 tensors sorted by (begin, end, name
// bytes) of section 6.4 ...
std::vector<std::size_t> PtDecodedOrder(const std::vector<PtTensorBytes>& tensors);
// ... and C-order elements [first, first + count) of such a tensor as
// binary32, each read from the file at its offset (6.4) and byte-swapped
// when big-endian (5.2): a view is decoded a chunk at a time, never whole.
// The layout must be one ReadPtTables accepted for these file bytes.
void PtDecodeRange(qd::ByteView file, const PtTensorBytes& tensor, std::uint64_t first,
                   std::uint64_t count, float* out);

// Section 1.1, Detection: byte 8 (when there is one) is not `{` and the
// file opens with a ZIP local header (50 4B 03 04), a ZIP end record (50 4B
// 05 06, an archive of no entry) or the legacy pickle magic, or has `ustar`
// at offset 257 (section 2.6). Looks at no more.
bool IsPtFile(qd::ByteView file);

// CRC-32 (ISO-HDLC, the zlib.crc32 function), bit by bit from the reflected
// polynomial 0xEDB88320. Exposed for the tests.
std::uint32_t PtCrc32(const std::uint8_t* bytes, std::uint64_t size);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_PT_H_
