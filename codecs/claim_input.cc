// claim_input.cc: the one container reading of the codec's detection.
#include "codecs/claim_input.h"

#include <utility>

#include "codecs/safetensors.h"

namespace qd::codec {

const TensorTable* ClaimInput::Get() const {
  if (!table_) {
    ContainerResult r = ReadContainer(file_, "");  // yes or no: the reader reports
    table_.emplace();
    if (!r.refused) table_->emplace(TensorTable::FromContainer(std::move(r.container)));
  }
  return table_->has_value() ? &**table_ : nullptr;
}

}  // namespace qd::codec
