// pt_views.cc: a tensor's elements in C order (docs/pt.md 5.2, 5.3, 6.3,
// 6.4): storage indices and byte offsets of a view, its bytes little-endian
// and its floating values to binary32. See pt.h.
#include <cstring>
#include <vector>

#include "codecs/float16.h"
#include "codecs/pt.h"

namespace qd::codec {
namespace {

using u64 = std::uint64_t;

template <typename F>
void ForEachElement(const PtTensor& t, std::uint64_t isz, F&& f) {
  if (t.numel == 0) return;
  const std::size_t rank = t.shape.size();
  if (PtIsContiguous(t)) {
    const std::uint8_t* p = t.storage + t.storage_offset * isz;
    for (u64 i = 0; i < t.numel; ++i) f(p + i * isz);
    return;
  }
  // Odometer over all dimensions but the last; the last runs as a strided loop.
  const u64 inner = t.shape[rank - 1];
  const u64 inner_step = t.stride[rank - 1] * isz;
  std::vector<u64> index(rank, 0);
  u64 base = t.storage_offset;
  while (true) {
    const std::uint8_t* p = t.storage + base * isz;
    for (u64 j = 0; j < inner; ++j) f(p + j * inner_step);
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
  ForEachElement(t, isz, [&](const std::uint8_t* e) {
    LoadElement(e, isz, t.big_endian, out);
    out += isz;
  });
}

std::vector<std::uint8_t> PtTensorBytes(const PtTensor& t) {
  std::vector<std::uint8_t> bytes(t.numel * PtItemSize(t.dtype));
  CopyPtTensorBytes(t, bytes.data());
  return bytes;
}

bool DecodePtTensor(const PtTensor& t, float* out) {
  const bool swap = t.big_endian;
  switch (t.dtype) {
    case Dtype::kF32:
      if (!swap && PtIsContiguous(t)) {
        if (t.numel != 0) std::memcpy(out, t.storage + t.storage_offset * 4, t.numel * 4);
        return true;
      }
      ForEachElement(t, 4, [&](const std::uint8_t* e) {
        std::uint8_t b[4];
        LoadElement(e, 4, swap, b);
        std::memcpy(out++, b, 4);
      });
      return true;
    case Dtype::kF16:
    case Dtype::kBF16: {
      const bool half = t.dtype == Dtype::kF16;
      ForEachElement(t, 2, [&](const std::uint8_t* e) {
        const auto w = static_cast<std::uint16_t>(swap ? (e[1] | (e[0] << 8)) : (e[0] | (e[1] << 8)));
        *out++ = half ? F16ToF32(w) : BF16ToF32(w);
      });
      return true;
    }
    case Dtype::kF64:
      ForEachElement(t, 8, [&](const std::uint8_t* e) {
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
