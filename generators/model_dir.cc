// model_dir.cc: valid model directories (docs/model_dir.md): a single-file
// model made by another generator (GPTQ, bitsandbytes, FP8, plain safetensors)
// cut into shards at tensor boundaries, with model.safetensors.index.json
// and the model's config sources as the directory's configs; RBQ and .pt
// models as the one weight file of a set without an index. Shards are written
// with codec::SerializeSafetensors. See model_dir.h.
#include "generators/model_dir.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace qd::gen {

qd::ModelDirListing GeneratedDir::Listing(const std::string& dir) const {
  qd::ModelDirListing listing;
  listing.dir = dir;
  // docs/model_dir.md 1: D with one '/' appended when it does not end in one.
  listing.prefix = !dir.empty() && dir.back() == '/' ? dir : dir + "/";
  for (const GeneratedDirFile& f : files) {
    qd::DirEntry e;
    e.name = f.name;
    e.kind = f.kind;
    if (f.kind == qd::DirEntryKind::kRegular) e.bytes = {f.bytes.data(), f.bytes.size()};
    listing.entries.push_back(std::move(e));
  }
  std::sort(listing.entries.begin(), listing.entries.end(),
            [](const qd::DirEntry& a, const qd::DirEntry& b) { return a.name < b.name; });
  return listing;
}

namespace dir_gen {
namespace {

std::string ShardName(std::size_t i, std::size_t k) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, k);
  return name;
}

std::string BaseName(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// docs/model_dir.md 2: the directory's configs are found by name in
// docs/gptq.md 1's priority order, and only config.json is read nested. So
// the model's sources keep their order and kind: plain ones get an ordered
// choice of the plain names, a nested one config.json (GptqValid and
// GptqViolation put it last; a second nested source has no name left and
// is left out, as is a fourth plain one).
std::vector<GeneratedDirFile> ConfigFiles(const std::vector<qd::SideFile>& sources, Rng& rng) {
  static const char* const kPlain[] = {"model.quantize_config.json", "quantize_config.json",
                                       "quant_config.json"};
  std::size_t plain = 0;
  for (const qd::SideFile& s : sources) plain += BaseName(s.name) != "config.json";
  // Which plain names are used: drop 3 - plain of them, one at a time.
  std::vector<const char*> names(std::begin(kPlain), std::end(kPlain));
  while (names.size() > std::max<std::size_t>(plain, 1)) names.erase(names.begin() + Pick(rng, names.size()));
  std::vector<GeneratedDirFile> files;
  std::size_t next = 0;
  bool nested_taken = false;
  for (const qd::SideFile& s : sources) {
    const bool nested = BaseName(s.name) == "config.json";
    if (nested ? nested_taken : next == names.size()) continue;
    nested_taken = nested_taken || nested;
    files.push_back({nested ? std::string("config.json") : std::string(names[next++]),
                     qd::DirEntryKind::kRegular, s.bytes});
  }
  return files;
}

// The container's tensors in its (begin, end, name) order, as the writer takes them.
bool ReadModel(const Generated& file, std::vector<codec::TensorWithBytes>* tensors,
               ShardDraft* metadata) {
  const codec::ContainerResult r =
      codec::ReadContainer({file.bytes.data(), file.bytes.size()}, "model.safetensors");
  if (r.refused) return false;
  const codec::Container& c = r.container;
  for (const codec::TensorEntry& t : c.tensors) {
    codec::TensorWithBytes w;
    w.spec = {std::string(t.name), std::string(codec::InfoOf(t.dtype).name), t.shape, t.end - t.begin};
    w.bytes.assign(c.Data(t), c.Data(t) + (t.end - t.begin));
    tensors->push_back(std::move(w));
  }
  metadata->has_metadata = c.has_metadata;
  metadata->metadata.assign(c.metadata.begin(), c.metadata.end());
  return true;
}

}  // namespace

std::string JsonString(const std::string& s) { return nlohmann::json(s).dump(); }

std::string IndexText(const IndexParts& parts, const std::vector<std::string>& extra) {
  std::vector<std::string> members;
  if (!parts.metadata.empty()) members.push_back("\"metadata\": " + parts.metadata);
  members.push_back("\"weight_map\": " + parts.weight_map);
  members.insert(members.end(), extra.begin(), extra.end());
  std::string text = "{\n";
  for (std::size_t i = 0; i < members.size(); ++i) {
    text += "  " + members[i] + (i + 1 < members.size() ? ",\n" : "\n");
  }
  return text + "}\n";
}

std::string WeightMapText(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string text = "{";
  for (std::size_t i = 0; i < members.size(); ++i) {
    text += (i == 0 ? "\n    " : ",\n    ") + JsonString(members[i].first) + ": " + members[i].second;
  }
  return text + (members.empty() ? "}" : "\n  }");
}

