// bitsandbytes layers in torch .pt state dicts (docs/pt.md 6.4 and 7,
// docs/bnb.md). The layers are the bitsandbytes generator's (codec encoders,
// generators/bnb.cc); this file spells them as state dict items: the
// QuantState list layout of bitsandbytes 0.40 (`W.quant_state`, a list of 6
// or 7 items, docs/pt.md 7.3) and the HF / GPT-QModel / int8 tensors of
// docs/bnb.md "Layers" as tensor table entries. A violation breaks one check
// of docs/pt.md 7.4 (list layers) or docs/bnb.md (tensor layers) in one
// layer of an otherwise valid file.
#include <bit>
#include <cmath>
#include <cstring>

#include "generators/generators.h"
#include "generators/pt_bnb.h"

namespace qd::gen {
namespace {

using Bytes = std::vector<std::uint8_t>;
using Layout = PtTensorData::Layout;
using O = PtObject;

std::uint64_t Count(const PtTensorData& t) { return t.bytes.size() / PtItemSize(t.dtype); }

PtTensorData Floats(const std::vector<float>& values, std::vector<std::uint64_t> shape) {
  PtTensorData t;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

PtTensorData FloatVector(const std::vector<float>& values) { return Floats(values, {values.size()}); }

PtTensorData ByteVector(const Bytes& bytes) {
  PtTensorData t;
  t.dtype = "U8";
  t.shape = {bytes.size()};
  t.bytes = bytes;
  return t;
}

// A 0-d tensor of one element given by its little-endian bytes.
PtTensorData Scalar(std::string dtype, std::uint64_t bits) {
  PtTensorData t;
  t.dtype = std::move(dtype);
  for (std::uint64_t k = 0; k < PtItemSize(t.dtype); ++k) t.bytes.push_back(static_cast<std::uint8_t>(bits >> (8 * k)));
  return t;
}

void SetF32(PtTensorData* t, std::uint64_t i, float v) { std::memcpy(t->bytes.data() + 4 * i, &v, 4); }

// A rank-1 tensor of `count` elements of its dtype: zeros appended or elements dropped.
void Resize(PtTensorData* t, std::uint64_t count) {
  t->bytes.resize(count * PtItemSize(t->dtype));
  t->shape = {count};
}

// The same element count as another dtype (F32 values widened exactly to
// F64; otherwise the bytes cut or zero-padded: where this is used the dtype
// fails its check before any value is read).
void Recast(PtTensorData* t, const std::string& dtype) {
  const std::uint64_t n = Count(*t);
  if (t->dtype == "F32" && dtype == "F64") {
    Bytes wide;
    for (std::uint64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, t->bytes.data() + 4 * i, 4);
      const std::uint64_t bits = std::bit_cast<std::uint64_t>(static_cast<double>(f));
      for (int k = 0; k < 8; ++k) wide.push_back(static_cast<std::uint8_t>(bits >> (8 * k)));
    }
    t->bytes = std::move(wide);
  } else {
    t->bytes.resize(n * PtItemSize(dtype));
  }
  t->dtype = dtype;
}

// Non-finite binary32 values: both infinities, quiet and signalling NaNs, a negative NaN.
float NonFinite(Rng& rng) {
  const std::uint32_t bits[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7FC00001u, 0xFFC00000u, 0x7F800001u};
  return std::bit_cast<float>(bits[Pick(rng, std::size(bits))]);
}

// One of the first `count` F32 elements of t made non-finite (the value drawn
// first, then the place: one order on every compiler).
void SetNonFinite(PtTensorData* t, std::uint64_t count, Rng& rng) {
  const float v = NonFinite(rng);
  SetF32(t, Pick(rng, count), v);
}

// About one tensor in four a view that readers must materialise (docs/pt.md 5.3).
void RandomLayouts(PtStateDict* dict, Rng& rng) {
  for (PtTensorData* t : PtTensorsIn(dict)) {
    if (Coin(rng, 4)) t->layout = static_cast<Layout>(1 + Pick(rng, 3));
  }
}

// S[1]: a torch.Size (shape_as 0), a tuple (1) or a list (2) of the dimensions.
PtObject ShapeObject(const std::vector<std::int64_t>& dims, int shape_as) {
  PtObject shape = O::Size(dims);
  if (shape_as != 0) shape.kind = shape_as == 1 ? O::Kind::kTuple : O::Kind::kList;
  return shape;
}

void Collect(PtObject* o, std::vector<PtTensorData*>* out) {
  if (o->kind == O::Kind::kTensor) out->push_back(&o->tensor);
  for (PtObject& item : o->items) Collect(&item, out);
  for (auto& [k, v] : o->entries) Collect(&v, out);
}

// ---- list-layout violations (docs/pt.md 7.4) ---------------------------------------

// A list-layout layer under construction: S, W, and entries put beside them.
struct ListLayer {
  Bnb4bitLayer layer;
  BnbListOptions options;
  PtObject s;
  PtTensorData w;
  bool with_w = true;
  std::vector<codec::TensorWithBytes> beside;

