// differ.h: compares what the codec and the oracle made of the same bytes.
//
// Order of comparison (DESIGN.md): accept/reject first; then every finding in
// order: rule ID and severity (a difference is kind "rule"), then file,
// tensor, field, byte offset, row, block and element (kind "position"; only
// the message, free text, is not compared); then, for
// an accepted file, every decoded tensor's name, shape and values bit for bit
// (NaNs compare equal to each other whatever their payload).
//
//   if (auto d = qd::harness::Compare(codec, oracle, "rbq_file")) {
//     std::fprintf(stderr, "%s\n%s\n", d->signature.c_str(), d->detail.c_str());
//   }
#ifndef QUANTDIFF_HARNESS_DIFFER_H_
#define QUANTDIFF_HARNESS_DIFFER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::harness {

struct Divergence {
  // Stable across inputs so that duplicates group, e.g.
  // "DIFF:rbq_file:verdict:RBQ-005" or "DIFF:rbq_file:bytes:value".
  std::string signature;
  std::string detail;  // human text: both sides, position, bits
};

std::optional<Divergence> Compare(const qd::Outcome& codec,
                                  const qd::Outcome& oracle,
                                  std::string_view target);

// The two detections of one file (DetectFormat, OracleDetectFormat): a
// difference is a divergence "DIFF:<target>:detect:<codec>!=<oracle>", since
// the format decides which rules run at all.
std::optional<Divergence> CompareDetection(std::string_view codec_format,
                                           std::string_view oracle_format,
                                           std::string_view target);

// The pieces of Compare that the streaming comparison (stream_differ.h)
// applies as values arrive, so both judge tensors alike:
// - the two plans, names and shapes (kind "bytes", "tensor-count" or
//   "tensor-header");
// - a run of N values of tensor NAME starting at element FIRST, bit for bit
//   with NaNs equal (kind "bytes", "value"; the first differing element).
std::optional<Divergence> ComparePlans(const qd::TensorPlan& codec, const qd::TensorPlan& oracle,
                                       std::string_view target);
std::optional<Divergence> CompareValues(const float* codec, const float* oracle, std::size_t n,
                                        std::string_view name, std::uint64_t first,
                                        std::string_view target);

// A shape as "[3,512]", for details.
std::string ShapeText(std::span<const std::uint64_t> shape);

// One line describing a finding: "RBQ-005 error tensor=w field=scale row=1 ...".
std::string Describe(const qd::Finding& finding);

}  // namespace qd::harness

#endif  // QUANTDIFF_HARNESS_DIFFER_H_
