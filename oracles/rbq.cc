// rbq.cc: the oracle's Q4B32 / Q8B32 reader, decoder, quantizer and matrix
// vector product, written from specs/002_a5b0561d4b728a5e.txt.
//
// Sections, in the order of the spec and the catalogue:
//   1. binary16 conversions (spec "The scale": f32_to_f16, half_to_f32)
//   2. the block ("The block", "The payload")
//   3. the file rules ("The file"): RBQ-001, RBQ-002, RBQ-003 + RBQ-101,
//      RBQ-004, RBQ-005
//   4. decoding an accepted file
//   5. the reference quantizer ("The scale")
//   6. the reference matrix vector product ("Why the matrix vector product
//      decodes in place")
#include "oracles/rbq.h"
#include "oracles/bytes.h"
#include "oracles/finding.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "quantdiff/tensor_sink.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::int64_t kHeaderOffset = 8;  // byte_offset of header findings
constexpr std::uint64_t kBlockWeights = 32;

bool MultiplyU64(std::uint64_t a, std::uint64_t b, std::uint64_t* product) {
  if (a != 0 && b > kU64Max / a) return false;
  *product = a * b;
  return true;
}

// ---------------------------------------------------------------------------
// Section 2: the block. 18 bytes for four bits, 34 for eight: a binary16
// scale (little endian) at offset 0, then the payload at offset 2.

std::uint64_t BlockBytes(int bits) { return bits == 4 ? 18 : 34; }

bool IsBlockDtype(const std::string& dtype) { return dtype == "Q4B32" || dtype == "Q8B32"; }

int DtypeWidth(const std::string& dtype) { return dtype == "Q4B32" ? 4 : 8; }

// q of weight n (0..31) of a block.
int QuantizedValue(int bits, const std::uint8_t* block, int n) {
  if (bits == 4) {
    // nibble = (byte >> (4 * (n % 2))) & 0x0f; q = (nibble ^ 8) - 8
    const std::uint8_t byte = block[2 + n / 2];
    const int nibble = (byte >> (4 * (n % 2))) & 0x0F;
    return (nibble ^ 8) - 8;
  }
  // One two's complement byte per weight.
  return static_cast<std::int8_t>(block[2 + n]);
}

// ---------------------------------------------------------------------------
// Section 3: the file rules.

struct Reporter {
  qd::Outcome* outcome;
  const std::string& file;

  qd::Finding Make(const char* rule, qd::Severity severity, const std::string& tensor,
                   const char* field, std::int64_t byte_offset, const std::string& message) const {
    return NewFinding(rule, severity, file, tensor, field, byte_offset, message);
  }

  // Appends an error (the last finding); returns false for `return report.Error(...)`.
  bool Error(const qd::Finding& finding) const {
    outcome->findings.push_back(finding);
    outcome->refused = true;
    return false;
  }
  bool Error(const char* rule, const std::string& tensor, const char* field,
             const std::string& message) const {
    return Error(Make(rule, qd::Severity::kError, tensor, field, kHeaderOffset, message));
  }
  void Warning(const char* rule, const std::string& tensor, const char* field,
               const std::string& message) const {
    outcome->findings.push_back(Make(rule, qd::Severity::kWarning, tensor, field, kHeaderOffset, message));
  }
};

// The __metadata__ value of key, or nullptr (a container's or a table's).
template <typename Holder>
const std::string* FindMetadata(const Holder& holder, const std::string& key) {
  for (const auto& [name, value] : holder.metadata) {
    if (name == key) return &value;
  }
  return nullptr;
}

// README "Which format a file is": an RBQ file has a Q4B32/Q8B32 tensor or
// __metadata__.format "rabbit-...".
template <typename Holder>
bool IsRbqContainer(const Holder& holder) {
  for (const ContainerTensor& tensor : holder.tensors) {
    if (IsBlockDtype(tensor.dtype)) return true;
  }
  const std::string* format = FindMetadata(holder, "format");
  return format != nullptr && format->rfind("rabbit-", 0) == 0;
}

