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
//   t[2..3]          reserved
//   t[4..7]          generator seed, 32 bits little endian
struct PtFileTail {
  bool raw = false;
  int protocol = 0;  // 0 random, else 2, 4 or 5
  bool copies = false;
  bool allow_big = true;
  int items = 3;  // 1..8
  std::uint32_t seed = 0;
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
  kCount,
};

extern const std::vector<std::string_view> kPtPickleTokens;
extern const std::vector<std::string_view> kPtRecordNames;
extern const std::vector<std::string_view> kPtRecordTexts;
extern const std::vector<std::string_view> kPtPrefixes;

std::uint8_t PtTokenIndex(std::string_view token);
std::uint8_t PtRecordNameIndex(std::string_view name);

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
