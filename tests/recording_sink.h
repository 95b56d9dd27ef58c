// recording_sink.h: a TensorSink for tests that holds a stream to the
// contract of interface/quantdiff/tensor_sink.h while it records it.
//
// It fails the running test when a reader plans twice, hands over values
// before the plan, skips or repeats values, goes back to an earlier tensor,
// or overruns a tensor's planned shape; it assembles the values per planned
// tensor so a test compares them with values from elsewhere (the oracle,
// test-side arithmetic).
//
//   qd::test::RecordingSink sink;
//   f.codec_stream(bytes, name, side_files, sink);
//   EXPECT_EQ(sink.tensors[0].values, want);
#ifndef QUANTDIFF_TESTS_RECORDING_SINK_H_
#define QUANTDIFF_TESTS_RECORDING_SINK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "quantdiff/tensor_sink.h"

namespace qd::test {

class RecordingSink : public qd::TensorSink {
 public:
  bool Plan(const std::vector<qd::TensorInfo>& tensors) override {
    ++plans;
    EXPECT_EQ(plans, 1) << "Plan called twice";
    EXPECT_EQ(chunks, 0u) << "values before the plan";
    plan = tensors;
    this->tensors.clear();
    for (const qd::TensorInfo& t : tensors) this->tensors.push_back({t.name, t.shape, {}});
    return accept_plan;
  }
  bool Take(const qd::TensorChunk& chunk) override {
    ++chunks;
    EXPECT_EQ(plans, 1) << "a chunk before the plan";
    EXPECT_LT(chunk.tensor, tensors.size()) << "a chunk of no planned tensor";
    if (chunk.tensor >= tensors.size()) return false;
    EXPECT_GE(chunk.tensor, current_) << "a chunk of an earlier tensor";
    EXPECT_GT(chunk.count, 0u) << "an empty chunk";
    current_ = chunk.tensor;
    std::vector<float>& values = tensors[chunk.tensor].values;
    EXPECT_EQ(chunk.first, values.size()) << "values skipped or repeated in " << plan[chunk.tensor].name;
    values.insert(values.end(), chunk.values, chunk.values + chunk.count);
    EXPECT_LE(values.size(), Elements(plan[chunk.tensor].shape))
        << "more values than the shape of " << plan[chunk.tensor].name;
    largest_chunk = std::max(largest_chunk, chunk.count);
    return true;
  }
  // Every planned tensor received exactly its shape's count of values.
  bool Complete() const {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      if (tensors[i].values.size() != Elements(plan[i].shape)) return false;
    }
    return true;
  }
  static std::uint64_t Elements(const std::vector<std::uint64_t>& shape) {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
  }

  std::vector<qd::TensorInfo> plan;
  std::vector<qd::DecodedTensor> tensors;  // one per planned tensor
  int plans = 0;
  std::size_t chunks = 0;
  std::size_t largest_chunk = 0;
  bool accept_plan = true;

 private:
  std::size_t current_ = 0;
};

}  // namespace qd::test

#endif  // QUANTDIFF_TESTS_RECORDING_SINK_H_
