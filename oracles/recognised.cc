// recognised.cc: docs/recognised.md read step by step, one function per
// section: FindLayers (2), CheckLayer (3, L1..L4 with section 4's tables),
// CheckTensorStorage (5, E1 and E2), the warnings W1, the tensors of 6.
#include "oracles/recognised.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>

#include "oracles/finding.h"
#include "oracles/json.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

constexpr std::int64_t kHeaderByte = 8;

// Section 2's table and section 4's dtype and rank columns. dtypes lists the
// accepted dtype names ("" = any); rank -1 = any.
struct MemberSpec {
  const char* suffix;
  bool required;
  bool marker;
  std::vector<std::string> dtypes;
  int rank;
  bool empty_any_rank;  // QQQ s_group, BitBLAS zeros: with no element, any rank
};

struct FamilySpec {
  const char* name;
  const char* label;
  std::vector<MemberSpec> members;
};

const std::vector<std::string> kAnyDtype = {};
const std::vector<std::string> kFloatDtypes = {"F16", "BF16", "F32"};
// BitBLAS's storage dtype ("usually int8"): any integer dtype.
const std::vector<std::string> kIntegerDtypes = {"I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64"};
// BitBLAS's zeros are "in that compressed dtype": qweight's (CheckLayer).
const std::vector<std::string> kQweightDtype = {"=qweight"};

const std::vector<FamilySpec>& FamilyTable() {
  static const std::vector<FamilySpec> table = {
      {"exl3", "EXL3",
       {{"trellis", true, true, kAnyDtype, -1, false},
        {"suh", false, true, kAnyDtype, -1, false},
        {"svh", false, true, kAnyDtype, -1, false},
        {"su", false, true, kAnyDtype, -1, false},
        {"sv", false, true, kAnyDtype, -1, false},
        {"mcg", false, true, kAnyDtype, -1, false},
        {"mul1", false, true, kAnyDtype, -1, false},
        {"bias", false, false, kAnyDtype, -1, false}}},
      {"vptq", "VPTQ",
       {{"centroids.weight", true, true, kFloatDtypes, 2, false},
        {"indices", true, true, {"I32"}, 3, false},
        {"res_centroids.weight", false, true, kFloatDtypes, 2, false},
        {"outlier_centroids.weight", false, true, kFloatDtypes, 2, false},
        {"outlier_indices", false, true, {"I32"}, -1, false},
        {"weight_scale", false, false, kFloatDtypes, -1, false},
        {"weight_bias", false, false, kFloatDtypes, -1, false},
        {"perm", false, false, {"I32", "I64"}, 1, false},
        {"bias", false, false, kFloatDtypes, 1, false}}},
      {"qqq", "QQQ",
       {{"B", true, false, {"I32"}, 2, false},
        {"s_channel", true, true, {"F32"}, 2, false},
        {"s_group", true, true, {"F16"}, 2, true},
        {"bias", false, false, {"F16"}, 1, false}}},
      {"paroquant", "ParoQuant",
       {{"qweight", true, false, {"I32"}, 2, false},
        {"qzeros", true, false, {"I32"}, 2, false},
        {"scales", true, false, kFloatDtypes, 2, false},
        {"theta", true, true, kAnyDtype, -1, false},
        {"pairs", true, true, kAnyDtype, -1, false},
        {"channel_scales", true, true, kAnyDtype, -1, false},
        {"bias", false, false, kFloatDtypes, 1, false}}},
      // Its markers count only under a bitblas label (section 2).
      {"bitblas", "BitBLAS",
       {{"qweight", true, true, kIntegerDtypes, -1, false},
        {"scales", true, true, kFloatDtypes, 2, false},
        {"qzeros", false, true, kQweightDtype, 2, true},
        {"zeros", false, true, kQweightDtype, 2, true},
        {"bias", false, false, kFloatDtypes, 1, false}}},
  };
  return table;
}

// A layer: its family (index into FamilyTable), prefix, and for each member
// of the family the tensor (index into container.tensors) or -1.
struct Layer {
  std::size_t family = 0;
  std::string prefix;
  std::vector<long> member_tensor;
  long anchor = -1;
};


// "T == P + s and P is empty or ends with '.'": the prefix, or false.
bool MemberPrefix(const std::string& name, const std::string& suffix, std::string* prefix) {
  if (!name.ends_with(suffix)) return false;
  *prefix = name.substr(0, name.size() - suffix.size());
  return prefix->empty() || prefix->back() == '.';
}

