// pt.cc: the oracle's torch.save reader, written from docs/pt.md: section
// 8's steps 1..7 in order over the units of each contract section (see
// pt_model.h), and the CRC-32 of 2.4. Step 8 (the readers of the formats a
// tensor table holds) is oracles/bnb_pt_layers.cc.
#include "oracles/pt.h"

#include <set>

#include "oracles/pt_model.h"

namespace qd::oracle {

std::uint32_t PtCrc32(const std::uint8_t* bytes, std::uint64_t size) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::uint64_t i = 0; i < size; ++i) {
    crc ^= bytes[i];
    for (int bit = 0; bit < 8; ++bit) {
      if ((crc & 1u) != 0) {
        crc = (crc >> 1) ^ 0xEDB88320u;
      } else {
        crc = crc >> 1;
      }
    }
  }
  return crc ^ 0xFFFFFFFFu;
}

// ---------------------------------------------------------------------------
// Section 8 steps 1..7: ReadPtTables.

namespace pt_internal {
namespace {

// Steps 1..7 and the tables; false after the refusal.
bool ReadTables(qd::ByteView file, Report& report, bool want_values, PtGraphWanted graph_wanted,
                std::uint64_t materialise_limit, PtTables* tables) {
  Archive archive;
  if (!ReadEndRecords(file, report, &archive)) return false;          // step 1
  if (!ReadCentralDirectory(file, report, &archive)) return false;    // step 2
  if (!ReadEntries(file, report, &archive)) return false;             // step 3
  Records records;
  if (!ReadRecords(file, report, archive, &records)) return false;    // step 4

  Model model(file.data);
  std::uint32_t root = 0;
  std::set<std::string> named;
  if (!WalkPickle(file, report, records, &model, &root, &named)) return false;  // step 5
  std::vector<TableEntry> flat;
  if (!FlattenTable(report, model, records.pkl_start, file.size, root, &flat)) return false;  // step 6
  for (const std::string& name : records.local_order) {               // step 7
    if (IsStorageRecord(name) && named.count(name.substr(5)) == 0) {
      report.Warn("PT-102", "storage", records.by_name[name].local, "storage record not referenced: " + name);
    }
  }

  // The tensor table, the value table's text and the graph of the entries
  // the caller wants.
  std::vector<PtTensorBytes>& table = tables->tensors;
  std::size_t tensor_entries = 0;
  for (const TableEntry& entry : flat) tensor_entries += entry.is_tensor ? 1 : 0;
  table.reserve(tensor_entries);
  PtValueGraph& graph = tables->graph;
  GraphExport exporter(model, records.big_endian, &graph);
  for (TableEntry& entry : flat) {
    if (!entry.is_tensor) {
      const Kind kind = model.nodes[entry.node].kind;
      if (graph_wanted == nullptr || graph_wanted(entry.name, kind == Kind::kTuple || kind == Kind::kList)) {
        PtValueRoot root;
        root.name = entry.name;
        root.node = exporter.Add(entry.node);
        graph.entries.push_back(std::move(root));
      }
      if (want_values) {
        PtValueEntry value;
        value.name = entry.name;
        Render(model, entry.node, &value.text);
        if (value.text.size() >= kRenderCap) {
          value.text.resize(kRenderCap);
          value.text += "...";
        }
        tables->values.push_back(std::move(value));
      }
      continue;
    }
    const Tensor& tensor = model.tensors[model.nodes[entry.node].a];
    const Storage& storage = model.storages[tensor.storage];
    PtTensorBytes bytes;
    bytes.name = std::move(entry.name);  // the entry is not read again
    bytes.dtype = kDtypes[storage.dtype].code;
    bytes.shape = ShapeOf(tensor);
    bytes.layout = LayoutOf(model, tensor, records.big_endian);
    // Section 3 has bounded these bytes (PT-012 otherwise).
    if (bytes.layout.end - bytes.layout.begin <= materialise_limit) {
      bytes.bytes = PtTensorCOrderBytes(file, bytes.shape, bytes.layout);
    }
    table.push_back(std::move(bytes));
  }
  tables->pickle_start = static_cast<std::int64_t>(records.pkl_start);
  return true;
}

}  // namespace
}  // namespace pt_internal

qd::Outcome ReadPtTables(qd::ByteView file, const std::string& file_name, bool want_values,
                         PtGraphWanted graph_wanted, PtTables* tables,
                         std::uint64_t materialise_limit) {
  *tables = PtTables();
  qd::Outcome outcome;
  pt_internal::Report report{file_name, &outcome};
  if (file.data == nullptr && file.size != 0) {
    report.Refuse("PT-002", "eocd", 0, "no bytes");
    return outcome;
  }
  pt_internal::ReadTables(file, report, want_values, graph_wanted, materialise_limit, tables);
  return outcome;
}

}  // namespace qd::oracle
