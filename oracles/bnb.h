// bnb.h: the oracle's bitsandbytes reader and reference 4-bit quantizer.
//
// Written from docs/bnb.md (the contract: layers, check order, rule IDs,
// decoding arithmetic), specs/000_0c91ab05e721f99e.txt (BNB-001..BNB-004)
// and the peer vectors' README and TABLES.json. Plain and slow on purpose:
// one function per check group, scalar loops, every binary32 step rounded
// on its own (the library is compiled with -ffp-contract=off).
//
// The same checks read .pt files (docs/pt.md 6.4 and 7): every check runs
// over a BnbTable, which a safetensors container or a .pt file's tensor and
// value tables fill (see below). This reader knows no .pt value model:
// oracles/bnb_pt_layers.h fills the table from a .pt file and maps its
// QuantState lists.
//
// Finding conventions (on top of safetensors.h's):
//   tensor       the tensor at fault: the state tensor for problems of its
//                JSON, W when a sibling tensor is missing, the sibling for
//                its own dtype / shape / values; empty for problems of the
//                __metadata__ JSON of the 8-bit blockwise layout. A .pt list
//                layout (docs/pt.md 7.4): W.quant_state for the list, its
//                pieces W.quant_state[0], [6], [4][1][0], [4][1][1].
//   byte_offset  header-level facts (a missing tensor, a dtype, a shape,
//                anything in __metadata__ or in a list state): 8 in a
//                safetensors file, ds of data.pkl in a .pt file. A value at
//                byte k of a tensor's bytes: 8 + N + begin + k, or in a .pt
//                file ds + s(k div isz) * isz + (k mod isz) of its storage
//                record; k = 0 (begin) for a problem of a quant_state JSON
//                text.
//   block        BNB-104 on absmax / nested_absmax: the index of the value.
//   element      BNB-104 on a quant map or an int8 scale (the row), BNB-106:
//                the index of the value.
#ifndef QUANTDIFF_ORACLES_BNB_H_
#define QUANTDIFF_ORACLES_BNB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oracles/merged_table.h"
#include "oracles/safetensors.h"
#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// Reads a safetensors file that may hold bitsandbytes layers. The container
// rules run first (CheckContainer); a file without a bitsandbytes layer
// gives exactly what ReadSafetensors gives. Otherwise the layers are checked
// in byte order of their weight name W, each in docs/bnb.md's order, and an
// accepted file decodes to every layer's W plus every F32/F16/BF16/F64
// tensor that belongs to no layer, all sorted by name (byte order).
qd::Outcome ReadBnbFile(qd::ByteView file, const std::string& file_name);

// The same read, handing the decoded tensors to SINK (quantdiff/tensor_sink.h)
// instead of returning them: every check first, then, for an accepted file,
// the plan (sorted by name, as above), then each tensor in that order,
// kChunkValues values (whole blocks) or whole int8 rows at a time. Same
// findings and verdict as ReadBnbFile; the outcome's tensors are empty.
qd::Outcome StreamBnbFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink);

// docs/bnb.md "Detection": the container accepts the file and it has at
// least one layer of the "Layers" table, whatever its checks would say. A
// .pt file's layers are the pt format's (docs/pt.md 6.4), not detected here.
bool IsBnbFile(const ClaimInput& input);

// ---------------------------------------------------------------------------
// The tensor table the bitsandbytes checks run over. A safetensors container
// (BnbTableFromContainer) and an accepted .pt file's tensor and value tables
// (oracles/bnb_pt_layers.h, docs/pt.md 6.4 and 7) both feed it; the checks of
// docs/bnb.md exist once and see only this.

// One tensor: a table entry, or a tensor inside a list-layout value.
struct BnbTensor {
  std::string name;  // the table name, or a piece name such as "w.quant_state[0]"
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t element_count = 0;  // product of shape (1 for rank 0)
  std::uint64_t byte_length = 0;    // "the data is exactly L bytes" compares this
  // Ordering keys: "sorted by (data begin, data end, name bytes)" and "in
  // storage order, the tensors taken by data offset" (docs/pt.md 6.4); in a
  // model directory's merged table the shard rank comes first
  // (docs/model_dir.md 4; 0 in a single file).
  std::size_t shard = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  // The byte_length C-order little-endian bytes. The checks call it only
  // after the dtype and element count are checked, so a tensor inside a
  // value (not bounded by docs/pt.md section 3) is materialised only once it
  // is known to be small.
  std::function<const std::uint8_t*()> bytes;
  // The finding offset of byte k of those bytes: 8 + N + begin + k in a
  // safetensors file, ds + s(k div isz) * isz + (k mod isz) in a .pt file.
  std::function<std::int64_t(std::uint64_t)> byte_offset;
};

// A value table entry `W.quant_state` whose value is a list or tuple
// (docs/pt.md 7.2): a list-layout 4-bit layer of W.
struct BnbListState {
  std::string w;
  std::uint32_t node = 0;  // the list's id for BnbTable::map_list
};

