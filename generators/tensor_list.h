// tensor_list.h: lookups in the list of tensors a generator is about to
// write (each format's draft holds one and breaks it by name).
#ifndef QUANTDIFF_GENERATORS_TENSOR_LIST_H_
#define QUANTDIFF_GENERATORS_TENSOR_LIST_H_

#include <string>
#include <vector>

#include "codecs/safetensors.h"

namespace qd::gen {

// The tensor named NAME, or nullptr.
inline codec::TensorWithBytes* FindTensor(std::vector<codec::TensorWithBytes>& tensors, const std::string& name) {
  for (codec::TensorWithBytes& t : tensors) {
    if (t.spec.name == name) return &t;
  }
  return nullptr;
}

// Every tensor named NAME removed.
inline void RemoveTensor(std::vector<codec::TensorWithBytes>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const codec::TensorWithBytes& t) { return t.spec.name == name; });
}

}  // namespace qd::gen

#endif  // QUANTDIFF_GENERATORS_TENSOR_LIST_H_
