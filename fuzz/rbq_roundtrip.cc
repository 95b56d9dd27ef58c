// rbq_roundtrip: the codec's quantizer against the oracle's, then the codec's
// decode kernels against the oracle's decoder, then re-quantization.
//
// Input: [weights ...][3-byte tail]
//   tail[0] bit 0      bits: 0 -> 4 (Q4B32), 1 -> 8 (Q8B32)
//           bit 1      ragged: columns is not a multiple of 32 (RBQ-003 path)
//           bits 2..3  how the leading bytes become weights:
//                      0 raw little-endian binary32 bit patterns (4 bytes each)
//                      1 int8 * 2^e (1 byte each), e = int8(tail[2])
//                      2 binary16 bit patterns widened exactly (2 bytes each)
//                      3 int16 * 2^(e/2) (2 bytes each)
//   tail[1] bits 0..2  rows - 1 (1..8); bits 3..4 columns / 32 - 1 (1..4);
//           bits 5..7  ragged columns = 32 * (columns / 32) + 1 + 4 * bits5..7
//   tail[2]            exponent e for modes 1 and 3
// Missing weights are zero.
//
// Checks, each a divergence with signature DIFF:rbq_roundtrip:<kind>:<what>:
//   1. qd::codec::RbqQuantize and qd::oracle::QuantizeRbq both succeed with
//      identical bytes, or both fail with the same rule (and row and block).
//   2. Every kernel of qd::codec::AvailableKernels() dequantizes the codec's
//      bytes to exactly what qd::oracle::ReadRbqFile decodes from a file made
//      of them (and the oracle accepts that file).
//   3. A canonical block (max |q| == 7 or 127 with no -8 / -128 code, or an
//      all-zero block) is a fixed point: re-quantizing its 32 decoded values
//      with either quantizer gives the same 18 or 34 bytes. Why: the scale s
//      is a binary16, so max|w| = levels * s is exact in binary32, levels*s /
//      levels == s exactly, f32_to_f16(s) == s, and q*s / s == q exactly.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/kernels.h"
#include "codecs/rbq.h"
#include "codecs/safetensors.h"
#include "fuzz/common/fuzz_support.h"
#include "oracles/rbq.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace {

using qd::fuzz::Diverge;
using qd::fuzz::BytesHex;
using qd::fuzz::Hex;

constexpr std::size_t kTailSize = 3;
constexpr std::string_view kPrefix = "DIFF:rbq_roundtrip:";

std::string Sig(std::string_view kind, std::string_view what) {
  return std::string(kPrefix) + std::string(kind) + ":" + std::string(what);
}


std::string WeightsHex(const float* w, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s += (i ? " " : "") + Hex(std::bit_cast<std::uint32_t>(w[i]), 8);
  }
  return s;
}

std::string Where(const qd::Finding& f) {
  return f.rule + " row=" + std::to_string(f.row) + " block=" + std::to_string(f.block);
}

// The 32 codes of one block, read straight from the layout in the spec (a
// third, tiny reading of the payload, used only to classify blocks).
void Codes(int bits, const std::uint8_t* block, int q[32]) {
  for (int n = 0; n < 32; ++n) {
    q[n] = bits == 4 ? ((((block[2 + n / 2] >> (4 * (n % 2))) & 0x0f) ^ 8) - 8)
                     : static_cast<std::int8_t>(block[2 + n]);
  }
}

bool IsCanonical(int bits, const std::uint8_t* block, std::size_t block_bytes) {
  int q[32];
  Codes(bits, block, q);
  const int levels = bits == 4 ? 7 : 127;
  bool all_zero = true;
  for (std::size_t i = 0; i < block_bytes; ++i) all_zero = all_zero && block[i] == 0;
  if (all_zero) return true;
  int largest = 0;
  for (int n = 0; n < 32; ++n) {
    if (q[n] == -levels - 1) return false;
    largest = std::max(largest, std::abs(q[n]));
  }
  return largest == levels;
}

