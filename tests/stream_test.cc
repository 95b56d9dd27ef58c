// stream_test: every format's codec_stream (what `decode` writes from) and
// oracle_stream keep the chunk contract of interface/quantdiff/tensor_sink.h
// and hand over the oracle's values (oracle_read); DiffStreams (what `diff`
// runs) gives Compare's verdict on whole outcomes, and finds a difference
// wherever the two streams cut their chunks.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness/registry.h"
#include "harness/stream_differ.h"
#include "property_tests/gen/bnb_tables.h"
#include "property_tests/gen/files.h"
#include "tests/recording_sink.h"

namespace {

using qd::test::RecordingSink;
using Stream = qd::Outcome (*)(qd::ByteView, const std::string&, const qd::harness::SideFiles&,
                               qd::TensorSink&);

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// STREAM on every valid generated instance of F hands over oracle_read's
// tensors exactly, in chunks that keep the contract.
void ExpectStreamGivesOracleValues(const qd::harness::FormatEntry& f, Stream stream) {
  std::size_t compared = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = f.generate_valid(rng);
    const qd::ByteView view{g.bytes.data(), g.bytes.size()};
    const qd::Outcome want = f.oracle_read(view, "s.safetensors", g.side_files);
    RecordingSink sink;
    const qd::Outcome streamed = stream(view, "s.safetensors", g.side_files, sink);
    ASSERT_FALSE(want.refused) << "seed " << seed;
    ASSERT_EQ(streamed.refused, want.refused) << "seed " << seed;
    ASSERT_EQ(streamed.findings.size(), want.findings.size()) << "seed " << seed;
    EXPECT_TRUE(streamed.tensors.empty()) << "a stream keeps no values";
    ASSERT_EQ(sink.plan.size(), want.tensors.size()) << "seed " << seed;
    EXPECT_TRUE(sink.Complete()) << "seed " << seed;
    EXPECT_LE(sink.largest_chunk, qd::kChunkValues);
    compared += want.tensors.size();
    for (std::size_t i = 0; i < want.tensors.size(); ++i) {
      EXPECT_EQ(sink.plan[i].name, want.tensors[i].name);
      EXPECT_EQ(sink.plan[i].shape, want.tensors[i].shape);
      EXPECT_TRUE(SameBits(sink.tensors[i].values, want.tensors[i].values))
          << want.tensors[i].name << ", seed " << seed;
    }
  }
  EXPECT_GT(compared, 5u) << "the generators gave too few decoded tensors to compare";
}

TEST(CodecStream, HandsOverTheOraclesValuesForEveryFormat) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    SCOPED_TRACE(std::string(f.name));
    ExpectStreamGivesOracleValues(f, f.codec_stream);
  }
}

TEST(OracleStream, HandsOverOracleReadsValuesForEveryFormat) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    SCOPED_TRACE(std::string(f.name));
    ExpectStreamGivesOracleValues(f, f.oracle_stream);
  }
}

TEST(Streams, ARefusedFileAnnouncesNothing) {
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    SCOPED_TRACE(std::string(f.name));
    qd::harness::Rng rng(7);
    const qd::harness::Generated g = f.generate_violation(f.violable_rules().front(), rng);
    const qd::ByteView view{g.bytes.data(), g.bytes.size()};
    for (Stream stream : {f.codec_stream, f.oracle_stream}) {
      RecordingSink sink;
      const qd::Outcome streamed = stream(view, "s.safetensors", g.side_files, sink);
      EXPECT_TRUE(streamed.refused);
      EXPECT_EQ(sink.plans, 0);
      EXPECT_EQ(sink.chunks, 0u);
    }
  }
}

