// recognised_file_diff: a file of a family quantdiff recognises but does not
// decode (docs/recognised.md) with an optional config (EXL3's tensor_storage),
// laid out as fuzz/common/recognised_file_input.h says. Codec and oracle must
// agree on the detected format, the verdict, every finding and the dense
// tensors decoded, and the check-only path must report the same findings
// (registry_diff.h).
//
// Signature on divergence: DIFF:recognised_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/recognised_file_input.h"
#include "fuzz/common/registry_diff.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry& format = qd::fuzz::FormatOrTrap("recognised", "recognised_file");
  const qd::fuzz::RecognisedCase c = qd::fuzz::RecognisedCaseFromInput(data, size);
  qd::fuzz::DiffThroughRegistry(format, "recognised_file", {c.file.data(), c.file.size()},
                                "input.safetensors", c.configs);
  return 0;
}
