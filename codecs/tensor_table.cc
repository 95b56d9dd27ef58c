// tensor_table.cc: docs/pt.md section 6.4 over both containers.
#include "codecs/tensor_table.h"

#include "codecs/pt.h"

#include <algorithm>
#include <utility>

namespace qd::codec {

TensorTable TensorTable::FromContainer(Container container) {
  std::vector<Container> one;
  one.push_back(std::move(container));
  return FromShards(std::move(one));
}

TensorTable TensorTable::FromShards(std::vector<Container> shards) {
  TensorTable table;
  table.containers_ = std::move(shards);
  table.header_offset_ = 8;
  // Each container is in (begin, end, name) order already, so shard after
  // shard is the merged order.
  for (const Container& c : table.containers_) {
    table.shard_begin_.push_back(table.shard_begin_.back() + c.tensors.size());
  }
  return table;
}

std::pair<const Container*, std::size_t> TensorTable::Locate(std::size_t i) const {
  const std::size_t s = static_cast<std::size_t>(
      std::upper_bound(shard_begin_.begin(), shard_begin_.end(), i) - shard_begin_.begin() - 1);
  return {&containers_[s], i - shard_begin_[s]};
}

TableTensor TensorTable::operator[](std::size_t i) const {
  if (pickle_) return tensors_[i];
  const auto [c, entry] = Locate(i);
  const TensorEntry& e = c->tensors[entry];
  return {e.name, e.dtype, e.shape, e.element_count, e.end - e.begin,
          c->data_start + e.begin, c->data_start + e.end, true,
          static_cast<std::uint32_t>(c - containers_.data())};
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

TensorTable TensorTable::FromPtShards(std::vector<TensorTable> tables) {
  TensorTable merged;
  merged.merged_pt_ = true;
  for (std::size_t s = 0; s < tables.size(); ++s) {
    TensorTable& t = tables[s];
    if (!merged.pickle_) merged.pickle_ = t.pickle_;
    merged.pt_shards_.push_back(t.pickle_);
    merged.pt_shard_names_.push_back(t.names_);
    merged.shard_header_offsets_.push_back(t.header_offset_);
    for (std::size_t i = 0; i < t.tensors_.size(); ++i) {
      if (!t.tensors_[i].listed) continue;
      TableTensor tensor = t.tensors_[i];
      tensor.shard = static_cast<std::uint32_t>(s);
      merged.tensors_.push_back(tensor);
      merged.sources_.push_back(t.sources_[i]);
      merged.materialised_.push_back(std::move(t.materialised_[i]));
    }
  }
  return merged;
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
  if (!pickle_) {
    const auto [c, entry] = Locate(i);
    return c->Data(c->tensors[entry]);
  }
  const Source& s = sources_[i];
  if (s.in_place != nullptr) return s.in_place;
  if (!materialised_[i]) {
    materialised_[i] = std::make_unique<std::vector<std::uint8_t>>(PtTensorBytes(*s.view));
  }
  return materialised_[i]->data();
}

std::int64_t TensorTable::ByteOffset(std::size_t i, std::uint64_t k) const {
  if (!pickle_) {
    const auto [c, entry] = Locate(i);
    return static_cast<std::int64_t>(c->data_start + c->tensors[entry].begin + k);
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
  if (a.shard != b.shard) return a.shard < b.shard;
  if (a.begin != b.begin) return a.begin < b.begin;
  if (a.end != b.end) return a.end < b.end;
  return a.name < b.name;  // std::string_view compares bytes as unsigned char
}

const std::string_view* TensorTable::Metadata(std::string_view key) const {
  if (pickle_) return nullptr;
  for (const Container& c : containers_) {
    if (const std::string_view* value = c.Metadata(key)) return value;
  }
  return nullptr;
}

bool TensorTable::StreamFloat(std::size_t i, std::size_t index, TensorSink& sink) const {
  if (!pickle_) {
    const auto [c, entry] = Locate(i);
    return StreamFloatTensor(*c, c->tensors[entry], index, sink);
  }
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

bool TensorTable::StreamFloats(TensorSink& sink) const { return StreamFloats({this}, sink); }

bool TensorTable::StreamFloats(const std::vector<const TensorTable*>& tables, TensorSink& sink) {
  std::vector<std::pair<const TensorTable*, std::size_t>> order;
  std::vector<TensorInfo> plan;
  for (const TensorTable* table : tables) {
    std::vector<std::size_t> floats;
    for (std::size_t i = 0; i < table->size(); ++i) {
      const TableTensor t = (*table)[i];
      if (t.listed && IsFloatDtype(t.dtype)) floats.push_back(i);
    }
    std::stable_sort(floats.begin(), floats.end(),
                     [&](std::size_t a, std::size_t b) { return table->InStorageOrder(a, b); });
    for (std::size_t i : floats) {
      const TableTensor t = (*table)[i];
      plan.push_back({std::string(t.name), t.shape});
      order.emplace_back(table, i);
    }
  }
  if (!sink.Plan(plan)) return false;
  for (std::size_t j = 0; j < order.size(); ++j) {
    if (!order[j].first->StreamFloat(order[j].second, j, sink)) return false;
  }
  return true;
}

}  // namespace qd::codec
