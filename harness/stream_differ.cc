#include "harness/stream_differ.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace qd::harness {
namespace {

std::uint64_t Elements(std::span<const std::uint64_t> shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

// What the oracle's thread hands to the comparing thread. The data it points
// to belongs to the oracle's reader and stays valid until Release().
struct Event {
  enum Kind { kNone, kPlan, kChunk, kEnd } kind = kNone;
  const qd::TensorPlan* plan = nullptr;
  qd::TensorChunk chunk;
};

// A one-slot rendezvous: the producer (the oracle's reader, through the
// TensorSink calls) waits in Plan/Take until the consumer has used what it
// handed over, so nothing is copied and one chunk is held. Once abandoned,
// the producer runs on to its end without waiting.
class Handoff : public qd::TensorSink {
 public:
  using TensorSink::Plan;
  bool Plan(const qd::TensorPlan& plan) override {
    Event e;
    e.kind = Event::kPlan;
    e.plan = &plan;
    Put(e);
    return true;
  }
  bool Take(const qd::TensorChunk& chunk) override {
    Event e;
    e.kind = Event::kChunk;
    e.chunk = chunk;
    Put(e);
    return true;
  }
  // The reader returned (or threw): no more events.
  void End() {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    changed_.notify_all();
  }

  // Consumer: the next event (kEnd when the reader is done), valid until
  // Release().
  Event Next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return full_ || ended_; });
    if (full_) return event_;
    Event end;
    end.kind = Event::kEnd;
    return end;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    full_ = false;
    changed_.notify_all();
  }
  void Abandon() {
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
    full_ = false;
    changed_.notify_all();
  }

 private:
  void Put(const Event& e) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (abandoned_) return;
    event_ = e;
    full_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !full_ || abandoned_; });
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  Event event_;
  bool full_ = false;
  bool ended_ = false;
  bool abandoned_ = false;
};

// Where the next value of a stream must belong: the tiling the sink contract
// promises (interface/quantdiff/tensor_sink.h). Advance() accepts a chunk
// only at that place, passing over empty tensors.
class Position {
 public:
  void Start(const qd::TensorPlan& plan) {
    sizes_.clear();
    sizes_.reserve(plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i) sizes_.push_back(Elements(plan.shape(i)));
    tensor_ = 0;
    next_ = 0;
    SkipFinished();
  }
  bool Advance(const qd::TensorChunk& c) {
    if (tensor_ >= sizes_.size() || c.tensor != tensor_ || c.first != next_ || c.count == 0 ||
        c.count > sizes_[tensor_] - next_) {
      return false;
    }
    next_ += c.count;
    SkipFinished();
    return true;
  }
  bool AtEnd() const { return tensor_ >= sizes_.size(); }
  std::size_t tensor() const { return tensor_; }
  std::uint64_t next() const { return next_; }

 private:
  void SkipFinished() {
    while (tensor_ < sizes_.size() && next_ == sizes_[tensor_]) {
      ++tensor_;
      next_ = 0;
    }
  }
  std::vector<std::uint64_t> sizes_;
  std::size_t tensor_ = 0;
  std::uint64_t next_ = 0;
};

// The codec's sink: every codec chunk is compared with the oracle's values
// pulled from the handoff. The first difference is kept and the rest of the
// values are only drained, so both readers still run to their end.
class LockstepComparer : public qd::TensorSink {
 public:
  LockstepComparer(Handoff* oracle, std::string_view target)
      : oracle_(oracle), target_(target) {}

  using TensorSink::Plan;
  bool Plan(const qd::TensorPlan& tensors) override {
    codec_names_.Keep(tensors);
    codec_planned_ = true;
    codec_at_.Start(tensors);
    const Event e = oracle_->Next();
    if (e.kind != Event::kPlan) {
      Diverge(Signature("tensor-count"), "the codec planned " + std::to_string(tensors.size()) +
                                             " tensors, the oracle none before " +
                                             (e.kind == Event::kEnd ? "its end" : "its values"));
      if (e.kind == Event::kChunk) oracle_->Release();
      return true;
    }
    oracle_planned_ = true;
    if (auto d = ComparePlans(tensors, *e.plan, target_)) Diverge(std::move(*d));
    oracle_at_.Start(*e.plan);
    oracle_->Release();
    return true;
  }

  bool Take(const qd::TensorChunk& chunk) override {
    if (first_) return true;
    if (!codec_planned_ || !codec_at_.Advance(chunk)) {
      Diverge(Signature("tensor-header"), OutOfPlace("codec", chunk));
      return true;
    }
    std::size_t done = 0;
    while (done < chunk.count) {
      if (!Pull()) return true;  // the oracle's stream ended or broke: recorded
      const std::size_t n = std::min(chunk.count - done, oracle_chunk_.count - oracle_used_);
      if (oracle_chunk_.tensor != chunk.tensor ||
          oracle_chunk_.first + oracle_used_ != chunk.first + done) {
        Diverge(Signature("tensor-header"),
                "tensor " + std::string(codec_names_[chunk.tensor]) + ": the codec's value " +
                    std::to_string(chunk.first + done) + " met the oracle's value " +
                    std::to_string(oracle_chunk_.first + oracle_used_) + " of tensor " +
                    std::to_string(oracle_chunk_.tensor));
        return true;
      }
      if (auto d = CompareValues(chunk.values + done, oracle_chunk_.values + oracle_used_, n,
                                 codec_names_[chunk.tensor], chunk.first + done, target_)) {
        Diverge(std::move(*d));
        return true;
      }
      done += n;
      oracle_used_ += n;
    }
    return true;
  }