// Tensor index by name (names are unique: ST rules).
using NameIndex = std::map<std::string, long>;

NameIndex IndexNames(const MergedTable& c) {
  NameIndex index;
  for (std::size_t i = 0; i < c.tensors.size(); ++i) index[c.tensors[i].name] = static_cast<long>(i);
  return index;
}

long FindTensor(const NameIndex& index, const std::string& name) {
  const auto it = index.find(name);
  return it == index.end() ? -1 : it->second;
}

bool IsBitblasFamily(std::size_t f) { return std::string(FamilyTable()[f].name) == "bitblas"; }

// Section 2's config facts: the winner source W labels the file bitblas (any
// of method, quant_method, format, checkpoint_format is "bitblas", none is
// "marlin", is_marlin_format is not true), and W's bits.
struct BitblasFacts {
  bool label = false;
  bool bits_known = false;
  std::uint64_t bits = 0;
};

BitblasFacts ReadBitblasFacts(const std::vector<qd::SideFile>& configs) {
  BitblasFacts facts;
  for (const qd::SideFile& source : configs) {
    JsonDocument d;
    JsonError error;
    std::string duplicate;
    if (!ParseStrictJsonObject(source.bytes.data(), source.bytes.size(), &d, &error) ||
        FindDuplicateKey(d, &duplicate)) {
      return facts;  // W is not strict JSON: no label
    }
    const std::size_t slash = source.name.rfind('/');
    const std::string base = slash == std::string::npos ? source.name : source.name.substr(slash + 1);
    std::uint32_t w = 0;
    if (base == "config.json") {
      w = d.FindMember(0, "quantization_config");
      // Absent or null: this file is no source (docs/gptq.md 1); the next wins.
      if (w == kNoNode || d.nodes[w].kind == JsonKind::kNull) continue;
      if (d.nodes[w].kind != JsonKind::kObject) return facts;
    }
    bool bitblas = false;
    bool marlin = false;
    for (const char* key : {"method", "quant_method", "format", "checkpoint_format"}) {
      const std::uint32_t v = d.FindMember(w, key);
      if (v == kNoNode || d.nodes[v].kind != JsonKind::kString) continue;
      if (d.Text(v) == "bitblas") bitblas = true;
      if (d.Text(v) == "marlin") marlin = true;
    }
    const std::uint32_t is_marlin = d.FindMember(w, "is_marlin_format");
    if (is_marlin != kNoNode && d.nodes[is_marlin].kind == JsonKind::kTrue) marlin = true;
    facts.label = bitblas && !marlin;
    // bits: the first of bits, w_bit, wbits that is present and not null.
    for (const char* key : {"bits", "w_bit", "wbits"}) {
      const std::uint32_t v = d.FindMember(w, key);
      if (v == kNoNode || d.nodes[v].kind == JsonKind::kNull) continue;
      std::uint64_t bits = 0;
      if (d.nodes[v].kind == JsonKind::kNumber && JsonToUint64(d, v, &bits) && bits >= 1) {
        facts.bits_known = true;
        facts.bits = bits;
      }
      break;
    }
    return facts;
  }
  return facts;
}

// Section 2: every prefix owning a marker; a prefix belongs to the first
// family in table order with a marker there. Layers in anchor order.
std::vector<Layer> FindLayers(const MergedTable& c, const NameIndex& names, bool bitblas_label) {
  std::vector<Layer> layers;
  std::set<std::string> known;
  for (std::size_t f = 0; f < FamilyTable().size(); ++f) {
    if (IsBitblasFamily(f) && !bitblas_label) continue;
    for (const TableTensor& t : c.tensors) {
      for (const MemberSpec& m : FamilyTable()[f].members) {
        std::string prefix;
        if (!m.marker || !MemberPrefix(t.name, m.suffix, &prefix)) continue;
        if (!known.insert(prefix).second) continue;
        Layer layer;
        layer.family = f;
        layer.prefix = prefix;
        for (const MemberSpec& member : FamilyTable()[f].members) {
          const long i = FindTensor(names, prefix + member.suffix);
          layer.member_tensor.push_back(i);
          if (layer.anchor < 0 && i >= 0) layer.anchor = i;
        }
        layers.push_back(layer);
      }
    }
  }
  // The table is sorted by (shard, begin, end, name): the anchor's index is
  // its place in that order.
  std::sort(layers.begin(), layers.end(),
            [](const Layer& a, const Layer& b) { return a.anchor < b.anchor; });
  return layers;
}

