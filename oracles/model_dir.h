// model_dir.h: the oracle's reader of a model directory (a checkpoint as it
// sits on disk: configs, one weight file or shards with their index),
// written plainly from docs/model_dir.md. It is given the directory's
// listing (qd::ModelDirListing, the same one the codec gets) and never
// touches the file system. Shares no code with codecs/.
//
//   qd::oracle::ModelDirFacts facts;
//   qd::Outcome o = qd::oracle::ReadModelDir(listing, &facts);
//   // facts.format: "gptq", "bnb", "safetensors", "rbq", "pt", ...
#ifndef QUANTDIFF_ORACLES_MODEL_DIR_H_
#define QUANTDIFF_ORACLES_MODEL_DIR_H_

#include <string>

#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// What the reader learned about the directory besides its findings.
struct ModelDirFacts {
  // The format detected for the weight set: over the merged table of an
  // index's shards "bnb", "gptq" or "safetensors" (docs/model_dir.md 4); for
  // a single weight file the file's own: "rbq", "bnb", "gptq", "pt" or
  // "safetensors". Empty when the directory is refused before detection.
  std::string format;
  // docs/model_dir.md 3, IDX-011: "tensor bytes" or "file bytes", the
  // metadata.total_size convention that matched; empty when the index gives
  // no total_size, there is no index, or the read stopped before IDX-011.
  std::string total_size_convention;
};

// Reads the directory: docs/model_dir.md sections 2 and 3 in order (one
// error at most, last; warnings met before it kept), then, when accepted,
// section 5's decoded tensors in the outcome. FACTS may be null.
qd::Outcome ReadModelDir(const qd::ModelDirListing& listing, ModelDirFacts* facts = nullptr);

// The same read handing the decoded tensors to SINK (quantdiff/tensor_sink.h)
// instead: every check first, then the plan, then the tensors in chunks.
// Same findings and verdict as ReadModelDir; the outcome's tensors are empty.
qd::Outcome StreamModelDir(const qd::ModelDirListing& listing, qd::TensorSink& sink,
                           ModelDirFacts* facts = nullptr);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_MODEL_DIR_H_
