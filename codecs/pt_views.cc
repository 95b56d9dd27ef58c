// pt_views.cc: a tensor's elements in C order (docs/pt.md 5.2, 5.3, 6.3,
// 6.4): storage indices and byte offsets of a view, its bytes little-endian
// and its floating values to binary32. See pt.h.
#include <algorithm>
#include <cstring>
#include <vector>

#include "codecs/float16.h"
#include "codecs/pt.h"

namespace qd::codec {
namespace {

using u64 = std::uint64_t;

// Calls f with the address of C-order elements [first, first + count) of
// the view, in order (section 5.3); first + count <= numel.
template <typename F>
void ForEachElement(const PtTensor& t, std::uint64_t isz, u64 first, u64 count, F&& f) {
  if (count == 0) return;
  const std::size_t rank = t.shape.size();
  if (PtIsContiguous(t)) {
    const std::uint8_t* p = t.storage + (t.storage_offset + first) * isz;
    for (u64 i = 0; i < count; ++i) f(p + i * isz);
    return;
  }
  // The multi-index of `first`, then an odometer over all dimensions but the
  // last; the last runs as a strided loop (rank >= 1: rank 0 is contiguous).
  std::vector<u64> index(rank, 0);
  u64 base = t.storage_offset;  // storage element of the multi-index
  u64 rest = first;
  for (std::size_t k = rank; k-- > 0;) {
    index[k] = rest % t.shape[k];
    rest /= t.shape[k];
    base += index[k] * t.stride[k];
  }
  const u64 inner = t.shape[rank - 1];
  const u64 inner_stride = t.stride[rank - 1];
  while (true) {
    const u64 run = std::min(inner - index[rank - 1], count);
    const std::uint8_t* p = t.storage + base * isz;
    for (u64 j = 0; j < run; ++j) f(p + j * inner_stride * isz);
    count -= run;
    if (count == 0) return;
    base -= index[rank - 1] * inner_stride;
    index[rank - 1] = 0;
    std::size_t k = rank - 1;
    while (true) {
      if (k == 0) return;
      --k;
      if (++index[k] < t.shape[k]) {
        base += t.stride[k];
        break;
      }
      base -= (t.shape[k] - 1) * t.stride[k];
      index[k] = 0;
    }
  }
}

inline void LoadElement(const std::uint8_t* src, u64 isz, bool swap, std::uint8_t* dst) {
  if (!swap) {
    std::memcpy(dst, src, isz);
  } else {
    for (u64 b = 0; b < isz; ++b) dst[b] = src[isz - 1 - b];
  }
}

}  // namespace

std::uint64_t PtItemSize(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF64: case Dtype::kI64: return 8;
    case Dtype::kF32: case Dtype::kI32: return 4;
    case Dtype::kF16: case Dtype::kBF16: case Dtype::kI16: return 2;
    case Dtype::kI8: case Dtype::kU8: case Dtype::kBool: return 1;
    default: return 0;
  }
}

bool PtIsContiguous(const PtTensor& t) {
  u64 expected = 1;
  for (std::size_t k = t.shape.size(); k-- > 0;) {
    if (t.shape[k] != 1 && t.stride[k] != expected) return false;
    expected *= t.shape[k];
  }
  return true;
}

std::uint64_t PtStorageIndex(const PtTensor& t, std::uint64_t i) {
  u64 s = t.storage_offset;
  for (std::size_t k = t.shape.size(); k-- > 0;) {
    const u64 dim = t.shape[k];
    s += (i % dim) * t.stride[k];
    i /= dim;
  }
  return s;
}

std::uint64_t PtElementOffset(const PtTensor& t, std::uint64_t i) {
  return t.storage_begin + PtStorageIndex(t, i) * PtItemSize(t.dtype);
}

void CopyPtTensorBytes(const PtTensor& t, std::uint8_t* out) {
  const u64 isz = PtItemSize(t.dtype);
  if (!t.big_endian && PtIsContiguous(t)) {
    if (t.numel != 0) std::memcpy(out, t.storage + t.storage_offset * isz, t.numel * isz);
    return;
  }
  ForEachElement(t, isz, 0, t.numel, [&](const std::uint8_t* e) {
    LoadElement(e, isz, t.big_endian, out);
    out += isz;
  });
}

std::vector<std::uint8_t> PtTensorBytes(const PtTensor& t) {
  std::vector<std::uint8_t> bytes(t.numel * PtItemSize(t.dtype));
  CopyPtTensorBytes(t, bytes.data());
  return bytes;
}

bool DecodePtTensor(const PtTensor& t, float* out) { return DecodePtRange(t, 0, t.numel, out); }

bool DecodePtRange(const PtTensor& t, std::uint64_t first, std::uint64_t count, float* out) {
  const bool swap = t.big_endian;
  switch (t.dtype) {
    case Dtype::kF32:
      if (!swap && PtIsContiguous(t)) {
        if (count != 0) std::memcpy(out, t.storage + (t.storage_offset + first) * 4, count * 4);
        return true;
      }
      ForEachElement(t, 4, first, count, [&](const std::uint8_t* e) {
        std::uint8_t b[4];
        LoadElement(e, 4, swap, b);
        std::memcpy(out++, b, 4);
      });
      return true;
    case Dtype::kF16:
    case Dtype::kBF16: {
      const bool half = t.dtype == Dtype::kF16;
      ForEachElement(t, 2, first, count, [&](const std::uint8_t* e) {
        const auto w = static_cast<std::uint16_t>(swap ? (e[1] | (e[0] << 8)) : (e[0] | (e[1] << 8)));
        *out++ = half ? F16ToF32(w) : BF16ToF32(w);
      });
      return true;
    }
    case Dtype::kF64:
      ForEachElement(t, 8, first, count, [&](const std::uint8_t* e) {
        std::uint8_t b[8];
        LoadElement(e, 8, swap, b);
        double v;
        std::memcpy(&v, b, 8);
        *out++ = static_cast<float>(v);
      });
      return true;
    default:
      return false;
  }
}

}  // namespace qd::codec
