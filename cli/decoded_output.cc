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

namespace {

// The names a safetensors header cannot hold, in the catalogue's order so
// the finding is the one `check` would give the written file: COUNT tensor
// names, NAME_OF(i) the i-th, and the metadata.
template <class NameOf>
std::optional<qd::Finding> UnwritableNameFinding(std::size_t count, NameOf name_of,
                                                 const qd::codec::MetadataList* metadata,
                                                 const std::string& output_name) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::string_view name = name_of(i);
    if (qd::reports::ValidUtf8(name) != name) {
      return OutputFinding("ST-004", output_name, qd::reports::ValidUtf8(name),
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
  // Tensor numbers sorted by name, not a set of name copies: 4 bytes a
  // name (issue 9, section 3).
  std::vector<std::uint32_t> by_name(count);
  for (std::size_t i = 0; i < count; ++i) by_name[i] = static_cast<std::uint32_t>(i);
  // A merge sort: introsort degrades to heapsort on names like t0..t999999
  // (eight times slower, issue 9 section 3).
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return name_of(a) < name_of(b); });
  const auto twice = std::adjacent_find(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
    return name_of(a) == name_of(b);
  });
  if (twice != by_name.end()) {
    return OutputFinding("ST-005", output_name, std::string(name_of(*twice)),
                         "two tensors have this name; a safetensors header holds each key "
                         "once; nothing written");
  }
  const auto reserved = std::lower_bound(
      by_name.begin(), by_name.end(), std::string_view("__metadata__"),
      [&](std::uint32_t a, std::string_view key) { return name_of(a) < key; });
  if (reserved != by_name.end() && name_of(*reserved) == "__metadata__") {
    return OutputFinding("ST-006", output_name, "__metadata__",
                         "a tensor is named __metadata__, the key a safetensors header keeps "
                         "for string metadata; nothing written");
  }
  return std::nullopt;
}

// ST-002 for a header of PADDED_LENGTH bytes (the length prefix's value).
std::optional<qd::Finding> HeaderLengthFinding(std::uint64_t padded_length,
                                               const std::string& output_name) {
  if (padded_length <= kMaxHeaderBytes) return std::nullopt;
  qd::Finding f = OutputFinding("ST-002", output_name, "",
                                "the header would be " + std::to_string(padded_length) +
                                    " bytes, over the safetensors limit of 100,000,000; "
                                    "nothing written");
  f.field = "header_length";
  return f;
}

}  // namespace

std::optional<qd::Finding> BuildOutputHeader(const std::vector<qd::codec::TensorToWrite>& tensors,
                                             const qd::codec::MetadataList* metadata,
                                             const std::string& output_name, std::string* header) {
  if (std::optional<qd::Finding> f = UnwritableNameFinding(
          tensors.size(), [&](std::size_t i) { return std::string_view(tensors[i].name); },
          metadata, output_name)) {
    return f;
  }
  *header = qd::codec::BuildHeader(tensors, metadata);
  return HeaderLengthFinding(header->size() - 8, output_name);
}

bool SafetensorsF32Sink::Plan(const qd::TensorPlan& tensors) {
  finding_ = UnwritableNameFinding(
      tensors.size(), [&](std::size_t i) { return tensors.name(i); }, nullptr, output_name_);
  if (finding_) return false;
  // The names are distinct and there is no metadata, so the header is
  // BuildHeader's text member by member in plan order; it is written in
  // pieces, never held whole (issue 9, section 3: a plan of 1M tiny
  // tensors made a 60 MB header, built in memory with its index beside it).
  // MEMBER(i, offset, out) appends member i, its data at OFFSET.
  auto member = [&](std::size_t i, std::uint64_t offset, std::string* out) {
    std::uint64_t count = 1;
    for (std::uint64_t d : tensors.shape(i)) count *= d;  // the codec checked it fits
    if (i != 0) out->push_back(',');
    *out += qd::codec::HeaderKeyJson(tensors.name(i));
    out->push_back(':');
    qd::codec::AppendHeaderEntryJson(out, "F32", tensors.shape(i), offset, offset + 4 * count);
    return 4 * count;
  };
  std::string piece;
  std::uint64_t text_size = 2;  // the braces
  for (std::uint64_t i = 0, offset = 0; i < tensors.size(); ++i) {
    piece.clear();
    offset += member(i, offset, &piece);
    text_size += piece.size();
  }
  const std::uint64_t padded = text_size + (8 - text_size % 8) % 8;  // ST-102 padding
  finding_ = HeaderLengthFinding(padded, output_name_);
  if (finding_) return false;
  tensors_ = tensors.size();
  constexpr std::size_t kPieceBytes = std::size_t{1} << 20;
  piece.clear();
  for (int b = 0; b < 8; ++b) piece.push_back(static_cast<char>((padded >> (8 * b)) & 0xff));
  piece.push_back('{');
  for (std::uint64_t i = 0, offset = 0; i < tensors.size(); ++i) {
    offset += member(i, offset, &piece);
    if (piece.size() >= kPieceBytes) {
      if (!write_(piece.data(), piece.size())) return false;
      piece.clear();
    }
  }
  piece.push_back('}');
  piece.append(padded - text_size, ' ');
  return write_(piece.data(), piece.size());
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
  const qd::harness::FormatEntry& used = forced ? *forced : qd::harness::DetectFormat(bytes, side_files);
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
    const qd::harness::FormatEntry& detected = qd::harness::DetectFormat(bytes, beside);
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
