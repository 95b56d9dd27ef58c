// fp8.cc: the FP8 reader: detection (docs/fp8.md section 2), the config
// (section 3), the code tables (section 4), the layer checks L1..L5 in the
// documented order (section 5), the division (section 6) and the decoded
// output (section 7).
#include "codecs/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "codecs/finding.h"
#include "codecs/gptq.h"
#include "codecs/layer_stream.h"
#include "codecs/safetensors.h"
#include "codecs/strict_json.h"

namespace qd::codec {
namespace {

constexpr std::int64_t kHeaderOffset = 8;
constexpr std::int64_t kConfigOffset = -1;  // byte_offset of config findings
constexpr std::string_view kScaleSuffix = "weight_scale_inv";
constexpr std::string_view kWeightSuffix = "weight";

// Exponent width, mantissa width, bias and the NaN convention of each
// subtype (section 4), in Fp8Subtype order.
struct Layout {
  int exponent_bits, mantissa_bits, bias;
  bool signed_codes;  // E8M0 has no sign bit
  enum Special { kFn, kIeee, kFnuz, kE8M0 } special;
  Dtype storage;
};
constexpr std::array<Layout, kFp8SubtypeCount> kLayouts = {{
    {4, 3, 7, true, Layout::kFn, Dtype::kF8E4M3},
    {4, 3, 8, true, Layout::kFnuz, Dtype::kF8E4M3},
    {5, 2, 15, true, Layout::kIeee, Dtype::kF8E5M2},
    {5, 2, 16, true, Layout::kFnuz, Dtype::kF8E5M2},
    {8, 0, 127, false, Layout::kE8M0, Dtype::kF8E8M0},
}};

constexpr std::uint32_t kQuietNan = 0x7fc00000u;

float FromBits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Section 4 by re-biasing: a normal code's exponent moves to binary32's bias
// and its mantissa to the top of binary32's; a subnormal code is its
// mantissa integer times 2^(1 - bias - M), an exact binary32 product.
std::array<float, 256> BuildTable(Fp8Subtype subtype) {
  const Layout& l = kLayouts[static_cast<int>(subtype)];
  std::array<float, 256> table{};
  const std::uint32_t exponent_mask = (1u << l.exponent_bits) - 1;
  const std::uint32_t mantissa_mask = (1u << l.mantissa_bits) - 1;
  for (std::uint32_t code = 0; code < 256; ++code) {
    if (Fp8CodeIsNonFinite(subtype, static_cast<std::uint8_t>(code))) {
      const bool infinity = l.special == Layout::kIeee && (code & mantissa_mask) == 0;
      table[code] = FromBits(infinity ? ((code & 0x80u) << 24) | 0x7f800000u : kQuietNan);
      continue;
    }
    const std::uint32_t sign = l.signed_codes ? (code & 0x80u) << 24 : 0;
    const std::uint32_t exponent = (code >> l.mantissa_bits) & exponent_mask;
    const std::uint32_t mantissa = code & mantissa_mask;
    if (exponent == 0 && l.special != Layout::kE8M0) {
      // 2^(1 - bias - M) as binary32 bits (a normal number for every subtype).
      const float unit = FromBits(static_cast<std::uint32_t>(127 + 1 - l.bias - l.mantissa_bits) << 23);
      const float magnitude = static_cast<float>(mantissa) * unit;
      std::uint32_t bits;
      std::memcpy(&bits, &magnitude, sizeof bits);
      table[code] = FromBits(bits | sign);
      continue;
    }
    if (l.special == Layout::kE8M0 && exponent == 0) {
      table[code] = FromBits(0x00400000u);  // 2^-127: binary32's subnormal
      continue;
    }
    const std::uint32_t biased = exponent - static_cast<std::uint32_t>(l.bias) + 127;
    table[code] = FromBits(sign | (biased << 23) | (mantissa << (23 - l.mantissa_bits)));
  }
  return table;
}

std::string Lower(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// Section 3's format aliases (GPT-QModel's FP8 format names).
std::optional<Fp8Subtype> SubtypeOfAlias(const std::string& lowered) {
  static const std::map<std::string, Fp8Subtype> kAliases = {
      {"e4m3", Fp8Subtype::kE4M3Fn},          {"e4m3fn", Fp8Subtype::kE4M3Fn},
      {"float8_e4m3", Fp8Subtype::kE4M3Fn},   {"float8_e4m3fn", Fp8Subtype::kE4M3Fn},
      {"e4m3fnuz", Fp8Subtype::kE4M3Fnuz},    {"float8_e4m3fnuz", Fp8Subtype::kE4M3Fnuz},
      {"e5m2", Fp8Subtype::kE5M2},            {"float8_e5m2", Fp8Subtype::kE5M2},
      {"e5m2fnuz", Fp8Subtype::kE5M2Fnuz},    {"float8_e5m2fnuz", Fp8Subtype::kE5M2Fnuz},
      {"e8m0", Fp8Subtype::kE8M0Fnu},         {"e8m0fnu", Fp8Subtype::kE8M0Fnu},
      {"float8_e8m0", Fp8Subtype::kE8M0Fnu},  {"float8_e8m0fnu", Fp8Subtype::kE8M0Fnu},
  };
  const auto it = kAliases.find(lowered);
  if (it == kAliases.end()) return std::nullopt;
  return it->second;
}

bool IsFp8Dtype(Dtype d) { return d == Dtype::kF8E4M3 || d == Dtype::kF8E5M2 || d == Dtype::kF8E8M0; }

Fp8Subtype SubtypeOfDtype(Dtype d) {
  return d == Dtype::kF8E5M2 ? Fp8Subtype::kE5M2 : d == Dtype::kF8E8M0 ? Fp8Subtype::kE8M0Fnu : Fp8Subtype::kE4M3Fn;
}

std::string_view BaseName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// P when NAME is P + SUFFIX with P empty or ending in '.'.
std::optional<std::string_view> PrefixOf(std::string_view name, std::string_view suffix) {
  if (name.size() < suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return std::nullopt;
  const std::string_view prefix = name.substr(0, name.size() - suffix.size());
  if (!prefix.empty() && prefix.back() != '.') return std::nullopt;
  return prefix;
}

std::uint64_t CeilDiv(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

float F32At(const std::uint8_t* p) {
  std::uint32_t bits = static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
                       (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  return FromBits(bits);
}

class Reader {
 public:
  Reader(Fp8Result* r, const std::string& file) : r_(r), file_(file) {}
  bool Config(const std::vector<qd::SideFile>& configs);
  bool Layer(std::string_view prefix, Fp8Layer* layer);

 private:
  qd::Finding& Add(const char* rule, qd::Severity severity, const std::string& file,
                   std::string_view tensor, std::string field, std::int64_t offset, std::string message) {
    r_->findings.push_back(MakeFinding(rule, severity, file, std::string(tensor), std::move(field), offset,
                                       std::move(message)));
    if (severity == qd::Severity::kError) r_->refused = true;
    return r_->findings.back();
  }
  bool ConfigError(const qd::SideFile& side, std::string field, std::string message) {
    Add("FP8-001", qd::Severity::kError, side.name, "", std::move(field), kConfigOffset, std::move(message));
    return false;
  }
  bool Error(const char* rule, std::string_view tensor, std::string field, std::string message) {
    Add(rule, qd::Severity::kError, file_, tensor, std::move(field), kHeaderOffset, std::move(message));
    return false;
  }
  bool ReadConfigObject(const qd::SideFile& side, const nlohmann::json& object, Fp8Config* config);
  bool CompareSources(const std::vector<std::pair<const qd::SideFile*, Fp8Config>>& sources);
  std::optional<std::size_t> Find(const std::string& name) const {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
  }

 public:
  std::map<std::string, std::size_t, std::less<>> by_name_;

 private:
  Fp8Result* r_;
  const std::string& file_;
};

// Section 3, steps K1..K7 on the config object of SIDE, read into *CONFIG.
bool Reader::ReadConfigObject(const qd::SideFile& side, const nlohmann::json& object, Fp8Config* config) {
  Fp8Config& c = *config;
  for (const char* key : {"method", "quant_method"}) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) continue;
    if (!it->is_string() || Lower(it->get<std::string>()) != "fp8") {
      return ConfigError(side, key, std::string(key) + " is " + it->dump() + ", not \"fp8\"");
    }
  }
  const char* format_key = "format";
  auto format = object.find(format_key);
  if (format == object.end() || format->is_null()) {
    format_key = "checkpoint_format";
    format = object.find(format_key);
  }
  if (format != object.end() && !format->is_null()) {
    const std::string lowered = format->is_string() ? Lower(format->get<std::string>()) : std::string("?");
    if (lowered != "fp8" && lowered != "") {
      const std::optional<Fp8Subtype> subtype = format->is_string() ? SubtypeOfAlias(lowered) : std::nullopt;
      if (!subtype) return ConfigError(side, format_key, std::string(format_key) + " " + format->dump() +
                                                            " is not an FP8 subtype");
      c.has_subtype = true;
      c.subtype = *subtype;
    }
  }
  const auto method = object.find("weight_scale_method");
  if (method != object.end() && !method->is_null()) {
    static const std::map<std::string, Fp8Scaling> kMethods = {
        {"tensor", Fp8Scaling::kTensor}, {"row", Fp8Scaling::kRow}, {"block", Fp8Scaling::kBlock}};
    const auto it = method->is_string() ? kMethods.find(Lower(method->get<std::string>())) : kMethods.end();
    if (it == kMethods.end()) {
      return ConfigError(side, "weight_scale_method",
                         "weight_scale_method " + method->dump() + " is not tensor, row or block");
    }
    c.scale_method = static_cast<int>(it->second);
  }
  const auto block = object.find("weight_block_size");
  if (block != object.end() && !block->is_null()) {
    constexpr std::uint64_t kMaxBlock = 0x7fffffffu;
    const bool ok = block->is_array() && block->size() == 2 &&
                    std::all_of(block->begin(), block->end(), [&](const nlohmann::json& v) {
                      return v.is_number_unsigned() && v.get<std::uint64_t>() >= 1 &&
                             v.get<std::uint64_t>() <= kMaxBlock;
                    });
    if (!ok) {
      return ConfigError(side, "weight_block_size",
                         "weight_block_size is not two integers in 1..2^31-1 (" + block->dump() + ")");
    }
    c.block_rows = (*block)[0].get<std::uint64_t>();
    c.block_cols = (*block)[1].get<std::uint64_t>();
  }
  const auto semantics = object.find("weight_scale_semantics");
  if (semantics != object.end() && !semantics->is_null() &&
      (!semantics->is_string() || Lower(semantics->get<std::string>()) != "inverse")) {
    return ConfigError(side, "weight_scale_semantics",
                       "weight_scale_semantics " + semantics->dump() + " is not \"inverse\"");
  }
  if (c.scale_method == static_cast<int>(Fp8Scaling::kBlock) && c.block_rows == 0) {
    return ConfigError(side, "weight_block_size", "weight_scale_method is block and weight_block_size is missing");
  }
  return true;
}

// Section 3, K8 CFG-010: each later source agrees with the winner on what
// it gives: the subtype its format names, weight_scale_method,
// weight_block_size (in that order; the first difference stops).
bool Reader::CompareSources(const std::vector<std::pair<const qd::SideFile*, Fp8Config>>& sources) {
  static constexpr std::array<const char*, 3> kScalingNames = {"tensor", "row", "block"};
  const std::string& winner = sources.front().first->name;
  const Fp8Config& w = sources.front().second;
  auto subtype = [](const Fp8Config& c) { return c.has_subtype ? std::string(Fp8SubtypeName(c.subtype)) : "none"; };
  auto method = [](const Fp8Config& c) { return c.scale_method < 0 ? "none" : kScalingNames[c.scale_method]; };
  auto block = [](const Fp8Config& c) {
    return c.block_rows == 0 ? std::string("none")
                             : "[" + std::to_string(c.block_rows) + ", " + std::to_string(c.block_cols) + "]";
  };
  for (std::size_t i = 1; i < sources.size(); ++i) {
    const Fp8Config& o = sources[i].second;
    const char* field = nullptr;
    std::string mine, theirs;
    if (o.has_subtype && subtype(o) != subtype(w)) {
      field = "format";
      mine = subtype(w);
      theirs = subtype(o);
    } else if (o.scale_method >= 0 && o.scale_method != w.scale_method) {
      field = "weight_scale_method";
      mine = method(w);
      theirs = method(o);
    } else if (o.block_rows != 0 && block(o) != block(w)) {
      field = "weight_block_size";
      mine = block(w);
      theirs = block(o);
    }
    if (field != nullptr) {
      Add("CFG-010", qd::Severity::kError, winner, "", field, kConfigOffset,
          std::string(field) + " is " + mine + " in " + winner + " but " + theirs + " in " +
              sources[i].first->name + "; the sources must agree");
      return false;
    }
  }
  return true;
}

// Section 3: every source in priority order through K0..K7; the first is
// the config; K8 compares the others with it.
bool Reader::Config(const std::vector<qd::SideFile>& configs) {
  std::vector<std::pair<const qd::SideFile*, Fp8Config>> sources;
  for (const qd::SideFile& side : configs) {
    const std::optional<nlohmann::json> doc = ParseStrictJson(side.bytes.data(), side.bytes.size());
    if (!doc || !doc->is_object()) {
      return ConfigError(side, "config", "the config is not strict JSON with an object at the top level");
    }
    const nlohmann::json* object = &*doc;
    if (BaseName(side.name) == "config.json") {
      const auto nested = doc->find("quantization_config");
      if (nested == doc->end() || nested->is_null()) continue;  // not a source
      if (!nested->is_object()) {
        return ConfigError(side, "quantization_config", "quantization_config is present but is not an object");
      }
      object = &*nested;
    }
    Fp8Config config;
    if (!ReadConfigObject(side, *object, &config)) return false;
    sources.emplace_back(&side, config);
  }
  if (sources.empty()) return true;
  r_->config = sources.front().second;
  return CompareSources(sources);
}

// L1..L5 for the layer PREFIX (section 5).
bool Reader::Layer(std::string_view prefix, Fp8Layer* layer) {
  const std::string p(prefix);
  const std::optional<std::size_t> weight = Find(p + std::string(kWeightSuffix));
  const std::optional<std::size_t> scale = Find(p + std::string(kScaleSuffix));
  const std::optional<std::size_t> bias = Find(p + "bias");
  const TensorTable& t = r_->table;
  // L1 FP8-002.
  if (!weight) return Error("FP8-002", p + std::string(kScaleSuffix), "weight", "layer " + p + " has no weight");
  if (!scale) {
    return Error("FP8-002", p + std::string(kWeightSuffix), "weight_scale_inv",
                 "layer " + p + " has no weight_scale_inv");
  }
  const TableTensor w = t[*weight], s = t[*scale];
  // L2 FP8-003: dtypes.
  if (!IsFp8Dtype(w.dtype)) {
    return Error("FP8-003", w.name, "dtype",
                 "weight has dtype " + std::string(InfoOf(w.dtype).name) + ", not F8_E4M3, F8_E5M2 or F8_E8M0");
  }
  const Fp8Subtype subtype = r_->config.has_subtype ? r_->config.subtype : SubtypeOfDtype(w.dtype);
  if (kLayouts[static_cast<int>(subtype)].storage != w.dtype) {
    return Error("FP8-003", w.name, "dtype",
                 "weight has dtype " + std::string(InfoOf(w.dtype).name) + ", the config's format is " +
                     Fp8SubtypeName(subtype));
  }
  if (s.dtype != Dtype::kF32) {
    return Error("FP8-003", s.name, "dtype",
                 "weight_scale_inv has dtype " + std::string(InfoOf(s.dtype).name) + ", not F32");
  }
  if (bias && t[*bias].dtype != Dtype::kF16 && t[*bias].dtype != Dtype::kBF16 && t[*bias].dtype != Dtype::kF32) {
    return Error("FP8-003", t[*bias].name, "dtype", "bias is not F16, BF16 or F32");
  }
  // L3 FP8-004 / FP8-005 / FP8-101: shapes.
  if (w.shape.size() != 2) {
    return Error("FP8-004", w.name, "shape", "weight has rank " + std::to_string(w.shape.size()) + ", not 2");
  }
  const std::uint64_t N = w.shape[0], K = w.shape[1];
  if (bias && !(t[*bias].shape.size() == 1 && t[*bias].shape[0] == N)) {
    return Error("FP8-004", t[*bias].name, "shape", "bias is not [" + std::to_string(N) + "]");
  }
  if (s.shape.size() > 2) {
    return Error("FP8-004", s.name, "shape", "weight_scale_inv has rank " + std::to_string(s.shape.size()));
  }
  const Fp8Scaling scaling = static_cast<Fp8Scaling>(s.shape.size());
  static constexpr std::array<const char*, 3> kScalingNames = {"tensor", "row", "block"};
  if (r_->config.scale_method >= 0 && r_->config.scale_method != static_cast<int>(scaling)) {
    return Error("FP8-004", s.name, "shape",
                 std::string("weight_scale_inv is a ") + kScalingNames[static_cast<int>(scaling)] +
                     " scale, the config's weight_scale_method is " + kScalingNames[r_->config.scale_method]);
  }
  if (scaling == Fp8Scaling::kRow && s.shape[0] != N) {
    return Error("FP8-004", s.name, "shape", "weight_scale_inv is not [" + std::to_string(N) + "]");
  }
  if (scaling == Fp8Scaling::kBlock) {
    const std::uint64_t br = r_->config.block_rows, bc = r_->config.block_cols;
    if (br == 0) {
      return Error("FP8-005", s.name, "weight_block_size",
                   "weight_scale_inv is a block scale and no config gives weight_block_size");
    }
    if (s.shape[0] != CeilDiv(N, br) || s.shape[1] != CeilDiv(K, bc)) {
      return Error("FP8-004", s.name, "shape",
                   "weight_scale_inv is not [" + std::to_string(CeilDiv(N, br)) + ", " +
                       std::to_string(CeilDiv(K, bc)) + "]");
    }
    if (N % br != 0 || K % bc != 0) {
      Add("FP8-101", qd::Severity::kWarning, file_, s.name, "weight_block_size", kHeaderOffset,
          "block size [" + std::to_string(br) + ", " + std::to_string(bc) + "] does not divide weight [" +
              std::to_string(N) + ", " + std::to_string(K) + "]; the last blocks are partial");
    }
  }
  // L4 FP8-006: inverse scales finite and non-zero, in storage order.
  const std::uint8_t* sd = t.Data(*scale);
  for (std::uint64_t e = 0; e < s.element_count; ++e) {
    const float v = F32At(sd + 4 * e);
    if (std::isfinite(v) && v != 0.0f) continue;
    qd::Finding& f = Add("FP8-006", qd::Severity::kError, file_, s.name, "weight_scale_inv",
                         t.ByteOffset(*scale, 4 * e),
                         "inverse scale " + std::to_string(e) + " is zero, an infinity or a NaN");
    if (scaling == Fp8Scaling::kRow) f.row = static_cast<std::int64_t>(e);
    if (scaling == Fp8Scaling::kBlock) {
      f.row = static_cast<std::int64_t>(e / s.shape[1]);
      f.block = static_cast<std::int64_t>(e % s.shape[1]);
    }
    return false;
  }
  // L5 FP8-007: no NaN (E5M2: no infinity) code, row-major.
  const std::uint8_t* wd = t.Data(*weight);
  for (std::uint64_t e = 0; e < w.element_count; ++e) {
    if (!Fp8CodeIsNonFinite(subtype, wd[e])) continue;
    qd::Finding& f = Add("FP8-007", qd::Severity::kError, file_, w.name, "weight", t.ByteOffset(*weight, e),
                         "code " + std::to_string(wd[e]) + " is a NaN or an infinity of " + Fp8SubtypeName(subtype));
    f.row = static_cast<std::int64_t>(e / K);
    f.element = static_cast<std::int64_t>(e % K);
    return false;
  }
  layer->prefix = p;
  layer->weight = *weight;
  layer->scale_inv = *scale;
  layer->out_features = N;
  layer->in_features = K;
  layer->scaling = scaling;
  layer->subtype = subtype;
  return true;
}

}  // namespace

const char* Fp8SubtypeName(Fp8Subtype subtype) {
  static constexpr std::array<const char*, kFp8SubtypeCount> kNames = {
      "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"};
  return kNames[static_cast<int>(subtype)];
}

bool Fp8CodeIsNonFinite(Fp8Subtype subtype, std::uint8_t code) {
  switch (kLayouts[static_cast<int>(subtype)].special) {
    case Layout::kFn: return (code & 0x7fu) == 0x7fu;
    case Layout::kIeee: return (code & 0x7cu) == 0x7cu;
    case Layout::kFnuz: return code == 0x80u;
    case Layout::kE8M0: return code == 0xffu;
  }
  return false;
}

const std::array<float, 256>& Fp8CodeTable(Fp8Subtype subtype) {
  static const std::array<std::array<float, 256>, kFp8SubtypeCount> kTables = [] {
    std::array<std::array<float, 256>, kFp8SubtypeCount> tables{};
    for (int i = 0; i < kFp8SubtypeCount; ++i) tables[i] = BuildTable(static_cast<Fp8Subtype>(i));
    return tables;
  }();
  return kTables[static_cast<int>(subtype)];
}

Fp8Result ReadFp8(qd::ByteView file, const std::string& file_name,
                  const std::vector<qd::SideFile>& configs) {
  ContainerResult container = ReadContainer(file, file_name);
  if (container.refused) return ContainerRefusal<Fp8Result>(std::move(container.findings));
  return ReadFp8Table(TensorTable::FromContainer(std::move(container.container)), file_name, configs,
                      std::move(container.findings));
}

Fp8Result ReadFp8Table(TensorTable table, const std::string& file_name,
                       const std::vector<qd::SideFile>& configs,
                       std::vector<qd::Finding> container_findings) {
  Fp8Result result;
  result.findings = std::move(container_findings);
  result.table = std::move(table);
  Reader reader(&result, file_name);
  if (!reader.Config(configs)) return result;
  // Section 2: layers in the storage order of their first member.
  std::vector<std::string_view> prefixes;
  std::map<std::string_view, bool, std::less<>> seen;
  for (std::size_t i : StorageOrder(result.table)) {
    const TableTensor t = result.table[i];
    reader.by_name_.emplace(std::string(t.name), i);
    std::optional<std::string_view> prefix = PrefixOf(t.name, kScaleSuffix);
    if (!prefix && IsFp8Dtype(t.dtype)) prefix = PrefixOf(t.name, kWeightSuffix);
    if (prefix && seen.emplace(*prefix, true).second) prefixes.push_back(*prefix);
  }
  for (std::string_view prefix : prefixes) {
    Fp8Layer layer;
    if (!reader.Layer(prefix, &layer)) {
      result.layers.clear();
      return result;
    }
    result.layers.push_back(std::move(layer));
  }
  return result;
}

bool HasFp8Layer(const TensorTable& table) {
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (PrefixOf(table[i].name, kScaleSuffix)) return true;
  }
  return false;
}

bool ClaimsFp8(const ClaimInput& input) {
  const TensorTable* table = input.Get();
  return table != nullptr && HasFp8Layer(*table);
}

void Fp8DequantizeSpan(Fp8Subtype subtype, const std::uint8_t* codes, std::uint64_t rows,
                       std::uint64_t in_features, const float* inv_scales, std::uint64_t blocks,
                       std::uint64_t block_cols, float* out) {
  // Section 6: one binary32 division per weight (never a multiply by a
  // reciprocal: that rounds twice). The table lookup is the fast path; the
  // division loop vectorises with exact divps.
  const std::array<float, 256>& table = Fp8CodeTable(subtype);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint8_t* c = codes + r * in_features;
    float* o = out + r * in_features;
    const float* s = inv_scales + r * blocks;
    for (std::uint64_t k0 = 0; k0 < in_features; k0 += block_cols) {
      const std::uint64_t k1 = std::min(in_features, k0 + block_cols);
      const float inv = s[k0 / block_cols];
      // Two passes: the lookups (scalar loads), then the divisions, which
      // the compiler vectorises (divps is correctly rounded: bit-identical).
      for (std::uint64_t k = k0; k < k1; ++k) o[k] = table[c[k]];
      for (std::uint64_t k = k0; k < k1; ++k) o[k] = o[k] / inv;
    }
  }
}

bool Fp8Encode(Fp8Subtype subtype, float x, std::uint8_t* code) {
  const Layout& l = kLayouts[static_cast<int>(subtype)];
  if (l.special == Layout::kE8M0) return false;
  static constexpr std::array<std::uint8_t, 4> kNanCodes = {0x7f, 0x7d, 0x80, 0xff};  // by Layout::Special
  if (std::isnan(x)) {
    *code = kNanCodes[l.special];
    return true;
  }
  // The largest finite code below the sign bit: its magnitude clamps.
  static const std::array<std::uint8_t, kFp8SubtypeCount> kMaxCodes = [] {
    std::array<std::uint8_t, kFp8SubtypeCount> max{};
    for (int t = 0; t < kFp8SubtypeCount; ++t) {
      for (std::uint8_t c = 1; c < 0x80; ++c) {
        if (!Fp8CodeIsNonFinite(static_cast<Fp8Subtype>(t), c)) max[t] = c;
      }
    }
    return max;
  }();
  const std::array<float, 256>& table = Fp8CodeTable(subtype);
  const std::uint8_t max_code = kMaxCodes[static_cast<int>(subtype)];
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(x));
  std::uint8_t magnitude = 0;
  if (a >= table[max_code]) {
    magnitude = max_code;
  } else if (a != 0.0) {
    // Round a on its binade's grid (the subnormal grid below 2^(1 - bias)):
    // a * 2^-q is exact, nearbyint rounds ties to even.
    int e = 0;
    std::frexp(a, &e);  // a in [2^(e-1), 2^e)
    const int min_normal = 1 - l.bias;
    const int binade = std::max(e - 1, min_normal);
    const int q = binade - l.mantissa_bits;
    const auto r = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(a, -q)));
    const std::uint32_t hidden = 1u << l.mantissa_bits;
    if (r == 0) {
      magnitude = 0;
    } else if (r < hidden) {  // subnormal (only reached with binade == min_normal)
      magnitude = static_cast<std::uint8_t>(r);
    } else {
      const bool carry = r == 2 * hidden;  // rounded up into the next binade
      const std::uint32_t field = static_cast<std::uint32_t>(binade + (carry ? 1 : 0) + l.bias);
      const std::uint32_t mantissa = carry ? 0 : r - hidden;
      magnitude = static_cast<std::uint8_t>((field << l.mantissa_bits) | mantissa);
    }
  }
  // fnuz has no -0.0: its pattern is the NaN.
  *code = magnitude == 0 && l.special == Layout::kFnuz ? 0 : static_cast<std::uint8_t>(sign | magnitude);
  return true;
}

