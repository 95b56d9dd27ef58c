// pt_quant_layers.cc: docs/pt.md 6.5, the codec side.
#include "codecs/pt_quant_layers.h"

#include <utility>

namespace qd::codec {

bool ReadPtQuantLayers(TensorTable& table, const std::string& file_name,
                       const std::vector<qd::SideFile>& configs, std::vector<qd::Finding>* pt_findings,
                       PtQuantLayers* out) {
  // Without a config a .pt file's GPTQ-like names stay ordinary tensors
  // (docs/pt.md 6.5, Decision: the peer container tests hold random words).
  if (configs.empty()) return false;
  if (HasAwqLayer(table)) {  // AWQ before GPTQ, as for a safetensors file (docs/awq.md 2)
    out->awq = ReadAwqTable(std::move(table), file_name, configs, std::move(*pt_findings));
    return true;
  }
  if (HasGptqLayer(table)) {
    out->gptq = ReadGptqTable(std::move(table), file_name, configs, std::move(*pt_findings));
    return true;
  }
  return false;
}

void StreamPtQuantLayers(const PtQuantLayers& layers, TensorSink& sink, Kernel kernel) {
  if (layers.awq) {
    StreamAwqLayers(*layers.awq, sink);
  } else {
    StreamGptqLayers(*layers.gptq, sink, kernel);
  }
}

}  // namespace qd::codec
