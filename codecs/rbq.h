// rbq.h: production codec for rabbit-infer's Q4B32 and Q8B32 block formats
// (specs/002_a5b0561d4b728a5e.txt; rules RBQ-001..RBQ-005, RBQ-101).
//
// A block is 32 consecutive weights of one row: a little-endian binary16
// scale, then 16 bytes of nibbles (Q4B32, low nibble = even position) or 32
// signed bytes (Q8B32). Decoding and the matrix-vector product run on scalar
// code or AVX2+FMA, picked at run time; the scalar kernel is the codec's own
// slow path, and the oracle in oracles/rbq.cc is the truth for both.
//
//   qd::codec::RbqResult r = qd::codec::ReadRbq(bytes, "model-q4.safetensors");
//   if (r.refused) Report(r.findings);
//   for (const qd::codec::RbqTensor& t : r.block_tensors)
//     qd::codec::RbqMatvec(r.bits, t.blocks, t.rows, t.columns, x, y);
#ifndef QUANTDIFF_CODECS_RBQ_H_
#define QUANTDIFF_CODECS_RBQ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "quantdiff/tensor_sink.h"
#include "codecs/claim_input.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

inline constexpr std::uint64_t kRbqBlockWeights = 32;
// 2 scale bytes + payload: 18 for Q4B32, 34 for Q8B32.
constexpr std::uint64_t RbqBlockBytes(int bits) { return bits == 4 ? 18 : 34; }

struct RbqTensor {
  const TensorEntry* entry = nullptr;  // points into RbqResult::container
  std::uint64_t rows = 0;
  std::uint64_t columns = 0;
  const std::uint8_t* blocks = nullptr;
};

struct RbqResult {
  bool refused = false;
  bool is_rbq = false;  // false: a plain safetensors file, container rules only
  int bits = 0;         // 4 or 8 when is_rbq
  std::vector<qd::Finding> findings;
  Container container;
  std::vector<RbqTensor> block_tensors;  // in container order
};

// Detection: is_rbq of ReadRbq, asked of the shared container reading.
bool ClaimsRbq(const ClaimInput& input);
// Container rules, then the RBQ rules in catalogue order.
RbqResult ReadRbq(qd::ByteView file, const std::string& file_name);

// The whole file decoded to binary32, in container order: block tensors as
// [rows, columns], floating tensors widened, other dtypes skipped. The
// outcome carries the findings; the tensors go to the sink one at a time
// (nothing is announced when the file is refused).
qd::Outcome StreamRbqFile(qd::ByteView file, const std::string& file_name, TensorSink& sink,
                          Kernel kernel = BestKernel());
// The same, collected into the outcome's tensors.
qd::Outcome DecodeRbqFile(qd::ByteView file, const std::string& file_name,
                          Kernel kernel = BestKernel());

// Decodes `rows` rows of blocks into out[rows * columns].
void RbqDequantize(int bits, const std::uint8_t* blocks, std::uint64_t rows,
                   std::uint64_t columns, float* out,
                   Kernel kernel = BestKernel());

// y[r] = sum over blocks of scale * (sum of q * x), decoding in place
// (spec "Why the matrix vector product decodes in place").
void RbqMatvec(int bits, const std::uint8_t* blocks, std::uint64_t rows,
               std::uint64_t columns, const float* x, float* y,
               Kernel kernel = BestKernel());

// Quantizes row-major weights (spec "The scale"). False with *error set:
// RBQ-003 when columns is not a multiple of 32, RBQ-005 when a scale would
// not be a finite binary16 or a weight is not finite.
bool RbqQuantize(int bits, const float* weights, std::uint64_t rows,
                 std::uint64_t columns, std::vector<std::uint8_t>* blocks,
                 qd::Finding* error);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_RBQ_H_
