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
  std::size_t count = 0;
  for (const Container& c : table.containers_) count += c.tensors.size();
  table.tensors_.reserve(count);
  table.sources_.reserve(count);
  // Each container is in (begin, end, name) order already, so shard after
  // shard is the merged order.
  for (std::size_t s = 0; s < table.containers_.size(); ++s) {
    const Container& c = table.containers_[s];
    for (std::size_t i = 0; i < c.tensors.size(); ++i) {
      const TensorEntry& e = c.tensors[i];
      table.tensors_.push_back({e.name, e.dtype, e.shape, e.element_count, e.end - e.begin,
                                c.data_start + e.begin, c.data_start + e.end, true,
                                static_cast<std::uint32_t>(s)});
      table.sources_.push_back(
          {c.Data(e), static_cast<std::int64_t>(c.data_start + e.begin), nullptr, i});
    }
  }
  table.materialised_.resize(table.tensors_.size());
  return table;
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
  tensors_.push_back({std::move(name), t.dtype, t.shape, t.numel, t.numel * PtItemSize(t.dtype),
                      t.begin, t.end, listed});
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
  const Source& s = sources_[i];
  if (s.in_place != nullptr) return s.in_place;
  if (!materialised_[i]) {
    materialised_[i] = std::make_unique<std::vector<std::uint8_t>>(PtTensorBytes(*s.view));
  }
  return materialised_[i]->data();
}

std::int64_t TensorTable::ByteOffset(std::size_t i, std::uint64_t k) const {
  const Source& s = sources_[i];
  if (s.in_place != nullptr || s.view == nullptr) return s.offset + static_cast<std::int64_t>(k);
  const std::uint64_t isz = PtItemSize(s.view->dtype);
  if (tensors_[i].element_count == 0) return static_cast<std::int64_t>(s.view->begin);
  return static_cast<std::int64_t>(PtElementOffset(*s.view, k / isz) + k % isz);
}

bool TensorTable::InStorageOrder(std::size_t i, std::size_t j) const {
  const TableTensor& a = tensors_[i];
  const TableTensor& b = tensors_[j];
  if (a.shard != b.shard) return a.shard < b.shard;
  if (a.begin != b.begin) return a.begin < b.begin;
  if (a.end != b.end) return a.end < b.end;
  return a.name < b.name;  // std::string compares bytes as unsigned char
}

const std::string* TensorTable::Metadata(std::string_view key) const {
  if (pickle_) return nullptr;
  for (const Container& c : containers_) {
    if (const std::string* value = c.Metadata(key)) return value;
  }
  return nullptr;
}

bool TensorTable::StreamFloat(std::size_t i, std::size_t index, TensorSink& sink) const {
  const Source& s = sources_[i];
  if (s.view == nullptr) {
    const Container& c = containers_[tensors_[i].shard];
    return StreamFloatTensor(c, c.tensors[s.entry], index, sink);
  }
  // A .pt view (docs/pt.md 5.3) goes kChunkValues elements at a time: a
  // broadcast view of a small storage never exists whole in memory.
  // DecodePtRange refuses only a non-floating dtype, checked here first.
  if (!IsFloatDtype(tensors_[i].dtype)) return false;
  return StreamRows(sink, index, tensors_[i].element_count, 1,
                    [&](std::uint64_t first, std::uint64_t count, float* out) {
                      DecodePtRange(*s.view, first, count, out);
                    });
}

bool TensorTable::StreamFloats(TensorSink& sink) const {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].listed && IsFloatDtype(tensors_[i].dtype)) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return InStorageOrder(a, b); });
  std::vector<TensorInfo> plan;
  plan.reserve(order.size());
  for (std::size_t i : order) plan.push_back({tensors_[i].name, tensors_[i].shape});
  if (!sink.Plan(plan)) return false;
  for (std::size_t j = 0; j < order.size(); ++j) {
    if (!StreamFloat(order[j], j, sink)) return false;
  }
  return true;
}

}  // namespace qd::codec
