// gguf.h: the oracle's reader of native .gguf files, written from
// docs/gguf.md alone (issue 12 item 4). Plain on purpose: every field is read
// byte by byte through a position that is checked before each read, values
// are walked one element at a time, and block tensors are decoded whole by
// oracles/ggml_blocks.h. It shares no table with codecs/gguf.h.
//
//   qd::Outcome o = qd::oracle::ReadGgufFile(bytes, "model.gguf");
#ifndef QUANTDIFF_ORACLES_GGUF_H_
#define QUANTDIFF_ORACLES_GGUF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// docs/gguf.md section 5: the first four bytes are "GGUF".
bool IsGgufFile(qd::ByteView file);

// One tensor info as the oracle read it (for tests and the ggml comparison).
struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
};

// Sections 3 and 4: findings in check order; an accepted file's decoded
// tensors in section 3 step 7's order.
qd::Outcome ReadGgufFile(qd::ByteView file, const std::string& file_name);
qd::Outcome StreamGgufFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink);

// The tensor infos of an accepted file in file order, with the alignment
// and data start; false (nothing set) for a refused file.
bool GgufTable(qd::ByteView file, std::vector<GgufTensorInfo>* infos, std::uint64_t* alignment,
               std::uint64_t* data_start);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_GGUF_H_