// RBQ-001: one file carries one width. *block_dtype is the dtype of the
// first block tensor, or empty when there is none.
bool CheckOneWidth(const Container& container, const Reporter& report, std::string* block_dtype) {
  for (const ContainerTensor& tensor : container.tensors) {
    if (!IsBlockDtype(tensor.dtype)) continue;
    if (block_dtype->empty()) {
      *block_dtype = tensor.dtype;
    } else if (tensor.dtype != *block_dtype) {  // RBQ-001
      return report.Error("RBQ-001", tensor.name, "dtype",
                          "the file mixes Q4B32 and Q8B32: this tensor is " + tensor.dtype +
                              ", the first block tensor is " + *block_dtype);
    }
  }
  return true;
}

// RBQ-002: __metadata__ declares the width: format rabbit-q4b32 or
// rabbit-q8b32, block "32", scale "f16". The width comes from the block
// tensors, or from format when there is none.
bool CheckDeclaration(const Container& container, const Reporter& report,
                      const std::string& block_dtype, int* bits) {
  // RBQ-002: __metadata__ is present.
  if (!container.has_metadata) {
    return report.Error("RBQ-002", "", "__metadata__",
                        "__metadata__ is absent; it must declare format, block and scale");
  }
  const std::string* format = FindMetadata(container, "format");
  if (!block_dtype.empty()) {
    *bits = DtypeWidth(block_dtype);
  } else if (format != nullptr && *format == "rabbit-q4b32") {
    *bits = 4;
  } else if (format != nullptr && *format == "rabbit-q8b32") {
    *bits = 8;
  } else {  // RBQ-002: no width at all
    return report.Error("RBQ-002", "", "format",
                        "no block tensor and format is neither rabbit-q4b32 nor rabbit-q8b32");
  }
  const std::string expected_format = *bits == 4 ? "rabbit-q4b32" : "rabbit-q8b32";
  // RBQ-002: format, block and scale have the values the width requires.
  if (format == nullptr || *format != expected_format) {
    return report.Error("RBQ-002", "", "format", "format must be " + expected_format);
  }
  const std::string* block = FindMetadata(container, "block");
  if (block == nullptr || *block != "32") {
    return report.Error("RBQ-002", "", "block", "block must be \"32\"");
  }
  const std::string* scale = FindMetadata(container, "scale");
  if (scale == nullptr || *scale != "f16") {
    return report.Error("RBQ-002", "", "scale", "scale must be \"f16\"");
  }
  return true;
}

// RBQ-003: a block tensor is two dimensional with columns a multiple of 32.
// RBQ-101 (warning, same pass): a two dimensional tensor that is not a block
// tensor.
bool CheckShapes(const Container& container, const Reporter& report) {
  for (const ContainerTensor& tensor : container.tensors) {
    const bool two_dimensional = tensor.shape.size() == 2;
    if (IsBlockDtype(tensor.dtype)) {
      if (!two_dimensional || tensor.shape[1] % kBlockWeights != 0) {  // RBQ-003
        return report.Error("RBQ-003", tensor.name, "shape",
                            "a block tensor must be two dimensional with columns a multiple of 32");
      }
    } else if (two_dimensional) {  // RBQ-101
      report.Warning("RBQ-101", tensor.name, "dtype",
                     "a two dimensional tensor kept as " + tensor.dtype +
                         " instead of the file's block dtype");
    }
  }
  return true;
}

// RBQ-004: end - begin = rows * (columns / 32) * 18 or 34 (an overflowing
// product disagrees).
bool CheckByteLengths(const Container& container, const Reporter& report, int bits) {
  for (const ContainerTensor& tensor : container.tensors) {
    if (!IsBlockDtype(tensor.dtype)) continue;
    const std::uint64_t rows = tensor.shape[0];
    const std::uint64_t blocks_per_row = tensor.shape[1] / kBlockWeights;
    std::uint64_t blocks = 0;
    std::uint64_t bytes = 0;
    const bool fits = MultiplyU64(rows, blocks_per_row, &blocks) &&
                      MultiplyU64(blocks, BlockBytes(bits), &bytes);
    if (!fits || tensor.end - tensor.begin != bytes) {  // RBQ-004
      return report.Error("RBQ-004", tensor.name, "data_offsets",
                          "data_offsets cover " + std::to_string(tensor.end - tensor.begin) +
                              " bytes, which disagrees with the shape and the width");
    }
  }
  return true;
}

