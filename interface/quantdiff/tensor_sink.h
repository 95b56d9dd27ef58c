// tensor_sink.h: decoded values handed over a chunk at a time.
//
// The second header codecs/ and oracles/ both include, and as plain as the
// first: plumbing that knows no format. A reader's Stream*File function
// announces every tensor it will produce (name and shape, in order, Plan),
// then hands over their values in row-major order as chunks (Take): tensor
// by tensor in the announced order, each tensor's chunks in order, together
// covering each tensor's values exactly once. So `decode` writes and `diff`
// compares as the values come, holding a chunk, not the file (issue 9,
// section 3; README "Resources").
//
// A reader keeps a chunk to at most kChunkValues values where it can cut
// there (a row of a quantized matrix longer than that may come whole). The
// chunk's memory belongs to the reader and is valid only during Take.
//
//   class Writer : public qd::TensorSink { ... };
//   Writer w(out);
//   qd::Outcome o = qd::codec::StreamRbqFile(bytes, name, w);
#ifndef QUANTDIFF_TENSOR_SINK_H_
#define QUANTDIFF_TENSOR_SINK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd {

// 2^20 values: 4 MiB of F32, the "one row chunk of output" of the bound.
inline constexpr std::size_t kChunkValues = std::size_t{1} << 20;

struct TensorInfo {
  std::string name;
  std::vector<std::uint64_t> shape;
};

// What a reader announces: tensor i's name and shape, for i < size(). An
// interface, not a list, so that a reader can announce the tensors it
// already holds without a copy of every name and shape (issue 9, section 3:
// a plan of 1M tiny tensors was 90 MB a reader). Valid only during the Plan
// call; a sink that needs something later copies it.
class TensorPlan {
 public:
  virtual ~TensorPlan() = default;
  virtual std::size_t size() const = 0;
  virtual std::string_view name(std::size_t i) const = 0;
  virtual std::span<const std::uint64_t> shape(std::size_t i) const = 0;
};

// The plan of a reader that announces a list it built (a layer's few
// tensors): a view of that list.
class ListedPlan final : public TensorPlan {
 public:
  explicit ListedPlan(const std::vector<TensorInfo>& tensors) : tensors_(tensors) {}
  std::size_t size() const override { return tensors_.size(); }
  std::string_view name(std::size_t i) const override { return tensors_[i].name; }
  std::span<const std::uint64_t> shape(std::size_t i) const override { return tensors_[i].shape; }

 private:
  const std::vector<TensorInfo>& tensors_;
};

// Values [first, first + count) of tensor number `tensor` of the plan.
struct TensorChunk {
  std::size_t tensor = 0;
  std::uint64_t first = 0;
  const float* values = nullptr;
  std::size_t count = 0;
};

// A plan's names kept past the Plan call, back to back in one string: 8
// bytes a name besides its text, where a vector of strings costs 32 and more
// (issue 9, section 3).
class PlanNames {
 public:
  void Keep(const TensorPlan& plan) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) bytes += plan.name(i).size();
    text_.clear();
    ends_.clear();
    text_.reserve(bytes);
    ends_.reserve(plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
      text_ += plan.name(i);
      ends_.push_back(text_.size());
    }
  }
  std::size_t size() const { return ends_.size(); }
  std::string_view operator[](std::size_t i) const {
    const std::size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(text_).substr(begin, ends_[i] - begin);
  }

 private:
  std::string text_;
  std::vector<std::size_t> ends_;
};

class TensorSink {
 public:
  virtual ~TensorSink() = default;
  // Every tensor that will follow, in order, before any values. False stops.
  virtual bool Plan(const TensorPlan& plan) = 0;
  // The same for a plan built as a list.
  bool Plan(const std::vector<TensorInfo>& tensors) { return Plan(ListedPlan(tensors)); }
  // The next chunk, in the order above. False stops the reader.
  virtual bool Take(const TensorChunk& chunk) = 0;
};

