// recognised.h: the oracle for docs/recognised.md, the families quantdiff
// recognises and checks but does not decode (EXL3, VPTQ, QQQ, ParoQuant,
// BitBLAS), written from the page alone; codecs/recognised.cc is the other
// reading.
//
//   qd::Outcome o = qd::oracle::ReadRecognisedFile(bytes, "m.safetensors", configs);
#ifndef QUANTDIFF_ORACLES_RECOGNISED_H_
#define QUANTDIFF_ORACLES_RECOGNISED_H_

#include <string>
#include <vector>

#include "oracles/merged_table.h"
#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// docs/recognised.md section 3 on FILE (the container rules first), then for
// an accepted file the tensors of section 6.
qd::Outcome ReadRecognisedFile(qd::ByteView file, const std::string& file_name,
                               const std::vector<qd::SideFile>& configs);
// The same, the tensors handed to SINK chunk by chunk (announced first).
qd::Outcome StreamRecognisedFile(qd::ByteView file, const std::string& file_name,
                                 const std::vector<qd::SideFile>& configs, qd::TensorSink& sink);

// The checks after the container rules and section 6's tensors over a table
// of accepted containers: one file, or a model directory's shards merged
// (docs/model_dir.md 4). Findings are appended to *outcome naming FILE_NAME
// (REC-006 names its config source); the first error sets refused and
// returns false. Otherwise the plan and the tensors go to SINK.
bool StreamRecognisedTable(const MergedTable& table, const std::string& file_name,
                           const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                           qd::TensorSink& sink);

// docs/recognised.md section 2, Detection, over a table: a layer of a family
// (BitBLAS's when the winner of CONFIGS is labelled bitblas).
bool HasRecognisedLayer(const MergedTable& table, const std::vector<qd::SideFile>& configs);

// docs/recognised.md section 2, Detection: the container accepts the file and
// it has a layer, CONFIGS deciding whether BitBLAS's markers count.
bool IsRecognisedFile(const ClaimInput& input, const std::vector<qd::SideFile>& configs);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_RECOGNISED_H_
