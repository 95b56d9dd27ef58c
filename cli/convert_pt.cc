// quantdiff convert IN.pt --to safetensors: the tensor table and the scalar
// values of a torch .pt/.bin file as a safetensors file (docs/pt.md section 13).
// The input is read by the .pt reader alone, which executes nothing
// (docs/pt.md section 4); only what it accepted is written.
#include "cli/convert_pt.h"

#include <bit>
#include <charconv>
#include <cstdio>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/decoded_output.h"
#include "cli/output_file.h"
#include "harness/registry.h"
#include "reports/escape.h"

namespace qd::cli {
namespace {

using qd::codec::PtKind;
using qd::codec::PtNode;

// docs/pt.md 4.4: values nest at most 64 deep; the reader refuses deeper
// ones, so this bound only keeps a cyclic value from recursing forever.
constexpr int kMaxValueDepth = 64;

std::string FloatText(double value) {
  if (value != value) return "nan";
  char buffer[64];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, r.ptr);
  // A float keeps a mark of being one: "2.0", not "2" (inf stays "inf").
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

// JSON_ITEM: the form inside an array (a str JSON-quoted).
std::optional<std::string> ValueText(const qd::codec::PtResult& read, std::uint32_t index,
                                     bool json_item, int depth) {
  if (depth > kMaxValueDepth) return std::nullopt;
  const PtNode& node = read.Node(index);
  switch (node.kind) {
    case PtKind::kStr:
      if (!json_item) return node.text;
      // An item that is not UTF-8 has no JSON form.
      if (qd::reports::ValidUtf8(node.text) != node.text) return std::nullopt;
      return nlohmann::json(node.text).dump();
    case PtKind::kInt:
      return std::to_string(node.integer);
    case PtKind::kFloat:
      return FloatText(node.real);
    case PtKind::kBool:
      return std::string(node.boolean ? "true" : "false");
    case PtKind::kTuple:
    case PtKind::kList:
    case PtKind::kSize: {
      std::string text = "[";
      for (std::size_t i = 0; i < node.items.size(); ++i) {
        const std::optional<std::string> item = ValueText(read, node.items[i], true, depth + 1);
        if (!item) return std::nullopt;
        text += (i == 0 ? "" : ", ") + *item;
      }
      return text + "]";
    }
    default:  // None, dict, tokens, storages, tensors inside values
      return std::nullopt;
  }
}

std::string_view KindName(PtKind kind) {
  switch (kind) {
    case PtKind::kNone: return "None";
    case PtKind::kDict: return "a dict";
    case PtKind::kToken: return "a global (dtype or class)";
    case PtKind::kStorage: return "a storage";
    case PtKind::kTensor: return "a tensor";
    default: return "a tuple or list holding another kind";
  }
}

}  // namespace

std::optional<std::string> PtValueAsMetadata(const qd::codec::PtResult& read, std::uint32_t node) {
  return ValueText(read, node, false, 0);
}

std::optional<qd::Finding> PlanPtConversion(const qd::codec::PtResult& read,
                                            const std::string& out, PtConversionPlan* plan) {
  for (const auto& [name, node] : read.values) {
    std::optional<std::string> text = PtValueAsMetadata(read, node);
    if (!text) {
      // ST-006: __metadata__ maps names to strings, and this value has no
      // string form convert stands behind (docs/pt.md 13.2).
      qd::Finding f;
      f.rule = "ST-006";
      f.severity = qd::Severity::kError;
      f.file = out;
      f.tensor = qd::reports::ValidUtf8(name);
      f.field = "metadata";
      f.message = "the entry is " + std::string(KindName(read.Node(node).kind)) +
                  "; __metadata__ holds strings, and convert writes only str, int, float, bool "
                  "and tuples or lists of them as one; nothing written";
      return f;
    }
    plan->metadata.emplace_back(name, std::move(*text));
  }
  std::vector<qd::codec::TensorToWrite> specs;
  specs.reserve(read.tensors.size());
  for (std::size_t i = 0; i < read.tensors.size(); ++i) {
    const qd::codec::PtTensor& t = read.TableTensor(i);
    specs.push_back({read.tensors[i].name, std::string(qd::codec::InfoOf(t.dtype).name), t.shape,
                     t.numel * qd::codec::PtItemSize(t.dtype)});
    plan->tensors.push_back(&t);
  }
  return BuildOutputHeader(specs, plan->metadata.empty() ? nullptr : &plan->metadata, out,
                           &plan->header);
}

int WritePtAsSafetensors(const qd::codec::PtResult& read, qd::ByteView bytes, const std::string& out,
                         const std::string& target, const std::vector<std::string>& inputs,
                         OutputFile* output, PtWritten* written, std::string* error) {
  PtConversionPlan plan;
  if (const std::optional<qd::Finding> refusal = PlanPtConversion(read, out, &plan)) {
    PrintFindings(out, {*refusal});
    return kExitFound;
  }
  // The header, then one tensor at a time: a contiguous little-endian view
  // straight from the mapping, any other materialised in C order (docs/pt.md
  // 5.3) into one buffer, so at most the largest such tensor is held.
  if (!output->Open(target, inputs, error)) return kExitUsage;
  output->Write(plan.header);
  std::vector<std::uint8_t> buffer;
  for (const qd::codec::PtTensor* t : plan.tensors) {
    const std::uint64_t size = t->numel * qd::codec::PtItemSize(t->dtype);
    if (qd::codec::PtIsContiguous(*t) && !t->big_endian &&
        std::endian::native == std::endian::little) {
      output->Write(bytes.data + t->begin, size);
    } else {
      buffer.resize(size);
      qd::codec::CopyPtTensorBytes(*t, buffer.data());
      output->Write(buffer.data(), size);
    }
    written->bytes += size;
  }
  written->tensors = plan.tensors.size();
  written->metadata = plan.metadata.size();
  return kExitOk;
}

int RunConvertPt(const std::string& path, const std::string& out) {
  std::string error;
  if (out == kStandardOutput) {
    return UsageError("convert", "--out - is not possible: the output is checked before it is kept");
  }
  if (!CheckOutputTarget(out, {path}, &error)) return IoError("convert", error);
  InputFile file;
  if (!OpenInput(path, &file, &error)) return IoError("convert", "cannot read " + error);
  const qd::ByteView bytes = file.View();
  const qd::harness::FormatEntry& pt = *qd::harness::FindFormat("pt");
  if (!pt.claims(bytes, {})) {  // a .pt is claimed by its bytes alone
    return UsageError("convert", path + " is not a torch .pt/.bin file (docs/pt.md 1.1); "
                                        "--to safetensors converts only those");
  }

  // The file as `check IN` reads it (PT- rules, then the bitsandbytes readers
  // on its tensor table: BNB- rules); a refusal writes nothing.
  const std::optional<qd::Outcome> checked = CheckVerbOutcome(bytes, path, {}, &pt, nullptr, &error);
  if (!checked) return IoError("convert", path + ": " + error);
  PrintFindings(path, checked->findings);
  const qd::codec::PtResult read = qd::codec::ReadPt(bytes, path);
  if (checked->refused || read.refused) {
    if (!checked->refused) PrintFindings(path, read.findings);
    std::fprintf(stderr, "quantdiff convert: %s refused by the pt codec; nothing written\n",
                 qd::reports::ForTerminal(path).c_str());
    return kExitFound;
  }
  OutputFile output;
  PtWritten written;
  const int wrote = WritePtAsSafetensors(read, bytes, out, out, {path}, &output, &written, &error);
  if (wrote == kExitUsage) return IoError("convert", error);
  if (wrote != kExitOk) return wrote;
  // What quantdiff writes, it accepts (issue 9 section 2). The input's
  // pages need not stay resident beside the output's (issue 9 section 3).
  file.ReleasePages();
  std::string note;
  const int verdict = VerifyWrittenAsCheckWould(output.temporary_path(), out, &error, &note);
  if (verdict == kExitUsage) return IoError("convert", error);
  if (verdict != kExitOk) return verdict;
  if (!output.Commit(&error)) return IoError("convert", error);
  if (!note.empty()) {
    std::fprintf(stderr, "quantdiff convert: note: %s is %s\n", qd::reports::ForTerminal(out).c_str(),
                 note.c_str());
  }
  std::fprintf(stderr,
               "quantdiff convert: %s [pt] -> %s [safetensors]: %zu tensors (%llu bytes) "
               "verbatim, %zu metadata entries\n",
               qd::reports::ForTerminal(path).c_str(), qd::reports::ForTerminal(out).c_str(),
               written.tensors, static_cast<unsigned long long>(written.bytes), written.metadata);
  return kExitOk;
}

}  // namespace qd::cli
