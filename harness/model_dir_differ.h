// model_dir_differ.h: codec and oracle on the same model directory
// (docs/model_dir.md), compared as `diff DIR` and the peer tests need:
// detection first (the format each side found for the merged table), then
// what DiffReaders compares (verdict, findings, values as they stream).
//
//   const qd::harness::DirDiff d = qd::harness::DiffModelDir(listing);
//   if (d.codec_read.unsupported) ...           // not read yet: exit 2
//   else if (d.streamed.divergence) ...          // DIFF:model_dir:...
#ifndef QUANTDIFF_HARNESS_MODEL_DIR_DIFFER_H_
#define QUANTDIFF_HARNESS_MODEL_DIR_DIFFER_H_

#include <string>

#include "codecs/model_dir.h"
#include "harness/stream_differ.h"
#include "quantdiff/plain_data.h"

namespace qd::harness {

struct DirDiff {
  StreamedDiff streamed;
  codec::ModelDirRead codec_read;  // the codec's format, shards, total_size convention
  std::string oracle_format;
  std::string oracle_total_size_convention;
  // The oracle's "not read yet" (oracles/model_dir.h); the codec's is
  // codec_read.unsupported. Both: no verdict to compare (no divergence);
  // one side alone: DIFF:model_dir:unsupported:<that side>.
  bool oracle_unsupported = false;
};

// Both directory readers on LISTING, one after the other (DiffReaders,
// stream_differ.h: side by side only to locate a difference); the codec's
// with OPTIONS (its shards on options.jobs threads, its shard
// progress: codecs/model_dir.h; the findings are the same for any jobs).
DirDiff DiffModelDir(const qd::ModelDirListing& listing, const codec::ModelDirOptions& options = {});

}  // namespace qd::harness

#endif  // QUANTDIFF_HARNESS_MODEL_DIR_DIFFER_H_
