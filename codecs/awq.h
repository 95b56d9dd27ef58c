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
#include "codecs/kernels.h"
#include "codecs/claim_input.h"
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
  // LLM_AWQ (format llm-awq): the GEMV_FAST layout, its scaled zeros named
  // P.scaled_zeros (AwqLayer::qzeros indexes that tensor): docs/awq.md section 4.
  bool llm_awq = false;
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
bool ClaimsAwq(const ClaimInput& input);
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
// out holding (n_end - n_begin) * K floats. KERNEL kAvx2 runs GEMV and
// GEMV_FAST layers, and GEMM layers whose group size is a multiple of 8, with
// AVX2 (codecs/awq_pack.cc), bit for bit the scalar output; other GEMM
// layers run the scalar kernel.
void AwqDequantizeRows(const AwqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                       float* out, Kernel kernel = BestKernel());

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

// ---- Conversions across GPTQ and AWQ (codecs/awq_convert.cc, section 11) --

// A 4-bit layer as plain fields, from which every GPTQ format and AWQ GEMM /
// GEMV is built: the meeting point of `quantdiff convert` across families.
struct QuantFields {
  std::int64_t in_features = 0;   // K
  std::int64_t out_features = 0;  // N
  std::int64_t groups = 0;        // G; group of k is k / (K / G)
  std::vector<std::int32_t> codes;   // [K][N]
  std::vector<std::int32_t> zeros;   // [G][N] true zero points (GPTQ v1: field + 1)
  std::vector<std::uint8_t> scales;  // [G][N] elements of scales_dtype, bits as stored
  Dtype scales_dtype = Dtype::kF16;
};

// A layer's tensors in the target layout (little-endian words).
struct QuantTensors {
  std::vector<std::uint8_t> qweight;
  std::vector<std::int64_t> qweight_shape;
  std::vector<std::uint8_t> qzeros;
  std::vector<std::int64_t> qzeros_shape;
  std::vector<std::uint8_t> scales;  // scales_dtype of the fields
  std::vector<std::int64_t> scales_shape;
  std::vector<std::uint8_t> g_idx;  // I32 [K], GPTQ targets only
};

// WORDS as little-endian I32 bytes.
std::vector<std::uint8_t> I32WordBytes(const std::vector<std::int32_t>& words);

// The fields of a checked GPTQ layer read with the config's GROUP_SIZE (-1
// or >= 1). False with *error (rule AWQ-202 or AWQ-203) when AWQ cannot hold
// its group map (GROUP_SIZE must divide K, as AWQ-005 will ask) or its width.
bool FieldsOfGptq(const GptqLayerView& layer, std::int64_t group_size, QuantFields* out,
                  GptqPackError* error);
// The fields of a checked AWQ layer; GEMV_FAST (scaled zeros, no integer
// zero) is AWQ-203.
bool FieldsOfAwq(const AwqLayerView& layer, QuantFields* out, GptqPackError* error);
// FIELDS packed as a GPTQ format (g_idx = k / (K / G)) or as an AWQ version.
// False with *error: a zero point the target cannot hold (AWQ-201, row =
// group, column = output), a geometry it cannot hold (AWQ-203).
bool PackFieldsAsGptq(const QuantFields& fields, GptqFormat target, QuantTensors* out,
                      GptqPackError* error);
bool PackFieldsAsAwq(const QuantFields& fields, AwqFormat target, QuantTensors* out,
                     GptqPackError* error);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_AWQ_H_