struct Check {
  const std::string& file_name;
  const MergedTable& c;
  const NameIndex& names;
  const BitblasFacts& bitblas;
  qd::Outcome* outcome;

  bool Error(const char* rule, const std::string& file, const std::string& tensor,
             const char* field, std::int64_t offset, const std::string& message) {
    outcome->findings.push_back(NewFinding(rule, qd::Severity::kError, file, tensor, field, offset, message));
    outcome->refused = true;
    return false;
  }
  bool TensorError(const char* rule, const std::string& tensor, const char* field,
                   const std::string& message) {
    return Error(rule, file_name, tensor, field, kHeaderByte, message);
  }
  const TableTensor& T(long i) const { return c.tensors[static_cast<std::size_t>(i)]; }

  // Section 3, L1..L4.
  bool CheckLayer(const Layer& layer) {
    const FamilySpec& family = FamilyTable()[layer.family];
    const std::string anchor = T(layer.anchor).name;
    const std::string name = family.name;
    auto at = [&](const char* suffix) -> long {
      for (std::size_t m = 0; m < family.members.size(); ++m) {
        if (std::string(family.members[m].suffix) == suffix) return layer.member_tensor[m];
      }
      return -1;
    };
    // L1 REC-002.
    for (std::size_t m = 0; m < family.members.size(); ++m) {
      if (family.members[m].required && layer.member_tensor[m] < 0) {
        return TensorError("REC-002", anchor, family.members[m].suffix,
                           std::string(family.label) + " layer misses " + family.members[m].suffix);
      }
    }
    if (name == "vptq") {
      if (at("outlier_indices") >= 0 && at("outlier_centroids.weight") < 0) {
        return TensorError("REC-002", anchor, "outlier_centroids.weight",
                           "outlier_indices without its codebook");
      }
      if (at("outlier_centroids.weight") >= 0 && at("outlier_indices") < 0) {
        return TensorError("REC-002", anchor, "outlier_indices",
                           "an outlier codebook without its indices");
      }
    }
    // L1, REC-008: "A zeros attribute aliases qzeros; it is not an extra
    // independent tensor".
    if (name == "bitblas" && at("qzeros") >= 0 && at("zeros") >= 0) {
      return TensorError("REC-008", T(at("zeros")).name, "zeros", "zeros beside qzeros");
    }
    // L2 REC-005.
    if (name == "qqq" && FindTensor(names, layer.prefix + "g_idx") >= 0) {
      return TensorError("REC-005", layer.prefix + "g_idx", "g_idx", "QQQ has no g_idx");
    }
    // L3 REC-003: dtype, then rank.
    for (std::size_t m = 0; m < family.members.size(); ++m) {
      if (layer.member_tensor[m] < 0) continue;
      const MemberSpec& spec = family.members[m];
      const TableTensor& t = T(layer.member_tensor[m]);
      std::vector<std::string> allowed = spec.dtypes;
      if (allowed == kQweightDtype) allowed = {T(at("qweight")).dtype};
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), t.dtype) == allowed.end()) {
        return TensorError("REC-003", t.name, "dtype", "dtype " + t.dtype + " not allowed");
      }
      if (spec.rank < 0 || (spec.empty_any_rank && t.element_count == 0)) continue;
      if (t.shape.size() != static_cast<std::size_t>(spec.rank)) {
        return TensorError("REC-003", t.name, "shape", "wrong rank");
      }
    }
    // L4 REC-004: section 4's equations in the order listed.
    auto shape_error = [&](long i, const std::string& why) {
      return TensorError("REC-004", T(i).name, "shape", why);
    };
    if (name == "vptq") {
      const std::uint64_t group_num = T(at("centroids.weight")).shape[0];
      if (T(at("indices")).shape[0] != group_num) return shape_error(at("indices"), "group_num");
      const long res = at("res_centroids.weight");
      if (res >= 0 && T(res).shape[0] != group_num) return shape_error(res, "group_num");
      const long scale = at("weight_scale");
      const long bias = at("weight_bias");
      if (scale >= 0 && bias >= 0 && T(scale).shape != T(bias).shape) {
        return shape_error(bias, "weight_bias.shape != weight_scale.shape");
      }
    }
    if (name == "qqq") {
      const std::vector<std::uint64_t>& b = T(at("B")).shape;
      if (b[1] % 2 != 0) return shape_error(at("B"), "B.shape[1] odd");
      // K = 16 * B.shape[0], exactly (it may not fit 64 bits).
      const unsigned __int128 K = static_cast<unsigned __int128>(b[0]) * 16u;
      const std::uint64_t N = b[1] / 2;
      const std::vector<std::uint64_t> channel_want = {1, N};
      if (T(at("s_channel")).shape != channel_want) return shape_error(at("s_channel"), "not [1, N]");
      const TableTensor& group = T(at("s_group"));
      if (group.element_count != 0) {
        if (group.shape[1] != N || group.shape[0] < 1 || K % group.shape[0] != 0) {
          return shape_error(at("s_group"), "not [K/group_size, N]");
        }
      }
      const long bias = at("bias");
      if (bias >= 0 && T(bias).shape[0] != N) return shape_error(bias, "not [N]");
    }
    if (name == "paroquant") {
      const std::vector<std::uint64_t>& qweight = T(at("qweight")).shape;
      const unsigned __int128 N = static_cast<unsigned __int128>(qweight[1]) * 8u;
      const std::vector<std::uint64_t>& scales = T(at("scales")).shape;
      const std::uint64_t G = scales[0];
      if (!(G >= 1 && scales[1] == N && qweight[0] % G == 0)) {
        return shape_error(at("scales"), "not [G, N] with K % G == 0");
      }
      const std::vector<std::uint64_t> qzeros_want = {G, qweight[1]};  // [G, N/8]
      if (T(at("qzeros")).shape != qzeros_want) return shape_error(at("qzeros"), "not [G, N/8]");
      const long bias = at("bias");
      if (bias >= 0 && T(bias).shape[0] != N) return shape_error(bias, "not [N]");
    }
    if (name == "bitblas") {
      // N and G from scales [N, G]; zeros [G, N*b/storage_bits].
      const std::vector<std::uint64_t>& scales = T(at("scales")).shape;
      const std::uint64_t N = scales[0];
      const std::uint64_t G = scales[1];
      if (N < 1 || G < 1) return shape_error(at("scales"), "not [N, G] with N, G >= 1");
      const long zeros = at("qzeros") >= 0 ? at("qzeros") : at("zeros");
      if (zeros >= 0 && T(zeros).element_count != 0) {
        const TableTensor& z = T(zeros);
        bool ok = z.shape[0] == G;
        if (bitblas.bits_known) {
          const unsigned __int128 stored = static_cast<unsigned __int128>(z.shape[1]) * DtypeBits(z.dtype);
          ok = ok && stored == static_cast<unsigned __int128>(N) * bitblas.bits;
        }
        if (!ok) return shape_error(zeros, "not [G, N*b/storage_bits]");
      }
      const long bias = at("bias");
      if (bias >= 0 && T(bias).shape[0] != N) return shape_error(bias, "not [N]");
    }
    return true;
  }

  // The storage width of an integer dtype.
  static std::uint64_t DtypeBits(const std::string& dtype) {
    if (dtype == "I8" || dtype == "U8") return 8;
    if (dtype == "I16" || dtype == "U16") return 16;
    if (dtype == "I32" || dtype == "U32") return 32;
    return 64;  // I64, U64: the only other members of kIntegerDtypes
  }

  // The members of an object node sorted by key bytes.
  static std::vector<std::uint32_t> MembersByKey(const JsonDocument& d, std::uint32_t object) {
    std::vector<std::uint32_t> members;
    for (std::uint32_t m = d.nodes[object].first_child; m != kNoNode; m = d.nodes[m].next_sibling) {
      members.push_back(m);
    }
    std::sort(members.begin(), members.end(),
              [&](std::uint32_t a, std::uint32_t b) { return d.Key(a) < d.Key(b); });
    return members;
  }

  // A shape array: every item a digits-only number that fits 64 bits.
  static bool ReadShape(const JsonDocument& d, std::uint32_t node, std::vector<std::uint64_t>* out) {
    if (node == kNoNode || d.nodes[node].kind != JsonKind::kArray) return false;
    for (std::uint32_t item = d.nodes[node].first_child; item != kNoNode; item = d.nodes[item].next_sibling) {
      std::uint64_t v = 0;
      if (d.nodes[item].kind != JsonKind::kNumber || !JsonToUint64(d, item, &v)) return false;
      out->push_back(v);
    }
    return true;
  }

  static std::string DtypeOfTorch(std::string torch) {
    if (torch.rfind("torch.", 0) == 0) torch = torch.substr(6);
    static const std::vector<std::pair<std::vector<std::string>, std::string>> names = {
        {{"float16", "half"}, "F16"}, {{"bfloat16"}, "BF16"},    {{"float32", "float"}, "F32"},
        {{"float64", "double"}, "F64"}, {{"int8"}, "I8"},        {{"uint8"}, "U8"},
        {{"int16", "short"}, "I16"},  {{"int32", "int"}, "I32"}, {{"int64", "long"}, "I64"},
        {{"bool"}, "BOOL"},
    };
    for (const auto& [aliases, dtype] : names) {
      for (const std::string& a : aliases) {
        if (a == torch) return dtype;
      }
    }
    return "";  // unknown: never matches
  }

  // Section 5: E1 (the description's form), then E2 (against the tensors).
  bool CheckTensorStorage(const std::vector<qd::SideFile>& configs, const std::vector<Layer>& layers) {
    if (configs.empty()) {
      return Error("REC-006", file_name, "", "config", -1, "no config: EXL3 needs tensor_storage");
    }
    const qd::SideFile& source = configs[0];
    JsonDocument d;
    JsonError error;
    std::string duplicate;
    if (!ParseStrictJsonObject(source.bytes.data(), source.bytes.size(), &d, &error) ||
        FindDuplicateKey(d, &duplicate)) {
      return Error("REC-006", source.name, "", "config", -1, "the config is not strict JSON");
    }
    const std::size_t slash = source.name.rfind('/');
    const std::string base = slash == std::string::npos ? source.name : source.name.substr(slash + 1);
    std::uint32_t config = 0;
    if (base == "config.json") {
      config = d.FindMember(0, "quantization_config");
      if (config == kNoNode || d.nodes[config].kind != JsonKind::kObject) {
        return Error("REC-006", source.name, "", "quantization_config", -1, "no quantization_config object");
      }
    }
    const std::uint32_t storage = d.FindMember(config, "tensor_storage");
    if (storage == kNoNode || d.nodes[storage].kind != JsonKind::kObject) {
      return Error("REC-006", source.name, "", "tensor_storage", -1, "no tensor_storage object");
    }
    // E1.
    for (std::uint32_t module : MembersByKey(d, storage)) {
      std::uint32_t stored = kNoNode;
      if (d.nodes[module].kind == JsonKind::kObject) stored = d.FindMember(module, "stored_tensors");
      if (stored == kNoNode || d.nodes[stored].kind != JsonKind::kObject) {
        return Error("REC-006", source.name, "", "stored_tensors", -1, "module without stored_tensors");
      }
      for (std::uint32_t entry : MembersByKey(d, stored)) {
        std::vector<std::uint64_t> shape;
        const bool is_object = d.nodes[entry].kind == JsonKind::kObject;
        if (!is_object || !ReadShape(d, d.FindMember(entry, "shape"), &shape)) {
          return Error("REC-006", source.name, "", "shape", -1, "a stored tensor without a shape");
        }
        const std::uint32_t dtype = d.FindMember(entry, "torch_dtype");
        if (dtype == kNoNode || d.nodes[dtype].kind != JsonKind::kString) {
          return Error("REC-006", source.name, "", "torch_dtype", -1, "a stored tensor without torch_dtype");
        }
      }
    }
    // E2.
    std::vector<std::string> listed;
    for (std::uint32_t module : MembersByKey(d, storage)) {
      for (std::uint32_t entry : MembersByKey(d, d.FindMember(module, "stored_tensors"))) {
        const std::string name(d.Key(entry));
        listed.push_back(name);
        const long i = FindTensor(names, name);
        if (i < 0) return TensorError("REC-007", name, "name", "tensor_storage lists a missing tensor");
        std::vector<std::uint64_t> shape;
        ReadShape(d, d.FindMember(entry, "shape"), &shape);
        if (shape != T(i).shape) return TensorError("REC-007", name, "shape", "tensor_storage shape differs");
        const std::string torch(d.Text(d.FindMember(entry, "torch_dtype")));
        if (DtypeOfTorch(torch) != T(i).dtype) {
          return TensorError("REC-007", name, "torch_dtype", "tensor_storage torch_dtype " + torch +
                                                                 " is not " + T(i).dtype);
        }
      }
    }
    std::sort(listed.begin(), listed.end());
    for (const Layer& layer : layers) {
      if (std::string(FamilyTable()[layer.family].name) != "exl3") continue;
      for (long i : layer.member_tensor) {
        if (i < 0) continue;
        if (!std::binary_search(listed.begin(), listed.end(), T(i).name)) {
          return TensorError("REC-007", T(i).name, "tensor_storage", "not in tensor_storage");
        }
      }
    }
    return true;
  }
};

}  // namespace

