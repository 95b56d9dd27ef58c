// model_dir_differ.cc: the two directory readers through DiffReaders.
#include "harness/model_dir_differ.h"

#include "harness/differ.h"
#include "oracles/model_dir.h"

namespace qd::harness {

DirDiff DiffModelDir(const qd::ModelDirListing& listing, const codec::ModelDirOptions& options) {
  constexpr const char* kTarget = "model_dir";
  DirDiff d;
  oracle::ModelDirRead facts;
  d.streamed = DiffReaders(
      kTarget,
      [&](qd::TensorSink& sink) {
        return codec::StreamModelDir(listing, sink, &d.codec_read, codec::BestKernel(), options);
      },
      [&](qd::TensorSink& sink) { return oracle::StreamModelDir(listing, sink, &facts); });
  d.oracle_format = facts.format;
  d.oracle_total_size_convention = facts.total_size_convention;
  d.oracle_unsupported = facts.unsupported;
  // A set one side does not read yet has no verdict on that side: whether
  // it is such a set is the first thing the two must agree on.
  // (A reader that threw keeps its exception divergence.)
  const bool both_returned = d.streamed.codec && d.streamed.oracle;
  if (both_returned && (d.codec_read.unsupported || d.oracle_unsupported)) {
    if (d.codec_read.unsupported == d.oracle_unsupported) {
      d.streamed.divergence.reset();
    } else {
      d.streamed.divergence = Divergence{
          std::string("DIFF:") + kTarget + ":unsupported:" +
              (d.codec_read.unsupported ? "codec" : "oracle"),
          d.codec_read.unsupported ? "the codec does not read the set (" +
                                         d.codec_read.unsupported_why + "), the oracle does"
                                   : "the oracle does not read the set (" + facts.unsupported_why +
                                         "), the codec does"};
    }
    return d;
  }
  // The format decides which rules ran: a different detection is the first
  // difference, whatever else followed from it.
  if (both_returned) {
    if (auto detection = CompareDetection(d.codec_read.format, d.oracle_format, kTarget)) {
      d.streamed.divergence = std::move(detection);
    } else if (!d.streamed.divergence &&
               d.codec_read.total_size_convention != d.oracle_total_size_convention) {
      // Which total_size convention matched is part of the verdict's report.
      d.streamed.divergence = Divergence{
          std::string("DIFF:") + kTarget + ":total-size-convention",
          "the codec matched \"" + d.codec_read.total_size_convention + "\", the oracle \"" +
              d.oracle_total_size_convention + "\""};
    }
  }
  return d;
}

}  // namespace qd::harness