std::vector<float> Weights(const std::uint8_t* data, std::size_t size, int mode, int e,
                           std::size_t count) {
  qd::fuzz::InputReader in(data, size);
  std::vector<float> w(count);
  for (std::size_t i = 0; i < count; ++i) {
    switch (mode) {
      case 0: w[i] = std::bit_cast<float>(in.U32()); break;
      case 1: w[i] = std::ldexp(static_cast<float>(static_cast<std::int8_t>(in.U8())), e); break;
      case 2: w[i] = qd::oracle::HalfToFloat(in.U16()); break;
      default:
        w[i] = std::ldexp(static_cast<float>(static_cast<std::int16_t>(in.U16())), e / 2);
        break;
    }
  }
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t tail[kTailSize] = {0, 0, 0};
  const std::size_t body = size >= kTailSize ? size - kTailSize : 0;
  for (std::size_t i = 0; i < kTailSize && body + i < size; ++i) tail[i] = data[body + i];

  const int bits = (tail[0] & 1) ? 8 : 4;
  const bool ragged = (tail[0] & 2) != 0;
  const int mode = (tail[0] >> 2) & 3;
  const std::uint64_t rows = 1 + (tail[1] & 7);
  std::uint64_t columns = 32 * (1 + ((tail[1] >> 3) & 3));
  if (ragged) columns += 1 + 4 * (tail[1] >> 5);
  const int e = static_cast<std::int8_t>(tail[2]);
  const std::vector<float> w = Weights(data, body, mode, e, rows * columns);

  // 1. Quantizer against quantizer.
  std::vector<std::uint8_t> codec_bytes, oracle_bytes;
  qd::Finding codec_error, oracle_error;
  const bool codec_ok =
      qd::codec::RbqQuantize(bits, w.data(), rows, columns, &codec_bytes, &codec_error);
  const bool oracle_ok =
      qd::oracle::QuantizeRbq(bits, w.data(), rows, columns, &oracle_bytes, &oracle_error);
  if (codec_ok != oracle_ok) {
    const qd::Finding& f = codec_ok ? oracle_error : codec_error;
    Diverge(Sig("verdict", f.rule), std::string(codec_ok ? "oracle" : "codec") +
                                        " refused, the other quantized: " + Where(f));
  }
  if (!codec_ok) {
    if (codec_error.rule != oracle_error.rule) {
      Diverge(Sig("rule", codec_error.rule + "!=" + oracle_error.rule),
              "codec " + Where(codec_error) + " | oracle " + Where(oracle_error));
    }
    if (codec_error.row != oracle_error.row || codec_error.block != oracle_error.block) {
      Diverge(Sig("position", codec_error.rule),
              "codec " + Where(codec_error) + " | oracle " + Where(oracle_error));
    }
    return 0;
  }
  const std::size_t block_bytes = bits == 4 ? 18 : 34;
  const std::size_t blocks = rows * (columns / 32);
  if (codec_bytes.size() != blocks * block_bytes || oracle_bytes.size() != codec_bytes.size()) {
    Diverge(Sig("bytes", "length"), "codec " + std::to_string(codec_bytes.size()) +
                                        " bytes, oracle " + std::to_string(oracle_bytes.size()) +
                                        ", expected " + std::to_string(blocks * block_bytes));
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* c = codec_bytes.data() + b * block_bytes;
    const std::uint8_t* o = oracle_bytes.data() + b * block_bytes;
    if (std::memcmp(c, o, block_bytes) != 0) {
      const bool scale_differs = c[0] != o[0] || c[1] != o[1];
      Diverge(Sig("bytes", scale_differs ? "scale" : "payload"),
              "block " + std::to_string(b) + " (row " + std::to_string(b / (columns / 32)) +
                  ") bits=" + std::to_string(bits) + "\n codec  " + BytesHex(c, block_bytes) +
                  "\n oracle " + BytesHex(o, block_bytes) + "\n weights " +
                  WeightsHex(w.data() + b * 32, 32));
    }
  }

  // 2. Every codec kernel against the oracle's decoder.
  const qd::codec::MetadataList metadata = {
      {"format", bits == 4 ? "rabbit-q4b32" : "rabbit-q8b32"}, {"block", "32"}, {"scale", "f16"}};
  qd::codec::TensorWithBytes tensor;
  tensor.spec = {"w", bits == 4 ? "Q4B32" : "Q8B32", {rows, columns}, 0};
  tensor.bytes = codec_bytes;
  const std::vector<std::uint8_t> file = qd::codec::SerializeSafetensors({tensor}, &metadata);
  const qd::Outcome truth = qd::oracle::ReadRbqFile({file.data(), file.size()}, "roundtrip");
  if (truth.refused || truth.tensors.size() != 1 ||
      truth.tensors[0].values.size() != rows * columns) {
    const std::string rule =
        truth.refused && !truth.findings.empty() ? truth.findings.back().rule : "shape";
    Diverge(Sig("verdict", "oracle-refuses-codec-output-" + rule),
            truth.findings.empty() ? "no findings" : truth.findings.back().message);
  }
  const std::vector<float>& expected = truth.tensors[0].values;
  std::vector<float> decoded(rows * columns);
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    std::fill(decoded.begin(), decoded.end(), -1.0f);
    qd::codec::RbqDequantize(bits, codec_bytes.data(), rows, columns, decoded.data(), kernel);
    for (std::size_t i = 0; i < decoded.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(decoded[i]) != std::bit_cast<std::uint32_t>(expected[i])) {
        Diverge(Sig("dequantize", qd::codec::KernelName(kernel)),
                "element " + std::to_string(i) + " block " + std::to_string(i / 32) +
                    ": codec " + Hex(std::bit_cast<std::uint32_t>(decoded[i]), 8) + " oracle " +
                    Hex(std::bit_cast<std::uint32_t>(expected[i]), 8) + " block bytes " +
                    BytesHex(codec_bytes.data() + (i / 32) * block_bytes, block_bytes));
      }
    }
  }

  // 3. Canonical blocks are fixed points of dequantize-then-quantize.
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* original = codec_bytes.data() + b * block_bytes;
    if (!IsCanonical(bits, original, block_bytes)) continue;
    const float* values = expected.data() + b * 32;
    std::vector<std::uint8_t> again;
    qd::Finding error;
    if (!qd::codec::RbqQuantize(bits, values, 1, 32, &again, &error) ||
        again.size() != block_bytes || std::memcmp(again.data(), original, block_bytes) != 0) {
      Diverge(Sig("requantize", "codec"),
              "block " + std::to_string(b) + "\n original " + BytesHex(original, block_bytes) +
                  "\n again    " + BytesHex(again.data(), again.size()) + " " + error.rule +
                  "\n values " + WeightsHex(values, 32));
    }
    again.clear();
    if (!qd::oracle::QuantizeRbq(bits, values, 1, 32, &again, &error) ||
        again.size() != block_bytes || std::memcmp(again.data(), original, block_bytes) != 0) {
      Diverge(Sig("requantize", "oracle"),
              "block " + std::to_string(b) + "\n original " + BytesHex(original, block_bytes) +
                  "\n again    " + BytesHex(again.data(), again.size()) + " " + error.rule +
                  "\n values " + WeightsHex(values, 32));
    }
  }
  return 0;
}
