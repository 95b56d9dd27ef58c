// model_dir.cc: docs/model_dir.md, the codec side: weight-set discovery
// (section 2), the index and shard checks in the documented order (section
// 3), the merged table (section 4) handed to the format readers.
#include "codecs/model_dir.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/bnb_pt_layers.h"
#include "codecs/finding.h"
#include "codecs/awq.h"
#include "codecs/fp8.h"
#include "codecs/gptq.h"
#include "codecs/pt.h"
#include "codecs/pt_quant_layers.h"
#include "codecs/rbq.h"
#include "codecs/recognised.h"
#include "codecs/safetensors.h"
#include "codecs/strict_json.h"
#include "codecs/tensor_table.h"

namespace qd::codec {
namespace {

using nlohmann::json;

constexpr std::int64_t kHeaderOffset = 8;
constexpr std::int64_t kNoOffset = -1;

enum class WeightKind : std::uint8_t { kNone, kSafetensors, kTorch };

constexpr std::string_view kSafetensorsSuffix = ".safetensors";
constexpr std::string_view kSafetensorsIndexSuffix = ".safetensors.index.json";
constexpr std::string_view kTorchSuffix = ".bin";
constexpr std::string_view kTorchIndexSuffix = ".bin.index.json";
constexpr std::string_view kTorchPrefix = "pytorch_model";


// Section 2's table: what a name makes an entry.
WeightKind WeightFileKind(std::string_view name) {
  if (name.ends_with(kSafetensorsSuffix)) return WeightKind::kSafetensors;
  if (name.starts_with(kTorchPrefix) && name.ends_with(kTorchSuffix)) return WeightKind::kTorch;
  return WeightKind::kNone;
}

WeightKind IndexKind(std::string_view name) {
  if (name.ends_with(kSafetensorsIndexSuffix)) return WeightKind::kSafetensors;
  if (name.ends_with(kTorchIndexSuffix)) return WeightKind::kTorch;
  return WeightKind::kNone;
}

// The weight set's name up to its kind's suffix (section 2, configs).
std::string Stem(std::string_view name) {
  for (std::string_view suffix :
       {kSafetensorsIndexSuffix, kTorchIndexSuffix, kSafetensorsSuffix, kTorchSuffix}) {
    if (name.ends_with(suffix)) return std::string(name.substr(0, name.size() - suffix.size()));
  }
  return std::string(name);
}

// Section 3 step 3: a name that cannot be a file directly in the directory.
bool NameEscapes(std::string_view name) {
  return name.empty() || name == "." || name == ".." ||
         name.find_first_of(std::string_view("/\\\0", 3)) != std::string_view::npos;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

struct Index {
  // weight_map, sorted by tensor name (strict JSON: keys are unique).
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::vector<std::string> shards;   // the distinct values, byte order
  std::optional<json> total_size;    // metadata.total_size when present
};

// What steps 7 and 8 need of a shard of either kind.
struct ShardTensors {
  std::vector<std::string_view> names;  // (data begin, data end, name bytes) order
  // Where a header-level fact of the shard points: 8, or ds of data.pkl in
  // a torch shard (docs/pt.md 6.4).
  std::int64_t header_offset = kHeaderOffset;
  unsigned __int128 tensor_bytes = 0;  // sum of end - begin
  std::uint64_t file_bytes = 0;
};

ShardTensors TensorsOf(const Container& shard) {
  ShardTensors out;
  out.file_bytes = shard.file.size;
  for (const TensorEntry& t : shard.tensors) {
    out.names.push_back(t.name);
    out.tensor_bytes += t.end - t.begin;
  }
  return out;
}

// docs/pt.md 6.4: the tensor table, ordered by begin = ds + storage_offset *
// isz, end = begin + numel * isz, then name bytes.
ShardTensors TensorsOf(const PtResult& shard, std::uint64_t file_bytes) {
  ShardTensors out;
  out.file_bytes = file_bytes;
  out.header_offset = static_cast<std::int64_t>(shard.pickle_begin);
  std::vector<std::size_t> order(shard.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](std::size_t i) {
    const PtTensor& t = shard.TableTensor(i);
    return std::tie(t.begin, t.end, shard.tensors[i].name);
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  for (std::size_t i : order) {
    out.names.push_back(shard.tensors[i].name);
    out.tensor_bytes += shard.TableTensor(i).end - shard.TableTensor(i).begin;
  }
  return out;
}

class DirReader {
 public:
  DirReader(const qd::ModelDirListing& listing, ModelDirRead* read, const ModelDirOptions& options)
      : listing_(listing), read_(read), options_(options) {}

  qd::Outcome Run(TensorSink& sink, Kernel kernel);

 private:
  bool Error(const char* rule, std::string file, std::string tensor, std::string field,
             std::int64_t offset, std::string message) {
    outcome_.findings.push_back(MakeFinding(rule, qd::Severity::kError, std::move(file),
                                            std::move(tensor), std::move(field), offset,
                                            std::move(message)));
    outcome_.refused = true;
    return false;
  }
  std::string PathOf(std::string_view name) const { return listing_.prefix + std::string(name); }
  const qd::DirEntry* Find(std::string_view name) const {
    const auto it = std::lower_bound(
        listing_.entries.begin(), listing_.entries.end(), name,
        [](const qd::DirEntry& e, std::string_view n) { return std::string_view(e.name) < n; });
    return it != listing_.entries.end() && it->name == name ? &*it : nullptr;
  }
  const qd::DirEntry* FindRegular(std::string_view name) const {
    const qd::DirEntry* e = Find(name);
    return e != nullptr && e->kind == qd::DirEntryKind::kRegular ? e : nullptr;
  }

  bool FindWeightSet();
  std::vector<std::string> ConfigNames() const;
  std::vector<qd::SideFile> Configs() const;
  bool ReadIndex(Index* index);
  bool CheckShardNames(const Index& index);
  template <class Result, class ReadOne>
  std::vector<std::optional<Result>> ReadEachShard(const Index& index, ReadOne read_one) const;
  bool ReadShards(const Index& index, std::vector<Container>* shards);
  bool CheckTensorsAgainstIndex(const Index& index, const std::vector<ShardTensors>& shards);
  bool CheckTotalSize(const Index& index, const std::vector<ShardTensors>& shards);
  void ReadTorchShards(const Index& index, TensorSink& sink);
  bool CheckShardMetadata(const Index& index, const std::vector<Container>& shards);
  bool CheckNoBlockDtypes(const Index& index, const std::vector<Container>& shards);
  void NameShards(const TensorTable& table, const std::string& name, const Index& index,
                  std::vector<qd::Finding>* findings) const;
  void ReadFormat(TensorTable table, const std::string& name, const Index* index,
                  TensorSink& sink, Kernel kernel);
  void OneFile(TensorSink& sink, Kernel kernel);

  const qd::ModelDirListing& listing_;
  ModelDirRead* read_;
  const ModelDirOptions& options_;
  qd::Outcome outcome_;
  WeightKind kind_ = WeightKind::kNone;
  const qd::DirEntry* index_entry_ = nullptr;  // the set's index, or null
  const qd::DirEntry* file_entry_ = nullptr;   // the one weight file without an index
};

// Section 2: IDX-001, IDX-002, then the set.
bool DirReader::FindWeightSet() {
  std::vector<const qd::DirEntry*> files[3], indexes[3];
  for (const qd::DirEntry& e : listing_.entries) {
    if (e.kind != qd::DirEntryKind::kRegular) continue;
    if (WeightKind k = IndexKind(e.name); k != WeightKind::kNone) {
      indexes[static_cast<int>(k)].push_back(&e);
    } else if (WeightKind k2 = WeightFileKind(e.name); k2 != WeightKind::kNone) {
      files[static_cast<int>(k2)].push_back(&e);
    }
  }
  constexpr int kSt = static_cast<int>(WeightKind::kSafetensors);
  constexpr int kPt = static_cast<int>(WeightKind::kTorch);
  const bool st = !files[kSt].empty() || !indexes[kSt].empty();
  const bool pt = !files[kPt].empty() || !indexes[kPt].empty();
  if (!st && !pt) {
    return Error("IDX-001", listing_.dir, "", "weight_set", kNoOffset,
                 "no weight file (*.safetensors, pytorch_model*.bin) and no index in the directory");
  }
  auto names = [](const std::vector<const qd::DirEntry*>& a, const std::vector<const qd::DirEntry*>& b) {
    std::string s;
    for (const auto* list : {&a, &b}) {
      for (const qd::DirEntry* e : *list) s += (s.empty() ? "" : ", ") + e->name;
    }
    return s;
  };
  if (st && pt) {
    return Error("IDX-002", listing_.dir, "", "weight_set", kNoOffset,
                 "safetensors and torch weights both present (" +
                     names(indexes[kSt], files[kSt]) + "; " + names(indexes[kPt], files[kPt]) +
                     "): name the one to read");
  }
  kind_ = st ? WeightKind::kSafetensors : WeightKind::kTorch;
  const int k = static_cast<int>(kind_);
  if (indexes[k].size() > 1) {
    return Error("IDX-002", listing_.dir, "", "weight_set", kNoOffset,
                 "several indexes (" + names(indexes[k], {}) + "): name the one to read");
  }
  if (indexes[k].size() == 1) {
    index_entry_ = indexes[k][0];
    return true;
  }
  if (files[k].size() > 1) {
    return Error("IDX-002", listing_.dir, "", "weight_set", kNoOffset,
                 "several weight files and no index (" + names(files[k], {}) +
                     "): name the one to read");
  }
  file_entry_ = files[k][0];
  return true;
}

// Section 2: the config candidates of docs/gptq.md section 1 present in the
// directory, in priority order.
std::vector<std::string> DirReader::ConfigNames() const {
  const std::string stem = Stem(index_entry_ != nullptr ? index_entry_->name : file_entry_->name);
  std::vector<std::string> names;
  for (const std::string& name : {stem + ".quantize_config.json", std::string("quantize_config.json"),
                                  std::string("quant_config.json"), std::string("config.json")}) {
    if (FindRegular(name) != nullptr) names.push_back(name);
  }
  return names;
}

std::vector<qd::SideFile> DirReader::Configs() const {
  std::vector<qd::SideFile> configs;
  for (const std::string& name : ConfigNames()) {
    const qd::ByteView bytes = FindRegular(name)->bytes;
    configs.push_back({PathOf(name), std::vector<std::uint8_t>(bytes.data, bytes.data + bytes.size)});
  }
  return configs;
}

// Step 2, IDX-003.
bool DirReader::ReadIndex(Index* index) {
  const std::string path = PathOf(index_entry_->name);
  auto refuse = [&](const char* field, const std::string& why) {
    return Error("IDX-003", path, "", field, kNoOffset, why);
  };
  std::optional<json> doc = ParseStrictJson(index_entry_->bytes.data, index_entry_->bytes.size);
  if (!doc || !doc->is_object()) return refuse("weight_map", "the index is not strict JSON with an object on top");
  const auto map = doc->find("weight_map");
  if (map == doc->end()) return refuse("weight_map", "the index has no weight_map");
  if (!map->is_object()) return refuse("weight_map", "weight_map is not an object");
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it.value().is_string()) {
      return refuse("weight_map", "weight_map[" + Quote(it.key()) + "] is not a string");
    }
    index->weight_map.emplace_back(it.key(), it.value().get<std::string>());
  }
  const auto metadata = doc->find("metadata");
  if (metadata != doc->end()) {
    if (!metadata->is_object()) return refuse("metadata", "metadata is not an object");
    const auto total = metadata->find("total_size");
    if (total != metadata->end()) index->total_size = *total;
  }
  std::sort(index->weight_map.begin(), index->weight_map.end());
  for (const auto& [tensor, shard] : index->weight_map) index->shards.push_back(shard);
  std::sort(index->shards.begin(), index->shards.end());
  index->shards.erase(std::unique(index->shards.begin(), index->shards.end()), index->shards.end());
  return true;
}

// Steps 3-5: IDX-004, IDX-005, IDX-006.
bool DirReader::CheckShardNames(const Index& index) {
  const std::string path = PathOf(index_entry_->name);
  auto first_tensor = [&](const std::string& shard) {
    for (const auto& [tensor, s] : index.weight_map) {
      if (s == shard) return tensor;
    }
    return std::string();
  };
  for (const std::string& shard : index.shards) {
    const qd::DirEntry* e = NameEscapes(shard) ? nullptr : Find(shard);
    if (NameEscapes(shard) || (e != nullptr && e->kind == qd::DirEntryKind::kEscaping)) {
      return Error("IDX-004", path, first_tensor(shard), "weight_map", kNoOffset,
                   "shard " + Quote(shard) + " is not a file in the directory: it escapes it");
    }
  }
  for (const std::string& shard : index.shards) {
    if (FindRegular(shard) == nullptr) {
      return Error("IDX-005", PathOf(shard), first_tensor(shard), "weight_map", kNoOffset,
                   "the index names shard " + Quote(shard) + ", which is not in the directory");
    }
  }
  for (const qd::DirEntry& e : listing_.entries) {
    if (e.kind != qd::DirEntryKind::kRegular || WeightFileKind(e.name) != kind_) continue;
    if (!std::binary_search(index.shards.begin(), index.shards.end(), e.name)) {
      return Error("IDX-006", PathOf(e.name), "", "weight_map", kNoOffset,
                   "a weight file the index does not name");
    }
  }
  return true;
}

// READ_ONE(rank) for every shard, options_.jobs at a time, results in shard
// order. A shard after the first refused one (in shard order) may be left
// unread (nullopt): the caller stops at that refusal, as a sequential reading
// does, so the outcome does not depend on the number of jobs.
template <class Result, class ReadOne>
std::vector<std::optional<Result>> DirReader::ReadEachShard(const Index& index,
                                                            ReadOne read_one) const {
  const std::size_t count = index.shards.size();
  std::vector<std::optional<Result>> results(count);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> first_refused{count};
  std::mutex mutex;  // guards done, failure and the progress calls
  std::size_t done = 0;
  std::exception_ptr failure;
  auto work = [&] {
    for (std::size_t s; (s = next.fetch_add(1)) < count;) {
      if (s > first_refused.load()) continue;
      try {
        results[s] = read_one(s);
      } catch (...) {  // a reader must not throw; the caller's guard reports it
        const std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        first_refused.store(0);
        return;
      }
      if (results[s]->refused) {
        std::size_t seen = first_refused.load();
        while (s < seen && !first_refused.compare_exchange_weak(seen, s)) {
        }
      }
      if (options_.progress) {
        const std::lock_guard<std::mutex> lock(mutex);
        options_.progress(++done, count, index.shards[s]);
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(std::max(options_.jobs, 1u), count);
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
  return results;
}

// Step 6: the container rules on each shard, in shard order.
bool DirReader::ReadShards(const Index& index, std::vector<Container>* shards) {
  std::vector<std::optional<ContainerResult>> results =
      ReadEachShard<ContainerResult>(index, [&](std::size_t s) {
        return ReadContainer(FindRegular(index.shards[s])->bytes, PathOf(index.shards[s]));
      });
  shards->reserve(results.size());
  for (std::optional<ContainerResult>& r : results) {
    for (qd::Finding& f : r->findings) outcome_.findings.push_back(std::move(f));
    if (r->refused) {
      outcome_.refused = true;
      return false;
    }
    shards->push_back(std::move(r->container));
    r.reset();  // its findings and header records moved; drop the rest now
  }
  return true;
}

// Step 7: IDX-007..IDX-010.
bool DirReader::CheckTensorsAgainstIndex(const Index& index, const std::vector<ShardTensors>& shards) {
  auto mapped_to = [&](const std::string& tensor) -> const std::string* {
    const auto it = std::lower_bound(
        index.weight_map.begin(), index.weight_map.end(), tensor,
        [](const auto& entry, const std::string& t) { return entry.first < t; });
    return it != index.weight_map.end() && it->first == tensor ? &it->second : nullptr;
  };
  std::unordered_map<std::string_view, std::size_t> shard_of;  // tensor -> shard rank
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const std::string& shard = index.shards[s];
    const std::int64_t at = shards[s].header_offset;
    for (const std::string_view name : shards[s].names) {
      const std::string t(name);
      const auto [it, inserted] = shard_of.emplace(name, s);
      if (!inserted) {
        return Error("IDX-007", PathOf(shard), t, "weight_map", at,
                     "tensor " + Quote(t) + " is also in shard " + Quote(index.shards[it->second]));
      }
      const std::string* named = mapped_to(t);
      if (named == nullptr) {
        return Error("IDX-008", PathOf(shard), t, "weight_map", at,
                     "tensor " + Quote(t) + " is in the shard but not in the index");
      }
      if (*named != shard) {
        return Error("IDX-009", PathOf(shard), t, "weight_map", at,
                     "the index puts tensor " + Quote(t) + " in shard " + Quote(*named));
      }
    }
  }
  for (const auto& [tensor, shard] : index.weight_map) {
    if (shard_of.count(tensor) == 0) {
      // The shard the index names: its header offset (every shard was read).
      const std::size_t rank = static_cast<std::size_t>(
          std::lower_bound(index.shards.begin(), index.shards.end(), shard) - index.shards.begin());
      return Error("IDX-010", PathOf(shard), tensor, "weight_map", shards[rank].header_offset,
                   "the index puts tensor " + Quote(tensor) + " in this shard, which does not hold it");
    }
  }
  return true;
}

// Step 8: IDX-011, either convention (the matching one is reported).
bool DirReader::CheckTotalSize(const Index& index, const std::vector<ShardTensors>& shards) {
  if (!index.total_size) return true;
  unsigned __int128 tensor_bytes = 0, file_bytes = 0;
  for (const ShardTensors& shard : shards) {
    tensor_bytes += shard.tensor_bytes;
    file_bytes += shard.file_bytes;
  }
  const json& v = *index.total_size;
  // Digits alone: nlohmann keeps a token with a minus sign ("-0" included)
  // as a signed integer, and one without as unsigned.
  std::optional<std::uint64_t> stated;
  if (v.is_number_unsigned()) stated = v.get<std::uint64_t>();
  if (stated && *stated == tensor_bytes) {
    if (read_ != nullptr) read_->total_size_convention = "tensor bytes";
    return true;
  }
  if (stated && *stated == file_bytes) {
    if (read_ != nullptr) read_->total_size_convention = "file bytes";
    return true;
  }
  auto text = [](unsigned __int128 n) {
    std::string s;
    do {
      s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(n % 10)));
      n /= 10;
    } while (n != 0);
    return s;
  };
  return Error("IDX-011", PathOf(index_entry_->name), "", "total_size", kNoOffset,
               "metadata.total_size is " + v.dump() + ", neither the tensors' bytes (" +
                   text(tensor_bytes) + ") nor the shard files' bytes (" + text(file_bytes) + ")");
}

// Step 9: IDX-012.
bool DirReader::CheckShardMetadata(const Index& index, const std::vector<Container>& shards) {
  std::unordered_map<std::string_view, std::string_view> seen;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (const auto& [key, value] : shards[s].metadata) {
      const auto [it, inserted] = seen.emplace(key, value);
      if (!inserted && it->second != value) {
        return Error("IDX-012", PathOf(index.shards[s]), "", "__metadata__", kHeaderOffset,
                     "__metadata__[" + Quote(key) + "] differs from an earlier shard's");
      }
    }
  }
  return true;
}

// Step 10: IDX-013.
bool DirReader::CheckNoBlockDtypes(const Index& index, const std::vector<Container>& shards) {
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (const TensorEntry& t : shards[s].tensors) {
      if (t.dtype == Dtype::kQ4B32 || t.dtype == Dtype::kQ8B32) {
        return Error("IDX-013", PathOf(index.shards[s]), std::string(t.name), "dtype", kHeaderOffset,
                     "a Q4B32/Q8B32 tensor in a sharded set: RBQ checkpoints are single files");
      }
    }
  }
  return true;
}

