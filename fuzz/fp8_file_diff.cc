// fp8_file_diff: a structure-aware differential target for FP8 weight files
// and their config sources (docs/fp8.md).
//
// The input's last 8 bytes pick an instance of the registry's FP8 generator
// (valid or one rule broken, any seed; fuzz/common/fp8_file_input.h); the
// leading bytes edit the written file from its end, where its codes and
// inverse scales lie. In raw mode the input is config sources plus a file as
// they are. Then, through the registry's "fp8" entry
// (fuzz/common/registry_diff.h): both sides detect the same format,
// codec_read and oracle_read agree (verdict, every finding field but the
// message, every decoded tensor bit for bit), and codec_check reports what
// codec_read reports.
//
// Signature on divergence: DIFF:fp8_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>

#include "fuzz/common/fp8_file_input.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("fp8");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:fp8_file:setup:no-format", "");
    return f;
  }();
  const qd::fuzz::Fp8Case c = qd::fuzz::Fp8CaseFromInput(data, size);
  qd::fuzz::DiffThroughRegistry(*format, "fp8_file", {c.file.data(), c.file.size()},
                                "input-fp8.safetensors", c.configs);
  return 0;
}