bool StreamRecognisedTable(const MergedTable& c, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                           qd::TensorSink& sink) {
  const NameIndex names = IndexNames(c);
  const BitblasFacts bitblas = ReadBitblasFacts(configs);
  const std::vector<Layer> layers = FindLayers(c, names, bitblas.label);
  Check check{file_name, c, names, bitblas, outcome};
  for (const Layer& layer : layers) {
    if (!check.CheckLayer(layer)) return false;
  }
  bool has_exl3 = false;
  for (const Layer& layer : layers) has_exl3 = has_exl3 || layer.family == 0;
  if (has_exl3 && !check.CheckTensorStorage(configs, layers)) return false;
  // W1 REC-101: one per family present, table order.
  for (std::size_t f = 0; f < FamilyTable().size(); ++f) {
    for (const Layer& layer : layers) {
      if (layer.family != f) continue;
      outcome->findings.push_back(NewFinding(
          "REC-101", qd::Severity::kWarning, file_name, check.T(layer.anchor).name,
          FamilyTable()[f].name, kHeaderByte,
          std::string("recognised ") + FamilyTable()[f].label + " layout; checked, not decoded"));
      break;
    }
  }
  // Section 6: floating tensors of no layer, in table order.
  std::vector<bool> in_layer(c.tensors.size(), false);
  for (const Layer& layer : layers) {
    for (long i : layer.member_tensor) {
      if (i >= 0) in_layer[static_cast<std::size_t>(i)] = true;
    }
  }
  std::vector<qd::TensorInfo> plan;
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < c.tensors.size(); ++i) {
    if (in_layer[i] || !IsFloatDtype(c.tensors[i].dtype)) continue;
    chosen.push_back(i);
    plan.push_back({c.tensors[i].name, c.tensors[i].shape});
  }
  if (!sink.Plan(plan)) return true;
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    const TableTensor& t = c.tensors[chosen[k]];
    if (!StreamFloatElements(t.dtype, t.data, t.element_count, k, sink)) break;
  }
  return true;
}

