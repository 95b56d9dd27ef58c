#include "harness/differ.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

namespace qd::harness {
namespace {

std::string Signature(std::string_view target, std::string_view kind,
                      std::string_view what) {
  return "DIFF:" + std::string(target) + ":" + std::string(kind) + ":" +
         std::string(what);
}

const qd::Finding* FirstError(const qd::Outcome& o) {
  for (const qd::Finding& f : o.findings) {
    if (f.severity == qd::Severity::kError) return &f;
  }
  return nullptr;
}

// A reader's decoded tensors seen as the plan that announced them.
class DecodedPlan final : public qd::TensorPlan {
 public:
  explicit DecodedPlan(const std::vector<qd::DecodedTensor>& tensors) : tensors_(tensors) {}
  std::size_t size() const override { return tensors_.size(); }
  std::string_view name(std::size_t i) const override { return tensors_[i].name; }
  std::span<const std::uint64_t> shape(std::size_t i) const override { return tensors_[i].shape; }

 private:
  const std::vector<qd::DecodedTensor>& tensors_;
};

std::string Hex32(float v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", std::bit_cast<std::uint32_t>(v));
  return buf;
}

}  // namespace

std::string Describe(const qd::Finding& f) {
  std::string s = f.rule + (f.severity == qd::Severity::kError ? " error" : " warning");
  if (!f.file.empty()) s += " file=" + f.file;
  if (!f.tensor.empty()) s += " tensor=" + f.tensor;
  if (!f.field.empty()) s += " field=" + f.field;
  if (f.byte_offset >= 0) s += " offset=" + std::to_string(f.byte_offset);
  if (f.row >= 0) s += " row=" + std::to_string(f.row);
  if (f.block >= 0) s += " block=" + std::to_string(f.block);
  if (f.element >= 0) s += " element=" + std::to_string(f.element);
  if (!f.message.empty()) s += ": " + f.message;
  return s;
}

std::optional<Divergence> CompareDetection(std::string_view codec_format,
                                           std::string_view oracle_format,
                                           std::string_view target) {
  if (codec_format == oracle_format) return std::nullopt;
  const std::string codec_name(codec_format);
  const std::string oracle_name(oracle_format);
  return Divergence{Signature(target, "detect", codec_name + "!=" + oracle_name),
                    "the codec detects a " + codec_name + " file, the oracle a " + oracle_name +
                        " file: each side's readers would check different rules"};
}

std::optional<Divergence> Compare(const qd::Outcome& codec,
                                  const qd::Outcome& oracle,
                                  std::string_view target) {
  const qd::Finding* codec_error = FirstError(codec);
  const qd::Finding* oracle_error = FirstError(oracle);
  if (codec.refused != oracle.refused) {
    const qd::Finding* refusing = codec.refused ? codec_error : oracle_error;
    return Divergence{
        Signature(target, "verdict", refusing ? refusing->rule : "no-rule"),
        std::string(codec.refused ? "codec refused, oracle accepted: "
                                  : "oracle refused, codec accepted: ") +
            (refusing ? Describe(*refusing) : "(no error finding)")};
  }
  // Every finding in order: the rule IDs and severities must match, then
  // every other field but the free-text message (oracles/rules.json,
  // finding_conventions "compared"): which config a CFG-* finding blames
  // (file) is as much a position as the tensor or the byte offset.
  const std::size_t n = std::max(codec.findings.size(), oracle.findings.size());
  for (std::size_t i = 0; i < n; ++i) {
    const qd::Finding* c = i < codec.findings.size() ? &codec.findings[i] : nullptr;
    const qd::Finding* o = i < oracle.findings.size() ? &oracle.findings[i] : nullptr;
    if (c == nullptr || o == nullptr || c->rule != o->rule || c->severity != o->severity) {
      const std::string cr = c ? c->rule : "none";
      const std::string orr = o ? o->rule : "none";
      return Divergence{Signature(target, "rule", cr + "!=" + orr),
                        "finding " + std::to_string(i) + ": codec " +
                            (c ? Describe(*c) : "none") + " | oracle " +
                            (o ? Describe(*o) : "none")};
    }
    if (c->file != o->file || c->tensor != o->tensor || c->field != o->field ||
        c->byte_offset != o->byte_offset || c->row != o->row ||
        c->block != o->block || c->element != o->element) {
      return Divergence{Signature(target, "position", c->rule),
                        "codec " + Describe(*c) + " | oracle " + Describe(*o)};
    }
  }
  if (codec.refused) return std::nullopt;
  if (auto d = ComparePlans(DecodedPlan(codec.tensors), DecodedPlan(oracle.tensors), target)) return d;
  for (std::size_t t = 0; t < codec.tensors.size(); ++t) {
    const qd::DecodedTensor& c = codec.tensors[t];
    const qd::DecodedTensor& o = oracle.tensors[t];
    if (c.values.size() != o.values.size()) {
      return Divergence{Signature(target, "bytes", "tensor-header"),
                        "tensor " + c.name + ShapeText(c.shape) + ": codec decoded " +
                            std::to_string(c.values.size()) + " values, oracle " +
                            std::to_string(o.values.size())};
    }
    if (auto d = CompareValues(c.values.data(), o.values.data(), c.values.size(), c.name, 0, target)) {
      return d;
    }
  }
  return std::nullopt;
}

std::optional<Divergence> ComparePlans(const qd::TensorPlan& codec, const qd::TensorPlan& oracle,
                                       std::string_view target) {
  if (codec.size() != oracle.size()) {
    return Divergence{Signature(target, "bytes", "tensor-count"),
                      "codec decoded " + std::to_string(codec.size()) + " tensors, oracle " +
                          std::to_string(oracle.size())};
  }
  for (std::size_t t = 0; t < codec.size(); ++t) {
    const std::span<const std::uint64_t> codec_shape = codec.shape(t);
    const std::span<const std::uint64_t> oracle_shape = oracle.shape(t);
    if (codec.name(t) != oracle.name(t) ||
        !std::equal(codec_shape.begin(), codec_shape.end(), oracle_shape.begin(), oracle_shape.end())) {
      return Divergence{Signature(target, "bytes", "tensor-header"),
                        "tensor " + std::to_string(t) + ": codec " + std::string(codec.name(t)) +
                            ShapeText(codec_shape) + " | oracle " + std::string(oracle.name(t)) +
                            ShapeText(oracle_shape)};
    }
  }
  return std::nullopt;
}

std::optional<Divergence> CompareValues(const float* codec, const float* oracle, std::size_t n,
                                        std::string_view name, std::uint64_t first,
                                        std::string_view target) {
  // Equal bits are the common case: memcmp finds a differing run fast, and
  // only then are the values looked at one by one (NaNs equal).
  if (n == 0 || std::memcmp(codec, oracle, n * sizeof(float)) == 0) return std::nullopt;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = codec[i];
    const float b = oracle[i];
    const bool same = (std::isnan(a) && std::isnan(b)) ||
                      std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
    if (!same) {
      return Divergence{Signature(target, "bytes", "value"),
                        "tensor " + std::string(name) + " element " + std::to_string(first + i) +
                            ": codec " + Hex32(a) + " oracle " + Hex32(b)};
    }
  }
  return std::nullopt;
}

std::string ShapeText(std::span<const std::uint64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    s += (i ? "," : "") + std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace qd::harness
