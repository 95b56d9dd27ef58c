// bnb.h: the oracle's bitsandbytes reader and reference 4-bit quantizer.
//
// Written from docs/bnb.md (the contract: layers, check order, rule IDs,
// decoding arithmetic), specs/000_0c91ab05e721f99e.txt (BNB-001..BNB-004)
// and the peer vectors' README and TABLES.json. Plain and slow on purpose:
// one function per check group, scalar loops, every binary32 step rounded
// on its own (the library is compiled with -ffp-contract=off).
//
// Finding conventions (on top of safetensors.h's):
//   tensor       the tensor at fault: the state tensor for problems of its
//                JSON, W when a sibling tensor is missing, the sibling for
//                its own dtype / shape / values; empty for problems of the
//                __metadata__ JSON of the 8-bit blockwise layout.
//   byte_offset  8 for header-level facts (a missing tensor, a dtype, a
//                shape, anything in __metadata__); 8 + N + begin for a
//                problem of a quant_state JSON text (the start of the text);
//                8 + N + begin + k for a value at byte k of a tensor's data.
//   block        BNB-104 on absmax / nested_absmax: the index of the value.
//   element      BNB-104 on a quant map or an int8 scale (the row), BNB-106:
//                the index of the value.
#ifndef QUANTDIFF_ORACLES_BNB_H_
#define QUANTDIFF_ORACLES_BNB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::oracle {

// Reads a safetensors file that may hold bitsandbytes layers. The container
// rules run first (CheckContainer); a file without a bitsandbytes layer
// gives exactly what ReadSafetensors gives. Otherwise the layers are checked
// in byte order of their weight name W, each in docs/bnb.md's order, and an
// accepted file decodes to every layer's W plus every F32/F16/BF16/F64
// tensor that belongs to no layer, all sorted by name (byte order).
qd::Outcome ReadBnbFile(qd::ByteView file, const std::string& file_name);

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
