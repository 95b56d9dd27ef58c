#include "cli/decoded_output.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <exception>
#include <string_view>
#include <utility>

#include "cli/common.h"
#include "codecs/safetensors.h"
#include "reports/escape.h"

namespace qd::cli {
namespace {

// The safetensors format README's header limit (rule ST-002).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

qd::Finding OutputFinding(std::string rule, std::string output_name, std::string tensor,
                          std::string message) {
  qd::Finding f;
  f.rule = std::move(rule);
  f.severity = qd::Severity::kError;
  f.file = std::move(output_name);
  f.tensor = std::move(tensor);
  f.field = "name";
  f.message = std::move(message);
  return f;
}

}  // namespace

SafetensorsF32Sink::SafetensorsF32Sink(ByteWriter write, std::string output_name)
    : write_(std::move(write)), output_name_(std::move(output_name)) {}

std::optional<qd::Finding> BuildOutputHeader(const std::vector<qd::codec::TensorToWrite>& tensors,
                                             const qd::codec::MetadataList* metadata,
                                             const std::string& output_name, std::string* header) {
  // The names a safetensors header cannot hold, in the catalogue's order so
  // the finding is the one `check` would give the written file.
  for (const qd::codec::TensorToWrite& t : tensors) {
    if (qd::reports::ValidUtf8(t.name) != t.name) {
      return OutputFinding("ST-004", output_name, qd::reports::ValidUtf8(t.name),
                           "a tensor's name is not valid UTF-8, which a safetensors header "
                           "(JSON) cannot hold; nothing written");
    }
  }
  if (metadata != nullptr) {
    for (const auto& [key, value] : *metadata) {
      if (qd::reports::ValidUtf8(key) != key || qd::reports::ValidUtf8(value) != value) {
        qd::Finding f = OutputFinding("ST-004", output_name, qd::reports::ValidUtf8(key),
                                      "a __metadata__ key or value is not valid UTF-8, which a "
                                      "safetensors header (JSON) cannot hold; nothing written");
        f.field = "metadata";
        return f;
      }
    }
  }
  // Sorted views, not a set of nodes: 16 bytes a name (issue 9, section 3).
  std::vector<std::string_view> names;
  names.reserve(tensors.size());
  for (const qd::codec::TensorToWrite& t : tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  if (const auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end()) {
    return OutputFinding("ST-005", output_name, std::string(*twice),
                         "two tensors have this name; a safetensors header holds each key "
                         "once; nothing written");
  }
  if (std::binary_search(names.begin(), names.end(), std::string_view("__metadata__"))) {
    return OutputFinding("ST-006", output_name, "__metadata__",
                         "a tensor is named __metadata__, the key a safetensors header keeps "
                         "for string metadata; nothing written");
  }
  *header = qd::codec::BuildHeader(tensors, metadata);
  if (header->size() - 8 > kMaxHeaderBytes) {
    qd::Finding f = OutputFinding("ST-002", output_name, "",
                                  "the header would be " + std::to_string(header->size() - 8) +
                                      " bytes, over the safetensors limit of 100,000,000; "
                                      "nothing written");
    f.field = "header_length";
    return f;
  }
  return std::nullopt;
}

bool SafetensorsF32Sink::Plan(const std::vector<qd::TensorInfo>& tensors) {
  std::vector<qd::codec::TensorToWrite> specs;
  specs.reserve(tensors.size());
  for (const qd::TensorInfo& t : tensors) {
    std::uint64_t count = 1;
    for (std::uint64_t d : t.shape) count *= d;  // the codec checked it fits
    specs.push_back({t.name, "F32", t.shape, count * 4});
  }
  std::string header;
  finding_ = BuildOutputHeader(specs, nullptr, output_name_, &header);
  if (finding_) return false;
  tensors_ = tensors.size();
  return write_(header.data(), header.size());
}

bool SafetensorsF32Sink::Take(const qd::TensorChunk& chunk) {
  // The data section is the tensors' values back to back in plan order, so
  // chunks in stream order are written as they come.
  values_ += chunk.count;
  if constexpr (std::endian::native == std::endian::little) {
    return write_(chunk.values, chunk.count * sizeof(float));
  } else {
    std::vector<std::uint8_t> bytes(chunk.count * 4);
    for (std::size_t i = 0; i < chunk.count; ++i) {
      const std::uint32_t bits = std::bit_cast<std::uint32_t>(chunk.values[i]);
      for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<std::uint8_t>(bits >> (8 * b));
    }
    return write_(bytes.data(), bytes.size());
  }
}

std::optional<qd::Outcome> CheckVerbOutcome(qd::ByteView bytes, const std::string& name,
                                            const qd::harness::SideFiles& side_files,
                                            const qd::harness::FormatEntry* forced,
                                            const qd::harness::FormatEntry** format,
                                            std::string* error) {
  const qd::harness::FormatEntry& used = forced ? *forced : qd::harness::DetectFormat(bytes);
  if (format != nullptr) *format = &used;
  std::string reader_error;
  std::optional<qd::Outcome> outcome =
      SafeRead(used.codec_check, bytes, name, side_files, &reader_error);
  if (outcome) return outcome;
  *error = std::string(used.name) + " codec failed: " + reader_error;
  return std::nullopt;
}

bool SideFilesAfterWriting(const std::string& target, const qd::harness::SideFiles& pending,
                           qd::harness::SideFiles* out, std::string* error) {
  if (!FindSideFiles(target, std::nullopt, out, error)) return false;
  for (auto p = pending.rbegin(); p != pending.rend(); ++p) {
    auto same = std::find_if(out->begin(), out->end(),
                             [&](const qd::SideFile& s) { return s.name == p->name; });
    if (same != out->end()) {
      same->bytes = p->bytes;
    } else {
      out->insert(out->begin(), *p);
    }
  }
  return true;
}

int VerifyAsCheckWould(qd::ByteView bytes, const std::string& target,
                       const qd::harness::SideFiles& side_files, std::string* error) {
  const qd::harness::FormatEntry* format = nullptr;
  const std::optional<qd::Outcome> outcome =
      CheckVerbOutcome(bytes, target, side_files, nullptr, &format, error);
  if (!outcome) return kExitUsage;
  if (!outcome->refused) return kExitOk;
  PrintFindings(target, outcome->findings);
  std::fprintf(stderr,
               "quantdiff: %s would be refused by `quantdiff check` (read as %.*s, with the "
               "configs beside it); nothing written\n",
               qd::reports::ForTerminal(target).c_str(), static_cast<int>(format->name.size()),
               format->name.data());
  return kExitFound;
}

int VerifyWrittenAsCheckWould(const std::string& temporary, const std::string& target,
                              std::string* error, std::string* container_note) {
  InputFile written;
  qd::harness::SideFiles beside;
  if (!OpenInput(temporary, &written, error) || !SideFilesAfterWriting(target, {}, &beside, error)) {
    return kExitUsage;
  }
  const qd::ByteView bytes = written.View();
  if (container_note != nullptr && beside.empty()) {
    // A format whose readers need a quantize config (its files can break
    // the CFG rules: GPTQ owns them, AWQ runs them too) and none beside TARGET: the caller's input was never read as that
    // format (docs/pt.md 6.4), so the container is what it vouches for.
    const qd::harness::FormatEntry& detected = qd::harness::DetectFormat(bytes);
    if (detected.ReachesRule("CFG-003")) {
      const qd::harness::FormatEntry& container = *qd::harness::FindFormat("safetensors");
      const std::optional<qd::Outcome> outcome =
          CheckVerbOutcome(bytes, target, beside, &container, nullptr, error);
      if (!outcome) return kExitUsage;
      if (outcome->refused) {
        PrintFindings(target, outcome->findings);
        std::fprintf(stderr, "quantdiff: %s would be refused as a safetensors container; "
                     "nothing written\n", qd::reports::ForTerminal(target).c_str());
        return kExitFound;
      }
      *container_note = "read as " + std::string(detected.name) +
                        " by `quantdiff check`, which needs its quantize config beside it "
                        "(CFG-003 without one); checked as a safetensors container";
      return kExitOk;
    }
  }
  return VerifyAsCheckWould(bytes, target, beside, error);
}

}  // namespace qd::cli
