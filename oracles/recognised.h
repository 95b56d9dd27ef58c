// recognised.h: the oracle for docs/recognised.md, the families quantdiff
// recognises and checks but does not decode (EXL3, VPTQ, QQQ, ParoQuant),
// written from the page alone; codecs/recognised.cc is the other reading.
//
//   qd::Outcome o = qd::oracle::ReadRecognisedFile(bytes, "m.safetensors", configs);
#ifndef QUANTDIFF_ORACLES_RECOGNISED_H_
#define QUANTDIFF_ORACLES_RECOGNISED_H_

#include <string>
#include <vector>

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

// docs/recognised.md section 2, Detection.
bool IsRecognisedFile(qd::ByteView file);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_RECOGNISED_H_
