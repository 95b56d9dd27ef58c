// rbq_file_diff: a structure-aware differential target for Q4B32/Q8B32 files.
//
// The input's last 8 bytes pick the parameters of a valid file (width, rows,
// columns, tensor count, norm tensor, weight magnitude, generator seed; see
// fuzz/common/rbq_file_input.h); qd::gen::BuildRbqFile writes it and the
// leading bytes mutate it (bytes, block scales, truncation, the length
// prefix, tokens spliced into the header). An input shorter than the tail,
// or with the raw flag in its tail, is a file as it is. The registry's "rbq"
// codec and oracle readers then must agree (qd::harness::Compare), the
// codec's check-only path must report the same findings, and the codec
// decoding with each other kernel of AvailableKernels() must agree too.
//
// Signature on divergence: DIFF:rbq_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "fuzz/common/rbq_file_input.h"
#include "harness/differ.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("rbq");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:rbq_file:setup:no-format", "");
    return f;
  }();
  const std::vector<std::uint8_t> bytes = qd::fuzz::RbqFileFromInput(data, size);
  const qd::ByteView file{bytes.data(), bytes.size()};
  const std::string name = "input-rbq.safetensors";
  const qd::fuzz::RegistryReadings r =
      qd::fuzz::DiffThroughRegistry(*format, "rbq_file", file, name, {});
  const qd::Outcome& oracle = r.oracle;
  // The registry decodes with the best kernel; every other one must agree too.
  const qd::codec::Kernel best = qd::codec::BestKernel();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == best || oracle.refused) continue;
    const qd::Outcome forced = qd::codec::DecodeRbqFile(file, name, kernel);
    if (std::optional<qd::harness::Divergence> d =
            qd::harness::Compare(forced, oracle, "rbq_file")) {
      qd::fuzz::Diverge(d->signature, "kernel=" + std::string(qd::codec::KernelName(kernel)) +
                                          ": " + d->detail);
    }
  }
  return 0;
}
