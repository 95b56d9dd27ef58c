// gguf_file_diff: native .gguf files (docs/gguf.md), raw or generated and
// edited as fuzz/common/gguf_file_input.h says. Codec and oracle must agree
// on the detected format, the verdict, every finding and every decoded
// value, the check-only path must report the same findings
// (registry_diff.h), and the codec must decode alike with every kernel.
//
// Signature on divergence: DIFF:gguf_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codecs/gguf.h"
#include "codecs/kernels.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/gguf_file_input.h"
#include "fuzz/common/registry_diff.h"
#include "harness/differ.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry& format = qd::fuzz::FormatOrTrap("gguf", "gguf_file");
  const std::vector<std::uint8_t> bytes = qd::fuzz::GgufFileFromInput(data, size);
  const qd::ByteView file{bytes.data(), bytes.size()};
  const std::string name = "input.gguf";
  const qd::fuzz::RegistryReadings r = qd::fuzz::DiffThroughRegistry(format, "gguf_file", file, name, {});
  const qd::codec::Kernel best = qd::codec::BestKernel();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == best || r.oracle.refused) continue;
    const qd::Outcome forced = qd::codec::DecodeGgufFile(file, name, kernel);
    if (std::optional<qd::harness::Divergence> d = qd::harness::Compare(forced, r.oracle, "gguf_file")) {
      qd::fuzz::Diverge(d->signature, "kernel=" + std::string(qd::codec::KernelName(kernel)) + ": " + d->detail);
    }
  }
  return 0;
}
