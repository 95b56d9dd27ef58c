// layer_stream.h: the decoded output the quantized-layer readers share
// (docs/gptq.md section 7, docs/awq.md section 7, docs/ggml_safetensors.md
// section 5): in storage order, each layer's weight F32 [rows, cols] at its
// source tensor's place, every other listed floating tensor that no layer
// consumed widened to binary32, other integer tensors left out.
//
//   std::vector<LayerOutput> outputs = {{qweight_index, "p.weight", n, k}};
//   StreamLayersAndFloats(table, outputs, consumed, sink,
//                         [&](std::size_t layer, std::uint64_t row, std::uint64_t count, float* out) {...});
#ifndef QUANTDIFF_CODECS_LAYER_STREAM_H_
#define QUANTDIFF_CODECS_LAYER_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codecs/tensor_table.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

struct LayerOutput {
  std::size_t source = 0;  // the table index whose place the weight takes (its qweight)
  std::string name;        // P + "weight"
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
};

// Writes rows [row, row + count) of layer LAYER (an index into the outputs)
// to OUT, count * cols floats.
using LayerRowDecoder = std::function<void(std::size_t layer, std::uint64_t row, std::uint64_t count, float* out)>;

// Plans then streams the tensors above to SINK. CONSUMED (table-sized, may
// be empty for none) marks tensors a layer reads besides its source (scales,
// qzeros), which are not output.
void StreamLayersAndFloats(const TensorTable& table, const std::vector<LayerOutput>& layers,
                           const std::vector<bool>& consumed, TensorSink& sink,
                           const LayerRowDecoder& decode_rows);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_LAYER_STREAM_H_