// DiffStreams and Compare on whole outcomes give the same answer, over valid
// instances and instances that break each rule.
TEST(DiffStreams, AgreesWithCompareOnWholeOutcomes) {
  std::size_t cases = 0;
  for (const qd::harness::FormatEntry& f : qd::harness::Formats()) {
    SCOPED_TRACE(std::string(f.name));
    std::vector<qd::harness::Generated> inputs;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      qd::harness::Rng rng(seed);
      inputs.push_back(f.generate_valid(rng));
    }
    for (const std::string& rule : f.violable_rules()) {
      qd::harness::Rng rng(11);
      inputs.push_back(f.generate_violation(rule, rng));
    }
    for (const qd::harness::Generated& g : inputs) {
      const qd::ByteView view{g.bytes.data(), g.bytes.size()};
      const qd::Outcome codec = f.codec_read(view, "s", g.side_files);
      const qd::Outcome oracle = f.oracle_read(view, "s", g.side_files);
      const auto whole = qd::harness::Compare(codec, oracle, f.name);
      const qd::harness::StreamedDiff streamed = qd::harness::DiffStreams(f, view, "s", g.side_files);
      ASSERT_TRUE(streamed.codec.has_value());
      ASSERT_TRUE(streamed.oracle.has_value());
      EXPECT_EQ(streamed.codec->refused, codec.refused);
      EXPECT_EQ(streamed.oracle->findings.size(), oracle.findings.size());
      EXPECT_EQ(streamed.divergence.has_value(), whole.has_value());
      if (whole && streamed.divergence) {
        EXPECT_EQ(streamed.divergence->signature, whole->signature);
      }
      ++cases;
    }
  }
  EXPECT_GT(cases, 50u);
}

// ---- differences planted in the codec's stream ---------------------------

// One F32 tensor "w" [rows, columns] whose value i is i (exact in F32 below
// 2^24), as a safetensors file.
std::vector<std::uint8_t> CountingTensor(std::uint64_t rows, std::uint64_t columns) {
  const std::uint64_t n = rows * columns;
  std::string header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(rows) + "," +
                       std::to_string(columns) + "],\"data_offsets\":[0," +
                       std::to_string(4 * n) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(i));
    for (int k = 0; k < 4; ++k) b.push_back(static_cast<std::uint8_t>(bits >> (8 * k)));
  }
  return b;
}

// What the planted codec does to the real one's stream.
struct Plant {
  std::size_t rechunk = 0;        // re-cut the values into chunks of this size
  std::int64_t flip_element = -1;  // flip the low bit of this value
  std::int64_t drop_chunk = -1;    // leave out this (re-cut) chunk
};
Plant g_plant;

class PlantingSink : public qd::TensorSink {
 public:
  explicit PlantingSink(qd::TensorSink* next) : next_(next) {}
  using TensorSink::Plan;
  bool Plan(const qd::TensorPlan& t) override { return next_->Plan(t); }
  bool Take(const qd::TensorChunk& c) override {
    std::vector<float> values(c.values, c.values + c.count);
    for (std::size_t i = 0; i < c.count; ++i) {
      if (static_cast<std::int64_t>(c.first + i) == g_plant.flip_element) {
        values[i] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(values[i]) ^ 1u);
      }
    }
    const std::size_t step = g_plant.rechunk ? g_plant.rechunk : c.count;
    for (std::size_t at = 0; at < c.count; at += step) {
      const std::size_t n = std::min(step, c.count - at);
      if (static_cast<std::int64_t>(cut_++) == g_plant.drop_chunk) continue;
      if (!next_->Take(qd::TensorChunk{c.tensor, c.first + at, values.data() + at, n})) return false;
    }
    return true;
  }

 private:
  qd::TensorSink* next_;
  std::size_t cut_ = 0;
};

qd::Outcome PlantedCodecStream(qd::ByteView file, const std::string& name,
                               const qd::harness::SideFiles& side_files, qd::TensorSink& sink) {
  PlantingSink planting(&sink);
  return qd::harness::FindFormat("safetensors")->codec_stream(file, name, side_files, planting);
}

qd::harness::StreamedDiff DiffPlanted(const std::vector<std::uint8_t>& file, Plant plant) {
  g_plant = plant;
  qd::harness::FormatEntry planted = *qd::harness::FindFormat("safetensors");
  planted.codec_stream = &PlantedCodecStream;
  return qd::harness::DiffStreams(planted, {file.data(), file.size()}, "w.safetensors", {});
}