// RBQ-005: every block scale is a finite binary16 (exponent not all ones).
// Visited tensor by tensor, then row by row, then block by block.
bool CheckScales(qd::ByteView file, const Container& container, const Reporter& report, int bits) {
  for (const ContainerTensor& tensor : container.tensors) {
    if (!IsBlockDtype(tensor.dtype)) continue;
    const std::uint64_t blocks_per_row = tensor.shape[1] / kBlockWeights;
    const std::uint64_t block_count = (tensor.end - tensor.begin) / BlockBytes(bits);  // RBQ-004 passed
    for (std::uint64_t b = 0; b < block_count; ++b) {
      const std::uint64_t offset = container.data_start + tensor.begin + b * BlockBytes(bits);
      const std::uint16_t scale = LoadU16(file.data + offset);
      if ((scale & 0x7C00) == 0x7C00) {  // RBQ-005
        qd::Finding finding = report.Make("RBQ-005", qd::Severity::kError, tensor.name, "scale",
                                          static_cast<std::int64_t>(offset),
                                          "the block scale is not a finite binary16");
        finding.row = static_cast<std::int64_t>(b / blocks_per_row);
        finding.block = static_cast<std::int64_t>(b % blocks_per_row);
        return report.Error(finding);
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Section 4: decoding. weight = q * half_to_f32(scale), one binary32 multiply.

bool StreamBlockTensor(qd::ByteView file, const Container& container, const ContainerTensor& tensor,
                       int bits, std::size_t index, qd::TensorSink& sink) {
  // RBQ-003 and RBQ-004 passed: rows x columns, columns / 32 blocks a row.
  const std::uint64_t rows = tensor.shape[0];
  const std::uint64_t columns = tensor.shape[1];
  const std::uint64_t blocks_per_row = columns / kBlockWeights;
  const std::uint8_t* data = file.data + container.data_start + tensor.begin;
  return StreamRows(sink, index, rows, columns, [&](std::uint64_t row, std::uint64_t count, float* out) {
    // Blocks are stored row by row, left to right, so block b holds the
    // weights b * 32 .. b * 32 + 31 of the row-major matrix.
    const std::uint64_t first_block = row * blocks_per_row;
    for (std::uint64_t b = 0; b < count * blocks_per_row; ++b) {
      const std::uint8_t* block = data + (first_block + b) * BlockBytes(bits);
      const float scale = HalfToFloat(LoadU16(block));
      for (int n = 0; n < 32; ++n) {
        const float q = static_cast<float>(QuantizedValue(bits, block, n));
        out[b * kBlockWeights + n] = q * scale;
      }
    }
  });
}

}  // namespace

// ---------------------------------------------------------------------------
// Section 1: binary32 -> binary16, round to nearest, ties to even.

std::uint16_t FloatToHalf(float value) {
  const std::uint32_t bits = BitsOfFloat(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
  const std::uint32_t exponent = (bits >> 23) & 0xFF;
  const std::uint32_t mantissa = bits & 0x7FFFFF;
  if (exponent == 0xFF) {
    if (mantissa == 0) return sign | 0x7C00;  // infinity
    // NaN: keep the top payload bits and force the quiet bit.
    return static_cast<std::uint16_t>(sign | 0x7C00 | 0x0200 | (mantissa >> 13));
  }
  if (exponent == 0) {
    // Zero or a binary32 subnormal (< 2^-126): far below half the smallest
    // binary16 subnormal (2^-25), so it rounds to zero.
    return sign;
  }
  const int unbiased = static_cast<int>(exponent) - 127;
  const std::uint32_t significand = mantissa | 0x800000;  // 24 bits: value = significand * 2^(unbiased - 23)
  if (unbiased > 15) return sign | 0x7C00;  // >= 2^16, beyond 65504: infinity
  if (unbiased >= -14) {
    // A binary16 normal keeps 11 significant bits; 13 bits are rounded off.
    std::uint32_t kept = significand >> 13;
    const std::uint32_t rest = significand & 0x1FFF;
    const std::uint32_t halfway = 0x1000;
    if (rest > halfway || (rest == halfway && (kept & 1) != 0)) kept += 1;
    // kept is 0x400..0x800; 0x800 carries into the exponent (up to infinity).
    const std::uint32_t biased = static_cast<std::uint32_t>(unbiased + 15);
    return static_cast<std::uint16_t>(sign | ((biased << 10) + (kept - 0x400)));
  }
  // A binary16 subnormal counts units of 2^-24:
  // value / 2^-24 = significand * 2^(unbiased + 1), a right shift by -(unbiased + 1) >= 14.
  const int shift = -(unbiased + 1);
  if (shift > 25) return sign;  // below 2^-25 (half a unit): rounds to zero
  std::uint32_t kept = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1) != 0)) kept += 1;
  // kept is 0..0x400; 0x400 is the smallest normal, which the bits spell too.
  return static_cast<std::uint16_t>(sign | kept);
}

// ---------------------------------------------------------------------------
// The reader.

qd::Outcome StreamRbqFile(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink) {
  qd::Outcome outcome;
  Container container;
  if (!CheckContainer(file, file_name, &outcome, &container)) return outcome;

  if (!IsRbqContainer(container)) {
    StreamFloatTensors(file, container, sink);  // exactly what ReadSafetensors decodes
    return outcome;
  }

  const Reporter report{&outcome, file_name};
  std::string block_dtype;
  if (!CheckOneWidth(container, report, &block_dtype)) return outcome;  // RBQ-001
  int bits = 0;
  if (!CheckDeclaration(container, report, block_dtype, &bits)) return outcome;  // RBQ-002
  if (!CheckShapes(container, report)) return outcome;                          // RBQ-003, RBQ-101
  if (!CheckByteLengths(container, report, bits)) return outcome;               // RBQ-004
  if (!CheckScales(file, container, report, bits)) return outcome;              // RBQ-005

  // Every block tensor and every floating tensor, in container order.
  std::vector<const ContainerTensor*> decoded;
  std::vector<qd::TensorInfo> plan;
  for (const ContainerTensor& tensor : container.tensors) {
    if (!IsBlockDtype(tensor.dtype) && !IsFloatDtype(tensor.dtype)) continue;
    decoded.push_back(&tensor);
    plan.push_back({tensor.name, tensor.shape});
  }
  if (!sink.Plan(plan)) return outcome;
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const ContainerTensor& tensor = *decoded[i];
    const bool more = IsBlockDtype(tensor.dtype)
                          ? StreamBlockTensor(file, container, tensor, bits, i, sink)
                          : StreamFloatTensor(file, container, tensor, i, sink);
    if (!more) break;
  }
  return outcome;
}

