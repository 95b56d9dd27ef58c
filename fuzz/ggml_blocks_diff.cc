// ggml_blocks_diff: the codec's ggml block decoder (every kernel) against the
// oracle's over arbitrary block bytes of any type, the legacy encoders'
// output decoded by both, and, when ggml's library opens
// (qd::ggml::DefaultLibraryPath(), through thirdparty/ggml/, never linked),
// ggml as a third reader of the same bytes (docs/ggml_blocks.md).
//
// Input: [selector][values ...]
//   selector % 12      the type, in qd::codec::GgmlTypes() order
//   selector & 0x80    encode: the values are binary32 inputs (4 bytes
//                      each, little endian; non-finite ones become 0, as
//                      section 4 covers finite inputs only), encoded by the
//                      legacy encoder of a legacy type, by
//                      GgmlEncodeWithinBound for a K-quant or iq4_nl (mxfp4
//                      has no encoder: decode mode)
//   otherwise          decode: the values are whole blocks of the type
//   at most 64 blocks; a trailing partial block is ignored.
//
// Checks, each a divergence with signature DIFF:ggml_blocks_diff:<kind>:<type>:
//   decode    codec (every kernel) and oracle give the same bits, a NaN
//             matching any NaN (section 1.3);
//   ggml      ggml's dequantize_row_<type> gives the same, except where
//             section 5 says it differs (mxfp4: E8M0 byte 0xFF, code 8);
//   encode    ggml's quantize_row_<type>_ref writes the legacy encoders'
//             bytes (the other encoders' blocks go through decode and ggml).
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/ggml_blocks.h"
#include "codecs/kernels.h"
#include "fuzz/common/fuzz_support.h"
#include "oracles/ggml_blocks.h"
#include "thirdparty/ggml/ggml_library.h"

namespace {

using qd::fuzz::BytesHex;
using qd::fuzz::Diverge;

constexpr std::size_t kMaxBlocks = 64;

const qd::ggml::Library* Ggml() { return qd::ggml::SharedDefaultLibrary(); }

bool Same(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

std::string Sig(const char* kind, std::string_view type) {
  return std::string("DIFF:ggml_blocks_diff:") + kind + ":" + std::string(type);
}

std::string Where(const std::vector<std::uint8_t>& blocks, const qd::codec::GgmlTypeInfo& info, std::size_t i,
                  float a, float b) {
  const std::size_t block = i / static_cast<std::size_t>(info.values);
  char values[96];
  std::snprintf(values, sizeof values, " value %zu: %a (0x%08x) vs %a (0x%08x)", i, a, std::bit_cast<std::uint32_t>(a),
                b, std::bit_cast<std::uint32_t>(b));
  return "block " + BytesHex(blocks.data() + block * static_cast<std::size_t>(info.bytes),
                             static_cast<std::size_t>(info.bytes)) +
         values;
}

// Section 5: mxfp4 values ggml reads differently (E8M0 byte 0xFF, code 8).
bool GgmlPartsHere(const qd::codec::GgmlTypeInfo& info, const std::uint8_t* block, std::size_t j) {
  if (info.type != qd::codec::GgmlType::kMxfp4) return false;
  const int code = j < 16 ? (block[1 + j] & 0x0F) : (block[1 + j - 16] >> 4);
  return block[0] == 0xFF || code == 8;
}

void CheckDecoders(const qd::codec::GgmlTypeInfo& info, const std::vector<std::uint8_t>& blocks) {
  const std::size_t count = blocks.size() / static_cast<std::size_t>(info.bytes);
  const std::size_t n = count * static_cast<std::size_t>(info.values);
  std::vector<float> oracle;
  if (!qd::oracle::DecodeGgmlBlocks(info.name, blocks, &oracle) || oracle.size() != n) {
    Diverge(Sig("decode", info.name), "the oracle refused " + std::to_string(count) + " whole blocks");
  }
  for (const qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    std::vector<float> codec(n);
    qd::codec::GgmlDecode(info.type, blocks.data(), count, codec.data(), kernel);
    for (std::size_t i = 0; i < n; ++i) {
      if (!Same(codec[i], oracle[i])) {
        Diverge(Sig("decode", info.name), std::string("kernel ") + std::string(qd::codec::KernelName(kernel)) +
                                              ", codec vs oracle, " + Where(blocks, info, i, codec[i], oracle[i]));
      }
    }
  }
  const qd::ggml::Library* ggml = Ggml();
  if (ggml == nullptr || n == 0) return;
  std::vector<float> theirs(n);
  if (!ggml->Dequantize(info.name, blocks.data(), theirs.data(), static_cast<std::int64_t>(n))) return;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t block = i / static_cast<std::size_t>(info.values);
    if (GgmlPartsHere(info, blocks.data() + block * static_cast<std::size_t>(info.bytes),
                      i % static_cast<std::size_t>(info.values))) {
      continue;
    }
    if (!Same(oracle[i], theirs[i])) {
      Diverge(Sig("ggml", info.name), "oracle vs ggml, " + Where(blocks, info, i, oracle[i], theirs[i]));
    }
  }
}

void CheckEncoder(const qd::codec::GgmlTypeInfo& info, const std::uint8_t* data, std::size_t size) {
  const std::size_t count = std::min(kMaxBlocks, size / (4 * static_cast<std::size_t>(info.values)));
  std::vector<float> x(count * static_cast<std::size_t>(info.values));
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t bits = 0;
    for (int k = 3; k >= 0; --k) bits = (bits << 8) | data[4 * i + static_cast<std::size_t>(k)];
    const float v = std::bit_cast<float>(bits);
    x[i] = std::isfinite(v) ? v : 0.0f;
  }
  std::vector<std::uint8_t> blocks(count * static_cast<std::size_t>(info.bytes));
  if (!info.legacy_encoder) {
    if (qd::codec::GgmlEncodeWithinBound(info.type, x.data(), count, blocks.data())) CheckDecoders(info, blocks);
    return;
  }
  if (!qd::codec::GgmlEncode(info.type, x.data(), count, blocks.data())) return;
  CheckDecoders(info, blocks);
  const qd::ggml::Library* ggml = Ggml();
  if (ggml == nullptr || count == 0) return;
  std::vector<std::uint8_t> theirs(blocks.size(), 0);
  if (!ggml->QuantizeReference(info.name, x.data(), theirs.data(), static_cast<std::int64_t>(x.size()))) return;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t at = k * static_cast<std::size_t>(info.bytes);
    if (std::memcmp(blocks.data() + at, theirs.data() + at, static_cast<std::size_t>(info.bytes)) != 0) {
      Diverge(Sig("encode", info.name),
              "block " + std::to_string(k) + " inputs " +
                  BytesHex(data + 4 * k * static_cast<std::size_t>(info.values), 4 * static_cast<std::size_t>(info.values)) +
                  ": ours " + BytesHex(blocks.data() + at, static_cast<std::size_t>(info.bytes)) + " ggml " +
                  BytesHex(theirs.data() + at, static_cast<std::size_t>(info.bytes)));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto types = qd::codec::GgmlTypes();
  const qd::codec::GgmlTypeInfo& info = types[data[0] % types.size()];
  if ((data[0] & 0x80) != 0 && info.type != qd::codec::GgmlType::kMxfp4) {
    CheckEncoder(info, data + 1, size - 1);
    return 0;
  }
  const std::size_t count = std::min(kMaxBlocks, (size - 1) / static_cast<std::size_t>(info.bytes));
  CheckDecoders(info, std::vector<std::uint8_t>(data + 1, data + 1 + count * static_cast<std::size_t>(info.bytes)));
  return 0;
}