DirSizes SizesOf(const DirDraft& d) {
  DirSizes sizes;
  for (const ShardDraft& s : d.shards) {
    std::vector<codec::TensorToWrite> specs;
    std::uint64_t shard_tensor_bytes = s.verbatim_tensor_bytes;
    for (const codec::TensorWithBytes& t : s.tensors) {
      specs.push_back(t.spec);
      specs.back().byte_size = t.bytes.size();
      shard_tensor_bytes += t.bytes.size();
    }
    sizes.tensor_bytes += shard_tensor_bytes;
    sizes.file_bytes +=
        s.as_is ? s.verbatim.size()
                : codec::BuildHeader(specs, s.has_metadata ? &s.metadata : nullptr).size() + shard_tensor_bytes;
  }
  return sizes;
}

GeneratedDir Write(const DirDraft& d, std::string rule, std::string description,
                   IndexParts* parts) {
  GeneratedDir dir;
  dir.expected_rule = std::move(rule);
  dir.description = std::move(description);
  for (const ShardDraft& s : d.shards) {
    dir.files.push_back(
        {s.name, qd::DirEntryKind::kRegular,
         s.as_is ? s.verbatim
                 : codec::SerializeSafetensors(s.tensors, s.has_metadata ? &s.metadata : nullptr)});
  }
  if (d.with_index) {
    IndexParts p;
    const DirSizes sizes = SizesOf(d);
    std::string total = d.total_size_text;
    if (total.empty() && d.total_size == TotalSize::kTensorBytes) total = std::to_string(sizes.tensor_bytes);
    if (total.empty() && d.total_size == TotalSize::kFileBytes) total = std::to_string(sizes.file_bytes);
    if (!total.empty()) {
      p.metadata = "{\n    \"total_size\": " + total + "\n  }";
    } else if (d.total_size == TotalSize::kNoTotalSize) {
      p.metadata = "{}";
    }
    std::vector<std::pair<std::string, std::string>> members;
    for (const auto& [tensor, shard] : d.weight_map) members.emplace_back(tensor, JsonString(shard));
    p.weight_map = WeightMapText(members);
    const std::string text = IndexText(p);
    dir.files.push_back({d.index_name, qd::DirEntryKind::kRegular, {text.begin(), text.end()}});
    if (parts != nullptr) *parts = std::move(p);
  }
  dir.files.insert(dir.files.end(), d.others.begin(), d.others.end());
  return dir;
}

