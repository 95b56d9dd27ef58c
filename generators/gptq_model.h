// gptq_model.h: the GPTQ generator's own model of a checkpoint under
// construction, shared by its units (internal to generators/gptq*.cc): the
// raw values of a layer, the config sources and their alias spellings
// (docs/gptq.md section 1), and Draft, a valid checkpoint with its config
// sources drawn from the generator's Rng, plus the edits violations make to
// it. gptq_layer.cc packs a layer, gptq_config.cc spells the config sources,
// gptq_model.cc draws a valid draft, gptq_config_violations.cc and
// gptq_layer_violations.cc break one rule each (docs/gptq.md section 3),
// gptq.cc holds the public entry points.
#ifndef QUANTDIFF_GENERATORS_GPTQ_MODEL_H_
#define QUANTDIFF_GENERATORS_GPTQ_MODEL_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "codecs/safetensors.h"
#include "generators/generators.h"

namespace qd::gen::gptq_gen {

using Json = nlohmann::ordered_json;

template <typename T>
T OneOf(Rng& rng, const std::vector<T>& options) {
  return options[Pick(rng, options.size())];
}

// Indexed by GptqLayerParams::format and ::scales_dtype / ::bias_dtype.
inline constexpr const char* kFormatNames[] = {"gptq", "gptq_v2", "gptq_p"};
inline constexpr const char* kFloatDtypes[] = {"F16", "BF16", "F32"};

// ---- a layer's values (gptq_layer.cc) ---------------------------------------

// Little-endian bytes of I32 values.
std::vector<std::uint8_t> WordsBytes(const std::vector<std::int32_t>& words);
// count finite values of dtype (an index of kFloatDtypes) as little-endian bytes.
std::vector<std::uint8_t> FloatBytes(int dtype, std::uint64_t count, Rng& rng);
// G for K input features and a group size (-1: one group).
std::int64_t NGroups(std::int64_t k, std::int64_t gs);

// ---- the model ------------------------------------------------------------------

// A config source: its name, and either a JSON object (the plain config, or
// the config.json top level holding quantization_config) or raw bytes.
struct Source {
  std::string name;
  Json top;
  bool nested = false;
  bool use_raw = false;
  std::string raw;
  std::string padding_before, padding_after;  // JSON whitespace around the value

  Json& Config() { return nested ? top["quantization_config"] : top; }
  std::vector<std::uint8_t> Bytes() const {
    const std::string text = use_raw ? raw : padding_before + top.dump() + padding_after;
    return {text.begin(), text.end()};
  }
};

struct LayerInfo {
  GptqLayerParams params;
  std::int64_t groups = 1;
};

struct Draft {
  int format = 0;
  int bits = 4;
  std::int64_t group_size = 128;
  bool sym = true;
  bool desc_act = false;
  std::vector<LayerInfo> layers;
  std::vector<codec::TensorWithBytes> tensors;
  std::vector<Source> sources;
  codec::MetadataList metadata = {{"format", "pt"}};

  codec::TensorWithBytes* Find(const std::string& name);
  void Remove(const std::string& name);
  Json& Winner() { return sources.front().Config(); }
  // The safetensors file and the sources as side files, in priority order.
  Generated Write(std::string rule, std::string what) const;
};

struct DraftOptions {
  int format = -1;  // -1: any
  int bits = -1;
  std::int64_t group_size = 0;  // 0: any
  int sources = 0;              // 0: any (1 or 2), else exactly
  bool flooded_zero = false;    // allow v1 zero 2^b (GPTQ-107 warning)
  bool plain_winner = false;    // the first source is plain (not config.json)
  int layers = 0;               // 0: any
};

// A valid checkpoint: one or two layers, dense tensors beside them, and one
// or two agreeing config sources (gptq_model.cc).
Draft MakeDraft(Rng& rng, const DraftOptions& o = {});

const LayerInfo& SomeLayer(const Draft& d, Rng& rng);

// Edits of one tensor of a draft.
std::uint64_t ElementSize(const std::string& dtype);
// Reshape a 2-D tensor to [rows, cols] keeping the first min(...) bytes of
// each row and padding with copies of the row's bytes.
void Resize2D(codec::TensorWithBytes* t, std::uint64_t rows, std::uint64_t cols);
void Resize1D(codec::TensorWithBytes* t, std::uint64_t n);
void SetI32(codec::TensorWithBytes* t, std::uint64_t index, std::int32_t v);

// ---- config sources (gptq_config.cc) ----------------------------------------

// The alias spellings of docs/gptq.md section 1.
inline const std::vector<std::string> kMethodKeys = {"method", "quant_method"};
inline const std::vector<std::string> kFormatKeys = {"format", "checkpoint_format", "version"};
inline const std::vector<std::string> kBitsKeys = {"bits", "w_bit", "wbits"};
inline const std::vector<std::string> kGroupKeys = {"group_size", "q_group_size"};

// s with each lower-case letter upper-cased at random ("version" is read
// case-insensitively).
std::string RandomCase(std::string s, Rng& rng);
// A config object for the draft's parameters, spelled at random.
Json MakeConfig(const Draft& d, Rng& rng, bool minimal = false);
Source PlainSource(std::string name, Json config);
// config.json holding config as quantization_config, among keys not read.
Source NestedSource(Json config, Rng& rng);
// A plain source (config file) for d's parameters.
Source RandomPlainSource(const Draft& d, Rng& rng);
// Erase every key of a group from a config.
void EraseGroup(Json& j, const std::vector<std::string>& keys);

// ---- violations by rule --------------------------------------------------------

// Rules -> builders, in the order GptqViolableRules lists them. A config
// rule's builder makes its own draft; a layer rule's builder gets one valid
// draft and one of its layers, drawn (MakeDraft, then SomeLayer) before it runs.
struct ConfigRule {
  const char* rule;
  Generated (*build)(const std::string& r, Rng& rng);
};
// What a layer rule's builder starts from.
struct LayerCase {
  Draft d;
  const LayerInfo* layer = nullptr;  // one of d.layers
};
struct LayerRule {
  const char* rule;
  Generated (*build)(const std::string& r, LayerCase& c, Rng& rng);
};
// The checks C1..C11 of docs/gptq.md section 3 (gptq_config_violations.cc).
std::span<const ConfigRule> ConfigRules();
// The checks L1..L10 of a layer (gptq_layer_violations.cc).
std::span<const LayerRule> LayerRules();

}  // namespace qd::gen::gptq_gen

#endif  // QUANTDIFF_GENERATORS_GPTQ_MODEL_H_
