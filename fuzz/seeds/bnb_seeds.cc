// bnb_seeds.cc: seeds of bnb_file_diff and bnb_roundtrip.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/float16.h"
#include "fuzz/common/bnb_file_input.h"
#include "fuzz/seeds/seed_writer.h"
#include "generators/generators.h"
#include "harness/registry.h"
#include "oracles/bnb.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"

namespace qd::fuzz::seeds {

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



}  // namespace qd::fuzz::seeds
