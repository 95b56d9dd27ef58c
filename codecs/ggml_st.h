// ggml_st.h: the production reader and decoder for GGUF-family safetensors
// (GPT-QModel's GGUF linear: ggml block bytes in a U8 qweight [N,
// bytes_per_row], the ggml type from the quantize config's bits and format).
//
// docs/ggml_safetensors.md is the contract (config, detection, check order,
// decoded output); the blocks are decoded by codecs/ggml_blocks.h.
// oracles/ggml_st.cc implements the same page independently.
//
//   GgmlStResult r = ReadGgmlSt(file, "model.safetensors", configs);
//   if (!r.refused) StreamGgmlStLayers(r, sink);
#ifndef QUANTDIFF_CODECS_GGML_ST_H_
#define QUANTDIFF_CODECS_GGML_ST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "codecs/ggml_blocks.h"
#include "codecs/gptq.h"
#include "codecs/claim_input.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// One accepted layer, or one block tensor of the block-vector layout
// (section 7); tensor fields index GgmlStResult::table.
struct GgmlStLayer {
  std::string prefix;  // with the dot; empty for a block tensor
  std::string output;  // the decoded tensor's name: prefix + "weight", or the block tensor's own
  std::size_t qweight = kGptqNoTensor;  // the block bytes
  std::size_t bias = kGptqNoTensor;
  std::uint64_t rows = 0;            // N
  std::uint64_t blocks_per_row = 0;  // Kp / QK
  std::uint64_t cols = 0;            // decoded weights per row: Kp, or section 7's cols
};

struct GgmlStResult {
  bool refused = false;
  std::vector<qd::Finding> findings;  // warnings in order met, then at most one error
  TensorTable table;
  const GgmlTypeInfo* type = nullptr;  // set when the config steps passed
  std::vector<GgmlStLayer> layers;     // in anchor order
};

// Container rules, then docs/ggml_safetensors.md sections 2 and 4.
GgmlStResult ReadGgmlSt(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs);
// Section 3, Detection: the container accepts the file and one of its layers
// is a GGUF layer (U8 qweight, no qzeros / scales / g_idx), or (section 7)
// its __metadata__ has the key ggml_type. Needs no config.
bool ClaimsGgmlSt(const ClaimInput& input);
// Section 2, G1: the ggml type of a resolved config format and bits, or
// nullptr when the subtype is unknown (GGST-001).
const GgmlTypeInfo* GgmlStTypeOf(const std::string& format, int bits);

// Section 5's tensors, to a sink (announced first) or collected.
qd::Outcome StreamGgmlStFile(qd::ByteView file, const std::string& file_name,
                             const std::vector<qd::SideFile>& configs, TensorSink& sink,
                             Kernel kernel = BestKernel());
qd::Outcome DecodeGgmlStFile(qd::ByteView file, const std::string& file_name,
                             const std::vector<qd::SideFile>& configs, Kernel kernel = BestKernel());

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_GGML_ST_H_
