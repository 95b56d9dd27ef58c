// rbq.cc: Q4B32 / Q8B32 reader, kernels and quantizer.
#include "codecs/rbq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "codecs/float16.h"
#include "codecs/finding.h"

namespace qd::codec {
namespace {

std::uint16_t LoadScale(const std::uint8_t* block) {
  return static_cast<std::uint16_t>(block[0] | (block[1] << 8));
}

// ---- scalar kernels: the codec's slow path ---------------------------------

void DequantizeScalar(int bits, const std::uint8_t* blocks, std::uint64_t count,
                      float* out) {
  const std::uint64_t stride = RbqBlockBytes(bits);
  for (std::uint64_t b = 0; b < count; ++b, blocks += stride, out += 32) {
    const float scale = F16ToF32(LoadScale(blocks));
    const std::uint8_t* payload = blocks + 2;
    for (int k = 0; k < 32; ++k) {
      int q;
      if (bits == 4) {
        const int nibble = (payload[k / 2] >> (4 * (k % 2))) & 0x0f;
        q = (nibble ^ 8) - 8;
      } else {
        q = static_cast<std::int8_t>(payload[k]);
      }
      out[k] = static_cast<float>(q) * scale;
    }
  }
}

float MatvecRowScalar(int bits, const std::uint8_t* row, std::uint64_t blocks,
                      const float* x) {
  const std::uint64_t stride = RbqBlockBytes(bits);
  float row_sum = 0.0f;
  for (std::uint64_t b = 0; b < blocks; ++b, row += stride, x += 32) {
    const float scale = F16ToF32(LoadScale(row));
    float acc = 0.0f;
    for (int k = 0; k < 32; ++k) {
      const int q = bits == 4 ? (((row[2 + k / 2] >> (4 * (k % 2))) & 0x0f) ^ 8) - 8
                              : static_cast<std::int8_t>(row[2 + k]);
      acc += static_cast<float>(q) * x[k];
    }
    row_sum += acc * scale;
  }
  return row_sum;
}

// ---- AVX2 + FMA kernels ------------------------------------------------------
#if defined(__x86_64__)
#define QD_TARGET_AVX2 __attribute__((target("avx2,fma")))

// The 32 codes of a block as four vectors of 8 floats, positions 0..31.
QD_TARGET_AVX2 inline void LoadCodesAvx2(int bits, const std::uint8_t* payload,
                                         __m256 q[4]) {
  __m128i part[2];
  if (bits == 4) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(payload));
    const __m128i low_mask = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(packed, low_mask);  // even positions
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low_mask);
    const __m128i eight = _mm_set1_epi8(8);
    // Interleave so byte i is position i, then sign-extend with (x ^ 8) - 8.
    part[0] = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), eight), eight);
    part[1] = _mm_sub_epi8(_mm_xor_si128(_mm_unpackhi_epi8(lo, hi), eight), eight);
  } else {
    part[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(payload));
    part[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(payload + 16));
  }
  for (int h = 0; h < 2; ++h) {
    q[2 * h] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[h]));
    q[2 * h + 1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(part[h], 8)));
  }
}

QD_TARGET_AVX2 void DequantizeAvx2(int bits, const std::uint8_t* blocks,
                                   std::uint64_t count, float* out) {
  const std::uint64_t stride = RbqBlockBytes(bits);
  for (std::uint64_t b = 0; b < count; ++b, blocks += stride, out += 32) {
    const __m256 scale = _mm256_set1_ps(F16ToF32(LoadScale(blocks)));
    __m256 q[4];
    LoadCodesAvx2(bits, blocks + 2, q);
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(q[i], scale));
  }
}

QD_TARGET_AVX2 float MatvecRowAvx2(int bits, const std::uint8_t* row,
                                   std::uint64_t blocks, const float* x) {
  const std::uint64_t stride = RbqBlockBytes(bits);
  __m256 row_acc = _mm256_setzero_ps();
  for (std::uint64_t b = 0; b < blocks; ++b, row += stride, x += 32) {
    __m256 q[4];
    LoadCodesAvx2(bits, row + 2, q);
    __m256 acc = _mm256_mul_ps(q[0], _mm256_loadu_ps(x));
    acc = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(x + 8), acc);
    acc = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(x + 16), acc);
    acc = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(x + 24), acc);
    row_acc = _mm256_fmadd_ps(acc, _mm256_set1_ps(F16ToF32(LoadScale(row))), row_acc);
  }
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(row_acc),
                          _mm256_extractf128_ps(row_acc, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}
