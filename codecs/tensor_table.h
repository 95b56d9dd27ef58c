// tensor_table.h: the tensors a format reader sees, whatever container they
// came in (docs/pt.md section 6.4): a safetensors container, or the tensor
// table of a torch .pt file (plus, for the bitsandbytes list layout, tensors
// that sit inside a value of its value table).
//
// A format reader asks for a tensor's C-order little-endian bytes, the file
// offset of byte k of them (for findings), and orders tensors by (begin,
// end, name). safetensors tensors and contiguous little-endian .pt tensors
// are read in place; a .pt view or a big-endian file is materialised on
// first use, once.
//
//   qd::codec::TensorTable table = qd::codec::TensorTable::FromContainer(c);
//   for (std::size_t i = 0; i < table.size(); ++i) Use(table[i].name, table.Data(i));
#ifndef QUANTDIFF_CODECS_TENSOR_TABLE_H_
#define QUANTDIFF_CODECS_TENSOR_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/safetensors.h"

namespace qd::codec {

// A .pt reading (codecs/pt.h), held by pointer: the format readers that take
// a table do not see the .pt value model.
struct PtResult;
struct PtTensor;

// A view: name and shape point into the table (or its container), which
// outlives it.
struct TableTensor {
  std::string_view name;
  Dtype dtype = Dtype::kU8;
  Shape shape;
  std::uint64_t element_count = 1;
  std::uint64_t byte_length = 0;  // the bytes Data() holds
  // Ordering keys, absolute file offsets: safetensors 8 + N + begin / end;
  // .pt ds + storage_offset * isz and begin + numel * isz (docs/pt.md 6.4).
  std::uint64_t begin = 0, end = 0;
  // False for a tensor reached through a value (docs/pt.md 7): findable by
  // index only, never by name, never decoded on its own.
  bool listed = true;
  // The shard holding the tensor in a model directory's merged table
  // (docs/model_dir.md 4): the first ordering key; 0 for a single file.
  std::uint32_t shard = 0;
};

class TensorTable {
 public:
  static TensorTable FromContainer(Container container);
  // A model directory's merged table (docs/model_dir.md 4): the accepted
  // shards in shard order, their tensors ordered by (shard, begin, end,
  // name); `__metadata__` is the shards' union, the first shard holding a key
  // answering for it.
  static TensorTable FromShards(std::vector<Container> shards);
  // An accepted .pt reading (not refused); tensors in the table's flattening order.
  static TensorTable FromPt(PtResult pickle);
  // A model directory's torch shards read as one table (docs/model_dir.md 4):
  // TABLES are FromPt tables in shard order, their listed tensors taken over
  // as shard 0, 1, ... in each table's order. The merged table has no value
  // model: pickle() is null and value tensors are not carried over.
  static TensorTable FromPtShards(std::vector<TensorTable> tables);

  std::size_t size() const { return pickle_ ? tensors_.size() : shard_begin_.back(); }
  // Built on each call for a safetensors container (the table keeps no
  // second record per entry, issue 9 section 3); stored for a .pt reading.
  TableTensor operator[](std::size_t i) const;

  // The C-order little-endian bytes of tensor i (byte_length of them).
  const std::uint8_t* Data(std::size_t i) const;
  // File offset of byte k of Data(i) (docs/pt.md 6.4: a view maps element
  // k / isz through its strides).
  std::int64_t ByteOffset(std::size_t i, std::uint64_t k = 0) const;
  // docs/pt.md 6.4's order, "sorted by (data begin, data end, name bytes)":
  // true when tensor i comes before tensor j.
  bool InStorageOrder(std::size_t i, std::size_t j) const;
  // Where findings about header-level facts point: 8 for safetensors, ds of
  // data.pkl for .pt.
  std::int64_t header_offset() const { return header_offset_; }
  // The same for tensor T's own file: in a merged table of torch shards,
  // ds of data.pkl of the shard holding T (docs/pt.md 6.4, docs/model_dir.md 4).
  std::int64_t HeaderOffset(const TableTensor& t) const {
    return shard_header_offsets_.empty() ? header_offset_ : shard_header_offsets_[t.shard];
  }
  // A safetensors __metadata__ value; a .pt file has none.
  const std::string_view* Metadata(std::string_view key) const;
  // F32 / F16 / BF16 / F64 tensor i to binary32 (F64 rounded to nearest
  // even), handed to SINK as tensor number INDEX chunk by chunk.
  bool StreamFloat(std::size_t i, std::size_t index, TensorSink& sink) const;
  // Plans every listed F32 / F16 / BF16 / F64 tensor in storage order, then
  // streams each: what a table of no format decodes to. False when the sink
  // stopped.
  bool StreamFloats(TensorSink& sink) const;
  // The same over several tables read as one (a model directory's torch
  // shards, docs/model_dir.md 4): one plan, each table's floating tensors in
  // its storage order, the tables in the order given.
  static bool StreamFloats(const std::vector<const TensorTable*>& tables, TensorSink& sink);

  // The .pt reading behind the table (its value table and nodes), or null.
  // Its tensor table is this table (PtResult::tensors is empty there).
  const PtResult* pickle() const { return merged_pt_ ? nullptr : pickle_.get(); }
  // The safetensors container behind a one-file table, or null (a .pt file,
  // or a merged table of several shards).
  const Container* container() const {
    return pickle_ || containers_.size() != 1 ? nullptr : &containers_[0];
  }
  // Appends a tensor of the .pt value model (PtResult::all_tensors) under a
  // name used in findings only (listed = false); returns its index.
  std::size_t AddValueTensor(std::uint32_t all_tensors_index, std::string name);

 private:
  struct Source {
    const std::uint8_t* in_place = nullptr;  // null: materialise from the pt view
    std::int64_t offset = 0;                 // in place: offset of byte 0
    const PtTensor* view = nullptr;          // .pt tensors
  };
  void AddPt(const PtTensor& t, std::string name, bool listed);

  // .pt only (a safetensors table reads its container's entries).
  std::vector<TableTensor> tensors_;
  // tensors_' names: a deque, so appending keeps the views valid; shared,
  // so that a copied table's views do too.
  std::shared_ptr<std::deque<std::string>> names_ = std::make_shared<std::deque<std::string>>();
  std::vector<Source> sources_;
  mutable std::vector<std::unique_ptr<std::vector<std::uint8_t>>> materialised_;
  std::int64_t header_offset_ = 8;
  std::vector<Container> containers_;     // safetensors: one per shard
  // Table index of each shard's first tensor, and the size last: tensor i
  // is entry i - shard_begin_[s] of shard s (safetensors only).
  std::vector<std::size_t> shard_begin_ = {0};
  std::pair<const Container*, std::size_t> Locate(std::size_t i) const;
  std::shared_ptr<const PtResult> pickle_;  // .pt (shared: tables copy cheaply)
  // FromPtShards: every shard's reading and names kept alive (pickle_ is
  // the first, marking the table as .pt), and each shard's header offset.
  bool merged_pt_ = false;
  std::vector<std::shared_ptr<const PtResult>> pt_shards_;
  std::vector<std::shared_ptr<std::deque<std::string>>> pt_shard_names_;
  std::vector<std::int64_t> shard_header_offsets_;
};

// A table reader's result for a file the container refused: refused, with
// the container's findings (the format's own rules run only on an accepted
// container's table).
template <typename Result>
Result ContainerRefusal(std::vector<qd::Finding> container_findings) {
  Result result;
  result.refused = true;
  result.findings = std::move(container_findings);
  return result;
}

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_TENSOR_TABLE_H_
