// fp8.cc: the FP8 reference reader, step by step as docs/fp8.md writes it:
// detection (section 2), the config (section 3), codes from their bit
// fields (section 4), checks L1..L5 (section 5), one division per weight
// (section 6), the decoded tensors (section 7).
#include "oracles/fp8.h"

#include <cmath>
#include <string_view>

#include "oracles/bytes.h"
#include "oracles/finding.h"
#include "oracles/json.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

// Section 4's table of subtypes: field widths, bias, and which codes are
// NaN or infinite ("fn": all exponent and mantissa bits set is NaN, no
// infinity; "ieee": exponent all ones is infinity (mantissa 0) or NaN;
// "fnuz": only 0x80 (negative zero's pattern) is NaN; "e8m0": 0xFF is NaN).
struct SubtypeSpec {
  const char* name;
  const char* dtype;  // the safetensors dtype that stores it
  int exponent_bits;
  int mantissa_bits;
  int bias;
  const char* specials;
};

const SubtypeSpec kSubtypes[] = {
    {"float8_e4m3fn", "F8_E4M3", 4, 3, 7, "fn"},
    {"float8_e4m3fnuz", "F8_E4M3", 4, 3, 8, "fnuz"},
    {"float8_e5m2", "F8_E5M2", 5, 2, 15, "ieee"},
    {"float8_e5m2fnuz", "F8_E5M2", 5, 2, 16, "fnuz"},
    {"float8_e8m0fnu", "F8_E8M0", 8, 0, 127, "e8m0"},
};

