// pt_quant_layers.h: docs/pt.md 6.5, where the oracle's .pt reader
// (oracles/pt.h) and its GPTQ and AWQ readers (oracles/gptq.h,
// oracles/awq.h) meet: an accepted .pt/.bin tensor table that comes with
// config sources is read by the AWQ or GPTQ reader as a safetensors file of
// the same tensors is. Shares no code with codecs/.
//
//   qd::oracle::MergedTable table;
//   qd::oracle::AppendPtShard(file, tables, 0, &table);
//   if (qd::oracle::StreamPtQuantTable(table, name, configs, &outcome, sink, &format)) ...
#ifndef QUANTDIFF_ORACLES_PT_QUANT_LAYERS_H_
#define QUANTDIFF_ORACLES_PT_QUANT_LAYERS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "oracles/merged_table.h"
#include "oracles/pt.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// Appends the tensor table of an accepted .pt file (ReadPtTables' TABLES of
// FILE) to *TABLE as shard SHARD, in docs/pt.md 6.4's order (begin, end,
// name bytes): begin and end are 6.4's, a finding about a header-level fact
// points at ds of data.pkl, one about byte k at 6.4's offset of it, and the
// data are the C-order little-endian bytes (held by *TABLE when TABLES does
// not hold them). FILE and TABLES must outlive *TABLE.
void AppendPtShard(qd::ByteView file, const PtTables& tables, std::size_t shard, MergedTable* table);

// docs/pt.md 6.5: when CONFIGS is not empty and TABLE holds an AWQ layer
// (docs/awq.md 2, tried first) or a GPTQ layer (docs/gptq.md 2), that
// reader's checks (findings appended to *OUTCOME, naming FILE_NAME) and, on
// accept, its output to SINK; *FORMAT is "awq" or "gptq"; true. Otherwise
// false and nothing is done.
bool StreamPtQuantTable(const MergedTable& table, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                        qd::TensorSink& sink, std::string* format);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_PT_QUANT_LAYERS_H_
