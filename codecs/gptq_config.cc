// gptq_config.cc: the quantize config of a GPTQ-family reader (docs/gptq.md
// section 1 and checks C1..C11 of section 3), with the AWQ and GGUF-family
// readings of the same steps (docs/awq.md section 3,
// docs/ggml_safetensors.md section 2): ReadQuantConfig of gptq.h.
#include "codecs/gptq.h"

#include <array>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/finding.h"
#include "codecs/strict_json.h"

namespace qd::codec {
namespace {

using nlohmann::json;

constexpr std::int64_t kNoOffset = -1;  // config findings point at no byte

// ---- config ------------------------------------------------------------------

enum class JsonType : std::uint8_t { kString, kInteger, kBoolean, kObject };

struct KeySpec {
  const char* key;
  JsonType type;
};

// The table of docs/gptq.md section 1, rows in order, aliases in listed order.
constexpr std::array<KeySpec, 17> kKeys = {{
    {"method", JsonType::kString},        {"quant_method", JsonType::kString},
    {"format", JsonType::kString},        {"checkpoint_format", JsonType::kString},
    {"version", JsonType::kString},       {"bits", JsonType::kInteger},
    {"w_bit", JsonType::kInteger},        {"wbits", JsonType::kInteger},
    {"group_size", JsonType::kInteger},   {"q_group_size", JsonType::kInteger},
    {"sym", JsonType::kBoolean},          {"zero_point", JsonType::kBoolean},
    {"desc_act", JsonType::kBoolean},     {"pack_dtype", JsonType::kString},
    {"is_marlin_format", JsonType::kBoolean}, {"dynamic", JsonType::kObject},
    {"backend", JsonType::kString},
}};

constexpr std::array<const char*, 2> kMethodKeys = {"method", "quant_method"};
constexpr std::array<const char*, 3> kFormatKeys = {"format", "checkpoint_format", "version"};
constexpr std::array<const char*, 3> kBitsKeys = {"bits", "w_bit", "wbits"};
constexpr std::array<const char*, 2> kGroupKeys = {"group_size", "q_group_size"};

// The value of key in obj, or null when the key is absent or JSON null.
const json* Present(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A number token without fraction or exponent that fits int64: nlohmann keeps
// such tokens as integer / unsigned and everything else (fraction, exponent,
// out of 64-bit range) as float.
bool IsInteger(const json& v) {
  if (v.is_number_unsigned()) {
    return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  }
  return v.is_number_integer();
}

bool HasType(const json& v, JsonType type) {
  switch (type) {
    case JsonType::kString: return v.is_string();
    case JsonType::kInteger: return IsInteger(v);
    case JsonType::kBoolean: return v.is_boolean();
    case JsonType::kObject: return v.is_object();
  }
  return false;
}

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// One alias group's value as a comparable string or integer.
struct GroupValue {
  const char* key = nullptr;  // the key that gave it; null when absent
  std::string text;           // string groups (version lowercased)
  std::int64_t number = 0;    // integer groups
};

GroupValue StringValue(const json& obj, const char* key) {
  GroupValue v;
  v.key = key;
  v.text = obj.find(key)->get<std::string>();
  if (std::string_view(key) == "version") v.text = AsciiLower(std::move(v.text));
  return v;
}

GroupValue IntegerValue(const json& obj, const char* key) {
  GroupValue v;
  v.key = key;
  v.number = obj.find(key)->get<std::int64_t>();
  return v;
}

// A config whose key types passed C1, resolved group by group.
struct Resolved {
  GroupValue method, format, bits, group_size;  // method/format defaulted to "gptq"
  std::optional<bool> sym;                     // sym, else !zero_point
  std::optional<bool> desc_act;
};

template <std::size_t N>
GroupValue FirstPresent(const json& obj, const std::array<const char*, N>& keys, bool integer) {
  for (const char* key : keys) {
    if (Present(obj, key) != nullptr) return integer ? IntegerValue(obj, key) : StringValue(obj, key);
  }
  return GroupValue{};
}

// Method and format default to the reading family's: gptq / gptq, awq /
// gemm (docs/awq.md section 3), or gguf / none (docs/ggml_safetensors.md
// section 2).
Resolved Resolve(const json& obj, QuantFamily family) {
  static constexpr std::array<std::array<const char*, 2>, 3> kDefaults = {
      {{"gptq", "gptq"}, {"awq", "gemm"}, {"gguf", ""}}};
  const auto& defaults = kDefaults[static_cast<std::size_t>(family)];
  Resolved r;
  r.method = FirstPresent(obj, kMethodKeys, false);
  if (r.method.key == nullptr) r.method.text = defaults[0];
  r.format = FirstPresent(obj, kFormatKeys, false);
  if (r.format.key == nullptr) r.format.text = defaults[1];
  // The AWQ producer tag backend "llm-awq" forces method awq and format
  // llm-awq over every key of their groups (spec 004; docs/awq.md section 3).
  if (const json* b = Present(obj, "backend"); b != nullptr && AsciiLower(b->get<std::string>()) == "llm-awq") {
    r.method = GroupValue{"backend", "awq"};
    r.format = GroupValue{"backend", "llm-awq"};
  }
  r.bits = FirstPresent(obj, kBitsKeys, true);
  r.group_size = FirstPresent(obj, kGroupKeys, true);
  if (const json* s = Present(obj, "sym")) {
    r.sym = s->get<bool>();
  } else if (const json* z = Present(obj, "zero_point")) {
    r.sym = !z->get<bool>();
  }
  if (const json* d = Present(obj, "desc_act")) r.desc_act = d->get<bool>();
  return r;
}

struct Source {
  std::string name;
  json config;  // an object
};

const char* FormatLabel(GptqFormat f) {
  switch (f) {
    case GptqFormat::kV1: return "gptq";
    case GptqFormat::kV2: return "gptq_v2";
    case GptqFormat::kPlanar: return "gptq_p";
  }
  return "gptq";
}

// The config steps C1..C11, their findings appended to a result's.
class ConfigChecker {
 public:
  ConfigChecker(GptqResult* result, const std::string& file, QuantFamily family)
      : r_(result), file_(file), family_(family) {}

  bool CheckConfigs(const std::vector<qd::SideFile>& configs);

 private:
  void Add(std::string rule, qd::Severity severity, std::string file, std::string field,
           std::string message) {
    r_->findings.push_back(MakeFinding(std::move(rule), severity, std::move(file), "",
                                       std::move(field), kNoOffset, std::move(message)));
    if (severity == qd::Severity::kError) r_->refused = true;
  }
  // Always false, so a check can `return ConfigError(...)`.
  bool ConfigError(std::string rule, const std::string& source, std::string field,
                   std::string message) {
    Add(std::move(rule), qd::Severity::kError, source, std::move(field), std::move(message));
    return false;
  }
  void ConfigWarning(std::string rule, const std::string& source, std::string field,
                     std::string message) {
    Add(std::move(rule), qd::Severity::kWarning, source, std::move(field), std::move(message));
  }

  bool ParseSources(const std::vector<qd::SideFile>& configs, std::vector<Source>* sources);
  bool CheckWinner(const Source& w, Resolved* resolved);
  bool CheckOthers(const std::vector<Source>& sources, const Resolved& w);
  bool CheckAwqLabel(const Source& w, const Resolved& r);

  GptqResult* r_;
  const std::string& file_;
  QuantFamily family_;
};

// C1: every source parsed, nested sources unwrapped, key types checked.
bool ConfigChecker::ParseSources(const std::vector<qd::SideFile>& configs,
                           std::vector<Source>* sources) {
  for (const qd::SideFile& side : configs) {
    std::optional<json> doc = ParseStrictJson(side.bytes.data(), side.bytes.size());
    if (!doc || !doc->is_object()) {
      return ConfigError("CFG-001", side.name, "config",
                         "the config is not strict JSON with an object on top");
    }
    const std::size_t slash = side.name.rfind('/');
    const std::string_view base = slash == std::string::npos
                                      ? std::string_view(side.name)
                                      : std::string_view(side.name).substr(slash + 1);
    json config;
    if (base == "config.json") {
      const json* q = Present(*doc, "quantization_config");
      if (q == nullptr) continue;  // no quantization_config: no source at all
      if (!q->is_object()) {
        return ConfigError("CFG-001", side.name, "quantization_config",
                           "quantization_config is not an object");
      }
      config = std::move((*doc)["quantization_config"]);
    } else {
      config = std::move(*doc);
    }
    for (const KeySpec& spec : kKeys) {
      const json* v = Present(config, spec.key);
      if (v != nullptr && !HasType(*v, spec.type)) {
        static constexpr std::array<const char*, 4> kTypeNames = {"a string", "an integer",
                                                                  "a boolean", "an object"};
        return ConfigError("CFG-002", side.name, spec.key,
                           std::string(spec.key) + " is not " +
                               kTypeNames[static_cast<int>(spec.type)]);
      }
    }
    sources->push_back(Source{side.name, std::move(config)});
  }
  return true;
}

// C3..C10 on the winner.
bool ConfigChecker::CheckWinner(const Source& w, Resolved* resolved) {
  const json& c = w.config;
  const bool gptq = family_ == QuantFamily::kGptq;
  // C3: marlin (GPTQ only: for AWQ a marlin label is C5's).
  for (const char* key : {"method", "quant_method", "format", "checkpoint_format"}) {
    const json* v = Present(c, key);
    if (gptq && v != nullptr && v->get<std::string>() == "marlin") {
      return ConfigError("GPTQ-005", w.name, key,
                         std::string(key) + " is marlin: the marlin layout is not read");
    }
  }
  if (const json* m = Present(c, "is_marlin_format"); gptq && m != nullptr) {
    if (m->get<bool>()) {
      return ConfigError("GPTQ-005", w.name, "is_marlin_format",
                         "is_marlin_format is true: the marlin layout is not read");
    }
    ConfigWarning("CFG-101", w.name, "is_marlin_format",
                  "is_marlin_format is hard-deprecated; false is read as format gptq");
  }
  // C4: alias groups agree.
  auto group_conflict = [&](const auto& keys, bool integer) -> const char* {
    std::optional<GroupValue> first;
    for (const char* key : keys) {
      if (Present(c, key) == nullptr) continue;
      GroupValue v = integer ? IntegerValue(c, key) : StringValue(c, key);
      if (!first) {
        first = std::move(v);
      } else if (integer ? v.number != first->number : v.text != first->text) {
        return key;
      }
    }
    return nullptr;
  };
  const char* conflict = group_conflict(kMethodKeys, false);
  if (conflict == nullptr) conflict = group_conflict(kFormatKeys, false);
  if (conflict == nullptr) conflict = group_conflict(kBitsKeys, true);
  if (conflict == nullptr) conflict = group_conflict(kGroupKeys, true);
  if (conflict != nullptr) {
    return ConfigError("CFG-004", w.name, conflict,
                       std::string(conflict) + " disagrees with another key of its alias group");
  }
  const json* sym = Present(c, "sym");
  const json* zero_point = Present(c, "zero_point");
  if (sym != nullptr && zero_point != nullptr && sym->get<bool>() == zero_point->get<bool>()) {
    ConfigWarning("CFG-102", w.name, "zero_point",
                  "sym and zero_point are equal, so they say opposite things");
  }
  const Resolved r = Resolve(c, family_);
  r_->config.method = r.method.text;
  r_->config.format_name = r.format.text;
  r_->config.sym = r.sym;
  // C5: method and format (a GGUF format is G1's, docs/ggml_safetensors.md 2).
  const bool gguf = family_ == QuantFamily::kGguf;
  if (gguf && r.method.text != "gguf") {
    return ConfigError("CFG-005", w.name, r.method.key != nullptr ? r.method.key : "method",
                       "method \"" + r.method.text +
                           "\" is not gguf, but the file's layers are GGUF-family layers "
                           "(docs/ggml_safetensors.md section 3)");
  }
  if (family_ == QuantFamily::kAwq && !CheckAwqLabel(w, r)) return false;
  if (gptq && r.method.text != "gptq") {
    return ConfigError("CFG-005", w.name, r.method.key != nullptr ? r.method.key : "method",
                       "method \"" + r.method.text + "\" is not gptq" +
                           (r.method.text == "awq"
                                ? ": the config names AWQ but the file's layers are GPTQ's "
                                  "(docs/awq.md section 2)"
                                : ""));
  }
  std::optional<GptqFormat> format;
  if (r.format.text == "gptq") format = GptqFormat::kV1;
  if (r.format.text == "gptq_v2") format = GptqFormat::kV2;
  if (r.format.text == "gptq_p") format = GptqFormat::kPlanar;
  if (gptq && !format) {
    return ConfigError("CFG-005", w.name, r.format.key != nullptr ? r.format.key : "format",
                       "format \"" + r.format.text + "\" is not gptq, gptq_v2 or gptq_p" +
                           (r.format.text == "gemm" || r.format.text == "gemv" || r.format.text == "gemv_fast" ||
                                    r.format.text == "llm-awq"
                                ? ": an AWQ version, but the file's layers are GPTQ's"
                                : ""));
  }
  // C6: bits and group_size present.
  if (r.bits.key == nullptr) return ConfigError("CFG-006", w.name, "bits", "bits is missing");
  if (r.group_size.key == nullptr && !gguf) {  // GGUF has no groups
    return ConfigError("CFG-006", w.name, "group_size", "group_size is missing");
  }
  // C7: group_size -1 or >= 1.
  if (r.group_size.key != nullptr && r.group_size.number != -1 && r.group_size.number < 1) {
    return ConfigError("CFG-007", w.name, r.group_size.key,
                       "group_size " + std::to_string(r.group_size.number) +
                           " is neither -1 nor positive");
  }
  // C8: bits for the layout.
  const std::int64_t b = r.bits.number;
  if (family_ == QuantFamily::kAwq && b != 4) {  // docs/awq.md section 3: four-bit codes only
    return ConfigError("AWQ-001", w.name, r.bits.key, "bits " + std::to_string(b) + " is not 4");
  }
  const bool bits_ok = !gptq || (*format == GptqFormat::kPlanar ? b >= 2 && b <= 8
                                                                : b == 2 || b == 3 || b == 4 || b == 8);
  if (!bits_ok) {
    return ConfigError("GPTQ-001", w.name, r.bits.key,
                       "bits " + std::to_string(b) + " is not allowed for format " +
                           FormatLabel(*format));
  }
  // C9, C10.
  // The word dtype: int32, for AWQ also int16 (docs/awq.md section 3: the
  // qweight dtype, not this key, tells GEMV_FAST's int16 words), for GGUF
  // also int8 (docs/ggml_safetensors.md section 2).
  if (const json* p = Present(c, "pack_dtype"); p != nullptr) {
    const std::string& pack = p->get<std::string>();
    const bool ok = pack == "int32" || (!gptq && pack == "int16") || (gguf && pack == "int8");
    if (!ok) {
      return ConfigError("CFG-008", w.name, "pack_dtype",
                         "pack_dtype \"" + pack + "\" is not int32" +
                             (gptq ? "" : gguf ? ", int16 or int8" : " or int16"));
    }
  }
  if (const json* d = Present(c, "dynamic"); d != nullptr && !d->empty()) {
    return ConfigError("CFG-009", w.name, "dynamic",
                       "per-module dynamic overrides are not supported");
  }
  r_->config.format = format.value_or(GptqFormat::kV1);
  // C8 bounds GPTQ's and AWQ's bits; a GGUF reader's G1 / G2 see any value,
  // and one beyond int spells no alias: -1 (docs/ggml_safetensors.md 2).
  r_->config.bits = b >= std::numeric_limits<int>::min() && b <= std::numeric_limits<int>::max()
                        ? static_cast<int>(b)
                        : -1;
  r_->config.group_size = r.group_size.number;
  r_->config.source = w.name;
  *resolved = r;
  return true;
}

// docs/awq.md section 3, C5 for an AWQ reader: method awq, format one of
// AWQ's versions.
bool ConfigChecker::CheckAwqLabel(const Source& w, const Resolved& r) {
  if (r.method.text != "awq") {
    return ConfigError("CFG-005", w.name, r.method.key != nullptr ? r.method.key : "method",
                       "method \"" + r.method.text +
                           "\" is not awq, but the file's layers are AWQ's (docs/awq.md section 2)");
  }
  const std::string& f = r.format.text;
  if (f != "gemm" && f != "gemv" && f != "gemv_fast" && f != "llm-awq") {
    return ConfigError("CFG-005", w.name, r.format.key != nullptr ? r.format.key : "format",
                       "format \"" + f + "\" is not gemm, gemv, gemv_fast or llm-awq");
  }
  return true;
}

// C11: the other sources agree with the winner, then sym / desc_act warnings.
bool ConfigChecker::CheckOthers(const std::vector<Source>& sources, const Resolved& w) {
  const std::string& wname = sources.front().name;
  for (std::size_t s = 1; s < sources.size(); ++s) {
    const Resolved o = Resolve(sources[s].config, family_);
    const char* field = nullptr;
    std::string mine, theirs;  // the two values, for the message
    if (o.method.text != w.method.text) {
      field = "method";
      mine = w.method.text;
      theirs = o.method.text;
    } else if (o.format.text != w.format.text) {
      field = "format";
      mine = w.format.text;
      theirs = o.format.text;
    } else if (o.bits.key != nullptr && o.bits.number != w.bits.number) {
      field = "bits";
      mine = std::to_string(w.bits.number);
      theirs = std::to_string(o.bits.number);
    } else if (o.group_size.key != nullptr && o.group_size.number != w.group_size.number) {
      field = "group_size";
      mine = std::to_string(w.group_size.number);
      theirs = std::to_string(o.group_size.number);
    }
    if (field != nullptr) {
      return ConfigError("CFG-010", wname, field,
                         std::string(field) + " is " + mine + " in " + wname + " but " + theirs +
                             " in " + sources[s].name + "; the sources must agree");
    }
  }
  for (std::size_t s = 1; s < sources.size(); ++s) {
    const Resolved o = Resolve(sources[s].config, family_);
    if (w.sym && o.sym && *w.sym != *o.sym) {
      ConfigWarning("CFG-102", wname, "sym", "sym differs between " + wname + " and " + sources[s].name);
    }
    if (w.desc_act && o.desc_act && *w.desc_act != *o.desc_act) {
      ConfigWarning("CFG-102", wname, "desc_act",
                    "desc_act differs between " + wname + " and " + sources[s].name);
    }
  }
  return true;
}

bool ConfigChecker::CheckConfigs(const std::vector<qd::SideFile>& configs) {
  std::vector<Source> sources;
  if (!ParseSources(configs, &sources)) return false;  // C1
  if (sources.empty()) {                                // C2
    Add("CFG-003", qd::Severity::kError, file_, "config",
        "no quantize config source was found or given");
    return false;
  }
  Resolved w;
  if (!CheckWinner(sources.front(), &w)) return false;  // C3..C10
  return CheckOthers(sources, w);                        // C11
}

}  // namespace

const char* GptqFormatName(GptqFormat format) { return FormatLabel(format); }

bool ReadQuantConfig(QuantFamily family, const std::vector<qd::SideFile>& configs,
                     const std::string& file_name, std::vector<qd::Finding>* findings,
                     GptqConfig* config) {
  GptqResult scratch;
  ConfigChecker checker(&scratch, file_name, family);
  const bool ok = checker.CheckConfigs(configs);
  for (qd::Finding& f : scratch.findings) findings->push_back(std::move(f));
  *config = std::move(scratch.config);
  return ok;
}

}  // namespace qd::codec