qd::Outcome ReadRbqFile(qd::ByteView file, const std::string& file_name) {
  return CollectStream([&](qd::TensorSink& sink) { return StreamRbqFile(file, file_name, sink); });
}

// ---------------------------------------------------------------------------
// Section 5: the reference quantizer.
//   scale = f32_to_f16(max(|w| for w in block) / levels)
//   q = round(w / f32(f16_to_f32(scale))), clamped to the range

namespace {

qd::Finding QuantizerError(const char* rule, const char* field, const std::string& message) {
  return NewFinding(rule, qd::Severity::kError, "", "", field, -1, message);
}

}  // namespace

bool QuantizeRbq(int bits, const float* weights, std::uint64_t rows, std::uint64_t columns,
                 std::vector<std::uint8_t>* blocks, qd::Finding* error) {
  blocks->clear();
  if (bits != 4 && bits != 8) {
    *error = QuantizerError("RBQ-002", "format", "the width must be 4 or 8 bits");
    return false;
  }
  // RBQ-003: columns must be a multiple of 32 (no partial block).
  if (columns % kBlockWeights != 0) {
    *error = QuantizerError("RBQ-003", "shape", "columns must be a multiple of 32");
    return false;
  }
  const std::uint64_t blocks_per_row = columns / kBlockWeights;
  std::uint64_t block_count = 0;
  std::uint64_t byte_count = 0;
  if (!MultiplyU64(rows, blocks_per_row, &block_count) ||
      !MultiplyU64(block_count, BlockBytes(bits), &byte_count)) {
    *error = QuantizerError("RBQ-004", "data_offsets", "the block bytes overflow 64 bits");
    return false;
  }
  const float levels = bits == 4 ? 7.0f : 127.0f;  // the largest positive level
  const float lowest = bits == 4 ? -8.0f : -128.0f;
  std::vector<std::uint8_t> out(byte_count, 0);

  // Block b is the weights b * 32 .. b * 32 + 31 of the row-major matrix.
  for (std::uint64_t b = 0; b < block_count; ++b) {
    const float* w = weights + b * kBlockWeights;
    std::uint8_t* block = out.data() + b * BlockBytes(bits);
    const std::int64_t row = static_cast<std::int64_t>(b / blocks_per_row);
    const std::int64_t block_index = static_cast<std::int64_t>(b % blocks_per_row);

    // RBQ-005: a non-finite weight has no finite scale.
    float largest = 0.0f;
    for (int n = 0; n < 32; ++n) {
      if (!std::isfinite(w[n])) {
        *error = QuantizerError("RBQ-005", "scale", "a non-finite input weight");
        error->row = row;
        error->block = block_index;
        return false;
      }
      const float magnitude = std::fabs(w[n]);
      if (magnitude > largest) largest = magnitude;
    }

    const std::uint16_t scale_bits = FloatToHalf(largest / levels);
    // RBQ-005: the scale must be a finite binary16.
    if ((scale_bits & 0x7C00) == 0x7C00) {
      *error = QuantizerError("RBQ-005", "scale", "the block scale rounds to binary16 infinity");
      error->row = row;
      error->block = block_index;
      return false;
    }
    const float scale = HalfToFloat(scale_bits);
    if (scale == 0.0f) continue;  // a block of zeros (or underflow): scale 0.0, payload zero

    block[0] = static_cast<std::uint8_t>(scale_bits & 0xFF);
    block[1] = static_cast<std::uint8_t>(scale_bits >> 8);
    for (int n = 0; n < 32; ++n) {
      float q = std::round(w[n] / scale);  // half away from zero
      if (q < lowest) q = lowest;
      if (q > levels) q = levels;
      const int level = static_cast<int>(q);
      if (bits == 8) {
        block[2 + n] = static_cast<std::uint8_t>(level & 0xFF);
      } else {
        // The even position is the low nibble, the odd one the high nibble.
        block[2 + n / 2] |= static_cast<std::uint8_t>((level & 0x0F) << (4 * (n % 2)));
      }
    }
  }
  *blocks = std::move(out);
  return true;
}

