// make_seeds.cc: writes the deterministic seed corpus of every fuzz target.
//
//   qd_make_seeds [--replace] OUTDIR
//
// writes OUTDIR/<target>/<rule-or-valid>-<sha1:8> for the targets
// safetensors_header_diff, rbq_file_diff, rbq_roundtrip, rbq_matvec,
// bnb_file_diff, bnb_roundtrip, gptq_file_diff, gptq_config_diff,
// gptq_roundtrip, pt_file_diff, recognised_file_diff, model_dir_diff, awq_file_diff,
// fp8_file_diff (its seeds: fuzz/common/fp8_file_input.cc)
// ggml_blocks_diff, gguf_file_diff and ggml_st_file_diff.
// <rule-or-valid> is what the oracle makes of the seed (its error rule, else
// its first warning, else "valid"); <sha1:8> is the first 8 hex digits of
// the file's SHA-1 (fuzz/common/sha1.cc), as `sha1sum` prints them.
// --replace first deletes the inputs already in those folders (hidden
// files and README files are kept). Every seed comes from a fixed generator
// seed, so two runs write the same files.
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/float16.h"
#include "codecs/ggml_blocks.h"
#include "codecs/rbq.h"
#include "fuzz/common/awq_file_input.h"
#include "fuzz/common/fp8_file_input.h"
#include "fuzz/common/bnb_file_input.h"
#include "fuzz/common/gguf_seeds.h"
#include "fuzz/common/gptq_file_input.h"
#include "fuzz/common/model_dir_input.h"
#include "fuzz/common/pt_file_input.h"
#include "fuzz/common/rbq_file_input.h"
#include "fuzz/common/recognised_file_input.h"
#include "fuzz/common/sha1.h"
#include "generators/generators.h"
#include "harness/registry.h"
#include "oracles/bnb.h"
#include "oracles/gptq.h"
#include "oracles/model_dir.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

// What the oracle says of an outcome: error rule, else first warning, else valid.
std::string Verdict(const qd::Outcome& o) {
  for (const qd::Finding& f : o.findings) {
    if (f.severity == qd::Severity::kError) return f.rule;
  }
  return o.findings.empty() ? "valid" : o.findings.front().rule;
}

class SeedWriter {
 public:
  SeedWriter(fs::path root, bool replace) : root_(std::move(root)), replace_(replace) {}

  void Write(const std::string& target, const std::string& label, const Bytes& bytes) {
    const fs::path dir = root_ / target;
    if (!prepared_[target]) {
      fs::create_directories(dir);
      if (replace_) {
        for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
          const std::string name = e.path().filename().string();
          if (e.is_regular_file() && name[0] != '.' && name.rfind("README", 0) != 0) {
            fs::remove(e.path());
          }
        }
      }
      prepared_[target] = true;
    }
    const std::string name = label + "-" + qd::fuzz::Sha1Hex(bytes).substr(0, 8);
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
      std::exit(1);
    }
    ++count_[target];
    total_bytes_ += bytes.size();
  }

  void Summary() const {
    for (const auto& [target, n] : count_) std::printf("%-24s %d seeds\n", target.c_str(), n);
    std::printf("total %zu bytes\n", total_bytes_);
  }

 private:
  fs::path root_;
  bool replace_;
  std::map<std::string, bool> prepared_;
  std::map<std::string, int> count_;
  std::size_t total_bytes_ = 0;
};

// ---- safetensors_header_diff: the registry's generators -----------------------

void SafetensorsSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& st = *qd::harness::FindFormat("safetensors");
  const qd::harness::FormatEntry& rbq = *qd::harness::FindFormat("rbq");
  auto emit = [&](const qd::harness::Generated& g) {
    const qd::Outcome o = st.oracle_read({g.bytes.data(), g.bytes.size()}, "seed", g.side_files);
    const std::string verdict = Verdict(o);
    const std::string expected = g.expected_rule.empty() ? "valid" : g.expected_rule;
    if (verdict != expected) {
      std::printf("note: safetensors generator meant %s (%s), oracle says %s\n",
                  expected.c_str(), g.description.c_str(), verdict.c_str());
    }
    w.Write("safetensors_header_diff", verdict, g.bytes);
  };
  for (std::uint64_t s = 1; s <= 3; ++s) {
    qd::harness::Rng rng(s);
    emit(st.generate_valid(rng));
  }
  qd::harness::Rng rbq_rng(4);
  emit(rbq.generate_valid(rbq_rng));  // block dtypes, read as a plain container
  std::uint64_t s = 100;
  for (const std::string& rule : st.violable_rules()) {
    const int copies = (rule == "ST-004" || rule == "ST-007" || rule == "ST-009") ? 3 : 1;
    for (int c = 0; c < copies; ++c) {
      qd::harness::Rng rng(s++);
      emit(st.generate_violation(rule, rng));
    }
  }
}

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

void PutF32(Bytes* b, float v) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(v);
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<std::uint8_t>(x >> (8 * i)));
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


// ---- bnb_file_diff: tail-format inputs ------------------------------------------

qd::fuzz::BnbFileTail BnbTail(qd::fuzz::BnbFileKind kind, bool fp4, bool nested, int dtype,
                              std::uint32_t seed) {
  qd::fuzz::BnbFileTail t;
  t.kind = kind;
  t.fp4 = fp4;
  t.nested = nested;
  t.dtype = dtype;
  t.seed = seed;
  t.rank = 2;
  t.dim_a = 3;   // 4 rows
  t.dim_b = 47;  // 48 columns: n = 192, three 64-blocks
  return t;
}

void BnbFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& bnb = *qd::harness::FindFormat("bnb");
  auto emit = [&](const Bytes& input, const char* meant) {
    const Bytes file = qd::fuzz::BnbFileFromInput(input.data(), input.size());
    const std::string verdict = Verdict(bnb.oracle_read({file.data(), file.size()}, "seed", {}));
    if (verdict != meant) std::printf("note: bnb_file_diff seed meant %s, oracle says %s\n", meant, verdict.c_str());
    w.Write("bnb_file_diff", verdict, input);
  };
  using qd::fuzz::BnbAdd;
  using qd::fuzz::BnbFileKind;
  using qd::fuzz::BnbOpWriter;
  using qd::fuzz::BnbRole;
  constexpr std::uint32_t kInf = 0x7f800000u, kNegInf = 0xff800000u, kNaN = 0x7fc00000u;
  // Valid layers across the parameter space.
  {
    auto t = BnbTail(BnbFileKind::k4bitHf, false, false, 0, 501);
    emit(BnbOpWriter().Finish(t), "valid");
  }
  {  // GPT-QModel names, FP4, nested statistics, bfloat16, F32 quant_storage, rank 3
    auto t = BnbTail(BnbFileKind::k4bitGptq, true, true, 1, 502);
    t.rank = 3;
    t.dim_a = 0x1d;  // [2, 8, 40]
    t.dim_b = 39;
    t.storage = 3;
    t.blocksize_log2 = 5;
    t.nested_blocksize_log2 = 5;
    t.extra_tensor = true;
    emit(BnbOpWriter().Finish(t), "valid");
  }
  {  // blockwise8, nested, shape null, float32, tensors reversed
    auto t = BnbTail(BnbFileKind::kBlockwise8, false, true, 2, 503);
    t.shape_key = 1;
    t.order = 1;
    t.blocksize_log2 = 5;
    emit(BnbOpWriter().Finish(t), "valid");
  }
  {  // int8 HF with weight_format and a plain tensor; int8 GPT-QModel, bare names
    auto t = BnbTail(BnbFileKind::kInt8Hf, false, false, 2, 504);
    t.weight_format = true;
    t.extra_tensor = true;
    emit(BnbOpWriter().Finish(t), "valid");
    auto g = BnbTail(BnbFileKind::kInt8Gptq, false, false, 2, 505);
    g.module = 1;
    emit(BnbOpWriter().Finish(g), "valid");
  }
  {  // bnb's compatibility transpose: shape [1, 2], packed [1, 1]
    auto t = BnbTail(BnbFileKind::k4bitHf, true, false, 2, 506);
    t.dim_a = 0;
    t.dim_b = 1;
    t.packed_layout = 1;
    emit(BnbOpWriter().Finish(t), "valid");
  }
  {  // an empty layer, 4096-blocks over a rank-1 tensor with a partial block
    auto t = BnbTail(BnbFileKind::k4bitHf, false, false, 0, 507);
    t.zero_dim = true;
    emit(BnbOpWriter().Finish(t), "valid");
    auto r = BnbTail(BnbFileKind::k4bitGptq, false, true, 0, 508);
    r.rank = 1;
    r.dim_a = 0x10;  // n = 1 + 0x1210 = 4625
    r.dim_b = 0x12;
    r.blocksize_log2 = 12;
    r.nested_blocksize_log2 = 5;
    emit(BnbOpWriter().Finish(r), "valid");
  }
  {  // FP4 code 8 (+0.0) and code 0 in the packed bytes: decoded the same
    auto t = BnbTail(BnbFileKind::k4bitHf, true, false, 2, 509);
    emit(BnbOpWriter().SetByte(BnbRole::kWeight, 0, 0x88).SetByte(BnbRole::kWeight, 1, 0x08)
             .SetByte(BnbRole::kWeight, 2, 0x80).Finish(t), "valid");
  }
  // One op sequence per rule, in docs/bnb.md's check order.
  emit(BnbOpWriter().DropTensor(BnbRole::kWeight).Finish(BnbTail(BnbFileKind::k4bitHf, false, true, 0, 510)),
       "BNB-105");
  emit(BnbOpWriter().AddTensor(BnbAdd::kSecondHfState).Finish(BnbTail(BnbFileKind::k4bitHf, true, false, 1, 511)),
       "BNB-105");
  emit(BnbOpWriter().StateSplice("{", 0, 0).Finish(BnbTail(BnbFileKind::k4bitGptq, false, false, 2, 512)),
       "BNB-101");
  emit(BnbOpWriter().SetKey("shape", "[1.5]").Finish(BnbTail(BnbFileKind::k4bitHf, false, false, 2, 513)),
       "BNB-101");
  emit(BnbOpWriter().SetKey("quant_type", "\"int4\"").Finish(BnbTail(BnbFileKind::k4bitGptq, false, false, 0, 514)),
       "BNB-001");
  emit(BnbOpWriter().Rename(BnbRole::kState, 7).Finish(BnbTail(BnbFileKind::k4bitHf, false, false, 0, 515)),
       "BNB-102");
  emit(BnbOpWriter().SetKey("blocksize", "48").Finish(BnbTail(BnbFileKind::k4bitHf, true, true, 1, 516)),
       "BNB-001");
  emit(BnbOpWriter().SetKey("dtype", "\"float64\"").Finish(BnbTail(BnbFileKind::k4bitGptq, true, false, 2, 517)),
       "BNB-103");
  emit(BnbOpWriter().DropKey("nested_offset").Finish(BnbTail(BnbFileKind::k4bitHf, false, true, 2, 518)),
       "BNB-004");
  emit(BnbOpWriter().Resize(BnbRole::kWeight, 1).Finish(BnbTail(BnbFileKind::k4bitHf, false, false, 2, 519)),
       "BNB-002");
  emit(BnbOpWriter().TensorDtype(BnbRole::kAbsmax, "U8", true).Finish(BnbTail(BnbFileKind::k4bitGptq, false, false, 2, 520)),
       "BNB-102");
  emit(BnbOpWriter().Resize(BnbRole::kAbsmax, -1).Finish(BnbTail(BnbFileKind::k4bitHf, true, false, 0, 521)),
       "BNB-001");
  emit(BnbOpWriter().SetFloat(BnbRole::kAbsmax, 1, kInf).Finish(BnbTail(BnbFileKind::k4bitHf, false, false, 2, 522)),
       "BNB-104");
  emit(BnbOpWriter().SetFloat(BnbRole::kNestedQuantMap, 200, kNaN).Finish(BnbTail(BnbFileKind::k4bitGptq, true, true, 0, 523)),
       "BNB-104");
  {
    auto t = BnbTail(BnbFileKind::k4bitHf, false, false, 1, 524);
    t.quant_map = 2;  // the FP4 table stored beside an NF4 layer
    emit(BnbOpWriter().Finish(t), "BNB-106");
  }
  emit(BnbOpWriter().SetKey("blocksize", "100").Finish(BnbTail(BnbFileKind::kBlockwise8, false, false, 0, 525)),
       "BNB-107");
  emit(BnbOpWriter().TensorDtype(BnbRole::kWeight, "I8", false).Finish(BnbTail(BnbFileKind::kBlockwise8, false, true, 1, 526)),
       "BNB-107");
  emit(BnbOpWriter().SetFloat(BnbRole::kQuantMap, 255, kNegInf).Finish(BnbTail(BnbFileKind::kBlockwise8, false, false, 2, 527)),
       "BNB-104");
  {
    auto t = BnbTail(BnbFileKind::kInt8Hf, false, false, 2, 528);
    t.weight_format = true;
    emit(BnbOpWriter().SetByte(BnbRole::kWeightFormat, 0, 1).Finish(t), "BNB-108");
  }
  emit(BnbOpWriter().SetFloat(BnbRole::kScale, 0, kNegInf).Finish(BnbTail(BnbFileKind::kInt8Gptq, false, false, 2, 529)),
       "BNB-104");
  // Container rules in front of the bnb ones.
  emit(BnbOpWriter().HeaderSplice("\xff", 20, 0).Finish(BnbTail(BnbFileKind::k4bitHf, false, false, 0, 530)),
       "ST-004");
  // Whole files from the registry generator, through the raw flag.
  qd::fuzz::BnbFileTail raw;
  raw.raw = true;
  const auto raw_tail = qd::fuzz::EncodeBnbFileTail(raw);
  auto emit_raw = [&](const qd::harness::Generated& g) {
    Bytes input = g.bytes;
    input.insert(input.end(), raw_tail.begin(), raw_tail.end());
    emit(input, g.expected_rule.empty() ? "valid" : g.expected_rule.c_str());
  };
  {
    qd::harness::Rng rng(540);
    emit_raw(bnb.generate_valid(rng));
  }
  qd::harness::Rng rng(541);
  emit_raw(bnb.generate_violation("BNB-004", rng));
}

