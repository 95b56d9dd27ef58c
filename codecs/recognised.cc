// recognised.cc: docs/recognised.md, the production side. The families are
// one table (markers, members, dtype and rank per member); the shape
// equations of section 4 are one function per family.
#include "codecs/recognised.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "codecs/finding.h"
#include "codecs/strict_json.h"

namespace qd::codec {
namespace {

using json = nlohmann::json;

constexpr std::int64_t kHeaderOffset = 8;

// kInteger: any integer dtype (BitBLAS's storage dtype, "usually int8");
// kAsQweight: the layer's qweight dtype (BitBLAS zeros "in that compressed
// dtype").
enum class DtypeSet : std::uint8_t { kAny, kFloat, kF16, kF32, kI32, kI32OrI64, kInteger, kAsQweight };

struct Member {
  std::string_view suffix;
  bool required = false;
  bool marker = false;
  DtypeSet dtypes = DtypeSet::kAny;
  int rank = -1;              // -1: any rank
  bool empty_allowed = false;  // no element: any rank (QQQ's whole-row s_group)
};

// A layer's members by index into its family's member list.
using Present = std::vector<std::optional<std::size_t>>;
class Reader;
using ShapeCheck = bool (Reader::*)(const Present& p);

struct Family {
  std::string_view name;
  std::string_view label;  // for messages
  std::span<const Member> members;
  ShapeCheck shapes;
};

// docs/recognised.md sections 2 and 4.
constexpr Member kExl3[] = {
    {"trellis", true, true},  {"suh", false, true}, {"svh", false, true}, {"su", false, true},
    {"sv", false, true},      {"mcg", false, true}, {"mul1", false, true}, {"bias", false, false},
};
constexpr Member kVptq[] = {
    {"centroids.weight", true, true, DtypeSet::kFloat, 2},
    {"indices", true, true, DtypeSet::kI32, 3},
    {"res_centroids.weight", false, true, DtypeSet::kFloat, 2},
    {"outlier_centroids.weight", false, true, DtypeSet::kFloat, 2},
    {"outlier_indices", false, true, DtypeSet::kI32, -1},
    {"weight_scale", false, false, DtypeSet::kFloat, -1},
    {"weight_bias", false, false, DtypeSet::kFloat, -1},
    {"perm", false, false, DtypeSet::kI32OrI64, 1},
    {"bias", false, false, DtypeSet::kFloat, 1},
};
constexpr Member kQqq[] = {
    {"B", true, false, DtypeSet::kI32, 2},
    {"s_channel", true, true, DtypeSet::kF32, 2},
    {"s_group", true, true, DtypeSet::kF16, 2, true},
    {"bias", false, false, DtypeSet::kF16, 1},
};
constexpr Member kParo[] = {
    {"qweight", true, false, DtypeSet::kI32, 2}, {"qzeros", true, false, DtypeSet::kI32, 2},
    {"scales", true, false, DtypeSet::kFloat, 2}, {"theta", true, true},
    {"pairs", true, true},                         {"channel_scales", true, true},
    {"bias", false, false, DtypeSet::kFloat, 1},
};
// Markers only under a config labelled bitblas (docs/recognised.md 2).
constexpr Member kBitblas[] = {
    {"qweight", true, true, DtypeSet::kInteger, -1},
    {"scales", true, true, DtypeSet::kFloat, 2},
    {"qzeros", false, true, DtypeSet::kAsQweight, 2, true},
    {"zeros", false, true, DtypeSet::kAsQweight, 2, true},
    {"bias", false, false, DtypeSet::kFloat, 1},
};
// Member indices the shape equations use.
enum : std::size_t { kCentroids = 0, kIndices = 1, kResCentroids = 2, kOutlierCentroids = 3,
                     kOutlierIndices = 4, kWeightScale = 5, kWeightBias = 6 };
enum : std::size_t { kQqqB = 0, kQqqChannel = 1, kQqqGroup = 2, kQqqBias = 3 };
enum : std::size_t { kParoQweight = 0, kParoQzeros = 1, kParoScales = 2, kParoBias = 6 };
enum : std::size_t { kBitblasQweight = 0, kBitblasScales = 1, kBitblasQzeros = 2, kBitblasZeros = 3,
                     kBitblasBias = 4 };
constexpr std::size_t kBitblasFamily = 4;  // Families() index

// torch_dtype names (docs/recognised.md section 5), "torch." removed.
constexpr std::pair<std::string_view, Dtype> kTorchDtypes[] = {
    {"float16", Dtype::kF16}, {"half", Dtype::kF16},     {"bfloat16", Dtype::kBF16},
    {"float32", Dtype::kF32}, {"float", Dtype::kF32},    {"float64", Dtype::kF64},
    {"double", Dtype::kF64},  {"int8", Dtype::kI8},      {"uint8", Dtype::kU8},
    {"int16", Dtype::kI16},   {"short", Dtype::kI16},    {"int32", Dtype::kI32},
    {"int", Dtype::kI32},     {"int64", Dtype::kI64},    {"long", Dtype::kI64},
    {"bool", Dtype::kBool},
};

bool InSet(DtypeSet set, Dtype d) {
  switch (set) {
    case DtypeSet::kAny: return true;
    case DtypeSet::kFloat: return d == Dtype::kF16 || d == Dtype::kBF16 || d == Dtype::kF32;
    case DtypeSet::kF16: return d == Dtype::kF16;
    case DtypeSet::kF32: return d == Dtype::kF32;
    case DtypeSet::kI32: return d == Dtype::kI32;
    case DtypeSet::kI32OrI64: return d == Dtype::kI32 || d == Dtype::kI64;
    case DtypeSet::kInteger:
      return d == Dtype::kI8 || d == Dtype::kU8 || d == Dtype::kI16 || d == Dtype::kU16 ||
             d == Dtype::kI32 || d == Dtype::kU32 || d == Dtype::kI64 || d == Dtype::kU64;
    case DtypeSet::kAsQweight: return false;  // CheckLayer compares with qweight's
  }
  return false;
}

// The prefix of NAME when it is P + suffix with P empty or ending in '.'.
std::optional<std::string_view> PrefixOf(std::string_view name, std::string_view suffix) {
  if (name.size() < suffix.size() || name.substr(name.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  const std::string_view p = name.substr(0, name.size() - suffix.size());
  if (!p.empty() && p.back() != '.') return std::nullopt;
  return p;
}

// True when NAME is P + a marker of some family (docs/recognised.md 2);
// BitBLAS's markers count only in a file whose config is labelled bitblas.
bool IsMarkerName(std::string_view name, bool bitblas_label) {
  for (const std::span<const Member> members : {std::span<const Member>(kExl3), std::span<const Member>(kVptq),
                                               std::span<const Member>(kQqq), std::span<const Member>(kParo)}) {
    for (const Member& m : members) {
      if (m.marker && PrefixOf(name, m.suffix)) return true;
    }
  }
  if (!bitblas_label) return false;
  return std::any_of(std::begin(kBitblas), std::end(kBitblas),
                     [&](const Member& m) { return m.marker && PrefixOf(name, m.suffix); });
}

// What docs/recognised.md section 2 reads from the config: the winner W (the
// first source, a config.json without quantization_config being no source,
// docs/gptq.md section 1) labels the file bitblas, and its bits.
struct BitblasConfig {
  bool labelled = false;
  std::optional<std::uint64_t> bits;  // a digits-only integer >= 1, else unknown
};

BitblasConfig ReadBitblasConfig(const std::vector<qd::SideFile>& configs) {
  for (const qd::SideFile& source : configs) {
    std::optional<json> doc = ParseStrictJson(source.bytes.data(), source.bytes.size());
    if (!doc || !doc->is_object()) return {};
    const json* config = &*doc;
    if (std::string_view(source.name).substr(source.name.rfind('/') + 1) == "config.json") {
      const auto q = doc->find("quantization_config");
      if (q == doc->end() || q->is_null()) continue;  // no source at all
      if (!q->is_object()) return {};
      config = &*q;
    }
    auto text_of = [&](const char* key) -> std::string {
      const auto v = config->find(key);
      return v != config->end() && v->is_string() ? v->get<std::string>() : std::string();
    };
    BitblasConfig out;
    // A marlin label or is_marlin_format true keeps the file GPTQ's (GPTQ-005).
    const auto is_marlin = config->find("is_marlin_format");
    bool marlin = is_marlin != config->end() && is_marlin->is_boolean() && is_marlin->get<bool>();
    for (const char* key : {"method", "quant_method", "format", "checkpoint_format"}) {
      const std::string label = text_of(key);
      marlin = marlin || label == "marlin";
      out.labelled = out.labelled || label == "bitblas";
    }
    out.labelled = out.labelled && !marlin;
    for (const char* key : {"bits", "w_bit", "wbits"}) {
      const auto v = config->find(key);
      if (v == config->end() || v->is_null()) continue;
      if (v->is_number_unsigned() && v->get<std::uint64_t>() >= 1) out.bits = v->get<std::uint64_t>();
      break;
    }
    return out;
  }
  return {};
}

class Reader {
 public:
  // TABLE is read (it outlives the reader); findings and layers go to *R.
  Reader(const std::string& file_name, const TensorTable& table, BitblasConfig bitblas,
         RecognisedResult* r)
      : file_(file_name), table_(table), bitblas_(bitblas), r_(r) {}

  const std::array<Family, 5>& Families() const {
    static const std::array<Family, 5> families = {{
        {"exl3", "EXL3", kExl3, &Reader::Exl3Shapes},
        {"vptq", "VPTQ", kVptq, &Reader::VptqShapes},
        {"qqq", "QQQ", kQqq, &Reader::QqqShapes},
        {"paroquant", "ParoQuant", kParo, &Reader::ParoShapes},
        {"bitblas", "BitBLAS", kBitblas, &Reader::BitblasShapes},
    }};
    return families;
  }

  // Section 2: every prefix with a marker, family = the first with one
  // (bitblas only under its label).
  void Discover() {
    const TensorTable& ts = table_;
    for (std::size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].listed) by_name_.emplace(ts[i].name, i);
    }
    std::map<std::string, std::size_t> family_of;  // prefix -> family index
    for (std::size_t f = 0; f < Families().size(); ++f) {
      if (f == kBitblasFamily && !bitblas_.labelled) continue;
      for (const auto& [name, i] : by_name_) {
        for (const Member& m : Families()[f].members) {
          if (!m.marker) continue;
          if (auto p = PrefixOf(name, m.suffix)) family_of.emplace(std::string(*p), f);
        }
      }
    }
    const auto& by_name = by_name_;
    for (const auto& [prefix, f] : family_of) {
      const Family& family = Families()[f];
      RecognisedLayer layer{std::string(family.name), prefix, {}, 0};
      bool anchored = false;
      Present present;
      for (const Member& m : family.members) {
        const auto it = by_name.find(prefix + std::string(m.suffix));
        present.push_back(it == by_name.end() ? std::nullopt : std::optional(it->second));
        if (it != by_name.end()) {
          layer.members.push_back(it->second);
          if (!anchored) layer.anchor = it->second;
          anchored = true;
        }
      }
      layers_.push_back({f, std::move(layer), std::move(present)});
    }
    // Table indices are in storage order: (shard,) begin, end, name.
    std::sort(layers_.begin(), layers_.end(),
              [](const Found& a, const Found& b) { return a.layer.anchor < b.layer.anchor; });
  }

  bool Check(const std::vector<qd::SideFile>& configs) {
    for (const Found& l : layers_) {
      if (!CheckLayer(l)) return false;
    }
    const bool has_exl3 = std::any_of(layers_.begin(), layers_.end(),
                                      [](const Found& l) { return l.family == 0; });
    if (has_exl3 && !CheckTensorStorage(configs)) return false;
    for (std::size_t f = 0; f < Families().size(); ++f) {
      const auto first = std::find_if(layers_.begin(), layers_.end(),
                                      [&](const Found& l) { return l.family == f; });
      if (first == layers_.end()) continue;
      r_->findings.push_back(MakeFinding(
          "REC-101", qd::Severity::kWarning, file_, Name(first->layer.anchor),
          std::string(Families()[f].name), kHeaderOffset,
          "recognised " + std::string(Families()[f].label) +
              " checkpoint: structure checked, not decoded (docs/recognised.md)"));
    }
    for (Found& l : layers_) r_->layers.push_back(std::move(l.layer));
    return true;
  }

  bool empty() const { return layers_.empty(); }

 private:
  struct Found {
    std::size_t family;
    RecognisedLayer layer;
    Present present;
  };

  // A view built on each call (TensorTable::operator[]): hold it by value.
  TableTensor T(std::size_t i) const { return table_[i]; }
  std::string Name(std::size_t i) const { return std::string(T(i).name); }

  bool Fail(std::string rule, std::string file, std::string tensor, std::string field,
            std::int64_t offset, std::string message) {
    r_->findings.push_back(MakeFinding(std::move(rule), qd::Severity::kError, std::move(file),
                                       std::move(tensor), std::move(field), offset,
                                       std::move(message)));
    r_->refused = true;
    return false;
  }
  bool TensorFail(std::string rule, std::string tensor, std::string field, std::string message) {
    return Fail(std::move(rule), file_, std::move(tensor), std::move(field), kHeaderOffset,
                std::move(message));
  }

  bool CheckLayer(const Found& l) {
    const Family& family = Families()[l.family];
    const std::string anchor = Name(l.layer.anchor);
    // L1: required members, then VPTQ's outlier pair.
    for (std::size_t m = 0; m < family.members.size(); ++m) {
      if (family.members[m].required && !l.present[m]) {
        return TensorFail("REC-002", anchor, std::string(family.members[m].suffix),
                          std::string(family.label) + " layer " + l.layer.prefix +
                              " has no " + std::string(family.members[m].suffix));
      }
    }
    if (family.name == "vptq" && l.present[kOutlierIndices].has_value() !=
                                     l.present[kOutlierCentroids].has_value()) {
      const std::size_t missing = l.present[kOutlierIndices] ? kOutlierCentroids : kOutlierIndices;
      return TensorFail("REC-002", anchor, std::string(kVptq[missing].suffix),
                        "an outlier codebook and its index stream go together");
    }
    // L1, REC-008: BitBLAS's zeros aliases qzeros; both is two tensors.
    if (l.family == kBitblasFamily && l.present[kBitblasQzeros] && l.present[kBitblasZeros]) {
      return TensorFail("REC-008", Name(*l.present[kBitblasZeros]), "zeros",
                        "BitBLAS layer " + l.layer.prefix +
                            " holds both qzeros and zeros, which alias one tensor");
    }
    // L2: QQQ has no g_idx.
    if (family.name == "qqq") {
      const std::string g_idx = l.layer.prefix + "g_idx";
      if (by_name_.count(g_idx) != 0) {
        return TensorFail("REC-005", g_idx, "g_idx", "a QQQ layer has no GPTQ g_idx");
      }
    }
    // L3: dtype, then rank.
    for (std::size_t m = 0; m < family.members.size(); ++m) {
      if (!l.present[m]) continue;
      const Member& member = family.members[m];
      const TableTensor t = T(*l.present[m]);
      const bool dtype_ok = member.dtypes == DtypeSet::kAsQweight
                                ? t.dtype == T(*l.present[kBitblasQweight]).dtype
                                : InSet(member.dtypes, t.dtype);
      if (!dtype_ok) {
        return TensorFail("REC-003", std::string(t.name), "dtype",
                          std::string(InfoOf(t.dtype).name) + " is not a dtype of " +
                              std::string(member.suffix));
      }
      const bool any_rank = member.rank < 0 || (member.empty_allowed && t.element_count == 0);
      if (!any_rank && t.shape.size() != static_cast<std::size_t>(member.rank)) {
        return TensorFail("REC-003", std::string(t.name), "shape",
                          std::string(member.suffix) + " has rank " +
                              std::to_string(t.shape.size()) + ", not " +
                              std::to_string(member.rank));
      }
    }
    // L4.
    return (this->*family.shapes)(l.present);
  }

  bool ShapeFail(std::size_t tensor, const std::string& why) {
    return TensorFail("REC-004", Name(tensor), "shape", why);
  }

  bool Exl3Shapes(const Present&) { return true; }

  bool VptqShapes(const Present& p) {
    const std::uint64_t groups = T(*p[kCentroids]).shape[0];
    if (T(*p[kIndices]).shape[0] != groups) {
      return ShapeFail(*p[kIndices], "indices.shape[0] is not centroids' group_num");
    }
    if (p[kResCentroids] && T(*p[kResCentroids]).shape[0] != groups) {
      return ShapeFail(*p[kResCentroids], "res_centroids.shape[0] is not centroids' group_num");
    }
    if (p[kWeightScale] && p[kWeightBias] &&
        std::vector<std::uint64_t>(T(*p[kWeightScale]).shape) !=
            std::vector<std::uint64_t>(T(*p[kWeightBias]).shape)) {
      return ShapeFail(*p[kWeightBias], "weight_bias is not shaped as weight_scale");
    }
    return true;
  }

  bool QqqShapes(const Present& p) {
    const TableTensor b_tensor = T(*p[kQqqB]);
    const Shape& b = b_tensor.shape;
    if (b[1] % 2 != 0) return ShapeFail(*p[kQqqB], "B.shape[1] = N*16/8 is odd");
    // K = 16 * B.shape[0] may pass 2^64: compare in 128 bits.
    const unsigned __int128 k = static_cast<unsigned __int128>(b[0]) * 16;
    const std::uint64_t n = b[1] / 2;
    const TableTensor channel_tensor = T(*p[kQqqChannel]);
    const Shape& channel = channel_tensor.shape;
    if (channel[0] != 1 || channel[1] != n) {
      return ShapeFail(*p[kQqqChannel], "s_channel is not [1, N]");
    }
    const TableTensor group = T(*p[kQqqGroup]);
    if (group.element_count != 0 &&
        (group.shape[1] != n || group.shape[0] == 0 || k % group.shape[0] != 0)) {
      return ShapeFail(*p[kQqqGroup], "s_group is not [K/group_size, N]");
    }
    if (p[kQqqBias] && T(*p[kQqqBias]).shape[0] != n) {
      return ShapeFail(*p[kQqqBias], "bias is not [N]");
    }
    return true;
  }

  bool ParoShapes(const Present& p) {
    const TableTensor qweight_tensor = T(*p[kParoQweight]);
    const Shape& qweight = qweight_tensor.shape;
    const unsigned __int128 n = static_cast<unsigned __int128>(qweight[1]) * 8;
    const TableTensor scales_tensor = T(*p[kParoScales]);
    const Shape& scales = scales_tensor.shape;
    const std::uint64_t groups = scales[0];
    if (groups == 0 || scales[1] != n || qweight[0] % groups != 0) {
      return ShapeFail(*p[kParoScales], "scales is not [G, N] with G dividing K");
    }
    const TableTensor qzeros_tensor = T(*p[kParoQzeros]);
    const Shape& qzeros = qzeros_tensor.shape;
    if (qzeros[0] != groups || qzeros[1] != qweight[1]) {
      return ShapeFail(*p[kParoQzeros], "qzeros is not [G, N/8]");
    }
    if (p[kParoBias] && T(*p[kParoBias]).shape[0] != n) {
      return ShapeFail(*p[kParoBias], "bias is not [N]");
    }
    return true;
  }

  // N and G from scales (the repacked qweight anchors nothing), storage bits
  // from qweight's dtype, b from the config.
  bool BitblasShapes(const Present& p) {
    const TableTensor scales_tensor = T(*p[kBitblasScales]);
    const std::uint64_t n = scales_tensor.shape[0];
    const std::uint64_t groups = scales_tensor.shape[1];
    if (n == 0 || groups == 0) return ShapeFail(*p[kBitblasScales], "scales is not [N, G] with N, G >= 1");
    const std::optional<std::size_t> zeros = p[kBitblasQzeros] ? p[kBitblasQzeros] : p[kBitblasZeros];
    if (zeros && T(*zeros).element_count != 0) {
      const TableTensor z = T(*zeros);
      const unsigned __int128 storage_bits = InfoOf(z.dtype).bits;
      const bool width_ok = !bitblas_.bits || static_cast<unsigned __int128>(z.shape[1]) * storage_bits ==
                                                  static_cast<unsigned __int128>(n) * *bitblas_.bits;
      if (z.shape[0] != groups || !width_ok) {
        return ShapeFail(*zeros, std::string(z.name) + " is not [G, N*b/storage_bits]");
      }
    }
    if (p[kBitblasBias] && T(*p[kBitblasBias]).shape[0] != n) {
      return ShapeFail(*p[kBitblasBias], "bias is not [N]");
    }
    return true;
  }

  // Section 5.
  bool ConfigFail(const std::string& source, const std::string& field, const std::string& why) {
    return Fail("REC-006", source, "", field, -1, why);
  }

  static bool IsShapeArray(const json& v) {
    return v.is_array() &&
           std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_unsigned(); });
  }

