// claim_input.h: what the codec's detection reads (README "Which format a
// file is"): the file, and the tensor table of its safetensors container,
// read at the first claim that asks and kept for the others (a 1M-entry
// header was read once per format asked: issue 9, section 3).
#ifndef QUANTDIFF_CODECS_CLAIM_INPUT_H_
#define QUANTDIFF_CODECS_CLAIM_INPUT_H_

#include <optional>

#include "codecs/tensor_table.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

class ClaimInput {
 public:
  // Implicit, so a claim called with bytes alone reads for itself.
  ClaimInput(qd::ByteView file) : file_(file) {}  // NOLINT(google-explicit-constructor)
  ClaimInput(const ClaimInput&) = delete;
  ClaimInput& operator=(const ClaimInput&) = delete;

  qd::ByteView file() const { return file_; }
  // nullptr when the container rules refuse the file.
  const TensorTable* Get() const;

 private:
  qd::ByteView file_;
  mutable std::optional<std::optional<TensorTable>> table_;  // outer: read yet
};

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_CLAIM_INPUT_H_