// ---- bnb_roundtrip: values + 4-byte tail ------------------------------------------------

struct BnbRoundtripSeed {
  bool fp4 = false;
  int dtype = 2;  // 0 float16, 1 bfloat16, 2 float32
  bool nested = false;
  int blocksize_log2 = 6;
  int nested_blocksize_log2 = 8;
  bool repeat = false;
  std::uint64_t n = 0;
  Bytes body;
};

void BnbRoundtripSeeds(SeedWriter& w) {
  auto emit = [&](const BnbRoundtripSeed& s) {
    Bytes input = s.body;
    input.push_back(static_cast<std::uint8_t>((s.fp4 ? 1 : 0) | (s.dtype << 1) | (s.nested ? 8 : 0) |
                                              ((s.blocksize_log2 - 5) << 4)));
    input.push_back(static_cast<std::uint8_t>((s.nested_blocksize_log2 - 5) | (s.repeat ? 32 : 0)));
    input.push_back(static_cast<std::uint8_t>(s.n & 0xff));
    input.push_back(static_cast<std::uint8_t>(s.n >> 8));
    // Name: what the oracle's quantizer makes of the values (as the target reads them).
    const std::size_t width = s.dtype == 2 ? 4 : 2;
    const std::size_t available = s.body.size() / width;
    std::vector<float> x(s.n, 0.0f);
    for (std::uint64_t i = 0; i < s.n; ++i) {
      if (i >= available && (!s.repeat || available == 0)) break;
      const std::uint8_t* p = s.body.data() + width * (i % available);
      std::uint32_t bits = 0;
      if (s.dtype == 2) {
        std::memcpy(&bits, p, 4);
        x[i] = std::bit_cast<float>(bits);
      } else {
        const std::uint16_t h = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
        x[i] = s.dtype == 0 ? qd::oracle::HalfToFloat(h) : std::bit_cast<float>(std::uint32_t{h} << 16);
      }
    }
    std::vector<std::uint8_t> packed;
    std::vector<float> absmax;
    qd::Finding error;
    const char* dtypes[] = {"float16", "bfloat16", "float32"};
    const bool ok = qd::oracle::QuantizeBnb4bit(s.fp4 ? "fp4" : "nf4", 32 << (s.blocksize_log2 - 5),
                                                dtypes[s.dtype], x.data(), s.n, &packed, &absmax, &error);
    w.Write("bnb_roundtrip", ok ? "valid" : error.rule, input);
  };
  auto put16 = [](Bytes* b, std::uint16_t v) {
    b->push_back(static_cast<std::uint8_t>(v & 0xff));
    b->push_back(static_cast<std::uint8_t>(v >> 8));
  };
  // Realistic weights (the generator's styles) in every dtype, flat and nested.
  int seed = 600;
  for (int dtype = 0; dtype < 3; ++dtype) {
    for (bool fp4 : {false, true}) {
      qd::harness::Rng rng(seed++);
      BnbRoundtripSeed s;
      s.fp4 = fp4;
      s.dtype = dtype;
      s.nested = (dtype + fp4) % 2 == 0;
      s.blocksize_log2 = 5 + (seed % 4);
      s.n = 300 + 37 * static_cast<std::uint64_t>(seed % 5);
      for (float v : qd::gen::RandomWeights(s.n, std::ldexp(1.0f, dtype * 3 - 3), rng)) {
        const float r = qd::codec::BnbRoundToDtype(v, static_cast<qd::codec::BnbDtype>(dtype));
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(r);
        if (dtype == 2) {
          PutF32(&s.body, r);
        } else if (dtype == 1) {
          put16(&s.body, static_cast<std::uint16_t>(bits >> 16));
        } else {
          put16(&s.body, qd::codec::F32ToF16(r));
        }
      }
      emit(s);
    }
  }
  {  // three 4096-blocks, the last partial, from a repeated body; nested over 32-blocks
    qd::harness::Rng rng(620);
    BnbRoundtripSeed s;
    s.dtype = 1;
    s.blocksize_log2 = 12;
    s.nested = true;
    s.nested_blocksize_log2 = 5;
    s.repeat = true;
    s.n = 3 * 4096 - 5;
    for (float v : qd::gen::RandomWeights(509, 1.0f, rng)) {
      put16(&s.body, static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16));
    }
    emit(s);
  }
  {  // all zero (no body): absmax 0, scaled by the 1e-38 floor; and n = 0, n = 1
    BnbRoundtripSeed s;
    s.n = 4096;
    s.nested = true;
    emit(s);
    s.n = 0;
    emit(s);
    s.n = 1;
    s.fp4 = true;
    PutF32(&s.body, -3.0f);
    emit(s);
  }
  {  // values on the table midpoints (a tie goes to the lower code), absmax 1
    for (bool fp4 : {false, true}) {
      float bounds[15];
      int order[16];
      qd::oracle::Bnb4bitBounds(fp4 ? "fp4" : "nf4", bounds, order);
      BnbRoundtripSeed s;
      s.fp4 = fp4;
      s.blocksize_log2 = 5;
      PutF32(&s.body, 1.0f);
      for (float b : bounds) {
        PutF32(&s.body, b);
        PutF32(&s.body, -b);
      }
      s.n = 31;
      emit(s);
    }
  }
  {  // FP4 around zero: tiny positives land on code 8 (+0.0), negatives on 9 or 0
    BnbRoundtripSeed s;
    s.fp4 = true;
    s.blocksize_log2 = 5;
    for (float v : {1.0f, 1e-3f, 2.6e-3f, 2.7e-3f, -1e-3f, -2.7e-3f, 0.0f, -0.0f, 1e-30f}) PutF32(&s.body, v);
    s.n = 9;
    emit(s);
  }
  {  // subnormal maxima: the partial block stores the 1e-38 floor, a full block its max
    BnbRoundtripSeed s;
    s.blocksize_log2 = 5;
    s.n = 40;
    for (int i = 0; i < 40; ++i) {
      PutF32(&s.body, std::bit_cast<float>(static_cast<std::uint32_t>((i * 0x2345) % 0x7fffff) |
                                            (i % 3 == 0 ? 0x80000000u : 0u)));
    }
    emit(s);
  }
  {  // binary16 extremes: 65504, the smallest subnormal, -0
    BnbRoundtripSeed s;
    s.dtype = 0;
    s.fp4 = true;
    for (std::uint16_t h : {0x7bff, 0x0001, 0x8000, 0xfbff, 0x3c00, 0x0400, 0x03ff}) put16(&s.body, h);
    s.n = 7;
    emit(s);
  }
  {  // non-finite values: both quantizers refuse (BNB-104)
    BnbRoundtripSeed s;
    PutF32(&s.body, 1.0f);
    PutF32(&s.body, std::nanf(""));
    s.n = 2;
    emit(s);
    BnbRoundtripSeed h;
    h.dtype = 0;
    put16(&h.body, 0x3c00);
    put16(&h.body, 0xfc00);
    h.n = 70;
    emit(h);
  }
}


