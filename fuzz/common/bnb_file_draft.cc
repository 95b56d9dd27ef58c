// bnb_file_draft.cc: the valid bitsandbytes layer of a bnb_file_diff input's
// tail (bnb_file_draft.h), quantized with the codec's encoders from
// qd::gen::RandomWeights.
#include "fuzz/common/bnb_file_draft.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "codecs/bnb.h"
#include "generators/generators.h"
#include "harness/registry.h"

namespace qd::fuzz::bnb_draft {

const std::vector<Json>& ParsedJsonValues() {
  static const std::vector<Json> values = [] {
    std::vector<Json> out;
    for (std::string_view text : kBnbJsonValues) out.push_back(Json::parse(text));
    return out;
  }();
  return values;
}

std::uint64_t ItemSize(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

static const char* DtypeText(int dtype) {
  return dtype == 0 ? "float16" : dtype == 1 ? "bfloat16" : "float32";
}

// The shape a refitted tensor gets: k = bytes / item elements, laid out by
// shape_mode, else the old shape with its first dimension adjusted, else [k].
std::vector<std::uint64_t> Refit(const DraftTensor& t) {
  const std::uint64_t item = ItemSize(t.dtype);
  const std::uint64_t k = t.bytes.size() / item;
  switch (t.shape_mode) {
    case 0: return {1, k};
    case 1: return {k, 1};
    case 2: return {k};
    case 3: return {};
    case 4: return {k / 2, 2};
    case 5: return {k, 1, 1};
    default: break;
  }
  if (t.shape.size() >= 2) {
    std::uint64_t rest = 1;
    for (std::size_t i = 1; i < t.shape.size(); ++i) rest *= t.shape[i];
    if (rest != 0 && k % rest == 0) {
      std::vector<std::uint64_t> shape = t.shape;
      shape[0] = k / rest;
      return shape;
    }
  }
  return {k};
}

static std::vector<std::uint64_t> LayerShape(const BnbFileTail& tail) {
  std::vector<std::uint64_t> shape;
  switch (tail.rank) {
    case 1: shape = {1 + (tail.dim_a | (static_cast<std::uint64_t>(tail.dim_b & 63) << 8))}; break;
    case 2: shape = {1 + tail.dim_a % 64u, 1 + static_cast<std::uint64_t>(tail.dim_b)}; break;
    default:
      shape = {1 + tail.dim_a % 4u, 1 + (tail.dim_a >> 2) % 16u,
               1 + static_cast<std::uint64_t>(tail.dim_b)};
  }
  if (tail.zero_dim) shape[0] = 0;
  return shape;
}

static std::uint64_t Product(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

static std::vector<float> Weights(std::uint64_t n, const BnbFileTail& tail, codec::BnbDtype dtype,
                           harness::Rng& rng) {
  std::vector<float> x = gen::RandomWeights(n, std::ldexp(1.0f, tail.magnitude_exponent), rng);
  for (float& v : x) v = codec::BnbRoundToDtype(v, dtype);
  return x;
}

static void Build4bit(const BnbFileTail& tail, harness::Rng& rng, Draft* d) {
  const bool gptq = tail.kind == BnbFileKind::k4bitGptq;
  const auto type = tail.fp4 ? codec::Bnb4bitType::kFp4 : codec::Bnb4bitType::kNf4;
  d->type_text = tail.fp4 ? "fp4" : "nf4";
  const std::string sibling = gptq ? d->module_dot + "weight_" : d->weight + ".";
  const auto dtype = static_cast<codec::BnbDtype>(tail.dtype);
  const std::vector<std::uint64_t> shape = LayerShape(tail);
  const std::uint64_t n = Product(shape);
  const std::uint64_t blocksize = 32ull << (tail.blocksize_log2 - 5);
  const std::vector<float> x = Weights(n, tail, dtype, rng);
  codec::Bnb4bitQuantized q;
  std::string error;
  bool nested = tail.nested &&
                codec::QuantizeBnb4bit(x.data(), n, type, blocksize, true, &q, &error, nullptr,
                                       32ull << (tail.nested_blocksize_log2 - 5));
  if (!nested) codec::QuantizeBnb4bit(x.data(), n, type, blocksize, false, &q, &error);

  // quant_storage: the packed bytes in a wider tensor when they divide.
  static const char* const kStorage[] = {"U8", "F16", "BF16", "F32"};
  std::string storage = kStorage[tail.storage];
  if (q.packed.size() % ItemSize(storage) != 0) storage = "U8";
  const std::uint64_t k = q.packed.size() / ItemSize(storage);
  const std::vector<std::uint64_t> packed_shape =
      tail.packed_layout == 0 ? std::vector<std::uint64_t>{k, 1}
      : tail.packed_layout == 1 ? std::vector<std::uint64_t>{1, k}
                                : std::vector<std::uint64_t>{k};
  d->Add(d->weight, storage, packed_shape, q.packed, BnbRole::kWeight);
  if (nested) {
    d->Add(sibling + "absmax", "U8", {q.absmax_codes.size()}, q.absmax_codes, BnbRole::kAbsmax);
  } else {
    d->Add(sibling + "absmax", "F32", {q.absmax.size()}, AsBytes(q.absmax), BnbRole::kAbsmax);
  }
  if (tail.quant_map != 1) {
    const auto map_type = tail.quant_map == 2 ? (tail.fp4 ? codec::Bnb4bitType::kNf4
                                                          : codec::Bnb4bitType::kFp4)
                                              : type;
    const auto& table = codec::Bnb4bitTable(map_type);
    d->Add(sibling + "quant_map", "F32", {16},
           AsBytes(std::vector<float>(table.begin(), table.end())), BnbRole::kQuantMap);
  }
  d->state = Json{{"quant_type", d->type_text}, {"blocksize", blocksize},
                  {"dtype", DtypeText(tail.dtype)}, {"shape", shape}};
  if (nested) {
    d->Add(sibling + "nested_absmax", "F32", {q.nested_absmax.size()}, AsBytes(q.nested_absmax),
           BnbRole::kNestedAbsmax);
    d->Add(sibling + "nested_quant_map", "F32", {256}, AsBytes(q.nested_quant_map),
           BnbRole::kNestedQuantMap);
    d->state["nested_blocksize"] = q.nested_blocksize;
    d->state["nested_dtype"] = "float32";
    // A binary64 that is the binary32 offset exactly: fl32 gives it back.
    d->state["nested_offset"] = static_cast<double>(q.nested_offset);
  }
  DraftTensor state;
  state.name = gptq ? d->module_dot + "weight_quant_state"
                    : d->weight + ".quant_state.bitsandbytes__" + d->type_text;
  state.dtype = "U8";
  state.role = static_cast<int>(BnbRole::kState);
  state.json = true;
  d->tensors.push_back(std::move(state));
}

static void BuildBlockwise8(const BnbFileTail& tail, harness::Rng& rng, Draft* d) {
  d->state_in_metadata = true;
  const auto dtype = static_cast<codec::BnbDtype>(tail.dtype);
  const std::vector<std::uint64_t> shape = LayerShape(tail);
  const std::uint64_t n = Product(shape);
  const std::uint64_t blocksize = 32ull << (tail.blocksize_log2 - 5);
  const std::vector<float> x = Weights(n, tail, dtype, rng);
  const std::vector<float> map = codec::CreateDynamicMap();
  std::vector<std::uint8_t> codes;
  std::vector<float> absmax;
  std::string error;
  codec::QuantizeBlockwise8(x.data(), n, map.data(), blocksize, &codes, &absmax, &error);
  d->Add(d->weight, "U8", shape, codes, BnbRole::kWeight);
  d->Add(d->weight + ".quant_map", "F32", {256}, AsBytes(map), BnbRole::kQuantMap);
  d->state = Json{{"quant_type", nullptr}, {"blocksize", blocksize}, {"dtype", DtypeText(tail.dtype)}};
  if (tail.shape_key == 0) d->state["shape"] = shape;
  if (tail.shape_key == 1) d->state["shape"] = nullptr;
  bool nested = false;
  if (tail.nested && !absmax.empty()) {
    // As quantize_blockwise(nested=True): the maxima minus their mean.
    const float offset = codec::TorchMeanF32(absmax.data(), absmax.size());
    std::vector<float> centred(absmax.size());
    for (std::size_t i = 0; i < absmax.size(); ++i) centred[i] = absmax[i] - offset;
    std::vector<std::uint8_t> codes2;
    std::vector<float> absmax2;
    const std::uint64_t nested_blocksize = 32ull << (tail.nested_blocksize_log2 - 5);
    if (std::isfinite(offset) && codec::QuantizeBlockwise8(centred.data(), centred.size(),
                                                           map.data(), nested_blocksize,
                                                           &codes2, &absmax2, &error)) {
      nested = true;
      d->Add(d->weight + ".absmax", "U8", {codes2.size()}, codes2, BnbRole::kAbsmax);
      d->Add(d->weight + ".nested_absmax", "F32", {absmax2.size()}, AsBytes(absmax2),
             BnbRole::kNestedAbsmax);
      d->Add(d->weight + ".nested_quant_map", "F32", {256}, AsBytes(map), BnbRole::kNestedQuantMap);
      d->state["nested_blocksize"] = nested_blocksize;
      d->state["nested_dtype"] = "float32";
      d->state["nested_offset"] = static_cast<double>(offset);
    }
  }
  if (!nested) {
    d->Add(d->weight + ".absmax", "F32", {absmax.size()}, AsBytes(absmax), BnbRole::kAbsmax);
  }
}

static void BuildInt8(const BnbFileTail& tail, harness::Rng& rng, Draft* d) {
  const bool gptq = tail.kind == BnbFileKind::kInt8Gptq;
  const std::uint64_t rows = tail.zero_dim ? 0 : 1 + tail.dim_a % 64u;
  const std::uint64_t columns = 1 + static_cast<std::uint64_t>(tail.dim_b);
  // Int8Params casts to binary16 first: keep the weights finite there.
  std::vector<float> w = Weights(rows * columns, tail, codec::BnbDtype::kFloat16, rng);
  for (float& v : w) v = std::clamp(v, -65504.0f, 65504.0f);
  std::vector<std::int8_t> cb;
  std::vector<float> scb;
  std::string error;
  codec::QuantizeBnbInt8Rows(w.data(), rows, columns, &cb, &scb, &error);
  d->Add(d->weight, "I8", {rows, columns}, AsBytes(cb), BnbRole::kWeight);
  d->Add(d->module_dot + (gptq ? "weight_scb" : "SCB"), "F32", {rows}, AsBytes(scb),
         BnbRole::kScale);
  if (!gptq && tail.weight_format) {
    d->Add(d->module_dot + "weight_format", "U8", {}, {0}, BnbRole::kWeightFormat);
  }
}

Draft BuildDraft(const BnbFileTail& tail) {
  static const char* const kModules[] = {"model.layers.3.mlp.down_proj", "", "lm_head", "a.weight"};
  Draft d;
  d.kind = tail.kind;
  const std::string module = kModules[tail.module];
  d.module_dot = module.empty() ? "" : module + ".";
  d.weight = d.module_dot + "weight";
  d.type_text = tail.fp4 ? "fp4" : "nf4";
  harness::Rng rng(tail.seed);
  switch (tail.kind) {
    case BnbFileKind::k4bitHf:
    case BnbFileKind::k4bitGptq: Build4bit(tail, rng, &d); break;
    case BnbFileKind::kBlockwise8: BuildBlockwise8(tail, rng, &d); break;
    case BnbFileKind::kInt8Hf:
    case BnbFileKind::kInt8Gptq: BuildInt8(tail, rng, &d); break;
  }
  if (tail.extra_tensor) {
    d.Add("model.norm.weight", "F32", {4}, AsBytes(std::vector<float>{1.0f, 0.5f, -2.0f, 0.0f}),
          BnbRole::kExtra);
  }
  if (tail.order == 1) std::reverse(d.tensors.begin(), d.tensors.end());
  if (tail.order == 2 && !d.tensors.empty()) {
    std::rotate(d.tensors.begin(), d.tensors.begin() + tail.seed % d.tensors.size(),
                d.tensors.end());
  }
  return d;
}

}  // namespace qd::fuzz::bnb_draft
