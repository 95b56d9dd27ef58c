// tensor_table.cc: docs/pt.md section 6.4 over both containers.
#include "codecs/tensor_table.h"

#include "codecs/pt.h"

#include <algorithm>
#include <utility>

namespace qd::codec {

TensorTable TensorTable::FromContainer(Container container) {
  TensorTable table;
  table.container_ = std::move(container);
  table.header_offset_ = 8;
  return table;
}

TableTensor TensorTable::operator[](std::size_t i) const {
  if (pickle_) return tensors_[i];
  const Container& c = container_;
  const TensorEntry& e = c.tensors[i];
  return {e.name, e.dtype, e.shape, e.element_count, e.end - e.begin,
          c.data_start + e.begin, c.data_start + e.end, true};
}

TensorTable TensorTable::FromPt(PtResult pickle) {
  TensorTable table;
  // The table takes the entries' names over: the reading it keeps serves
  // the value model (values, nodes, all_tensors), so each name is held once.
  std::vector<PtTableEntry> entries = std::move(pickle.tensors);
  pickle.tensors = {};
  table.pickle_ = std::make_shared<const PtResult>(std::move(pickle));
  table.header_offset_ = static_cast<std::int64_t>(table.pickle_->pickle_begin);
  const PtResult& r = *table.pickle_;
  table.tensors_.reserve(entries.size());
  table.sources_.reserve(entries.size());
  table.materialised_.reserve(entries.size());
  for (PtTableEntry& e : entries) table.AddPt(r.all_tensors[e.tensor], std::move(e.name), true);
  return table;
}

std::size_t TensorTable::AddValueTensor(std::uint32_t all_tensors_index, std::string name) {
  AddPt(pickle_->all_tensors[all_tensors_index], std::move(name), false);
  return tensors_.size() - 1;
}

void TensorTable::AddPt(const PtTensor& t, std::string name, bool listed) {
  names_->push_back(std::move(name));
  tensors_.push_back({names_->back(), t.dtype, Shape(t.shape.data(), t.shape.size()), t.numel,
                      t.numel * PtItemSize(t.dtype), t.begin, t.end, listed});
  Source s;
  s.view = &t;
  // A contiguous little-endian view is its bytes in place (docs/pt.md 5.3).
  if (!t.big_endian && PtIsContiguous(t)) {
    s.in_place = t.storage + t.storage_offset * PtItemSize(t.dtype);
    s.offset = static_cast<std::int64_t>(t.begin);
  }
  sources_.push_back(s);
  materialised_.emplace_back();
}

const std::uint8_t* TensorTable::Data(std::size_t i) const {
  if (!pickle_) return container_.Data(container_.tensors[i]);
  const Source& s = sources_[i];
  if (s.in_place != nullptr) return s.in_place;
  if (!materialised_[i]) {
    materialised_[i] = std::make_unique<std::vector<std::uint8_t>>(PtTensorBytes(*s.view));
  }
  return materialised_[i]->data();
}

std::int64_t TensorTable::ByteOffset(std::size_t i, std::uint64_t k) const {
  if (!pickle_) {
    return static_cast<std::int64_t>(container_.data_start + container_.tensors[i].begin + k);
  }
  const Source& s = sources_[i];
  if (s.in_place != nullptr || s.view == nullptr) return s.offset + static_cast<std::int64_t>(k);
  const std::uint64_t isz = PtItemSize(s.view->dtype);
  if (tensors_[i].element_count == 0) return static_cast<std::int64_t>(s.view->begin);
  return static_cast<std::int64_t>(PtElementOffset(*s.view, k / isz) + k % isz);
}

bool TensorTable::InStorageOrder(std::size_t i, std::size_t j) const {
  const TableTensor a = (*this)[i];
  const TableTensor b = (*this)[j];
  if (a.begin != b.begin) return a.begin < b.begin;
  if (a.end != b.end) return a.end < b.end;
  return a.name < b.name;  // std::string_view compares bytes as unsigned char
}

const std::string* TensorTable::Metadata(std::string_view key) const {
  return pickle_ ? nullptr : container_.Metadata(key);
}

bool TensorTable::StreamFloat(std::size_t i, std::size_t index, TensorSink& sink) const {
  if (!pickle_) return StreamFloatTensor(container_, container_.tensors[i], index, sink);
  const Source& s = sources_[i];
  // A .pt view (docs/pt.md 5.3) goes kChunkValues elements at a time: a
  // broadcast view of a small storage never exists whole in memory.
  // DecodePtRange refuses only a non-floating dtype, checked here first.
  if (!IsFloatDtype(tensors_[i].dtype)) return false;
  return StreamRows(sink, index, tensors_[i].element_count, 1,
                    [&](std::uint64_t first, std::uint64_t count, float* out) {
                      DecodePtRange(*s.view, first, count, out);
                    });
}

}  // namespace qd::codec
