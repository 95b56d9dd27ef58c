// pt_file_diff: a structure-aware differential target for torch .pt / .bin
// files (docs/pt.md).
//
// The input's last 8 bytes pick a valid file written by the generator's
// torch.save-like writer (qd::gen::PtRandomDraft: protocol, views and their
// contiguous copies, byteorder, root items, seed; see
// fuzz/common/pt_file_input.h), optionally with a bitsandbytes layer (the
// QuantState list layout of docs/pt.md 7, HF / GPT-QModel 4-bit or int8
// tensors) whose items, tensor bytes, values, dtypes, shapes, layouts and
// names layer ops edit first; the leading bytes are 5-byte ops that edit
// data.pkl by opcode (bytes, operands, inserted opcodes and globals of
// kPtPickleTokens, deletions, truncation), the records (bytes, sizes, names,
// order, the container style) and then the written ZIP through its layout
// (local, central, end-record and descriptor fields, bytes, truncation,
// appended bytes, recomputed CRCs). In raw mode the input is the file as it
// is. Then:
//   1. the registry's "pt" codec_read and oracle_read must agree
//      (qd::harness::Compare: verdict, every finding field but the message,
//      every decoded tensor bit for bit);
//   2. codec_check (ReadPt's findings alone) must report what codec_read
//      reports.
//
// Signature on divergence: DIFF:pt_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "fuzz/common/pt_file_input.h"
#include "harness/differ.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("pt");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:pt_file:setup:no-format", "");
    return f;
  }();
  const std::vector<std::uint8_t> bytes = qd::fuzz::PtFileFromInput(data, size);
  const qd::ByteView file{bytes.data(), bytes.size()};
  const std::string name = "input.pt";
  qd::fuzz::DiffThroughRegistry(*format, "pt_file", file, name, {});
  return 0;
}
