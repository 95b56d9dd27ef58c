// recognised.h: the production reader for the families quantdiff recognises
// and checks but does not decode: EXL3, VPTQ, QQQ, ParoQuant and BitBLAS
// checkpoints (spec 004). docs/recognised.md is the contract (detection, check order,
// what each family fixes, EXL3's tensor_storage); oracles/recognised.cc
// implements the same page independently.
//
//   RecognisedResult r = ReadRecognised(file, "model.safetensors", configs);
//   if (!r.refused) for (const RecognisedLayer& l : r.layers) Show(l.family, l.prefix);
//   // `decode` refuses an accepted file: RecognisedDecodeRefusal(...).
#ifndef QUANTDIFF_CODECS_RECOGNISED_H_
#define QUANTDIFF_CODECS_RECOGNISED_H_

#include <cstddef>
#include <string>
#include <vector>

#include "codecs/safetensors.h"
#include "codecs/claim_input.h"
#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::codec {

// One layer of docs/recognised.md section 2.
struct RecognisedLayer {
  std::string family;                // "exl3", "vptq", "qqq", "paroquant", "bitblas"
  std::string prefix;                // "model.layers.0.mlp.up_proj." (with the dot)
  std::vector<std::size_t> members;  // RecognisedResult::table indices, member order
  std::size_t anchor = 0;            // RecognisedResult::table index
};

struct RecognisedResult {
  bool refused = false;
  bool is_recognised = false;  // the file has at least one layer
  std::vector<qd::Finding> findings;  // warnings in order met, then at most one error
  TensorTable table;                    // the file's, or a model directory's merged table
  std::vector<RecognisedLayer> layers;  // in anchor order
};

// Container rules, then docs/recognised.md section 3. configs are the
// sources in priority order (EXL3's tensor_storage; BitBLAS's label and bits).
RecognisedResult ReadRecognised(qd::ByteView file, const std::string& file_name,
                                const std::vector<qd::SideFile>& configs);

// The same checks on an accepted container's tensor table (a file's, or a
// model directory's merged table: docs/model_dir.md 4); the container's
// warnings come first.
RecognisedResult ReadRecognisedTable(TensorTable table, const std::string& file_name,
                                     const std::vector<qd::SideFile>& configs,
                                     std::vector<qd::Finding> container_findings = {});
// docs/recognised.md section 2, Detection, on a table: a layer of a family
// (a BitBLAS layer only when CONFIGS' winner is labelled bitblas).
bool HasRecognisedLayer(const TensorTable& table, const std::vector<qd::SideFile>& configs);
// Section 6's tensors of an accepted result to SINK (announced first).
void StreamRecognisedTensors(const RecognisedResult& result, TensorSink& sink);

// docs/recognised.md section 2, Detection: a cheap look at the header and,
// for BitBLAS's label, the config sources.
bool ClaimsRecognised(const ClaimInput& input, const std::vector<qd::SideFile>& configs);

// Findings and, for an accepted file, the tensors of section 6, one at a time
// to a sink (announced first) or collected.
qd::Outcome StreamRecognisedFile(qd::ByteView file, const std::string& file_name,
                                 const std::vector<qd::SideFile>& configs, TensorSink& sink);
qd::Outcome DecodeRecognisedFile(qd::ByteView file, const std::string& file_name,
                                 const std::vector<qd::SideFile>& configs);

// REC-001 for an accepted reading whose findings are FINDINGS: the error
// `decode` reports instead of writing, naming the families of the REC-101
// warnings (a file's, or a model directory's).
qd::Finding RecognisedNotDecoded(const std::vector<qd::Finding>& findings,
                                 const std::string& file_name);
// What `quantdiff decode` reports instead of writing (docs/recognised.md 0):
// the check's findings and, for an accepted file, the error REC-001 naming
// the families.
qd::Outcome RecognisedDecodeRefusal(qd::ByteView file, const std::string& file_name,
                                    const std::vector<qd::SideFile>& configs);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_RECOGNISED_H_
