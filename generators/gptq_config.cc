// gptq_config.cc: the GPTQ generator's config sources (docs/gptq.md section
// 1): quantize_config.json and config.json objects for a draft's parameters,
// spelled with every alias and with keys the reader ignores or takes null
// as absent, and the canonical config text. See gptq_model.h.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "generators/gptq_model.h"

namespace qd::gen::gptq_gen {
namespace {

// Non-empty random subset of keys (at least one, in listed order).
std::vector<std::string> SomeKeys(const std::vector<std::string>& keys, Rng& rng) {
  std::vector<std::string> out;
  while (out.empty()) {
    for (const auto& k : keys) {
      if (Coin(rng)) out.push_back(k);
    }
  }
  return out;
}

std::string PlainName(Rng& rng) {
  switch (Pick(rng, 4)) {
    case 0: return "quantize_config.json";
    case 1: return "quant_config.json";
    case 2: return "catalogue.quantize_config.json";
    default: return "dir/quantize_config.json";
  }
}

}  // namespace

std::string RandomCase(std::string s, Rng& rng) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z' && Coin(rng)) c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

// A config object for the draft's parameters, spelled at random.
Json MakeConfig(const Draft& d, Rng& rng, bool minimal) {
  Json j = Json::object();
  std::vector<std::pair<std::string, Json>> entries;
  // method: absent (defaults to gptq) or one or both aliases.
  if (!Coin(rng, 3)) {
    for (const auto& k : SomeKeys(kMethodKeys, rng)) entries.emplace_back(k, "gptq");
  }
  // format: v1 may be absent.
  if (d.format != 0 || !Coin(rng, 3)) {
    for (const auto& k : SomeKeys(kFormatKeys, rng)) {
      entries.emplace_back(k, k == "version" ? RandomCase(kFormatNames[d.format], rng)
                                             : std::string(kFormatNames[d.format]));
    }
  }
  for (const auto& k : SomeKeys(kBitsKeys, rng)) entries.emplace_back(k, d.bits);
  for (const auto& k : SomeKeys(kGroupKeys, rng)) entries.emplace_back(k, d.group_size);
  if (!minimal) {
    switch (Pick(rng, 4)) {
      case 0: entries.emplace_back("sym", d.sym); break;
      case 1: entries.emplace_back("zero_point", !d.sym); break;
      case 2:
        entries.emplace_back("sym", d.sym);
        entries.emplace_back("zero_point", !d.sym);
        break;
      default: break;
    }
    if (Coin(rng)) entries.emplace_back("desc_act", d.desc_act);
    if (Coin(rng, 4)) entries.emplace_back("pack_dtype", "int32");
    if (Coin(rng, 5)) entries.emplace_back("dynamic", Coin(rng) ? Json::object() : Json(nullptr));
    // null counts as absent, for any key of the table.
    if (Coin(rng, 4)) {
      const std::vector<std::string> nullable = {"w_bit", "q_group_size", "version", "sym",
                                                 "is_marlin_format", "pack_dtype", "method"};
      const std::string k = OneOf(rng, nullable);
      bool taken = false;
      for (const auto& e : entries) taken = taken || e.first == k;
      if (!taken) entries.emplace_back(k, nullptr);
    }
    // Keys the reader ignores.
    if (Coin(rng)) entries.emplace_back("damp_percent", 0.01);
    if (Coin(rng, 3)) entries.emplace_back("true_sequential", true);
    if (Coin(rng, 3)) entries.emplace_back("static_groups", false);
    if (Coin(rng, 4)) entries.emplace_back("model_name_or_path", "/models/x");
    if (Coin(rng, 4)) {
      entries.emplace_back("meta", Json{{"quantizer", Json::array({"gptqmodel:1.0"})},
                                        {"damp_auto_increment", 0.0025}});
    }
  }
  std::shuffle(entries.begin(), entries.end(), rng);
  for (auto& [k, v] : entries) j[k] = v;
  return j;
}

Source PlainSource(std::string name, Json config) {
  Source s;
  s.name = std::move(name);
  s.top = std::move(config);
  return s;
}

Source NestedSource(Json config, Rng& rng) {
  Source s;
  s.name = Coin(rng, 3) ? "model/config.json" : "config.json";
  s.nested = true;
  Json top = Json::object();
  if (Coin(rng)) top["architectures"] = Json::array({"LlamaForCausalLM"});
  if (Coin(rng)) top["hidden_size"] = 4096;
  // Config keys outside quantization_config are not read.
  if (Coin(rng, 3)) top["bits"] = "ignored";
  top["quantization_config"] = std::move(config);
  if (Coin(rng)) top["torch_dtype"] = "float16";
  s.top = std::move(top);
  return s;
}

// A plain source (config file) for d's parameters. The config is drawn
// before the name, so every compiler makes the same bytes.
Source RandomPlainSource(const Draft& d, Rng& rng) {
  Json config = MakeConfig(d, rng);
  std::string name = PlainName(rng);
  return PlainSource(std::move(name), std::move(config));
}

void EraseGroup(Json& j, const std::vector<std::string>& keys) {
  for (const auto& k : keys) j.erase(k);
}

}  // namespace qd::gen::gptq_gen

namespace qd::gen {

using namespace gptq_gen;

std::string GptqConfigText(int format, int bits, std::int64_t group_size) {
  Json j;
  j["bits"] = bits;
  j["group_size"] = group_size;
  j["desc_act"] = false;
  j["sym"] = true;
  j["quant_method"] = "gptq";
  j["checkpoint_format"] = kFormatNames[format];
  return j.dump();
}

}  // namespace qd::gen
