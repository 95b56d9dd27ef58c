// gptq.h: the production reader, decoder and packer for GPTQ checkpoints:
// v1 continuous pack (format "gptq", zero stored minus one), v2 true zeros
// ("gptq_v2") and planar GPTQ_P ("gptq_p"), with their quantize config.
//
// docs/gptq.md is the contract (config discovery, layers, check order, bit
// layouts, arithmetic); oracles/gptq.cc implements the same page
// independently and the two are compared bit for bit.
//
//   std::vector<qd::SideFile> configs = {{"quantize_config.json", bytes}};
//   GptqResult r = ReadGptq(file, "model.safetensors", configs);
//   if (!r.refused) for (const GptqLayer& l : r.layers) GptqDequantize(View(r, l), ...);
#ifndef QUANTDIFF_CODECS_GPTQ_H_
#define QUANTDIFF_CODECS_GPTQ_H_

#include <cstddef>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantdiff/tensor_sink.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "codecs/claim_input.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

// The three layouts (docs/gptq.md sections 4 and 5).
enum class GptqFormat : std::uint8_t {
  kV1,      // "gptq": continuous pack, zero point stored minus one
  kV2,      // "gptq_v2": continuous pack, true zeros
  kPlanar,  // "gptq_p": planar bit planes, true zeros
};

// The winning config after every C step passed (docs/gptq.md section 3).
struct GptqConfig {
  GptqFormat format = GptqFormat::kV1;
  int bits = 0;
  std::int64_t group_size = 0;  // -1: one group over all of in_features
  std::string source;           // the winning SideFile's name
  // What docs/awq.md section 3 reads from the same steps (ReadQuantConfig).
  std::string method;           // resolved method ("gptq", "awq", "gguf")
  std::string format_name;      // resolved format ("gptq", "gemm", "gemv", "q_k_m", ...)
  std::optional<bool> sym;      // sym, else !zero_point
};

// Whose reading the config steps serve: docs/gptq.md section 3, or the same
// steps as docs/awq.md section 3 or docs/ggml_safetensors.md section 2 adapt
// them.
enum class QuantFamily : std::uint8_t { kGptq, kAwq, kGguf };

inline constexpr std::size_t kGptqNoTensor = static_cast<std::size_t>(-1);

// One layer of an accepted file. Tensor fields index GptqResult::table
// (kGptqNoTensor when absent).
struct GptqLayer {
  std::string prefix;  // "model.layers.0.mlp.up_proj." (with the dot)
  std::size_t qweight = kGptqNoTensor;
  std::size_t qzeros = kGptqNoTensor;
  std::size_t scales = kGptqNoTensor;
  std::size_t g_idx = kGptqNoTensor;
  std::size_t bias = kGptqNoTensor;
  std::int64_t in_features = 0;   // K
  std::int64_t out_features = 0;  // N
  std::int64_t groups = 0;        // G
};

struct GptqResult {
  bool refused = false;
  bool is_gptq = false;  // the file has at least one layer
  std::vector<qd::Finding> findings;  // warnings in order met, then at most one error
  TensorTable table;              // the file's, or a model directory's merged table
  GptqConfig config;              // valid when the config steps passed
  std::vector<GptqLayer> layers;  // in anchor order
};

// Container rules, then docs/gptq.md section 3 (C1..C11, then L1..L10 per
// layer). configs are the sources in priority order.
GptqResult ReadGptq(qd::ByteView file, const std::string& file_name,
                    const std::vector<qd::SideFile>& configs);

// The same checks on an accepted container's tensor table (a file's, or a
// model directory's merged table: docs/model_dir.md 4); the container's
// warnings come first.
GptqResult ReadGptqTable(TensorTable table, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs,
                         std::vector<qd::Finding> container_findings = {});
// docs/gptq.md section 2, Detection, on a table: a listed tensor named
// P.qweight, P.qzeros, P.scales or P.g_idx.
bool HasGptqLayer(const TensorTable& table);
// Section 7's tensors of an accepted result to SINK (announced first).
void StreamGptqLayers(const GptqResult& result, TensorSink& sink, Kernel kernel = BestKernel());

// True when the file holds a tensor named P.qweight, P.qzeros, P.scales or
// P.g_idx (docs/gptq.md section 2): a cheap look at the header alone.
bool ClaimsGptq(const ClaimInput& input);

// Findings and, for an accepted file, the decoded tensors of docs/gptq.md
// section 7, one at a time to a sink (announced first) or collected.
qd::Outcome StreamGptqFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, TensorSink& sink,
                           Kernel kernel = BestKernel());
qd::Outcome DecodeGptqFile(qd::ByteView file, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs,
                           Kernel kernel = BestKernel());

// "gptq", "gptq_v2", "gptq_p".
const char* GptqFormatName(GptqFormat format);

// ---- Shared with the AWQ reader (codecs/awq.cc) ---------------------------

// docs/gptq.md section 3 C1..C11 over the config sources, as FAMILY reads
// them (docs/awq.md section 3): findings appended to *findings (CFG-003 names
// FILE_NAME); true with *config resolved when no error was found.
bool ReadQuantConfig(QuantFamily family, const std::vector<qd::SideFile>& configs,
                     const std::string& file_name, std::vector<qd::Finding>* findings,
                     GptqConfig* config);

