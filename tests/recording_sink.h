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
//   qd::test::ExpectOneTensorInSeveralChunks(sink, "w", {4096, 4096});
#ifndef QUANTDIFF_TESTS_RECORDING_SINK_H_
#define QUANTDIFF_TESTS_RECORDING_SINK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "quantdiff/tensor_sink.h"

namespace qd::test {

class RecordingSink : public qd::TensorSink {
 public:
  using TensorSink::Plan;
  bool Plan(const qd::TensorPlan& announced) override {
    ++plans;
    EXPECT_EQ(plans, 1) << "Plan called twice";
    EXPECT_EQ(chunks, 0u) << "values before the plan";
    plan.clear();
    tensors.clear();
    for (std::size_t i = 0; i < announced.size(); ++i) {
      const std::span<const std::uint64_t> shape = announced.shape(i);
      plan.push_back({std::string(announced.name(i)), {shape.begin(), shape.end()}});
      tensors.push_back({plan.back().name, plan.back().shape, {}});
    }
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

// SINK received one planned tensor, NAME of SHAPE, complete, in more than
// one chunk and none over kChunkValues: what a stream of a tensor larger
// than a chunk must do. Its values: sink.tensors[0].values.
inline void ExpectOneTensorInSeveralChunks(const RecordingSink& sink, const std::string& name,
                                           const std::vector<std::uint64_t>& shape) {
  ASSERT_EQ(sink.plan.size(), 1u);
  EXPECT_EQ(sink.plan[0].name, name);
  EXPECT_EQ(sink.plan[0].shape, shape);
  EXPECT_TRUE(sink.Complete());
  EXPECT_GT(sink.chunks, 1u);
  EXPECT_LE(sink.largest_chunk, qd::kChunkValues);
}

}  // namespace qd::test

#endif  // QUANTDIFF_TESTS_RECORDING_SINK_H_
