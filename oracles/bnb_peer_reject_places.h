// bnb_peer_reject_places.h: where the refusing finding of each reject case
// of ../shared/peer/bnb/manifest.json lies (tensor, field, byte offset), for
// the oracle's (oracles/bnb_oracle_peer_test.cc) and the codec's
// (tests/peer/bnb_peer_test.cc) peer tests alike. Test data only, kept beside
// the oracle because oracles/ may include nothing from outside it
// (tests/independence_test.cc).
//
// The manifest records the rule only, so every place here is derived by hand
// from docs/bnb.md ("Check order", "4-bit layer") and the case file's own
// header (names and data_offsets read with a hex viewer), never by running a
// reader:
//  * tensor: the state tensor for a fault in the JSON state, W when a sibling
//    is missing, else the tensor at fault;
//  * byte_offset: 8 for a header-level fact (missing tensor, dtype, shape);
//    8 + N + begin + k for byte k of a tensor's data, N the header length
//    and begin the tensor's data_offsets[0]. A fault in the JSON state,
//    whichever key, is placed at the start of the state tensor's data, k = 0
//    (docs/bnb.md states it since this test; it named no byte before);
//  * row, block and element are -1: no case's fault is a single value.
#ifndef QUANTDIFF_ORACLES_BNB_PEER_REJECT_PLACES_H_
#define QUANTDIFF_ORACLES_BNB_PEER_REJECT_PLACES_H_

#include <cstdint>
#include <map>
#include <string>

namespace qdtest::peer {

struct BnbRejectPlace {
  std::string tensor;
  std::string field;
  std::int64_t byte_offset = -1;
};

// The place of case `id`'s finding; tensor "?" for an id not listed here.
inline BnbRejectPlace BnbRejectPlaceOf(const std::string& id) {
  static const std::map<std::string, BnbRejectPlace> places = {
      // 4-bit step 3, BNB-001 quant_type: JSON "quant_type": "int4".
      // N = 688, state data_offsets [1150, 1314]: 8 + 688 + 1150.
      {"neg_bnb001_quant_type_int4",
       {"model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__int4", "quant_type", 1846}},
      // Step 3 again ("af4"), before step 4's suffix check (nf4 vs af4).
      // N = 464, state at 2368: 8 + 464 + 2368.
      {"neg_bnb001_quant_type_af4",
       {"model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__nf4", "quant_type", 2840}},
      // Step 5, BNB-001 blocksize: 48, 16 (N = 456, state at 136) and 8192
      // (N = 664, state at 3143).
      {"neg_bnb001_blocksize48",
       {"model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__fp4", "blocksize", 600}},
      {"neg_bnb001_blocksize16",
       {"model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__fp4", "blocksize", 600}},
      {"neg_bnb001_blocksize8192",
       {"transformer.h.2.attn.c_proj.weight.quant_state.bitsandbytes__nf4", "blocksize", 3815}},
      // Step 10, BNB-001 absmax: 63 elements where ceil(4096 / 64) = 64; an
      // element count is a header fact.
      {"neg_bnb001_absmax_count", {"model.layers.0.self_attn.q_proj.weight.absmax", "absmax", 8}},
      // Step 8, BNB-002 weight: 2047 bytes where ceil(64 * 64 / 2) = 2048.
      {"neg_bnb002_truncated_weight", {"model.layers.11.mlp.gate_proj.weight", "weight", 8}},
      // Step 7, BNB-004 on the missing piece: the JSON key nested_offset
      // (N = 672, state at 2198: 8 + 672 + 2198) ...
      {"neg_bnb004_missing_nested_offset",
       {"model.layers.3.mlp.down_proj.weight.quant_state.bitsandbytes__nf4", "nested_offset", 2878}},
      // ... and the sibling tensor nested_absmax (the layer is nested by its
      // nested_* keys and nested_quant_map): named on W, at the header.
      {"neg_bnb004_missing_nested_absmax", {"model.layers.11.mlp.gate_proj.weight", "nested_absmax", 8}},
  };
  const auto it = places.find(id);
  return it == places.end() ? BnbRejectPlace{"?", "?", -1} : it->second;
}

}  // namespace qdtest::peer

#endif  // QUANTDIFF_ORACLES_BNB_PEER_REJECT_PLACES_H_
