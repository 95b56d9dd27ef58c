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
#include <deque>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {

struct PtTensorBytes;  // pt.h

// One tensor of the table: its container entry (begin and end relative to
// its own shard's data) and where its bytes are.
struct TableTensor : ContainerTensor {
  std::size_t shard = 0;               // rank of its shard (byte order of shard names)
  const std::uint8_t* data = nullptr;  // its first data byte, in its shard's bytes
  std::uint64_t data_start = 0;        // 8 + N of its shard: byte k is at data_start + begin + k
  // Where a finding about a header-level fact of the tensor points: 8 in a
  // safetensors shard, ds of data.pkl in a .pt file (docs/pt.md 6.4).
  std::int64_t header_offset = 8;
  // Set for a .pt tensor (docs/pt.md 6.4: byte k of a view maps through its
  // strides): the tensor as the file's reading holds it, whose shape and
  // layout give the finding offset of byte k of its C-order bytes, instead
  // of data_start + begin + k. begin and end are then 6.4's absolute keys.
  const PtTensorBytes* pt_tensor = nullptr;

  // The byte_offset of a finding about byte k of the tensor's data
  // (defined in pt_views.cc, beside PtByteOffset).
  std::int64_t ByteOffset(std::uint64_t k) const;
};

// A deque: a file's records move in from its container's deque one by one,
// each block of that deque freed as it empties, so the records are held once
// while the table is built (issue 9, section 3: a vector sized up front held
// them twice, 288 bytes a tensor at the peak of every detection).
using TableTensors = std::deque<TableTensor>;
// A ContainerTensor is 80 bytes and a TableTensor 120 (one pointer for the
// .pt mapping, not a std::function): libstdc++ puts six of the one and four
// of the other in a 480-byte deque block, both served from glibc's 496-byte
// chunks. So while a file's records move into the table, the blocks the
// container frees are the blocks the table takes; with blocks of different
// sizes none fit, and detection held about 116 MB of freed blocks on a
// header of 1M tiny entries (issue 9, section 3). Measured, not a
// correctness matter.
static_assert(sizeof(ContainerTensor) == 80 && sizeof(TableTensor) == 120, "see the comment above");

struct MergedTable {
  // The union of the shards' __metadata__ (docs/model_dir.md 3, IDX-012
  // keeps it consistent), the first shard's order then new keys.
  bool has_metadata = false;
  std::vector<std::pair<std::string, std::string>> metadata;
  // Sorted by (shard, begin, end, name bytes).
  TableTensors tensors;
  // The C-order bytes of .pt tensors that are not in place in their file
  // (views, big-endian files), which their `data` points into; a deque, so
  // appending keeps them where they are.
  std::deque<std::vector<std::uint8_t>> held;
};

// Appends an accepted container's tensors as shard SHARD (ranks appended in
// increasing order keep the table sorted) and its __metadata__ keys not yet
// in the table. The tensors point into file. The container is taken over
// (its entries move into the table: a file's header records are held once,
// issue 9 section 3); pass a copy to keep it.
inline void AppendShard(qd::ByteView file, Container container, std::size_t shard,
                        MergedTable* table) {
  if (container.has_metadata) table->has_metadata = true;
  if (table->metadata.empty()) {
    // The first shard's members as they are: no set of key copies for the
    // one shard of a single file (issue 9, section 3: a header of 4M
    // metadata members).
    table->metadata = std::move(container.metadata);
  } else {
    std::set<std::string> known;
    for (const auto& present : table->metadata) known.insert(present.first);
    for (auto& member : container.metadata) {
      if (known.insert(member.first).second) table->metadata.push_back(std::move(member));
    }
  }
  // Each entry leaves the container as it enters the table (TableTensors).
  while (!container.tensors.empty()) {
    TableTensor tensor;
    static_cast<ContainerTensor&>(tensor) = std::move(container.tensors.front());
    container.tensors.pop_front();
    tensor.shard = shard;
    tensor.data = file.data + container.data_start + tensor.begin;
    tensor.data_start = container.data_start;
    table->tensors.push_back(std::move(tensor));
  }
}

// The table of one accepted file (its container taken over).
inline MergedTable TableOfFile(qd::ByteView file, Container container) {
  MergedTable table;
  AppendShard(file, std::move(container), 0, &table);
  return table;
}

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_MERGED_TABLE_H_
