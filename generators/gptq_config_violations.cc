// gptq_config_violations.cc: GPTQ checkpoints whose config sources break one
// rule each of docs/gptq.md section 3's config steps (C1..C11: CFG-*,
// GPTQ-001, GPTQ-005), every earlier step passing. Each builder makes its
// own valid draft (gptq_model.cc) and breaks one thing.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "generators/gptq_model.h"

namespace qd::gen::gptq_gen {
namespace {

// Gives value to every alias of keys that w sets (null counts as absent,
// docs/gptq.md section 1), or to the first alias where w sets none.
template <typename T>
void SetEveryAlias(Json& w, const std::vector<std::string>& keys, T value) {
  bool any = false;
  for (const auto& k : keys) {
    if (w.contains(k) && !w[k].is_null()) {
      w[k] = value;
      any = true;
    }
  }
  if (!any) w[keys[0]] = value;
}

Generated ViolateCfg001(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Source& s = d.sources[Pick(rng, d.sources.size())];
  if (s.nested && Coin(rng)) {
    s.top["quantization_config"] = OneOf<Json>(rng, {Json(4), Json("gptq"), Json::array(), Json(true)});
    return d.Write(r, s.name + ": quantization_config is not an object");
  }
  const std::string text = s.top.dump();
  std::string bad;
  std::string what;
  switch (Pick(rng, 11)) {
    case 0: bad = text + ","; what = "trailing comma"; break;
    case 1: bad = text.substr(0, text.size() - 1); what = "unterminated object"; break;
    case 2: bad = "\xEF\xBB\xBF" + text; what = "byte order mark"; break;
    case 3: bad = "{\"x\":1,\"x\":1," + text.substr(1); what = "duplicate key"; break;
    case 4: bad = "[" + text + "]"; what = "top level is an array"; break;
    case 5: bad = "{\"damp_percent\":NaN," + text.substr(1); what = "NaN literal"; break;
    case 6: bad = "{\"damp_percent\":1e400," + text.substr(1); what = "number overflows binary64"; break;
    case 7: bad = "{\"name\":\"\xff\"," + text.substr(1); what = "invalid UTF-8"; break;
    case 8:
      bad = "{\"deep\":" + std::string(80, '[') + std::string(80, ']') + "," + text.substr(1);
      what = "nesting deeper than 64";
      break;
    case 9: bad = "{'bits':4}"; what = "single quotes"; break;
    default: bad = ""; what = "empty file"; break;
  }
  s.use_raw = true;
  s.raw = bad;
  return d.Write(r, s.name + " is not strict JSON (" + what + ")");
}

Generated ViolateCfg002(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Source& s = d.sources[Pick(rng, d.sources.size())];
  struct Bad {
    const char* key;
    std::vector<const char*> values;
  };
  const std::vector<Bad> bad = {
      {"method", {"4", "true", "[\"gptq\"]"}},
      {"quant_method", {"{}", "1.5"}},
      {"format", {"2", "false"}},
      {"checkpoint_format", {"[]", "0"}},
      {"version", {"1", "{\"v\":2}"}},
      {"bits", {"\"4\"", "4.0", "4e0", "true", "[4]", "9223372036854775808"}},
      {"w_bit", {"4.5", "\"8\""}},
      {"wbits", {"-4e0", "null1"}},
      {"group_size", {"128.0", "\"128\"", "-1.0", "1e2"}},
      {"q_group_size", {"false", "-9223372036854775809"}},
      {"sym", {"\"true\"", "1", "0"}},
      {"zero_point", {"\"false\"", "[]"}},
      {"desc_act", {"0", "\"no\""}},
      {"pack_dtype", {"32", "true"}},
      {"is_marlin_format", {"\"false\"", "0"}},
      {"dynamic", {"[]", "\"x\"", "1", "true"}},
  };
  const Bad& b = bad[Pick(rng, bad.size())];
  std::string value = OneOf(rng, b.values);
  if (value == std::string("null1")) value = "[null]";
  s.Config()[b.key] = Json::parse(value);
  return d.Write(r, s.name + ": " + b.key + " = " + value + " has the wrong JSON type");
}

Generated ViolateCfg003(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng, {.sources = 1});
  switch (Pick(rng, 3)) {
    case 0: d.sources.clear(); return d.Write(r, "no config source");
    case 1:
      d.sources = {NestedSource(Json(nullptr), rng)};
      return d.Write(r, "config.json with quantization_config null only");
    default:
      d.sources = {NestedSource(Json::object(), rng)};
      d.sources[0].top.erase("quantization_config");
      return d.Write(r, "config.json without quantization_config only");
  }
}

Generated ViolateGptq005(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const int v = static_cast<int>(Pick(rng, 5));
  if (v == 4) {
    w["is_marlin_format"] = true;
  } else {
    const char* keys[] = {"method", "quant_method", "format", "checkpoint_format"};
    w[keys[v]] = "marlin";
  }
  return d.Write(r, "winning config says marlin");
}

Generated ViolateCfg101(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  d.Winner()["is_marlin_format"] = false;
  return d.Write(r, "winning config has is_marlin_format false");
}

Generated ViolateCfg004(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  switch (Pick(rng, 4)) {
    case 0: {
      EraseGroup(w, kMethodKeys);
      const bool first_gptq = Coin(rng);
      w["method"] = first_gptq ? "gptq" : "awq";
      w["quant_method"] = first_gptq ? "awq" : "gptq";
      return d.Write(r, "method and quant_method disagree");
    }
    case 1: {
      EraseGroup(w, kFormatKeys);
      const int a = static_cast<int>(Pick(rng, 3));
      const int b = (a + 1 + static_cast<int>(Pick(rng, 2))) % 3;
      std::vector<std::string> keys = kFormatKeys;
      std::shuffle(keys.begin(), keys.end(), rng);
      w[keys[0]] = keys[0] == "version" ? RandomCase(kFormatNames[a], rng) : kFormatNames[a];
      w[keys[1]] = keys[1] == "version" ? RandomCase(kFormatNames[b], rng) : kFormatNames[b];
      return d.Write(r, "format aliases disagree");
    }
    case 2: {
      EraseGroup(w, kBitsKeys);
      std::vector<std::string> keys = kBitsKeys;
      std::shuffle(keys.begin(), keys.end(), rng);
      w[keys[0]] = d.bits;
      w[keys[1]] = d.bits == 8 ? 4 : 8;
      return d.Write(r, "bits aliases disagree");
    }
    default:
      EraseGroup(w, kGroupKeys);
      w["group_size"] = d.group_size;
      w["q_group_size"] = d.group_size == 64 ? 128 : 64;
      if (Coin(rng)) std::swap(w["group_size"], w["q_group_size"]);
      return d.Write(r, "group_size and q_group_size disagree");
  }
}

Generated ViolateCfg102(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  if (Coin(rng) || d.sources.size() < 2) {
    Json& w = d.Winner();
    const bool v = Coin(rng);
    w["sym"] = v;
    w["zero_point"] = v;
    return d.Write(r, "sym and zero_point say the same value");
  }
  Json& w = d.Winner();
  Json& other = d.sources[1].Config();
  const char* key = Coin(rng) ? "sym" : "desc_act";
  const bool v = Coin(rng);
  w.erase("zero_point");
  other.erase("zero_point");
  w[key] = v;
  other[key] = !v;
  return d.Write(r, std::string("config sources disagree on ") + key);
}

Generated ViolateCfg005(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  if (Coin(rng)) {
    EraseGroup(w, kMethodKeys);
    w[OneOf(rng, kMethodKeys)] = OneOf<std::string>(rng, {"awq", "GPTQ", "bitsandbytes", "", "gptq "});
    return d.Write(r, "method is not gptq");
  }
  EraseGroup(w, kFormatKeys);
  const std::string key = OneOf(rng, kFormatKeys);
  // "BitBLAS", not "bitblas": the lowercase label makes a BitBLAS file, which
  // the recognised format claims (docs/recognised.md 2).
  w[key] = key == "version" ? OneOf<std::string>(rng, {"GEMM", "gemv", "gptq-v2", "v2"})
                            : OneOf<std::string>(rng, {"gptq_v3", "GPTQ", "awq", "gptq_marlin", "BitBLAS"});
  return d.Write(r, "format is not gptq, gptq_v2 or gptq_p");
}

Generated ViolateCfg006(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const auto& keys = Coin(rng) ? kBitsKeys : kGroupKeys;
  EraseGroup(w, keys);
  if (Coin(rng)) w[OneOf(rng, keys)] = nullptr;
  return d.Write(r, "winning config lacks " + keys[0]);
}

Generated ViolateCfg007(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const std::int64_t gs =
      OneOf<std::int64_t>(rng, {0, -2, -128, std::numeric_limits<std::int64_t>::min()});
  SetEveryAlias(w, kGroupKeys, gs);
  return d.Write(r, "group_size " + std::to_string(gs));
}

Generated ViolateGptq001(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  Json& w = d.Winner();
  const int bits = d.format == 2 ? OneOf<int>(rng, {0, 1, 9, 16, 32, -1})
                                 : OneOf<int>(rng, {0, 1, 5, 6, 7, 9, 16, -4});
  SetEveryAlias(w, kBitsKeys, bits);
  return d.Write(r, std::string(kFormatNames[d.format]) + " with bits " + std::to_string(bits));
}

Generated ViolateCfg008(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  d.Winner()["pack_dtype"] = OneOf<std::string>(rng, {"int16", "int8", "int64", "uint32", "INT32", ""});
  return d.Write(r, "pack_dtype is not int32");
}

Generated ViolateCfg009(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng);
  d.Winner()["dynamic"] = Coin(rng) ? Json{{"-:.*lm_head", Json::object()}}
                                    : Json{{"+:.*down_proj.*", Json{{"bits", 8}}}};
  return d.Write(r, "dynamic is a non-empty object");
}