qd::Outcome StreamRecognisedFile(qd::ByteView file, const std::string& file_name,
                                 const std::vector<qd::SideFile>& configs, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;
  StreamRecognisedTable(TableOfFile(file, std::move(container)), file_name, configs, &outcome, sink);
  return outcome;
}

qd::Outcome ReadRecognisedFile(qd::ByteView file, const std::string& file_name,
                               const std::vector<qd::SideFile>& configs) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamRecognisedFile(file, file_name, configs, sink); });
}

namespace {

// Section 2: a layer exists exactly when some tensor is named P + a marker
// (BitBLAS's only under its label). Detection runs on every file, so this
// builds nothing.
bool IsMarkerName(const std::string& name, bool bitblas_label) {
  for (std::size_t f = 0; f < FamilyTable().size(); ++f) {
    if (IsBitblasFamily(f) && !bitblas_label) continue;
    for (const MemberSpec& m : FamilyTable()[f].members) {
      std::string prefix;
      if (m.marker && MemberPrefix(name, m.suffix, &prefix)) return true;
    }
  }
  return false;
}

}  // namespace

bool HasRecognisedLayer(const MergedTable& table, const std::vector<qd::SideFile>& configs) {
  const bool bitblas_label = ReadBitblasFacts(configs).label;
  for (const TableTensor& t : table.tensors) {
    if (IsMarkerName(t.name, bitblas_label)) return true;
  }
  return false;
}

bool IsRecognisedFile(const ClaimInput& input, const std::vector<qd::SideFile>& configs) {
  const MergedTable* table = input.Get();
  return table != nullptr && HasRecognisedLayer(*table, configs);
}

}  // namespace qd::oracle