bool Fp8QuantizeSpan(Fp8Subtype subtype, const float* weights, std::uint64_t rows,
                     std::uint64_t in_features, const float* inv_scales, std::uint64_t blocks,
                     std::uint64_t block_cols, std::uint8_t* codes) {
  if (kLayouts[static_cast<int>(subtype)].special == Layout::kE8M0) return false;
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t k = 0; k < in_features; ++k) {
      const float scaled = weights[r * in_features + k] * inv_scales[r * blocks + k / block_cols];
      Fp8Encode(subtype, scaled, &codes[r * in_features + k]);
    }
  }
  return true;
}

void Fp8DequantizeRows(const Fp8Result& result, const Fp8Layer& layer, std::uint64_t n_begin,
                       std::uint64_t n_end, float* out) {
  const std::uint64_t K = layer.in_features;
  const std::uint8_t* codes = result.table.Data(layer.weight) + n_begin * K;
  const std::uint8_t* sd = result.table.Data(layer.scale_inv);
  std::vector<float> inv;
  std::uint64_t blocks = 1, block_cols = K == 0 ? 1 : K;
  for (std::uint64_t n = n_begin; n < n_end; ++n) {
    switch (layer.scaling) {
      case Fp8Scaling::kTensor: inv.push_back(F32At(sd)); break;
      case Fp8Scaling::kRow: inv.push_back(F32At(sd + 4 * n)); break;
      case Fp8Scaling::kBlock: {
        block_cols = result.config.block_cols;
        blocks = CeilDiv(K, block_cols);
        const std::uint64_t row = n / result.config.block_rows;
        for (std::uint64_t j = 0; j < blocks; ++j) inv.push_back(F32At(sd + 4 * (row * blocks + j)));
        break;
      }
    }
  }
  Fp8DequantizeSpan(layer.subtype, codes, n_end - n_begin, K, inv.data(), blocks, block_cols, out);
}

void StreamFp8Layers(const Fp8Result& r, TensorSink& sink) {
  // Section 7: storage order; a layer's weight decoded where it lies, its
  // scale consumed, other floating tensors widened, the rest left out.
  std::vector<LayerOutput> outputs;
  std::vector<bool> consumed(r.table.size(), false);
  for (const Fp8Layer& l : r.layers) {
    outputs.push_back({l.weight, l.prefix + "weight", l.out_features, l.in_features});
    consumed[l.scale_inv] = true;
  }
  StreamLayersAndFloats(r.table, outputs, consumed, sink,
                        [&](std::size_t l, std::uint64_t row, std::uint64_t count, float* out) {
                          Fp8DequantizeRows(r, r.layers[l], row, row + count, out);
                        });
}

qd::Outcome StreamFp8File(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, TensorSink& sink) {
  Fp8Result r = ReadFp8(file, file_name, configs);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (!r.refused) StreamFp8Layers(r, sink);
  return outcome;
}

qd::Outcome DecodeFp8File(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs) {
  return CollectStream([&](TensorSink& sink) { return StreamFp8File(file, file_name, configs, sink); });
}

}  // namespace qd::codec
