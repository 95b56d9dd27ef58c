// gptq_properties.cc: properties of the GPTQ codec (packer, unpacker,
// converter, every kernel) and oracle (docs/gptq.md). Expected bit
// positions come from the contract's formulas, written here again
// (section 4 field extraction, continuous and planar); files are written
// with the tests' own safetensors writer (gen/files.h).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "generators/generators.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/gptq.h"
#include "property_tests/gen/files.h"

namespace {

using qd::codec::GptqFormat;

constexpr char kFile[] = "gptq-property.safetensors";
const char* const kNames[] = {"gptq", "gptq_v2", "gptq_p"};

GptqFormat FormatOf(int f) {
  return f == 0 ? GptqFormat::kV1 : f == 1 ? GptqFormat::kV2 : GptqFormat::kPlanar;
}

std::string Findings(const qd::Outcome& o) {
  std::string s = o.refused ? "refused" : "accepted";
  for (const qd::Finding& f : o.findings) s += " | " + qd::harness::Describe(f);
  return s;
}

// ---- the contract's field extraction, written from docs/gptq.md section 4 ----

std::uint32_t Mask(int b) { return b >= 32 ? 0xffffffffu : (1u << b) - 1u; }

// Field i of a stream whose word j is word(j).
template <typename WordAt>
std::uint32_t ContinuousField(WordAt word, int b, std::int64_t i) {
  const std::int64_t s = i * b, w = s / 32;
  const int o = static_cast<int>(s % 32);
  std::uint32_t v = word(w) >> o;
  if (o + b > 32) v |= word(w + 1) << (32 - o);
  return v & Mask(b);
}

std::vector<int> Planes(int b) {
  switch (b) {
    case 2: return {2};
    case 3: return {2, 1};
    case 4: return {4};
    case 5: return {4, 1};
    case 6: return {4, 2};
    case 7: return {4, 2, 1};
    default: return {8};
  }
}

template <typename WordAt>
std::uint32_t PlanarField(WordAt word, int b, std::int64_t i) {
  const std::int64_t block = i / 32;
  const int t = static_cast<int>(i % 32);
  std::uint32_t v = 0;
  int offset = 0;
  for (int p : Planes(b)) {
    const int per = 32 / p;
    const std::uint32_t part = (word(block * b + offset + t / per) >> ((t % per) * p)) & Mask(p);
    v |= part << offset;
    offset += p;
  }
  return v;
}

struct Packed {
  std::vector<std::int32_t> qweight, qzeros;
};

// codes[k][n] and stored fields of zeros[g][n] read back from words, by the formulas above.
void ReadBack(int format, int b, std::int64_t K, std::int64_t N, std::int64_t G, const Packed& p,
              std::vector<std::int32_t>* codes, std::vector<std::int32_t>* fields) {
  codes->assign(static_cast<std::size_t>(K * N), 0);
  fields->assign(static_cast<std::size_t>(G * N), 0);
  for (std::int64_t n = 0; n < N; ++n) {
    auto column = [&](std::int64_t j) { return static_cast<std::uint32_t>(p.qweight[j * N + n]); };
    for (std::int64_t k = 0; k < K; ++k) {
      (*codes)[k * N + n] = static_cast<std::int32_t>(format == 2 ? PlanarField(column, b, k) : ContinuousField(column, b, k));
    }
  }
  const std::int64_t C = N / 32 * b;
  for (std::int64_t g = 0; g < G; ++g) {
    auto row = [&](std::int64_t w) { return static_cast<std::uint32_t>(p.qzeros[g * C + w]); };
    for (std::int64_t n = 0; n < N; ++n) {
      (*fields)[g * N + n] = static_cast<std::int32_t>(format == 2 ? PlanarField(row, b, n) : ContinuousField(row, b, n));
    }
  }
}

// ---- random layers -------------------------------------------------------------

struct LayerCase {
  int format = 0;
  int bits = 4;
  std::int64_t K = 32, N = 32, gs = -1, G = 1;
  std::vector<std::int32_t> codes, zeros;  // zeros as dequantization uses them
};

rc::Gen<int> BitsFor(int format) {
  return format == 2 ? rc::gen::inRange(2, 9) : rc::gen::elementOf(std::vector<int>{2, 3, 4, 8});
}

LayerCase RandomLayer(int format, int bits, bool representable_both = false) {
  LayerCase c;
  c.format = format;
  c.bits = bits;
  c.K = 32 * *rc::gen::inRange(1, 5);
  c.N = 32 * *rc::gen::inRange(1, 4);
  c.gs = *rc::gen::elementOf(std::vector<std::int64_t>{-1, 1, 7, 32, 48, 64, 128, 1000});
  c.G = c.gs == -1 ? 1 : (c.K + c.gs - 1) / c.gs;
  const std::int32_t top = (1 << bits) - 1;
  c.codes = *rc::gen::container<std::vector<std::int32_t>>(static_cast<std::size_t>(c.K * c.N),
                                                          rc::gen::inRange(0, top + 1));
  // v1 zero points 1..2^b, true zeros 0..2^b-1; representable_both: 1..2^b-1.
  const std::int32_t lo = format == 0 || representable_both ? 1 : 0;
  const std::int32_t hi = format == 0 && !representable_both ? top + 1 : top;
  c.zeros = *rc::gen::container<std::vector<std::int32_t>>(
      static_cast<std::size_t>(c.G * c.N),
      rc::gen::weightedOneOf<std::int32_t>({{4, rc::gen::inRange(lo, hi + 1)},
                                            {1, rc::gen::element(lo, hi)}}));
  return c;
}

Packed Encode(const LayerCase& c) {
  qd::codec::GptqPacked p;
  qd::codec::GptqPackError e;
  if (!qd::codec::GptqEncode(FormatOf(c.format), c.bits, c.K, c.N, c.G, c.codes, c.zeros, &p, &e)) {
    RC_FAIL("GptqEncode refused: " + e.what + " " + e.message);
  }
  return {p.qweight, p.qzeros};
}

std::vector<std::uint8_t> Bytes(const std::vector<std::int32_t>& w) {
  std::vector<std::uint8_t> out(w.size() * 4);
  if (!out.empty()) std::memcpy(out.data(), w.data(), out.size());
  return out;
}

struct OwnedView {
  std::vector<std::uint8_t> qweight, qzeros, scales, g_idx;
  qd::codec::GptqLayerView view;
};

OwnedView ViewFor(const LayerCase& c, const Packed& p, int format) {
  OwnedView v;
  v.qweight = Bytes(p.qweight);
  v.qzeros = Bytes(p.qzeros);
  v.scales.assign(static_cast<std::size_t>(c.G * c.N) * 4, 0);
  for (std::size_t i = 0; i < v.scales.size() / 4; ++i) {
    const float s = 0.015625f * static_cast<float>(1 + i % 13) * (i % 3 == 0 ? -1.0f : 1.0f);
    std::memcpy(v.scales.data() + 4 * i, &s, 4);
  }
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(c.K));
  for (std::int64_t k = 0; k < c.K; ++k) g_idx[k] = static_cast<std::int32_t>(c.gs == -1 ? 0 : k / c.gs);
  v.g_idx = Bytes(g_idx);
  v.view.format = FormatOf(format);
  v.view.bits = c.bits;
  v.view.in_features = c.K;
  v.view.out_features = c.N;
  v.view.groups = c.G;
  v.view.qweight = v.qweight.data();
  v.view.qzeros = v.qzeros.data();
  v.view.scales = v.scales.data();
  v.view.scales_dtype = qd::codec::Dtype::kF32;
  v.view.g_idx = v.g_idx.data();
  return v;
}

