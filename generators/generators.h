// generators.h: valid and rule-targeted invalid instances of every format.
//
// Instances are built with quantdiff's own encoders and writers (codecs/);
// the oracle, not the generator, says what a file means. A violation
// generator starts from a valid instance and breaks exactly one rule, so
// both readers must refuse it with that rule ID (the catalogue's check order
// guarantees no earlier rule fires).
//
//   qd::harness::Rng rng(seed);
//   qd::harness::Generated g = qd::gen::RbqViolation("RBQ-005", rng);
#ifndef QUANTDIFF_GENERATORS_GENERATORS_H_
#define QUANTDIFF_GENERATORS_GENERATORS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/safetensors.h"
#include "harness/registry.h"

namespace qd::gen {

// A uniform choice in 0..n-1 (n > 0), and a one-in-n chance.
inline std::uint64_t Pick(harness::Rng& rng, std::uint64_t n) { return rng() % n; }
inline bool Coin(harness::Rng& rng, std::uint64_t one_in = 2) { return Pick(rng, one_in) == 0; }

// safetensors container (rules ST-*): random tensors of every dtype.
harness::Generated SafetensorsValid(harness::Rng& rng);
std::vector<std::string> SafetensorsViolableRules();
harness::Generated SafetensorsViolation(std::string_view rule, harness::Rng& rng);

// Q4B32 / Q8B32 (rules RBQ-*): quantized matrices plus kept norm vectors.
harness::Generated RbqValid(harness::Rng& rng);
std::vector<std::string> RbqViolableRules();
harness::Generated RbqViolation(std::string_view rule, harness::Rng& rng);

// bitsandbytes (rules BNB-*, docs/bnb.md): 4-bit NF4/FP4 (HF and GPT-QModel
// names, flat or nested statistics, any quant_storage), 8-bit blockwise and
// int8 row-scaled layers, made with the codec's encoders.
harness::Generated BnbValid(harness::Rng& rng);
std::vector<std::string> BnbViolableRules();
harness::Generated BnbViolation(std::string_view rule, harness::Rng& rng);

// GPTQ (rules GPTQ-*, CFG-*, docs/gptq.md): v1 / v2 continuous and planar
// layers packed with codec::GptqEncode, one or two per file, sorted or
// act-order g_idx, F16 / BF16 / F32 scales, optional bias and dense
// tensors; config sources (Generated::side_files) spelled with every alias,
// sometimes a quantize_config.json plus an agreeing nested config.json.
harness::Generated GptqValid(harness::Rng& rng);
std::vector<std::string> GptqViolableRules();
harness::Generated GptqViolation(std::string_view rule, harness::Rng& rng);

// One GPTQ layer, exposed so fuzz targets and tests can build from input.
struct GptqLayerParams {
  std::string prefix = "model.layers.0.mlp.up_proj.";  // with its dot ("" for bare names)
  int format = 0;                  // 0 gptq, 1 gptq_v2, 2 gptq_p
  int bits = 4;                    // allowed for the format
  std::int64_t in_features = 64;   // K, a multiple of 32
  std::int64_t out_features = 32;  // N, a multiple of 32
  std::int64_t group_size = 32;    // -1 or >= 1
  int g_idx_mode = 0;              // 0 k / gs, 1 a permutation of it, 2 any group per k
  int scales_dtype = 0;            // 0 F16, 1 BF16, 2 F32
  int bias_dtype = -1;             // -1 no bias, else as scales_dtype
  int zero_mode = 0;               // 0 random, 1 smallest zero, 2 largest (v1: 2^b, GPTQ-107)
};
// P+qweight, P+qzeros, P+scales, P+g_idx (and P+bias), in that order, with
// random codes, zeros and finite scales (subnormals, zeros, negatives).
std::vector<codec::TensorWithBytes> BuildGptqLayer(const GptqLayerParams& params, harness::Rng& rng);
// A canonical quantize_config.json text for those parameters.
std::string GptqConfigText(int format, int bits, std::int64_t group_size);

// Parameters of one RBQ file, exposed so fuzz targets can build from input.
struct RbqFileParams {
  int bits = 4;
  std::uint64_t rows = 1;
  std::uint64_t columns = 32;
  int tensor_count = 1;   // block tensors
  bool with_norm = true;  // a one-dimensional F32 tensor beside them
  float magnitude = 1.0f;
};
std::vector<std::uint8_t> BuildRbqFile(const RbqFileParams& params, harness::Rng& rng);

// Random weights with the shapes quantizers meet: normal-ish values, exact
// zeros, all-zero blocks, outliers and tiny values near binary16 underflow.
std::vector<float> RandomWeights(std::uint64_t count, float magnitude, harness::Rng& rng);

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_GENERATORS_H_