#endif  // __x86_64__

class FindingSink {
 public:
  FindingSink(RbqResult* result, const std::string& file) : result_(result), file_(file) {}
  qd::Finding& Add(std::string rule, qd::Severity severity, std::string_view tensor,
                   std::string field, std::int64_t offset, std::string message) {
    result_->findings.push_back(MakeFinding(std::move(rule), severity, file_, std::string(tensor),
                                            std::move(field), offset, std::move(message)));
    if (severity == qd::Severity::kError) result_->refused = true;
    return result_->findings.back();
  }

 private:
  RbqResult* result_;
  const std::string& file_;
};

// Findings about the header point at its first byte (rules.json conventions).
constexpr std::int64_t kHeaderOffset = 8;

bool IsBlockDtype(Dtype d) { return d == Dtype::kQ4B32 || d == Dtype::kQ8B32; }
int BitsOf(Dtype d) { return d == Dtype::kQ4B32 ? 4 : 8; }

// README "Which format a file is": a block tensor, or a __metadata__ format
// "rabbit-..." (FORMAT null when the key is absent).
bool MarksRbq(bool has_block_tensor, const std::string_view* format) {
  return has_block_tensor || (format != nullptr && format->rfind("rabbit-", 0) == 0);
}

}  // namespace

RbqResult ReadRbq(qd::ByteView file, const std::string& file_name) {
  ContainerResult container = ReadContainer(file, file_name);
  RbqResult result;
  result.findings = std::move(container.findings);
  result.refused = container.refused;
  result.container = std::move(container.container);
  if (result.refused) return result;
  const Container& c = result.container;
  FindingSink sink(&result, file_name);

  const std::string_view* format = c.Metadata("format");
  const TensorEntry* first_block = nullptr;
  for (const TensorEntry& t : c.tensors) {
    if (IsBlockDtype(t.dtype)) {
      first_block = &t;
      break;
    }
  }
  result.is_rbq = MarksRbq(first_block != nullptr, format);
  if (!result.is_rbq) return result;

  for (const TensorEntry& t : c.tensors) {  // RBQ-001
    if (first_block != nullptr && IsBlockDtype(t.dtype) && t.dtype != first_block->dtype) {
      sink.Add("RBQ-001", qd::Severity::kError, t.name, "dtype", kHeaderOffset,
               "file mixes Q4B32 and Q8B32: " + std::string(t.name) + " is " +
                   std::string(InfoOf(t.dtype).name) + ", " + std::string(first_block->name) +
                   " is " + std::string(InfoOf(first_block->dtype).name));
      return result;
    }
  }
  // RBQ-002: width from the tensors, else from the declared format.
  int bits = 0;
  if (first_block != nullptr) {
    bits = BitsOf(first_block->dtype);
  } else if (*format == "rabbit-q4b32") {
    bits = 4;
  } else if (*format == "rabbit-q8b32") {
    bits = 8;
  }
  {
    const std::string want_format = bits == 4 ? "rabbit-q4b32" : "rabbit-q8b32";
    const std::string_view* block = c.Metadata("block");
    const std::string_view* scale = c.Metadata("scale");
    std::string problem;
    std::string field;  // the metadata key at fault
    if (!c.has_metadata) {
      problem = "__metadata__ is absent", field = "__metadata__";
    } else if (bits == 0 || format == nullptr || *format != want_format) {
      problem = bits == 0 ? "no block tensor and format declares no width"
                          : "format is not " + want_format;
      field = "format";
    } else if (block == nullptr || *block != "32") {
      problem = "block is not \"32\"", field = "block";
    } else if (scale == nullptr || *scale != "f16") {
      problem = "scale is not \"f16\"", field = "scale";
    }
    if (!problem.empty()) {
      sink.Add("RBQ-002", qd::Severity::kError, "", field, kHeaderOffset, problem);
      return result;
    }
  }
  result.bits = bits;
  for (const TensorEntry& t : c.tensors) {  // RBQ-003, RBQ-101
    const std::int64_t at = kHeaderOffset;
    if (IsBlockDtype(t.dtype)) {
      if (t.shape.size() != 2 || t.shape[1] % kRbqBlockWeights != 0) {
        sink.Add("RBQ-003", qd::Severity::kError, t.name, "shape", at,
                 "a block tensor must be [rows, columns] with columns a multiple of 32");
        return result;
      }
    } else if (t.shape.size() == 2) {
      sink.Add("RBQ-101", qd::Severity::kWarning, t.name, "dtype", at,
               "two-dimensional tensor kept as " + std::string(InfoOf(t.dtype).name));
    }
  }
  const std::uint64_t block_bytes = RbqBlockBytes(bits);
  for (const TensorEntry& t : c.tensors) {  // RBQ-004
    if (!IsBlockDtype(t.dtype)) continue;
    std::uint64_t want = 0;
    const bool overflow =
        __builtin_mul_overflow(t.shape[0], t.shape[1] / kRbqBlockWeights, &want) ||
        __builtin_mul_overflow(want, block_bytes, &want);
    if (overflow || t.end - t.begin != want) {
      sink.Add("RBQ-004", qd::Severity::kError, t.name, "data_offsets", kHeaderOffset,
               "data_offsets cover " + std::to_string(t.end - t.begin) +
                   " bytes, the shape needs " +
                   (overflow ? std::string("more than 2^64") : std::to_string(want)));
      return result;
    }
    result.block_tensors.push_back(
        RbqTensor{&t, t.shape[0], t.shape[1], c.Data(t)});
  }
  for (const RbqTensor& t : result.block_tensors) {  // RBQ-005
    const std::uint64_t per_row = t.columns / kRbqBlockWeights;
    const std::uint64_t count = t.rows * per_row;
    for (std::uint64_t b = 0; b < count; ++b) {
      const std::uint8_t* block = t.blocks + b * block_bytes;
      if ((LoadScale(block) & 0x7c00u) == 0x7c00u) {
        qd::Finding& f = sink.Add(
            "RBQ-005", qd::Severity::kError, t.entry->name, "scale",
            static_cast<std::int64_t>(block - c.file.data),
            "block scale is not a finite binary16 (row " +
                std::to_string(b / per_row) + ", block " + std::to_string(b % per_row) + ")");
        f.row = static_cast<std::int64_t>(b / per_row);
        f.block = static_cast<std::int64_t>(b % per_row);
        result.block_tensors.clear();
        return result;
      }
    }
  }
  return result;
}