// Keeps every value: what the whole-file readers (Decode*File, Read*File)
// return. Each tensor is sized from its planned shape; a chunk that does not
// fit its tensor stops the reader (a broken stream, never a silent overrun).
class CollectingSink : public TensorSink {
 public:
  explicit CollectingSink(std::vector<DecodedTensor>* out) : out_(out) {}
  using TensorSink::Plan;
  bool Plan(const TensorPlan& plan) override {
    out_->reserve(out_->size() + plan.size());
    base_ = out_->size();
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const std::span<const std::uint64_t> shape = plan.shape(i);
      out_->push_back(DecodedTensor{std::string(plan.name(i)), {shape.begin(), shape.end()}, {}});
    }
    return true;
  }
  bool Take(const TensorChunk& chunk) override {
    if (base_ + chunk.tensor >= out_->size()) return false;
    std::vector<float>& values = (*out_)[base_ + chunk.tensor].values;
    if (chunk.first != values.size()) return false;
    values.insert(values.end(), chunk.values, chunk.values + chunk.count);
    return true;
  }

 private:
  std::vector<DecodedTensor>* out_;
  std::size_t base_ = 0;
};

// How many rows of ROW_VALUES values make a chunk: as many as fit in
// kChunkValues, at least one.
inline std::uint64_t RowsPerChunk(std::uint64_t row_values) {
  return row_values == 0 || row_values >= kChunkValues ? 1 : kChunkValues / row_values;
}

// Hands VALUES over as tensor number TENSOR in chunks of kChunkValues: for a
// reader that has a whole tensor's values at once. An empty tensor has no
// chunk.
inline bool TakeWhole(TensorSink& sink, std::size_t tensor, const std::vector<float>& values) {
  for (std::size_t first = 0; first < values.size(); first += kChunkValues) {
    const std::size_t count = std::min(kChunkValues, values.size() - first);
    if (!sink.Take(TensorChunk{tensor, first, values.data() + first, count})) return false;
  }
  return true;
}

// Hands tensor number TENSOR of the plan, ROWS rows of ROW_VALUES values in
// row-major order, to SINK in chunks of whole rows (RowsPerChunk), decoded
// into one reused buffer: DECODE_ROWS(first_row, row_count, out) writes the
// row_count * ROW_VALUES values of those rows to out. A tensor whose values
// decode one by one passes rows of one value. An empty tensor has no chunk.
// False when the sink stops the reader.
//
//   StreamRows(sink, index, rows, columns,
//              [&](std::uint64_t row, std::uint64_t count, float* out) { ... });
template <class DecodeRows>
bool StreamRows(TensorSink& sink, std::size_t tensor, std::uint64_t rows,
                std::uint64_t row_values, DecodeRows&& decode_rows) {
  if (rows == 0 || row_values == 0) return true;
  const std::uint64_t rows_per_chunk = RowsPerChunk(row_values);
  std::vector<float> buffer(static_cast<std::size_t>(std::min(rows, rows_per_chunk) * row_values));
  for (std::uint64_t row = 0; row < rows; row += rows_per_chunk) {
    const std::uint64_t count = std::min(rows_per_chunk, rows - row);
    decode_rows(row, count, buffer.data());
    const TensorChunk chunk{tensor, row * row_values, buffer.data(),
                            static_cast<std::size_t>(count * row_values)};
    if (!sink.Take(chunk)) return false;
  }
  return true;
}

// A sink that declines every plan: a reader handed it runs its checks and
// stops before decoding (what `check` runs).
class DecliningSink : public TensorSink {
 public:
  using TensorSink::Plan;
  bool Plan(const TensorPlan&) override { return false; }
  bool Take(const TensorChunk&) override { return false; }
};

// The outcome of STREAM(sink) with every planned tensor's values collected:
// what a whole-file reader (Decode*File, Read*File) is.
//
//   return CollectStream([&](qd::TensorSink& sink) { return StreamRbqFile(f, n, sink); });
template <class Stream>
Outcome CollectStream(Stream&& stream) {
  std::vector<DecodedTensor> tensors;
  CollectingSink sink(&tensors);
  Outcome outcome = stream(sink);
  outcome.tensors = std::move(tensors);
  return outcome;
}

}  // namespace qd

#endif  // QUANTDIFF_TENSOR_SINK_H_