std::vector<float> DequantOf(const OwnedView& v, qd::codec::Kernel kernel = qd::codec::Kernel::kScalar) {
  std::vector<float> out(static_cast<std::size_t>(v.view.in_features * v.view.out_features));
  qd::codec::GptqDequantize(v.view, out.data(), kernel);
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

// ---- packing -------------------------------------------------------------------

// Every format and width: the codec's words hold each code and zero field
// where section 4 puts it, the oracle packs the same words, and GptqUnpack
// gives the codes and zero points back.
RC_GTEST_PROP(GptqProperties, PackUnpackRoundTripEveryWidthAndFormat, ()) {
  const int format = *rc::gen::inRange(0, 3);
  const int bits = *BitsFor(format);
  const LayerCase c = RandomLayer(format, bits);
  const Packed p = Encode(c);
  RC_ASSERT(p.qweight.size() == static_cast<std::size_t>(c.K * bits / 32 * c.N));
  RC_ASSERT(p.qzeros.size() == static_cast<std::size_t>(c.G * (c.N / 32 * bits)));
  std::vector<std::int32_t> codes, fields;
  ReadBack(format, bits, c.K, c.N, c.G, p, &codes, &fields);
  RC_ASSERT(codes == c.codes);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    RC_ASSERT(fields[i] == (format == 0 ? c.zeros[i] - 1 : c.zeros[i]));
  }
  std::vector<std::int32_t> oq, oz;
  std::string error;
  RC_ASSERT(qd::oracle::PackGptq(kNames[format], bits, c.K, c.N, c.G, c.codes, c.zeros, &oq, &oz, &error));
  RC_ASSERT(oq == p.qweight);
  RC_ASSERT(oz == p.qzeros);
  const OwnedView v = ViewFor(c, p, format);
  std::vector<std::int32_t> codes2, zeros2;
  qd::codec::GptqUnpack(v.view, &codes2, &zeros2);
  RC_ASSERT(codes2 == c.codes);
  RC_ASSERT(zeros2 == c.zeros);
}

