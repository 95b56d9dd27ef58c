// pt_views.cc: where the oracle finds a tensor's elements (docs/pt.md 5.1,
// 5.3, 6.4), its C-order bytes (5.2, 5.3) and the decoded output (6.3).
// See pt_model.h.
#include <algorithm>

#include "oracles/merged_table.h"
#include "oracles/pt_model.h"
#include "oracles/safetensors.h"

namespace qd::oracle {
namespace pt_internal {

// 5.3 / 6.4: where an accepted tensor's elements lie. begin and end are
// saturated at 2^64 - 1: a broadcast view inside a value (not bounded by
// section 3) can describe more bytes than that.
PtTensorLayout LayoutOf(const Model& model, const Tensor& tensor, bool big_endian) {
  const Storage& storage = model.storages[tensor.storage];
  const std::uint64_t isz = kDtypes[storage.dtype].item_size;
  PtTensorLayout layout;
  layout.storage_start = storage.data_start;
  layout.item_size = isz;
  layout.storage_offset = static_cast<std::uint64_t>(tensor.offset);  // >= 0 (5.1)
  for (const std::int64_t stride : tensor.stride) {
    layout.stride.push_back(static_cast<std::uint64_t>(stride));
  }
  const u128 cap = ~std::uint64_t{0};
  const u128 begin = static_cast<u128>(storage.data_start) + static_cast<u128>(tensor.offset) * isz;
  const u128 end = begin + static_cast<u128>(tensor.numel) * isz;
  layout.begin = static_cast<std::uint64_t>(begin < cap ? begin : cap);
  layout.end = static_cast<std::uint64_t>(end < cap ? end : cap);
  layout.big_endian = big_endian;
  return layout;
}

std::vector<std::uint64_t> ShapeOf(const Tensor& tensor) {
  std::vector<std::uint64_t> shape;
  for (const std::int64_t s : tensor.size) shape.push_back(static_cast<std::uint64_t>(s));
  return shape;
}

}  // namespace pt_internal

namespace {

using pt_internal::u128;

}  // namespace

std::vector<std::size_t> PtDecodedOrder(const std::vector<PtTensorBytes>& table) {
  // Section 6.3 in 6.4's order: (begin, end, name bytes).
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (IsFloatDtype(table[i].dtype)) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&table](std::size_t a, std::size_t b) {
    if (table[a].layout.begin != table[b].layout.begin) return table[a].layout.begin < table[b].layout.begin;
    if (table[a].layout.end != table[b].layout.end) return table[a].layout.end < table[b].layout.end;
    return table[a].name < table[b].name;
  });
  return order;
}

void PtDecodeRange(qd::ByteView file, const PtTensorBytes& tensor, std::uint64_t first,
                   std::uint64_t count, float* out) {
  const std::uint64_t isz = tensor.layout.item_size;
  std::uint8_t element[8] = {};  // the widest item, F64
  for (std::uint64_t i = first; i < first + count; ++i) {
    // 6.4: element i starts at the file offset of its byte i * isz.
    const std::uint8_t* at = file.data + PtByteOffset(tensor.shape, tensor.layout, i * isz);
    for (std::uint64_t b = 0; b < isz; ++b) {
      // 5.2: a big-endian file's elements are byte-swapped on read.
      element[b] = tensor.layout.big_endian ? at[isz - 1 - b] : at[b];
    }
    out[i - first] = FloatElement(tensor.dtype, element, 0);
  }
}

std::uint64_t PtByteOffset(const std::vector<std::uint64_t>& shape, const PtTensorLayout& layout,
                           std::uint64_t k) {
  const std::uint64_t isz = layout.item_size == 0 ? 1 : layout.item_size;
  // The C-order index i = k div isz as a multi-index, last dimension fastest.
  std::uint64_t i = k / isz;
  std::uint64_t s = layout.storage_offset;
  for (std::size_t d = shape.size(); d > 0; --d) {
    const std::uint64_t size = shape[d - 1];
    if (size == 0) break;  // an empty tensor: only k = 0, element index 0
    const std::uint64_t stride = d - 1 < layout.stride.size() ? layout.stride[d - 1] : 0;
    s += (i % size) * stride;
    i /= size;
  }
  return layout.storage_start + s * isz + k % isz;
}

std::int64_t TableTensor::ByteOffset(std::uint64_t k) const {
  if (pt_tensor != nullptr) {
    return static_cast<std::int64_t>(PtByteOffset(pt_tensor->shape, pt_tensor->layout, k));
  }
  return static_cast<std::int64_t>(data_start + begin + k);
}

std::vector<std::uint8_t> PtTensorCOrderBytes(qd::ByteView file,
                                              const std::vector<std::uint64_t>& shape,
                                              const PtTensorLayout& layout) {
  const std::size_t rank = shape.size();
  const std::uint64_t isz = layout.item_size;
  if (layout.stride.size() != rank || isz == 0) return {};
  u128 numel = 1;
  for (const std::uint64_t size : shape) {
    numel *= size;
    if (numel > static_cast<u128>(INT64_MAX)) return {};
  }
  if (numel == 0) return {};
  // The last storage element must lie inside the file (the reader's 5.1
  // bounds already say so for its own layouts; this keeps a stray layout
  // from reading outside the bytes).
  const u128 beyond = static_cast<u128>(1) << 64;  // past any file: stop adding
  u128 last = layout.storage_offset;
  for (std::size_t d = 0; d < rank && last < beyond; ++d) {
    last += static_cast<u128>(shape[d] - 1) * layout.stride[d];
  }
  if (last >= beyond || static_cast<u128>(layout.storage_start) + (last + 1) * isz > file.size) {
    return {};
  }
  if (numel * isz > static_cast<u128>(SIZE_MAX)) return {};
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(numel * isz));
  std::vector<std::uint64_t> index(rank, 0);
  std::uint64_t s = layout.storage_offset;  // the storage element of C-order element i
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(numel); ++i) {
    const std::uint8_t* element = file.data + layout.storage_start + s * isz;
    for (std::uint64_t b = 0; b < isz; ++b) {
      // 5.2: a big-endian file's elements are byte-swapped on read.
      bytes[i * isz + b] = layout.big_endian ? element[isz - 1 - b] : element[b];
    }
    for (std::size_t k = rank; k > 0; --k) {
      const std::size_t d = k - 1;
      index[d] += 1;
      s += layout.stride[d];
      if (index[d] < shape[d]) break;
      s -= layout.stride[d] * shape[d];
      index[d] = 0;
    }
  }
  return bytes;
}
}  // namespace qd::oracle