  bool CheckTensorStorage(const std::vector<qd::SideFile>& configs) {
    if (configs.empty()) {
      return Fail("REC-006", file_, "", "config", -1,
                  "an EXL3 file needs its config's tensor_storage, and no config was found");
    }
    const qd::SideFile& source = configs.front();
    const std::optional<json> doc = ParseStrictJson(source.bytes.data(), source.bytes.size());
    if (!doc || !doc->is_object()) return ConfigFail(source.name, "config", "not a strict JSON object");
    const std::string_view base = std::string_view(source.name).substr(source.name.rfind('/') + 1);
    const json* config = &*doc;
    if (base == "config.json") {
      const auto q = doc->find("quantization_config");
      if (q == doc->end() || !q->is_object()) {
        return ConfigFail(source.name, "quantization_config", "no quantization_config object");
      }
      config = &*q;
    }
    const auto storage = config->find("tensor_storage");
    if (storage == config->end() || !storage->is_object()) {
      return ConfigFail(source.name, "tensor_storage", "no tensor_storage object");
    }
    // E1: the whole description's form first (keys in byte order: nlohmann's).
    for (const auto& m : storage->items()) {
      const std::string& module = m.key();
      const json& entry = m.value();
      const auto stored = entry.is_object() ? entry.find("stored_tensors") : entry.end();
      if (!entry.is_object() || stored == entry.end() || !stored->is_object()) {
        return ConfigFail(source.name, "stored_tensors", "module " + module + " has no stored_tensors object");
      }
      for (const auto& st : stored->items()) {
        const std::string& name = st.key();
        const json& spec = st.value();
        const auto shape = spec.is_object() ? spec.find("shape") : spec.end();
        if (!spec.is_object() || shape == spec.end() || !IsShapeArray(*shape)) {
          return ConfigFail(source.name, "shape", name + " has no shape of integers");
        }
        const auto dtype = spec.find("torch_dtype");
        if (dtype == spec.end() || !dtype->is_string()) {
          return ConfigFail(source.name, "torch_dtype", name + " has no torch_dtype string");
        }
      }
    }
    // E2: against the tensors.
    const auto& by_name = by_name_;
    std::vector<std::string> listed;
    for (const auto& m : storage->items()) {
      for (const auto& st : m.value()["stored_tensors"].items()) {
        const std::string& name = st.key();
        const json& spec = st.value();
        listed.push_back(name);
        const auto it = by_name.find(name);
        if (it == by_name.end()) {
          return TensorFail("REC-007", name, "name", "tensor_storage names a tensor the file lacks");
        }
        const TableTensor t = T(it->second);
        if (spec["shape"].get<std::vector<std::uint64_t>>() != std::vector<std::uint64_t>(t.shape)) {
          return TensorFail("REC-007", name, "shape", "tensor_storage gives another shape");
        }
        std::string_view torch = spec["torch_dtype"].get_ref<const std::string&>();
        if (torch.substr(0, 6) == "torch.") torch.remove_prefix(6);
        const auto known = std::find_if(std::begin(kTorchDtypes), std::end(kTorchDtypes),
                                        [&](const auto& e) { return e.first == torch; });
        if (known == std::end(kTorchDtypes) || known->second != t.dtype) {
          return TensorFail("REC-007", name, "torch_dtype",
                            "tensor_storage gives another dtype than " +
                                std::string(InfoOf(t.dtype).name));
        }
      }
    }
    std::sort(listed.begin(), listed.end());
    for (const Found& l : layers_) {
      if (l.family != 0) continue;
      for (std::size_t i : l.layer.members) {
        if (!std::binary_search(listed.begin(), listed.end(), Name(i))) {
          return TensorFail("REC-007", Name(i), "tensor_storage",
                            "an EXL3 tensor tensor_storage does not list");
        }
      }
    }
    return true;
  }