// 2.5 chunks of values: the oracle cuts at kChunkValues, the planted codec at
// 1000 values, so no chunk boundary but 0 is shared.
const std::uint64_t kColumns = 1000;
const std::uint64_t kRows = (5 * qd::kChunkValues / 2) / kColumns;

TEST(DiffStreams, MisalignedChunksOfEqualValuesAgree) {
  const auto file = CountingTensor(kRows, kColumns);
  const auto d = DiffPlanted(file, Plant{.rechunk = 1000});
  ASSERT_TRUE(d.codec && d.oracle);
  EXPECT_FALSE(d.divergence.has_value()) << d.divergence->signature << ": " << d.divergence->detail;
}

TEST(DiffStreams, OneFlippedBitIsFoundAtItsElement) {
  const auto file = CountingTensor(kRows, kColumns);
  // In the third oracle chunk and the middle of a codec chunk.
  const std::int64_t element = static_cast<std::int64_t>(2 * qd::kChunkValues + 1234);
  const auto d = DiffPlanted(file, Plant{.rechunk = 1000, .flip_element = element});
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->signature, "DIFF:safetensors:bytes:value");
  EXPECT_NE(d.divergence->detail.find("element " + std::to_string(element) + ":"), std::string::npos)
      << d.divergence->detail;
  // The codec's value is the oracle's with the low bit flipped: i ^ 1 in the bits.
  char want[64];
  std::snprintf(want, sizeof want, "codec 0x%08x oracle 0x%08x",
                std::bit_cast<std::uint32_t>(static_cast<float>(element)) ^ 1u,
                std::bit_cast<std::uint32_t>(static_cast<float>(element)));
  EXPECT_NE(d.divergence->detail.find(want), std::string::npos) << d.divergence->detail;
}

TEST(DiffStreams, AMissingChunkIsATensorHeaderDivergence) {
  const auto file = CountingTensor(kRows, kColumns);
  const auto d = DiffPlanted(file, Plant{.rechunk = 1000, .drop_chunk = 7});
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->signature, "DIFF:safetensors:bytes:tensor-header");
}

TEST(DiffStreams, AMissingLastChunkIsFoundAtTheEnd) {
  const auto file = CountingTensor(2, 3);
  const auto d = DiffPlanted(file, Plant{.rechunk = 2, .drop_chunk = 2});
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->signature, "DIFF:safetensors:bytes:tensor-header");
  EXPECT_NE(d.divergence->detail.find("stopped at element 4"), std::string::npos)
      << d.divergence->detail;
}