qd::Outcome StreamRbqFile(qd::ByteView file, const std::string& file_name, TensorSink& sink,
                          Kernel kernel) {
  RbqResult r = ReadRbq(file, file_name);
  qd::Outcome outcome{r.refused, std::move(r.findings), {}};
  if (r.refused) return outcome;
  std::vector<TensorInfo> plan;
  for (const TensorEntry& t : r.container.tensors) {
    if (IsBlockDtype(t.dtype) || IsFloatDtype(t.dtype)) plan.push_back({std::string(t.name), t.shape});
  }
  if (!sink.Plan(plan)) return outcome;
  std::size_t next_block = 0;
  std::size_t index = 0;  // in the plan
  for (const TensorEntry& t : r.container.tensors) {
    if (IsFloatDtype(t.dtype)) {
      if (!StreamFloatTensor(r.container, t, index++, sink)) break;
      continue;
    }
    if (!IsBlockDtype(t.dtype)) continue;
    // Whole rows at a time: a row is columns / 32 whole blocks.
    const RbqTensor& bt = r.block_tensors[next_block++];
    const std::uint64_t row_bytes = bt.columns / kRbqBlockWeights * RbqBlockBytes(r.bits);
    const bool more = StreamRows(sink, index++, bt.rows, bt.columns,
                                 [&](std::uint64_t row, std::uint64_t count, float* out) {
                                   RbqDequantize(r.bits, bt.blocks + row * row_bytes, count,
                                                 bt.columns, out, kernel);
                                 });
    if (!more) break;
  }
  return outcome;
}

qd::Outcome DecodeRbqFile(qd::ByteView file, const std::string& file_name,
                          Kernel kernel) {
  return CollectStream([&](TensorSink& sink) { return StreamRbqFile(file, file_name, sink, kernel); });
}

