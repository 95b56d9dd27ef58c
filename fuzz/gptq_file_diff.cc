// gptq_file_diff: a structure-aware differential target for GPTQ files and
// their config sources (docs/gptq.md).
//
// The input's last 12 bytes pick a valid file (format, bits, K, N,
// group_size, g_idx order, scales dtype, bias, layers, dense tensors,
// extreme zeros, config spelling and sources, tensor order, seed; see
// fuzz/common/gptq_file_input.h), packed with the codec's encoder; the
// leading bytes are ops that edit its tensors, words, shapes, dtypes,
// siblings and config sources, then the written file. In raw mode the input
// is config sources plus a file as they are. Then:
//   1. the registry's "gptq" codec_read and oracle_read must agree
//      (qd::harness::Compare: verdict, every finding field but the message,
//      every decoded tensor bit for bit);
//   2. codec_check (the rules alone) must report what codec_read reports;
//   3. DecodeGptqFile with every other kernel of AvailableKernels() must
//      agree with the oracle too.
//
// Signature on divergence: DIFF:gptq_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codecs/gptq.h"
#include "codecs/kernels.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "fuzz/common/gptq_file_input.h"
#include "harness/differ.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("gptq");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:gptq_file:setup:no-format", "");
    return f;
  }();
  const qd::fuzz::GptqCase c = qd::fuzz::GptqCaseFromInput(data, size);
  const qd::ByteView file{c.file.data(), c.file.size()};
  const std::string name = "input-gptq.safetensors";
  const qd::fuzz::RegistryReadings r =
      qd::fuzz::DiffThroughRegistry(*format, "gptq_file", file, name, c.configs);
  const qd::Outcome& oracle = r.oracle;
  const qd::codec::Kernel best = qd::codec::BestKernel();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == best || oracle.refused) continue;
    const qd::Outcome forced = qd::codec::DecodeGptqFile(file, name, c.configs, kernel);
    if (std::optional<qd::harness::Divergence> d = qd::harness::Compare(forced, oracle, "gptq_file")) {
      qd::fuzz::Diverge(d->signature,
                        "kernel=" + std::string(qd::codec::KernelName(kernel)) + ": " + d->detail);
    }
  }
  return 0;
}
