// upstream_vectors.h: the upstream findings `export-vectors` exports beside
// the generated vectors (issue 13 item 1): inputs on which an upstream
// reader is known to part from quantdiff's contract (corpus/upstream/, whose
// README records each one), so another implementation can be checked for
// the same mistake. Each becomes a test of group "UpstreamFinding" in its
// format's vector file, flagged with what the upstream reader does; its
// expected result is still the oracle's reading.
#ifndef QUANTDIFF_CLI_UPSTREAM_VECTORS_H_
#define QUANTDIFF_CLI_UPSTREAM_VECTORS_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace qd::cli {

struct UpstreamVector {
  std::string_view format;  // the registry format it is exported under
  std::string_view source;  // the file under corpus/upstream/ (embedded)
  // The fuzz target ggml_blocks_diff's input (a selector byte, 11 = mxfp4,
  // then whole blocks) rather than a file: exported as a .gguf file holding
  // those blocks as one mxfp4 tensor.
  bool mxfp4_blocks = false;
  std::string_view rule;  // the rule the contract refuses it with; "" accepted
  std::string_view flag;  // names the upstream behaviour in the vector's notes
  std::string_view description;
  std::string_view upstream_does;

  // The exported file's bytes.
  std::vector<std::uint8_t> Bytes() const;
};

// In corpus/upstream/ order, grouped by format.
const std::vector<UpstreamVector>& UpstreamVectors();

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_UPSTREAM_VECTORS_H_
