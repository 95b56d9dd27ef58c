// bnb_file_input.h: the input format of the bnb_file_diff fuzz target.
//
// An input is   [mutation ops ...][12-byte tail]
// The tail holds the parameters of one valid bitsandbytes layer (kind,
// quant_type, blocksize, nested statistics, restored dtype, quant_storage,
// shape, names, tensor order, generator seed); the layer is quantized with
// the codec's encoders (codecs/bnb.h) from qd::gen::RandomWeights. The
// leading bytes are then read as ops in two groups, applied in input order
// within each group:
//   * draft ops edit the layer before it is written: the JSON quant_state
//     (drop a key, set a key to a JSON value, nudge a number, edit the shape
//     array, splice a token into its text), the tensors (drop, retype,
//     resize by +-k elements, reshape, rename, swap two in storage order,
//     add a sibling or a competing state) and their values (absmax /
//     nested_absmax / quant_map / SCB floats set to inf, NaN, -0,
//     subnormals, extremes; packed or code bytes overwritten);
//   * file ops edit the written file (header or data bytes, the length
//     prefix, truncation, header splices that re-fix the prefix, bit flips).
// An input shorter than the tail, or whose tail has the raw flag, is used as
// it is (without the tail when the flag is set), so whole files (the
// registry generator's violations) reach the readers.
//
// make_seeds.cc writes inputs in this format with BnbOpWriter:
//
//   qd::fuzz::BnbFileTail tail;
//   tail.kind = qd::fuzz::BnbFileKind::k4bitHf;
//   std::vector<std::uint8_t> input =
//       qd::fuzz::BnbOpWriter().SetFloat(qd::fuzz::BnbRole::kAbsmax, 0, INFINITY).Finish(tail);
//   std::vector<std::uint8_t> file = qd::fuzz::BnbFileFromInput(input.data(), input.size());
#ifndef QUANTDIFF_FUZZ_COMMON_BNB_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_BNB_FILE_INPUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/common/fuzz_support.h"

