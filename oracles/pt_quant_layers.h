// pt_quant_layers.h: docs/pt.md 6.5, where the oracle's .pt reader
// (oracles/pt.h) and its GPTQ and AWQ readers (oracles/gptq.h,
// oracles/awq.h) meet: an accepted .pt/.bin tensor table that comes with
// config sources is read by the AWQ or GPTQ reader as a safetensors file of
// the same tensors is. Shares no code with codecs/.
//
//   qd::oracle::MergedTable table;
//   if (qd::oracle::StreamPtQuantShards({{file, &tables}}, name, configs, &outcome, sink,
//                                       &format, &table)) ...
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

// One accepted .pt file of a reading: its bytes and its tables.
struct PtShardTables {
  qd::ByteView file;
  const PtTables* tables;
};

// docs/pt.md 6.5 over SHARDS read as one table (shard rank = place in
// SHARDS): when CONFIGS is not empty and the table holds an AWQ layer
// (docs/awq.md 2, tried first) or a GPTQ layer (docs/gptq.md 2), that
// reader's checks (findings appended to *OUTCOME, naming FILE_NAME) and, on
// accept, its output to SINK; *FORMAT is "awq" or "gptq", *TABLE the table
// read (for the caller's naming of shards); true. The table is docs/pt.md
// 6.4's: each shard's tensors in (begin, end, name bytes) order, a
// header-level finding at ds of data.pkl of the tensor's shard, one about
// byte k at 6.4's offset of it; it refers to the shards' files and tables,
// which must outlive it. Otherwise false and
// nothing is done. Detection looks at names, dtypes and shapes first, so
// the tensors' bytes are read only for a claimed table.
bool StreamPtQuantShards(const std::vector<PtShardTables>& shards, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                         qd::TensorSink& sink, std::string* format, MergedTable* table);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_PT_QUANT_LAYERS_H_
