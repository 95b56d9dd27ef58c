// gptq_file_input.h: the input format of the gptq_file_diff fuzz target.
//
// An input is   [mutation ops ...][12-byte tail]
// The tail holds the parameters of a valid GPTQ file (format, bits, K, N,
// group_size, g_idx order, scales dtype, bias, a second layer, a dense
// tensor, extreme zeros, bare names, how the config is spelled and which
// sources carry it, tensor order, generator seed); its layers are packed
// with qd::gen::BuildGptqLayer (codec::GptqEncode). The leading bytes are
// ops of 5 bytes each (op, a, b, c, d), applied in input order in two groups:
//   * draft ops edit the tensors before the file is written (drop, retype,
//     resize a dimension, reshape, rename, swap, add P.weight / an unknown
//     sibling / a lone member / a bias / a dense tensor; set I32 words such
//     as qzeros fields at 0 or mask(b), g_idx values out of range, scales to
//     infinities, NaNs, subnormals) and the config sources (set a key to a
//     JSON value, drop a key, splice a token into the text, drop / add /
//     reorder sources);
//   * file ops edit the written file (header or data bytes, truncation,
//     header splices that re-fix the length prefix, bit flips).
// When the tail's raw flag is set (or the input is shorter than the tail)
// the bytes before the tail are [u8 n][n x (u8 name, u16 length, bytes)]
// config sources followed by the safetensors file as it is, so whole
// instances (the registry generator's) reach the readers.
//
//   qd::fuzz::GptqFileTail tail;
//   tail.format = 2;
//   tail.bits = 5;
//   auto input = qd::fuzz::GptqOpWriter().SetWord(qd::fuzz::GptqRole::kQzeros, 0, 0, 1).Finish(tail);
//   qd::fuzz::GptqCase c = qd::fuzz::GptqCaseFromInput(input.data(), input.size());
#ifndef QUANTDIFF_FUZZ_COMMON_GPTQ_FILE_INPUT_H_
#define QUANTDIFF_FUZZ_COMMON_GPTQ_FILE_INPUT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/common/fuzz_support.h"
#include "quantdiff/plain_data.h"