// docs/gptq.md section 2: the tensors P+qweight, P+qzeros, P+scales, P+g_idx
// of one prefix P, with P+bias, P+weight and the unknown siblings.
enum QuantMember : std::uint8_t { kQweight, kQzeros, kScales, kGidx, kMemberCount };
struct QuantLayerPlan {
  std::string prefix;
  std::array<std::size_t, kMemberCount> member = {kGptqNoTensor, kGptqNoTensor, kGptqNoTensor,
                                                  kGptqNoTensor};
  std::size_t bias = kGptqNoTensor;
  std::size_t weight = kGptqNoTensor;
  std::vector<std::size_t> siblings;  // unknown P+x, storage order
  std::size_t anchor = kGptqNoTensor;
};
// The listed tensors in storage order, and the layers in anchor order.
std::vector<std::size_t> StorageOrder(const TensorTable& table);
std::vector<QuantLayerPlan> DiscoverLayers(const TensorTable& table,
                                           const std::vector<std::size_t>& order);

// ---- Layer kernels (codecs/gptq_kernels.cc) -------------------------------

// One layer's bytes, already checked by ReadGptq (or built by a caller that
// guarantees the same: shapes as docs/gptq.md L5..L8, every g_idx in 0..G-1).
struct GptqLayerView {
  GptqFormat format = GptqFormat::kV1;
  int bits = 4;
  std::int64_t in_features = 0;   // K, a multiple of 32
  std::int64_t out_features = 0;  // N, a multiple of 32
  std::int64_t groups = 0;        // G
  const std::uint8_t* qweight = nullptr;  // [K*bits/32][N] little-endian I32
  const std::uint8_t* qzeros = nullptr;   // [G][N*bits/32] little-endian I32
  const std::uint8_t* scales = nullptr;   // [G][N]
  Dtype scales_dtype = Dtype::kF16;       // kF16, kBF16 or kF32
  const std::uint8_t* g_idx = nullptr;    // [K] little-endian I32
};

// A layer of an accepted ReadGptq result, pointing into its file.
GptqLayerView ViewOf(const GptqResult& result, const GptqLayer& layer);

// out[n * K + k] = fl32((code(k, n) - zero(g_idx[k], n)) * scale(g_idx[k], n))
// (docs/gptq.md section 6). out holds N * K floats.
void GptqDequantize(const GptqLayerView& layer, float* out, Kernel kernel = BestKernel());
// Rows [n_begin, n_end) of the same, out holding (n_end - n_begin) * K
// floats: lets a caller decode a large layer in bounded memory.
void GptqDequantizeRows(const GptqLayerView& layer, std::int64_t n_begin, std::int64_t n_end,
                        float* out, Kernel kernel = BestKernel());
// y[n] = sum over k of dequant[n][k] * x[k], without materialising the
// weights. The sum runs k = 0..K-1 in order with one binary32 multiply and
// one add per term (no FMA). The AVX2 kernel runs that recurrence for one
// column per lane, so it is bit-identical to the scalar one today; a kernel
// that reassociates may differ by at most 2(K+1)u·Σ|w·x| + 2K·2^-149
// (u = 2^-24), the bound tests/gptq_pack_test.cc checks.
void GptqMatvec(const GptqLayerView& layer, const float* x, float* y,
                Kernel kernel = BestKernel());

// ---- Packing (codecs/gptq_pack.cc) ----------------------------------------

// An encoder or converter refusal: what failed and where (the first offending
// (k, n) or (g, n) in row-major order; -1 where it does not apply).
struct GptqPackError {
  std::string what;  // "bits", "shape", "code", "zero", "overflow", "underflow"
  std::int64_t row = -1;
  std::int64_t column = -1;
  std::string message;
  std::string rule;  // a conversion across families: AWQ-201..203 (docs/awq.md section 11)
};

struct GptqPacked {
  std::vector<std::int32_t> qweight;  // [K*bits/32][N]
  std::vector<std::int32_t> qzeros;   // [G][N*bits/32]
};

// docs/gptq.md section 8. codes is [K][N] (codes[k*N+n]), zeros [G][N] holds
// zero points as dequantization uses them (1..2^b for kV1, 0..2^b-1 else).
// Returns false and fills *error on the first failed precondition.
bool GptqEncode(GptqFormat format, int bits, std::int64_t in_features,
                std::int64_t out_features, std::int64_t groups,
                const std::vector<std::int32_t>& codes, const std::vector<std::int32_t>& zeros,
                GptqPacked* out, GptqPackError* error);

// The inverse on checked words: codes [K][N] and zeros [G][N] as
// dequantization uses them (v1: field + 1, unmasked).
void GptqUnpack(const GptqLayerView& layer, std::vector<std::int32_t>* codes,
                std::vector<std::int32_t>* zeros);

// docs/gptq.md section 9: repack a layer's qweight and qzeros into another
// format (v1 <-> v2, continuous <-> planar). False with *error on overflow,
// underflow, or a bit width the target format cannot hold.
bool GptqConvert(const GptqLayerView& layer, GptqFormat target, GptqPacked* out,
                 GptqPackError* error);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_GPTQ_H_