  std::string file_;
  const TensorTable& table_;
  BitblasConfig bitblas_;
  RecognisedResult* r_;
  std::map<std::string_view, std::size_t, std::less<>> by_name_;  // listed tensors
  std::vector<Found> layers_;
};

// The floating tensors of no layer (section 6), in storage order.
std::vector<std::size_t> DecodedTensors(const RecognisedResult& r) {
  std::vector<bool> member(r.table.size(), false);
  for (const RecognisedLayer& l : r.layers) {
    for (std::size_t i : l.members) member[i] = true;
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < r.table.size(); ++i) {
    const TableTensor t = r.table[i];
    if (!member[i] && t.listed && IsFloatDtype(t.dtype)) out.push_back(i);
  }
  return out;
}

}  // namespace

RecognisedResult ReadRecognisedTable(TensorTable table, const std::string& file_name,
                                     const std::vector<qd::SideFile>& configs,
                                     std::vector<qd::Finding> container_findings) {
  RecognisedResult r;
  r.findings = std::move(container_findings);
  r.table = std::move(table);
  Reader reader(file_name, r.table, ReadBitblasConfig(configs), &r);
  reader.Discover();
  r.is_recognised = !reader.empty();
  reader.Check(configs);
  return r;
}

RecognisedResult ReadRecognised(qd::ByteView file, const std::string& file_name,
                                const std::vector<qd::SideFile>& configs) {
  ContainerResult c = ReadContainer(file, file_name);
  if (c.refused) return ContainerRefusal<RecognisedResult>(std::move(c.findings));
  return ReadRecognisedTable(TensorTable::FromContainer(std::move(c.container)), file_name, configs,
                             std::move(c.findings));
}