namespace qd::fuzz {

inline constexpr std::size_t kGptqFileTailSize = 12;

// Tail layout (every byte pattern decodes to valid parameters):
//   t[0]  bits 0..3  0xF: raw mode
//         bits 4..5  format, modulo 3: gptq, gptq_v2, gptq_p
//         bits 6..7  scales dtype, modulo 3: F16, BF16, F32
//   t[1]  bits 0..2  bits: continuous {2, 3, 4, 8}[v % 4], planar 2 + v % 7
//         bits 3..4  g_idx, modulo 3: k / gs, a permutation of it, any group
//         bit 5      a bias (dtype of the scales)
//         bit 6      a second layer
//         bit 7      dense tensors beside the layers
//   t[2]  bits 0..2  K / 32 - 1;  bits 3..4  N / 32 - 1
//         bits 5..7  group_size: -1, 32, 128, 1 + t[3], 24, 48, 100, 7
//   t[3]             the custom group_size - 1
//   t[4]  bits 0..1  zeros: random, all smallest, all largest (v1 2^b), random
//         bits 2..3  sources: plain; config.json alone; plain + config.json;
//                    plain + plain (quant_config.json)
//         bit 4      spell keys with aliases (else canonical keys)
//         bit 7      bare names (prefix "", one layer)
//   t[5]  bits 0..1  tensor order: as built, reversed, rotated, shuffled
//   t[6..9]          generator seed, 32 bits little endian
//   t[10..11]        reserved
struct GptqFileTail {
  bool raw = false;
  int format = 0;        // 0 gptq, 1 gptq_v2, 2 gptq_p
  int scales_dtype = 0;  // 0 F16, 1 BF16, 2 F32
  int bits = 4;          // must be allowed for the format (Encode maps it back)
  int g_idx_mode = 0;
  bool bias = false;
  bool second_layer = false;
  bool dense = false;
  int k32 = 2;  // K = 32 * k32, 1..8
  int n32 = 1;  // N = 32 * n32, 1..4
  int group_choice = 1;
  int custom_group = 32;  // 1..256
  int zero_mode = 0;
  int sources = 0;
  bool aliases = false;
  bool bare = false;
  int order = 0;
  std::uint32_t seed = 0;
};

GptqFileTail DecodeGptqFileTail(const std::uint8_t* tail);
std::array<std::uint8_t, kGptqFileTailSize> EncodeGptqFileTail(const GptqFileTail& tail);

// Tensor roles an op names: (role % 6) within layer (role / 6) % layers.
enum class GptqRole : std::uint8_t { kQweight, kQzeros, kScales, kGidx, kBias, kDense, kCount };

enum class GptqOp : std::uint8_t {
  // draft ops: tensors
  kDropTensor,   // a role
  kTensorDtype,  // a role, b dtype (kGptqDtypes); bytes refitted to the element count
  kResizeDim,    // a role, b dimension, c int8 delta (values repeated)
  kReshape,      // a role, b mode: [n], [1, n], [n, 1], [a, b, 1], transposed
  kSetWord,      // a role, b | c << 8 element, d value (kGptqWordValue)
  kSetSpecial,   // a role, b | c << 8 element, d special (kGptqFloatSpecials)
  kSetGidx,      // a layer, b | c << 8 k, d: 0 -1, 1 G, 2 G - 1, 3 INT32_MIN, 4 INT32_MAX, else d - 5
  kAddTensor,    // a what (GptqAdd), b layer
  kRename,       // a role, b variant
  kSwap,         // a, b: two positions in storage order
  // draft ops: config sources
  kCfgSet,       // a source, b key (kGptqConfigKeys), c value (kGptqJsonValues)
  kCfgDrop,      // a source, b key
  kCfgSplice,    // a source, b token (kGptqTokens), c | d << 8 position
  kCfgSources,   // a mode: drop the last, add config.json without quantization_config,
                 // swap the first two, duplicate the first under another name
  // file ops
  kHeaderByte,   // a | b << 8 position in the header text, c value
  kDataByte,     // a | b << 8 position in the data section, c value
  kTruncate,     // a | b << 8 bytes cut from the end (modulo size + 1)
  kHeaderSplice, // a token, b | c << 8 position, d removed (mod 8); re-fixes the prefix
  kFlipBit,      // a | b << 8 | c << 16 | d << 24 bit position (modulo 8 * size)
  kCount,
};

enum class GptqAdd : std::uint8_t {
  kDenseWeight,    // P.weight F16 [N, 4] (GPTQ-102)
  kSibling,        // P.perm I32 [2] (GPTQ-103)
  kLoneMember,     // model.layers.77.mlp.gate_proj.g_idx I32 [4] (GPTQ-101)
  kBias,           // P.bias F32 [N]
  kBiasShort,      // P.bias F32 [N - 1] (GPTQ-105)
  kOrphanBias,     // x.bias F16 [3] without a layer
  kPlainF64,       // a plain F64 tensor
  kCount,
};

extern const std::vector<std::string_view> kGptqDtypes;
extern const std::vector<std::string_view> kGptqConfigKeys;
extern const std::vector<std::string_view> kGptqJsonValues;
extern const std::vector<std::string_view> kGptqTokens;
extern const std::vector<std::string_view> kGptqSourceNames;
// kSetWord's values: 0, 0xffffffff, 0x80000000, 0x7fffffff, 0x11111111,
// 0x88888888, 0x49249249, else d * 0x01010101.
std::uint32_t GptqWordValue(std::uint8_t d);
// kSetSpecial: binary16 / bfloat16 / binary32 patterns by dtype (inf, -inf,
// NaN, -0, smallest subnormal, largest finite, 1, -1).
inline constexpr int kGptqFloatSpecials = 8;

std::uint8_t GptqKeyIndex(std::string_view key);
std::uint8_t GptqJsonValueIndex(std::string_view value);
std::uint8_t GptqTokenIndex(std::string_view token);
std::uint8_t GptqDtypeIndex(std::string_view dtype);
std::uint8_t GptqSourceNameIndex(std::string_view name);

class GptqOpWriter {
 public:
  GptqOpWriter& Op(GptqOp op, std::uint8_t a = 0, std::uint8_t b = 0, std::uint8_t c = 0,
                   std::uint8_t d = 0);
  GptqOpWriter& DropTensor(GptqRole role, int layer = 0);
  GptqOpWriter& SetWord(GptqRole role, int layer, std::uint16_t element, std::uint8_t value);
  GptqOpWriter& SetSpecial(GptqRole role, int layer, std::uint16_t element, std::uint8_t special);
  GptqOpWriter& SetGidx(int layer, std::uint16_t k, std::uint8_t mode);
  GptqOpWriter& AddTensor(GptqAdd what, int layer = 0);
  GptqOpWriter& CfgSet(int source, std::string_view key, std::string_view json_value);
  GptqOpWriter& CfgDrop(int source, std::string_view key);
  GptqOpWriter& CfgSplice(int source, std::string_view token, std::uint16_t position);
  std::vector<std::uint8_t> Finish(const GptqFileTail& tail) const;

 private:
  OpBytes out_;
};

// A raw-mode input holding these sources and this file.
std::vector<std::uint8_t> GptqRawInput(const std::vector<qd::SideFile>& sources,
                                       const std::vector<std::uint8_t>& file);

// The fixed valid files gptq_config_diff reads its config inputs against
// (which: 0 v1 4-bit g32 K64 N32; 1 v2 3-bit g-1 K96 N64 act-order BF16;
// 2 planar 5-bit g48 K64 N32, two layers, F32; 3 v1 8-bit g128 K128 N32
// with a bias).
const std::vector<std::uint8_t>& GptqConfigDiffFile(int which);

struct GptqCase {
  std::vector<std::uint8_t> file;
  std::vector<qd::SideFile> configs;
};

// The file and config sources an input stands for (see the top of this header).
GptqCase GptqCaseFromInput(const std::uint8_t* data, std::size_t size);
// The raw layout alone, [u8 n][n x (u8 name, u16 length, bytes)][file], with
// no tail (what awq_file_diff's raw inputs reuse).
GptqCase GptqRawCase(const std::uint8_t* data, std::size_t size);

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_GPTQ_FILE_INPUT_H_
