// row_chunks.h: how every oracle reader hands a decoded tensor over, a few
// rows at a time (interface/quantdiff/tensor_sink.h; issue 9, section 3).
//
// A reader says how to decode a range of rows into a buffer; StreamRows cuts
// the tensor into chunks of whole rows of at most qd::kChunkValues values (a
// longer row comes whole), decodes each into one reused buffer and hands it
// over. So an oracle holds one chunk of a tensor, never the whole decode. A
// tensor whose values decode one by one (a floating tensor, a blockwise
// layer) passes rows of one value: chunks of kChunkValues values.
//
//   StreamRows(sink, index, rows, columns,
//              [&](std::uint64_t row, std::uint64_t count, float* out) { ... });
//
// And the whole-file readers (Read*File) are the streams collected:
//
//   return CollectStream([&](qd::TensorSink& sink) { return StreamRbqFile(f, n, sink); });
#ifndef QUANTDIFF_ORACLES_ROW_CHUNKS_H_
#define QUANTDIFF_ORACLES_ROW_CHUNKS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// Hands tensor number TENSOR of the plan, ROWS rows of ROW_VALUES values in
// row-major order, to SINK. DECODE_ROWS(first_row, row_count, out) writes
// the row_count * ROW_VALUES values of those rows to out. An empty tensor
// has no chunk. False when the sink stops the reader.
template <class DecodeRows>
bool StreamRows(qd::TensorSink& sink, std::size_t tensor, std::uint64_t rows,
                std::uint64_t row_values, DecodeRows&& decode_rows) {
  if (rows == 0 || row_values == 0) return true;
  const std::uint64_t rows_per_chunk = qd::RowsPerChunk(row_values);
  std::vector<float> buffer(static_cast<std::size_t>(std::min(rows, rows_per_chunk) * row_values));
  for (std::uint64_t row = 0; row < rows; row += rows_per_chunk) {
    const std::uint64_t count = std::min(rows_per_chunk, rows - row);
    decode_rows(row, count, buffer.data());
    const qd::TensorChunk chunk{tensor, row * row_values, buffer.data(),
                                static_cast<std::size_t>(count * row_values)};
    if (!sink.Take(chunk)) return false;
  }
  return true;
}

// The outcome of STREAM(sink) with every planned tensor's values collected:
// what a stream gives as one whole outcome.
template <class Stream>
qd::Outcome CollectStream(Stream&& stream) {
  std::vector<qd::DecodedTensor> tensors;
  qd::CollectingSink sink(&tensors);
  qd::Outcome outcome = stream(sink);
  outcome.tensors = std::move(tensors);
  return outcome;
}

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_ROW_CHUNKS_H_
