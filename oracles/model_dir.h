// model_dir.h: the oracle's reader of a model directory (a checkpoint as it
// sits on disk: configs, one weight file or shards with their index),
// written plainly from docs/model_dir.md. It is given the directory's
// listing (qd::ModelDirListing, the same one the codec gets) and never
// touches the file system. Shares no code with codecs/.
//
//   qd::oracle::ModelDirRead read;
//   qd::Outcome o = qd::oracle::ReadModelDir(listing, &read);
//   // read.format: "gptq", "bnb", "recognised", "safetensors", "rbq", "pt", ...
#ifndef QUANTDIFF_ORACLES_MODEL_DIR_H_
#define QUANTDIFF_ORACLES_MODEL_DIR_H_

#include <cstddef>
#include <string>

#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// What the reading found besides its outcome (the codec's
// qd::codec::ModelDirRead says the same things, written separately).
struct ModelDirRead {
  // The format detected for the weight set: over the merged table of an
  // index's shards "bnb", "recognised", "awq", "gptq", "fp8" or "safetensors"
  // (docs/model_dir.md 4), or "pt" for torch shards; for a single weight file
  // the file's own: "rbq", "bnb", "recognised", "awq", "gptq", "fp8", "pt" or
  // "safetensors". Empty when the directory is
  // refused before detection (a container refusal included).
  std::string format;
  std::size_t shards = 0;  // weight files read (1 without an index)
  // docs/model_dir.md 3 step 8, IDX-011: "tensor bytes" or "file bytes", the
  // metadata.total_size convention that matched; empty when there is no
  // index, no total_size, or the read stopped before the step.
  std::string total_size_convention;
  // A weight set the oracle cannot read yet (a bitsandbytes layer in a
  // sharded torch set), with why: the outcome holds no verdict then.
  bool unsupported = false;
  std::string unsupported_why;
};

// Reads the directory: docs/model_dir.md sections 2 and 3 in order (one
// error at most, last; warnings met before it kept), then, when accepted,
// section 5's decoded tensors in the outcome. READ may be null.
qd::Outcome ReadModelDir(const qd::ModelDirListing& listing, ModelDirRead* read = nullptr);

// The same read handing the decoded tensors to SINK (quantdiff/tensor_sink.h)
// instead: every check first, then the plan, then the tensors in chunks.
// Same findings and verdict as ReadModelDir; the outcome's tensors are empty.
qd::Outcome StreamModelDir(const qd::ModelDirListing& listing, qd::TensorSink& sink,
                           ModelDirRead* read = nullptr);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_MODEL_DIR_H_
