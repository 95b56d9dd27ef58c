// Generators for bitsandbytes files (rules BNB-*, docs/bnb.md). Valid files
// are made with the codec's encoders (bitsandbytes' default backend as the
// peer vectors record it); each violation breaks one thing in such a file,
// chosen so that no check earlier in docs/bnb.md's order fires.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/safetensors.h"
#include "generators/generators.h"
#include "generators/tensor_list.h"

namespace qd::gen {
namespace {

using Json = nlohmann::ordered_json;


template <typename T>
std::vector<std::uint8_t> AsBytes(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<std::uint8_t> JsonBytes(const Json& j) {
  const std::string text = j.dump();
  return {text.begin(), text.end()};
}

// A JSON number that reads back as exactly this binary32 value.
Json FloatNumber(float v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return Json::parse(buf);
}

enum class Kind { k4bitHf, k4bitGptqmodel, kBlockwise8, kInt8Hf, kInt8Gptqmodel };

// A file under construction: tensors by name (written in this order), the
// metadata, and the JSON state so violations can edit it before writing.
struct Draft {
  Kind kind = Kind::k4bitHf;
  std::string weight;  // W
  std::string sibling_prefix;  // "W." (HF, blockwise8) or "M.weight_" (GPT-QModel)
  std::string state_name;
  Json state;
  bool state_in_metadata = false;  // blockwise8: __metadata__ entry
  std::vector<codec::TensorWithBytes> tensors;
  codec::MetadataList metadata = {{"format", "pt"}};
  bool nested = false;
  std::uint64_t n = 0;
  std::string scale_name;  // int8: M.SCB or M.weight_scb

  codec::TensorWithBytes* Find(const std::string& name) { return FindTensor(tensors, name); }
  void Remove(const std::string& name) { RemoveTensor(tensors, name); }
  void Add(std::string name, std::string dtype, std::vector<std::uint64_t> shape,
           std::vector<std::uint8_t> bytes) {
    tensors.push_back({{std::move(name), std::move(dtype), std::move(shape), 0}, std::move(bytes)});
  }
  std::string Sibling(const std::string& what) const { return sibling_prefix + what; }

  // Every tensor, the 4-bit JSON state last as a U8 tensor (docs/bnb.md "Layers").
  std::vector<codec::TensorWithBytes> Tensors() const {
    std::vector<codec::TensorWithBytes> all = tensors;
    if (!state_in_metadata && !state_name.empty()) {
      const std::vector<std::uint8_t> text = JsonBytes(state);
      all.push_back({{state_name, "U8", {text.size()}, 0}, text});
    }
    return all;
  }

  Generated Write() const {
    codec::MetadataList meta = metadata;
    if (state_in_metadata) meta.emplace_back("bnb_blockwise8_quant_state", state.dump());
    const std::vector<codec::TensorWithBytes> all = Tensors();
    return Generated{codec::SerializeSafetensors(all, &meta), rule, what, {}};
  }

  // What a violation labels its instance with ("" and a description when valid).
  Draft Label(std::string r, std::string w) && {
    rule = std::move(r);
    what = std::move(w);
    return std::move(*this);
  }
  std::string rule, what;
};

std::vector<std::uint64_t> RandomShape(Rng& rng) {
  switch (Pick(rng, 4)) {
    case 0: return {1 + Pick(rng, 5), 1 + Pick(rng, 300)};
    case 1: return {1 + Pick(rng, 40), 32 * (1 + Pick(rng, 8))};
    case 2: return {1 + Pick(rng, 700)};
    default: return {1 + Pick(rng, 3), 1 + Pick(rng, 9), 1 + Pick(rng, 30)};
  }
}

std::vector<float> RandomInput(std::uint64_t n, codec::BnbDtype dtype, Rng& rng) {
  std::vector<float> x = RandomWeights(n, std::ldexp(1.0f, static_cast<int>(Pick(rng, 12)) - 8), rng);
  for (float& v : x) v = codec::BnbRoundToDtype(v, dtype);
  return x;
}

std::uint64_t Product(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

// The HF (W.absmax, W.quant_state.bitsandbytes__T) or GPT-QModel
// (M.weight_absmax, M.weight_quant_state) tensors of a 4-bit layer, its JSON
// state kept apart so that violations can edit it before it is written.
Draft Draft4bit(const Bnb4bitLayer& layer, bool gptqmodel, std::string_view storage) {
  Draft d;
  d.kind = gptqmodel ? Kind::k4bitGptqmodel : Kind::k4bitHf;
  d.weight = layer.module + ".weight";
  const std::string type_text = Bnb4bitTypeName(layer.type);
  if (gptqmodel) {
    d.sibling_prefix = layer.module + ".weight_";
    d.state_name = layer.module + ".weight_quant_state";
  } else {
    d.sibling_prefix = d.weight + ".";
    d.state_name = d.weight + ".quant_state.bitsandbytes__" + type_text;
  }
  const codec::Bnb4bitQuantized& q = layer.q;
  d.n = Product(layer.shape);
  d.nested = q.nested;
  // quant_storage: the packed bytes may live in a wider tensor (docs/bnb.md step 8).
  const std::uint64_t item = PtItemSize(storage);
  d.Add(d.weight, std::string(storage), {q.packed.size() / item, 1}, q.packed);
  const auto& table = codec::Bnb4bitTable(layer.type);
  d.Add(d.Sibling("quant_map"), "F32", {16}, AsBytes(std::vector<float>(table.begin(), table.end())));
  d.state = Json{{"quant_type", type_text}, {"blocksize", layer.blocksize}, {"dtype", BnbDtypeName(layer.dtype)},
                 {"shape", layer.shape}};
  if (d.nested) {
    d.Add(d.Sibling("absmax"), "U8", {q.absmax_codes.size()}, q.absmax_codes);
    d.Add(d.Sibling("nested_absmax"), "F32", {q.nested_absmax.size()}, AsBytes(q.nested_absmax));
    d.Add(d.Sibling("nested_quant_map"), "F32", {256}, AsBytes(q.nested_quant_map));
    d.state["nested_blocksize"] = q.nested_blocksize;
    d.state["nested_dtype"] = "float32";
    d.state["nested_offset"] = FloatNumber(q.nested_offset);
  } else {
    d.Add(d.Sibling("absmax"), "F32", {q.absmax.size()}, AsBytes(q.absmax));
  }
  return d;
}

Draft Make4bit(Rng& rng, bool gptqmodel, int force_nested = -1) {
  const Bnb4bitLayer layer = RandomBnb4bitLayer(rng, force_nested);
  return Draft4bit(layer, gptqmodel, RandomBnbQuantStorage(layer.q.packed.size(), rng));
}

Draft MakeBlockwise8(Rng& rng, int force_nested = -1) {
  Draft d;
  d.kind = Kind::kBlockwise8;
  d.weight = "model.layers." + std::to_string(Pick(rng, 32)) + ".self_attn.q_proj.weight";
  d.sibling_prefix = d.weight + ".";
  d.state_in_metadata = true;
  const std::uint64_t blocksize = 32ull << Pick(rng, 8);
  const auto dtype = static_cast<codec::BnbDtype>(Pick(rng, 3));
  const std::vector<std::uint64_t> shape = RandomShape(rng);
  d.n = Product(shape);
  d.nested = force_nested >= 0 ? force_nested == 1 : Pick(rng, 2) == 0;
  const std::vector<float> x = RandomInput(d.n, dtype, rng);
  const std::vector<float> map = codec::CreateDynamicMap();
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  std::string error;
  codec::QuantizeBlockwise8(x.data(), d.n, map.data(), blocksize, &codes, &absmax, &error);
  d.Add(d.weight, "U8", shape, codes);
  d.Add(d.Sibling("quant_map"), "F32", {256}, AsBytes(map));
  d.state = Json{{"quant_type", nullptr}, {"blocksize", blocksize}, {"dtype", BnbDtypeName(dtype)},
                 {"shape", nullptr}};
  if (d.nested) {
    // As quantize_blockwise(nested=True): absmax - mean, same blocksize.
    const float offset = codec::TorchMeanF32(absmax.data(), absmax.size());
    std::vector<float> centred(absmax.size());
    for (std::size_t i = 0; i < absmax.size(); ++i) centred[i] = absmax[i] - offset;
    std::vector<std::uint8_t> codes2;
    std::vector<float> absmax2;
    codec::QuantizeBlockwise8(centred.data(), centred.size(), map.data(), blocksize, &codes2,
                              &absmax2, &error);
    d.Add(d.Sibling("absmax"), "U8", {codes2.size()}, codes2);
    d.Add(d.Sibling("nested_absmax"), "F32", {absmax2.size()}, AsBytes(absmax2));
    d.Add(d.Sibling("nested_quant_map"), "F32", {256}, AsBytes(map));
    d.state["nested_blocksize"] = blocksize;
    d.state["nested_dtype"] = "float32";
    d.state["nested_offset"] = FloatNumber(offset);
  } else {
    d.Add(d.Sibling("absmax"), "F32", {absmax.size()}, AsBytes(absmax));
  }
  return d;
}

// An int8 row-scaled layer of module M (docs/bnb.md "int8 row-scaled layer").
Draft DraftInt8(const std::string& module, bool gptqmodel, Rng& rng) {
  Draft d;
  d.kind = gptqmodel ? Kind::kInt8Gptqmodel : Kind::kInt8Hf;
  d.weight = module + ".weight";
  const std::uint64_t rows = 1 + Pick(rng, 20);
  const std::uint64_t columns = 1 + Pick(rng, 100);
  d.n = rows * columns;
  const std::vector<float> w = RandomInput(d.n, codec::BnbDtype::kFloat16, rng);
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  std::string error;
  codec::QuantizeBnbInt8Rows(w.data(), rows, columns, &cb, &scb, &error);
  d.Add(d.weight, "I8", {rows, columns}, AsBytes(cb));
  if (gptqmodel) {
    d.sibling_prefix = module + ".weight_";
    d.scale_name = module + ".weight_scb";
  } else {
    d.sibling_prefix = module + ".";
    d.scale_name = module + ".SCB";
  }
  d.Add(d.scale_name, "F32", {rows}, AsBytes(scb));
  if (!gptqmodel) {
    d.Add(module + ".weight_format", "U8", {}, {0});
  }
  return d;
}

Draft MakeInt8(Rng& rng, bool gptqmodel) {
  const std::string module = "model.layers." + std::to_string(Pick(rng, 32)) + ".mlp.up_proj";
  return DraftInt8(module, gptqmodel, rng);
}

Draft RandomDraft(Rng& rng) {
  switch (Pick(rng, 5)) {
    case 0: return Make4bit(rng, false);
    case 1: return Make4bit(rng, true);
    case 2: return MakeBlockwise8(rng);
    case 3: return MakeInt8(rng, false);
    default: return MakeInt8(rng, true);
  }
}

// Makes an F32 vector tensor hold `count` values (zeros appended or values
// dropped), keeping its shape consistent so only the element count is off.
void ResizeFloats(codec::TensorWithBytes* t, std::uint64_t count) {
  t->bytes.resize(count * 4);
  t->spec.shape = {count};
}

std::uint64_t FloatCount(const codec::TensorWithBytes* t) { return t->bytes.size() / 4; }

void SetFloat(codec::TensorWithBytes* t, std::size_t index, float v) {
  std::memcpy(t->bytes.data() + 4 * index, &v, 4);
}

Draft ValidDraft(Rng& rng) {
  Draft d = RandomDraft(rng);
  if (Pick(rng, 3) == 0) {  // a plain tensor beside the layer
    d.Add("model.norm.weight", "F32", {4}, AsBytes(std::vector<float>{1.0f, 0.5f, -2.0f, 0.0f}));
  }
  return std::move(d).Label("", "valid bitsandbytes file");
}

// The instance BnbViolation writes. tensor_table_only: never the 8-bit
// blockwise layout, whose state is a safetensors __metadata__ entry and so
// cannot occur in a .pt tensor table (docs/pt.md 6.4); the draws stay those
// of the safetensors instance where the choice is not blockwise.
Draft Violation(const std::string& r, Rng& rng, bool tensor_table_only) {
  const bool blockwise_ok = !tensor_table_only;
  if (r == "BNB-001") {
    Draft d = Make4bit(rng, false, 0);
    switch (Pick(rng, 4)) {
      case 0:
        d.state["quant_type"] = "int4";
        d.state_name = d.weight + ".quant_state.bitsandbytes__int4";
        break;
      case 1: d.state["quant_type"] = "af4"; break;
      case 2: d.state["blocksize"] = std::vector<std::uint64_t>{16, 48, 8192, 0}[Pick(rng, 4)]; break;
      default: {  // one absmax more than ceil(n / blocksize)
        codec::TensorWithBytes* absmax = d.Find(d.Sibling("absmax"));
        ResizeFloats(absmax, FloatCount(absmax) + 1);
      }
    }
    return std::move(d).Label(r, "4-bit quant_type, blocksize or absmax count outside BNB-001");
  }
  if (r == "BNB-002") {
    Draft d = Make4bit(rng, Pick(rng, 2) == 1);
    codec::TensorWithBytes* w = d.Find(d.weight);
    w->spec.dtype = "U8";
    if (Pick(rng, 2) == 0 || w->bytes.size() <= 1) {
      w->bytes.push_back(0x77);
    } else {
      w->bytes.pop_back();
    }
    w->spec.shape = {w->bytes.size(), 1};
    return std::move(d).Label(r, "packed weight is not ceil(n/2) bytes");
  }
  if (r == "BNB-004") {
    Draft d = Pick(rng, 3) == 0 && blockwise_ok ? MakeBlockwise8(rng, 1) : Make4bit(rng, Pick(rng, 2) == 1, 1);
    switch (Pick(rng, 6)) {
      case 0: d.state.erase("nested_offset"); break;
      case 1: d.Remove(d.Sibling("nested_absmax")); break;
      case 2: d.Remove(d.Sibling("nested_quant_map")); break;
      case 3: d.state["nested_dtype"] = "float16"; break;
      case 4: d.state["nested_blocksize"] = 100; break;
      default: {
        codec::TensorWithBytes* map = d.Find(d.Sibling("nested_quant_map"));
        ResizeFloats(map, 255);
      }
    }
    return std::move(d).Label(r, "nested statistics incomplete");
  }
  if (r == "BNB-101") {
    Draft d = Pick(rng, 4) == 0 && blockwise_ok ? MakeBlockwise8(rng) : Make4bit(rng, Pick(rng, 2) == 1);
    switch (Pick(rng, 6)) {
      case 0: d.state.erase("blocksize"); break;
      case 1: d.state["blocksize"] = "64"; break;
      case 2: d.state["dtype"] = 16; break;
      case 3: d.state = Json::array({1, 2}); break;
      case 4: d.state["blocksize"] = -64; break;
      default:
        if (d.state_in_metadata) {
          d.state["shape"] = "x";
        } else {
          d.state["shape"] = Json::array({1.5});
        }
    }
    return std::move(d).Label(r, "quant_state JSON malformed");
  }
  if (r == "BNB-102") {
    Draft d = Make4bit(rng, false, 0);
    switch (Pick(rng, 3)) {
      case 0: {  // suffix disagrees with quant_type
        const bool nf4 = d.state["quant_type"] == "nf4";
        d.state_name = d.weight + ".quant_state.bitsandbytes__" + (nf4 ? "fp4" : "nf4");
        break;
      }
      case 1: {  // flat absmax stored as U8
        codec::TensorWithBytes* absmax = d.Find(d.Sibling("absmax"));
        absmax->spec.dtype = "U8";
        absmax->spec.shape = {absmax->bytes.size()};
        break;
      }
      default: {
        codec::TensorWithBytes* map = d.Find(d.Sibling("quant_map"));
        ResizeFloats(map, 15);
      }
    }
    return std::move(d).Label(r, "quant_state disagrees with the tensors");
  }
  if (r == "BNB-103") {
    Draft d = Pick(rng, 3) == 0 && blockwise_ok ? MakeBlockwise8(rng) : Make4bit(rng, Pick(rng, 2) == 1);
    d.state["dtype"] = std::vector<std::string>{"float64", "int8", "half", ""}[Pick(rng, 4)];
    return std::move(d).Label(r, "unknown restored dtype");
  }
  if (r == "BNB-104") {
    const float bad[] = {INFINITY, -INFINITY, NAN};
    const float v = bad[Pick(rng, 3)];
    switch (Pick(rng, 3)) {
      case 0: {
        Draft d = Make4bit(rng, Pick(rng, 2) == 1, 0);
        codec::TensorWithBytes* absmax = d.Find(d.Sibling("absmax"));
        SetFloat(absmax, Pick(rng, FloatCount(absmax)), v);
        return std::move(d).Label(r, "non-finite absmax");
      }
      case 1: {
        Draft d = Make4bit(rng, Pick(rng, 2) == 1, 1);
        codec::TensorWithBytes* nested = d.Find(d.Sibling("nested_absmax"));
        SetFloat(nested, Pick(rng, FloatCount(nested)), v);
        return std::move(d).Label(r, "non-finite nested_absmax");
      }
      default: {
        Draft d = MakeInt8(rng, Pick(rng, 2) == 1);
        codec::TensorWithBytes* scb = d.Find(d.scale_name);
        SetFloat(scb, Pick(rng, FloatCount(scb)), v);
        return std::move(d).Label(r, "non-finite SCB");
      }
    }
  }
  if (r == "BNB-105") {
    Draft d = Make4bit(rng, false);
    switch (Pick(rng, 3)) {
      case 0: d.Remove(d.weight); break;
      case 1: d.Remove(d.Sibling("absmax")); break;
      default: {  // a second state tensor for the same weight
        const std::vector<std::uint8_t> text = JsonBytes(d.state);
        const bool nf4 = d.state["quant_type"] == "nf4";
        d.Add(d.weight + ".quant_state.bitsandbytes__" + (nf4 ? "fp4" : "nf4"), "U8",
              {text.size()}, text);
      }
    }
    return std::move(d).Label(r, "layer incomplete or ambiguous");
  }
  if (r == "BNB-106") {
    Draft d = Make4bit(rng, Pick(rng, 2) == 1);
    const bool nf4 = d.state["quant_type"] == "nf4";
    const auto& other = codec::Bnb4bitTable(nf4 ? codec::Bnb4bitType::kFp4 : codec::Bnb4bitType::kNf4);
    d.Find(d.Sibling("quant_map"))->bytes = AsBytes(std::vector<float>(other.begin(), other.end()));
    return std::move(d).Label(r, "stored quant_map is the other table (warning)");
  }
  if (r == "BNB-107") {
    Draft d = MakeBlockwise8(rng, 0);
    switch (Pick(rng, 4)) {
      case 0: d.state["blocksize"] = std::vector<std::uint64_t>{16, 48, 8192, 0}[Pick(rng, 4)]; break;
      case 1: d.Find(d.weight)->spec.dtype = "I8"; break;
      case 2: {
        codec::TensorWithBytes* map = d.Find(d.Sibling("quant_map"));
        ResizeFloats(map, 255);
        break;
      }
      default: {
        codec::TensorWithBytes* absmax = d.Find(d.Sibling("absmax"));
        ResizeFloats(absmax, FloatCount(absmax) + 1);
      }
    }
    return std::move(d).Label(r, "8-bit blockwise layer malformed");
  }
  if (r == "BNB-108") {
    Draft d = MakeInt8(rng, false);
    switch (Pick(rng, 3)) {
      case 0: {
        codec::TensorWithBytes* w = d.Find(d.weight);
        w->spec.dtype = "U8";
        break;
      }
      case 1: {
        codec::TensorWithBytes* scb = d.Find(d.scale_name);
        ResizeFloats(scb, FloatCount(scb) + 1);
        break;
      }
      default: d.Find(d.Sibling("weight_format"))->bytes = {1};
    }
    return std::move(d).Label(r, "int8 row-scaled layer malformed");
  }
  return ValidDraft(rng);
}

}  // namespace

const char* Bnb4bitTypeName(codec::Bnb4bitType type) {
  return type == codec::Bnb4bitType::kNf4 ? "nf4" : "fp4";
}

const char* BnbDtypeName(codec::BnbDtype dtype) {
  switch (dtype) {
    case codec::BnbDtype::kFloat16: return "float16";
    case codec::BnbDtype::kBfloat16: return "bfloat16";
    case codec::BnbDtype::kFloat32: return "float32";
  }
  return "float32";
}

Bnb4bitLayer RandomBnb4bitLayer(Rng& rng, int force_nested) {
  Bnb4bitLayer layer;
  layer.module = "model.layers." + std::to_string(Pick(rng, 32)) + ".mlp.down_proj";
  layer.type = Pick(rng, 2) == 0 ? codec::Bnb4bitType::kNf4 : codec::Bnb4bitType::kFp4;
  layer.blocksize = 32ull << Pick(rng, 8);
  layer.dtype = static_cast<codec::BnbDtype>(Pick(rng, 3));
  layer.shape = RandomShape(rng);
  const std::uint64_t n = Product(layer.shape);
  const bool nested = force_nested >= 0 ? force_nested == 1 : Pick(rng, 2) == 0;
  const std::vector<float> x = RandomInput(n, layer.dtype, rng);
  std::string error;
  codec::QuantizeBnb4bit(x.data(), n, layer.type, layer.blocksize, nested, &layer.q, &error);
  return layer;
}

std::string RandomBnbQuantStorage(std::uint64_t packed_bytes, Rng& rng) {
  std::string storage = "U8";
  const std::uint64_t s = Pick(rng, 4);
  if (s == 1 && packed_bytes % 2 == 0) storage = Pick(rng, 2) ? "F16" : "BF16";
  if (s == 2 && packed_bytes % 4 == 0) storage = "F32";
  return storage;
}

std::vector<codec::TensorWithBytes> Bnb4bitTensors(const Bnb4bitLayer& layer, bool gptqmodel,
                                                   std::string_view storage) {
  return Draft4bit(layer, gptqmodel, storage).Tensors();
}

std::vector<codec::TensorWithBytes> BnbInt8Tensors(const std::string& module, bool gptqmodel, Rng& rng) {
  return DraftInt8(module, gptqmodel, rng).Tensors();
}

std::vector<std::uint8_t> BnbWriteSafetensors(const std::vector<codec::TensorWithBytes>& tensors) {
  const codec::MetadataList meta = {{"format", "pt"}};
  return codec::SerializeSafetensors(tensors, &meta);
}

Generated BnbValid(Rng& rng) { return ValidDraft(rng).Write(); }

std::vector<std::string> BnbViolableRules() {
  return {"BNB-001", "BNB-002", "BNB-004", "BNB-101", "BNB-102", "BNB-103", "BNB-104",
          "BNB-105", "BNB-106", "BNB-107", "BNB-108"};
}

Generated BnbViolation(std::string_view rule, Rng& rng) {
  return Violation(std::string(rule), rng, false).Write();
}

BnbTensorSet BnbViolationTensors(std::string_view rule, Rng& rng) {
  const Draft d = Violation(std::string(rule), rng, true);
  return {d.Tensors(), d.rule, d.what};
}

}  // namespace qd::gen