const SubtypeSpec* FindSubtype(const std::string& name) {
  for (const SubtypeSpec& s : kSubtypes) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

// The config's format aliases (section 3) and the canonical names they mean.
const char* const kAliases[][2] = {
    {"e4m3", "float8_e4m3fn"},         {"e4m3fn", "float8_e4m3fn"},
    {"float8_e4m3", "float8_e4m3fn"},  {"float8_e4m3fn", "float8_e4m3fn"},
    {"e4m3fnuz", "float8_e4m3fnuz"},   {"float8_e4m3fnuz", "float8_e4m3fnuz"},
    {"e5m2", "float8_e5m2"},           {"float8_e5m2", "float8_e5m2"},
    {"e5m2fnuz", "float8_e5m2fnuz"},   {"float8_e5m2fnuz", "float8_e5m2fnuz"},
    {"e8m0", "float8_e8m0fnu"},        {"e8m0fnu", "float8_e8m0fnu"},
    {"float8_e8m0", "float8_e8m0fnu"}, {"float8_e8m0fnu", "float8_e8m0fnu"},
};

std::string AsciiLower(std::string_view text) {
  std::string out;
  for (char c : text) out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
  return out;
}


// Section 2: the layer prefix of a tensor name ending in SUFFIX, the prefix
// being empty or ending in a dot.
bool LayerPrefix(const std::string& name, const std::string& suffix, std::string* prefix) {
  if (!name.ends_with(suffix)) return false;
  *prefix = name.substr(0, name.size() - suffix.size());
  return prefix->empty() || prefix->back() == '.';
}

bool IsFp8Dtype(const std::string& dtype) {
  return dtype == "F8_E4M3" || dtype == "F8_E5M2" || dtype == "F8_E8M0";
}

struct Settings {
  std::string subtype;  // canonical name, or empty: follow the weight dtype
  std::string method;   // "tensor", "row", "block", or empty
  std::uint64_t block_rows = 0;
  std::uint64_t block_cols = 0;
};

class Checker {
 public:
  Checker(qd::Outcome* outcome, const std::string& file) : outcome_(outcome), file_(file) {}

  bool Fail(const char* rule, const std::string& file, const std::string& tensor, const char* field,
            std::int64_t offset, const std::string& message, std::int64_t row = -1,
            std::int64_t block = -1, std::int64_t element = -1) {
    qd::Finding f = NewFinding(rule, qd::Severity::kError, file, tensor, field, offset, message);
    f.row = row;
    f.block = block;
    f.element = element;
    outcome_->findings.push_back(f);
    outcome_->refused = true;
    return false;
  }
  void Warn(const char* rule, const std::string& tensor, const char* field, const std::string& message) {
    outcome_->findings.push_back(NewFinding(rule, qd::Severity::kWarning, file_, tensor, field, 8, message));
  }
  bool LayerFail(const char* rule, const std::string& tensor, const char* field, const std::string& message) {
    return Fail(rule, file_, tensor, field, 8, message);
  }
  const std::string& file() const { return file_; }

 private:
  qd::Outcome* outcome_;
  const std::string& file_;
};

// Section 3 on one config object (node OBJECT of DOC) of source NAME.
bool ReadConfigObject(const JsonDocument& doc, std::uint32_t object, const std::string& name,
                      Checker& check, Settings* settings) {
  auto member = [&](const char* key) -> std::uint32_t {
    const std::uint32_t node = doc.FindMember(object, key);
    if (node == kNoNode || doc.nodes[node].kind == JsonKind::kNull) return kNoNode;
    return node;
  };
  auto string_of = [&](std::uint32_t node, std::string* out) {
    if (doc.nodes[node].kind != JsonKind::kString) return false;
    *out = AsciiLower(doc.Text(node));
    return true;
  };
  auto config_error = [&](const char* field, const std::string& message) {
    return check.Fail("FP8-001", name, "", field, -1, message);
  };
  std::string text;
  // K1, K2: method, then quant_method, say fp8 when present.
  for (const char* key : {"method", "quant_method"}) {
    const std::uint32_t node = member(key);
    if (node == kNoNode) continue;
    if (!string_of(node, &text) || text != "fp8") return config_error(key, std::string(key) + " is not \"fp8\"");
  }
  // K3: format (else checkpoint_format) names an FP8 subtype, or fp8 / "".
  const char* format_key = "format";
  std::uint32_t format = member("format");
  if (format == kNoNode) {
    format_key = "checkpoint_format";
    format = member("checkpoint_format");
  }
  if (format != kNoNode) {
    if (!string_of(format, &text)) return config_error(format_key, "the format is not a string");
    if (!text.empty() && text != "fp8") {
      for (const auto& alias : kAliases) {
        if (text == alias[0]) settings->subtype = alias[1];
      }
      if (settings->subtype.empty()) return config_error(format_key, "format " + text + " is not an FP8 subtype");
    }
  }
  // K4: weight_scale_method.
  const std::uint32_t method = member("weight_scale_method");
  if (method != kNoNode) {
    if (!string_of(method, &text) || (text != "tensor" && text != "row" && text != "block")) {
      return config_error("weight_scale_method", "weight_scale_method is not tensor, row or block");
    }
    settings->method = text;
  }
  // K5: weight_block_size is [rows, cols], integers 1 .. 2^31 - 1.
  const std::uint32_t block = member("weight_block_size");
  if (block != kNoNode) {
    std::uint64_t values[2] = {0, 0};
    bool ok = doc.nodes[block].kind == JsonKind::kArray && doc.nodes[block].child_count == 2;
    std::uint32_t item = ok ? doc.nodes[block].first_child : kNoNode;
    for (int i = 0; ok && i < 2; ++i) {
      ok = doc.nodes[item].kind == JsonKind::kNumber && JsonToUint64(doc, item, &values[i]) &&
           values[i] >= 1 && values[i] <= 2147483647u;
      item = doc.nodes[item].next_sibling;
    }
    if (!ok) return config_error("weight_block_size", "weight_block_size is not two integers in 1..2^31-1");
    settings->block_rows = values[0];
    settings->block_cols = values[1];
  }
  // K6: weight_scale_semantics is inverse.
  const std::uint32_t semantics = member("weight_scale_semantics");
  if (semantics != kNoNode && (!string_of(semantics, &text) || text != "inverse")) {
    return config_error("weight_scale_semantics", "weight_scale_semantics is not \"inverse\"");
  }
  // K7: a block method needs its block size.
  if (settings->method == "block" && settings->block_rows == 0) {
    return config_error("weight_block_size", "weight_scale_method is block and weight_block_size is missing");
  }
  return true;
}

// Section 3, K8 CFG-010: a later source OTHER disagrees with the winner W
// when it gives a subtype, a weight_scale_method or a weight_block_size
// (checked in that order) that W does not give alike. Sets *field and
// *detail for the first such key.
bool Disagree(const Settings& w, const Settings& other, const char** field, std::string* detail) {
  auto shown = [](const std::string& v) { return v.empty() ? std::string("none") : v; };
  auto block = [](const Settings& s) {
    return s.block_rows == 0 ? std::string()
                             : "[" + std::to_string(s.block_rows) + ", " + std::to_string(s.block_cols) + "]";
  };
  std::string mine, theirs;
  if (!other.subtype.empty() && other.subtype != w.subtype) {
    *field = "format";
    mine = w.subtype;
    theirs = other.subtype;
  } else if (!other.method.empty() && other.method != w.method) {
    *field = "weight_scale_method";
    mine = w.method;
    theirs = other.method;
  } else if (other.block_rows != 0 && block(other) != block(w)) {
    *field = "weight_block_size";
    mine = block(w);
    theirs = block(other);
  } else {
    return false;
  }
  *detail = shown(mine) + " against " + shown(theirs);
  return true;
}

// Section 3: every source in priority order through K0..K7 (a config.json
// without quantization_config is not a source); the first is the config,
// and K8 compares each later one with it.
bool ReadConfig(const std::vector<qd::SideFile>& configs, Checker& check, Settings* settings) {
  std::vector<Settings> sources;
  std::vector<std::string> names;
  for (const qd::SideFile& side : configs) {
    JsonDocument doc;
    JsonError error;
    std::string duplicate;
    if (!ParseStrictJsonObject(side.bytes.data(), side.bytes.size(), &doc, &error) ||
        FindDuplicateKey(doc, &duplicate)) {
      return check.Fail("FP8-001", side.name, "", "config", -1, "the config is not strict JSON with an object");
    }
    std::uint32_t object = 0;
    const std::size_t slash = side.name.rfind('/');
    const std::string base = slash == std::string::npos ? side.name : side.name.substr(slash + 1);
    if (base == "config.json") {
      object = doc.FindMember(0, "quantization_config");
      if (object == kNoNode || doc.nodes[object].kind == JsonKind::kNull) continue;
      if (doc.nodes[object].kind != JsonKind::kObject) {
        return check.Fail("FP8-001", side.name, "", "quantization_config", -1,
                          "quantization_config is not an object");
      }
    }
    Settings source;
    if (!ReadConfigObject(doc, object, side.name, check, &source)) return false;
    sources.push_back(source);
    names.push_back(side.name);
  }
  if (sources.empty()) return true;
  *settings = sources[0];
  for (std::size_t i = 1; i < sources.size(); ++i) {
    const char* field = nullptr;
    std::string detail;
    if (Disagree(sources[0], sources[i], &field, &detail)) {
      return check.Fail("CFG-010", names[0], "", field, -1,
                        std::string("the config sources disagree on ") + field + ": " + detail + " in " + names[i]);
    }
  }
  return true;
}

const TableTensor* Named(const MergedTable& table, const std::string& name) {
  for (const TableTensor& t : table.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

struct Layer {
  std::string prefix;
  const TableTensor* weight = nullptr;
  const TableTensor* scale = nullptr;
  const SubtypeSpec* subtype = nullptr;
  std::uint64_t n = 0, k = 0;
};

std::uint64_t RoundUpDiv(std::uint64_t a, std::uint64_t b) { return (a % b == 0) ? a / b : a / b + 1; }

float ScaleAt(const TableTensor& scale, std::uint64_t i) { return FloatFromBits(LoadU32(scale.data + 4 * i)); }

// Section 5, L1..L5.
bool CheckLayer(const MergedTable& table, const Settings& settings, Checker& check, Layer* layer) {
  const std::string& p = layer->prefix;
  const TableTensor* weight = Named(table, p + "weight");
  const TableTensor* scale = Named(table, p + "weight_scale_inv");
  const TableTensor* bias = Named(table, p + "bias");
  if (weight == nullptr) return check.LayerFail("FP8-002", p + "weight_scale_inv", "weight", "no weight");
  if (scale == nullptr) return check.LayerFail("FP8-002", p + "weight", "weight_scale_inv", "no weight_scale_inv");
  // L2: dtypes.
  if (!IsFp8Dtype(weight->dtype)) return check.LayerFail("FP8-003", weight->name, "dtype", "weight not FP8");
  std::string subtype = settings.subtype;
  if (subtype.empty()) {
    subtype = weight->dtype == "F8_E4M3" ? "float8_e4m3fn" : weight->dtype == "F8_E5M2" ? "float8_e5m2"
                                                                                        : "float8_e8m0fnu";
  }
  layer->subtype = FindSubtype(subtype);
  if (weight->dtype != layer->subtype->dtype) {
    return check.LayerFail("FP8-003", weight->name, "dtype", "weight dtype is not the config's format");
  }
  if (scale->dtype != "F32") return check.LayerFail("FP8-003", scale->name, "dtype", "weight_scale_inv not F32");
  if (bias != nullptr && bias->dtype != "F16" && bias->dtype != "BF16" && bias->dtype != "F32") {
    return check.LayerFail("FP8-003", bias->name, "dtype", "bias not F16, BF16 or F32");
  }
  // L3: shapes.
  if (weight->shape.size() != 2) return check.LayerFail("FP8-004", weight->name, "shape", "weight not rank 2");
  const std::uint64_t n = weight->shape[0];
  const std::uint64_t k = weight->shape[1];
  if (bias != nullptr && (bias->shape.size() != 1 || bias->shape[0] != n)) {
    return check.LayerFail("FP8-004", bias->name, "shape", "bias not [N]");
  }
  if (scale->shape.size() > 2) return check.LayerFail("FP8-004", scale->name, "shape", "scale rank above 2");
  const char* kind = scale->shape.empty() ? "tensor" : scale->shape.size() == 1 ? "row" : "block";
  if (!settings.method.empty() && settings.method != kind) {
    return check.LayerFail("FP8-004", scale->name, "shape", "scale shape is not the config's weight_scale_method");
  }
  if (scale->shape.size() == 1 && scale->shape[0] != n) {
    return check.LayerFail("FP8-004", scale->name, "shape", "scale not [N]");
  }
  if (scale->shape.size() == 2) {
    if (settings.block_rows == 0) {
      return check.LayerFail("FP8-005", scale->name, "weight_block_size", "block scale without a block size");
    }
    if (scale->shape[0] != RoundUpDiv(n, settings.block_rows) ||
        scale->shape[1] != RoundUpDiv(k, settings.block_cols)) {
      return check.LayerFail("FP8-004", scale->name, "shape", "scale not [ceil(N/br), ceil(K/bc)]");
    }
    if (n % settings.block_rows != 0 || k % settings.block_cols != 0) {
      check.Warn("FP8-101", scale->name, "weight_block_size", "block size does not divide the weight");
    }
  }
  // L4: inverse scales finite and non-zero.
  for (std::uint64_t i = 0; i < scale->element_count; ++i) {
    const float v = ScaleAt(*scale, i);
    if (!std::isnan(v) && !std::isinf(v) && v != 0.0f) continue;
    std::int64_t row = -1, block = -1;
    if (scale->shape.size() == 1) row = static_cast<std::int64_t>(i);
    if (scale->shape.size() == 2) {
      row = static_cast<std::int64_t>(i / scale->shape[1]);
      block = static_cast<std::int64_t>(i % scale->shape[1]);
    }
    return check.Fail("FP8-006", check.file(), scale->name, "weight_scale_inv",
                      static_cast<std::int64_t>(scale->data_start + scale->begin + 4 * i),
                      "inverse scale zero or not finite", row, block);
  }
  // L5: no NaN or infinite code.
  for (std::uint64_t i = 0; i < weight->element_count; ++i) {
    float value;
    bool is_nan, is_infinite;
    DecodeFp8Code(subtype, weight->data[i], &value, &is_nan, &is_infinite);
    if (!is_nan && !is_infinite) continue;
    return check.Fail("FP8-007", check.file(), weight->name, "weight",
                      static_cast<std::int64_t>(weight->data_start + weight->begin + i),
                      "a NaN or infinite code", static_cast<std::int64_t>(i / k), -1,
                      static_cast<std::int64_t>(i % k));
  }
  layer->weight = weight;
  layer->scale = scale;
  layer->n = n;
  layer->k = k;
  return true;
}

// Section 6 for row R of LAYER: out[k] = fl32(value(code) / inverse scale).
void DecodeRow(const Layer& layer, const Settings& settings, std::uint64_t r, float* out) {
  for (std::uint64_t c = 0; c < layer.k; ++c) {
    float value;
    bool is_nan, is_infinite;
    DecodeFp8Code(layer.subtype->name, layer.weight->data[r * layer.k + c], &value, &is_nan, &is_infinite);
    float inverse;
    if (layer.scale->shape.empty()) {
      inverse = ScaleAt(*layer.scale, 0);
    } else if (layer.scale->shape.size() == 1) {
      inverse = ScaleAt(*layer.scale, r);
    } else {
      inverse = ScaleAt(*layer.scale, (r / settings.block_rows) * layer.scale->shape[1] + c / settings.block_cols);
    }
    out[c] = value / inverse;
  }
}

}  // namespace

bool DecodeFp8Code(const std::string& subtype, std::uint8_t code, float* value, bool* is_nan,
                   bool* is_infinite) {
  const SubtypeSpec* spec = FindSubtype(subtype);
  if (spec == nullptr) return false;
  const std::string specials = spec->specials;
  const int all_ones = (1 << spec->exponent_bits) - 1;
  const int sign = specials == "e8m0" ? 0 : code >> 7;
  const int exponent = (code >> spec->mantissa_bits) & all_ones;
  const int mantissa = code & ((1 << spec->mantissa_bits) - 1);
  *is_nan = false;
  *is_infinite = false;
  if (specials == "fn") *is_nan = exponent == all_ones && mantissa == (1 << spec->mantissa_bits) - 1;
  if (specials == "ieee") {
    *is_infinite = exponent == all_ones && mantissa == 0;
    *is_nan = exponent == all_ones && mantissa != 0;
  }
  if (specials == "fnuz") *is_nan = code == 0x80;
  if (specials == "e8m0") *is_nan = code == 0xFF;
  if (*is_nan) {
    *value = std::nanf("");
    return true;
  }
  if (*is_infinite) {
    *value = sign ? -INFINITY : INFINITY;
    return true;
  }
  double magnitude;
  if (specials == "e8m0") {
    magnitude = std::ldexp(1.0, exponent - spec->bias);  // 2^(e - 127), no mantissa
  } else if (exponent == 0) {
    // Subnormal: 0.m x 2^(1 - bias).
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - spec->bias - spec->mantissa_bits);
  } else {
    // Normal: 1.m x 2^(e - bias).
    const int significand = (1 << spec->mantissa_bits) + mantissa;
    magnitude = std::ldexp(static_cast<double>(significand), exponent - spec->bias - spec->mantissa_bits);
  }
  *value = static_cast<float>(sign ? -magnitude : magnitude);  // exact: every FP8 value is a binary32
  return true;
}

bool StreamFp8Table(const MergedTable& table, const std::string& file_name,
                    const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                    qd::TensorSink& sink) {
  Checker check(outcome, file_name);
  Settings settings;
  if (!ReadConfig(configs, check, &settings)) return false;
  // Section 2: a prefix per weight_scale_inv, and per FP8-typed weight, in
  // the storage order of the first member met.
  std::vector<Layer> layers;
  for (const TableTensor& t : table.tensors) {
    std::string prefix;
    bool member = LayerPrefix(t.name, "weight_scale_inv", &prefix);
    if (!member && IsFp8Dtype(t.dtype)) member = LayerPrefix(t.name, "weight", &prefix);
    if (!member) continue;
    bool known = false;
    for (const Layer& l : layers) known = known || l.prefix == prefix;
    if (!known) layers.push_back(Layer{prefix});
  }
  for (Layer& layer : layers) {
    if (!CheckLayer(table, settings, check, &layer)) return false;
  }
  // Section 7.
  std::vector<qd::TensorInfo> plan;
  std::vector<const TableTensor*> order;
  std::vector<const Layer*> layer_of;
  for (const TableTensor& t : table.tensors) {
    const Layer* as_weight = nullptr;
    bool is_scale = false;
    for (const Layer& l : layers) {
      if (l.weight == &t) as_weight = &l;
      if (l.scale == &t) is_scale = true;
    }
    if (as_weight != nullptr) {
      plan.push_back({as_weight->prefix + "weight", {as_weight->n, as_weight->k}});
    } else if (!is_scale && IsFloatDtype(t.dtype)) {
      plan.push_back({t.name, t.shape});
    } else {
      continue;
    }
    order.push_back(&t);
    layer_of.push_back(as_weight);
  }
  if (!sink.Plan(plan)) return true;
  for (std::size_t i = 0; i < order.size(); ++i) {
    bool more;
    if (layer_of[i] == nullptr) {
      more = StreamFloatElements(order[i]->dtype, order[i]->data, order[i]->element_count, i, sink);
    } else {
      const Layer& l = *layer_of[i];
      more = StreamRows(sink, i, l.n, l.k, [&](std::uint64_t first, std::uint64_t count, float* out) {
        for (std::uint64_t r = first; r < first + count; ++r) DecodeRow(l, settings, r, out + (r - first) * l.k);
      });
    }
    if (!more) break;
  }
  return true;
}

bool EncodeFp8Codes(const std::string& subtype, const std::vector<float>& xs,
                    std::vector<std::uint8_t>* codes) {
  const SubtypeSpec* spec = FindSubtype(subtype);
  if (spec == nullptr || std::string(spec->specials) == "e8m0") return false;
  // Every code's value; the largest finite one bounds the clamp.
  float values[256];
  bool finite[256];
  double largest = 0.0;
  for (int c = 0; c < 256; ++c) {
    bool is_nan, is_infinite;
    DecodeFp8Code(subtype, static_cast<std::uint8_t>(c), &values[c], &is_nan, &is_infinite);
    finite[c] = !is_nan && !is_infinite;
    if (finite[c] && values[c] > largest) largest = values[c];
  }
  codes->clear();
  for (const float x : xs) {
    if (std::isnan(x)) {
      int nan_code = 0;
      while (finite[nan_code] || std::isinf(values[nan_code])) ++nan_code;
      codes->push_back(static_cast<std::uint8_t>(nan_code));
      continue;
    }
    double target = x;
    if (target > largest) target = largest;
    if (target < -largest) target = -largest;
    // The nearest finite code; on a tie the even mantissa field (bit 0 of
    // the code for every encoded subtype), then the zero of x's sign.
    int best = -1;
    double best_distance = 0.0;
    for (int c = 0; c < 256; ++c) {
      if (!finite[c]) continue;
      const double distance = std::fabs(static_cast<double>(values[c]) - target);
      bool better = best < 0 || distance < best_distance;
      if (!better && distance == best_distance) {
        const bool c_even = (c & 1) == 0, best_even = (best & 1) == 0;
        if (c_even != best_even) {
          better = c_even;
        } else {
          better = std::signbit(values[c]) == std::signbit(x) && std::signbit(values[best]) != std::signbit(x);
        }
      }
      if (better) {
        best = c;
        best_distance = distance;
      }
    }
    codes->push_back(static_cast<std::uint8_t>(best));
  }
  return true;
}

qd::Outcome StreamFp8File(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;
  StreamFp8Table(TableOfFile(file, std::move(container)), file_name, configs, &outcome, sink);
  return outcome;
}

qd::Outcome ReadFp8File(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamFp8File(file, file_name, configs, sink); });
}

bool IsFp8File(const ClaimInput& input) {
  const MergedTable* table = input.Get();
  return table != nullptr && HasFp8Layer(*table);
}

bool HasFp8Layer(const MergedTable& table) {
  for (const TableTensor& t : table.tensors) {
    std::string prefix;
    if (LayerPrefix(t.name, "weight_scale_inv", &prefix)) return true;
  }
  return false;
}

}  // namespace qd::oracle
