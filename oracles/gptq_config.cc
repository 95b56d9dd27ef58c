// gptq_config.cc: the oracle's quantize-config steps for GPTQ (and, through
// CheckQuantConfigs in oracles/gptq.h, for AWQ: docs/awq.md section 3),
// written from docs/gptq.md sections 1 and 3 (steps C1..C11). Split out of
// oracles/gptq.cc along the contract's sections; the layer checks and the
// decoding stay there. Nothing here is shared with codecs/.
//
// Sections (numbered as in oracles/gptq.cc's plan; docs/gptq.md sections in
// brackets):
//   3. config sources: parsing, CFG-001 / CFG-002 [1, 3 C1]
//   4. the winning config: C2..C11 [3]
//   9. CheckQuantConfigs (C1, C2, then C3..C11 on the winner)
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oracles/gptq.h"
#include "oracles/gptq_internal.h"
#include "oracles/json.h"

namespace qd::oracle {
namespace {

using gptq_internal::kNoOffset;
using gptq_internal::Quote;
using gptq_internal::Reporter;
using gptq_internal::Settings;

// ---------------------------------------------------------------------------
// Section 3: config sources (docs/gptq.md sections 1 and 3, step C1).

enum class KeyType { kString, kInteger, kBoolean, kObject };

// The keys of the table of section 1, in the table's row order, aliases in
// their listed order. CFG-002 checks them in exactly this order.
struct KeySpec {
  const char* name;
  KeyType type;
};

constexpr KeySpec kKeys[] = {
    {"method", KeyType::kString},       {"quant_method", KeyType::kString},
    {"format", KeyType::kString},       {"checkpoint_format", KeyType::kString},
    {"version", KeyType::kString},      {"bits", KeyType::kInteger},
    {"w_bit", KeyType::kInteger},       {"wbits", KeyType::kInteger},
    {"group_size", KeyType::kInteger},  {"q_group_size", KeyType::kInteger},
    {"sym", KeyType::kBoolean},         {"zero_point", KeyType::kBoolean},
    {"desc_act", KeyType::kBoolean},    {"pack_dtype", KeyType::kString},
    {"is_marlin_format", KeyType::kBoolean}, {"dynamic", KeyType::kObject},
    {"backend", KeyType::kString},
};
constexpr int kKeyCount = sizeof(kKeys) / sizeof(kKeys[0]);

// One key's value in one config: absent (also when null) or of its type.
struct KeyValue {
  bool present = false;
  std::string text;        // kString
  std::int64_t integer = 0;  // kInteger
  bool boolean = false;    // kBoolean
  std::uint32_t members = 0;  // kObject: number of members
};

// A config source after C1: its name and the values of the table's keys.
struct Config {
  std::string name;
  KeyValue values[kKeyCount];