// ---- gptq_file_diff: tail-format and raw inputs ------------------------------------

qd::fuzz::GptqFileTail GptqTail(int format, int bits, int k32, int n32, int group_choice,
                                std::uint32_t seed) {
  qd::fuzz::GptqFileTail t;
  t.format = format;
  t.bits = bits;
  t.k32 = k32;
  t.n32 = n32;
  t.group_choice = group_choice;
  t.seed = seed;
  return t;
}

void GptqFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  auto emit = [&](const Bytes& input, const char* meant) {
    const qd::fuzz::GptqCase c = qd::fuzz::GptqCaseFromInput(input.data(), input.size());
    const std::string verdict =
        Verdict(gptq.oracle_read({c.file.data(), c.file.size()}, "input-gptq.safetensors", c.configs));
    if (verdict != meant) std::printf("note: gptq_file_diff seed meant %s, oracle says %s\n", meant, verdict.c_str());
    w.Write("gptq_file_diff", verdict, input);
  };
  using qd::fuzz::GptqAdd;
  using qd::fuzz::GptqOp;
  using qd::fuzz::GptqOpWriter;
  using qd::fuzz::GptqRole;
  // Valid files across the parameter space.
  {
    auto t = GptqTail(0, 4, 2, 1, 1, 700);
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(1, 3, 3, 2, 0, 701);  // 3-bit, one group, act-order, BF16, bias
    t.g_idx_mode = 1, t.scales_dtype = 1, t.bias = true, t.aliases = true;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(2, 5, 2, 1, 5, 702);  // planar 5-bit, g48 (partial group), two layers, dense
    t.second_layer = true, t.dense = true, t.sources = 2, t.order = 3;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(2, 7, 4, 2, 7, 703);  // planar 7-bit, g7, F32 scales, config.json alone
    t.scales_dtype = 2, t.sources = 1, t.g_idx_mode = 2, t.aliases = true;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(1, 8, 1, 4, 3, 704);  // v2 8-bit, custom group 200 (> K), zeros all 0
    t.custom_group = 200, t.zero_mode = 1, t.sources = 3;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(0, 2, 8, 1, 4, 705);  // v1 2-bit g24, bare names
    t.bare = true, t.order = 1;
    emit(GptqOpWriter().Finish(t), "valid");
    t = GptqTail(2, 3, 2, 1, 1, 706);  // planar 3-bit (differs from continuous)
    emit(GptqOpWriter().Finish(t), "valid");
  }
  // Layer rules, in docs/gptq.md's check order.
  emit(GptqOpWriter().DropTensor(GptqRole::kGidx).Finish(GptqTail(0, 4, 2, 1, 1, 710)), "GPTQ-101");
  emit(GptqOpWriter().AddTensor(GptqAdd::kLoneMember).Finish(GptqTail(1, 4, 2, 1, 1, 711)), "GPTQ-101");
  emit(GptqOpWriter().AddTensor(GptqAdd::kDenseWeight).Finish(GptqTail(0, 3, 1, 1, 0, 712)), "GPTQ-102");
  emit(GptqOpWriter().AddTensor(GptqAdd::kSibling).Finish(GptqTail(2, 6, 2, 1, 1, 713)), "GPTQ-103");
  emit(GptqOpWriter().Op(GptqOp::kTensorDtype, 0, qd::fuzz::GptqDtypeIndex("F32")).Finish(GptqTail(0, 4, 2, 1, 1, 714)),
       "GPTQ-104");
  emit(GptqOpWriter().Op(GptqOp::kReshape, 2, 0).Finish(GptqTail(1, 8, 2, 1, 1, 715)), "GPTQ-104");
  emit(GptqOpWriter().Op(GptqOp::kResizeDim, 0, 0, 1).Finish(GptqTail(0, 4, 2, 1, 1, 716)), "GPTQ-002");
  emit(GptqOpWriter().Op(GptqOp::kResizeDim, 1, 0, 1).Finish(GptqTail(1, 2, 2, 1, 1, 717)), "GPTQ-003");
  emit(GptqOpWriter().Op(GptqOp::kResizeDim, 2, 1, 0xff).Finish(GptqTail(2, 4, 2, 1, 1, 718)), "GPTQ-105");
  emit(GptqOpWriter().SetGidx(0, 3, 1).Finish(GptqTail(0, 4, 4, 1, 1, 719)), "GPTQ-004");
  emit(GptqOpWriter().SetSpecial(GptqRole::kScales, 0, 5, 2).Finish(GptqTail(1, 4, 2, 1, 1, 720)), "GPTQ-106");
  emit(GptqOpWriter().SetWord(GptqRole::kQzeros, 0, 0, 1).Finish(GptqTail(0, 3, 2, 1, 1, 721)), "GPTQ-107");
  // Config rules.
  emit(GptqOpWriter().CfgSplice(0, "{", 0).Finish(GptqTail(0, 4, 2, 1, 1, 730)), "CFG-001");
  emit(GptqOpWriter().CfgSet(0, "bits", "4.0").Finish(GptqTail(0, 4, 2, 1, 1, 731)), "CFG-002");
  emit(GptqOpWriter().Op(GptqOp::kCfgSources, 0).Finish(GptqTail(0, 4, 2, 1, 1, 732)), "CFG-003");
  emit(GptqOpWriter().CfgSet(0, "checkpoint_format", "\"marlin\"").Finish(GptqTail(0, 4, 2, 1, 1, 733)), "GPTQ-005");
  emit(GptqOpWriter().CfgSet(0, "method", "\"awq\"").Finish(GptqTail(1, 4, 2, 1, 1, 734)), "CFG-004");
  emit(GptqOpWriter().CfgSet(0, "quant_method", "\"awq\"").Finish(GptqTail(0, 4, 2, 1, 1, 735)), "CFG-005");
  emit(GptqOpWriter().CfgDrop(0, "bits").Finish(GptqTail(0, 4, 2, 1, 1, 736)), "CFG-006");
  emit(GptqOpWriter().CfgSet(0, "group_size", "0").Finish(GptqTail(0, 4, 2, 1, 1, 737)), "CFG-007");
  emit(GptqOpWriter().CfgSet(0, "bits", "5").Finish(GptqTail(0, 4, 2, 1, 1, 738)), "GPTQ-001");
  emit(GptqOpWriter().CfgSet(0, "pack_dtype", "\"int16\"").Finish(GptqTail(0, 4, 2, 1, 1, 739)), "CFG-008");
  emit(GptqOpWriter().CfgSet(0, "dynamic", "{\"-:lm_head\":{}}").Finish(GptqTail(0, 4, 2, 1, 1, 740)), "CFG-009");
  {
    auto t = GptqTail(0, 4, 2, 1, 1, 741);
    t.sources = 3;
    emit(GptqOpWriter().CfgSet(1, "bits", "8").Finish(t), "CFG-010");
  }
  emit(GptqOpWriter().CfgSet(0, "is_marlin_format", "false").Finish(GptqTail(0, 4, 2, 1, 1, 742)), "CFG-101");
  emit(GptqOpWriter().CfgSet(0, "zero_point", "true").Finish(GptqTail(0, 4, 2, 1, 1, 743)), "CFG-102");
  // Container rules in front of the GPTQ ones.
  emit(GptqOpWriter().Op(GptqOp::kHeaderSplice, qd::fuzz::GptqTokenIndex("\xff"), 20, 0, 0)
           .Finish(GptqTail(0, 4, 2, 1, 1, 750)),
       "ST-004");
  // Whole instances from the registry generator, through the raw mode.
  for (std::uint64_t s = 760; s < 764; ++s) {
    qd::harness::Rng rng(s);
    const qd::harness::Generated g = gptq.generate_valid(rng);
    emit(qd::fuzz::GptqRawInput(g.side_files, g.bytes), "valid");
  }
  for (const char* rule : {"CFG-010", "GPTQ-107", "GPTQ-004"}) {
    qd::harness::Rng rng(770);
    const qd::harness::Generated g = gptq.generate_violation(rule, rng);
    emit(qd::fuzz::GptqRawInput(g.side_files, g.bytes), rule);
  }
}

