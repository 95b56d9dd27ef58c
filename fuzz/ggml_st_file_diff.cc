// ggml_st_file_diff: a GGUF-family safetensors file (GPT-QModel's GGUF
// linear, docs/ggml_safetensors.md) with an optional quantize config, laid
// out as fuzz/common/recognised_file_input.h says (the seeds are the
// registry's ggml_st generator's instances). Codec and oracle must agree on
// the detected format, the verdict, every finding and every decoded value bit
// for bit (the codec's blocks through GgmlDecode, the oracle's through its
// own block decoder), and the check-only path must report the same findings
// (registry_diff.h).
//
// Signature on divergence: DIFF:ggml_st_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>

#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/recognised_file_input.h"
#include "fuzz/common/registry_diff.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry& format = qd::fuzz::FormatOrTrap("ggml_st", "ggml_st_file");
  const qd::fuzz::RecognisedCase c = qd::fuzz::RecognisedCaseFromInput(data, size);
  qd::fuzz::DiffThroughRegistry(format, "ggml_st_file", {c.file.data(), c.file.size()}, "input.safetensors",
                                c.configs);
  return 0;
}
