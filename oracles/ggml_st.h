// ggml_st.h: the reference reader for GGUF-family safetensors (GPT-QModel's
// GGUF linear: ggml blocks in a U8 qweight [N, bytes_per_row]), written
// plainly from docs/ggml_safetensors.md. Blocks are decoded by the oracle's
// own block decoder (oracles/ggml_blocks.h); nothing is shared with codecs/.
//
//   qd::Outcome o = qd::oracle::ReadGgmlStFile(bytes, "m.safetensors", configs);
#ifndef QUANTDIFF_ORACLES_GGML_ST_H_
#define QUANTDIFF_ORACLES_GGML_ST_H_

#include <string>
#include <vector>

#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// The safetensors rules, then docs/ggml_safetensors.md sections 2 and 4; the
// tensors are section 5's.
qd::Outcome ReadGgmlStFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs);
// The same read, the decoded tensors handed to SINK (plan first).
qd::Outcome StreamGgmlStFile(qd::ByteView file, const std::string& file_name,
                             const std::vector<qd::SideFile>& configs, qd::TensorSink& sink);
// Section 3, Detection: the container accepts the file and some prefix owns
// a U8 P+qweight and none of P+qzeros, P+scales, P+g_idx.
bool IsGgmlStFile(const ClaimInput& input);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_GGML_ST_H_
