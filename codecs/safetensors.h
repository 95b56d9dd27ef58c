// safetensors.h: the production safetensors container reader and writer.
//
// ReadContainer validates the header in the catalogue's check order
// (oracles/rules.json, rules ST-001..ST-013, ST-101, ST-102) and returns views
// into the caller's bytes, so a file mapping larger than memory is read
// without copying tensor data. The header is parsed with nlohmann/json's SAX
// interface into compact records; nothing is allocated from a declared size
// before that size has been checked against the file.
//
//   qd::codec::ContainerResult r = qd::codec::ReadContainer(bytes, "m.safetensors");
//   if (!r.refused) for (const auto& t : r.container.tensors) Use(r.container.Data(t));
#ifndef QUANTDIFF_CODECS_SAFETENSORS_H_
#define QUANTDIFF_CODECS_SAFETENSORS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quantdiff/tensor_sink.h"
#include "quantdiff/plain_data.h"

namespace qd::codec {

enum class Dtype : std::uint8_t {
  kBool, kF4, kF6E2M3, kF6E3M2, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0,
  kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kC64, kF64, kI64, kU64,
  kQ4B32, kQ8B32,  // block dtypes: byte length is the format's to check
};

struct DtypeInfo {
  std::string_view name;
  std::uint32_t bits;  // element width; 0 for block dtypes
  bool is_block;
};

std::optional<Dtype> ParseDtype(std::string_view name);
const DtypeInfo& InfoOf(Dtype dtype);

// A tensor's dimensions: a view into the one array of shape items its
// container holds (Container::store), so that a header of many tiny
// entries costs no vector per entry (issue 9, section 3). Reads like the
// std::vector it replaces, and converts to one.
class Shape {
 public:
  Shape() = default;
  Shape(const std::uint64_t* items, std::size_t size) : items_(items), size_(size) {}
  const std::uint64_t* begin() const { return items_; }
  const std::uint64_t* end() const { return items_ + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::uint64_t operator[](std::size_t i) const { return items_[i]; }
  std::uint64_t back() const { return items_[size_ - 1]; }
  operator std::vector<std::uint64_t>() const { return {begin(), end()}; }
  friend bool operator==(const Shape& a, const std::vector<std::uint64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Shape& a, const Shape& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  const std::uint64_t* items_ = nullptr;
  std::size_t size_ = 0;
};

struct TensorEntry {
  std::string_view name;  // unescaped, into Container::store
  Dtype dtype = Dtype::kU8;
  Shape shape;  // into Container::store
  std::uint64_t element_count = 1;
  std::uint64_t begin = 0;  // relative to the data section
  std::uint64_t end = 0;
};

struct Container {
  qd::ByteView file;
  std::uint64_t header_length = 0;
  std::uint64_t data_start = 0;  // 8 + header_length
  bool has_metadata = false;
  // __metadata__'s members, sorted by key; key and value view
  // EntryStore::metadata_text.
  std::vector<std::pair<std::string_view, std::string_view>> metadata;
  std::vector<TensorEntry> tensors;  // sorted by (begin, end, name)
  // What the entries' names and shapes view: each held once, back to back,
  // in storage the header's first parse sized exactly (issue 9, section 3:
  // a name was a std::string of 32 bytes an entry, plus its heap copy past
  // 15 bytes). Shared, so that a copied container's views stay valid.
  struct EntryStore {
    std::string names;
    std::vector<std::uint64_t> shape_items;
    std::string metadata_text;  // each member's key, then its value
  };
  std::shared_ptr<const EntryStore> store;

  const std::uint8_t* Data(const TensorEntry& t) const {
    return file.data + data_start + t.begin;
  }
  // The value of __metadata__[key], or null.
  const std::string_view* Metadata(std::string_view key) const;
};

struct ContainerResult {
  bool refused = false;
  std::vector<qd::Finding> findings;  // warnings, then at most one error
  Container container;                // complete only when !refused
};

ContainerResult ReadContainer(qd::ByteView file, const std::string& file_name);

// True for the dtypes decoded to binary32: F32, F16, BF16, F64.
bool IsFloatDtype(Dtype dtype);
// Announces and then passes every floating tensor, decoded to binary32, in
// container order; other dtypes, block dtypes included, are skipped.
bool StreamFloatTensors(const Container& container, TensorSink& sink);
// The same, collected into *out.
void AppendFloatTensors(const Container& container,
                        std::vector<qd::DecodedTensor>* out);
// Widens or narrows one floating tensor; false for a non-floating dtype.
bool DecodeFloatTensor(const Container& container, const TensorEntry& tensor,
                       float* out);
// Values [first, first + count) of the same.
bool DecodeFloatRange(const Container& container, const TensorEntry& tensor,
                      std::uint64_t first, std::uint64_t count, float* out);
// The same tensor handed to SINK as tensor number INDEX, kChunkValues at a
// time (one chunk buffer, never the whole tensor).
bool StreamFloatTensor(const Container& container, const TensorEntry& tensor,
                       std::size_t index, TensorSink& sink);

// Writing. Tensors are laid out contiguously in the order given; the header
// is padded with spaces to a multiple of 8 (ST-102).
struct TensorToWrite {
  std::string name;
  std::string dtype;  // written as given, so generators can write bad ones
  std::vector<std::uint64_t> shape;
  std::uint64_t byte_size = 0;
};
using MetadataList = std::vector<std::pair<std::string, std::string>>;
// The 8 length bytes and the padded JSON header.
std::string BuildHeader(const std::vector<TensorToWrite>& tensors,
                        const MetadataList* metadata);
// The pieces of BuildHeader's text, for a writer that hands a header of
// many tensors over in pieces instead of holding it (cli's decode output,
// issue 9 section 3): a member's key (a JSON string, nlohmann's escaping),
// and a tensor entry's value {"dtype":..,"shape":[..],"data_offsets":[b,e]}
// appended to *out.
std::string HeaderKeyJson(std::string_view key);
void AppendHeaderEntryJson(std::string* out, std::string_view dtype,
                           std::span<const std::uint64_t> shape, std::uint64_t begin,
                           std::uint64_t end);
struct TensorWithBytes {
  TensorToWrite spec;
  std::vector<std::uint8_t> bytes;
};
std::vector<std::uint8_t> SerializeSafetensors(
    const std::vector<TensorWithBytes>& tensors, const MetadataList* metadata);

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_SAFETENSORS_H_
