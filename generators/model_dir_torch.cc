// model_dir_torch.cc: a torch model as one .pt file and as the same model
// cut into pytorch_model-0000i-of-0000k.bin shards with
// pytorch_model.bin.index.json (docs/model_dir.md 2, 3, 4 over docs/pt.md
// 6.4): the pair a property needs to show that a sharded torch checkpoint
// checks and decodes exactly like the one file. Shards are written with
// PtWriteStateDict, the index with model_dir.cc's Write.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "generators/model_dir.h"
#include "generators/generators.h"

namespace qd::gen {
namespace {

// One root item of the state dict: its key, its value, and the flattened
// names of the tensors it holds (docs/pt.md 6.1) with their data bytes.
struct RootItem {
  std::string key;
  PtObject value;
  std::vector<std::string> tensors;
  std::uint64_t tensor_bytes = 0;
};

std::string TorchShardName(std::size_t i, std::size_t k) {
  char name[64];
  std::snprintf(name, sizeof name, "pytorch_model-%05zu-of-%05zu.bin", i + 1, k);
  return name;
}

// A tensor of 1..24 elements in any layout (docs/pt.md 5.3), random bytes
// (any bit pattern is a value of the floating dtypes; integers are not decoded).
PtTensorData RandomTensor(Rng& rng) {
  static const char* const kDtypes[] = {"F32", "F16", "BF16", "F64", "I32", "I64", "I8", "U8"};
  PtTensorData t;
  t.dtype = kDtypes[Pick(rng, std::size(kDtypes))];
  const std::uint64_t rank = Pick(rng, 4);
  std::uint64_t numel = 1;
  for (std::uint64_t r = 0; r < rank; ++r) {
    t.shape.push_back(1 + Pick(rng, 3 + (rank == 1 ? 20 : 0)));
    numel *= t.shape.back();
  }
  t.bytes.resize(numel * PtItemSize(t.dtype));
  for (std::uint8_t& b : t.bytes) b = static_cast<std::uint8_t>(rng());
  t.layout = static_cast<PtTensorData::Layout>(Pick(rng, 4));
  return t;
}

// 1..6 blocks "blk<i>", each a weight and sometimes a bias: flat, one root
// item per tensor, or nested, one root item (a dict) per block; sometimes a
// non-tensor value (the value table, no weight_map entry) after a block.
std::vector<RootItem> RandomRoot(Rng& rng) {
  std::vector<RootItem> items;
  const std::uint64_t blocks = 1 + Pick(rng, 6);
  const bool nested = Coin(rng);
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const std::string block = "blk" + std::to_string(b);
    RootItem dict_item{block, PtObject::Dict(), {}, 0};
    for (const std::string member : {"weight", "bias"}) {
      if (member == "bias" && Coin(rng)) continue;
      const std::string name = block + ".proj." + member;
      PtTensorData t = RandomTensor(rng);
      const std::uint64_t bytes = t.bytes.size();
      if (nested) {
        PtPut(&dict_item.value.entries, "proj." + member, PtObject::Tensor(std::move(t)));
        dict_item.tensors.push_back(name);
        dict_item.tensor_bytes += bytes;
      } else {
        items.push_back({name, PtObject::Tensor(std::move(t)), {name}, bytes});
      }
    }
    if (nested) items.push_back(std::move(dict_item));
    if (Coin(rng, 4)) {
      items.push_back({"step" + std::to_string(b), PtObject::Int(static_cast<std::int64_t>(rng() % 1000)), {}, 0});
    }
  }
  return items;
}

}  // namespace