// ---------------------------------------------------------------------------
// Section 6: the reference matrix vector product.
//   for each row: for each block of the row:
//     scale = half_to_f32(block[0..2])
//     accumulator = sum over the 32 weights of q * input
//     row_sum += accumulator * scale

bool MatvecRbq(int bits, qd::ByteView blocks, std::uint64_t rows, std::uint64_t columns,
               const float* x, float* y) {
  if (bits != 4 && bits != 8) return false;
  if (columns % kBlockWeights != 0) return false;
  const std::uint64_t blocks_per_row = columns / kBlockWeights;
  std::uint64_t block_count = 0;
  std::uint64_t byte_count = 0;
  if (!MultiplyU64(rows, blocks_per_row, &block_count) ||
      !MultiplyU64(block_count, BlockBytes(bits), &byte_count)) {
    return false;
  }
  if (blocks.size != byte_count) return false;

  for (std::uint64_t r = 0; r < rows; ++r) {
    float row_sum = 0.0f;
    for (std::uint64_t k = 0; k < blocks_per_row; ++k) {
      const std::uint8_t* block = blocks.data + (r * blocks_per_row + k) * BlockBytes(bits);
      const float scale = HalfToFloat(LoadU16(block));
      float accumulator = 0.0f;
      for (int n = 0; n < 32; ++n) {
        const float q = static_cast<float>(QuantizedValue(bits, block, n));
        accumulator += q * x[k * kBlockWeights + n];
      }
      row_sum += accumulator * scale;
    }
    y[r] = row_sum;
  }
  return true;
}

bool IsRbqFile(const ClaimInput& input) {
  const MergedTable* table = input.Get();
  return table != nullptr && IsRbqContainer(*table);
}

}  // namespace qd::oracle
