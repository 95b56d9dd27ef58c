// pt_quant_layers.cc: docs/pt.md 6.5, the oracle side.
#include "oracles/pt_quant_layers.h"

#include <algorithm>
#include <cstdint>

#include "oracles/awq.h"
#include "oracles/gptq.h"

namespace qd::oracle {

namespace {

// Appends the tensor table of an accepted .pt file as shard SHARD of
// *TABLE (docs/pt.md 6.4's keys and offsets) with the C-order bytes
// (WITH_BYTES; held by *TABLE when TABLES does not hold them), or without
// them (data points at no byte: a table for detection only).
void AppendShard(qd::ByteView file, const PtTables& tables, std::size_t shard, bool with_bytes,
                 MergedTable* table) {
  const std::size_t first = table->tensors.size();
  for (const PtTensorBytes& source : tables.tensors) {
    TableTensor tensor;
    tensor.name = source.name;
    tensor.dtype = source.dtype;
    tensor.shape = source.shape;
    tensor.element_count = 1;
    for (const std::uint64_t size : source.shape) tensor.element_count *= size;  // accepted: fits
    tensor.begin = source.layout.begin;
    tensor.end = source.layout.end;
    tensor.shard = shard;
    tensor.header_offset = tables.pickle_start;
    const std::uint64_t length = tensor.element_count * source.layout.item_size;
    static const std::vector<std::uint8_t> kNoBytes;
    const std::vector<std::uint8_t>* bytes = with_bytes ? &source.bytes : &kNoBytes;
    if (with_bytes && source.bytes.size() != length) {  // not held by the reading: read it through its layout
      table->held.push_back(PtTensorCOrderBytes(file, source.shape, source.layout));
      bytes = &table->held.back();
    }
    static const std::uint8_t kNoByte = 0;  // an empty tensor's data: never read
    tensor.data = bytes->empty() ? &kNoByte : bytes->data();
    tensor.pt_tensor = &source;
    table->tensors.push_back(std::move(tensor));
  }
  std::sort(table->tensors.begin() + static_cast<std::ptrdiff_t>(first), table->tensors.end(),
            [](const TableTensor& a, const TableTensor& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.end != b.end) return a.end < b.end;
              return a.name < b.name;
            });
}

}  // namespace

bool StreamPtQuantShards(const std::vector<PtShardTables>& shards, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                         qd::TensorSink& sink, std::string* format, MergedTable* table) {
  // No config: GPTQ-like names in a .pt file stay ordinary tensors
  // (docs/pt.md 6.5, Decision).
  if (configs.empty()) return false;
  MergedTable names;  // detection reads no tensor data
  for (std::size_t rank = 0; rank < shards.size(); ++rank) {
    AppendShard(shards[rank].file, *shards[rank].tables, rank, false, &names);
  }
  const bool awq = HasAwqLayer(names);  // AWQ first, as in a safetensors file (docs/awq.md 2)
  if (!awq && !HasGptqLayer(names)) return false;
  for (std::size_t rank = 0; rank < shards.size(); ++rank) {
    AppendShard(shards[rank].file, *shards[rank].tables, rank, true, table);
  }
  *format = awq ? "awq" : "gptq";
  if (awq) {
    StreamAwqTable(*table, file_name, configs, outcome, sink);
  } else {
    StreamGptqTable(*table, file_name, configs, outcome, sink);
  }
  return true;
}

}  // namespace qd::oracle