// ---- gptq_config_diff: [h0][h1][u16 length][source 1][source 2] ----------------------

void GptqConfigSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  auto make = [](int name1, int name2, bool two, bool none, int file, const std::string& a,
                 const std::string& b) {
    Bytes input;
    input.push_back(static_cast<std::uint8_t>(name1 | (name2 << 3) | (two ? 0x40 : 0) | (none ? 0x80 : 0)));
    input.push_back(static_cast<std::uint8_t>(file));
    input.push_back(static_cast<std::uint8_t>(a.size() & 0xff));
    input.push_back(static_cast<std::uint8_t>(a.size() >> 8));
    input.insert(input.end(), a.begin(), a.end());
    input.insert(input.end(), b.begin(), b.end());
    return input;
  };
  // The label: what the oracle says of the target's fixed file with these sources.
  auto emit = [&](const Bytes& input) {
    const std::uint8_t h0 = input[0];
    const std::size_t len1 = input[2] | (input[3] << 8);
    const auto& names = qd::fuzz::kGptqSourceNames;
    std::vector<qd::SideFile> configs;
    if ((h0 & 0x80) == 0) {
      configs.push_back({std::string(names[(h0 & 7) % names.size()]), Bytes(input.begin() + 4, input.begin() + 4 + len1)});
      if (h0 & 0x40) {
        configs.push_back({std::string(names[((h0 >> 3) & 7) % names.size()]), Bytes(input.begin() + 4 + len1, input.end())});
      }
    }
    const Bytes& file = qd::fuzz::GptqConfigDiffFile(input[1] & 3);
    w.Write("gptq_config_diff", Verdict(gptq.oracle_read({file.data(), file.size()}, "dir/model.safetensors", configs)), input);
  };
  const std::string c0 = qd::gen::GptqConfigText(0, 4, 32);
  const std::string c1 = qd::gen::GptqConfigText(1, 3, -1);
  const std::string c2 = qd::gen::GptqConfigText(2, 5, 48);
  const std::string c3 = qd::gen::GptqConfigText(0, 8, 128);
  emit(make(0, 0, false, false, 0, c0, ""));
  emit(make(1, 0, false, false, 1, c1, ""));
  emit(make(3, 0, false, false, 2, c2, ""));
  emit(make(4, 0, false, false, 3, c3, ""));
  emit(make(2, 0, false, false, 0, "{\"quantization_config\":" + c0 + "}", ""));
  emit(make(0, 2, true, false, 1, c1, "{\"model_type\":\"llama\",\"quantization_config\":" + c1 + "}"));
  emit(make(0, 5, true, false, 0, c0, "{\"quantization_config\":{\"bits\":4,\"group_size\":128}}"));  // CFG-010
  emit(make(0, 0, false, false, 1, "{\"w_bit\":3,\"q_group_size\":-1,\"version\":\"GPTQ_V2\",\"zero_point\":false}", ""));
  emit(make(0, 0, false, false, 2, "{\"wbits\":5,\"group_size\":48,\"format\":\"gptq_p\",\"pack_dtype\":\"int32\",\"dynamic\":{}}", ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"group_size\":32,\"is_marlin_format\":false}", ""));  // CFG-101
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"group_size\":32,\"checkpoint_format\":\"marlin\"}", ""));
  emit(make(0, 0, false, false, 0, "\xef\xbb\xbf" + c0, ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"bits\":4,\"group_size\":32}", ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4.0,\"group_size\":32}", ""));
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"w_bit\":8,\"group_size\":32}", ""));
  emit(make(0, 0, false, false, 3, "{\"bits\":8,\"group_size\":128,\"sym\":true,\"zero_point\":true}", ""));
  emit(make(2, 0, false, false, 0, "{\"quantization_config\":null}", ""));  // CFG-003
  emit(make(0, 0, false, true, 0, "", ""));                                 // CFG-003
  emit(make(0, 0, false, false, 0, "{\"bits\":4,\"group_size\":0}", ""));
  emit(make(0, 0, false, false, 1, "{\"bits\":3,\"group_size\":-1,\"format\":\"gptq_v2\",\"dynamic\":{\"x\":{}}}", ""));
}

// ---- gptq_roundtrip: [codes, zeros][8-byte tail] ------------------------------------

