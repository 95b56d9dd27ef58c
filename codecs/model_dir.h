// model_dir.h: a model directory read as one input (docs/model_dir.md): its
// weight set found by name, the index checked against the shards (IDX-001..
// IDX-013), and the shards' tensors read as one merged table by the format
// readers, so a layer two shards hold is one layer. oracles/model_dir.cc
// implements the same page independently.
//
//   qd::codec::ModelDirRead read;
//   qd::Outcome o = qd::codec::StreamModelDir(listing, sink, &read);
//   if (read.unsupported) ...  // a set quantdiff does not read yet: say so, exit 2
#ifndef QUANTDIFF_CODECS_MODEL_DIR_H_
#define QUANTDIFF_CODECS_MODEL_DIR_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// What the reading found besides its outcome.
struct ModelDirRead {
  // The format read: "bnb", "recognised", "awq", "gptq", "fp8", "safetensors", or a one-file set's own
  // ("rbq", "pt"); empty when refused before detection.
  std::string format;
  std::size_t shards = 0;  // weight files read (1 without an index)
  bool indexed = false;    // the set is an index and its shards
  // docs/model_dir.md 3 step 8: "tensor bytes", "file bytes", or empty (no
  // index, no total_size, or refused before the step).
  std::string total_size_convention;
  // Once the set is found and its shard names pass IDX-004..IDX-006: its
  // weight files in shard order, and its configs in priority order (section
  // 2), as names in the directory. What `convert DIR` rewrites.
  std::vector<std::string> weight_files;
  std::vector<std::string> config_files;
  // A weight set quantdiff cannot read yet (a bitsandbytes layer in a
  // sharded torch set, docs/model_dir.md 3), with why: the outcome holds no
  // verdict then.
  bool unsupported = false;
  std::string unsupported_why;
};

// How the shards are read. Section 3 step 6 (each shard's container rules)
// runs JOBS shards at a time (1: one after the other; the findings and their
// order are the same for every JOBS: a reader stops at the first refused
// shard in shard order, and later shards' results are dropped unread).
// PROGRESS, when set, is called as each shard's rules finish: DONE of TOTAL,
// NAME the shard; one call at a time, from whichever thread read it. (The
// shards of a torch index are read one after the other whatever JOBS says.)
struct ModelDirOptions {
  unsigned jobs = 1;
  std::function<void(std::size_t done, std::size_t total, const std::string& name)> progress;
};

// The checks of docs/model_dir.md 3 and, for an accepted directory, the
// format's decoded tensors (section 5) to SINK, announced first; a sink that
// declines the plan gets nothing (what `check` uses).
qd::Outcome StreamModelDir(const qd::ModelDirListing& listing, TensorSink& sink,
                           ModelDirRead* read = nullptr, Kernel kernel = BestKernel(),
                           const ModelDirOptions& options = {});
// The checks alone, decoding nothing: what `check DIR` runs.
qd::Outcome CheckModelDir(const qd::ModelDirListing& listing, ModelDirRead* read = nullptr,
                          const ModelDirOptions& options = {});
// The same, with the decoded tensors collected into the outcome.
qd::Outcome DecodeModelDir(const qd::ModelDirListing& listing, ModelDirRead* read = nullptr);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_MODEL_DIR_H_
