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

#include <string>
#include <string_view>
#include <vector>

#include "harness/registry.h"

namespace qd::gen {

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
