// rbq_seeds.cc: seeds of rbq_file_diff, rbq_roundtrip and rbq_matvec.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/rbq.h"
#include "fuzz/common/rbq_file_input.h"
#include "fuzz/seeds/seed_writer.h"
#include "generators/generators.h"
#include "harness/registry.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"

namespace qd::fuzz::seeds {

// ---- rbq_file_diff: tail-format inputs ------------------------------------------

qd::fuzz::RbqFileTail Tail(int bits, int rows, int blocks_per_row, int tensors, bool norm,
                           int exponent, std::uint64_t seed) {
  qd::fuzz::RbqFileTail t;
  t.bits = bits;
  t.rows = rows;
  t.blocks_per_row = blocks_per_row;
  t.tensor_count = tensors;
  t.with_norm = norm;
  t.magnitude_exponent = exponent;
  t.seed = seed;
  return t;
}

void RbqFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& rbq = *qd::harness::FindFormat("rbq");
  auto emit = [&](const Bytes& input) {
    const Bytes file = qd::fuzz::RbqFileFromInput(input.data(), input.size());
    w.Write("rbq_file_diff", Verdict(rbq.oracle_read({file.data(), file.size()}, "seed", {})), input);
  };
  using qd::fuzz::RbqOpWriter;
  // Plain valid files across the parameter space.
  emit(RbqOpWriter().Finish(Tail(4, 2, 2, 1, true, 0, 1)));
  emit(RbqOpWriter().Finish(Tail(8, 3, 1, 2, false, -20, 2)));   // subnormal scales
  emit(RbqOpWriter().Finish(Tail(4, 8, 4, 3, true, -30, 3)));    // scales underflow to 0
  emit(RbqOpWriter().Finish(Tail(8, 1, 4, 1, true, 12, 4)));     // large scales
  // One op sequence per rule.
  emit(RbqOpWriter().Replace("Q4B32", 1, "Q8B32").Finish(Tail(4, 2, 1, 2, true, 0, 5)));
  emit(RbqOpWriter().Replace("\"32\"", 0, "\"64\"").Finish(Tail(4, 1, 2, 1, false, 0, 6)));
  emit(RbqOpWriter().Replace("rabbit-q8b32", 0, "rabbit-q4b32").Finish(Tail(8, 2, 1, 1, true, 0, 7)));
  emit(RbqOpWriter().Replace("\"format\"", 0, "\"dtype\"").Finish(Tail(4, 1, 1, 1, false, 0, 8)));
  emit(RbqOpWriter().Replace("\"f16\"", 0, "\"bf16\"").Repad(0).Finish(Tail(8, 1, 1, 1, false, 0, 9)));
  emit(RbqOpWriter().Replace("\"shape\":[", 0, "\"shape\":[1,").Finish(Tail(4, 2, 2, 1, true, 0, 10)));
  emit(RbqOpWriter().Replace("32]", 0, "16]").Finish(Tail(8, 2, 1, 1, false, 0, 11)));
  emit(RbqOpWriter().Replace("[2,", 0, "[3,").Finish(Tail(4, 2, 1, 2, false, 0, 12)));
  emit(RbqOpWriter().ScaleSpecial(1, 0x7C00).Finish(Tail(4, 2, 2, 1, true, 0, 13)));
  emit(RbqOpWriter().ScaleSpecial(5, 0xFC00).ScaleSpecial(2, 0x7E00).Finish(Tail(8, 3, 2, 2, false, -4, 14)));
  emit(RbqOpWriter().Replace("\"F32\",\"shape\":[", 0, "\"F32\",\"shape\":[1,").Repad(0).Finish(Tail(4, 1, 1, 1, true, 0, 15)));
  // Scales and payloads that are odd but finite: the decode must agree.
  emit(RbqOpWriter().ScaleRaw(0, 0x0001).ScaleRaw(1, 0x8000).ScaleSpecial(2, 0x03FF)
           .ScaleSpecial(3, 0xFBFF).DataByte(5, 0x88).Finish(Tail(4, 2, 2, 1, false, 0, 16)));
  emit(RbqOpWriter().ScaleSpecial(0, 0x0000).DataByte(3, 0x80).DataByte(4, 0x7F)
           .Finish(Tail(8, 1, 2, 1, true, 0, 17)));
  // Container rules reached through the length prefix and the header text.
  emit(RbqOpWriter().LengthRaw(100000001).Finish(Tail(4, 1, 1, 1, false, 0, 18)));
  emit(RbqOpWriter().LengthDelta(8).Finish(Tail(4, 1, 1, 1, true, 0, 19)));
  emit(RbqOpWriter().Truncate(5).Finish(Tail(8, 1, 1, 1, false, 0, 20)));
  emit(RbqOpWriter().Append(3, 0).Finish(Tail(4, 1, 1, 1, false, 0, 21)));
  emit(RbqOpWriter().Replace("\"32\"", 0, "1e400").Finish(Tail(4, 1, 1, 1, false, 0, 22)));
  emit(RbqOpWriter().Splice(" ", 0, 0).Repad(0).Finish(Tail(8, 2, 1, 1, true, 0, 23)));
  // Whole files from the registry generator, through the raw flag.
  qd::fuzz::RbqFileTail raw;
  raw.raw = true;
  const auto raw_tail = qd::fuzz::EncodeRbqFileTail(raw);
  std::uint64_t s = 200;
  auto emit_raw = [&](const qd::harness::Generated& g) {
    Bytes input = g.bytes;
    input.insert(input.end(), raw_tail.begin(), raw_tail.end());
    emit(input);
  };
  {
    qd::harness::Rng rng(s++);
    emit_raw(rbq.generate_valid(rng));
  }
  for (const char* rule : {"RBQ-001", "RBQ-002", "RBQ-004"}) {
    qd::harness::Rng rng(s++);
    emit_raw(rbq.generate_violation(rule, rng));
  }
}