namespace qd::fuzz {

inline constexpr std::size_t kBnbFileTailSize = 12;

enum class BnbFileKind : std::uint8_t { k4bitHf, k4bitGptq, kBlockwise8, kInt8Hf, kInt8Gptq };

// Tail layout (every byte pattern decodes to valid parameters):
//   t[0]  bits 0..2  kind, modulo 5 (BnbFileKind)
//         bit 3      quant_type fp4 (else nf4)
//         bit 4      nested statistics (4-bit, blockwise8)
//         bits 5..6  dtype, modulo 3: float16, bfloat16, float32
//         bit 7      a plain floating tensor beside the layer
//   t[1]  bits 0..2  blocksize 32 << k; bits 3..5 nested_blocksize 32 << k
//         bits 6..7  quant_storage of the packed 4-bit tensor: U8, F16, BF16,
//                    F32 (U8 when the byte count does not divide)
//   t[2]  bits 0..1  rank - 1, modulo 3 (int8 layers: always rank 2)
//         bits 2..3  packed tensor shape, modulo 3: [k, 1] (bnb's), [1, k]
//                    (the compatibility transpose), [k]
//         bits 4..5  tensor order, modulo 3: as built, reversed, rotated
//         bits 6..7  blockwise8 "shape" key, modulo 3: the shape, null, absent
//   t[3], t[4]       dimensions: rank 1 n = 1 + (t[3] | (t[4] & 63) << 8);
//                    rank 2 [1 + t[3] % 64, 1 + t[4]];
//                    rank 3 [1 + t[3] % 4, 1 + (t[3] >> 2) % 16, 1 + t[4]]
//   t[5]             weight magnitude 2^(t[5] % 48 - 30)
//   t[6]  bits 0..3  0xF: raw mode, the bytes before the tail are the file
//         bit 4      first dimension 0 (an empty layer)
//         bits 5..6  4-bit quant_map, modulo 3: the table, absent, the other
//                    table (BNB-106); blockwise8: always the stored map
//         bit 7      int8 HF: a weight_format tensor
//   t[7]  bits 0..1  module name: "model.layers.3.mlp.down_proj", "" (bare
//                    "weight"), "lm_head", "a.weight"
//   t[8..11]         generator seed, 32 bits little endian
struct BnbFileTail {
  bool raw = false;
  BnbFileKind kind = BnbFileKind::k4bitHf;
  bool fp4 = false;
  bool nested = false;
  int dtype = 2;  // 0 float16, 1 bfloat16, 2 float32
  bool extra_tensor = false;
  int blocksize_log2 = 6;         // 5..12
  int nested_blocksize_log2 = 8;  // 5..12
  int storage = 0;                // 0 U8, 1 F16, 2 BF16, 3 F32
  int rank = 2;                   // 1..3
  int packed_layout = 0;          // 0 [k, 1], 1 [1, k], 2 [k]
  int order = 0;                  // 0 as built, 1 reversed, 2 rotated
  int shape_key = 0;              // blockwise8: 0 shape, 1 null, 2 absent
  std::uint8_t dim_a = 0, dim_b = 0;
  int magnitude_exponent = 0;  // -30..17
  bool zero_dim = false;
  int quant_map = 0;  // 0 table, 1 absent, 2 other table
  bool weight_format = true;
  int module = 0;  // 0..3
  std::uint32_t seed = 0;
};

BnbFileTail DecodeBnbFileTail(const std::uint8_t* tail);
std::array<std::uint8_t, kBnbFileTailSize> EncodeBnbFileTail(const BnbFileTail& tail);

// The tensors an op can name. A role whose tensor the layer does not have
// makes the op a no-op.
enum class BnbRole : std::uint8_t {
  kWeight,          // W: packed 4-bit bytes, 8-bit codes or int8 weight
  kAbsmax,          // W.absmax / M.weight_absmax
  kQuantMap,        // W.quant_map / M.weight_quant_map
  kNestedAbsmax,
  kNestedQuantMap,
  kState,           // the 4-bit quant_state tensor
  kScale,           // int8: M.SCB / M.weight_scb
  kWeightFormat,    // int8 HF: M.weight_format
  kExtra,           // the plain floating tensor
  kCount,
};

// Ops; the op byte is taken modulo kCount, arguments follow it.
enum class BnbOp : std::uint8_t {
  // draft ops: the JSON state (4-bit state tensor or blockwise8 metadata)
  kDropKey,       // u8 key (kBnbStateKeys)
  kSetKey,        // u8 key, u8 value (kBnbJsonValues, parsed as JSON)
  kNumberDelta,   // u8 key, i8 delta added to an integer value
  kShapeEdit,     // u8 mode (set, append, remove, halve+double), u8 index, u8 value
  kStateSplice,   // u8 token (kBnbTokens), u16 position, u8 bytes removed (mod 8)
  // draft ops: tensors
  kDropTensor,    // u8 role
  kTensorDtype,   // u8 role, u8 dtype (kBnbDtypes), u8 bit 0: refit the shape to the bytes
  kResize,        // u8 role, i8 delta in elements (shape refitted)
  kTensorShape,   // u8 role, u8 mode: [1,k], [k,1], [k], [], [k/2,2], [k,1,1]
  kSetFloat,      // u8 role, u16 element, u8 special (kBnbFloatSpecials)
  kSetByte,       // u8 role, u16 position, u8 value
  kAddTensor,     // u8 what (see bnb_file_input.cc)
  kRename,        // u8 role, u8 variant (suffix appended, or the HF T replaced)
  kSwap,          // u8, u8: two positions in storage order
  // file ops
  kHeaderByte,    // u16 position in the header text, u8 value
  kDataByte,      // u16 position in the data section, u8 value
  kTruncate,      // u16 count of bytes cut from the end (modulo size + 1)
  kLengthPrefix,  // u8 mode: 0 add int8 delta (u8), 1 raw u64
  kHeaderSplice,  // u8 token, u16 position, u8 removed (mod 8); re-fixes N
  kFlipBit,       // u32 bit position (modulo 8 * size)
  kCount,
};

// Keys kDropKey / kSetKey / kNumberDelta name.
extern const std::vector<std::string_view> kBnbStateKeys;
// JSON texts kSetKey writes (each parses as JSON).
extern const std::vector<std::string_view> kBnbJsonValues;
// Strings kStateSplice and kHeaderSplice insert.
extern const std::vector<std::string_view> kBnbTokens;
// Tensor dtypes kTensorDtype writes.
extern const std::vector<std::string_view> kBnbDtypes;
// binary32 bit patterns kSetFloat writes.
extern const std::vector<std::uint32_t> kBnbFloatSpecials;

// Indexes into the lists above (for seeds); abort if absent.
std::uint8_t BnbKeyIndex(std::string_view key);
std::uint8_t BnbJsonValueIndex(std::string_view value);
std::uint8_t BnbTokenIndex(std::string_view token);
std::uint8_t BnbDtypeIndex(std::string_view dtype);
std::uint8_t BnbFloatSpecialIndex(std::uint32_t bits);

// kAddTensor's choices.
enum class BnbAdd : std::uint8_t {
  kSecondHfState,    // W.quant_state.bitsandbytes__<other type>, same JSON
  kGptqState,        // M.weight_quant_state for the same W, same JSON
  kScb,              // M.SCB, F32 [first dimension of W]
  kNestedAbsmax,     // F32 [1]
  kNestedQuantMap,   // F32 [256], the dynamic map
  kQuantMap,         // F32 [16] table (4-bit) or [256] map
  kWeightFormat,     // U8 [] 0
  kBlockwise8Key,    // __metadata__ bnb_blockwise8_quant_state
  kOrphanState,      // ghost.quant_state.bitsandbytes__nf4 (no ghost tensor)
  kPlainF16,         // a plain F16 tensor
  kPlainBF16,        // a plain BF16 tensor
  kPlainF64,         // a plain F64 tensor
  kCount,
};

// Builds a seed input op by op.
class BnbOpWriter {
 public:
  BnbOpWriter& DropKey(std::string_view key);
  BnbOpWriter& SetKey(std::string_view key, std::string_view json_value);
  BnbOpWriter& NumberDelta(std::string_view key, std::int8_t delta);
  BnbOpWriter& ShapeEdit(std::uint8_t mode, std::uint8_t index, std::uint8_t value);
  BnbOpWriter& StateSplice(std::string_view token, std::uint16_t position, std::uint8_t removed);
  BnbOpWriter& DropTensor(BnbRole role);
  BnbOpWriter& TensorDtype(BnbRole role, std::string_view dtype, bool refit);
  BnbOpWriter& Resize(BnbRole role, std::int8_t delta);
  BnbOpWriter& TensorShape(BnbRole role, std::uint8_t mode);
  BnbOpWriter& SetFloat(BnbRole role, std::uint16_t element, std::uint32_t special_bits);
  BnbOpWriter& SetByte(BnbRole role, std::uint16_t position, std::uint8_t value);
  BnbOpWriter& AddTensor(BnbAdd what);
  BnbOpWriter& Rename(BnbRole role, std::uint8_t variant);
  BnbOpWriter& Swap(std::uint8_t a, std::uint8_t b);
  BnbOpWriter& HeaderByte(std::uint16_t position, std::uint8_t value);
  BnbOpWriter& DataByte(std::uint16_t position, std::uint8_t value);
  BnbOpWriter& Truncate(std::uint16_t count);
  BnbOpWriter& LengthDelta(std::int8_t delta);
  BnbOpWriter& HeaderSplice(std::string_view token, std::uint16_t position, std::uint8_t removed);
  BnbOpWriter& FlipBit(std::uint32_t bit);
  // The ops followed by the encoded tail.
  std::vector<std::uint8_t> Finish(const BnbFileTail& tail) const;

 private:
  void Op(BnbOp op) { out_.U8(static_cast<std::uint8_t>(op)); }
  void U8(std::uint8_t v) { out_.U8(v); }
  void U16(std::uint16_t v) { out_.U16(v); }
  void U32(std::uint32_t v) { out_.U32(v); }
  OpBytes out_;
};

// The file an input stands for (see the top of this header).
std::vector<std::uint8_t> BnbFileFromInput(const std::uint8_t* data, std::size_t size);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_BNB_FILE_INPUT_H_