// 3-bit continuous: fields 10 and 21 of each 32 straddle words (AutoGPTQ's
// 10 / split / 10 loop): field 10 is bits 30..31 of the first word and bit 0
// of the second, field 21 bit 31 of the second and bits 0..1 of the third.
RC_GTEST_PROP(GptqProperties, ThreeBitStraddlingFields, ()) {
  const int format = *rc::gen::inRange(0, 2);
  LayerCase c;
  c.format = format;
  c.bits = 3;
  c.K = 32 * *rc::gen::inRange(1, 4);
  c.N = 32;
  c.gs = -1;
  c.G = 1;
  c.codes.assign(static_cast<std::size_t>(c.K * c.N), 0);
  c.zeros.assign(static_cast<std::size_t>(c.N), format == 0 ? 1 : 0);
  const std::int64_t block = *rc::gen::inRange<std::int64_t>(0, c.K / 32);
  const std::int64_t n = *rc::gen::inRange<std::int64_t>(0, c.N);
  const int v10 = *rc::gen::inRange(0, 8), v21 = *rc::gen::inRange(0, 8);
  c.codes[(block * 32 + 10) * c.N + n] = v10;
  c.codes[(block * 32 + 21) * c.N + n] = v21;
  // Zero points at fields 10 and 21 of qzeros row 0 (true-zero values).
  const int z10 = *rc::gen::inRange(0, 7), z21 = *rc::gen::inRange(0, 7);
  c.zeros[10] = format == 0 ? z10 + 1 : z10;
  c.zeros[21] = format == 0 ? z21 + 1 : z21;
  const Packed p = Encode(c);
  auto w = [&](std::int64_t j) { return static_cast<std::uint32_t>(p.qweight[(block * 3 + j) * c.N + n]); };
  RC_ASSERT(w(0) == (static_cast<std::uint32_t>(v10 & 3) << 30));
  RC_ASSERT(w(1) == (static_cast<std::uint32_t>(v10 >> 2) | (static_cast<std::uint32_t>(v21 & 1) << 31)));
  RC_ASSERT(w(2) == static_cast<std::uint32_t>(v21 >> 1));
  auto z = [&](std::int64_t j) { return static_cast<std::uint32_t>(p.qzeros[j]); };
  RC_ASSERT(z(0) == (static_cast<std::uint32_t>(z10 & 3) << 30));
  RC_ASSERT(z(1) == (static_cast<std::uint32_t>(z10 >> 2) | (static_cast<std::uint32_t>(z21 & 1) << 31)));
  RC_ASSERT(z(2) == static_cast<std::uint32_t>(z21 >> 1));
}

// ---- conversions -----------------------------------------------------------------