// ---- rbq_roundtrip: weights + 3-byte tail -------------------------------------------

struct RoundtripSeed {
  int bits = 4;
  int mode = 0;  // 0 f32, 1 int8*2^e, 2 f16, 3 int16*2^(e/2)
  int rows = 1;
  int blocks_per_row = 1;
  bool ragged = false;
  int e = 0;
  Bytes body;
};

Bytes Finish(const RoundtripSeed& s) {
  Bytes out = s.body;
  out.push_back(static_cast<std::uint8_t>((s.bits == 8 ? 1 : 0) | (s.ragged ? 2 : 0) | (s.mode << 2)));
  out.push_back(static_cast<std::uint8_t>((s.rows - 1) | ((s.blocks_per_row - 1) << 3) |
                                          (s.ragged ? 3 << 5 : 0)));
  out.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(s.e)));
  return out;
}


void RoundtripSeeds(SeedWriter& w) {
  auto emit = [&](const RoundtripSeed& s) {
    const Bytes input = Finish(s);
    // Name: what the oracle's quantizer says (decoding the weights as the
    // target does is the target's business; the seed's label is a hint).
    std::string label = "valid";
    const std::uint64_t columns =
        32 * static_cast<std::uint64_t>(s.blocks_per_row) + (s.ragged ? 13 : 0);
    std::vector<float> weights(s.rows * columns, 0.0f);
    std::size_t pos = 0;
    for (float& v : weights) {
      auto byte = [&]() -> std::uint8_t { return pos < s.body.size() ? s.body[pos++] : (++pos, 0); };
      if (s.mode == 0) {
        std::uint32_t x = 0;
        for (int i = 0; i < 4; ++i) x |= static_cast<std::uint32_t>(byte()) << (8 * i);
        v = std::bit_cast<float>(x);
      } else if (s.mode == 1) {
        v = std::ldexp(static_cast<float>(static_cast<std::int8_t>(byte())), s.e);
      } else if (s.mode == 2) {
        const std::uint16_t lo = byte();
        v = qd::oracle::HalfToFloat(static_cast<std::uint16_t>(lo | (byte() << 8)));
      } else {
        const std::uint16_t lo = byte();
        v = std::ldexp(static_cast<float>(static_cast<std::int16_t>(lo | (byte() << 8))), s.e / 2);
      }
    }
    Bytes blocks;
    qd::Finding error;
    if (!qd::oracle::QuantizeRbq(s.bits, weights.data(), s.rows, columns, &blocks, &error)) {
      label = error.rule;
    }
    w.Write("rbq_roundtrip", label, input);
  };
  // Realistic weights (the generator's styles: sparse, zero blocks, outliers,
  // near-underflow, integers) as binary32 bit patterns.
  int seed = 300;
  for (int bits : {4, 8}) {
    for (float magnitude : {1.0f, std::ldexp(1.0f, -20), std::ldexp(1.0f, 10)}) {
      for (int rep = 0; rep < 2; ++rep) {
        qd::harness::Rng rng(seed++);
        RoundtripSeed s;
        s.bits = bits;
        s.rows = 2 + rep;
        s.blocks_per_row = 1 + rep;
        for (float v : qd::gen::RandomWeights(s.rows * 32 * s.blocks_per_row, magnitude, rng)) {
          PutF32(&s.body, v);
        }
        emit(s);
      }
    }
  }
  {  // all-zero: no body at all
    RoundtripSeed s;
    s.rows = 3;
    s.blocks_per_row = 2;
    emit(s);
  }
  for (int bits : {4, 8}) {  // canonical blocks: +-levels in every block, scale 1
    RoundtripSeed s;
    s.bits = bits;
    s.mode = 1;
    s.rows = 2;
    const int levels = bits == 4 ? 7 : 127;
    for (int i = 0; i < 64; ++i) {
      const int v = i % 32 == 0 ? (i < 32 ? levels : -levels) : (i * 37) % (2 * levels + 1) - levels;
      s.body.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)));
    }
    emit(s);
  }
  {  // ties: block max 14 gives scale 2, so +-3 and +-5 land on .5
    RoundtripSeed s;
    s.mode = 1;
    for (int v : {14, 3, -3, 5, -5, 1, -1, 7, -7, 9, -9, 11, -11, 13, -13}) {
      s.body.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)));
    }
    emit(s);
  }
  {  // a -8 code: max 7.5 * 2^-24 makes the subnormal scale 2^-24, q = round(-7.5)
    RoundtripSeed s;
    s.mode = 1;
    s.e = -25;
    for (int v : {-15, 3, 1, 0, -2}) s.body.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(v)));
    emit(s);
  }
  {  // a -128 code: max 127.5 * 2^-24, int16 -255 * 2^-25
    RoundtripSeed s;
    s.bits = 8;
    s.mode = 3;
    s.e = -50;
    for (int v : {-255, 17, 200, -3}) {
      s.body.push_back(static_cast<std::uint8_t>(v & 0xff));
      s.body.push_back(static_cast<std::uint8_t>((v >> 8) & 0xff));
    }
    emit(s);
  }
  {  // binary16 weights including subnormals and the largest finite
    RoundtripSeed s;
    s.mode = 2;
    s.rows = 2;
    for (std::uint16_t h : {0x0001, 0x03FF, 0x7BFF, 0xFBFF, 0x8001, 0x3C00, 0x0400, 0x0000, 0x8000}) {
      s.body.push_back(static_cast<std::uint8_t>(h & 0xff));
      s.body.push_back(static_cast<std::uint8_t>(h >> 8));
    }
    emit(s);
  }
  {  // non-finite weights: RBQ-005
    RoundtripSeed s;
    s.bits = 8;
    PutF32(&s.body, 1.0f);
    PutF32(&s.body, std::nanf(""));
    emit(s);
    s.body.clear();
    s.bits = 4;
    PutF32(&s.body, 0.0f);
    PutF32(&s.body, -INFINITY);
    emit(s);
  }
  {  // a scale that overflows binary16: RBQ-005
    RoundtripSeed s;
    PutF32(&s.body, 1e6f);
    emit(s);
  }
  {  // ragged columns: RBQ-003
    RoundtripSeed s;
    s.ragged = true;
    PutF32(&s.body, 1.0f);
    emit(s);
  }
}

