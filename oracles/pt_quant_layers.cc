// pt_quant_layers.cc: docs/pt.md 6.5, the oracle side.
#include "oracles/pt_quant_layers.h"

#include <algorithm>
#include <cstdint>

#include "oracles/awq.h"
#include "oracles/gptq.h"

namespace qd::oracle {

void AppendPtShard(qd::ByteView file, const PtTables& tables, std::size_t shard, MergedTable* table) {
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
    const std::vector<std::uint8_t>* bytes = &source.bytes;
    if (source.bytes.size() != length) {  // not held by the reading: read it through its layout
      table->held.push_back(PtTensorCOrderBytes(file, source.shape, source.layout));
      bytes = &table->held.back();
    }
    static const std::uint8_t kNoByte = 0;  // an empty tensor's data: never read
    tensor.data = bytes->empty() ? &kNoByte : bytes->data();
    const std::vector<std::uint64_t>* shape = &source.shape;
    const PtTensorLayout* layout = &source.layout;
    tensor.pt_byte_offset = [shape, layout](std::uint64_t k) {
      return static_cast<std::int64_t>(PtByteOffset(*shape, *layout, k));
    };
    table->tensors.push_back(std::move(tensor));
  }
  std::sort(table->tensors.begin() + static_cast<std::ptrdiff_t>(first), table->tensors.end(),
            [](const TableTensor& a, const TableTensor& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.end != b.end) return a.end < b.end;
              return a.name < b.name;
            });
}

bool StreamPtQuantTable(const MergedTable& table, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                        qd::TensorSink& sink, std::string* format) {
  // No config: GPTQ-like names in a .pt file stay ordinary tensors
  // (docs/pt.md 6.5, Decision).
  if (configs.empty()) return false;
  if (HasAwqLayer(table)) {  // AWQ first, as in a safetensors file (docs/awq.md 2)
    *format = "awq";
    StreamAwqTable(table, file_name, configs, outcome, sink);
    return true;
  }
  if (HasGptqLayer(table)) {
    *format = "gptq";
    StreamGptqTable(table, file_name, configs, outcome, sink);
    return true;
  }
  return false;
}

}  // namespace qd::oracle
