// ggml_blocks.h: the oracle's decoder of ggml's block types, written field
// by field from docs/ggml_blocks.md (issue 12). Deliberately plain: every
// weight's fields are located by their bit offset in the block, read one
// byte at a time, and combined in the contract's operation order. It shares
// no table and no struct with codecs/ggml_blocks.h.
//
//   std::vector<float> values;
//   if (qd::oracle::DecodeGgmlBlocks("q5_1", bytes, &values)) ...
#ifndef QUANTDIFF_ORACLES_GGML_BLOCKS_H_
#define QUANTDIFF_ORACLES_GGML_BLOCKS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace qd::oracle {

struct GgmlBlockShape {
  int weights_per_block;
  int bytes_per_block;
};

// The contract's section 3 table: nullopt for a name it does not define.
std::optional<GgmlBlockShape> GgmlBlockShapeOf(std::string_view type);

// Decodes `bytes` (a whole number of blocks of `type`) into *out, one float
// per weight. False, leaving *out empty, for an unknown type or a length
// that is not a whole number of blocks.
bool DecodeGgmlBlocks(std::string_view type, const std::vector<std::uint8_t>& bytes, std::vector<float>* out);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_GGML_BLOCKS_H_
