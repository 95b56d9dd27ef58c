// awq.h: the reference reader for AWQ checkpoints (versions gemm, gemv and
// gemv_fast) and their quantize configs, written plainly from docs/awq.md
// (which cites spec 004 and the peer manifest ../shared/peer/awq). Shares no
// code with codecs/; the differential tests compare the two bit for bit.
//
//   std::vector<qd::oracle::AwqLayerCodes> layers;
//   qd::Outcome o = qd::oracle::ReadAwqFile(bytes, "m.safetensors", configs, &layers);
#ifndef QUANTDIFF_ORACLES_AWQ_H_
#define QUANTDIFF_ORACLES_AWQ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/merged_table.h"
#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// One accepted layer as the contract defines it, before dequantization.
struct AwqLayerCodes {
  std::string prefix;  // with its trailing dot
  std::int64_t in_features = 0;   // K
  std::int64_t out_features = 0;  // N
  std::int64_t groups = 0;        // G
  std::vector<std::int32_t> codes;     // [K][N]: codes[k * N + n]
  std::vector<std::int32_t> zeros;     // [G][N] integer zero points (gemm, gemv)
  std::vector<float> scaled_zeros;     // [G][N] (gemv_fast): qzeros widened
};

// The safetensors rules, then docs/awq.md sections 3 and 5; the outcome's
// tensors are section 7's. LAYERS, when given and the file is accepted,
// receives every layer's codes and zeros in anchor order.
qd::Outcome ReadAwqFile(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs,
                        std::vector<AwqLayerCodes>* layers = nullptr);
// The same read, the decoded tensors handed to SINK (plan first).
qd::Outcome StreamAwqFile(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, qd::TensorSink& sink,
                          std::vector<AwqLayerCodes>* layers = nullptr);

// docs/awq.md section 2, Detection: the container accepts the file and one of
// its layers is an AWQ layer. Needs no config.
bool IsAwqFile(const ClaimInput& input);
// The same over a table (one file, or a model directory's merged table).
bool HasAwqLayer(const MergedTable& table);
// Sections 3, 5 and 7 over a table of accepted containers, as
// StreamGptqTable does for GPTQ: findings appended to *outcome (naming
// FILE_NAME), false at the first error; else the plan and tensors to SINK.
bool StreamAwqTable(const MergedTable& table, const std::string& file_name,
                    const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                    qd::TensorSink& sink, std::vector<AwqLayerCodes>* layers = nullptr);

// docs/awq.md section 8 written from the page: the qweight and qzeros words
// of FORMAT ("gemm", "gemv", "gemv_fast": no qzeros) for codes [K][N] and
// zero points [G][N], padding slots 0; GEMV_FAST words are I16 values held in
// int32. False with *error when a precondition fails.
bool PackAwq(const std::string& format, std::int64_t in_features, std::int64_t out_features,
             std::int64_t group_size, const std::vector<std::int32_t>& codes,
             const std::vector<std::int32_t>& zeros, std::vector<std::int32_t>* qweight,
             std::vector<std::int32_t>* qzeros, std::string* error);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_AWQ_H_
