// Generators for GPTQ checkpoints (rules GPTQ-*, CFG-*; docs/gptq.md).
// Layers are packed with the codec's encoder (codec::GptqEncode) and written
// with codec::SerializeSafetensors; the config sources are JSON objects
// spelled with every alias docs/gptq.md section 1 allows. Each violation
// starts from a valid draft and breaks one thing, chosen so that every step
// before it in docs/gptq.md section 3 (C1..C11, then L1..L10 per layer)
// passes.
//
// The units: gptq_model.h (the draft), gptq_layer.cc (a layer's values and
// packing), gptq_config.cc (the config sources), gptq_model.cc (the random
// valid draft, tensor edits), gptq_config_violations.cc and
// gptq_layer_violations.cc (one rule broken each); here the public entry
// points.
#include <string>
#include <vector>

#include "generators/gptq_model.h"

namespace qd::gen {

using namespace gptq_gen;

Generated GptqValid(Rng& rng) {
  DraftOptions o;
  o.flooded_zero = true;
  Draft d = MakeDraft(rng, o);
  return d.Write("", "valid " + std::string(kFormatNames[d.format]) + " file, " +
                         std::to_string(d.bits) + " bits, group_size " + std::to_string(d.group_size) +
                         ", " + std::to_string(d.layers.size()) + " layer(s), " +
                         std::to_string(d.sources.size()) + " config source(s)");
}

std::vector<std::string> GptqViolableRules() {
  std::vector<std::string> rules;
  for (const ConfigRule& c : ConfigRules()) rules.emplace_back(c.rule);
  for (const LayerRule& l : LayerRules()) rules.emplace_back(l.rule);
  return rules;
}

Generated GptqViolation(std::string_view rule, Rng& rng) {
  const std::string r(rule);
  for (const ConfigRule& c : ConfigRules()) {
    if (r == c.rule) return c.build(r, rng);
  }
  LayerCase c{MakeDraft(rng)};
  c.layer = &SomeLayer(c.d, rng);
  for (const LayerRule& l : LayerRules()) {
    if (r == l.rule) return l.build(r, c, rng);
  }
  return c.d.Write("", "unknown rule " + r + ": a valid file");
}

}  // namespace qd::gen
