// stream_test: every format's codec_stream (what `decode` writes from)
// announces exactly codec_read's tensors, in order, before any values, and
// then passes the same values, one tensor at a time.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "harness/registry.h"

namespace {

// Records what the stream did, and checks the order of calls as it goes.
class RecordingSink : public qd::codec::DecodeSink {
 public:
  bool Plan(const std::vector<qd::codec::TensorInfo>& tensors) override {
    EXPECT_FALSE(planned_) << "Plan called twice";
    EXPECT_TRUE(taken.empty()) << "Plan after a tensor";
    planned_ = true;
    plan = tensors;
    return true;
  }
  bool Take(qd::DecodedTensor&& t) override {
    EXPECT_TRUE(planned_) << "a tensor before Plan";
    taken.push_back(std::move(t));
    return true;
  }
  std::vector<qd::codec::TensorInfo> plan;
  std::vector<qd::DecodedTensor> taken;

 private:
  bool planned_ = false;
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(CodecStream, MatchesCodecReadForEveryFormat) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    SCOPED_TRACE(std::string(f.name));
    ASSERT_NE(f.codec_stream, nullptr);
    std::size_t compared = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      qd::harness::Rng rng(seed);
      const qd::harness::Generated g = f.generate_valid(rng);
      const qd::ByteView view{g.bytes.data(), g.bytes.size()};
      const qd::Outcome read = f.codec_read(view, "s.safetensors", g.side_files);
      RecordingSink sink;
      const qd::Outcome streamed = f.codec_stream(view, "s.safetensors", g.side_files, sink);
      ASSERT_EQ(streamed.refused, read.refused) << "seed " << seed;
      ASSERT_EQ(streamed.findings.size(), read.findings.size()) << "seed " << seed;
      ASSERT_EQ(sink.plan.size(), read.tensors.size()) << "seed " << seed;
      ASSERT_EQ(sink.taken.size(), read.tensors.size()) << "seed " << seed;
      compared += read.tensors.size();
      for (std::size_t i = 0; i < read.tensors.size(); ++i) {
        EXPECT_EQ(sink.plan[i].name, read.tensors[i].name);
        EXPECT_EQ(sink.plan[i].shape, read.tensors[i].shape);
        EXPECT_EQ(sink.taken[i].name, read.tensors[i].name);
        EXPECT_EQ(sink.taken[i].shape, read.tensors[i].shape);
        EXPECT_TRUE(SameBits(sink.taken[i].values, read.tensors[i].values))
            << read.tensors[i].name << ", seed " << seed;
      }
    }
    EXPECT_GT(compared, 5u) << "the generators gave too few decoded tensors to compare";
  }
}

TEST(CodecStream, ARefusedFileAnnouncesNothing) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    SCOPED_TRACE(std::string(f.name));
    qd::harness::Rng rng(7);
    const qd::harness::Generated g = f.generate_violation(f.violable_rules().front(), rng);
    const qd::ByteView view{g.bytes.data(), g.bytes.size()};
    RecordingSink sink;
    const qd::Outcome streamed = f.codec_stream(view, "s.safetensors", g.side_files, sink);
    EXPECT_TRUE(streamed.refused);
    EXPECT_TRUE(sink.plan.empty());
    EXPECT_TRUE(sink.taken.empty());
  }
}

}  // namespace
