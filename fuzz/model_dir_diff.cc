// model_dir_diff: a differential target over whole model directories
// (docs/model_dir.md): the index JSON, the shards (safetensors or torch
// .bin), configs and the kinds of the entries, all taken from the input as
// one framed byte string (fuzz/common/model_dir_input.h), read in memory.
// Then:
//   1. qd::harness::DiffModelDir, what `diff DIR` runs: whether the set is
//      read at all, verdict, every finding field but the message, every
//      decoded value bit for bit, the detected format and the total_size
//      convention (docs/model_dir.md 3 step 8);
//   2. codec::CheckModelDir (the checks alone, what `check DIR` runs) must
//      report the findings, format and convention the decoding reported;
//   3. for an accepted directory, the codec with every other kernel of
//      AvailableKernels() must agree with the oracle too.
//
// Signature on divergence: DIFF:model_dir:<kind>:<rule-or-part>
// (DIFF:model_dir_check:... for step 2).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "codecs/kernels.h"
#include "codecs/model_dir.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/model_dir_input.h"
#include "harness/differ.h"
#include "harness/model_dir_differ.h"
#include "oracles/model_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const qd::ModelDirListing listing = qd::fuzz::ModelDirListingFromInput(data, size);
  const qd::harness::DirDiff d = qd::harness::DiffModelDir(listing);
  if (d.streamed.out_of_memory) return 0;  // the machine's limit, not a difference
  if (d.streamed.divergence) qd::fuzz::Diverge(d.streamed.divergence->signature, d.streamed.divergence->detail);
  if (d.codec_read.unsupported) return 0;  // neither side reads it (step 1 checked that)

  qd::codec::ModelDirRead check_read;
  const qd::Outcome check = qd::codec::CheckModelDir(listing, &check_read);
  if (std::optional<qd::harness::Divergence> c = qd::harness::Compare(check, *d.streamed.codec, "model_dir_check")) {
    qd::fuzz::Diverge(c->signature, "CheckModelDir against StreamModelDir: " + c->detail);
  }
  if (check_read.format != d.codec_read.format ||
      check_read.total_size_convention != d.codec_read.total_size_convention ||
      check_read.unsupported != d.codec_read.unsupported || check_read.shards != d.codec_read.shards) {
    qd::fuzz::Diverge("DIFF:model_dir_check:facts",
                      "check: " + check_read.format + " / " + check_read.total_size_convention +
                          ", decode: " + d.codec_read.format + " / " + d.codec_read.total_size_convention);
  }

  if (d.streamed.codec->refused) return 0;
  const qd::codec::Kernel best = qd::codec::BestKernel();
  std::optional<qd::Outcome> oracle;
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == best) continue;
    if (!oracle) oracle = qd::oracle::ReadModelDir(listing);
    const qd::Outcome forced = qd::CollectStream(
        [&](qd::TensorSink& sink) { return qd::codec::StreamModelDir(listing, sink, nullptr, kernel); });
    if (std::optional<qd::harness::Divergence> k = qd::harness::Compare(forced, *oracle, "model_dir")) {
      qd::fuzz::Diverge(k->signature, "kernel=" + std::string(qd::codec::KernelName(kernel)) + ": " + k->detail);
    }
  }
  return 0;
}
