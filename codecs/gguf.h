// gguf.h: the codec's reader of native .gguf files (issue 12 item 4; the
// contract is docs/gguf.md, rules GGUF-*).
//
// ReadGguf walks header, metadata, tensor infos and the data layout in the
// contract's check order (section 3) without allocating by any count it has
// not bounded by the bytes left; the decoders then hand every tensor of a
// decoded type (section 4) to a sink, block rows through GgmlDecode. The
// oracle (oracles/gguf.h) reads the same page on its own.
//
//   qd::codec::GgufResult r = qd::codec::ReadGguf(bytes, "model.gguf");
//   if (!r.refused) for (const qd::codec::GgufTensor& t : r.tensors) ...
#ifndef QUANTDIFF_CODECS_GGUF_H_
#define QUANTDIFF_CODECS_GGUF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/kernels.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// One row of docs/gguf.md section 2.4.
struct GgufTypeRow {
  std::uint32_t id;
  std::string_view name;      // ggml's spelling
  std::uint32_t block_values; // QK
  std::uint32_t block_bytes;  // B
  bool decoded;
};

// The row for a ggml type id, or nullptr for an unknown (or removed) id.
const GgufTypeRow* FindGgufType(std::uint32_t id);

struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> ne;  // ne[0] first, as stored
  std::uint32_t type = 0;
  std::uint64_t offset = 0;        // relative to data_start
  std::uint64_t element_count = 0;
  std::uint64_t nbytes = 0;
};

struct GgufResult {
  bool refused = false;
  std::vector<qd::Finding> findings;  // warnings, then at most one error
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;
  std::uint64_t data_start = 0;
  bool nested_arrays = false;  // some metadata array holds arrays (section 2.2)
  // Complete only when !refused: sorted by (offset, nbytes, name bytes).
  std::vector<GgufTensor> tensors;
};

// True when the file starts with the magic "GGUF" (docs/gguf.md section 5).
bool ClaimsGguf(qd::ByteView file);

// Every rule of section 3, decoding nothing.
GgufResult ReadGguf(qd::ByteView file, const std::string& file_name);

// Section 4: the decoded tensors handed to SINK in order (announced first).
qd::Outcome StreamGgufFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink,
                           Kernel kernel = BestKernel());
qd::Outcome DecodeGgufFile(qd::ByteView file, const std::string& file_name,
                           Kernel kernel = BestKernel());

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_GGUF_H_