void RbqDequantize(int bits, const std::uint8_t* blocks, std::uint64_t rows,
                   std::uint64_t columns, float* out, Kernel kernel) {
  const std::uint64_t count = rows * (columns / kRbqBlockWeights);
#if defined(__x86_64__)
  if (kernel == Kernel::kAvx2) return DequantizeAvx2(bits, blocks, count, out);
#endif
  DequantizeScalar(bits, blocks, count, out);
}

void RbqMatvec(int bits, const std::uint8_t* blocks, std::uint64_t rows,
               std::uint64_t columns, const float* x, float* y, Kernel kernel) {
  const std::uint64_t per_row = columns / kRbqBlockWeights;
  const std::uint64_t row_bytes = per_row * RbqBlockBytes(bits);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint8_t* row = blocks + r * row_bytes;
#if defined(__x86_64__)
    if (kernel == Kernel::kAvx2) {
      y[r] = MatvecRowAvx2(bits, row, per_row, x);
      continue;
    }
#endif
    y[r] = MatvecRowScalar(bits, row, per_row, x);
  }
}

bool RbqQuantize(int bits, const float* weights, std::uint64_t rows,
                 std::uint64_t columns, std::vector<std::uint8_t>* blocks,
                 qd::Finding* error) {
  if (columns % kRbqBlockWeights != 0) {
    error->rule = "RBQ-003";
    error->field = "shape";
    error->message = "columns " + std::to_string(columns) + " is not a multiple of 32";
    return false;
  }
  const float levels = bits == 4 ? 7.0f : 127.0f;
  const float lowest = bits == 4 ? -8.0f : -128.0f;
  const std::uint64_t block_bytes = RbqBlockBytes(bits);
  const std::uint64_t count = rows * (columns / kRbqBlockWeights);
  blocks->assign(count * block_bytes, 0);
  for (std::uint64_t b = 0; b < count; ++b) {
    const float* w = weights + b * kRbqBlockWeights;
    std::uint8_t* out = blocks->data() + b * block_bytes;
    float max_abs = 0.0f;
    for (std::uint64_t k = 0; k < kRbqBlockWeights; ++k) {
      if (!std::isfinite(w[k])) {
        error->rule = "RBQ-005";
        error->field = "weights";
        error->row = static_cast<std::int64_t>(b / (columns / kRbqBlockWeights));
        error->block = static_cast<std::int64_t>(b % (columns / kRbqBlockWeights));
        error->element = static_cast<std::int64_t>(k);
        error->message = "input weight is not finite";
        return false;
      }
      max_abs = std::max(max_abs, std::fabs(w[k]));
    }
    const std::uint16_t scale_bits = F32ToF16(max_abs / levels);
    if ((scale_bits & 0x7c00u) == 0x7c00u) {
      error->rule = "RBQ-005";
      error->field = "scale";
      error->row = static_cast<std::int64_t>(b / (columns / kRbqBlockWeights));
      error->block = static_cast<std::int64_t>(b % (columns / kRbqBlockWeights));
      error->message = "block maximum overflows a binary16 scale";
      return false;
    }
    const float scale = F16ToF32(scale_bits);
    if (scale == 0.0f) continue;  // all-zero (or underflowing) block: zeros
    out[0] = static_cast<std::uint8_t>(scale_bits & 0xff);
    out[1] = static_cast<std::uint8_t>(scale_bits >> 8);
    for (std::uint64_t k = 0; k < kRbqBlockWeights; ++k) {
      const float q = std::clamp(std::round(w[k] / scale), lowest, levels);
      const int code = static_cast<int>(q);
      if (bits == 4) {
        out[2 + k / 2] |= static_cast<std::uint8_t>((code & 0x0f) << (4 * (k % 2)));
      } else {
        out[2 + k] = static_cast<std::uint8_t>(static_cast<std::int8_t>(code));
      }
    }
  }
  return true;
}

bool ClaimsRbq(const ClaimInput& input) {
  const TensorTable* table = input.Get();
  if (table == nullptr) return false;
  bool has_block_tensor = false;
  for (std::size_t i = 0; i < table->size() && !has_block_tensor; ++i) {
    has_block_tensor = IsBlockDtype((*table)[i].dtype);
  }
  return MarksRbq(has_block_tensor, table->Metadata("format"));
}

}  // namespace qd::codec
