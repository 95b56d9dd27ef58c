// convert_pt.h: `quantdiff convert IN.pt --to safetensors`, the way out of
// pickle (issue 10 item 4; docs/pt.md section 13): the .pt tensor table
// written verbatim (dtype, shape, C-order bytes; views materialised) and the
// scalar value entries as __metadata__ strings.
//
//   qd::cli::PtConversionPlan plan;
//   if (auto refusal = qd::cli::PlanPtConversion(read, out, &plan)) ...  // nothing to write
//   // plan.header, then each plan.tensors[i]'s C-order bytes, in order
#ifndef QUANTDIFF_CLI_CONVERT_PT_H_
#define QUANTDIFF_CLI_CONVERT_PT_H_

#include <optional>
#include <string>
#include <vector>

#include "cli/output_file.h"
#include "codecs/pt.h"
#include "codecs/safetensors.h"
#include "quantdiff/plain_data.h"

namespace qd::cli {

// What OUT will hold: the header, then the tensors' bytes in this order.
struct PtConversionPlan {
  std::string header;
  std::vector<const qd::codec::PtTensor*> tensors;  // into the PtResult given
  qd::codec::MetadataList metadata;
};

// A value table entry as a __metadata__ string, or nullopt when it is not one
// of the kinds convert represents (docs/pt.md 13.2): a str is its text; an
// int its decimal form; a float the shortest decimal that reads back to the
// same binary64 (".0" added when it would read as an integer; inf, -inf, nan);
// a bool true or false; a tuple, list or torch.Size of these a JSON array
// ("[40, 30]", strings JSON-quoted).
std::optional<std::string> PtValueAsMetadata(const qd::codec::PtResult& read, std::uint32_t node);

// The plan for READ (accepted by the .pt reader), or the finding refusing
// it as a finding about OUT: a value entry convert cannot represent (ST-006:
// __metadata__ holds strings only), or a name or header BuildOutputHeader
// refuses (ST-004, ST-005, ST-006, ST-002).
std::optional<qd::Finding> PlanPtConversion(const qd::codec::PtResult& read,
                                            const std::string& out, PtConversionPlan* plan);

// What WritePtAsSafetensors wrote.
struct PtWritten {
  std::size_t tensors = 0;
  std::uint64_t bytes = 0;  // the tensors' data bytes
  std::size_t metadata = 0;
};

// READ (the .pt file BYTES, accepted by the reader) planned for the file the
// user will know as OUT, then written to OUTPUT, opened here for TARGET (OUT,
// or where OUT's directory is being built) beside INPUTS: the header, then
// one tensor at a time. The caller verifies and commits OUTPUT. 0 written; 1
// an entry or a name OUT cannot hold (the finding printed, nothing created);
// 2 with *error when TARGET cannot be opened.
int WritePtAsSafetensors(const qd::codec::PtResult& read, qd::ByteView bytes, const std::string& out,
                         const std::string& target, const std::vector<std::string>& inputs,
                         OutputFile* output, PtWritten* written, std::string* error);

// The whole verb once --to safetensors is chosen: 0 written, 1 refused
// (the finding printed, nothing written), 2 usage or I/O error.
int RunConvertPt(const std::string& path, const std::string& out);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_CONVERT_PT_H_
