// bnb_file_diff: a structure-aware differential target for bitsandbytes files
// (docs/bnb.md).
//
// The input's last 12 bytes pick one valid layer (4-bit HF or GPT-QModel,
// 8-bit blockwise or int8 row-scaled; quant_type, blocksize, nested
// statistics, dtype, quant_storage, shape, names, tensor order, generator
// seed; see fuzz/common/bnb_file_input.h), quantized with the codec's
// encoders; the leading bytes are ops that edit its JSON quant_state, its
// tensors and their values, then the written file. An input shorter than
// the tail, or with the raw flag in its tail, is a file as it is. Then:
//   1. the registry's "bnb" codec_read and oracle_read must agree
//      (qd::harness::Compare: verdict, every finding field but the message,
//      every decoded tensor bit for bit);
//   2. codec_check (the rules alone) must report what codec_read reports;
//   3. DecodeBnbFile with every other kernel of AvailableKernels() must
//      agree with the oracle too.
//
// Signature on divergence: DIFF:bnb_file:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "codecs/kernels.h"
#include "fuzz/common/bnb_file_input.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "harness/differ.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("bnb");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:bnb_file:setup:no-format", "");
    return f;
  }();
  const std::vector<std::uint8_t> bytes = qd::fuzz::BnbFileFromInput(data, size);
  const qd::ByteView file{bytes.data(), bytes.size()};
  const std::string name = "input-bnb.safetensors";
  const qd::fuzz::RegistryReadings r =
      qd::fuzz::DiffThroughRegistry(*format, "bnb_file", file, name, {});
  const qd::Outcome& oracle = r.oracle;
  // The registry decodes with the best kernel; every other one must agree too.
  const qd::codec::Kernel best = qd::codec::BestKernel();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == best || oracle.refused) continue;
    const qd::Outcome forced = qd::codec::DecodeBnbFile(file, name, kernel);
    if (std::optional<qd::harness::Divergence> d =
            qd::harness::Compare(forced, oracle, "bnb_file")) {
      qd::fuzz::Diverge(d->signature, "kernel=" + std::string(qd::codec::KernelName(kernel)) +
                                          ": " + d->detail);
    }
  }
  return 0;
}
