// rbq_file_input.h: the input format of the rbq_file_diff fuzz target.
//
// An input is   [mutation ops ...][8-byte tail]
// The tail holds the parameters of a valid Q4B32/Q8B32 file, which is built
// with qd::gen::BuildRbqFile; the leading bytes are then read as a list of
// mutation ops applied to that file (overwrite a header or data byte, set a
// block scale, truncate, append, rewrite the length prefix, splice or
// replace a token in the header text and re-fix the prefix, ...). An input
// shorter than the tail, or whose tail has the raw flag, is used as it is
// (without the tail when the flag is set) so whole files reach the readers.
//
// make_seeds.cc writes inputs in this format with RbqOpWriter:
//
//   qd::fuzz::RbqOpWriter ops;
//   ops.ScaleSpecial(/*block=*/3, qd::fuzz::kScaleSpecials[0]);
//   std::vector<std::uint8_t> input = ops.Finish(tail);
//   std::vector<std::uint8_t> file = qd::fuzz::RbqFileFromInput(input.data(), input.size());
#ifndef QUANTDIFF_FUZZ_COMMON_RBQ_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_RBQ_FILE_INPUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/common/fuzz_support.h"

namespace qd::fuzz {

inline constexpr std::size_t kRbqFileTailSize = 8;

// Tail layout (every byte pattern decodes to valid parameters):
//   t[0] bit 0      bits: 0 -> 4 (Q4B32), 1 -> 8 (Q8B32)
//        bit 1      with_norm (a one-dimensional F32 tensor beside the blocks)
//        bits 2..3  tensor_count - 1, taken modulo 3 (1..3 block tensors)
//        bits 4..7  0xF: raw mode, the bytes before the tail are the file
//   t[1] bits 0..2  rows - 1 (1..8); bits 3..4 columns / 32 - 1 (1..4)
//   t[2]            magnitude exponent: t[2] % 56 - 40 (-40..15)
//   t[3..7]         generator seed, 40 bits little endian
struct RbqFileTail {
  bool raw = false;
  int bits = 4;
  int rows = 1;
  int blocks_per_row = 1;
  int tensor_count = 1;
  bool with_norm = false;
  int magnitude_exponent = 0;
  std::uint64_t seed = 0;
};

RbqFileTail DecodeRbqFileTail(const std::uint8_t* tail);
std::array<std::uint8_t, kRbqFileTailSize> EncodeRbqFileTail(const RbqFileTail& tail);

// Mutation ops; the op byte is taken modulo kCount, arguments follow it.
enum class RbqOp : std::uint8_t {
  kHeaderByte,    // u16 position in the header text, u8 value
  kDataByte,      // u16 position in the data section, u8 value
  kScaleRaw,      // u16 block index (over all block tensors), u16 scale bits
  kScaleSpecial,  // u16 block index, u8 index into kScaleSpecials
  kTruncate,      // u16 count of bytes cut from the end (modulo size + 1)
  kAppend,        // u8 count - 1 (modulo 64), u8 value
  kLengthPrefix,  // u8 mode: 0 add int8 delta (u8), 1 special (u8 index), 2 raw u64
  kSplice,        // u8 token, u16 position, u8 bytes removed (modulo 8); re-fixes N
  kReplace,       // u8 anchor, u8 occurrence, u8 token; re-fixes N
  kFlipBit,       // u32 bit position (modulo 8 * size)
  kRepad,         // u8 mode: pad the header to a multiple of 8; re-fixes N
  kCount,
};

// Scale bits worth trying: infinities, NaNs, subnormals, zeros, extremes.
inline constexpr std::uint16_t kScaleSpecials[] = {
    0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x7FFF, 0x0001, 0x8001, 0x03FF,
    0x0400, 0x8000, 0x0000, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00,
};
// Strings kSplice inserts and kReplace writes.
extern const std::vector<std::string_view> kRbqTokens;
// Strings kReplace looks for in the header text.
extern const std::vector<std::string_view> kRbqAnchors;
// Index of a string in kRbqTokens / kRbqAnchors (for seeds); aborts if absent.
std::uint8_t RbqTokenIndex(std::string_view token);
std::uint8_t RbqAnchorIndex(std::string_view anchor);

// Builds a seed input op by op.
class RbqOpWriter {
 public:
  RbqOpWriter& HeaderByte(std::uint16_t position, std::uint8_t value);
  RbqOpWriter& DataByte(std::uint16_t position, std::uint8_t value);
  RbqOpWriter& ScaleRaw(std::uint16_t block, std::uint16_t scale);
  RbqOpWriter& ScaleSpecial(std::uint16_t block, std::uint16_t special);  // a kScaleSpecials value
  RbqOpWriter& Truncate(std::uint16_t count);
  RbqOpWriter& Append(std::uint8_t count, std::uint8_t value);  // count 1..64
  RbqOpWriter& LengthDelta(std::int8_t delta);
  RbqOpWriter& LengthRaw(std::uint64_t value);
  RbqOpWriter& Splice(std::string_view token, std::uint16_t position, std::uint8_t removed);
  RbqOpWriter& Replace(std::string_view anchor, std::uint8_t occurrence, std::string_view token);
  RbqOpWriter& FlipBit(std::uint32_t bit);
  RbqOpWriter& Repad(std::uint8_t mode);
  // The ops followed by the encoded tail.
  std::vector<std::uint8_t> Finish(const RbqFileTail& tail) const;

 private:
  void Op(RbqOp op) { out_.U8(static_cast<std::uint8_t>(op)); }
  void U8(std::uint8_t v) { out_.U8(v); }
  void U16(std::uint16_t v) { out_.U16(v); }
  void U32(std::uint32_t v) { out_.U32(v); }
  OpBytes out_;
};

// The file an input stands for (see the top of this header).
std::vector<std::uint8_t> RbqFileFromInput(const std::uint8_t* data, std::size_t size);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_RBQ_FILE_INPUT_H_
