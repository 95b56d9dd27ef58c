// pt_file_input.h: the input format of the pt_file_diff fuzz target.
//
// An input is   [ops, 5 bytes each ...][8-byte tail]
// The tail picks a valid torch.save-like file (qd::gen::PtRandomDraft: the
// pickle protocol, views with contiguous copies, byteorder = big allowed,
// how many root items, the generator seed). Ops (op, a, b, c, d) are applied
// in input order in two groups:
//   * draft ops edit the records before the ZIP is written, so CRCs and
//     sizes stay right unless a file op breaks them: data.pkl bytes by opcode
//     (set a byte of an opcode or its operand, insert a token of
//     kPtPickleTokens before an opcode, delete an opcode, set an integer
//     operand, truncate), records (set a byte, resize, rename, drop, add,
//     swap) and the container style (torch / zipfile, zip64 end records,
//     prefix);
//   * file ops edit the written file through its layout (a field of a local
//     header, a central entry, the end records, a data descriptor; a byte
//     anywhere; truncation; appended bytes; a recomputed CRC).
// The tail can also add a bitsandbytes layer (docs/pt.md 6.4, 7): the
// QuantState list layout flat or nested, the HF or GPT-QModel 4-bit tensors,
// an int8 layer, or a random mix; layer ops, applied before the draft is
// made, edit it as values: replace, delete or insert any item of the list
// (offset, blocksize, dtype tokens, state2 items, shape dims), set bytes of
// a tensor (nibbles, absmax, the JSON state text) or binary32 values, change
// a tensor's dtype, shape or layout, and rename or copy an entry so that a
// second state names the same W.
// When the tail's raw flag is set (or the input is shorter than the tail)
// the bytes before the tail are the file as it is, so whole instances (the
// registry generator's, the peer files) reach the readers.
//
//   qd::fuzz::PtFileTail tail;
//   tail.seed = 7;
//   auto input = qd::fuzz::PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("\x81"), 3).Finish(tail);
//   std::vector<std::uint8_t> file = qd::fuzz::PtFileFromInput(input.data(), input.size());
#ifndef QUANTDIFF_FUZZ_COMMON_PT_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_PT_FILE_INPUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/common/fuzz_support.h"