void GptqRoundtripSeeds(SeedWriter& w) {
  auto emit = [&](int format, int bits_sel, bool bad_bits, bool unmasked, int k32, int n32, int gsel,
                  int custom, int zero_style, int dtype, int g_idx_mode, bool k_odd, std::uint32_t seed,
                  std::size_t body_size) {
    qd::harness::Rng rng(seed);
    Bytes input(body_size);
    for (auto& b : input) b = static_cast<std::uint8_t>(rng());
    input.push_back(static_cast<std::uint8_t>(format | (bits_sel << 2) | (bad_bits ? 0x40 : 0) | (unmasked ? 0x80 : 0)));
    input.push_back(static_cast<std::uint8_t>((k32 - 1) | ((n32 - 1) << 3) | (gsel << 5)));
    input.push_back(static_cast<std::uint8_t>(custom));
    input.push_back(static_cast<std::uint8_t>(zero_style | (dtype << 2) | (g_idx_mode << 4) | (k_odd ? 0x40 : 0)));
    for (int i = 0; i < 4; ++i) input.push_back(static_cast<std::uint8_t>(seed >> (8 * i)));
    // Label: the oracle packer's verdict on the same codes and zeros.
    const int bits = bad_bits ? bits_sel : format == 2 ? 2 + bits_sel % 7 : std::array<int, 4>{2, 3, 4, 8}[bits_sel % 4];
    const bool allowed = format == 2 ? bits >= 2 && bits <= 8 : (bits == 2 || bits == 3 || bits == 4 || bits == 8);
    const bool refused = !allowed || k_odd || (unmasked && body_size > 0);
    w.Write("gptq_roundtrip", refused ? "refused" : "valid", input);
  };
  std::uint32_t seed = 800;
  for (int format = 0; format < 3; ++format) {
    const int widths = format == 2 ? 7 : 4;
    for (int sel = 0; sel < widths; ++sel) {
      emit(format, sel, false, false, 1 + sel % 4, 1 + sel % 2, sel % 8, 40, sel % 4, sel % 3, sel % 3, false,
           seed++, 2048);
    }
  }
  emit(0, 1, false, false, 2, 1, 1, 0, 2, 0, 0, false, seed++, 0);    // 3-bit v1, all zeros 2^b
  emit(1, 3, false, false, 2, 2, 0, 0, 1, 1, 1, false, seed++, 0);    // v2 8-bit, all zeros 0
  emit(2, 4, false, false, 3, 1, 3, 19, 3, 2, 2, false, seed++, 512); // planar 6-bit, g20
  emit(0, 5, true, false, 1, 1, 0, 0, 0, 0, 0, false, seed++, 64);    // bits 5 as gptq: refused
  emit(2, 9, true, false, 1, 1, 0, 0, 0, 0, 0, false, seed++, 64);    // bits 9 as gptq_p: refused
  emit(1, 2, false, false, 1, 1, 0, 0, 0, 0, 0, true, seed++, 64);    // K 48: refused
  emit(0, 2, false, true, 1, 1, 0, 0, 0, 0, 0, false, seed++, 1024);  // unmasked codes: refused
}

// ---- pt_file_diff: tail-format inputs and whole files ---------------------------------

void PtFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& pt = *qd::harness::FindFormat("pt");
  auto emit = [&](const Bytes& input) {
    const Bytes file = qd::fuzz::PtFileFromInput(input.data(), input.size());
    w.Write("pt_file_diff", Verdict(pt.oracle_read({file.data(), file.size()}, "seed.pt", {})), input);
  };
  using qd::fuzz::PtOp;
  using qd::fuzz::PtOpWriter;
  auto tail = [](int protocol, bool copies, bool big, int items, std::uint32_t seed) {
    qd::fuzz::PtFileTail t;
    t.protocol = protocol;
    t.copies = copies;
    t.allow_big = big;
    t.items = items;
    t.seed = seed;
    return t;
  };
  // Valid files across the parameter space.
  emit(PtOpWriter().Finish(tail(2, false, false, 3, 1)));
  emit(PtOpWriter().Finish(tail(4, true, false, 6, 2)));
  emit(PtOpWriter().Finish(tail(0, true, true, 8, 3)));
  emit(PtOpWriter().Finish(tail(5, false, true, 2, 4)));
  emit(PtOpWriter().Finish(tail(2, true, true, 5, 5)));
  // One op list per part of the page.
  const std::uint8_t hostile = qd::fuzz::PtTokenIndex("cposix\nsystem\n");
  emit(PtOpWriter().InsertToken(hostile, 3).Finish(tail(2, false, false, 2, 10)));
  emit(PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("\x81"), 5).Finish(tail(4, false, false, 2, 11)));
  emit(PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("\x8a\x09"), 4).Finish(tail(2, false, false, 3, 12)));
  emit(PtOpWriter().InsertToken(qd::fuzz::PtTokenIndex("0"), 2).Finish(tail(2, false, false, 3, 13)));
  emit(PtOpWriter().Op(PtOp::kPickleDelete, 6).Finish(tail(2, false, false, 3, 14)));
  emit(PtOpWriter().Op(PtOp::kPickleOperand, 20, 0, 1, 0x40).Finish(tail(2, true, false, 4, 15)));
  emit(PtOpWriter().Op(PtOp::kPickleTruncate, 100).Finish(tail(4, false, false, 3, 16)));
  emit(PtOpWriter().Op(PtOp::kRecordRename, 1, qd::fuzz::PtRecordNameIndex("data/7")).Finish(tail(2, false, false, 3, 17)));
  emit(PtOpWriter().Op(PtOp::kRecordAdd, qd::fuzz::PtRecordNameIndex("extra"), 1, 2).Finish(tail(2, false, false, 2, 18)));
  emit(PtOpWriter().Op(PtOp::kRecordAdd, qd::fuzz::PtRecordNameIndex("byteorder"), 10, 1).Finish(tail(2, false, false, 2, 19)));
  emit(PtOpWriter().Op(PtOp::kRecordResize, 1, 0xFF).Finish(tail(2, false, false, 2, 20)));
  emit(PtOpWriter().Op(PtOp::kStyle, 0).Finish(tail(2, false, false, 3, 21)));
  emit(PtOpWriter().Op(PtOp::kStyle, 4 | 1 | 2, 6).Finish(tail(2, false, false, 3, 22)));
  emit(PtOpWriter().Op(PtOp::kLocalField, 1, 2, 0, 9).Finish(tail(2, false, false, 3, 23)));
  emit(PtOpWriter().Op(PtOp::kCentralField, 0, 4, 0, 8).Finish(tail(2, false, false, 3, 24)));
  emit(PtOpWriter().Op(PtOp::kCentralField, 1, 16, 1, 0xF0).Finish(tail(2, false, false, 3, 25)));
  emit(PtOpWriter().Op(PtOp::kEndField, 0, 5, 2).Finish(tail(2, false, false, 3, 26)));
  emit(PtOpWriter().Op(PtOp::kDescriptor, 0, 1, 4, 3).Finish(tail(2, false, false, 3, 27)));
  emit(PtOpWriter().Op(PtOp::kFileByte, 0x40, 0x02, 0, 0xA5).Op(PtOp::kFixCrc, 1).Finish(tail(2, false, false, 3, 28)));
  emit(PtOpWriter().Op(PtOp::kTruncate, 30).Finish(tail(2, false, false, 3, 29)));
  emit(PtOpWriter().Op(PtOp::kAppend, 5, 0, 0, 0x50).Finish(tail(2, false, false, 3, 30)));
  // bitsandbytes layers (docs/pt.md 6.4, 7) from the tail, valid in every
  // layout and spelling, then one layer op per check of docs/pt.md 7.4.
  auto bnb = [&](qd::fuzz::PtBnbKind kind, std::uint32_t seed, int nest = 0, int layout = 0) {
    qd::fuzz::PtFileTail t = tail(2, false, true, 2, seed);
    t.bnb = kind;
    t.nest = nest;
    t.layout = layout;
    return t;
  };
  using qd::fuzz::PtBnbKind;
  using qd::fuzz::PtBnbValue;
  const auto value = [](PtBnbValue v) { return static_cast<std::uint8_t>(v); };
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kListFlat, 40)));
  {
    qd::fuzz::PtFileTail t = bnb(PtBnbKind::kListNested, 41, 2, 1);
    t.list_tuple = true;
    t.shape_as = 1;
    t.offset_float = true;
    t.inner_tuples = true;
    t.storage = 1;
    emit(PtOpWriter().Finish(t));
  }
  {
    qd::fuzz::PtFileTail t = bnb(PtBnbKind::kListNested, 42, 1, 2);
    t.shape_as = 2;
    t.no_table = true;
    t.w_flat = true;
    emit(PtOpWriter().Finish(t));
  }
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kHf4bit, 43, 3, 3)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kGptqModel4bit, 44, 1)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kInt8Hf, 45)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kInt8GptqModel, 46, 2)));
  emit(PtOpWriter().Finish(bnb(PtBnbKind::kMix, 47)));
  {  // list items: blocksize, quant_type, dtype token, length, nested2, offset, nibbles, absmax, W
    const auto flat = bnb(PtBnbKind::kListFlat, 50);
    const auto nested = bnb(PtBnbKind::kListNested, 51);
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(flat, 1, {3}), value(PtBnbValue::kInt), 100).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(flat, 1, {5}), value(PtBnbValue::kText),
                         qd::fuzz::PtBnbTextIndex("int4")).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(flat, 1, {2}), value(PtBnbValue::kToken),
                         qd::fuzz::PtBnbTokenIndex("float64")).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbDelete, qd::fuzz::PtBnbNode(flat, 1, {5})).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(nested, 1, {4, 1, 3}), value(PtBnbValue::kTrue)).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(nested, 1, {4, 0}), value(PtBnbValue::kFloat),
                         qd::fuzz::PtBnbFloatIndex(std::ldexp(1.0, 128) - std::ldexp(1.0, 103))).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbValue, qd::fuzz::PtBnbNode(nested, 1, {4, 1, 2}), value(PtBnbValue::kInt), 100).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbTensorByte, qd::fuzz::PtBnbTensor(flat, 0), 0, 0, 0x0F).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbTensorFloat, qd::fuzz::PtBnbTensor(flat, 1, {0}), 0, 0,
                         qd::fuzz::PtBnbFloatIndex(std::numeric_limits<double>::infinity())).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbTensorFloat, qd::fuzz::PtBnbTensor(nested, 1, {4, 1, 1}), 7, 0,
                         qd::fuzz::PtBnbFloatIndex(std::numeric_limits<double>::quiet_NaN())).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(flat, 0), 0).Finish(flat));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(nested, 1, {0}), 2, 1).Finish(nested));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(flat, 1, {0}), 3, 2).Finish(flat));
    // An int8 scale for the list's W: two states (BNB-105).
    emit(PtOpWriter().Op(PtOp::kBnbRename, 0, qd::fuzz::PtBnbNameIndex("M.SCB"), 1).Finish(flat));
  }
  {  // tensor layers: the JSON state text, an int8 scale, an int8 weight's dtype
    const auto hf = bnb(PtBnbKind::kHf4bit, 52, 2);
    std::uint8_t state = 0;  // the JSON state tensor is the layer's last
    for (std::size_t e = 0; qd::fuzz::PtBnbTensor(hf, e) != 255; ++e) state = qd::fuzz::PtBnbTensor(hf, e);
    emit(PtOpWriter().Op(PtOp::kBnbTensorByte, state, 1, 0, '[').Finish(hf));
    const auto int8 = bnb(PtBnbKind::kInt8Hf, 53, 1, 1);
    emit(PtOpWriter().Op(PtOp::kBnbTensorFloat, qd::fuzz::PtBnbTensor(int8, 1), 0, 0,
                         qd::fuzz::PtBnbFloatIndex(-std::numeric_limits<double>::infinity())).Finish(int8));
    emit(PtOpWriter().Op(PtOp::kBnbTensorShape, qd::fuzz::PtBnbTensor(int8, 0), 4).Finish(int8));
  }
  // Whole files, through the raw flag: random state dicts without layers (the
  // files the registry generator wrote before it added layers, so these seeds
  // keep their bytes), every violation of the registry generator, then its
  // valid files, with layers in one of three.
  std::uint64_t s = 900;
  for (int k = 0; k < 3; ++k) {
    qd::harness::Rng rng(s++);
    emit(qd::fuzz::PtRawInput(qd::gen::PtWriteDraft(qd::gen::PtRandomDraft(rng))));
  }
  for (const std::string& rule : pt.violable_rules()) {
    qd::harness::Rng rng(s++);
    emit(qd::fuzz::PtRawInput(pt.generate_violation(rule, rng).bytes));
  }
  for (int k = 0; k < 3; ++k) {
    qd::harness::Rng rng(s++);
    emit(qd::fuzz::PtRawInput(pt.generate_valid(rng).bytes));
  }
}

// ---- model_dir_diff: whole directories, framed -------------------------------
// Valid directories (every kind ModelDirValid makes), each IDX rule broken,
// GPTQ, bitsandbytes and plain models cut into shards at drawn tensor
// boundaries, and torch models cut into .bin shards; labelled with the
// oracle's verdict.

void ModelDirSeeds(SeedWriter& w) {
  auto emit = [&](const qd::gen::GeneratedDir& g) {
    const std::vector<std::uint8_t> input = qd::fuzz::ModelDirInput(g);
    const qd::Outcome o =
        qd::oracle::ReadModelDir(qd::fuzz::ModelDirListingFromInput(input.data(), input.size()));
    w.Write("model_dir_diff", Verdict(o), input);
  };
  std::uint64_t s = 2000;
  for (int k = 0; k < 6; ++k) {
    qd::gen::Rng rng(s++);
    emit(qd::gen::ModelDirValid(rng));
  }
  for (const std::string& rule : qd::gen::ModelDirViolableRules()) {
    qd::gen::Rng rng(s++);
    emit(qd::gen::ModelDirViolation(rule, rng));
  }
  for (qd::gen::Generated (*model)(qd::gen::Rng&) :
       {&qd::gen::GptqValid, &qd::gen::BnbValid, &qd::gen::SafetensorsValid}) {
    qd::gen::Rng rng(s++);
    const qd::gen::Generated file = model(rng);
    emit(qd::gen::ShardModel(file, rng));
  }
  for (int k = 0; k < 3; ++k) {  // torch models in .bin shards with their index
    qd::gen::Rng rng(s++);
    emit(qd::gen::PtShardedModel(rng).dir);
  }
}

}  // namespace

// ---- recognised_file_diff, ggml_st_file_diff: the registry's generator of
// FORMAT, files in recognised_file_input.h's layout (file plus one config) ----

