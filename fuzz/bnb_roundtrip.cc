// bnb_roundtrip: the codec's 4-bit quantizer against the oracle's, then the
// codec's decoder (every kernel) against the oracle's on a file made of the
// codec's output, flat and nested.
//
// Input: [values ...][4-byte tail]
//   tail[0] bit 0      quant_type: 0 nf4, 1 fp4
//           bits 1..2  dtype, modulo 3: float16, bfloat16, float32; the
//                      values are raw bit patterns of that dtype (2, 2 or 4
//                      bytes each, little endian), widened exactly
//           bit 3      nested: also quantize with compress_statistics
//           bits 4..7  blocksize: 0..13 -> 32 << (v % 8); 14, 15 -> one of
//                      {0, 16, 48, 8192} picked by tail[1] bits 3..4 (both
//                      quantizers must refuse it)
//   tail[1] bits 0..2  nested blocksize 32 << k
//           bits 3..4  the bad blocksize (see above)
//           bit 5      values past the body repeat the body (else they are 0)
//   tail[2..3]         n = u16 % 12289 (up to three 4096-blocks)
//
// Checks, each a divergence with signature DIFF:bnb_roundtrip:<kind>:<what>:
//   1. qd::codec::QuantizeBnb4bit (flat) and qd::oracle::QuantizeBnb4bit
//      both succeed with identical packed bytes and absmax bits, or both fail.
//   2. A file of the codec's packed bytes and absmax (with its JSON
//      quant_state and quant_map) is accepted by the oracle, and every codec
//      kernel decodes it exactly as qd::oracle::ReadBnbFile does.
//   3. Nested: the codec's nested encoding packs the same bytes as the flat
//      one (compress_statistics changes only the statistics), and its file
//      decodes identically with every codec kernel and the oracle.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codecs/bnb.h"
#include "codecs/kernels.h"
#include "codecs/safetensors.h"
#include "fuzz/common/fuzz_support.h"
#include "harness/differ.h"
#include "oracles/bnb.h"
#include "oracles/safetensors.h"
#include "quantdiff/plain_data.h"

namespace {

using qd::fuzz::Diverge;
using qd::fuzz::BytesHex;
using qd::fuzz::Hex;

constexpr std::size_t kTailSize = 4;
constexpr std::string_view kPrefix = "DIFF:bnb_roundtrip:";
constexpr std::uint64_t kMaxN = 3 * 4096;

std::string Sig(std::string_view kind, std::string_view what) {
  return std::string(kPrefix) + std::string(kind) + ":" + std::string(what);
}


template <typename T>
std::vector<std::uint8_t> AsBytes(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// n values from raw bit patterns of the dtype; past the body: 0 or the body again.
std::vector<float> Values(const std::uint8_t* data, std::size_t size, int dtype, bool repeat,
                          std::uint64_t n) {
  const std::size_t width = dtype == 2 ? 4 : 2;
  const std::size_t available = size / width;
  std::vector<float> x(n, 0.0f);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i >= available && (!repeat || available == 0)) break;
    const std::uint8_t* p = data + width * (i % available);
    if (dtype == 2) {
      std::uint32_t bits;
      std::memcpy(&bits, p, 4);
      x[i] = std::bit_cast<float>(bits);
    } else {
      const std::uint16_t bits = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
      x[i] = dtype == 0 ? qd::oracle::HalfToFloat(bits)
                        : std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    }
  }
  return x;
}

const char* DtypeText(int dtype) {
  return dtype == 0 ? "float16" : dtype == 1 ? "bfloat16" : "float32";
}