// bnb's compatibility transpose (docs/bnb.md "Decoding": a packed weight of
// first dimension 1 and a rank-2 shape [R, C] come back as out.t(), [C, R])
// on a layer of more than kChunkValues values: both streams must cut it into
// several chunks and still give value (c, r) = flat element r * C + c, where
// flat element i = nf4[code i] * absmax[i / 64], code 2j the high nibble of
// packed byte j and 2j + 1 its low one. Bytes count (j * 7 + 3) mod 256;
// absmax[b] = 0.5, 1, 2 by b mod 3 (powers of two: every product exact).
TEST(Streams, BnbTransposedLayerLargerThanAChunkComesInChunks) {
  constexpr std::uint64_t kR = 3;
  constexpr std::uint64_t kC = 400000;
  constexpr std::uint64_t kN = kR * kC;
  constexpr std::uint64_t kBlock = 64;
  ASSERT_GT(kN, qd::kChunkValues);
  std::vector<std::uint8_t> packed(kN / 2);
  for (std::uint64_t j = 0; j < packed.size(); ++j) packed[j] = static_cast<std::uint8_t>((j * 7 + 3) % 256);
  const float kAbsmax[3] = {0.5f, 1.0f, 2.0f};
  std::vector<std::uint8_t> absmax;
  for (std::uint64_t b = 0; b < kN / kBlock; ++b) {
    const auto bits = std::bit_cast<std::uint32_t>(kAbsmax[b % 3]);
    for (int k = 0; k < 4; ++k) absmax.push_back(static_cast<std::uint8_t>(bits >> (8 * k)));
  }
  std::vector<std::uint8_t> quant_map;
  for (int code = 0; code < 16; ++code) {
    for (int k = 0; k < 4; ++k) quant_map.push_back(static_cast<std::uint8_t>(qdtest::kNf4Hex[code] >> (8 * k)));
  }
  const std::string state = "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float32\", "
                            "\"shape\": [3, 400000]}";
  const std::vector<std::uint8_t> file = qdtest::SafetensorsFile(
      {{"w", "U8", {1, kN / 2}, packed},
       {"w.absmax", "F32", {kN / kBlock}, absmax},
       {"w.quant_map", "F32", {16}, quant_map},
       {"w.quant_state.bitsandbytes__nf4", "U8", {state.size()}, {state.begin(), state.end()}}},
      nullptr);
  std::vector<float> want(kN);
  for (std::uint64_t i = 0; i < kN; ++i) {
    const std::uint8_t byte = packed[i / 2];
    const int code = i % 2 == 0 ? byte >> 4 : byte & 0x0F;
    const float flat = qdtest::BnbTableValue(/*fp4=*/false, code) * kAbsmax[(i / kBlock) % 3];
    const std::uint64_t r = i / kC;
    const std::uint64_t c = i % kC;
    want[c * kR + r] = flat;
  }
  const qd::harness::FormatEntry& bnb = *qd::harness::FindFormat("bnb");
  for (Stream stream : {bnb.oracle_stream, bnb.codec_stream}) {
    SCOPED_TRACE(stream == bnb.oracle_stream ? "oracle_stream" : "codec_stream");
    RecordingSink sink;
    const qd::Outcome o = stream({file.data(), file.size()}, "t.safetensors", {}, sink);
    ASSERT_FALSE(o.refused);
    EXPECT_TRUE(o.findings.empty());
    ASSERT_NO_FATAL_FAILURE(qd::test::ExpectOneTensorInSeveralChunks(sink, "w", {kC, kR}));
    EXPECT_TRUE(SameBits(sink.tensors[0].values, want));
  }
}


// ---- DiffReaders: one reader at a time, a second read to locate -----------

// A reader of a made-up input: it announces NAMES (each of shape [2]) and
// hands over VALUES(run) as one chunk per tensor, counting its runs and
// noting whether the other reader was running at the same time.
struct FakeReader {
  std::vector<std::string> names;
  std::function<std::vector<float>(int run)> values;  // 2 per tensor
  std::atomic<int>* running = nullptr;                // shared by both readers
  int runs = 0;
  bool overlapped = false;

  qd::Outcome operator()(qd::TensorSink& sink) {
    const int run = runs++;
    if (running->fetch_add(1) != 0) overlapped = true;
    std::vector<qd::TensorInfo> plan;
    for (const std::string& n : names) plan.push_back(qd::TensorInfo{n, {2}});
    sink.Plan(plan);
    const std::vector<float> v = values(run);
    for (std::size_t t = 0; t < names.size(); ++t) {
      // A pause inside the run, so that a reader started beside it would
      // be seen running.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      sink.Take(qd::TensorChunk{t, 0, v.data() + 2 * t, 2});
    }
    if (running->fetch_sub(1) != 1) overlapped = true;
    return qd::Outcome{};
  }
};

qd::harness::StreamedDiff Diff(FakeReader& codec, FakeReader& oracle) {
  return qd::harness::DiffReaders(
      "fake", [&](qd::TensorSink& s) { return codec(s); }, [&](qd::TensorSink& s) { return oracle(s); });
}

TEST(DiffReaders, EqualStreamsAreReadOnceEachAndNeverSideBySide) {
  std::atomic<int> running{0};
  auto same = [](int) { return std::vector<float>{1, 2, 3, 4}; };
  FakeReader codec{{"a", "b"}, same, &running};
  FakeReader oracle{{"a", "b"}, same, &running};
  const auto d = Diff(codec, oracle);
  EXPECT_FALSE(d.divergence.has_value()) << d.divergence->signature;
  // One reader's records alive at a time: the memory bound of `diff`.
  EXPECT_EQ(codec.runs, 1);
  EXPECT_EQ(oracle.runs, 1);
  EXPECT_FALSE(codec.overlapped);
  EXPECT_FALSE(oracle.overlapped);
}