// v2 -> v1 -> v2 gives the words back when every zero is representable in
// v1 (1..2^b-1), and the dequantized weights never change; a true zero 0
// underflows v2 -> v1, a v1 field of mask(b) overflows v1 -> v2.
RC_GTEST_PROP(GptqProperties, V2ToV1ToV2IdentityWhereRepresentable, ()) {
  const int bits = *BitsFor(1);
  LayerCase c = RandomLayer(1, bits, /*representable_both=*/true);
  const Packed v2 = Encode(c);
  const OwnedView view2 = ViewFor(c, v2, 1);
  qd::codec::GptqPacked v1;
  qd::codec::GptqPackError e;
  RC_ASSERT(qd::codec::GptqConvert(view2.view, GptqFormat::kV1, &v1, &e));
  const OwnedView view1 = ViewFor(c, {v1.qweight, v1.qzeros}, 0);
  RC_ASSERT(SameBits(DequantOf(view1), DequantOf(view2)));
  qd::codec::GptqPacked back;
  RC_ASSERT(qd::codec::GptqConvert(view1.view, GptqFormat::kV2, &back, &e));
  RC_ASSERT(back.qweight == v2.qweight);
  RC_ASSERT(back.qzeros == v2.qzeros);

  // One true zero 0: no v1 form.
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, c.zeros.size());
  c.zeros[at] = 0;
  const Packed z2 = Encode(c);
  qd::codec::GptqPacked out;
  RC_ASSERT(!qd::codec::GptqConvert(ViewFor(c, z2, 1).view, GptqFormat::kV1, &out, &e));
  RC_ASSERT(e.what == "underflow");
  RC_ASSERT(e.row == static_cast<std::int64_t>(at) / c.N);
  RC_ASSERT(e.column == static_cast<std::int64_t>(at) % c.N);
  // One v1 zero 2^b (field mask(b)): no v2 form.
  LayerCase c1 = c;
  c1.format = 0;
  for (auto& z : c1.zeros) z = std::max(z, 1);
  c1.zeros[at] = 1 << bits;
  const Packed f1 = Encode(c1);
  RC_ASSERT(!qd::codec::GptqConvert(ViewFor(c1, f1, 0).view, GptqFormat::kV2, &out, &e));
  RC_ASSERT(e.what == "overflow");
  RC_ASSERT(e.row == static_cast<std::int64_t>(at) / c.N);
  RC_ASSERT(e.column == static_cast<std::int64_t>(at) % c.N);
}

// Continuous v2 <-> planar: identity both ways for b in {2, 3, 4, 8}, the
// words unchanged for b = 2, 4, 8; planar 5..7 has no continuous form.
RC_GTEST_PROP(GptqProperties, PlanarContinuousIdentity, ()) {
  const int bits = *rc::gen::inRange(2, 9);
  const LayerCase planar = RandomLayer(2, bits);
  const Packed pp = Encode(planar);
  const OwnedView pv = ViewFor(planar, pp, 2);
  qd::codec::GptqPacked cont;
  qd::codec::GptqPackError e;
  const bool ok = qd::codec::GptqConvert(pv.view, GptqFormat::kV2, &cont, &e);
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
    RC_ASSERT(!ok);
    RC_ASSERT(e.what == "bits");
    return;
  }
  RC_ASSERT(ok);
  LayerCase as_v2 = planar;
  as_v2.format = 1;
  RC_ASSERT(Encode(as_v2).qweight == cont.qweight);
  const OwnedView cv = ViewFor(planar, {cont.qweight, cont.qzeros}, 1);
  RC_ASSERT(SameBits(DequantOf(cv), DequantOf(pv)));
  if (bits != 3) {
    RC_ASSERT(cont.qweight == pp.qweight);
    RC_ASSERT(cont.qzeros == pp.qzeros);
  }
  qd::codec::GptqPacked back;
  RC_ASSERT(qd::codec::GptqConvert(cv.view, GptqFormat::kPlanar, &back, &e));
  RC_ASSERT(back.qweight == pp.qweight);
  RC_ASSERT(back.qzeros == pp.qzeros);
}

// ---- files ----------------------------------------------------------------------

namespace {

std::vector<std::uint8_t> LayerFile(const LayerCase& c, const Packed& p,
                                    const std::vector<std::int32_t>& g_idx,
                                    const std::vector<std::uint16_t>& scales) {
  std::vector<std::uint8_t> sb(scales.size() * 2);
  std::memcpy(sb.data(), scales.data(), sb.size());
  const std::string P = "model.layers.0.mlp.up_proj.";
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::vector<qdtest::RawTensor> tensors = {
      {P + "qweight", "I32", {u(c.K * c.bits / 32), u(c.N)}, Bytes(p.qweight)},
      {P + "qzeros", "I32", {u(c.G), u(c.N / 32 * c.bits)}, Bytes(p.qzeros)},
      {P + "scales", "F16", {u(c.G), u(c.N)}, sb},
      {P + "g_idx", "I32", {u(c.K)}, Bytes(g_idx)},
  };
  return qdtest::SafetensorsFile(tensors, nullptr);
}

std::vector<std::uint8_t> Text(const std::string& s) { return {s.begin(), s.end()}; }

std::string Config(int format, int bits, std::int64_t gs) {
  return "{\"bits\":" + std::to_string(bits) + ",\"group_size\":" + std::to_string(gs) +
         ",\"checkpoint_format\":\"" + kNames[format] + "\",\"quant_method\":\"gptq\"}";
}

const qd::DecodedTensor* Weight(const qd::Outcome& o) {
  for (const auto& t : o.tensors) {
    if (t.name == "model.layers.0.mlp.up_proj.weight") return &t;
  }
  return nullptr;
}

}  // namespace