// The safetensors file Linear4bit would save for these pieces (HF names).
std::vector<std::uint8_t> LayerFile(const qd::codec::Bnb4bitQuantized& q, bool nested,
                                    const char* quant_type, std::uint64_t blocksize, int dtype,
                                    std::uint64_t n) {
  nlohmann::ordered_json state = {{"quant_type", quant_type}, {"blocksize", blocksize},
                                  {"dtype", DtypeText(dtype)}, {"shape", nlohmann::ordered_json::array({n})}};
  std::vector<qd::codec::TensorWithBytes> tensors;
  tensors.push_back({{"w", "U8", {q.packed.size(), 1}, 0}, q.packed});
  const auto& table = qd::codec::Bnb4bitTable(std::string_view(quant_type) == "nf4"
                                                  ? qd::codec::Bnb4bitType::kNf4
                                                  : qd::codec::Bnb4bitType::kFp4);
  tensors.push_back({{"w.quant_map", "F32", {16}, 0},
                     AsBytes(std::vector<float>(table.begin(), table.end()))});
  if (nested) {
    tensors.push_back({{"w.absmax", "U8", {q.absmax_codes.size()}, 0}, q.absmax_codes});
    tensors.push_back({{"w.nested_absmax", "F32", {q.nested_absmax.size()}, 0},
                       AsBytes(q.nested_absmax)});
    tensors.push_back({{"w.nested_quant_map", "F32", {q.nested_quant_map.size()}, 0},
                       AsBytes(q.nested_quant_map)});
    state["nested_blocksize"] = q.nested_blocksize;
    state["nested_dtype"] = "float32";
    state["nested_offset"] = static_cast<double>(q.nested_offset);  // fl32 gives it back
  } else {
    tensors.push_back({{"w.absmax", "F32", {q.absmax.size()}, 0}, AsBytes(q.absmax)});
  }
  const std::string text = state.dump();
  tensors.push_back({{std::string("w.quant_state.bitsandbytes__") + quant_type, "U8",
                      {text.size()}, 0},
                     std::vector<std::uint8_t>(text.begin(), text.end())});
  return qd::codec::SerializeSafetensors(tensors, nullptr);
}

