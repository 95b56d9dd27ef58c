// ggml_blocks.h: the codecs' decoder and legacy encoders of ggml's block
// types (issue 12; the contract is docs/ggml_blocks.md).
//
// A ggml tensor row is a run of fixed-size blocks; each block holds
// `values` weights in `bytes` bytes. Decoding is exact binary32 arithmetic
// in the operation order of docs/ggml_blocks.md section 3, so every kernel
// gives the same bits (NaNs aside: section 1.3). The encoders reproduce
// ggml's quantize_row_<type>_ref byte for byte for the five legacy types
// (section 4). The oracle (oracles/ggml_blocks.h) carries its own layout
// tables; nothing here is shared with it.
//
//   const qd::codec::GgmlTypeInfo* info = qd::codec::FindGgmlType("q4_K");
//   std::vector<float> out(blocks * info->values);
//   qd::codec::GgmlDecode(info->type, bytes, blocks, out.data());
#ifndef QUANTDIFF_CODECS_GGML_BLOCKS_H_
#define QUANTDIFF_CODECS_GGML_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "codecs/kernels.h"

namespace qd::codec {

enum class GgmlType { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIq4Nl, kMxfp4 };

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // ggml's lower-case name: "q4_0", "q6_K", "iq4_nl", "mxfp4"
  int ggml_id;            // ggml's enum ggml_type value
  int values;             // weights per block
  int bytes;              // bytes per block
  bool legacy_encoder;    // GgmlEncode reproduces ggml's _ref quantizer
};

// Every type this codec reads, in the contract's order.
std::span<const GgmlTypeInfo> GgmlTypes();
// The type named `name` (ggml's spelling, case sensitive), or nullptr.
const GgmlTypeInfo* FindGgmlType(std::string_view name);
const GgmlTypeInfo& GgmlInfo(GgmlType type);

// Decodes `block_count` whole blocks of `type` from `blocks` (block_count *
// bytes bytes) into `out` (block_count * values floats). Total over every
// byte pattern: non-finite and subnormal scales decode as section 3 says.
void GgmlDecode(GgmlType type, const std::uint8_t* blocks, std::size_t block_count, float* out,
                Kernel kernel = BestKernel());

// Encodes `block_count` blocks of `values` finite floats each into `blocks`
// exactly as ggml's quantize_row_<type>_ref does (section 4). False, writing
// nothing, for a type without a legacy encoder. Non-finite inputs are outside
// the contract (ggml's own result is undefined there) but never crash.
bool GgmlEncode(GgmlType type, const float* in, std::size_t block_count, std::uint8_t* blocks);

// Encodes `block_count` blocks of q2_K, q3_K, q4_K, q5_K, q6_K or iq4_nl
// (finite inputs) with covering round-to-nearest grids, every weight within
// section 4.5's bound of its input. Not ggml's bytes (its quantizers search;
// section 4.5 says why quantdiff does not chase them). False, writing
// nothing, for any other type.
bool GgmlEncodeWithinBound(GgmlType type, const float* in, std::size_t block_count, std::uint8_t* blocks);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_GGML_BLOCKS_H_
