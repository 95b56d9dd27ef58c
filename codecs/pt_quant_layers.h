// pt_quant_layers.h: where the torch .pt reader and the GPTQ and AWQ readers
// meet (docs/pt.md 6.5). codecs/pt.h knows nothing of GPTQ or AWQ, and
// codecs/gptq.h and codecs/awq.h read any TensorTable; this file reads an
// accepted .pt/.bin tensor table that comes with config sources (beside
// the file, in its model directory, or --config) with the AWQ or GPTQ
// reader, exactly as a safetensors file of the same tensors is read.
//
//   qd::codec::PtQuantLayers layers;
//   if (qd::codec::ReadPtQuantLayers(table, "pytorch_model.bin", configs, &warnings, &layers)) ...
#ifndef QUANTDIFF_CODECS_PT_QUANT_LAYERS_H_
#define QUANTDIFF_CODECS_PT_QUANT_LAYERS_H_

#include <optional>
#include <string>
#include <vector>

#include "codecs/awq.h"
#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// The reading of one table by the reader that claimed it: exactly one is set.
struct PtQuantLayers {
  std::optional<AwqResult> awq;
  std::optional<GptqResult> gptq;

  const char* format() const { return awq ? "awq" : "gptq"; }
  bool refused() const { return awq ? awq->refused : gptq->refused; }
  std::vector<qd::Finding>& findings() { return awq ? awq->findings : gptq->findings; }
  const TensorTable& table() const { return awq ? awq->table : gptq->table; }
};

// docs/pt.md 6.5: when CONFIGS is not empty and TABLE holds an AWQ layer
// (docs/awq.md 2, tried first) or a GPTQ layer (docs/gptq.md 2), TABLE is
// moved into that reader, *PT_FINDINGS (the .pt reader's warnings) are moved
// first into its findings, and the result is true. Otherwise nothing is
// read or moved and the result is false (the table is read as docs/pt.md
// 6.3 says).
bool ReadPtQuantLayers(TensorTable& table, const std::string& file_name,
                       const std::vector<qd::SideFile>& configs, std::vector<qd::Finding>* pt_findings,
                       PtQuantLayers* out);
// The claimed reader's decoded output (docs/gptq.md 7, docs/awq.md 7) of an
// accepted reading to SINK, announced first.
void StreamPtQuantLayers(const PtQuantLayers& layers, TensorSink& sink, Kernel kernel = BestKernel());

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_PT_QUANT_LAYERS_H_