void GeneratedFileSeeds(SeedWriter& w, const char* format, const char* target) {
  const qd::harness::FormatEntry& recognised = *qd::harness::FindFormat(format);
  auto emit = [&](const qd::harness::Generated& g) {
    const Bytes input = qd::fuzz::RecognisedInput(g);
    const qd::fuzz::RecognisedCase c = qd::fuzz::RecognisedCaseFromInput(input.data(), input.size());
    w.Write(target,
            Verdict(recognised.oracle_read({c.file.data(), c.file.size()}, "input.safetensors", c.configs)),
            input);
  };
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    qd::harness::Rng rng(seed);
    emit(recognised.generate_valid(rng));
  }
  for (const std::string& rule : recognised.violable_rules()) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      qd::harness::Rng rng(seed);
      emit(recognised.generate_violation(rule, rng));
    }
  }
}

// ---- awq_file_diff: the AWQ generator's instances, raw and through the tail ----

void AwqFileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& awq = *qd::harness::FindFormat("awq");
  auto emit = [&](const Bytes& input, const std::string& meant) {
    const qd::fuzz::AwqCase c = qd::fuzz::AwqCaseFromInput(input.data(), input.size());
    const std::string verdict = Verdict(awq.oracle_read({c.file.data(), c.file.size()}, "seed", c.configs));
    if (verdict != meant) std::printf("note: awq_file_diff seed meant %s, oracle says %s\n", meant.c_str(), verdict.c_str());
    w.Write("awq_file_diff", verdict, input);
  };
  // Valid files through the tail (three seeds: the versions and config
  // styles differ), then one instance of every rule.
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    const auto tail = qd::fuzz::AwqTail(0, seed);
    emit(Bytes(tail.begin(), tail.end()), "valid");
  }
  const std::vector<std::string> rules = awq.violable_rules();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const auto tail = qd::fuzz::AwqTail(static_cast<std::uint8_t>(i + 1), 700 + static_cast<std::uint32_t>(i));
    emit(Bytes(tail.begin(), tail.end()), rules[i]);
  }
  // Two raw instances: the generator's file and config as they are.
  for (std::uint64_t seed = 11; seed <= 12; ++seed) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = awq.generate_valid(rng);
    emit(qd::fuzz::AwqRawInput(g.side_files, g.bytes), "valid");
  }
}

// ---- fp8_file_diff: the seed unit's inputs, labelled by the oracle --------------

void Fp8FileSeeds(SeedWriter& w) {
  const qd::harness::FormatEntry& fp8 = *qd::harness::FindFormat("fp8");
  for (const auto& [meant, input] : qd::fuzz::Fp8FileSeedInputs()) {
    const qd::fuzz::Fp8Case c = qd::fuzz::Fp8CaseFromInput(input.data(), input.size());
    const std::string verdict = Verdict(fp8.oracle_read({c.file.data(), c.file.size()}, "seed", c.configs));
    if (meant != "edited" && verdict != meant) std::printf("note: fp8_file_diff seed meant %s, oracle says %s\n", meant.c_str(), verdict.c_str());
    w.Write("fp8_file_diff", verdict, input);
  }
}

// ---- ggml_blocks_diff: [selector][blocks or binary32 inputs] -----------------------

// Per type: a zero block, a patterned block with scale 1.0, and blocks whose
// scale halves are a subnormal, +infinity and a signalling NaN (mxfp4: the
// E8M0 bytes 0, 127 and 0xFF); per type with an encoder also an encode seed
// (two blocks of a ramp with a tie and a sign change). Labels: decode-<type>-<what>, encode-<type>.
void GgmlBlocksSeeds(SeedWriter& w) {
  const auto types = qd::codec::GgmlTypes();
  for (std::size_t t = 0; t < types.size(); ++t) {
    const qd::codec::GgmlTypeInfo& info = types[t];
    const std::string name(info.name);
    const std::size_t bytes = static_cast<std::size_t>(info.bytes);
    // Where the first scale half lies (docs/ggml_blocks.md section 3).
    std::size_t scale_at = 0;
    if (name == "q2_K") scale_at = 80;
    if (name == "q3_K") scale_at = 108;
    if (name == "q6_K") scale_at = 208;
    const struct {
      const char* what;
      std::uint16_t half;
    } kScales[] = {{"one", 0x3C00}, {"subnormal", 0x0001}, {"inf", 0x7C00}, {"snan", 0x7C01}};
    Bytes zero(1 + bytes, 0);
    zero[0] = static_cast<std::uint8_t>(t);
    w.Write("ggml_blocks_diff", "decode-" + name + "-zero", zero);
    for (const auto& scale : kScales) {
      Bytes b(1 + bytes);
      b[0] = static_cast<std::uint8_t>(t);
      for (std::size_t k = 1; k < b.size(); ++k) b[k] = static_cast<std::uint8_t>(k * 37 + 11);
      if (info.type == qd::codec::GgmlType::kMxfp4) {
        b[1] = scale.half == 0x3C00 ? 127 : scale.half == 0x0001 ? 0 : 0xFF;
        if (scale.half == 0x7C01) continue;  // 0xFF once is enough
      } else {
        b[1 + scale_at] = static_cast<std::uint8_t>(scale.half & 0xFF);
        b[2 + scale_at] = static_cast<std::uint8_t>(scale.half >> 8);
      }
      w.Write("ggml_blocks_diff", "decode-" + name + "-" + scale.what, b);
    }
    if (info.type == qd::codec::GgmlType::kMxfp4) continue;  // no encoder
    Bytes e = {static_cast<std::uint8_t>(t | 0x80)};
    for (int j = 0; j < 2 * info.values; ++j) PutF32(&e, static_cast<float>(j % 64 - 21) * 0.25f);
    w.Write("ggml_blocks_diff", "encode-" + name, e);
  }
}

int main(int argc, char** argv) {
  bool replace = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--replace") {
      replace = true;
    } else if (out.empty()) {
      out = arg;
    } else {
      out.clear();
      break;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: %s [--replace] OUTDIR\n", argv[0]);
    return 1;
  }
  SeedWriter writer(out, replace);
  SafetensorsSeeds(writer);
  RbqFileSeeds(writer);
  RoundtripSeeds(writer);
  MatvecSeeds(writer);
  BnbFileSeeds(writer);
  BnbRoundtripSeeds(writer);
  GptqFileSeeds(writer);
  GptqConfigSeeds(writer);
  GptqRoundtripSeeds(writer);
  PtFileSeeds(writer);
  GeneratedFileSeeds(writer, "recognised", "recognised_file_diff");
  ModelDirSeeds(writer);
  AwqFileSeeds(writer);
  Fp8FileSeeds(writer);
  GgmlBlocksSeeds(writer);
  for (const qd::fuzz::GgufSeed& s : qd::fuzz::GgufFileSeeds()) {
    writer.Write("gguf_file_diff", Verdict(s.oracle), s.input);
  }
  GeneratedFileSeeds(writer, "ggml_st", "ggml_st_file_diff");
  writer.Summary();
  return 0;
}