// ---- rbq_matvec: blocks + x + 2-byte tail ----------------------------------------------

struct MatvecSeed {
  int bits = 4;
  int rows = 1;
  int blocks_per_row = 1;
  Bytes blocks;  // rows * blocks_per_row blocks
  std::vector<float> x;
};

void MatvecSeeds(SeedWriter& w) {
  auto emit = [&](const MatvecSeed& s) {
    Bytes out = s.blocks;
    const std::size_t want = static_cast<std::size_t>(s.rows * s.blocks_per_row) * (s.bits == 4 ? 18 : 34);
    out.resize(want, 0);
    for (float v : s.x) PutF32(&out, v);
    out.resize(want + 4 * 32 * static_cast<std::size_t>(s.blocks_per_row), 0);
    out.push_back(static_cast<std::uint8_t>(s.bits == 8 ? 1 : 0));
    out.push_back(static_cast<std::uint8_t>((s.rows - 1) | ((s.blocks_per_row - 1) << 3)));
    w.Write("rbq_matvec", "valid", out);
  };
  int seed = 400;
  // Quantized random matrices times random vectors.
  for (int bits : {4, 8}) {
    for (int shape = 0; shape < 3; ++shape) {
      qd::harness::Rng rng(seed++);
      MatvecSeed s;
      s.bits = bits;
      s.rows = 1 + 3 * shape;
      s.blocks_per_row = 1 + 2 * shape;
      const std::uint64_t columns = 32 * static_cast<std::uint64_t>(s.blocks_per_row);
      const std::vector<float> wts = qd::gen::RandomWeights(s.rows * columns, 1.0f, rng);
      qd::Finding error;
      qd::codec::RbqQuantize(bits, wts.data(), s.rows, columns, &s.blocks, &error);
      s.x = qd::gen::RandomWeights(columns, shape == 2 ? 1000.0f : 1.0f, rng);
      emit(s);
    }
  }
  {  // all zero
    MatvecSeed s;
    s.rows = 2;
    emit(s);
  }
  {  // subnormal scales and subnormal x: the underflow term of the bound
    MatvecSeed s;
    s.bits = 8;
    s.rows = 2;
    for (int b = 0; b < 2; ++b) {
      s.blocks.push_back(b == 0 ? 0x01 : 0xFF);
      s.blocks.push_back(b == 0 ? 0x00 : 0x83);
      for (int k = 0; k < 32; ++k) s.blocks.push_back(static_cast<std::uint8_t>(k * 29 + 128));
    }
    for (int k = 0; k < 32; ++k) {
      s.x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>((k * 0x1357) | (k % 2 ? 0x80000000u : 0))));
    }
    emit(s);
  }
  for (int bits : {4, 8}) {  // lowest codes (-8 / -128), largest scale, |x| near 2^20
    MatvecSeed s;
    s.bits = bits;
    s.rows = 2;
    s.blocks_per_row = 2;
    const std::size_t payload = bits == 4 ? 16 : 32;
    for (int b = 0; b < 4; ++b) {
      s.blocks.push_back(0xFF);
      s.blocks.push_back(b % 2 ? 0x7B : 0xFB);
      for (std::size_t k = 0; k < payload; ++k) s.blocks.push_back(bits == 4 ? 0x88 : 0x80);
    }
    for (int k = 0; k < 64; ++k) s.x.push_back(std::ldexp(k % 3 ? 1.9f : -1.7f, 19));
    emit(s);
  }
  {  // cancellation: -7 and +7 codes against equal x, the exact sum is 0
    MatvecSeed s;
    s.rows = 1;
    s.blocks_per_row = 2;
    for (int b = 0; b < 2; ++b) {
      s.blocks.push_back(0x00);
      s.blocks.push_back(b ? 0x3C : 0x40);  // 1.0 and 2.0
      for (int k = 0; k < 16; ++k) s.blocks.push_back(b ? 0x97 : 0x79);  // codes (+-7, -+7)
    }
    // x[2j] == x[2j+1], so every pair of codes (-7, +7) cancels exactly.
    for (int k = 0; k < 64; ++k) s.x.push_back(3.1f + 0.37f * static_cast<float>(k / 2));
    emit(s);
  }
}



}  // namespace qd::fuzz::seeds
