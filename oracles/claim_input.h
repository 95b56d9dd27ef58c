// claim_input.h: the input of every oracle Is<Format>File question (README
// "Which format a file is"). The container is parsed, and its table built
// (docs/model_dir.md 4, one shard), when a question first needs it; later
// questions look at the same table instead of parsing the header again
// (issue 9, section 3).
#ifndef QUANTDIFF_ORACLES_CLAIM_INPUT_H_
#define QUANTDIFF_ORACLES_CLAIM_INPUT_H_

#include "oracles/merged_table.h"
#include "quantdiff/plain_data.h"

namespace qd::oracle {

class ClaimInput {
 public:
  // Not explicit: IsGptqFile(bytes) parses for that one question, as it did.
  ClaimInput(qd::ByteView file) : file_(file) {}  // NOLINT(google-explicit-constructor)
  ClaimInput(const ClaimInput&) = delete;
  ClaimInput& operator=(const ClaimInput&) = delete;

  qd::ByteView file() const { return file_; }
  // The table, or nullptr if the safetensors rules refuse the file.
  const MergedTable* Get() const;

 private:
  qd::ByteView file_;
  mutable bool parsed_ = false;
  mutable bool accepted_ = false;
  mutable MergedTable table_;
};

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_CLAIM_INPUT_H_
