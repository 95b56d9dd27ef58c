// merged_table.h: the tensors of one or more accepted safetensors containers
// read as one table (docs/model_dir.md section 4), which the GPTQ and
// bitsandbytes checks run over. A single file is the table of one shard; a
// model directory's shards are merged in shard rank order, so a layer whose
// tensors two shards hold is one layer.
//
//   MergedTable table;
//   AppendShard(file, container, /*shard=*/0, &table);
#ifndef QUANTDIFF_ORACLES_MERGED_TABLE_H_
#define QUANTDIFF_ORACLES_MERGED_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {

// One tensor of the table: its container entry (begin and end relative to
// its own shard's data) and where its bytes are.
struct TableTensor : ContainerTensor {
  std::size_t shard = 0;               // rank of its shard (byte order of shard names)
  const std::uint8_t* data = nullptr;  // its first data byte, in its shard's bytes
  std::uint64_t data_start = 0;        // 8 + N of its shard: byte k is at data_start + begin + k
};

struct MergedTable {
  // The union of the shards' __metadata__ (docs/model_dir.md 3, IDX-012
  // keeps it consistent), the first shard's order then new keys.
  bool has_metadata = false;
  std::vector<std::pair<std::string, std::string>> metadata;
  // Sorted by (shard, begin, end, name bytes).
  std::vector<TableTensor> tensors;
};

// Appends an accepted container's tensors as shard SHARD (ranks appended in
// increasing order keep the table sorted) and its __metadata__ keys not yet
// in the table. The tensors point into file.
inline void AppendShard(qd::ByteView file, const Container& container, std::size_t shard,
                        MergedTable* table) {
  if (container.has_metadata) table->has_metadata = true;
  std::set<std::string> known;
  for (const auto& present : table->metadata) known.insert(present.first);
  for (const auto& member : container.metadata) {
    if (known.insert(member.first).second) table->metadata.push_back(member);
  }
  for (const ContainerTensor& entry : container.tensors) {
    TableTensor tensor;
    static_cast<ContainerTensor&>(tensor) = entry;
    tensor.shard = shard;
    tensor.data = file.data + container.data_start + entry.begin;
    tensor.data_start = container.data_start;
    table->tensors.push_back(std::move(tensor));
  }
}

// The table of one accepted file.
inline MergedTable TableOfFile(qd::ByteView file, const Container& container) {
  MergedTable table;
  AppendShard(file, container, 0, &table);
  return table;
}

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_MERGED_TABLE_H_