  std::string Weight() const { return layer.module + ".weight"; }
  PtObject& Item(std::size_t i) { return s.items[i]; }
  PtTensorData& Absmax() { return s.items[0].tensor; }
  PtObject& Offset() { return s.items[4].items[0]; }
  PtObject& State2() { return s.items[4].items[1]; }
  PtTensorData& Table() { return s.items[6].tensor; }
  void SetShape(const std::vector<std::int64_t>& dims) { s.items[1] = ShapeObject(dims, options.shape_as); }
  std::vector<std::int64_t> Dims() const {
    return std::vector<std::int64_t>(layer.shape.begin(), layer.shape.end());
  }

  void Put(PtStateDict* dict, int nest) const {
    if (with_w) PtPut(dict, Weight(), O::Tensor(w), nest);
    PtPut(dict, Weight() + ".quant_state", s, nest);
    PtPutTensors(dict, beside, nest);
  }
};

// force_nested as RandomBnb4bitLayer; force_table -1 random, 0 six items, 1 seven.
ListLayer MakeList(Rng& rng, int force_nested, int force_table = -1) {
  ListLayer l;
  l.layer = RandomBnb4bitLayer(rng, force_nested);
  l.options = RandomBnbListOptions(l.layer, rng);
  if (force_table >= 0) l.options.with_table = force_table == 1;
  l.s = Bnb4bitListState(l.layer, l.options);
  l.w = Bnb4bitListWeight(l.layer, l.options);
  return l;
}

// BNB-101 a: one item of S (or its length) is not what 7.3 requires.
std::string BreakListItem(ListLayer& l, Rng& rng) {
  const auto seq = [&](std::vector<O> items) { return Coin(rng) ? O::List(std::move(items)) : O::Tuple(std::move(items)); };
  switch (Pick(rng, 8)) {
    case 0:
      if (Coin(rng)) {
        l.s.items.resize(Pick(rng, 6));
      } else {
        const std::size_t items = 8 + Pick(rng, 2);
        while (l.s.items.size() < items) {
          l.s.items.push_back(l.s.items.size() == 6 ? O::Tensor(FloatVector({0.0f})) : O::None());
        }
      }
      return "S has " + std::to_string(l.s.items.size()) + " items";
    case 1: {
      const O bad[] = {O::None(), O::Float(1.0), seq({O::Float(0.5), O::Float(0.25)}), O::Str("absmax")};
      l.Item(0) = bad[Pick(rng, std::size(bad))];
      return "S[0] not a tensor";
    }
    case 2: {
      std::vector<O> dims;
      for (std::int64_t d : l.Dims()) dims.push_back(O::Int(d));
      const O bad_dims[] = {O::Float(2.0), O::Str("3"), O::Bool(true), O::Int(-1), O::None(), seq({O::Int(1)})};
      const O& bad_dim = bad_dims[Pick(rng, std::size(bad_dims))];
      dims[Pick(rng, dims.size())] = bad_dim;
      const O bad[] = {seq(dims), O::Int(static_cast<std::int64_t>(l.layer.q.packed.size())), O::None(),
                       O::Str("(40, 30)")};
      l.Item(1) = Coin(rng, 4) ? bad[1 + Pick(rng, 3)] : bad[0];
      return "S[1] not a Size/tuple/list of ints";
    }
    case 3: {
      const O bad[] = {O::Str(BnbDtypeName(l.layer.dtype)), O::None(), O::Token("HalfStorage"), O::Token("Size"),
                       O::Int(16)};
      l.Item(2) = bad[Pick(rng, std::size(bad))];
      return "S[2] not a dtype token";
    }
    case 4: {
      const std::int64_t bs = static_cast<std::int64_t>(l.layer.blocksize);
      const O bad[] = {O::Float(static_cast<double>(bs)), O::Bool(true), O::Str(std::to_string(bs)), O::Int(-bs), O::None()};
      l.Item(3) = bad[Pick(rng, std::size(bad))];
      return "S[3] not an int";
    }
    case 5: {
      const O bad[] = {O::Int(0), O::Bool(false), seq({O::Float(0.5)}), seq({O::Float(0.5), O::None(), O::None()}),
                       O::Tuple({}), O::Dict(), O::Str("None")};
      l.Item(4) = bad[Pick(rng, std::size(bad))];
      return "S[4] neither None nor a pair";
    }
    case 6: {
      const O bad[] = {O::None(), O::Int(4), O::Token("float16"), O::Bool(true), seq({O::Str("nf4")})};
      l.Item(5) = bad[Pick(rng, std::size(bad))];
      return "S[5] not a str";
    }
    default: {
      std::vector<O> values;
      for (float v : codec::Bnb4bitTable(l.layer.type)) values.push_back(O::Float(v));
      const O bad[] = {O::List(values), O::None(), O::Float(0.0), O::Str("nf4")};
      const O& item = bad[Pick(rng, std::size(bad))];
      if (l.s.items.size() == 7) {
        l.Item(6) = item;
      } else {
        l.s.items.push_back(item);
      }
      return "S[6] present and not a tensor";
    }
  }
}

// BNB-101 b: the nested offset is neither a floating tensor of one element
// nor a float, or not finite once rounded to binary32.
std::string BreakOffset(ListLayer& l, Rng& rng) {
  const float v = l.layer.q.nested_offset;
  switch (Pick(rng, 11)) {
    case 0: l.Offset() = O::Int(Pick(rng, 2)); return "offset an int";
    case 1: l.Offset() = Coin(rng) ? O::Str("0.5") : O::None(); return "offset a str / None";
    case 2: l.Offset() = O::Bool(false); return "offset a bool";
    case 3: l.Offset() = O::Tensor(Scalar(Coin(rng) ? "I32" : "U8", 0)); return "offset an integer tensor";
    case 4: l.Offset() = O::Tensor(Floats({v, v}, {2})); return "offset tensor of two elements";
    case 5: l.Offset() = O::Tensor(Floats({}, {0})); return "offset tensor of no element";
    case 6: l.Offset() = O::Tensor(Floats({NonFinite(rng)}, {})); return "offset F32 not finite";
    case 7: {
      const std::pair<const char*, std::uint64_t> bad[] = {{"F16", 0x7C00}, {"F16", 0xFE00}, {"BF16", 0xFF80}, {"BF16", 0x7FC1}};
      const auto& [dtype, bits] = bad[Pick(rng, std::size(bad))];
      l.Offset() = O::Tensor(Scalar(dtype, bits));
      return std::string("offset ") + dtype + " not finite";
    }
    case 8: {
      // Beyond binary32's range: 2^128 - 2^103 is max + half an ulp, which
      // rounds to even, i.e. to infinity (docs/pt.md 7.4 step 2b).
      const double bad[] = {1e300, -1e39, std::ldexp(1.0, 128) - std::ldexp(1.0, 103), std::nan("")};
      l.Offset() = O::Tensor(Scalar("F64", std::bit_cast<std::uint64_t>(bad[Pick(rng, std::size(bad))])));
      return "offset F64 not finite in binary32";
    }
    case 9: {
      const double bad[] = {std::nan(""), INFINITY, -INFINITY, 1e300, -3.5e38, std::ldexp(1.0, 128) - std::ldexp(1.0, 103)};
      l.Offset() = O::Float(bad[Pick(rng, std::size(bad))]);
      return "offset float not finite in binary32";
    }
    default:
      l.Offset() = O::List({O::Float(static_cast<double>(v))});
      return "offset a list";
  }
}

// BNB-101 c: state2 is not a list/tuple of 6 or 7 items, or one of the 7 is mistyped.
std::string BreakState2(ListLayer& l, Rng& rng) {
  PtObject& s2 = l.State2();
  switch (Pick(rng, 7)) {
    case 0: {
      const O bad[] = {O::None(), O::Int(7), O::Str("state2"), O::Dict({{"absmax", O::None()}})};
      s2 = bad[Pick(rng, std::size(bad))];
      return "state2 not a list or tuple";
    }
    case 1:
      if (Coin(rng)) {
        s2.items.resize(Pick(rng, 6));
      } else {
        s2.items.resize(8 + Pick(rng, 2));
      }
      return "state2 has " + std::to_string(s2.items.size()) + " items";
    case 2: {
      const O bad[] = {O::None(), O::List({O::Float(1.0)}), O::Float(1.0)};
      s2.items[0] = bad[Pick(rng, std::size(bad))];
      return "absmax2 not a tensor";
    }
    case 3: s2.items[1] = Coin(rng) ? O::None() : O::List({O::Float(0.0)}); return "code not a tensor";
    case 4: {
      const std::int64_t b = static_cast<std::int64_t>(l.layer.q.nested_blocksize);
      const O bad[] = {O::Float(static_cast<double>(b)), O::Bool(true), O::Str("256"), O::Int(-b), O::None()};
      s2.items[2] = bad[Pick(rng, std::size(bad))];
      return "blocksize2 not an int";
    }
    case 5: {
      const O bad[] = {O::Int(0), O::None(), O::Str("False")};
      s2.items[3] = bad[Pick(rng, std::size(bad))];
      return "nested2 not a bool";
    }
    default: {
      const O bad[] = {O::Str("float32"), O::None(), O::Token("FloatStorage")};
      s2.items[4] = bad[Pick(rng, std::size(bad))];
      return "dtype2 not a dtype token";
    }
  }
}

std::string ListViolation(const std::string& r, Rng& rng, PtStateDict* layers, int nest) {
  std::string what;
  ListLayer l;
  if (r == "BNB-001") {
    switch (Pick(rng, 4)) {
      case 0: {
        l = MakeList(rng, -1);
        const char* const bad[] = {"int4", "NF4", "", "af4", "nf4 ", "fp8"};
        l.Item(5) = O::Str(bad[Pick(rng, std::size(bad))]);
        what = "quant_type outside nf4/fp4";
        break;
      }
      case 1: {
        l = MakeList(rng, -1);
        const std::int64_t bad[] = {0, 1, 16, 48, 100, 8192, 65536};
        l.Item(3) = O::Int(bad[Pick(rng, std::size(bad))]);
        what = "blocksize not a power of two 32..4096";
        break;
      }
      default: {  // absmax (flat F32, or nested U8 codes) one element off ceil(n / blocksize)
        l = MakeList(rng, Coin(rng) ? 1 : 0);
        const std::uint64_t c = Count(l.Absmax());
        Resize(&l.Absmax(), Coin(rng) || c == 1 ? c + 1 : c - 1);
        what = "absmax count not ceil(n / blocksize)";
      }
    }
  } else if (r == "BNB-002") {
    l = MakeList(rng, -1);
    const std::vector<std::int64_t> dims = l.Dims();
    switch (Pick(rng, 5)) {
      case 0: {  // one byte more or fewer in a U8 W
        l.w.dtype = "U8";
        if (Coin(rng) || l.w.bytes.size() == 1) {
          l.w.bytes.push_back(0x77);
        } else {
          l.w.bytes.pop_back();
        }
        l.w.shape = {l.w.bytes.size(), 1};
        what = "W not ceil(n/2) bytes";
        break;
      }
      case 1: {  // another dtype holding an item more: the byte length is off by its size
        l.w.dtype = Coin(rng) ? "I16" : "F32";
        const std::uint64_t isz = PtItemSize(l.w.dtype);
        l.w.bytes.resize((l.w.bytes.size() / isz + 1) * isz, 0);
        l.w.shape = {l.w.bytes.size() / isz};
        what = "W (" + l.w.dtype + ") not ceil(n/2) bytes";
        break;
      }
      case 2: {  // a trailing dimension of 3 in S[1]: ceil(3n/2) != ceil(n/2) for n >= 1
        std::vector<std::int64_t> d = dims;
        d.push_back(3);
        l.SetShape(d);
        what = "S[1] product not the packed length";
        break;
      }
      case 3: {  // a dimension 0: n = 0, W is not empty
        std::vector<std::int64_t> d = dims;
        d[Pick(rng, d.size())] = 0;
        l.SetShape(d);
        what = "S[1] with a zero dimension";
        break;
      }
      default: {  // the product overflows 64 bits: a mismatch (docs/pt.md 7.4 step 8)
        l.SetShape({static_cast<std::int64_t>(1) << 62, static_cast<std::int64_t>(1) << 62, 2});
        what = "S[1] product overflows";
      }
    }
  } else if (r == "BNB-004") {
    l = MakeList(rng, 1);
    PtObject& s2 = l.State2();
    switch (Pick(rng, 8)) {
      case 0:
        if (Coin(rng)) {
          s2.items.pop_back();
        } else {  // the docstring's state2: [absmax, input_shape, A.dtype, blocksize, None, quant_type]
          s2.items = {s2.items[0], O::Size({static_cast<std::int64_t>(l.layer.q.absmax.size())}), O::Token("float32"),
                      s2.items[2], O::None(), O::Str(Bnb4bitTypeName(l.layer.type))};
        }
        what = "state2 of 6 items (no code)";
        break;
      case 1: s2.items[3] = O::Bool(true); what = "nested2 True"; break;
      case 2: s2.items[5] = Coin(rng) ? O::Float(0.0) : O::Tensor(Floats({0.0f}, {})); what = "offset2 not None"; break;
      case 3: s2.items[6] = O::List({}); what = "state2b not None"; break;
      case 4: {
        const std::int64_t bad[] = {0, 1, 16, 100, 255, 8192};
        s2.items[2] = O::Int(bad[Pick(rng, std::size(bad))]);
        what = "blocksize2 not a power of two 32..4096";
        break;
      }
      case 5: {
        const char* const bad[] = {"float16", "bfloat16", "float64", "int8"};
        s2.items[4] = O::Token(bad[Pick(rng, std::size(bad))]);
        what = "dtype2 not float32";
        break;
      }
      case 6: {
        PtTensorData& a2 = s2.items[0].tensor;
        const std::uint64_t c = Count(a2);
        switch (Pick(rng, 3)) {
          case 0: Resize(&a2, c + 1); break;
          case 1: Resize(&a2, c - 1); break;
          default: Recast(&a2, Coin(rng) ? "F64" : "F16");
        }
        what = "nested_absmax not F32 of ceil(nblocks / nested_blocksize)";
        break;
      }
      default: {
        PtTensorData& code = s2.items[1].tensor;
        switch (Pick(rng, 3)) {
          case 0: Resize(&code, Coin(rng) ? 255 : 257); break;
          case 1: Recast(&code, "F64"); break;
          default: Recast(&code, Coin(rng) ? "U8" : "F16");
        }
        what = "code not F32[256]";
      }
    }
  } else if (r == "BNB-101") {
    switch (Pick(rng, 3)) {
      case 0: l = MakeList(rng, -1); what = BreakListItem(l, rng); break;
      case 1: l = MakeList(rng, 1); what = BreakOffset(l, rng); break;
      default: l = MakeList(rng, 1); what = BreakState2(l, rng);
    }
  } else if (r == "BNB-102") {
    const std::uint64_t how = Pick(rng, 3);
    if (how < 2) {  // absmax not F32 (flat, how 0) / U8 (nested, how 1): step 9
      l = MakeList(rng, static_cast<int>(how));
      const char* const bad[2][4] = {{"F16", "BF16", "F64", "U8"}, {"I8", "F32", "I16", "BOOL"}};
      Recast(&l.Absmax(), bad[how][Pick(rng, 4)]);
      what = how == 0 ? "flat absmax not F32" : "nested absmax not U8";
    } else {
      l = MakeList(rng, -1, 1);
      switch (Pick(rng, 3)) {
        case 0: Resize(&l.Table(), Coin(rng) ? 15 : 17); break;
        case 1: Recast(&l.Table(), "F64"); break;
        default: Recast(&l.Table(), Coin(rng) ? "F16" : "I32");
      }
      what = "S[6] not F32[16]";
    }
  } else if (r == "BNB-103") {
    l = MakeList(rng, -1);
    const char* const bad[] = {"float64", "int8", "uint8", "int16", "int32", "int64", "bool"};
    l.Item(2) = O::Token(bad[Pick(rng, std::size(bad))]);
    what = "S[2] not float16/bfloat16/float32";
  } else if (r == "BNB-104") {
    switch (Pick(rng, 3)) {
      case 0: {
        l = MakeList(rng, 0);
        SetNonFinite(&l.Absmax(), Count(l.Absmax()), rng);
        what = "non-finite flat absmax";
        break;
      }
      case 1: {
        l = MakeList(rng, 1);
        PtTensorData& a2 = l.State2().items[0].tensor;
        SetNonFinite(&a2, Count(a2), rng);
        what = "non-finite nested_absmax";
        break;
      }
      default: {
        l = MakeList(rng, 1);
        SetNonFinite(&l.State2().items[1].tensor, 256, rng);
        what = "non-finite nested code";
      }
    }
  } else if (r == "BNB-105") {
    l = MakeList(rng, -1);
    switch (Pick(rng, 4)) {
      case 0: l.with_w = false; what = "no tensor W"; break;
      case 1: case 2: {  // an HF or GPT-QModel state tensor for the same W beside the list (docs/pt.md 7.2)
        for (codec::TensorWithBytes& t : Bnb4bitTensors(l.layer, Pick(rng, 2) == 1)) {
          if (t.spec.name != l.Weight()) l.beside.push_back(std::move(t));
        }
        what = "the list and a state tensor for one W";
        break;
      }
      default: {  // an int8 scale for the same W
        const bool hf = Coin(rng);
        const std::vector<float> scb(1 + Pick(rng, 4), 1.0f);
        l.beside.push_back({{l.layer.module + (hf ? ".SCB" : ".weight_scb"), "F32", {scb.size()}, 0},
                            FloatVector(scb).bytes});
        what = "the list and an int8 scale for one W";
      }
    }
  } else if (r == "BNB-106") {
    l = MakeList(rng, -1, 1);
    if (Coin(rng)) {
      const auto& other = codec::Bnb4bitTable(l.layer.type == codec::Bnb4bitType::kNf4 ? codec::Bnb4bitType::kFp4
                                                                                       : codec::Bnb4bitType::kNf4);
      l.Table() = FloatVector(std::vector<float>(other.begin(), other.end()));
      what = "S[6] is the other table (warning)";
    } else {  // one bit of one entry: the sign or a mantissa bit, never an exponent bit (stays finite)
      const std::uint64_t k = Pick(rng, 16);
      const int bit = Coin(rng, 3) ? 31 : static_cast<int>(Pick(rng, 23));
      l.Table().bytes[4 * k + bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      what = "S[6] differs from the table in one bit (warning)";
    }
  }
  l.Put(layers, nest);
  return "list layout: " + what;
}

// HF / GPT-QModel / int8 tensors (docs/bnb.md), the bitsandbytes generator's
// violations; BNB-108 also with shapes only a tensor table varies here.
std::string TensorViolation(const std::string& r, Rng& rng, PtStateDict* layers, int nest) {
  if (r == "BNB-108" && Coin(rng, 3)) {
    const std::string module = "model.layers." + std::to_string(Pick(rng, 32)) + ".mlp.up_proj";
    const int how = static_cast<int>(Pick(rng, 3));
    std::vector<codec::TensorWithBytes> ts = BnbInt8Tensors(module, how != 2 && Coin(rng), rng);
    codec::TensorWithBytes& w = ts[0];  // M.weight, then the scale (and M.weight_format)
    std::string what;
    if (how == 0) {
      w.spec.shape = {w.spec.shape[0] * w.spec.shape[1]};
      what = "int8 W of rank 1";
    } else if (how == 1) {
      w.spec.shape = {1, w.spec.shape[0], w.spec.shape[1]};
      what = "int8 W of rank 3";
    } else {
      codec::TensorWithBytes& format = ts.back();
      if (Coin(rng)) {
        format.bytes = {0, 0};
        format.spec.shape = {2};
      } else {
        format.spec.dtype = "I8";
      }
      what = "weight_format not one U8 0";
    }
    PtPutTensors(layers, ts, nest);
    return what;
  }
  const BnbTensorSet set = BnbViolationTensors(r, rng);
  PtPutTensors(layers, set.tensors, nest);
  return "tensors: " + set.description;
}

}  // namespace

BnbListOptions RandomBnbListOptions(const Bnb4bitLayer& layer, Rng& rng) {
  BnbListOptions o;
  o.tuple = Coin(rng, 3);
  o.shape_as = static_cast<int>(Pick(rng, 3));
  o.with_table = !Coin(rng, 3);
  o.offset_as_float = Coin(rng, 3);
  o.pair_tuple = Coin(rng, 4);
  o.state2_tuple = Coin(rng, 4);
  if (Coin(rng, 3)) o.w_storage = RandomBnbQuantStorage(layer.q.packed.size(), rng);
  o.w_flat = Coin(rng, 4);
  return o;
}

PtObject Bnb4bitListState(const Bnb4bitLayer& layer, const BnbListOptions& o) {
  const codec::Bnb4bitQuantized& q = layer.q;
  std::vector<O> s;
  s.push_back(O::Tensor(q.nested ? ByteVector(q.absmax_codes) : FloatVector(q.absmax)));
  s.push_back(ShapeObject(std::vector<std::int64_t>(layer.shape.begin(), layer.shape.end()), o.shape_as));
  s.push_back(O::Token(BnbDtypeName(layer.dtype)));
  s.push_back(O::Int(static_cast<std::int64_t>(layer.blocksize)));
  if (q.nested) {
    // offset = absmax.mean(), a 0-d float32 tensor in bnb 0.40 (docs/pt.md 7.1).
    O offset = o.offset_as_float ? O::Float(static_cast<double>(q.nested_offset))
                                 : O::Tensor(Floats({q.nested_offset}, {}));
    std::vector<O> state2 = {O::Tensor(FloatVector(q.nested_absmax)), O::Tensor(FloatVector(q.nested_quant_map)),
                             O::Int(static_cast<std::int64_t>(q.nested_blocksize)), O::Bool(false),
                             O::Token("float32"), O::None(), O::None()};
    O s2 = o.state2_tuple ? O::Tuple(std::move(state2)) : O::List(std::move(state2));
    s.push_back(o.pair_tuple ? O::Tuple({std::move(offset), std::move(s2)}) : O::List({std::move(offset), std::move(s2)}));
  } else {
    s.push_back(O::None());
  }
  s.push_back(O::Str(Bnb4bitTypeName(layer.type)));
  if (o.with_table) {
    const auto& table = codec::Bnb4bitTable(layer.type);
    s.push_back(O::Tensor(FloatVector(std::vector<float>(table.begin(), table.end()))));
  }
  return o.tuple ? O::Tuple(std::move(s)) : O::List(std::move(s));
}

PtTensorData Bnb4bitListWeight(const Bnb4bitLayer& layer, const BnbListOptions& o) {
  PtTensorData w;
  w.dtype = o.w_storage;
  std::uint64_t isz = PtItemSize(w.dtype);
  if (layer.q.packed.size() % isz != 0) {
    w.dtype = "U8";
    isz = 1;
  }
  const std::uint64_t items = layer.q.packed.size() / isz;
  w.shape = o.w_flat ? std::vector<std::uint64_t>{items} : std::vector<std::uint64_t>{items, 1};
  w.bytes = layer.q.packed;
  return w;
}

void PtPutBnbListLayer(PtStateDict* dict, const Bnb4bitLayer& layer, const BnbListOptions& options, int nest) {
  const std::string w = layer.module + ".weight";
  PtPut(dict, w, O::Tensor(Bnb4bitListWeight(layer, options)), nest);
  PtPut(dict, w + ".quant_state", Bnb4bitListState(layer, options), nest);
}

void PtPutTensors(PtStateDict* dict, const std::vector<codec::TensorWithBytes>& tensors, int nest) {
  for (const codec::TensorWithBytes& t : tensors) {
    PtTensorData data;
    data.dtype = t.spec.dtype;
    data.shape = t.spec.shape;
    data.bytes = t.bytes;
    PtPut(dict, t.spec.name, O::Tensor(std::move(data)), nest);
  }
}

std::vector<PtTensorData*> PtTensorsIn(PtStateDict* dict) {
  std::vector<PtTensorData*> out;
  for (auto& [k, v] : *dict) Collect(&v, &out);
  return out;
}

PtStateDict RandomPtBnbLayers(Rng& rng) {
  PtStateDict dict;
  const char* const projections[] = {"q_proj", "k_proj", "fc1", "fc2"};
  const int count = static_cast<int>(1 + Pick(rng, 2));
  for (int i = 0; i < count; ++i) {
    // "blocks.<i>.<proj>": never a name of the random content or of the
    // bitsandbytes generator's own layers ("model.layers.<k>..."), so a
    // violation file can hold these beside its broken layer.
    const std::string module = "blocks." + std::to_string(i) + "." + projections[Pick(rng, std::size(projections))];
    const int nest = static_cast<int>(Pick(rng, 3));  // at most the module's two dots
    const std::uint64_t kind = Pick(rng, 6);
    if (kind >= 4) {
      PtPutTensors(&dict, BnbInt8Tensors(module, kind == 5, rng), nest);
      continue;
    }
    Bnb4bitLayer layer = RandomBnb4bitLayer(rng);
    layer.module = module;
    if (kind <= 1) {
      PtPutBnbListLayer(&dict, layer, RandomBnbListOptions(layer, rng), nest);
    } else {
      PtPutTensors(&dict, Bnb4bitTensors(layer, kind == 3, RandomBnbQuantStorage(layer.q.packed.size(), rng)), nest);
    }
  }
  RandomLayouts(&dict, rng);
  return dict;
}

std::vector<std::string> PtBnbViolableRules() {
  return {"BNB-001", "BNB-002", "BNB-004", "BNB-101", "BNB-102", "BNB-103", "BNB-104",
          "BNB-105", "BNB-106", "BNB-108"};
}

Generated PtBnbViolation(const std::string& rule, Rng& rng) {
  PtStateDict layers;
  // The broken layer's modules are "model.layers.<k>.mlp.*": up to three nested dicts.
  const int nest = static_cast<int>(Pick(rng, 4));
  const std::string what = rule != "BNB-108" && Coin(rng) ? ListViolation(rule, rng, &layers, nest)
                                                           : TensorViolation(rule, rng, &layers, nest);
  RandomLayouts(&layers, rng);
  if (Coin(rng, 3)) {  // valid layers beside it, visited before or after it by name
    for (auto& item : RandomPtBnbLayers(rng)) layers.push_back(std::move(item));
  }
  PtDraftOptions options;
  options.max_items = 3;
  options.extra = std::move(layers);
  return Generated{PtWriteDraft(PtRandomDraft(rng, options)), rule, what, {}};
}

}  // namespace qd::gen
