// claim_input.cc: the one container parse of the oracle's detection.
#include "oracles/claim_input.h"

#include <utility>

#include "oracles/safetensors.h"

namespace qd::oracle {

const MergedTable* ClaimInput::Get() const {
  if (!parsed_) {
    parsed_ = true;
    qd::Outcome findings;  // not reported: the chosen reader reports them
    Container container;
    accepted_ = CheckContainer(file_, "", &findings, &container);
    if (accepted_) table_ = TableOfFile(file_, std::move(container));
  }
  return accepted_ ? &table_ : nullptr;
}

}  // namespace qd::oracle
