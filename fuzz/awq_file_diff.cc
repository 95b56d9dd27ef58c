// awq_file_diff: a structure-aware differential target for AWQ files and
// their config sources (docs/awq.md).
//
// The input's last 8 bytes pick an instance of the registry's AWQ generator
// (valid or one rule broken, any seed; fuzz/common/awq_file_input.h); the
// leading bytes are ops that edit the written file and its config. In raw
// mode the input is config sources plus a file as they are. Then, through
// the registry's "awq" entry (fuzz/common/registry_diff.h): both sides detect
// the same format, codec_read and oracle_read agree (verdict, every finding
// field but the message, every decoded tensor bit for bit), and codec_check
// reports what codec_read reports.
//
// Signature on divergence: DIFF:awq_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/common/awq_file_input.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("awq");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:awq_file:setup:no-format", "");
    return f;
  }();
  const qd::fuzz::AwqCase c = qd::fuzz::AwqCaseFromInput(data, size);
  qd::fuzz::DiffThroughRegistry(*format, "awq_file", {c.file.data(), c.file.size()},
                                "input-awq.safetensors", c.configs);
  return 0;
}