bool HasRecognisedLayer(const TensorTable& table, const std::vector<qd::SideFile>& configs) {
  // A layer exists exactly when some listed tensor is P + marker (section 2):
  // one pass, nothing built, since every file passes through detection.
  const bool bitblas_label = ReadBitblasConfig(configs).labelled;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const TableTensor t = table[i];
    if (t.listed && IsMarkerName(t.name, bitblas_label)) return true;
  }
  return false;
}

bool ClaimsRecognised(const ClaimInput& input, const std::vector<qd::SideFile>& configs) {
  const TensorTable* table = input.Get();
  return table != nullptr && HasRecognisedLayer(*table, configs);
}

void StreamRecognisedTensors(const RecognisedResult& r, TensorSink& sink) {
  const std::vector<std::size_t> decoded = DecodedTensors(r);
  std::vector<TensorInfo> plan;
  for (std::size_t i : decoded) {
    const TableTensor t = r.table[i];
    plan.push_back({std::string(t.name), t.shape});
  }
  if (!sink.Plan(plan)) return;
  for (std::size_t k = 0; k < decoded.size(); ++k) {
    if (!r.table.StreamFloat(decoded[k], k, sink)) return;
  }
}

qd::Outcome StreamRecognisedFile(qd::ByteView file, const std::string& file_name,
                                 const std::vector<qd::SideFile>& configs, TensorSink& sink) {
  RecognisedResult r = ReadRecognised(file, file_name, configs);
  if (!r.refused) StreamRecognisedTensors(r, sink);
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

qd::Outcome DecodeRecognisedFile(qd::ByteView file, const std::string& file_name,
                                 const std::vector<qd::SideFile>& configs) {
  std::vector<qd::DecodedTensor> tensors;
  CollectingSink sink(&tensors);
  qd::Outcome outcome = StreamRecognisedFile(file, file_name, configs, sink);
  outcome.tensors = std::move(tensors);
  return outcome;
}

qd::Finding RecognisedNotDecoded(const std::vector<qd::Finding>& findings,
                                 const std::string& file_name) {
  std::string families, anchor;
  for (const qd::Finding& f : findings) {
    if (f.rule != "REC-101") continue;
    if (anchor.empty()) anchor = f.tensor;
    families += (families.empty() ? "" : ", ") + f.field;
  }
  return MakeFinding(
      "REC-001", qd::Severity::kError, file_name, anchor, "decode", -1,
      "recognised " + families +
          ", not decoded: spec 004 does not fix its arithmetic bit by bit (docs/recognised.md)");
}

qd::Outcome RecognisedDecodeRefusal(qd::ByteView file, const std::string& file_name,
                                    const std::vector<qd::SideFile>& configs) {
  RecognisedResult r = ReadRecognised(file, file_name, configs);
  if (!r.refused) {
    r.findings.push_back(RecognisedNotDecoded(r.findings, file_name));
    r.refused = true;
  }
  return qd::Outcome{r.refused, std::move(r.findings), {}};
}

}  // namespace qd::codec