PtModelDir PtShardedModel(Rng& rng) {
  using namespace dir_gen;
  std::vector<RootItem> items = RandomRoot(rng);
  PtWriteOptions options;
  options.protocol = 2 + static_cast<int>(Pick(rng, 4));
  options.ordered = !Coin(rng, 4);
  options.big_endian = Coin(rng, 4);

  PtModelDir out;
  PtStateDict root;
  for (const RootItem& item : items) root.emplace_back(item.key, item.value);
  out.file.bytes = PtWriteStateDict(root, options);
  out.file.description = "torch model of " + std::to_string(items.size()) + " root items";

  // Cuts before root items holding a tensor, so that every shard holds one
  // (a shard of no tensor is IDX-006).
  std::vector<std::size_t> starts;
  for (std::size_t i = 1; i < items.size(); ++i) {
    if (!items[i].tensors.empty()) starts.push_back(i);
  }
  std::vector<std::size_t> cuts;
  for (std::size_t i : starts) {
    if (Coin(rng, 3)) cuts.push_back(i);
  }
  const std::size_t k = cuts.size() + 1;
  DirDraft d;
  d.index_name = kTorchIndexName;
  for (std::size_t s = 0; s < k; ++s) {
    ShardDraft shard;
    shard.name = TorchShardName(s, k);
    shard.as_is = true;
    PtStateDict part;
    const std::size_t begin = s == 0 ? 0 : cuts[s - 1];
    const std::size_t end = s + 1 == k ? items.size() : cuts[s];
    for (std::size_t i = begin; i < end; ++i) {
      part.emplace_back(items[i].key, items[i].value);
      shard.verbatim_tensor_bytes += items[i].tensor_bytes;
      for (const std::string& t : items[i].tensors) d.weight_map.emplace_back(t, shard.name);
    }
    shard.verbatim = PtWriteStateDict(part, options);
    d.shards.push_back(std::move(shard));
  }
  static const TotalSize kConventions[] = {TotalSize::kTensorBytes, TotalSize::kFileBytes,
                                           TotalSize::kNoTotalSize, TotalSize::kNoMetadata};
  d.total_size = kConventions[Pick(rng, std::size(kConventions))];
  if (Coin(rng)) std::sort(d.weight_map.begin(), d.weight_map.end());
  d.what = std::to_string(d.weight_map.size()) + " tensors in " + std::to_string(k) + " .bin shard(s)";
  out.dir = Write(d, "", "torch model split: " + d.what);
  return out;
}

// docs/pt.md 6.5: a torch twin of a safetensors directory draft, every
// shard the same tensors in the same order as a flat state dict.
TorchTwinDirs TorchTwinAt(const Generated& file, const std::vector<std::size_t>& cuts, Rng& rng) {
  using namespace dir_gen;
  DirDraft d = DraftAt(file, cuts, rng);
  TorchTwinDirs out;
  out.safetensors = Write(d, "", "model cut: " + d.what);
  if (d.shards.size() == 1 && d.shards[0].as_is) return out;  // the container refuses it: no twin
  // A dtype torch.save cannot write (docs/pt.md 4.3: U16, U32, F8_*, ...): no twin.
  static const std::string_view kPtDtypes[] = {"F64", "F32", "F16", "BF16", "I64",
                                               "I32", "I16", "I8",  "U8",   "BOOL"};
  for (const ShardDraft& shard : d.shards) {
    for (const codec::TensorWithBytes& t : shard.tensors) {
      if (std::find(std::begin(kPtDtypes), std::end(kPtDtypes), t.spec.dtype) == std::end(kPtDtypes)) {
        return out;
      }
    }
  }
  const std::size_t k = d.shards.size();
  std::vector<std::pair<std::string, std::string>> renamed;  // safetensors shard -> torch shard
  for (std::size_t s = 0; s < k; ++s) {
    ShardDraft& shard = d.shards[s];
    const std::string name = d.with_index ? TorchShardName(s, k) : "pytorch_model.bin";
    renamed.emplace_back(shard.name, name);
    PtStateDict root;
    PtPutTensors(&root, shard.tensors);
    for (const codec::TensorWithBytes& t : shard.tensors) shard.verbatim_tensor_bytes += t.bytes.size();
    shard.verbatim = PtWriteStateDict(root);
    shard.as_is = true;
    shard.tensors.clear();
    shard.name = name;
    shard.has_metadata = false;  // a .pt file has no __metadata__
    shard.metadata.clear();
  }
  for (auto& [tensor, shard] : d.weight_map) {
    for (const auto& [from, to] : renamed) {
      if (shard == from) {
        shard = to;
        break;
      }
    }
  }
  d.index_name = kTorchIndexName;
  // The set's own config follows its stem (docs/model_dir.md 2).
  for (GeneratedDirFile& f : d.others) {
    if (f.name == "model.quantize_config.json") f.name = "pytorch_model.quantize_config.json";
  }
  out.torch = Write(d, "", "torch twin: " + d.what);
  out.has_torch = true;
  return out;
}

}  // namespace qd::gen