// Section 4: a format reader's finding about a tensor of an index set names
// the shard holding it, instead of NAME (the directory).
void DirReader::NameShards(const TensorTable& table, const std::string& name, const Index& index,
                           std::vector<qd::Finding>* findings) const {
  if (findings->empty()) return;
  std::unordered_map<std::string_view, std::uint32_t> shard_of;
  for (std::size_t i = 0; i < table.size(); ++i) shard_of.emplace(table[i].name, table[i].shard);
  for (qd::Finding& f : *findings) {
    if (f.file != name) continue;
    const auto it = shard_of.find(f.tensor);
    if (it != shard_of.end()) f.file = PathOf(index.shards[it->second]);
  }
}

// Step 11 and section 5: detection on the table (bitsandbytes, recognised, AWQ,
// GPTQ, FP8, else the container alone), the format's rules, its decoded tensors.
// Findings about a tensor of an index set name its shard (section 4).
void DirReader::ReadFormat(TensorTable table, const std::string& name, const Index* index,
                           TensorSink& sink, Kernel kernel) {
  std::vector<qd::Finding> findings;
  BnbResult bnb = ReadBnbTable(std::move(table), name);
  std::optional<GptqResult> gptq;
  std::optional<RecognisedResult> recognised;
  std::optional<AwqResult> awq;
  std::optional<Fp8Result> fp8;
  if (bnb.is_bnb) {
    read_->format = "bnb";
    findings = std::move(bnb.findings);
    outcome_.refused = bnb.refused;
  } else if (HasRecognisedLayer(bnb.table, Configs())) {  // before AWQ and GPTQ: docs/recognised.md 2
    read_->format = "recognised";
    recognised = ReadRecognisedTable(std::move(bnb.table), name, Configs());
    findings = std::move(recognised->findings);
    outcome_.refused = recognised->refused;
  } else if (HasAwqLayer(bnb.table)) {  // AWQ before GPTQ (docs/awq.md section 2)
    read_->format = "awq";
    awq = ReadAwqTable(std::move(bnb.table), name, Configs());
    findings = std::move(awq->findings);
    outcome_.refused = awq->refused;
  } else if (HasGptqLayer(bnb.table)) {
    read_->format = "gptq";
    gptq = ReadGptqTable(std::move(bnb.table), name, Configs());
    findings = std::move(gptq->findings);
    outcome_.refused = gptq->refused;
  } else if (HasFp8Layer(bnb.table)) {  // after GPTQ (docs/fp8.md section 2)
    read_->format = "fp8";
    fp8 = ReadFp8Table(std::move(bnb.table), name, Configs());
    findings = std::move(fp8->findings);
    outcome_.refused = fp8->refused;
  } else {
    read_->format = "safetensors";
  }
  if (index != nullptr) {
    NameShards(gptq         ? gptq->table
               : recognised ? recognised->table
               : awq        ? awq->table
               : fp8        ? fp8->table
                            : bnb.table,
               name, *index, &findings);
  }
  for (qd::Finding& f : findings) outcome_.findings.push_back(std::move(f));
  if (outcome_.refused) return;
  if (bnb.is_bnb) {
    StreamBnbLayers(bnb, sink, kernel);
  } else if (recognised) {
    StreamRecognisedTensors(*recognised, sink);
  } else if (awq) {
    StreamAwqLayers(*awq, sink);
  } else if (gptq) {
    StreamGptqLayers(*gptq, sink, kernel);
  } else if (fp8) {
    StreamFp8Layers(*fp8, sink);
  } else {
    bnb.table.StreamFloats(sink);
  }
}

