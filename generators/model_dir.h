// model_dir.h: the model-directory generator's own model of a directory
// under construction (internal to generators/model_dir*.cc): the shards
// before they are written, the index's weight_map and its total_size
// convention, and the entries beside them (docs/model_dir.md). model_dir.cc
// cuts a single-file model into such a draft and writes it;
// model_dir_violations.cc breaks one IDX rule in a valid draft. The public
// entry points are declared in generators/generators.h.
#ifndef QUANTDIFF_GENERATORS_MODEL_DIR_H_
#define QUANTDIFF_GENERATORS_MODEL_DIR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codecs/safetensors.h"
#include "generators/generators.h"

namespace qd::gen::dir_gen {

inline constexpr char kIndexName[] = "model.safetensors.index.json";
inline constexpr char kTorchIndexName[] = "pytorch_model.bin.index.json";

// One weight file before it is written (codec::SerializeSafetensors).
struct ShardDraft {
  std::string name;
  std::vector<codec::TensorWithBytes> tensors;  // written in this order
  bool has_metadata = false;
  codec::MetadataList metadata;
  std::vector<std::uint8_t> verbatim;  // the file's bytes as they are, when as_is
  bool as_is = false;
  // An as_is file's tensor data bytes (a torch shard's numel * item size
  // summed over its tensor table): the "tensor bytes" total_size convention.
  std::uint64_t verbatim_tensor_bytes = 0;
};

// docs/model_dir.md 3 step 8: how the index states metadata.total_size.
enum class TotalSize : std::uint8_t {
  kTensorBytes,  // Hugging Face: the tensors' data bytes
  kFileBytes,    // GPT-QModel: the shard files' bytes
  kNoTotalSize,  // "metadata": {}
  kNoMetadata,   // no metadata member
};

struct DirDraft {
  std::vector<ShardDraft> shards;
  bool with_index = true;  // false: exactly one shard, read as the file alone
  std::string index_name = kIndexName;
  // The index's weight_map (tensor, shard name), written in this order.
  std::vector<std::pair<std::string, std::string>> weight_map;
  TotalSize total_size = TotalSize::kTensorBytes;
  std::string total_size_text;  // when not empty: written verbatim as total_size
  // Config files (docs/model_dir.md 2) and entries the readers ignore.
  std::vector<GeneratedDirFile> others;
  std::string what;  // how the directory was made, for the description
};

// The pieces of the index text Write used: the metadata member's value ("" when
// the index has none) and the weight_map object, so a violation can respell it.
struct IndexParts {
  std::string metadata;
  std::string weight_map;
};

// The index text {"metadata": M, "weight_map": W} plus extra members verbatim
// (each "\"key\": value"), laid out as huggingface_hub writes it.
std::string IndexText(const IndexParts& parts, const std::vector<std::string>& extra = {});
// A JSON string token for s.
std::string JsonString(const std::string& s);
// A weight_map object from (tensor name, value JSON text) members, in order.
std::string WeightMapText(const std::vector<std::pair<std::string, std::string>>& members);

// The two total_size conventions (docs/model_dir.md 3 step 8) for the draft as written.
struct DirSizes {
  std::uint64_t tensor_bytes = 0;  // the tensors' data bytes
  std::uint64_t file_bytes = 0;    // the shard files' bytes
};
DirSizes SizesOf(const DirDraft& d);

// The directory: shards, the index (when with_index), the others.
GeneratedDir Write(const DirDraft& d, std::string rule, std::string description,
                   IndexParts* parts = nullptr);

struct CutOptions {
  int min_shards = 1;       // at most the tensor count
  bool force_index = false;  // never the one-file set without an index
};
// A valid draft of the single-file model FILE (container-valid safetensors
// bytes, its side files as config sources) cut into shards at tensor
// boundaries in its data order: cuts[i] is the first tensor (in (begin, end,
// name) order) of shard i + 1. The rest (index or not, metadata spread,
// total_size convention, config names) is drawn from rng.
DirDraft DraftAt(const Generated& file, std::vector<std::size_t> cuts, Rng& rng,
                 const CutOptions& options = {});
// The same with the cuts drawn too (1..4 shards, at least options.min_shards).
DirDraft DraftOf(const Generated& file, Rng& rng, const CutOptions& options = {});

// What a violation builder starts from: a valid draft of two or more shards
// with an index (model_dir_violations.cc draws it).
struct DirRule {
  const char* rule;
  GeneratedDir (*build)(const std::string& r, DirDraft& d, Rng& rng);
};
const std::vector<DirRule>& DirRules();

}  // namespace qd::gen::dir_gen

#endif  // QUANTDIFF_GENERATORS_MODEL_DIR_H_
