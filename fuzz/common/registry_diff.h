// registry_diff.h: the differential steps every file-level fuzz target runs
// through the format registry.
//
//   const RegistryReadings r = DiffThroughRegistry(*format, "pt_file", file, name, {});
//   // r.oracle is the reference reading, e.g. for per-kernel checks.
#ifndef QUANTDIFF_FUZZ_COMMON_REGISTRY_DIFF_H_
#define QUANTDIFF_FUZZ_COMMON_REGISTRY_DIFF_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz/common/fuzz_support.h"
#include "harness/differ.h"
#include "harness/registry.h"

namespace qd::fuzz {

// The registry's entry NAME; a build without it traps with
// DIFF:<target>:setup:no-format. Callers keep it in a static.
inline const qd::harness::FormatEntry& FormatOrTrap(std::string_view name, std::string_view target) {
  const qd::harness::FormatEntry* f = qd::harness::FindFormat(name);
  if (f == nullptr) Diverge("DIFF:" + std::string(target) + ":setup:no-format", "");
  return *f;
}

struct RegistryReadings {
  qd::Outcome codec;
  qd::Outcome oracle;
};

// 0. the codec and the oracle detect the same format for the file (whichever
//    it is: the target reads it as `format` regardless, as `--format` does);
// 1. codec_read and oracle_read agree (qd::harness::Compare: verdict, every
//    finding field but the message, every decoded tensor bit for bit);
// 2. codec_check (the rules alone, what `quantdiff check` runs) reports
//    exactly codec_read's findings, every field but the message.
// Any difference traps with DIFF:<target>:<kind>:<rule-or-part>.
inline RegistryReadings DiffThroughRegistry(const qd::harness::FormatEntry& format,
                                            std::string_view target, qd::ByteView file,
                                            const std::string& name,
                                            const qd::harness::SideFiles& side_files) {
  if (std::optional<qd::harness::Divergence> d = qd::harness::CompareDetection(
          qd::harness::DetectFormat(file, side_files).name,
          qd::harness::OracleDetectFormat(file, side_files).name, target)) {
    Diverge(d->signature, d->detail);
  }
  RegistryReadings r{format.codec_read(file, name, side_files),
                     format.oracle_read(file, name, side_files)};
  if (std::optional<qd::harness::Divergence> d = qd::harness::Compare(r.codec, r.oracle, target)) {
    Diverge(d->signature, "kernel=best: " + d->detail);
  }
  const std::string prefix = "DIFF:" + std::string(target) + ":check:";
  const qd::Outcome check = format.codec_check(file, name, side_files);
  if (check.refused != r.codec.refused || check.findings.size() != r.codec.findings.size()) {
    Diverge(prefix + (r.codec.refused ? "refused" : "accepted"),
            "codec_check " + std::to_string(check.findings.size()) + " findings, codec_read " +
                std::to_string(r.codec.findings.size()));
  }
  for (std::size_t i = 0; i < check.findings.size(); ++i) {
    const qd::Finding& a = check.findings[i];
    const qd::Finding& b = r.codec.findings[i];
    if (a.rule != b.rule || a.severity != b.severity || a.file != b.file || a.tensor != b.tensor ||
        a.field != b.field || a.byte_offset != b.byte_offset || a.row != b.row ||
        a.block != b.block || a.element != b.element) {
      Diverge(prefix + b.rule, "finding " + std::to_string(i) + ": codec_check " +
                                   qd::harness::Describe(a) + " | codec_read " +
                                   qd::harness::Describe(b));
    }
  }
  return r;
}

}  // namespace qd::fuzz

#endif  // QUANTDIFF_FUZZ_COMMON_REGISTRY_DIFF_H_
