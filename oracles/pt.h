// pt.h: the oracle's reader for torch.save files (.pt, .pth, .bin), written
// plainly from docs/pt.md sections 1..6, 8 and 9 (section 7, the
// bitsandbytes list layout, is not part of it).
//
// Nothing in the file is ever imported, called or unpickled: the ZIP
// container is checked field by field and data.pkl is walked opcode by
// opcode over a closed value model (docs/pt.md section 4). Shares no code
// with codecs/; the differential tests compare the two bit for bit.
//
//   std::vector<qd::oracle::PtTensorBytes> table;
//   qd::Outcome o = qd::oracle::ReadPtFile(bytes, "model.pt", &table);
#ifndef QUANTDIFF_ORACLES_PT_H_
#define QUANTDIFF_ORACLES_PT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::oracle {

// One entry of the tensor table (docs/pt.md sections 5.3 and 6.1).
struct PtTensorBytes {
  std::string name;   // flattened name, e.g. "model.layers.0.qweight"
  std::string dtype;  // "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<std::uint64_t> shape;
  std::vector<std::uint8_t> bytes;  // numel * item size bytes, C order, little-endian
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

// Reads a torch.save file: the checks of docs/pt.md section 8 steps 1..7 in
// order (warnings as met, at most one error, last). On accept the outcome's
// tensors are section 6.3's decoded output (F32, F16, BF16, F64 tensors of
// the tensor table to binary32, sorted by (begin, end, name bytes) of
// section 6.4). When tensors is not null it receives the whole tensor table
// (every dtype) in table order, when values is not null the value table in
// table order; both only on accept (they are cleared first).
qd::Outcome ReadPtFile(qd::ByteView file, const std::string& file_name,
                       std::vector<PtTensorBytes>* tensors = nullptr,
                       std::vector<PtValueEntry>* values = nullptr);

// CRC-32 (ISO-HDLC, the zlib.crc32 function), bit by bit from the reflected
// polynomial 0xEDB88320. Exposed for the tests.
std::uint32_t PtCrc32(const std::uint8_t* bytes, std::uint64_t size);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_PT_H_