// Check 2 / 3: the oracle accepts the file; every codec kernel decodes it as the oracle does.
void CheckDecodes(const std::vector<std::uint8_t>& file, std::string_view what) {
  const qd::ByteView view{file.data(), file.size()};
  const qd::Outcome truth = qd::oracle::ReadBnbFile(view, "roundtrip");
  if (truth.refused) {
    const std::string rule = truth.findings.empty() ? "none" : truth.findings.back().rule;
    Diverge(Sig("verdict", "oracle-refuses-codec-output-" + rule),
            std::string(what) + ": " +
                (truth.findings.empty() ? "no findings" : qd::harness::Describe(truth.findings.back())));
  }
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    const qd::Outcome codec = qd::codec::DecodeBnbFile(view, "roundtrip", kernel);
    if (std::optional<qd::harness::Divergence> d =
            qd::harness::Compare(codec, truth, "bnb_roundtrip")) {
      Diverge(d->signature, std::string(what) + " kernel=" +
                                std::string(qd::codec::KernelName(kernel)) + ": " + d->detail);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t tail[kTailSize] = {0, 0, 0, 0};
  const std::size_t body = size >= kTailSize ? size - kTailSize : 0;
  for (std::size_t i = 0; i < kTailSize && body + i < size; ++i) tail[i] = data[body + i];

  const bool fp4 = (tail[0] & 1) != 0;
  const int dtype = ((tail[0] >> 1) & 3) % 3;
  const bool nested = (tail[0] & 8) != 0;
  const int selector = tail[0] >> 4;
  static constexpr std::uint64_t kBadBlocksizes[] = {0, 16, 48, 8192};
  const std::uint64_t blocksize =
      selector < 14 ? 32ull << (selector % 8) : kBadBlocksizes[(tail[1] >> 3) & 3];
  const std::uint64_t nested_blocksize = 32ull << (tail[1] & 7);
  const bool repeat = (tail[1] & 32) != 0;
  const std::uint64_t n = (tail[2] | (static_cast<std::uint64_t>(tail[3]) << 8)) % (kMaxN + 1);
  const std::vector<float> x = Values(data, body, dtype, repeat, n);
  const char* quant_type = fp4 ? "fp4" : "nf4";
  const auto type = fp4 ? qd::codec::Bnb4bitType::kFp4 : qd::codec::Bnb4bitType::kNf4;

  // 1. Quantizer against quantizer (flat statistics).
  qd::codec::Bnb4bitQuantized q;
  std::string codec_error;
  const bool codec_ok =
      qd::codec::QuantizeBnb4bit(x.data(), n, type, blocksize, false, &q, &codec_error);
  std::vector<std::uint8_t> packed;
  std::vector<float> absmax;
  qd::Finding oracle_error;
  const bool oracle_ok = qd::oracle::QuantizeBnb4bit(quant_type, static_cast<int>(blocksize),
                                                     DtypeText(dtype), x.data(), n, &packed,
                                                     &absmax, &oracle_error);
  if (codec_ok != oracle_ok) {
    Diverge(Sig("verdict", codec_ok ? oracle_error.rule : "codec-refused"),
            std::string(codec_ok ? "oracle refused (" + qd::harness::Describe(oracle_error) + ")"
                                 : "codec refused (" + codec_error + ")") +
                ", the other quantized; " + quant_type + " blocksize=" +
                std::to_string(blocksize) + " dtype=" + DtypeText(dtype) +
                " n=" + std::to_string(n));
  }
  if (!codec_ok) return 0;
  if (q.packed != packed) {
    std::size_t j = 0;
    while (j < packed.size() && j < q.packed.size() && packed[j] == q.packed[j]) ++j;
    const std::size_t from = j < 4 ? 0 : j - 4;
    const std::size_t count = 8;
    Diverge(Sig("bytes", "packed"),
            std::string(quant_type) + " blocksize=" + std::to_string(blocksize) + " n=" +
                std::to_string(n) + ": first difference at byte " + std::to_string(j) +
                " (elements " + std::to_string(2 * j) + ", " + std::to_string(2 * j + 1) +
                ")\n codec  " +
                BytesHex(q.packed.data() + std::min(from, q.packed.size()),
                         std::min(count, q.packed.size() - std::min(from, q.packed.size()))) +
                "\n oracle " +
                BytesHex(packed.data() + std::min(from, packed.size()),
                         std::min(count, packed.size() - std::min(from, packed.size()))) +
                (2 * j < n ? "\n inputs " + Hex(std::bit_cast<std::uint32_t>(x[2 * j]), 8) : "") +
                (2 * j + 1 < n ? " " + Hex(std::bit_cast<std::uint32_t>(x[2 * j + 1]), 8) : ""));
  }
  if (q.absmax.size() != absmax.size()) {
    Diverge(Sig("bytes", "absmax-count"), "codec " + std::to_string(q.absmax.size()) +
                                              " oracle " + std::to_string(absmax.size()));
  }
  for (std::size_t b = 0; b < absmax.size(); ++b) {
    if (std::bit_cast<std::uint32_t>(q.absmax[b]) != std::bit_cast<std::uint32_t>(absmax[b])) {
      Diverge(Sig("bytes", "absmax"),
              "block " + std::to_string(b) + ": codec " +
                  Hex(std::bit_cast<std::uint32_t>(q.absmax[b]), 8) + " oracle " +
                  Hex(std::bit_cast<std::uint32_t>(absmax[b]), 8));
    }
  }

  // 2. The codec's flat output as a file: every kernel against the oracle.
  CheckDecodes(LayerFile(q, false, quant_type, blocksize, dtype, n), "flat");

  // 3. Nested statistics (the codec's encoder only; the oracle has none).
  if (!nested) return 0;
  qd::codec::Bnb4bitQuantized qn;
  std::string nested_error;
  if (!qd::codec::QuantizeBnb4bit(x.data(), n, type, blocksize, true, &qn, &nested_error,
                                  nullptr, nested_blocksize)) {
    return 0;  // e.g. an empty tensor: bnb cannot take the mean of no maxima
  }
  if (qn.packed != q.packed || qn.absmax.size() != q.absmax.size() ||
      std::memcmp(qn.absmax.data(), q.absmax.data(), 4 * q.absmax.size()) != 0) {
    Diverge(Sig("nested", "flat-parts"),
            "compress_statistics changed the packed bytes or the flat absmax");
  }
  CheckDecodes(LayerFile(qn, true, quant_type, blocksize, dtype, n), "nested");
  return 0;
}
