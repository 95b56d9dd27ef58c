// awq.h: the production reader, decoder and packer for AWQ checkpoints:
// GEMM (codes packed along outputs in AWQ's nibble order), GEMV (packed along
// inputs, padded group slots) and GEMV_FAST (int16 words, interleaved rows,
// scaled zeros), with their quantize config.
//
// docs/awq.md is the contract (detection, config, check order, bit layouts,
// arithmetic); oracles/awq.cc implements the same page independently and
// the two are compared bit for bit.
//
//   std::vector<qd::SideFile> configs = {{"config.json", bytes}};
//   AwqResult r = ReadAwq(file, "model.safetensors", configs);
//   if (!r.refused) for (const AwqLayer& l : r.layers) AwqDequantizeRows(ViewOf(r, l), ...);
#ifndef QUANTDIFF_CODECS_AWQ_H_
#define QUANTDIFF_CODECS_AWQ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// The three layouts (docs/awq.md section 4).
enum class AwqFormat : std::uint8_t { kGemm, kGemv, kGemvFast };

// One layer of an accepted file; tensor fields index AwqResult::table.
struct AwqLayer {
  std::string prefix;  // with the dot
  std::size_t qweight = kGptqNoTensor;
  std::size_t qzeros = kGptqNoTensor;
  std::size_t scales = kGptqNoTensor;
  std::size_t bias = kGptqNoTensor;
  std::int64_t in_features = 0;   // K
  std::int64_t out_features = 0;  // N
  std::int64_t groups = 0;        // G
  std::int64_t group_size = 0;    // K / G: the effective group size
  std::int64_t zeros_width = 0;   // Z (GEMV, GEMV_FAST), 0 for GEMM
};

struct AwqResult {
  bool refused = false;
  std::vector<qd::Finding> findings;  // warnings in order met, then at most one error
  TensorTable table;
  GptqConfig config;  // config.format_name is the AWQ version
  AwqFormat format = AwqFormat::kGemm;
  std::vector<AwqLayer> layers;  // in anchor order
};

// Container rules, then docs/awq.md section 3 (config) and section 5 (layers).
AwqResult ReadAwq(qd::ByteView file, const std::string& file_name,
                  const std::vector<qd::SideFile>& configs);

// The same checks on an accepted container's tensor table (a file's, or a
// model directory's merged table: docs/model_dir.md 4); CONTAINER_FINDINGS
// come first.
AwqResult ReadAwqTable(TensorTable table, const std::string& file_name,
                       const std::vector<qd::SideFile>& configs,
                       std::vector<qd::Finding> container_findings = {});
// docs/awq.md section 2, Detection, on a table: one of its layers is an AWQ
// layer.
bool HasAwqLayer(const TensorTable& table);
// docs/awq.md section 2, Detection: the container accepts the file and one
// of its layers is an AWQ layer. Needs no config.
bool ClaimsAwq(qd::ByteView file);
// Section 7's tensors of an accepted result to SINK (announced first).
void StreamAwqLayers(const AwqResult& result, TensorSink& sink);

// Section 7's tensors of an accepted file, to a sink (announced first) or
// collected.
qd::Outcome StreamAwqFile(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, TensorSink& sink);
qd::Outcome DecodeAwqFile(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs);

// "gemm", "gemv", "gemv_fast".
const char* AwqFormatName(AwqFormat format);

// One layer's bytes, already checked by ReadAwq (shapes as docs/awq.md
// section 5 A6..A9).
struct AwqLayerView {
  AwqFormat format = AwqFormat::kGemm;
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  std::int64_t groups = 0;
  std::int64_t group_size = 0;
  std::int64_t zeros_width = 0;
  const std::uint8_t* qweight = nullptr;
  const std::uint8_t* qzeros = nullptr;
  const std::uint8_t* scales = nullptr;
  Dtype scales_dtype = Dtype::kF16;
};
AwqLayerView ViewOf(const AwqResult& result, const AwqLayer& layer);

// Rows [n_begin, n_end) of the layer's weight [N, K] (docs/awq.md section 6),
// out holding (n_end - n_begin) * K floats.
void AwqDequantizeRows(const AwqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                       float* out);

// ---- Packing (codecs/awq_pack.cc, docs/awq.md section 8) -----------------

// codes [K][N] (codes[k*N+n]) and zeros [G][N] (integer zero points; for
// GEMV_FAST not stored: its qzeros are scaled zeros the writer computes from
// the scales). Fills qweight and qzeros words as the format stores them
// (I32 words; GEMV_FAST qweight as I16 words in the low halves), padding
// slots 0. False with *error on the first failed precondition.
struct AwqPacked {
  std::vector<std::int32_t> qweight;
  std::vector<std::int32_t> qzeros;  // empty for GEMV_FAST
  std::vector<std::int64_t> qweight_shape;
  std::vector<std::int64_t> qzeros_shape;
};
bool AwqEncode(AwqFormat format, std::int64_t in_features, std::int64_t out_features,
               std::int64_t group_size, const std::vector<std::int32_t>& codes,
               const std::vector<std::int32_t>& zeros, AwqPacked* out, std::string* error);
// Z of docs/awq.md section 4 for K and an effective group size (0 when the
// group size has none).
std::int64_t AwqZerosWidth(std::int64_t in_features, std::int64_t group_size);
// The codes [K][N] and, GEMM/GEMV, the integer zeros [G][N] of a checked layer.
void AwqUnpack(const AwqLayerView& layer, std::vector<std::int32_t>* codes,
               std::vector<std::int32_t>* zeros);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_AWQ_H_