// A torch index's set (docs/model_dir.md 3 steps 6-8 and 11 over docs/pt.md):
// each shard through the .pt reader (docs/pt.md 8 steps 1-7), the tensors
// against the index, total_size (a .pt file has no __metadata__ and no block
// dtype: steps 9 and 10 cannot apply), then the shards' tables as one: the
// floating tensors of docs/pt.md 6.3 in (shard rank, begin, end, name)
// order. A bitsandbytes layer in any shard is not read yet (the merged
// table's findings would have one header offset and one value table per
// shard, which the contract does not settle): unsupported, no verdict.
void DirReader::ReadTorchShards(const Index& index, TensorSink& sink) {
  std::vector<PtResult> shards;
  std::vector<ShardTensors> tensors;
  shards.reserve(index.shards.size());
  for (const std::string& shard : index.shards) {
    const qd::ByteView bytes = FindRegular(shard)->bytes;
    PtResult r = ReadPt(bytes, PathOf(shard));
    for (qd::Finding& f : r.findings) outcome_.findings.push_back(std::move(f));
    r.findings.clear();
    if (r.refused) {
      outcome_.refused = true;
      return;
    }
    tensors.push_back(TensorsOf(r, bytes.size));
    shards.push_back(std::move(r));
    if (options_.progress) options_.progress(shards.size(), index.shards.size(), shard);
  }
  read_->shards = shards.size();
  if (!CheckTensorsAgainstIndex(index, tensors) || !CheckTotalSize(index, tensors)) return;
  read_->format = "pt";
  tensors.clear();  // their names point into the readings, moved below
  std::vector<TensorTable> tables;
  tables.reserve(shards.size());
  for (std::size_t s = 0; s < shards.size(); ++s) {
    BnbResult layers = ReadPtTableLayers(std::move(shards[s]), PathOf(index.shards[s]));
    if (layers.is_bnb) {
      read_->unsupported = true;
      read_->unsupported_why = "bitsandbytes layers in a sharded torch checkpoint (" +
                               index_entry_->name + ") are not read yet; check its shards one by one";
      return;
    }
    tables.push_back(std::move(layers.table));
  }
  // docs/pt.md 6.5 over the merged table: GPTQ or AWQ layers, with the
  // directory's configs, read as in a safetensors set.
  TensorTable merged = TensorTable::FromPtShards(std::move(tables));
  PtQuantLayers quant;
  std::vector<qd::Finding> no_warnings;  // the shards' PT warnings are in outcome_ already
  if (ReadPtQuantLayers(merged, listing_.dir, Configs(), &no_warnings, &quant)) {
    read_->format = quant.format();
    NameShards(quant.table(), listing_.dir, index, &quant.findings());
    for (qd::Finding& f : quant.findings()) outcome_.findings.push_back(std::move(f));
    outcome_.refused = quant.refused();
    if (!outcome_.refused) StreamPtQuantLayers(quant, sink);
    return;
  }
  merged.StreamFloats(sink);
}

