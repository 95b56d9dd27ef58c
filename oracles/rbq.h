// rbq.h: the oracle's reader, decoder, quantizer and matrix vector product
// for the Q4B32 / Q8B32 ("RBQ", rabbit-infer) block format.
//
// Written from the format text specs/002_a5b0561d4b728a5e.txt and the rule
// catalogue oracles/rules.json (RBQ-001..RBQ-005, RBQ-101). The container is
// checked first by oracles/safetensors.h.
#ifndef QUANTDIFF_ORACLES_RBQ_H_
#define QUANTDIFF_ORACLES_RBQ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// Reads a file: the safetensors container rules first; a file that is not an
// RBQ file (no Q4B32/Q8B32 tensor and no __metadata__.format starting with
// "rabbit-") gets exactly what ReadSafetensors returns. An RBQ file is then
// checked against RBQ-001..RBQ-005 (with warning RBQ-101) and, when accepted,
// every block tensor and every F32/F16/BF16/F64 tensor is decoded to binary32
// in (begin, end, name) order.
qd::Outcome ReadRbqFile(qd::ByteView file, const std::string& file_name);

// The same read, handing the decoded tensors to SINK (quantdiff/tensor_sink.h)
// instead of returning them: every check first, then, for an accepted file,
// the plan, then each tensor in chunks of whole rows (a block tensor) or of
// kChunkValues values (a floating one). Same findings and verdict as
// ReadRbqFile; the outcome's tensors are empty.
qd::Outcome StreamRbqFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink);

// The oracle's detection (README "Which format a file is"): the container
// accepts the file and it has a Q4B32/Q8B32 tensor or a __metadata__ format
// starting with "rabbit-". What ReadRbqFile checks RBQ rules on.
bool IsRbqFile(const ClaimInput& input);

// Reference quantizer (spec "The scale"). bits is 4 or 8; weights are
// row-major rows x columns. On success *blocks holds rows * (columns / 32)
// blocks of 18 (Q4B32) or 34 (Q8B32) bytes. On failure returns false and
// fills *error: RBQ-003 when columns % 32 != 0; RBQ-005 (with row and block)
// when a block scale rounds to binary16 infinity or a weight is not finite.
bool QuantizeRbq(int bits, const float* weights, std::uint64_t rows, std::uint64_t columns,
                 std::vector<std::uint8_t>* blocks, qd::Finding* error);

// Reference matrix vector product (spec "Why the matrix vector product
// decodes in place"): y[r] = sum over blocks of (sum over k of q_k * x[k]) *
// scale, in binary32, in the spec's order. Returns false when bits is not 4
// or 8, columns % 32 != 0, or blocks.size != rows * (columns / 32) * (18 or 34).
bool MatvecRbq(int bits, qd::ByteView blocks, std::uint64_t rows, std::uint64_t columns,
               const float* x, float* y);

// binary32 -> binary16 bits, round to nearest even, with subnormal results
// and overflow to infinity; NaN stays a (quiet) NaN.
std::uint16_t FloatToHalf(float value);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_RBQ_H_
