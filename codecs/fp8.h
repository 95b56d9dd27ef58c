// fp8.h: the production reader and decoder for FP8 weight checkpoints
// (spec 004 "FP8"): P.weight in an FP8 dtype beside P.weight_scale_inv F32
// (a scalar, one per row [N], or one per block), read with its config.
//
// docs/fp8.md is the contract (detection, config, check order, the code
// tables' definition, the one division that reconstructs a weight);
// oracles/fp8.cc implements the same page independently, decoding each code
// from its bit fields, and the two are compared bit for bit.
//
//   Fp8Result r = ReadFp8(file, "model.safetensors", configs);
//   if (!r.refused) StreamFp8Layers(r, sink);
#ifndef QUANTDIFF_CODECS_FP8_H_
#define QUANTDIFF_CODECS_FP8_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/claim_input.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// The FP8 subtypes of docs/fp8.md section 1 (GPT-QModel's canonical names).
enum class Fp8Subtype : std::uint8_t { kE4M3Fn, kE4M3Fnuz, kE5M2, kE5M2Fnuz, kE8M0Fnu };
inline constexpr int kFp8SubtypeCount = 5;

// "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu".
const char* Fp8SubtypeName(Fp8Subtype subtype);

// The binary32 value of every code of SUBTYPE (docs/fp8.md section 4): exact,
// NaN codes as a quiet NaN. Built once from the exponent re-bias.
const std::array<float, 256>& Fp8CodeTable(Fp8Subtype subtype);
// True when CODE is a NaN (or, E5M2, an infinity) of SUBTYPE: FP8-007.
bool Fp8CodeIsNonFinite(Fp8Subtype subtype, std::uint8_t code);

// How weight_scale_inv is laid out (docs/fp8.md section 2).
enum class Fp8Scaling : std::uint8_t { kTensor, kRow, kBlock };

struct Fp8Layer {
  std::string prefix;  // with its dot, or empty
  std::size_t weight = 0;
  std::size_t scale_inv = 0;
  std::uint64_t out_features = 0;  // N
  std::uint64_t in_features = 0;   // K
  Fp8Scaling scaling = Fp8Scaling::kTensor;
  Fp8Subtype subtype = Fp8Subtype::kE4M3Fn;
};

struct Fp8Config {
  bool has_subtype = false;
  Fp8Subtype subtype = Fp8Subtype::kE4M3Fn;
  int scale_method = -1;  // -1 unset, else an Fp8Scaling
  std::uint64_t block_rows = 0, block_cols = 0;  // 0: no weight_block_size
};

struct Fp8Result {
  bool refused = false;
  std::vector<qd::Finding> findings;  // warnings in order met, then at most one error
  TensorTable table;
  Fp8Config config;
  std::vector<Fp8Layer> layers;  // in the storage order of their first member
};

// Container rules, then docs/fp8.md section 3 (config) and section 5 (layers).
Fp8Result ReadFp8(qd::ByteView file, const std::string& file_name,
                  const std::vector<qd::SideFile>& configs);
// The same checks on an accepted container's tensor table (a file's, or a
// model directory's merged table: docs/model_dir.md 4); CONTAINER_FINDINGS
// come first.
Fp8Result ReadFp8Table(TensorTable table, const std::string& file_name,
                       const std::vector<qd::SideFile>& configs,
                       std::vector<qd::Finding> container_findings = {});
// docs/fp8.md section 2, Detection, on a table: a tensor is named
// P + "weight_scale_inv".
bool HasFp8Layer(const TensorTable& table);
// Section 7's tensors of an accepted result to SINK (announced first).
void StreamFp8Layers(const Fp8Result& result, TensorSink& sink);
// docs/fp8.md section 2, Detection: the container accepts the file and a
// tensor is named P + "weight_scale_inv". Needs no config.
bool ClaimsFp8(const ClaimInput& input);

// Rows [n_begin, n_end) of the layer's weight [N, K] (docs/fp8.md section 6):
// out holds (n_end - n_begin) * K floats.
void Fp8DequantizeRows(const Fp8Result& result, const Fp8Layer& layer, std::uint64_t n_begin,
                       std::uint64_t n_end, float* out);
// The same over raw bytes: CODES [rows][K] of SUBTYPE and one inverse scale
// per (row, column block) at INV_SCALES[row * blocks + k / block_cols] (a
// tensor or row scaling is blocks 1, block_cols K). What the bench measures.
void Fp8DequantizeSpan(Fp8Subtype subtype, const std::uint8_t* codes, std::uint64_t rows,
                       std::uint64_t in_features, const float* inv_scales, std::uint64_t blocks,
                       std::uint64_t block_cols, float* out);

// docs/fp8.md section 9, the quantizer's cast: X to the nearest code of
// SUBTYPE (ties to the even code), magnitudes beyond the largest finite
// value clamped to it first, -0.0 kept where the subtype has it (fnuz: 0x00),
// a NaN to the subtype's smallest NaN code. False for E8M0FNU (spec 004:
// the quantizer does not produce E8M0 weights).
bool Fp8Encode(Fp8Subtype subtype, float x, std::uint8_t* code);
// Section 9 over a span, the inverse of Fp8DequantizeSpan's layout:
// CODES[r][k] = Fp8Encode(fl32(WEIGHTS[r][k] * inv)), inv the row's (or the
// row's column block's) inverse scale. False for E8M0FNU.
bool Fp8QuantizeSpan(Fp8Subtype subtype, const float* weights, std::uint64_t rows,
                     std::uint64_t in_features, const float* inv_scales, std::uint64_t blocks,
                     std::uint64_t block_cols, std::uint8_t* codes);

// Section 7's tensors of an accepted file to a sink (announced first) or collected.
qd::Outcome StreamFp8File(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, TensorSink& sink);
qd::Outcome DecodeFp8File(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_FP8_H_
