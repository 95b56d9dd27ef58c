#include "harness/stream_differ.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include <nettle/sha2.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

// Gives the pages of freed heap memory back to the system. A reader of 1M
// tiny entries frees its records as small blocks between blocks still in
// use, which glibc keeps mapped; without this the second reader's peak
// stacked on the first one's leftovers (diff of a 59 MB header: 312 MB of
// anonymous memory before it, 209 MB after; issue 9, section 3).
void ReturnFreedMemory() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

// One reader's stream summarised: SHA-256 over its plan (the count, then
// each tensor's name and shape) and over its values in element order, so
// that two streams cut into different chunks summarise alike. The
// contract's order (tensor_sink.h) is checked as the chunks come, as the
// comparer does, and the values are taken as the comparer takes them (any
// NaN equal to any NaN); a stream that breaks the order, or plans twice, is
// not whole. Two whole streams with the same digest are the same stream
// (SHA-256: no two different streams, hostile or not, are known to share
// one).
class StreamDigest : public qd::TensorSink {
 public:
  StreamDigest() { sha256_init(&sha_); }

  using TensorSink::Plan;
  bool Plan(const qd::TensorPlan& plan) override {
    if (++plans_ > 1) {
      well_placed_ = false;
      return true;
    }
    AddNumber(plan.size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const std::string_view name = plan.name(i);
      AddNumber(name.size());
      sha256_update(&sha_, name.size(), reinterpret_cast<const std::uint8_t*>(name.data()));
      const std::span<const std::uint64_t> shape = plan.shape(i);
      AddNumber(shape.size());
      for (const std::uint64_t d : shape) AddNumber(d);
    }
    at_.Start(plan);
    return true;
  }
  bool Take(const qd::TensorChunk& chunk) override {
    if (plans_ != 1 || !at_.Advance(chunk)) {
      well_placed_ = false;
      return true;
    }
    // Values compare as CompareValues does (differ.cc): bit for bit, every
    // NaN equal to every NaN, so each NaN is summarised as one pattern.
    std::uint32_t bits[1024];
    for (std::size_t done = 0; done < chunk.count; done += std::size(bits)) {
      const std::size_t n = std::min(std::size(bits), chunk.count - done);
      for (std::size_t i = 0; i < n; ++i) {
        const float v = chunk.values[done + i];
        bits[i] = std::isnan(v) ? 0x7FC00000u : std::bit_cast<std::uint32_t>(v);
      }
      sha256_update(&sha_, n * sizeof bits[0], reinterpret_cast<const std::uint8_t*>(bits));
    }
    return true;
  }

  // After the reader returned: whether the stream kept the contract and
  // ended where its plan did (no plan at all counts as an empty one).
  bool Whole() const { return well_placed_ && (plans_ == 0 || at_.AtEnd()); }
  bool Planned() const { return plans_ > 0; }
  std::array<std::uint8_t, SHA256_DIGEST_SIZE> Digest() {
    std::array<std::uint8_t, SHA256_DIGEST_SIZE> digest{};
    sha256_digest(&sha_, digest.size(), digest.data());
    return digest;
  }

 private:
  // A number as 8 little-endian bytes, so that (name, shape) boundaries
  // cannot shift between two plans with the same bytes.
  void AddNumber(std::uint64_t n) {
    std::uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::uint8_t>(n >> (8 * i));
    sha256_update(&sha_, sizeof bytes, bytes);
  }

  sha256_ctx sha_{};
  int plans_ = 0;
  bool well_placed_ = true;
  Position at_;
};

// The second read of a divergent pair: both readers side by side, each codec
// chunk compared with the oracle's values at the same place, which names the
// first difference. Returns the comparer's divergence; the outcomes are
// those of the first read and are not looked at again.
std::optional<Divergence> LocateInLockstep(const std::string& target, const StreamReader& codec,
                                           const StreamReader& oracle, bool* out_of_memory) {
  Handoff handoff;
  std::string oracle_error;
  std::string codec_error;
  bool oracle_out_of_memory = false;
  std::thread oracle_thread([&] {
    GuardedRead([&] { return oracle(handoff); }, &oracle_error, &oracle_out_of_memory);
    handoff.End();
  });
  LockstepComparer comparer(&handoff, target);
  GuardedRead(
      [&]() -> qd::Outcome {
        qd::Outcome o = codec(comparer);
        comparer.Finish();
        return o;
      },
      &codec_error, out_of_memory);
  handoff.Abandon();  // whatever the oracle still hands over is not looked at
  oracle_thread.join();
  *out_of_memory = *out_of_memory || oracle_out_of_memory;
  return comparer.divergence();
}

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
  // One reader at a time, each summarised as it streams: only one reader's
  // records are alive at any moment (issue 9, section 3).
  ReturnFreedMemory();  // what detection freed
  StreamDigest codec_stream;
  result.codec = GuardedRead([&] { return codec(codec_stream); }, &result.codec_error,
                             &result.out_of_memory);
  ReturnFreedMemory();  // what the codec's reader freed
  StreamDigest oracle_stream;
  result.oracle = GuardedRead([&] { return oracle(oracle_stream); }, &result.oracle_error,
                              &result.out_of_memory);

  if (result.codec && result.oracle) {
    result.divergence = Compare(*result.codec, *result.oracle, target);
    // Compare saw no tensors (both lists are empty): for an accepted file
    // with agreeing findings, the values decide.
    if (!result.divergence && !result.codec->refused) {
      const bool same = codec_stream.Whole() && oracle_stream.Whole() &&
                        codec_stream.Planned() == oracle_stream.Planned() &&
                        codec_stream.Digest() == oracle_stream.Digest();
      if (!same) {
        result.divergence = LocateInLockstep(target, codec, oracle, &result.out_of_memory);
        if (!result.divergence && !result.out_of_memory) {
          result.divergence = Divergence{
              "DIFF:" + target + ":bytes:unrepeatable",
              "the readers' streams differed (plan, order or values) when each ran alone, and "
              "not when they ran again side by side: a reader's output is not the same on "
              "every run"};
        }
      }
    }
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
