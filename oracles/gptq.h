// gptq.h: the reference reader for GPTQ checkpoints (v1 "gptq", v2
// "gptq_v2", planar "gptq_p") and their quantize configs, written plainly
// from docs/gptq.md (which cites spec 001 and spec 004). Shares no code with
// codecs/; the differential tests compare the two bit for bit.
//
//   std::vector<qd::oracle::GptqLayerCodes> layers;
//   qd::Outcome o = qd::oracle::ReadGptqFile(bytes, "m.safetensors", configs, &layers);
#ifndef QUANTDIFF_ORACLES_GPTQ_H_
#define QUANTDIFF_ORACLES_GPTQ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/merged_table.h"
#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// One accepted layer as the spec defines it, before dequantization.
struct GptqLayerCodes {
  std::string prefix;  // with its trailing dot
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  std::int64_t groups = 0;
  std::vector<std::int32_t> codes;  // [K][N]: codes[k * N + n]
  std::vector<std::int32_t> zeros;  // [G][N]: zero points used by dequant
};

// The safetensors rules, then docs/gptq.md section 3 on the file and its
// config sources (priority order). The outcome's tensors are section 7's.
// When layers is not null and the file is accepted, it receives every
// layer's codes and zeros in anchor order.
qd::Outcome ReadGptqFile(qd::ByteView file, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs,
                         std::vector<GptqLayerCodes>* layers = nullptr);

// The same read, handing the decoded tensors to SINK (quantdiff/tensor_sink.h)
// instead of returning them: every check first, then, for an accepted file,
// the plan, then each tensor in chunks (a layer's P+weight by rows n, a
// floating tensor kChunkValues values at a time). Same findings and verdict
// as ReadGptqFile; the outcome's tensors are empty. LAYERS as there.
qd::Outcome StreamGptqFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, qd::TensorSink& sink,
                           std::vector<GptqLayerCodes>* layers = nullptr);

// The checks after the container rules (docs/gptq.md section 3 with the
// config sources in priority order) and the decoded output (section 7) over
// a table of accepted containers: one file (StreamGptqFile), or a model
// directory's shards merged (docs/model_dir.md section 4: the orders
// "(data begin, data end, name bytes)" take the shard rank first, byte
// offsets are each tensor's shard's). Findings are appended to *outcome,
// naming FILE_NAME (config findings name their source); the first error
// sets refused and returns false. Otherwise the plan and the tensors go to
// SINK and LAYERS as in StreamGptqFile; returns true.
bool StreamGptqTable(const MergedTable& table, const std::string& file_name,
                     const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                     qd::TensorSink& sink, std::vector<GptqLayerCodes>* layers = nullptr);

// docs/gptq.md section 2, Detection, over a table: at least one layer.
bool HasGptqLayer(const MergedTable& table);

// docs/gptq.md section 2, Detection: the container accepts the file and it
// has at least one layer (a tensor named P+qweight, P+qzeros, P+scales or
// P+g_idx). Needs no config.
bool IsGptqFile(const ClaimInput& input);

// ---- What the AWQ oracle (oracles/awq.cc) takes from this reader ----------

// The winning config after docs/gptq.md section 3 C1..C11.
struct QuantSettings {
  std::string method;  // "gptq", "awq" or "gguf"
  std::string format;  // "gptq", "gptq_v2", "gptq_p"; AWQ: "gemm", "gemv", "gemv_fast"
  int bits = 0;
  std::int64_t group_size = 0;  // -1 or >= 1
  bool sym_present = false;     // sym, else !zero_point, given
  bool sym = false;
  std::string source;  // the winning source's name
};

// Steps C1..C11 over the config sources as FAMILY ("gptq", "awq" or "gguf" as
// docs/awq.md 3 and docs/ggml_safetensors.md 2 adapt them) reads them. Findings are appended to
// *outcome; the first error sets refused and returns false.
bool CheckQuantConfigs(const std::string& family, const std::vector<qd::SideFile>& configs,
                       const std::string& file_name, qd::Outcome* outcome,
                       QuantSettings* settings);

// docs/gptq.md section 2: the tensors of one prefix P that owns P+qweight,
// P+qzeros, P+scales or P+g_idx. Indexes into the table's tensors, -1 when
// absent.
struct QuantLayer {
  std::string prefix;  // with its trailing dot
  int qweight = -1;
  int qzeros = -1;
  int scales = -1;
  int g_idx = -1;
  int bias = -1;
  int weight = -1;
  std::vector<int> siblings;  // unknown P+x, in table order
  int anchor = -1;            // qweight, else the first of qzeros, scales, g_idx
};
// Every layer of a table in (shard, begin, end, name) order, in anchor order.
std::vector<QuantLayer> FindQuantLayers(const TableTensors& tensors);

// docs/gptq.md section 8, written from the page: pack codes [K][N] and zero
// points [G][N] into qweight [K*bits/32][N] and qzeros [G][N*bits/32] words
// for format "gptq", "gptq_v2" or "gptq_p". False with *error (a sentence
// naming what failed and the first offending (row, column)) when a
// precondition fails.
bool PackGptq(const std::string& format, int bits, std::int64_t in_features,
              std::int64_t out_features, std::int64_t groups,
              const std::vector<std::int32_t>& codes, const std::vector<std::int32_t>& zeros,
              std::vector<std::int32_t>* qweight, std::vector<std::int32_t>* qzeros,
              std::string* error);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_GPTQ_H_