// An act-order layer (g_idx permuted with its rows) decodes to the sorted
// layer's weights with the in_features columns permuted the same way, on
// the codec (every kernel) and the oracle.
RC_GTEST_PROP(GptqProperties, GidxPermutedLayerEqualsColumnPermutedWeights, ()) {
  const int format = *rc::gen::inRange(0, 3);
  const int bits = *BitsFor(format);
  const LayerCase c = RandomLayer(format, bits);
  std::vector<std::uint16_t> scales = *rc::gen::container<std::vector<std::uint16_t>>(
      static_cast<std::size_t>(c.G * c.N), rc::gen::inRange<std::uint16_t>(0, 0x7c00));
  std::vector<std::int32_t> sorted(static_cast<std::size_t>(c.K));
  for (std::int64_t k = 0; k < c.K; ++k) sorted[k] = static_cast<std::int32_t>(c.gs == -1 ? 0 : k / c.gs);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(c.K));
  std::iota(perm.begin(), perm.end(), 0);
  const auto keys = *rc::gen::container<std::vector<std::uint32_t>>(perm.size(), rc::gen::arbitrary<std::uint32_t>());
  std::sort(perm.begin(), perm.end(), [&](std::int64_t a, std::int64_t b) {
    return keys[a] != keys[b] ? keys[a] < keys[b] : a < b;
  });
  LayerCase pc = c;
  std::vector<std::int32_t> permuted(sorted.size());
  for (std::int64_t k = 0; k < c.K; ++k) {
    permuted[k] = sorted[perm[k]];
    for (std::int64_t n = 0; n < c.N; ++n) pc.codes[k * c.N + n] = c.codes[perm[k] * c.N + n];
  }
  const std::vector<qd::SideFile> cfg = {{"quantize_config.json", Text(Config(format, bits, c.gs))}};
  const auto a = LayerFile(c, Encode(c), sorted, scales);
  const auto b = LayerFile(pc, Encode(pc), permuted, scales);
  const qd::ByteView va{a.data(), a.size()}, vb{b.data(), b.size()};
  const qd::Outcome oa = qd::oracle::ReadGptqFile(va, kFile, cfg);
  const qd::Outcome ob = qd::oracle::ReadGptqFile(vb, kFile, cfg);
  if (oa.refused || ob.refused) RC_FAIL("oracle refused: " + Findings(oa) + " / " + Findings(ob));
  const qd::DecodedTensor* wa = Weight(oa);
  const qd::DecodedTensor* wb = Weight(ob);
  RC_ASSERT(wa != nullptr && wb != nullptr);
  for (std::int64_t n = 0; n < c.N; ++n) {
    for (std::int64_t k = 0; k < c.K; ++k) {
      const float x = wb->values[n * c.K + k], y = wa->values[n * c.K + perm[k]];
      if (std::bit_cast<std::uint32_t>(x) != std::bit_cast<std::uint32_t>(y)) {
        RC_FAIL("n " + std::to_string(n) + " k " + std::to_string(k));
      }
    }
  }
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    for (const auto& [view, oracle] : {std::pair{va, &oa}, std::pair{vb, &ob}}) {
      const qd::Outcome codec = qd::codec::DecodeGptqFile(view, kFile, cfg, kernel);
      if (auto d = qd::harness::Compare(codec, *oracle, "gptq")) RC_FAIL(d->signature + ": " + d->detail);
    }
  }
}

// Valid instances of the registry generator: accepted by both, decoded bit
// for bit alike with every codec kernel; codec_check reports codec_read's
// findings.
RC_GTEST_PROP(GptqProperties, GeneratedValidFilesDecodeBitForBit, (std::uint64_t seed)) {
  qd::harness::Rng rng(seed);
  const qd::harness::Generated g = qd::gen::GptqValid(rng);
  const qd::ByteView view{g.bytes.data(), g.bytes.size()};
  const qd::Outcome oracle = qd::oracle::ReadGptqFile(view, kFile, g.side_files);
  if (oracle.refused) RC_FAIL("oracle refused a valid instance: " + Findings(oracle) + " (" + g.description + ")");
  for (qd::codec::Kernel k : qd::codec::AvailableKernels()) {
    const qd::Outcome codec = qd::codec::DecodeGptqFile(view, kFile, g.side_files, k);
    if (auto d = qd::harness::Compare(codec, oracle, "gptq")) {
      RC_FAIL(std::string(qd::codec::KernelName(k)) + " " + d->signature + ": " + d->detail +
              " (seed " + std::to_string(seed) + ", " + g.description + ")");
    }
  }
  const qd::codec::GptqResult r = qd::codec::ReadGptq(view, kFile, g.side_files);
  RC_ASSERT(!r.refused);
  RC_ASSERT(r.findings.size() == oracle.findings.size());
  RC_ASSERT(qd::codec::ClaimsGptq(view));
}