// A set without an index: the file alone (section 3, last paragraph), its
// format found from its bytes as for any file (README "Which format a file
// is": RBQ, bitsandbytes, GPTQ, .pt, else the container), whatever its name.
void DirReader::OneFile(TensorSink& sink, Kernel kernel) {
  read_->shards = 1;
  const std::string path = PathOf(file_entry_->name);
  const qd::ByteView bytes = file_entry_->bytes;
  // One parse of the header serves the RBQ question and the table.
  RbqResult file = ReadRbq(bytes, path);
  if (file.is_rbq) {
    file = RbqResult{};  // StreamRbqFile reads the header again: hold it once
    read_->format = "rbq";
    outcome_ = StreamRbqFile(bytes, path, sink, kernel);
    return;
  }
  if (file.refused) {  // the container refused it (RBQ's rules never ran)
    if (ClaimsPt(bytes)) {
      read_->format = "pt";
      outcome_ = StreamPtFile(bytes, path, sink, Configs(), &read_->format);
    } else {
      outcome_ = qd::Outcome{true, std::move(file.findings), {}};
    }
    return;
  }
  outcome_.findings = std::move(file.findings);
  ReadFormat(TensorTable::FromContainer(std::move(file.container)), path, nullptr, sink, kernel);
}

qd::Outcome DirReader::Run(TensorSink& sink, Kernel kernel) {
  if (!FindWeightSet()) return std::move(outcome_);
  read_->config_files = ConfigNames();
  if (file_entry_ != nullptr) {
    read_->weight_files = {file_entry_->name};
    OneFile(sink, kernel);
    return std::move(outcome_);
  }
  read_->indexed = true;
  Index index;
  if (!ReadIndex(&index) || !CheckShardNames(index)) return std::move(outcome_);
  read_->weight_files = index.shards;
  if (kind_ == WeightKind::kTorch) {
    ReadTorchShards(index, sink);
    return std::move(outcome_);
  }
  std::vector<Container> shards;
  if (!ReadShards(index, &shards)) return std::move(outcome_);
  read_->shards = shards.size();
  std::vector<ShardTensors> tensors;
  for (const Container& shard : shards) tensors.push_back(TensorsOf(shard));
  if (!CheckTensorsAgainstIndex(index, tensors) || !CheckTotalSize(index, tensors) ||
      !CheckShardMetadata(index, shards) || !CheckNoBlockDtypes(index, shards)) {
    return std::move(outcome_);
  }
  ReadFormat(TensorTable::FromShards(std::move(shards)), listing_.dir, &index, sink, kernel);
  return std::move(outcome_);
}

}  // namespace

qd::Outcome StreamModelDir(const qd::ModelDirListing& listing, TensorSink& sink, ModelDirRead* read,
                           Kernel kernel, const ModelDirOptions& options) {
  ModelDirRead local;
  if (read == nullptr) read = &local;
  *read = ModelDirRead{};
  return DirReader(listing, read, options).Run(sink, kernel);
}

qd::Outcome CheckModelDir(const qd::ModelDirListing& listing, ModelDirRead* read,
                          const ModelDirOptions& options) {
  DecliningSink declining;  // the readers stop before decoding
  return StreamModelDir(listing, declining, read, BestKernel(), options);
}

qd::Outcome DecodeModelDir(const qd::ModelDirListing& listing, ModelDirRead* read) {
  return CollectStream([&](TensorSink& sink) { return StreamModelDir(listing, sink, read); });
}

}  // namespace qd::codec