  const KeyValue& Get(std::string_view key) const {
    for (int i = 0; i < kKeyCount; ++i) {
      if (key == kKeys[i].name) return values[i];
    }
    static const KeyValue kAbsent;
    return kAbsent;
  }
};

// "Integer" of section 1: a number token of an optional minus and digits
// only (no fraction, no exponent) whose value fits int64.
bool TokenToInt64(std::string_view token, std::int64_t* value) {
  bool negative = false;
  std::size_t i = 0;
  if (i < token.size() && token[i] == '-') {
    negative = true;
    ++i;
  }
  if (i == token.size()) return false;
  // Accumulate the magnitude in 64 unsigned bits; 2^63 is allowed for a
  // negative number only.
  std::uint64_t magnitude = 0;
  const std::uint64_t limit = static_cast<std::uint64_t>(1) << 63;  // |INT64_MIN|
  for (; i < token.size(); ++i) {
    const char c = token[i];
    if (c < '0' || c > '9') return false;  // '.', 'e', 'E', '+' : not an integer
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (magnitude > (limit - digit) / 10) return false;  // would pass 2^63
    magnitude = magnitude * 10 + digit;
  }
  if (!negative && magnitude == limit) return false;  // 2^63 does not fit
  if (negative) {
    *value = magnitude == limit ? std::numeric_limits<std::int64_t>::min()
                                : -static_cast<std::int64_t>(magnitude);
  } else {
    *value = static_cast<std::int64_t>(magnitude);
  }
  return true;
}

const char* KeyTypeName(KeyType type) {
  switch (type) {
    case KeyType::kString:
      return "a string";
    case KeyType::kInteger:
      return "an integer (a number without fraction or exponent that fits int64)";
    case KeyType::kBoolean:
      return "a boolean";
    case KeyType::kObject:
      return "an object";
  }
  return "";
}

// The file name after the last '/'.
std::string_view BaseName(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string_view(path)
                                    : std::string_view(path).substr(slash + 1);
}

// C1 on one source: CFG-001 then CFG-002. Returns false at an error. When
// the source is accepted, *is_source tells whether it is a source at all (a
// nested config.json without quantization_config is not) and *config holds
// its values.
bool ReadConfigSource(const qd::SideFile& side, Reporter& report, bool* is_source,
                      Config* config) {
  *is_source = false;
  JsonDocument document;
  JsonError error;
  // CFG-001: not strict JSON (UTF-8, RFC 8259, depth, binary64 range) or the
  // top level is not an object.
  if (!ParseStrictJsonObject(side.bytes.data(), side.bytes.size(), &document, &error)) {
    return report.Error("CFG-001", side.name, "", "config", kNoOffset,
                        "the config is not strict JSON with an object at the top level (" +
                            error.what + " at byte " + std::to_string(error.position) + ")");
  }
  // CFG-001: a key appears twice in one object.
  std::string duplicate;
  if (FindDuplicateKey(document, &duplicate)) {
    return report.Error("CFG-001", side.name, "", "config", kNoOffset,
                        "the config holds the key \"" + duplicate + "\" twice in one object");
  }
  std::uint32_t object = 0;
  if (BaseName(side.name) == "config.json") {
    // Read nested: the quantization_config member is the config.
    const std::uint32_t nested = document.FindMember(0, "quantization_config");
    if (nested == kNoNode || document.nodes[nested].kind == JsonKind::kNull) {
      return true;  // no source at all
    }
    // CFG-001: quantization_config present, not null and not an object.
    if (document.nodes[nested].kind != JsonKind::kObject) {
      return report.Error("CFG-001", side.name, "", "quantization_config", kNoOffset,
                          "quantization_config is present but is not an object");
    }
    object = nested;
  }
  config->name = side.name;
  // CFG-002: a known key with a non-null value of the wrong JSON type, keys
  // in the table's row order.
  for (int i = 0; i < kKeyCount; ++i) {
    const std::uint32_t node = document.FindMember(object, kKeys[i].name);
    if (node == kNoNode || document.nodes[node].kind == JsonKind::kNull) continue;
    KeyValue& value = config->values[i];
    const JsonKind kind = document.nodes[node].kind;
    bool ok = false;
    switch (kKeys[i].type) {
      case KeyType::kString:
        ok = kind == JsonKind::kString;
        if (ok) value.text = std::string(document.Text(node));
        break;
      case KeyType::kInteger:
        ok = kind == JsonKind::kNumber && TokenToInt64(document.Text(node), &value.integer);
        break;
      case KeyType::kBoolean:
        ok = kind == JsonKind::kTrue || kind == JsonKind::kFalse;
        value.boolean = kind == JsonKind::kTrue;
        break;
      case KeyType::kObject:
        ok = kind == JsonKind::kObject;
        value.members = document.nodes[node].child_count;
        break;
    }
    if (!ok) {
      return report.Error("CFG-002", side.name, "", kKeys[i].name, kNoOffset,
                          std::string("the config key \"") + kKeys[i].name + "\" is not " +
                              KeyTypeName(kKeys[i].type));
    }
    value.present = true;
  }
  *is_source = true;
  return true;
}

// ---------------------------------------------------------------------------
// Section 4: resolving a config and the steps C2..C11.

std::string AsciiLower(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

// A string key's value as compared: version is ASCII-lowercased first.
std::string StringValue(const Config& config, const char* key) {
  const std::string& text = config.Get(key).text;
  return std::string_view(key) == "version" ? AsciiLower(text) : text;
}

// The resolved value of an alias group: the first present key's value, the
// key's name, and whether any key was present.
struct Resolved {
  bool present = false;
  std::string key;  // the key that gave the value
  std::string text;
  std::int64_t integer = 0;
};

const std::vector<const char*>& MethodKeys() {
  static const std::vector<const char*> keys = {"method", "quant_method"};
  return keys;
}
const std::vector<const char*>& FormatKeys() {
  static const std::vector<const char*> keys = {"format", "checkpoint_format", "version"};
  return keys;
}
const std::vector<const char*>& BitsKeys() {
  static const std::vector<const char*> keys = {"bits", "w_bit", "wbits"};
  return keys;
}
const std::vector<const char*>& GroupSizeKeys() {
  static const std::vector<const char*> keys = {"group_size", "q_group_size"};
  return keys;
}

Resolved ResolveString(const Config& config, const std::vector<const char*>& keys,
                       const char* canonical, const std::string& fallback) {
  Resolved resolved;
  for (const char* key : keys) {
    if (config.Get(key).present) {
      resolved.present = true;
      resolved.key = key;
      resolved.text = StringValue(config, key);
      return resolved;
    }
  }
  // method and format default to the reading family's (gptq and gptq, or
  // awq and gemm: docs/awq.md section 3); the field is then the canonical name.
  resolved.key = canonical;
  resolved.text = fallback;
  return resolved;
}

// The producer tag backend "llm-awq" (any case) decides method awq and
// format llm-awq whatever their keys say (spec 004, docs/awq.md section 3).
bool TaggedLlmAwq(const Config& config) {
  return config.Get("backend").present && AsciiLower(config.Get("backend").text) == "llm-awq";
}
Resolved ResolveMethod(const Config& config, const std::string& fallback) {
  if (TaggedLlmAwq(config)) return {true, "backend", "awq", 0};
  return ResolveString(config, MethodKeys(), "method", fallback);
}
Resolved ResolveFormat(const Config& config, const std::string& fallback) {
  if (TaggedLlmAwq(config)) return {true, "backend", "llm-awq", 0};
  return ResolveString(config, FormatKeys(), "format", fallback);
}

Resolved ResolveInteger(const Config& config, const std::vector<const char*>& keys) {
  Resolved resolved;
  for (const char* key : keys) {
    if (config.Get(key).present) {
      resolved.present = true;
      resolved.key = key;
      resolved.integer = config.Get(key).integer;
      return resolved;
    }
  }
  return resolved;
}

// sym, else !zero_point; *present false when neither is there.
bool ResolveSym(const Config& config, bool* present) {
  if (config.Get("sym").present) {
    *present = true;
    return config.Get("sym").boolean;
  }
  if (config.Get("zero_point").present) {
    *present = true;
    return !config.Get("zero_point").boolean;
  }
  *present = false;
  return false;
}

// C4, CFG-004 for one group: the first key (listed order) whose value
// differs from the group's first present key. Empty when they agree.
std::string GroupConflict(const Config& config, const std::vector<const char*>& keys,
                          bool strings) {
  const char* first = nullptr;
  for (const char* key : keys) {
    if (!config.Get(key).present) continue;
    if (first == nullptr) {
      first = key;
      continue;
    }
    const bool differs = strings ? StringValue(config, key) != StringValue(config, first)
                                 : config.Get(key).integer != config.Get(first).integer;
    if (differs) return key;
  }
  return "";
}

// Steps C3..C11 on the winner configs[0] (C2 is the caller's). Returns
// false at the first error.
bool CheckWinner(const std::vector<Config>& configs, Reporter& report, Settings* settings,
                 const std::string& family) {
  const Config& w = configs[0];
  const std::string& file = w.name;
  const bool awq = family == "awq";
  // docs/ggml_safetensors.md section 2: method gguf, no default format, no
  // group_size needed, no C3 and no C8 (its G1 / G2 judge format and bits).
  const bool gguf = family == "gguf";
  const bool gptq = !awq && !gguf;
  const std::string default_method = family;
  const std::string default_format = awq ? "gemm" : gguf ? "" : "gptq";

  // C3 GPTQ-005: marlin is a different pack (GPTQ's step only; an AWQ
  // reader meets a marlin label at C5, docs/awq.md section 3).
  for (const char* key : {"method", "quant_method", "format", "checkpoint_format"}) {
    if (!gptq) break;
    if (w.Get(key).present && w.Get(key).text == "marlin") {
      return report.Error("GPTQ-005", file, "", key, kNoOffset,
                          std::string("the config says ") + key +
                              " \"marlin\", a different pack than GPTQ's");
    }
  }
  if (gptq && w.Get("is_marlin_format").present && w.Get("is_marlin_format").boolean) {
    return report.Error("GPTQ-005", file, "", "is_marlin_format", kNoOffset,
                        "the config says is_marlin_format true, a different pack than GPTQ's");
  }
  // CFG-101: the hard-deprecated key, false.
  if (!awq && w.Get("is_marlin_format").present) {
    report.Warning("CFG-101", file, "", "is_marlin_format", kNoOffset,
                   "the config holds the deprecated key is_marlin_format (false)");
  }

  // C4 CFG-004: two keys of one alias group disagree.
  const struct {
    const std::vector<const char*>* keys;
    bool strings;
  } groups[] = {{&MethodKeys(), true}, {&FormatKeys(), true}, {&BitsKeys(), false},
                {&GroupSizeKeys(), false}};
  for (const auto& group : groups) {
    const std::string key = GroupConflict(w, *group.keys, group.strings);
    if (!key.empty()) {
      return report.Error("CFG-004", file, "", key, kNoOffset,
                          "the config key " + key +
                              " disagrees with an alias of the same setting given before it");
    }
  }
  // CFG-102: sym and zero_point both present and equal (they are opposites).
  if (w.Get("sym").present && w.Get("zero_point").present &&
      w.Get("sym").boolean == w.Get("zero_point").boolean) {
    report.Warning("CFG-102", file, "", "zero_point", kNoOffset,
                   "sym and zero_point have the same value although zero_point means !sym");
  }

  // C5 CFG-005: method gptq; format gptq, gptq_v2 or gptq_p. An AWQ reader
  // wants method awq and format gemm, gemv or gemv_fast (docs/awq.md
  // section 3); a label of the other family names both.
  const Resolved method = ResolveMethod(w, default_method);
  if (method.text != default_method) {
    std::string both;
    if (!awq && method.text == "awq") both = " (an AWQ label on a file of GPTQ layers)";
    if (awq) both = " (the file's layers are AWQ layers)";
    if (gguf) both = " (the file's layers are GGUF-family layers)";
    return report.Error("CFG-005", file, "", method.key, kNoOffset,
                        "the method " + Quote(method.text) + " is not " + default_method + both);
  }
  const Resolved format = ResolveFormat(w, default_format);
  const bool format_known =
      gguf ? true
      : awq ? format.text == "gemm" || format.text == "gemv" || format.text == "gemv_fast" ||
                format.text == "llm-awq"
          : format.text == "gptq" || format.text == "gptq_v2" || format.text == "gptq_p";
  if (!format_known) {
    const bool awq_version = format.text == "gemm" || format.text == "gemv" ||
                             format.text == "gemv_fast" || format.text == "llm-awq";
    return report.Error("CFG-005", file, "", format.key, kNoOffset,
                        "the format " + Quote(format.text) + " is not " +
                            (awq ? "gemm, gemv, gemv_fast or llm-awq"
                                 : std::string("gptq, gptq_v2 or gptq_p") +
                                       (awq_version ? " (an AWQ version on a file of GPTQ layers)" : "")));
  }

  // C6 CFG-006: bits and group_size have no default.
  const Resolved bits = ResolveInteger(w, BitsKeys());
  if (!bits.present) {
    return report.Error("CFG-006", file, "", "bits", kNoOffset, "the config does not give bits");
  }
  const Resolved group_size = ResolveInteger(w, GroupSizeKeys());
  if (!group_size.present && !gguf) {
    return report.Error("CFG-006", file, "", "group_size", kNoOffset,
                        "the config does not give group_size");
  }

  // C7 CFG-007: group_size is -1 or >= 1.
  if (group_size.present && group_size.integer != -1 && group_size.integer < 1) {
    return report.Error("CFG-007", file, "", group_size.key, kNoOffset,
                        "group_size " + std::to_string(group_size.integer) +
                            " is neither -1 nor a positive integer");
  }

  // C8 GPTQ-001: bits allowed for the format; AWQ-001: AWQ codes are 4-bit.
  const std::int64_t b = bits.integer;
  if (awq && b != 4) {
    return report.Error("AWQ-001", file, "", bits.key, kNoOffset,
                        "bits " + std::to_string(b) + " is not 4, the only AWQ code width read");
  }
  const bool continuous_ok = b == 2 || b == 3 || b == 4 || b == 8;
  const bool planar_ok = b >= 2 && b <= 8;
  if (gptq && (format.text == "gptq_p" ? !planar_ok : !continuous_ok)) {
    return report.Error("GPTQ-001", file, "", bits.key, kNoOffset,
                        "bits " + std::to_string(b) + " is not allowed for format " +
                            format.text +
                            (format.text == "gptq_p" ? " (2..8)" : " (2, 3, 4 or 8)"));
  }

  // C9 CFG-008: the words are int32; an AWQ reader also takes int16 (the
  // qweight dtype says which: docs/awq.md section 3), a GGUF one int16 and
  // int8 (docs/ggml_safetensors.md section 2).
  const std::string& pack = w.Get("pack_dtype").text;
  const bool pack_ok = pack == "int32" || (!gptq && pack == "int16") || (gguf && pack == "int8");
  if (w.Get("pack_dtype").present && !pack_ok) {
    return report.Error("CFG-008", file, "", "pack_dtype", kNoOffset,
                        "pack_dtype " + Quote(pack) + " is not int32" +
                            (gguf ? ", int16 or int8" : awq ? " or int16" : ""));
  }

  // C10 CFG-009: per-module overrides are not supported.
  if (w.Get("dynamic").present && w.Get("dynamic").members != 0) {
    return report.Error("CFG-009", file, "", "dynamic", kNoOffset,
                        "dynamic holds per-module overrides, which are not supported");
  }

  // C11 CFG-010: every other source agrees with the winner on method,
  // format (defaults applied), bits and group_size (when it gives them).
  for (std::size_t i = 1; i < configs.size(); ++i) {
    const Config& other = configs[i];
    const Resolved other_method = ResolveMethod(other, default_method);
    const Resolved other_format = ResolveFormat(other, default_format);
    const Resolved other_bits = ResolveInteger(other, BitsKeys());
    const Resolved other_group = ResolveInteger(other, GroupSizeKeys());
    const char* field = nullptr;
    std::string detail;
    if (other_method.text != method.text) {
      field = "method";
      detail = Quote(method.text) + " against " + Quote(other_method.text);
    } else if (other_format.text != format.text) {
      field = "format";
      detail = Quote(format.text) + " against " + Quote(other_format.text);
    } else if (other_bits.present && other_bits.integer != bits.integer) {
      field = "bits";
      detail = std::to_string(bits.integer) + " against " + std::to_string(other_bits.integer);
    } else if (other_group.present && other_group.integer != group_size.integer) {
      field = "group_size";
      detail = std::to_string(group_size.integer) + " against " +
               std::to_string(other_group.integer);
    }
    if (field != nullptr) {
      return report.Error("CFG-010", file, "", field, kNoOffset,
                          std::string("the config sources disagree on ") + field + ": " + detail +
                              " in " + other.name);
    }
  }
  // CFG-102: another source disagrees on sym or desc_act (not used for
  // decoding, so a warning).
  bool w_sym_present = false;
  const bool w_sym = ResolveSym(w, &w_sym_present);
  for (std::size_t i = 1; i < configs.size(); ++i) {
    const Config& other = configs[i];
    bool other_sym_present = false;
    const bool other_sym = ResolveSym(other, &other_sym_present);
    if (w_sym_present && other_sym_present && w_sym != other_sym) {
      report.Warning("CFG-102", file, "", "sym", kNoOffset,
                     "the config sources disagree on sym (" + other.name + ")");
    }
    if (w.Get("desc_act").present && other.Get("desc_act").present &&
        w.Get("desc_act").boolean != other.Get("desc_act").boolean) {
      report.Warning("CFG-102", file, "", "desc_act", kNoOffset,
                     "the config sources disagree on desc_act (" + other.name + ")");
    }
  }

  settings->method = method.text;
  settings->format = format.text;
  // Bits that do not fit an int are kept as -1, which no GGUF alias spells
  // (docs/ggml_safetensors.md section 2); C8 bounds them for GPTQ and AWQ.
  const bool fits_int = b >= std::numeric_limits<int>::min() && b <= std::numeric_limits<int>::max();
  settings->bits = fits_int ? static_cast<int>(b) : -1;
  settings->group_size = group_size.integer;
  settings->sym = ResolveSym(w, &settings->sym_present);
  settings->source = w.name;
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------
// Section 9 (the config part): CheckQuantConfigs.

bool CheckQuantConfigs(const std::string& family, const std::vector<qd::SideFile>& configs,
                       const std::string& file_name, qd::Outcome* outcome,
                       QuantSettings* settings) {
  Reporter report(outcome);
  // C1: every present source, in priority order.
  std::vector<Config> sources;
  for (const qd::SideFile& side : configs) {
    bool is_source = false;
    Config config;
    if (!ReadConfigSource(side, report, &is_source, &config)) return false;
    if (is_source) sources.push_back(std::move(config));
  }
  // C2 CFG-003: no source is left.
  if (sources.empty()) {
    return report.Error("CFG-003", file_name, "", "config", kNoOffset,
                        "no quantize config was found for the file");
  }
  // C3..C11 on the winner.
  return CheckWinner(sources, report, settings, family);
}

}  // namespace qd::oracle
