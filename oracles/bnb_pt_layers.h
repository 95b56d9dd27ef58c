// bnb_pt_layers.h: docs/pt.md section 8 step 8, where the oracle's .pt
// reader (oracles/pt.h) and its bitsandbytes reader (oracles/bnb.h) meet.
// Neither of those knows the other; this file depends on both: it fills a
// BnbTable from an accepted .pt file's tensor table (6.4), maps the
// QuantState list layout (section 7: a value `W.quant_state` that is a list
// or tuple) onto the QuantState a JSON text fills, and gives the .pt file's
// whole reading.
//
//   std::vector<qd::oracle::PtTensorBytes> table;
//   qd::Outcome o = qd::oracle::ReadPtFile(bytes, "model.pt", &table);
#ifndef QUANTDIFF_ORACLES_BNB_PT_LAYERS_H_
#define QUANTDIFF_ORACLES_BNB_PT_LAYERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/bnb.h"
#include "oracles/pt.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// docs/pt.md 6.4 and 7.2: the table of an accepted .pt file. tensors is its
// tensor table (ReadPtTables'), graph its value table (at least the entries
// named W.quant_state that are lists or tuples); pickle_start is ds of
// data.pkl. The result refers to file, tensors and graph, which must
// outlive it.
BnbTable BnbTableFromPt(qd::ByteView file, std::int64_t pickle_start,
                        const std::vector<PtTensorBytes>& tensors, const PtValueGraph& graph);

// Reads a torch.save file: the checks of docs/pt.md section 8 steps 1..8 in
// order (warnings as met, at most one error, last). Step 8 runs the
// bitsandbytes readers on the tensor table (docs/pt.md 6.4, 7; bnb.h's
// ReadBnbTable); their findings follow the PT warnings.
// On accept the outcome's tensors are
//   - a file with at least one bitsandbytes layer: docs/bnb.md's output
//     (every layer's W decoded, every F32/F16/BF16/F64 tensor of no layer,
//     sorted by name bytes);
//   - otherwise section 6.3's decoded output (F32, F16, BF16, F64 tensors of
//     the tensor table to binary32, sorted by (begin, end, name bytes) of
//     section 6.4).
// When tensors is not null it receives the whole tensor table (every dtype)
// in table order, when values is not null the value table in table order
// as text, when graph is not null the value table as structured values;
// all only on accept (they are cleared first).
qd::Outcome ReadPtFile(qd::ByteView file, const std::string& file_name,
                       std::vector<PtTensorBytes>* tensors = nullptr,
                       std::vector<PtValueEntry>* values = nullptr,
                       PtValueGraph* graph = nullptr);

// ReadPtFile's outcome with its tensors handed to sink instead (announced,
// then chunk by chunk; quantdiff/tensor_sink.h): section 6.3's tensors a
// chunk at a time, read from the file through their layouts (a broadcast
// view is never whole in memory); a file with bitsandbytes layers hands
// over docs/bnb.md's tensors whole, in chunks. ReadPtFile is this stream
// collected.
// With CONFIGS (the config sources found beside the file) and GPTQ or AWQ
// layers in the tensor table, that reader's findings and output instead
// (docs/pt.md 6.5, oracles/pt_quant_layers.h), and *FORMAT (when given) is
// set to "gptq" or "awq"; it is left as it is otherwise.
qd::Outcome StreamPtFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink,
                         const std::vector<qd::SideFile>& configs = {}, std::string* format = nullptr);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_BNB_PT_LAYERS_H_