  // After the codec's reader returned: the oracle must have no values left.
  void Finish() {
    if (first_ || !codec_planned_) return;
    if (!codec_at_.AtEnd()) {
      Diverge(Signature("tensor-header"),
              "the codec's values of tensor " + std::string(codec_names_[codec_at_.tensor()]) +
                  " stopped at element " + std::to_string(codec_at_.next()));
      return;
    }
    if (holding_ && oracle_used_ < oracle_chunk_.count) {
      Diverge(Signature("tensor-header"), "the oracle handed over more values than the codec");
      return;
    }
    if (holding_) {
      oracle_->Release();
      holding_ = false;
    }
    const Event e = oracle_->Next();
    if (e.kind != Event::kEnd) {
      Diverge(Signature("tensor-header"), "the oracle handed over more values than the codec");
    }
  }

  const std::optional<Divergence>& divergence() const { return first_; }

 private:
  // Makes oracle_chunk_ hold an unused value; false (and a divergence) when
  // the oracle has none left or hands over something out of place.
  bool Pull() {
    if (holding_ && oracle_used_ < oracle_chunk_.count) return true;
    if (holding_) {
      oracle_->Release();
      holding_ = false;
    }
    const Event e = oracle_->Next();
    if (e.kind != Event::kChunk) {
      if (e.kind == Event::kPlan) oracle_->Release();
      Diverge(Signature("tensor-header"),
              e.kind == Event::kEnd ? "the oracle's values ended before the codec's"
                                    : "the oracle planned twice");
      return false;
    }
    holding_ = true;
    oracle_chunk_ = e.chunk;
    oracle_used_ = 0;
    if (!oracle_planned_ || !oracle_at_.Advance(e.chunk)) {
      Diverge(Signature("tensor-header"), OutOfPlace("oracle", e.chunk));
      return false;
    }
    return true;
  }

  std::string Signature(std::string_view what) const {
    return "DIFF:" + std::string(target_) + ":bytes:" + std::string(what);
  }
  static std::string OutOfPlace(const std::string& side, const qd::TensorChunk& c) {
    return "the " + side + " handed over values " + std::to_string(c.first) + ".." +
           std::to_string(c.first + c.count) + " of tensor " + std::to_string(c.tensor) +
           " out of the planned order (interface/quantdiff/tensor_sink.h)";
  }
  void Diverge(std::string signature, std::string detail) {
    Diverge(Divergence{std::move(signature), std::move(detail)});
  }
  void Diverge(Divergence d) {
    if (!first_) first_ = std::move(d);
  }

  Handoff* oracle_;
  std::string_view target_;
  // The codec's tensor names, for messages (its plan lives only during
  // Plan, tensor_sink.h).
  qd::PlanNames codec_names_;
  bool codec_planned_ = false;
  bool oracle_planned_ = false;
  Position codec_at_;
  Position oracle_at_;
  bool holding_ = false;  // oracle_chunk_ is the handoff's current event
  qd::TensorChunk oracle_chunk_;
  std::size_t oracle_used_ = 0;
  std::optional<Divergence> first_;
};

}  // namespace

StreamedDiff DiffStreams(const FormatEntry& format, qd::ByteView file, const std::string& name,
                         const SideFiles& side_files) {
  return DiffReaders(
      std::string(format.name),
      [&](qd::TensorSink& sink) { return format.codec_stream(file, name, side_files, sink); },
      [&](qd::TensorSink& sink) { return format.oracle_stream(file, name, side_files, sink); });
}

StreamedDiff DiffReaders(const std::string& target, const StreamReader& codec,
                         const StreamReader& oracle) {
  StreamedDiff result;
  Handoff handoff;
  bool oracle_out_of_memory = false;
  std::thread oracle_thread([&] {
    result.oracle = GuardedRead([&] { return oracle(handoff); }, &result.oracle_error,
                                &oracle_out_of_memory);
    handoff.End();
  });
  LockstepComparer comparer(&handoff, target);
  result.codec = GuardedRead(
      [&]() -> qd::Outcome {
        qd::Outcome o = codec(comparer);
        comparer.Finish();
        return o;
      },
      &result.codec_error, &result.out_of_memory);
  handoff.Abandon();  // whatever the oracle still hands over is not looked at
  oracle_thread.join();
  result.out_of_memory = result.out_of_memory || oracle_out_of_memory;

  if (result.codec && result.oracle) {
    result.divergence = Compare(*result.codec, *result.oracle, target);
    // Compare saw no tensors (both lists are empty): for an accepted file
    // with agreeing findings, the values' verdict is the comparer's.
    if (!result.divergence && !result.codec->refused) result.divergence = comparer.divergence();
  } else {
    const std::string side = result.codec ? "oracle" : "codec";
    result.divergence = Divergence{
        "DIFF:" + target + ":exception:" + side,
        (result.codec ? result.oracle_error : result.codec_error) +
            (result.codec || result.oracle ? "" : "; oracle " + result.oracle_error)};
  }
  return result;
}

}  // namespace qd::harness
