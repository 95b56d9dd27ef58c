// decode_sink.h: decoded tensors handed over one at a time.
//
// A codec's Stream*File function announces every tensor it will produce (name
// and shape, in order) and then passes them one by one, so a caller such as
// `quantdiff decode` holds one decoded tensor at a time, not the whole file.
// The Decode*File functions are the same streams collected into a vector.
//
//   class Writer : public qd::codec::DecodeSink { ... };
//   Writer w(out);
//   qd::Outcome o = qd::codec::StreamRbqFile(bytes, name, w);
#ifndef QUANTDIFF_CODECS_DECODE_SINK_H_
#define QUANTDIFF_CODECS_DECODE_SINK_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "quantdiff/plain_data.h"

namespace qd::codec {

struct TensorInfo {
  std::string name;
  std::vector<std::uint64_t> shape;
};

class DecodeSink {
 public:
  virtual ~DecodeSink() = default;
  // Every tensor that will follow, in order, before any values. False stops.
  virtual bool Plan(const std::vector<TensorInfo>& tensors) = 0;
  // One tensor, in the announced order. False stops.
  virtual bool Take(qd::DecodedTensor&& tensor) = 0;
};

// Keeps every tensor; what the Decode*File functions return.
class CollectingSink : public DecodeSink {
 public:
  explicit CollectingSink(std::vector<qd::DecodedTensor>* out) : out_(out) {}
  bool Plan(const std::vector<TensorInfo>& tensors) override {
    out_->reserve(tensors.size());
    return true;
  }
  bool Take(qd::DecodedTensor&& tensor) override {
    out_->push_back(std::move(tensor));
    return true;
  }

 private:
  std::vector<qd::DecodedTensor>* out_;
};

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_DECODE_SINK_H_