Generated ViolateCfg010(const std::string& r, Rng& rng) {
  Draft d = MakeDraft(rng, {.sources = 2});
  Json& w = d.Winner();
  Json& other = d.sources[1].Config();
  switch (Pick(rng, 4)) {
    case 0:
      EraseGroup(other, kMethodKeys);
      other[OneOf(rng, kMethodKeys)] = OneOf<std::string>(rng, {"awq", "marlin", "GPTQ"});
      return d.Write(r, "the other source's method differs");
    case 1: {
      // Both spell the format out; the other says another one (or defaults
      // to gptq where the winner is v2 / planar).
      EraseGroup(other, kFormatKeys);
      if (d.format != 0 && Coin(rng)) return d.Write(r, "the other source's format defaults to gptq");
      const int f = (d.format + 1 + static_cast<int>(Pick(rng, 2))) % 3;
      other[OneOf(rng, kFormatKeys)] = kFormatNames[f];
      return d.Write(r, "the other source's format differs");
    }
    case 2:
      EraseGroup(other, kBitsKeys);
      other[OneOf(rng, kBitsKeys)] = d.bits == 4 ? 8 : 4;
      return d.Write(r, "the other source's bits differ");
    default: {
      EraseGroup(other, kGroupKeys);
      const std::int64_t gs = d.group_size == 128 ? 64 : 128;
      other[OneOf(rng, kGroupKeys)] = gs;
      (void)w;
      return d.Write(r, "the other source's group_size differs");
    }
  }
}

// In the order GptqViolableRules lists them (see ConfigRule).
constexpr ConfigRule kConfigRules[] = {
    {"CFG-001", &ViolateCfg001},
    {"CFG-002", &ViolateCfg002},
    {"CFG-003", &ViolateCfg003},
    {"GPTQ-005", &ViolateGptq005},
    {"CFG-101", &ViolateCfg101},
    {"CFG-004", &ViolateCfg004},
    {"CFG-102", &ViolateCfg102},
    {"CFG-005", &ViolateCfg005},
    {"CFG-006", &ViolateCfg006},
    {"CFG-007", &ViolateCfg007},
    {"GPTQ-001", &ViolateGptq001},
    {"CFG-008", &ViolateCfg008},
    {"CFG-009", &ViolateCfg009},
    {"CFG-010", &ViolateCfg010},
};

}  // namespace

std::span<const ConfigRule> ConfigRules() { return kConfigRules; }

}  // namespace qd::gen::gptq_gen