DirDraft DraftAt(const Generated& file, std::vector<std::size_t> cuts, Rng& rng,
                 const CutOptions& options) {
  DirDraft d;
  std::vector<codec::TensorWithBytes> tensors;
  ShardDraft model;
  if (!ReadModel(file, &tensors, &model)) {
    // Not a container: the file as it is, the one weight file of the set.
    d.with_index = false;
    d.shards.push_back({"model.safetensors", {}, false, {}, file.bytes, true});
    d.others = ConfigFiles(file.side_files, rng);
    d.what = "a file the container refuses, alone";
    return d;
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  cuts.erase(std::remove_if(cuts.begin(), cuts.end(),
                            [&](std::size_t c) { return c == 0 || c >= tensors.size(); }),
             cuts.end());
  const std::size_t k = cuts.size() + 1;
  // One shard may go without an index (docs/model_dir.md 2, set 4); a model
  // of no tensors must, since an index names a shard only through a tensor.
  d.with_index = tensors.empty() ? false : options.force_index || k > 1 || !Coin(rng, 3);
  for (std::size_t s = 0; s < k; ++s) {
    ShardDraft shard;
    shard.name = d.with_index ? ShardName(s, k) : "model.safetensors";
    const std::size_t begin = s == 0 ? 0 : cuts[s - 1];
    const std::size_t end = s + 1 == k ? tensors.size() : cuts[s];
    for (std::size_t i = begin; i < end; ++i) {
      d.weight_map.emplace_back(tensors[i].spec.name, shard.name);
      shard.tensors.push_back(std::move(tensors[i]));
    }
    shard.has_metadata = model.has_metadata;
    d.shards.push_back(std::move(shard));
  }
  // __metadata__: every shard holds all of it (as huggingface_hub writes),
  // or each key goes to some of the shards (at least one): the merged table
  // has their union (docs/model_dir.md 4).
  const bool spread = k > 1 && !model.metadata.empty() && Coin(rng, 3);
  for (const auto& entry : model.metadata) {
    const std::size_t home = Pick(rng, k);
    for (std::size_t s = 0; s < k; ++s) {
      if (!spread || s == home || Coin(rng)) d.shards[s].metadata.push_back(entry);
    }
  }
  if (spread) {
    for (ShardDraft& s : d.shards) s.has_metadata = !s.metadata.empty() || Coin(rng);
  }
  static const TotalSize kConventions[] = {TotalSize::kTensorBytes, TotalSize::kTensorBytes,
                                           TotalSize::kFileBytes,   TotalSize::kFileBytes,
                                           TotalSize::kNoTotalSize, TotalSize::kNoMetadata};
  d.total_size = kConventions[Pick(rng, std::size(kConventions))];
  // huggingface_hub writes weight_map sorted by name; other writers in data order.
  if (Coin(rng)) std::sort(d.weight_map.begin(), d.weight_map.end());
  d.others = ConfigFiles(file.side_files, rng);
  d.what = std::to_string(d.weight_map.size()) + " tensors in " + std::to_string(k) +
           (d.with_index ? " shard(s) with an index" : " file without an index");
  return d;
}

DirDraft DraftOf(const Generated& file, Rng& rng, const CutOptions& options) {
  const codec::ContainerResult r =
      codec::ReadContainer({file.bytes.data(), file.bytes.size()}, "model.safetensors");
  const std::size_t n = r.refused ? 0 : r.container.tensors.size();
  // 1..4 shards, at least min_shards, at most one per tensor; the cuts are
  // distinct tensor indexes in 1..n-1 (a partial Fisher-Yates draw).
  std::size_t k = 1 + Pick(rng, std::min<std::size_t>(std::max<std::size_t>(n, 1), 4));
  k = std::min(std::max(k, static_cast<std::size_t>(options.min_shards)), std::max<std::size_t>(n, 1));
  std::vector<std::size_t> positions;
  for (std::size_t i = 1; i < n; ++i) positions.push_back(i);
  std::vector<std::size_t> cuts;
  for (std::size_t c = 0; c + 1 < k; ++c) {
    const std::size_t j = c + Pick(rng, positions.size() - c);
    std::swap(positions[c], positions[j]);
    cuts.push_back(positions[c]);
  }
  return DraftAt(file, std::move(cuts), rng, options);
}

void AddIgnoredEntries(DirDraft* d, Rng& rng) {
  auto text = [](const char* s) { return std::vector<std::uint8_t>(s, s + std::char_traits<char>::length(s)); };
  // Names stay unique: an entry already there (a config, the torch file) wins.
  auto add = [&](const char* name, qd::DirEntryKind kind, std::vector<std::uint8_t> bytes = {}) {
    auto named = [&](const auto& e) { return e.name == name; };
    if (std::none_of(d->shards.begin(), d->shards.end(), named) &&
        std::none_of(d->others.begin(), d->others.end(), named)) {
      d->others.push_back({name, kind, std::move(bytes)});
    }
  };
  if (Coin(rng)) add("generation_config.json", qd::DirEntryKind::kRegular, text("{\"bos_token_id\": 1}\n"));
  if (Coin(rng, 3)) add("tokenizer.json", qd::DirEntryKind::kRegular, text("{\"version\": \"1.0\"}"));
  // Not weight files by name: not pytorch_model*.bin, not *.safetensors.
  if (Coin(rng, 4)) add("training_args.bin", qd::DirEntryKind::kRegular, text("PK\3\4 not read"));
  if (Coin(rng, 5)) add("optimizer.pt", qd::DirEntryKind::kRegular, text("not read"));
  if (Coin(rng, 5)) add("original", qd::DirEntryKind::kOther);
  if (Coin(rng, 5)) add("tokenizer.model", qd::DirEntryKind::kEscaping);
  // Weight-file names that are not regular count only when an index names
  // them (docs/model_dir.md 2): a link out of the directory, a subdirectory.
  if (Coin(rng, 6)) add("consolidated.safetensors", qd::DirEntryKind::kEscaping);
  if (Coin(rng, 6)) add("pytorch_model.bin", qd::DirEntryKind::kOther);
  // An HF config without quantization_config is no config source (docs/gptq.md 1).
  if (Coin(rng, 3)) {
    add("config.json", qd::DirEntryKind::kRegular,
        text("{\"architectures\": [\"LlamaForCausalLM\"], \"torch_dtype\": \"float16\"}"));
  }
}

}  // namespace dir_gen

using namespace dir_gen;

GeneratedDir ModelDirValid(Rng& rng) {
  // GPTQ, bitsandbytes, FP8 or a plain container, cut into shards; RBQ or a
  // torch file as the one weight file of a set without an index (RBQ
  // checkpoints are single files: IDX-013).
  const std::uint64_t kind = Pick(rng, 9);
  DirDraft d;
  std::string model;
  if (kind < 6 || kind == 8) {
    const Generated g = kind == 8 ? Fp8Valid(rng)
                        : kind < 3 ? GptqValid(rng)
                        : kind < 5 ? BnbValid(rng)
                                   : SafetensorsValid(rng);
    model = g.description;
    d = DraftOf(g, rng);
  } else {
    const Generated g = kind == 6 ? RbqValid(rng) : PtValid(rng);
    model = g.description;
    d.with_index = false;
    d.shards.push_back({kind == 6 ? "model.safetensors" : "pytorch_model.bin", {}, false, {}, g.bytes, true});
    d.what = "the file alone";
  }
  AddIgnoredEntries(&d, rng);
  return Write(d, "", "valid directory, " + model + ": " + d.what);
}

GeneratedDir ShardModel(const Generated& file, Rng& rng) {
  const DirDraft d = DraftOf(file, rng);
  return Write(d, "", "model split: " + d.what);
}

GeneratedDir ShardModelAt(const Generated& file, const std::vector<std::size_t>& cuts, Rng& rng) {
  const DirDraft d = DraftAt(file, cuts, rng);
  return Write(d, "", "model split at given tensors: " + d.what);
}

}  // namespace qd::gen
