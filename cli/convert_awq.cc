// convert_awq.cc: `quantdiff convert` across GPTQ and AWQ and between AWQ
// GEMM and GEMV (docs/awq.md section 11). Each layer goes through the plain
// fields of codecs/awq_convert.cc; the file, its config and the checks that
// keep or refuse the result are cli/convert.cc's, shared with GPTQ -> GPTQ.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/common.h"
#include "cli/convert.h"
#include "codecs/awq.h"
#include "codecs/gptq.h"
#include "reports/escape.h"

namespace qd::cli {
namespace {

struct NamedTarget {
  const char* name;
  ConvertTarget target;
};
constexpr NamedTarget kTargets[] = {
    {"gptq", {false, qd::codec::GptqFormat::kV1, qd::codec::AwqFormat::kGemm}},
    {"gptq_v2", {false, qd::codec::GptqFormat::kV2, qd::codec::AwqFormat::kGemm}},
    {"gptq_p", {false, qd::codec::GptqFormat::kPlanar, qd::codec::AwqFormat::kGemm}},
    {"awq_gemm", {true, qd::codec::GptqFormat::kV1, qd::codec::AwqFormat::kGemm}},
    {"awq_gemv", {true, qd::codec::GptqFormat::kV1, qd::codec::AwqFormat::kGemv}},
};

// A layer as converted: its prefix, fields or refusal, its member tensors.
struct SourceLayer {
  std::string prefix;
  std::size_t qweight, qzeros, scales, g_idx;  // g_idx: kGptqNoTensor for AWQ
};

// Prints what the target cannot hold: the tensor, row and element the rule
// names (docs/awq.md section 11), then the rule and why.
int RefuseLayer(const SourceLayer& layer, const char* from, const ConvertTarget& target,
                const qd::codec::GptqPackError& e, GptqConversion* result) {
  std::string where = "layer " + layer.prefix;
  if (e.rule == "AWQ-201") {
    where = layer.prefix + "qzeros row " + std::to_string(e.row) + ", element " + std::to_string(e.column);
  } else if (e.what == "g_idx") {
    where = layer.prefix + "g_idx element " + std::to_string(e.column);
  }
  std::fprintf(stderr, "quantdiff convert: %s: %s %s (%s -> %s): %s; nothing written\n",
               qd::reports::ForTerminal(where).c_str(), e.rule.c_str(), e.what.c_str(), from,
               ConvertTargetName(target), qd::reports::ForTerminal(e.message).c_str());
  result->refusal = ConvertRefusal::kTargetCannotHold;
  return kExitFound;
}

int Refused(const std::string& path, const char* family, const char* why, GptqConversion* result) {
  std::fprintf(stderr, "quantdiff convert: %s %s %s; nothing written\n",
               qd::reports::ForTerminal(path).c_str(), why, family);
  result->refusal = ConvertRefusal::kInputRefused;
  return kExitFound;
}

// The layer's new tensors in place of its members: scales and qweight and
// qzeros rewritten (shapes of the target), g_idx dropped for AWQ and added
// after scales for GPTQ.
void PlaceLayer(const SourceLayer& layer, qd::codec::QuantTensors t, std::vector<TensorEdit>* edits) {
  (*edits)[layer.qweight].bytes = std::move(t.qweight);
  (*edits)[layer.qweight].shape = std::move(t.qweight_shape);
  (*edits)[layer.qzeros].bytes = std::move(t.qzeros);
  (*edits)[layer.qzeros].shape = std::move(t.qzeros_shape);
  (*edits)[layer.scales].bytes = std::move(t.scales);
  (*edits)[layer.scales].shape = std::move(t.scales_shape);
  if (layer.g_idx != qd::codec::kGptqNoTensor) (*edits)[layer.g_idx].drop = true;
  if (!t.g_idx.empty()) {
    qd::codec::TensorWithBytes g_idx;
    g_idx.spec = {layer.prefix + "g_idx", "I32", {t.g_idx.size() / 4}, t.g_idx.size()};
    g_idx.bytes = std::move(t.g_idx);
    (*edits)[layer.scales].after.push_back(std::move(g_idx));
  }
}

}  // namespace

bool ParseConvertTarget(const std::string& name, ConvertTarget* out) {
  for (const NamedTarget& t : kTargets) {
    if (name == t.name) {
      *out = t.target;
      return true;
    }
  }
  return false;
}

const char* ConvertTargetName(const ConvertTarget& target) {
  for (const NamedTarget& t : kTargets) {
    if (t.target.awq == target.awq &&
        (target.awq ? t.target.awq_format == target.awq_format : t.target.gptq == target.gptq)) {
      return t.name;
    }
  }
  return "?";
}

int ConvertQuantized(qd::ByteView bytes, const std::string& path,
                     const qd::harness::SideFiles& side_files, const ConvertTarget& target,
                     const std::string& out, const SideFilesBesideOut& beside_out,
                     GptqConversion* result, std::string* error) {
  const bool from_awq = qd::codec::ClaimsAwq(bytes);
  if (!from_awq && !target.awq) {
    return ConvertGptq(bytes, path, side_files, target.gptq, out, beside_out, result, error);
  }
  // Both readers' results are kept alive: the fields point into the file.
  qd::codec::GptqResult gptq;
  qd::codec::AwqResult awq;
  std::vector<SourceLayer> layers;
  std::vector<qd::codec::QuantFields> fields;
  const qd::codec::TensorTable* table = nullptr;
  std::string config_source;
  std::string from;
  qd::codec::GptqPackError e;
  if (from_awq) {
    awq = qd::codec::ReadAwq(bytes, path, side_files);
    PrintFindings(path, awq.findings);
    if (awq.refused) return Refused(path, "awq", "refused by the", result);
    from = std::string("awq_") + qd::codec::AwqFormatName(awq.format);
    for (const qd::codec::AwqLayer& l : awq.layers) {
      layers.push_back({l.prefix, l.qweight, l.qzeros, l.scales, qd::codec::kGptqNoTensor});
      fields.emplace_back();
      if (!qd::codec::FieldsOfAwq(qd::codec::ViewOf(awq, l), &fields.back(), &e)) {
        return RefuseLayer(layers.back(), from.c_str(), target, e, result);
      }
    }
    table = &awq.table;
    config_source = awq.config.source;
  } else {
    gptq = qd::codec::ReadGptq(bytes, path, side_files);
    PrintFindings(path, gptq.findings);
    if (gptq.refused) return Refused(path, "gptq", "refused by the", result);
    if (gptq.layers.empty()) return Refused(path, "GPTQ", "holds no", result);
    from = qd::codec::GptqFormatName(gptq.config.format);
    for (const qd::codec::GptqLayer& l : gptq.layers) {
      layers.push_back({l.prefix, l.qweight, l.qzeros, l.scales, l.g_idx});
      fields.emplace_back();
      if (!qd::codec::FieldsOfGptq(qd::codec::ViewOf(gptq, l), gptq.config.group_size, &fields.back(), &e)) {
        return RefuseLayer(layers.back(), from.c_str(), target, e, result);
      }
    }
    table = &gptq.table;
    config_source = gptq.config.source;
  }

  // A file's table: the container it was read from (one file is read).
  const qd::codec::Container& container = *table->container();
  std::vector<TensorEdit> edits(container.tensors.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    qd::codec::QuantTensors t;
    const bool ok = target.awq ? qd::codec::PackFieldsAsAwq(fields[i], target.awq_format, &t, &e)
                               : qd::codec::PackFieldsAsGptq(fields[i], target.gptq, &t, &e);
    if (!ok) return RefuseLayer(layers[i], from.c_str(), target, e, result);
    PlaceLayer(layers[i], std::move(t), &edits);
  }
  const qd::SideFile* winner = WinningSource(side_files, config_source);
  if (winner == nullptr) {
    *error = "the winning config source went missing";
    return kExitUsage;
  }
  const char* method = target.awq ? "awq" : "gptq";
  const char* format = target.awq ? qd::codec::AwqFormatName(target.awq_format)
                                   : qd::codec::GptqFormatName(target.gptq);
  const int verdict = KeepIfFaithful(
      {bytes, path, side_files, from_awq ? "awq" : "gptq"}, method,
      RewrittenFile(container, std::move(edits), target.awq ? nullptr : format),
      ConvertedConfig(*winner, method, format), out, beside_out, result, error);
  if (verdict != kExitOk) return verdict;
  result->from = from;
  result->layers = layers.size();
  return kExitOk;
}

}  // namespace qd::cli
