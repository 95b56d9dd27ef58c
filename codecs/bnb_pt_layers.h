// bnb_pt_layers.h: where the torch .pt reader and the bitsandbytes reader
// meet (docs/pt.md 6.4, 7, section 8 step 8). codecs/pt.h knows nothing of
// bitsandbytes and codecs/bnb.h nothing of the .pt value model; this file
// depends on both: it runs the bitsandbytes checks on an accepted .pt
// file's tensor table, and maps the QuantState list layout of bitsandbytes
// 0.40 (a value `W.quant_state` = [absmax, shape, dtype, blocksize,
// None | [offset, state2], quant_type(, quant_map)]) onto the dict layout's keys.
//
//   qd::codec::BnbResult r = qd::codec::ReadPtLayers(bytes, "model.pt");
//   qd::Outcome o = qd::codec::DecodePtFile(bytes, "model.pt");
#ifndef QUANTDIFF_CODECS_BNB_PT_LAYERS_H_
#define QUANTDIFF_CODECS_BNB_PT_LAYERS_H_

#include <string>
#include <vector>

#include "codecs/bnb.h"
#include "quantdiff/tensor_sink.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

struct PtResult;  // codecs/pt.h

// docs/pt.md section 8 with step 8: ReadPt, then on an accepted file the
// bitsandbytes readers on its tensor table (sections 6.4, 7). Findings: the
// PT warnings, then the layers' findings. The result's table holds the .pt
// reading (TensorTable::pickle()).
BnbResult ReadPtLayers(qd::ByteView file, const std::string& file_name);
// Step 8 alone on an accepted ReadPt result (not refused; its findings come
// first in the result): what ReadPtLayers runs after ReadPt, for a caller
// that read the file itself (a model directory's torch shard).
BnbResult ReadPtTableLayers(PtResult pickle, const std::string& file_name);

// Findings (ReadPtLayers') and, for an accepted file, section 6.3's output:
// every F32/F16/BF16/F64 tensor of the tensor table decoded to binary32,
// sorted by (begin, end, name bytes) as a safetensors container is; or, for
// a file with bitsandbytes layers, docs/bnb.md's output (6.4); or, with
// CONFIGS (the config sources found beside the file) and GPTQ or AWQ layers
// in the table, that reader's findings and output (6.5,
// codecs/pt_quant_layers.h). StreamPtFile announces them and then passes
// them one at a time; DecodePtFile collects them; CheckPtFile decodes nothing.
// FORMAT, when given, is set to "gptq" or "awq" when 6.5's reader ran (left
// as it is otherwise).
qd::Outcome StreamPtFile(qd::ByteView file, const std::string& file_name, TensorSink& sink,
                         const std::vector<qd::SideFile>& configs = {}, std::string* format = nullptr);
qd::Outcome DecodePtFile(qd::ByteView file, const std::string& file_name,
                         const std::vector<qd::SideFile>& configs = {});
qd::Outcome CheckPtFile(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs = {});

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_BNB_PT_LAYERS_H_