TEST(DiffReaders, ADifferenceIsReadAgainAndNamedAtItsElement) {
  std::atomic<int> running{0};
  FakeReader codec{{"a", "b"}, [](int) { return std::vector<float>{1, 2, 3, 4}; }, &running};
  FakeReader oracle{{"a", "b"}, [](int) { return std::vector<float>{1, 2, 3, 5}; }, &running};
  const auto d = Diff(codec, oracle);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->signature, "DIFF:fake:bytes:value");
  // Tensor b, its element 1 (flat value 3 of the stream).
  EXPECT_NE(d.divergence->detail.find("b"), std::string::npos) << d.divergence->detail;
  EXPECT_NE(d.divergence->detail.find("element 1:"), std::string::npos) << d.divergence->detail;
  EXPECT_EQ(codec.runs, 2);
  EXPECT_EQ(oracle.runs, 2);
}

TEST(DiffReaders, NamesWithTheSameBytesCutElsewhereDiffer) {
  // "ab","c" and "a","bc": the same name bytes back to back, so a summary
  // that did not mark where each name ends would call the plans equal.
  std::atomic<int> running{0};
  auto same = [](int) { return std::vector<float>{1, 2, 3, 4}; };
  FakeReader codec{{"ab", "c"}, same, &running};
  FakeReader oracle{{"a", "bc"}, same, &running};
  const auto d = Diff(codec, oracle);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->signature.rfind("DIFF:fake:", 0), 0u) << d.divergence->signature;
  EXPECT_NE(d.divergence->signature, "DIFF:fake:bytes:unrepeatable");
  EXPECT_EQ(codec.runs, 2);
}

TEST(DiffReaders, ADifferenceTheSecondReadDoesNotShowIsUnrepeatable) {
  std::atomic<int> running{0};
  // The codec's first run differs, its second does not.
  FakeReader codec{{"a"}, [](int run) { return std::vector<float>{1, run == 0 ? 7.0f : 2.0f}; },
                   &running};
  FakeReader oracle{{"a"}, [](int) { return std::vector<float>{1, 2}; }, &running};
  const auto d = Diff(codec, oracle);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_EQ(d.divergence->signature, "DIFF:fake:bytes:unrepeatable");
}

TEST(DiffReaders, AStreamEndingEarlyIsNotEqualToAWholeOne) {
  std::atomic<int> running{0};
  auto same = [](int) { return std::vector<float>{1, 2, 3, 4}; };
  FakeReader codec{{"a", "b"}, same, &running};
  FakeReader oracle{{"a", "b", "c"}, [](int) { return std::vector<float>{1, 2, 3, 4, 5, 6}; },
                    &running};
  // The oracle plans c and hands over its values; the codec plans no c.
  const auto d = Diff(codec, oracle);
  ASSERT_TRUE(d.divergence.has_value());
  EXPECT_NE(d.divergence->signature, "DIFF:fake:bytes:unrepeatable");
}

TEST(DiffReaders, NansOfDifferentPayloadsAreEqualAsInCompareValues) {
  // CompareValues (differ.cc) takes any NaN as equal to any NaN; the one-
  // reader-at-a-time summaries must too, or the pair would be read again and
  // called unrepeatable.
  std::atomic<int> running{0};
  const float quiet = std::bit_cast<float>(0x7FC00000u);
  const float payload = std::bit_cast<float>(0xFFC01234u);
  FakeReader codec{{"a"}, [&](int) { return std::vector<float>{quiet, 1}; }, &running};
  FakeReader oracle{{"a"}, [&](int) { return std::vector<float>{payload, 1}; }, &running};
  const auto d = Diff(codec, oracle);
  EXPECT_FALSE(d.divergence.has_value()) << d.divergence->signature;
  EXPECT_EQ(codec.runs, 1);
}

}  // namespace