namespace qd::fuzz {

inline constexpr std::size_t kPtFileTailSize = 8;

// Tail layout (every byte pattern decodes to valid parameters):
//   t[0]  bits 0..3  0xF: raw mode
//         bits 4..5  protocol: random (2 mostly), 2, 4, 5
//         bit 6      each root-level view gets a contiguous copy
//         bit 7      byteorder = big allowed
//   t[1]             root items: 1 + t[1] % 8
//   t[2]  bits 0..2  bitsandbytes layer: 0 none (the files of inputs made
//                    before layers existed), else a PtBnbKind
//         bit 3      list layout: S a tuple
//         bits 4..5  list layout: S[1] a torch.Size, tuple, list (3: Size)
//         bit 6      list layout: no 7th item (the quant_type table)
//         bit 7      list layout: the nested offset a float, not a 0-d tensor
//   t[3]  bits 0..1  W's storage dtype: U8, F16, BF16, F32 (U8 where it does not divide)
//         bit 2      list layout: W of shape [bytes] rather than [bytes, 1]
//         bits 3..4  W's layout: contiguous, transposed, offset slice, strided
//         bits 5..6  dict nesting of the layer's names: 0..3 segments
//         bit 7      list layout: [offset, state2] and state2 tuples
//   t[4..7]          generator seed, 32 bits little endian (the layer's data
//                    comes from a generator of its own seeded from it)
enum class PtBnbKind : std::uint8_t {
  kNone, kListFlat, kListNested, kHf4bit, kGptqModel4bit, kInt8Hf, kInt8GptqModel, kMix,
};
struct PtFileTail {
  bool raw = false;
  int protocol = 0;  // 0 random, else 2, 4 or 5
  bool copies = false;
  bool allow_big = true;
  int items = 3;  // 1..8
  std::uint32_t seed = 0;
  PtBnbKind bnb = PtBnbKind::kNone;
  bool list_tuple = false;
  int shape_as = 0;  // 0 Size, 1 tuple, 2 list
  bool no_table = false;
  bool offset_float = false;
  int storage = 0;   // 0 U8, 1 F16, 2 BF16, 3 F32
  bool w_flat = false;
  int layout = 0;    // gen::PtTensorData::Layout
  int nest = 0;      // 0..3
  bool inner_tuples = false;
};

PtFileTail DecodePtFileTail(const std::uint8_t* tail);
std::array<std::uint8_t, kPtFileTailSize> EncodePtFileTail(const PtFileTail& tail);

enum class PtOp : std::uint8_t {
  // draft ops: data.pkl (k = (a | b << 8) modulo the opcode count)
  kPickleByte,      // opcode k, byte c within it (modulo its length), value d
  kPickleInsert,    // token a (kPtPickleTokens) before opcode (b | c << 8)
  kPickleDelete,    // opcode k with its operand
  kPickleOperand,   // opcode k's operand bytes set to PtWordValue(c, d), little endian
  kPickleTruncate,  // data.pkl cut to (a | b << 8) modulo its size
  // draft ops: records (r = a modulo the record count)
  kRecordByte,      // record r, byte (b | c << 8), value d
  kRecordResize,    // record r, int8 b more or fewer bytes (value c)
  kRecordRename,    // record r renamed kPtRecordNames[b]
  kRecordDrop,      // record r
  kRecordAdd,       // record kPtRecordNames[a] with text kPtRecordTexts[b] at position c
  kRecordSwap,      // records a and b
  kStyle,           // a bit 0 torch style, bit 1 zip64 end records, bit 2 prefix kPtPrefixes[b]
  // file ops (e = a modulo the entry count)
  kLocalField,      // entry e, field b of kPtLocalFields, value PtFieldValue(old, c, d)
  kCentralField,    // entry e, field b of kPtCentralFields
  kEndField,        // b: field of the end record / zip64 record / locator (kPtEndFields)
  kDescriptor,      // entry e, field b % 4 (signature, CRC, sizes) of its data descriptor
  kFileByte,        // position (a | b << 8 | c << 16) modulo the size, value d
  kTruncate,        // (a | b << 8) bytes cut from the end (modulo size + 1)
  kAppend,          // a % 64 bytes of value d
  kFixCrc,          // entry e's CRC recomputed from its data, everywhere it is written
  // layer ops (the tail's bitsandbytes layer, before the draft is made; no-ops
  // without one). Nodes are the layer's values in depth-first order (each
  // entry's value, then its items: S, S[0], S[1], S[1][0], ...), v = a value
  // made from (kind, x, y) (PtBnbValue); a tensor index counts tensors the same way.
  kBnbValue,        // node a replaced by v(b, c, d)
  kBnbDelete,       // node a removed from its list / tuple / Size / dict (an entry's value: the entry)
  kBnbInsert,       // v(b, c, 0) inserted at d modulo (items + 1) into node a, or the sequence holding it
  kBnbTensorByte,   // tensor a, byte (b | c << 8) modulo its length, value d
  kBnbTensorFloat,  // tensor a, element (b | c << 8) set to kPtBnbFloats[d] (F32 / F64 / F16 / BF16)
  kBnbTensorShape,  // tensor a: b % 6: one element more, one fewer, dtype kPtDtypeCodes[c], layout c % 4, rank 1, [1, n]
  kBnbRename,       // entry a named kPtBnbNames[b] (W / M spelled out); c bit 0: a copy beside it
  kCount,
};

// How a layer op makes a value from (kind, x, y).
enum class PtBnbValue : std::uint8_t {
  kNone, kTrue, kFalse,
  kInt,        // x | y << 8
  kNegative,   // -(1 + x)
  kPower,      // 2^(x % 63)
  kFloat,      // kPtBnbFloats[x]
  kText,       // kPtBnbTexts[x]
  kToken,      // a torch global: kPtBnbTokens[x] (the ten dtypes, storage classes, Size)
  kEmptyList, kEmptyTuple,
  kSize,       // torch.Size([x, y])
  kDict,       // {}
  kScalar,     // a 0-d F32 tensor of kPtBnbFloats[x]
  kZeros,      // a rank-1 tensor of dtype kPtDtypeCodes[x], y elements, zero bytes
  kCopy,       // a copy of node (x | y << 8), as it was before this op
  kCount,
};

extern const std::vector<std::string_view> kPtPickleTokens;
extern const std::vector<std::string_view> kPtRecordNames;
extern const std::vector<std::string_view> kPtRecordTexts;
extern const std::vector<std::string_view> kPtPrefixes;
extern const std::vector<double> kPtBnbFloats;
extern const std::vector<std::string_view> kPtBnbTexts;
extern const std::vector<std::string_view> kPtBnbTokens;
extern const std::vector<std::string_view> kPtDtypeCodes;
// Entry names for kBnbRename: "W" and "M" stand for the layer's weight and module.
extern const std::vector<std::string_view> kPtBnbNames;

std::uint8_t PtTokenIndex(std::string_view token);
std::uint8_t PtRecordNameIndex(std::string_view name);
std::uint8_t PtBnbFloatIndex(double value);  // bitwise (NaN found)
std::uint8_t PtBnbTextIndex(std::string_view text);
std::uint8_t PtBnbTokenIndex(std::string_view name);
std::uint8_t PtBnbNameIndex(std::string_view name);
// The node index of the item reached from entry `entry` of the tail's layer
// through item indices `path` ({1, 3}: entry 1's value's item 3, S[3]), or
// 255 when there is none; the tensor index of that node when it is a tensor
// (PtBnbTensor). For writing seeds; ops are applied in order, so an index
// holds for the layer before the first op that changes its shape.
std::uint8_t PtBnbNode(const PtFileTail& tail, std::size_t entry, const std::vector<std::size_t>& path = {});
std::uint8_t PtBnbTensor(const PtFileTail& tail, std::size_t entry, const std::vector<std::size_t>& path = {});

class PtOpWriter {
 public:
  PtOpWriter& Op(PtOp op, std::uint8_t a = 0, std::uint8_t b = 0, std::uint8_t c = 0, std::uint8_t d = 0);
  PtOpWriter& InsertToken(std::uint8_t token, std::uint16_t before_opcode);
  std::vector<std::uint8_t> Finish(const PtFileTail& tail) const;

 private:
  OpBytes out_;
};

// A raw-mode input holding this file.
std::vector<std::uint8_t> PtRawInput(const std::vector<std::uint8_t>& file);

// The file an input stands for (see the top of this header).
std::vector<std::uint8_t> PtFileFromInput(const std::uint8_t* data, std::size_t size);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_PT_FILE_INPUT_H_