// The same layer with its config spelled through every alias, plain or as
// config.json's quantization_config, under each discovery name: the same
// decode, bit for bit, on both sides.
RC_GTEST_PROP(GptqProperties, AliasSpellingsDecodeAlike, ()) {
  const int format = *rc::gen::inRange(0, 3);
  const int bits = *BitsFor(format);
  const LayerCase c = RandomLayer(format, bits);
  std::vector<std::uint16_t> scales(static_cast<std::size_t>(c.G * c.N), 0x3c00);
  std::vector<std::int32_t> g_idx(static_cast<std::size_t>(c.K));
  for (std::int64_t k = 0; k < c.K; ++k) g_idx[k] = static_cast<std::int32_t>(c.gs == -1 ? 0 : k / c.gs);
  const auto file = LayerFile(c, Encode(c), g_idx, scales);
  const qd::ByteView view{file.data(), file.size()};
  const std::vector<qd::SideFile> canonical = {{"quantize_config.json", Text(Config(format, bits, c.gs))}};
  const qd::Outcome truth = qd::oracle::ReadGptqFile(view, kFile, canonical);
  if (truth.refused) RC_FAIL("canonical config refused: " + Findings(truth));

  const std::string method_key = *rc::gen::elementOf(std::vector<std::string>{"", "method", "quant_method"});
  std::vector<std::string> format_keys = {"format", "checkpoint_format", "version"};
  if (format == 0) format_keys.push_back("");
  const std::string format_key = *rc::gen::elementOf(format_keys);
  const std::string bits_key = *rc::gen::elementOf(std::vector<std::string>{"bits", "w_bit", "wbits"});
  const std::string group_key = *rc::gen::elementOf(std::vector<std::string>{"group_size", "q_group_size"});
  const bool upper = *rc::gen::arbitrary<bool>();
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!method_key.empty()) j[method_key] = "gptq";
  if (!format_key.empty()) {
    std::string v = kNames[format];
    if (format_key == "version" && upper) {
      for (char& ch : v) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    }
    j[format_key] = v;
  }
  j[bits_key] = bits;
  j[group_key] = c.gs;
  if (*rc::gen::arbitrary<bool>()) j["zero_point"] = *rc::gen::arbitrary<bool>();
  const bool nested = *rc::gen::arbitrary<bool>();
  std::vector<qd::SideFile> sources;
  if (nested) {
    nlohmann::ordered_json top = {{"model_type", "llama"}, {"quantization_config", j}};
    sources.push_back({*rc::gen::elementOf(std::vector<std::string>{"config.json", "dir/config.json"}),
                       Text(top.dump())});
  } else {
    sources.push_back({*rc::gen::elementOf(std::vector<std::string>{
                           "quantize_config.json", "quant_config.json",
                           "gptq-property.quantize_config.json", "dir/quantize_config.json"}),
                       Text(j.dump())});
  }
  RC_TAG(nested ? "config.json" : "plain", format_key.empty() ? "default-format" : format_key);
  const qd::Outcome oracle = qd::oracle::ReadGptqFile(view, kFile, sources);
  const qd::Outcome codec = qd::codec::DecodeGptqFile(view, kFile, sources);
  if (oracle.refused || codec.refused) {
    RC_FAIL(sources[0].name + " " + std::string(sources[0].bytes.begin(), sources[0].bytes.end()) +
            ": oracle " + Findings(oracle) + " codec " + Findings(codec));
  }
  const qd::DecodedTensor* a = Weight(oracle);
  const qd::DecodedTensor* b = Weight(truth);
  RC_ASSERT(a != nullptr && b != nullptr);
  RC_ASSERT(SameBits(a->values, b->values));
  if (auto d = qd::harness::Compare(codec, oracle, "gptq")) RC_FAIL(d->signature + ": " + d->detail);
}