// docs/pt.md 7.4 step 2 for one list: the QuantState it maps onto (7.3's
// table), the list-only facts step 7 checks, and its pieces; or the first
// BNB-101 (field, offset, message; the pieces met until then are kept).
struct BnbListMapping {
  bool refused = false;
  std::string field;
  std::int64_t offset = 0;
  std::string message;
  std::string quant_type;
  std::uint64_t blocksize = 0;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  bool nested = false;                             // S[4] is not None
  std::optional<double> nested_offset;             // nested: S[4][0]
  std::optional<std::uint64_t> nested_blocksize;   // nested, 7-item state2
  std::optional<std::string> nested_dtype;         // nested, 7-item state2
  bool short_state2 = false;      // the docstring's 6-item state2: it has no code
  bool nested_of_nested = false;  // nested2 True, or offset2 / state2b not None
  // The tensors inside the list, named W.quant_state[0], [6], [4][0],
  // [4][1][0], [4][1][1]; null when absent.
  std::unique_ptr<BnbTensor> absmax, quant_map, offset_tensor, nested_absmax, nested_quant_map;
};

struct BnbTable {
  // byte_offset of header-level findings: 8 in a safetensors file, ds of
  // data.pkl in a .pt file (docs/pt.md 6.4).
  std::int64_t header_offset = 8;
  // safetensors __metadata__ (the 8-bit blockwise layout's key); a .pt file
  // has none.
  bool has_metadata = false;
  std::vector<std::pair<std::string, std::string>> metadata;
  // Sorted by (shard, begin, end, name bytes).
  std::vector<BnbTensor> tensors;
  // The list layout (a .pt file only): the states, and how the container's
  // side maps one (given its id and its name W.quant_state).
  std::vector<BnbListState> lists;
  std::function<BnbListMapping(std::uint32_t node, const std::string& list_name)> map_list;
};

// The table of an accepted safetensors container (CheckContainer passed).
// The tensors point into file.
BnbTable BnbTableFromContainer(qd::ByteView file, Container container);
// The table of a model directory's merged shards (docs/model_dir.md 4): each
// tensor's bytes and byte offsets are its shard's. The merged table is
// taken over (its names and shapes move: the records are held once, issue
// 9 section 3); pass a copy to keep it.
BnbTable BnbTableFromMerged(MergedTable merged);

// Detection over a table: at least one layer of the "Layers" table or a
// list-layout state (the table of a .pt file or of a model directory's
// merged shards, docs/model_dir.md 4).
bool HasBnbLayer(const BnbTable& table);

// Runs docs/bnb.md (and docs/pt.md 7.4 for list states) over a table.
// Returns false, with nothing appended, when the table holds no
// bitsandbytes layer. Otherwise appends the findings to outcome (the layers
// in byte order of W, each in its check order; the first error sets
// refused and ends the read) and, on accept, the decoded output: every
// layer's W and every F32/F16/BF16/F64 table tensor of no layer, sorted by
// name bytes. Returns true.
bool ReadBnbTable(const BnbTable& table, const std::string& file_name, qd::Outcome* outcome);
// ReadBnbTable handing the decoded output to SINK chunk by chunk (planned
// once, every check having passed) instead of appending it to
// outcome->tensors: the stream a .pt file's bitsandbytes layers can use too.
bool StreamBnbTable(const BnbTable& table, const std::string& file_name, qd::Outcome* outcome,
                    qd::TensorSink& sink);

// The reference 4-bit quantizer: bitsandbytes' default (pure torch) backend
// quantize_4bit, as the peer vectors record it.
//   quant_type  "nf4" or "fp4" (else BNB-001, field quant_type)
//   blocksize   32, 64, ..., 4096 (else BNB-001, field blocksize)
//   dtype       "float16", "bfloat16" or "float32" (else BNB-103); the
//               input values are already in that dtype, widened to binary32
//   input       n finite values (a non-finite one: BNB-104, field input,
//               element = its index)
// Outputs ceil(n / 2) packed bytes (element 2j in the high nibble of byte j;
// an odd n pads the last low nibble with the code of 0.0) and ceil(n /
// blocksize) binary32 absmax values (no nested statistics). Returns false and
// fills *error (rule, field, element, message) when an argument is refused.
bool QuantizeBnb4bit(const std::string& quant_type, int blocksize, const std::string& dtype,
                     const float* input, std::uint64_t n, std::vector<std::uint8_t>* packed,
                     std::vector<float>* absmax, qd::Finding* error);

// get_4bit_type(quant_type) as binary32, indexed by the 4-bit code (FP4 code
// 8 is +0.0). False for any other quant_type.
bool Bnb4bitTable(const std::string& quant_type, float table[16]);

// The default backend's quantization bounds: the 15 midpoints
// fl(fl(sorted[i] + sorted[i + 1]) / 2) of the table sorted ascending, and
// the code at each sorted position (a stable argsort). False for any other
// quant_type.
bool Bnb4bitBounds(const std::string& quant_type, float bounds[15], int sorted_codes[16]);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_BNB_H_
