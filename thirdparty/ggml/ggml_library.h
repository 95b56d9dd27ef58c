// ggml_library.h: ggml's own block codecs, loaded at run time (issue 12).
//
// quantdiff compares its GGUF block codec and oracle with a third reader,
// ggml itself. ggml is never linked into quantdiff: this adapter opens the
// libggml-base.so that scripts/fetch_ggml.sh unpacks from the pinned npm
// package, with dlopen, and looks up its plain C exports by name:
//   dequantize_row_<type>(const void* blocks, float* out, int64_t k)
//   quantize_row_<type>_ref(const float* in, void* blocks, int64_t k)
//   ggml_validate_row_data(int type, const void* data, size_t bytes)
//   ggml_type_size(int type), ggml_blck_size(int type)
//   gguf_init_from_file_ptr and the gguf table getters (gguf.h), when the
//   build has them: ReadGgufTable
//   ggml's gguf writer (gguf_init_empty, gguf_set_val_<t>, gguf_set_arr_data,
//   gguf_set_arr_str, gguf_add_tensor of a ggml_new_tensor,
//   gguf_set_tensor_data, gguf_write_to_file_ptr): WriteGguf
// (ggml.h and ggml-quants.h; <type> is ggml's lower-case name, "q4_0",
// "q6_K", "iq4_nl"; a type id is ggml's enum ggml_type value, e.g. Q4_0 = 2).
// Only front ends and tests use it; the layering keeps codecs/ and oracles/
// from seeing this header.
//
//   std::string error;
//   auto ggml = qd::ggml::Library::Open(qd::ggml::DefaultLibraryPath(), &error);
//   if (ggml && ggml->Dequantize("q4_0", blocks, out, 64)) ...
#ifndef QUANTDIFF_THIRDPARTY_GGML_GGML_LIBRARY_H_
#define QUANTDIFF_THIRDPARTY_GGML_GGML_LIBRARY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qd::ggml {

// QD_GGML_LIBRARY from the environment, else the path the build was
// configured with (CMake's QD_GGML_LIBRARY, where fetch_ggml.sh puts it).
std::string DefaultLibraryPath();

class Library;

// The exports' C signatures (ggml-quants.h): the block pointer is a
// type-specific struct there; the bytes are passed through untouched.
using DequantizeRowFn = void (*)(const void* blocks, float* out, std::int64_t values);
using QuantizeRowFn = void (*)(const float* in, void* blocks, std::int64_t values);
// What ggml's gguf_init_from_file_ptr (no_alloc, no context: header,
// metadata and tensor infos only) makes of a .gguf file's bytes.
struct GgufTensorRow {
  std::string name;
  int type = -1;
  std::uint64_t offset = 0;  // relative to the data section
  std::uint64_t size = 0;    // ggml_nbytes
  // gguf_get_tensor_ne: all four dimensions, ne[0] innermost, unused ones 1
  // (empty when the build does not export it).
  std::vector<std::int64_t> ne;
};
struct GgufTable {
  bool accepted = false;
  std::uint32_t version = 0;
  std::uint64_t alignment = 0;
  std::uint64_t data_offset = 0;
  std::vector<GgufTensorRow> tensors;  // in tensor-info order
};

// What WriteGguf hands to ggml's writer. A metadata value: a gguf_type id
// (0..12 but 9) of one value, or of the elements when is_array (ggml's
// writer has no nested arrays: its setters take no ARRAY element type).
struct GgufWriteValue {
  std::string key;
  std::uint32_t type = 0;
  bool is_array = false;
  std::vector<std::uint8_t> bytes;   // little-endian numbers back to back; BOOL one byte, 0 or 1
  std::vector<std::string> strings;  // the STRING values
};
// A tensor: ggml_new_tensor(type, ne.size(), ne) named `name`, its data
// `data` (ggml_nbytes of it; ggml copies it when writing).
struct GgufWriteTensor {
  std::string name;
  int type = 0;
  std::vector<std::int64_t> ne;  // ne[0] innermost, 1 to 4 of them
  const void* data = nullptr;
};

// The library at DefaultLibraryPath(), opened once per process on first use
// and kept to the end; nullptr when it does not open. For programs that
// take ggml as an optional third reader (fuzz targets, benchmarks).
const Library* SharedDefaultLibrary();

class Library {
 public:
  // The library at `path`, or nullopt with *error saying why (not found, not
  // a ggml build: a required export is missing).
  static std::optional<Library> Open(const std::string& path, std::string* error);

  Library(Library&& other) noexcept;
  Library& operator=(Library&& other) noexcept;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  // ggml's block geometry for a type id: values per block and bytes per
  // block. False for an id ggml does not size (a removed type has size 0).
  bool BlockGeometry(int type_id, std::int64_t* values_per_block, std::size_t* bytes_per_block) const;

  // ggml's dequantize_row_<type> / quantize_row_<type>_ref, looked up once
  // (dlsym and a name built per call would be timed with every row of a
  // benchmark); nullptr when this build does not export it.
  DequantizeRowFn RowDequantizer(std::string_view type) const;
  QuantizeRowFn RowQuantizer(std::string_view type) const;

  // ggml's to_float of `values` values (a whole number of blocks) from
  // `blocks`. False when this build has no dequantize_row_<type>.
  bool Dequantize(std::string_view type, const void* blocks, float* out, std::int64_t values) const;

  // ggml's reference quantizer of `values` values (a whole number of
  // blocks) into `blocks`. False when this build has no quantize_row_<type>_ref.
  bool QuantizeReference(std::string_view type, const float* in, void* blocks, std::int64_t values) const;

  // ggml_validate_row_data: what ggml accepts when it loads a tensor's bytes.
  bool ValidateRow(int type_id, const void* data, std::size_t bytes) const;

  // ggml's reading of a .gguf file held in memory (GgufTable). False when
  // this build lacks the gguf exports or the bytes cannot be handed over.
  bool ReadGgufTable(const void* bytes, std::size_t size, GgufTable* out) const;
  bool HasGguf() const { return gguf_.init != nullptr; }
  // ggml's writer: the .gguf file ggml writes for VALUES (in order) and
  // TENSORS (in order; ggml places them) into *out. False when this build
  // lacks a writer export or ggml reports a failed write. A value ggml's
  // setters reject (general.alignment not a power-of-two UINT32) aborts the
  // process: call it in a child for those.
  bool WriteGguf(const std::vector<GgufWriteValue>& values, const std::vector<GgufWriteTensor>& tensors,
                 std::vector<std::uint8_t>* out) const;
  // The same with a ggml context and no_alloc false, so ggml also allocates
  // and reads the data section (then frees both). True when ggml accepts.
  // ggml may abort the process here (docs/gguf.md 6): call it in a child.
  bool LoadGgufWithData(const void* bytes, std::size_t size) const;

  const std::string& path() const { return path_; }

 private:
  Library() = default;
  void* Symbol(const std::string& name) const;
  void ResolveGguf();
  bool SetGgufValue(void* gguf_ctx, const GgufWriteValue& value) const;

  void* handle_ = nullptr;
  std::string path_;
  std::size_t (*type_size_)(int) = nullptr;
  std::int64_t (*block_size_)(int) = nullptr;
  bool (*validate_row_)(int, const void*, std::size_t) = nullptr;
  // gguf.h's exports, resolved once in Open; all null when one is missing.
  struct GgufInitParams {
    bool no_alloc;
    void** ctx;
  };
  struct GgufApi {
    void* (*init)(void* file, GgufInitParams params) = nullptr;
    void (*free)(void* ctx) = nullptr;
    std::uint32_t (*version)(const void* ctx) = nullptr;
    std::size_t (*alignment)(const void* ctx) = nullptr;
    std::size_t (*data_offset)(const void* ctx) = nullptr;
    std::int64_t (*n_tensors)(const void* ctx) = nullptr;
    const char* (*tensor_name)(const void* ctx, std::int64_t id) = nullptr;
    int (*tensor_type)(const void* ctx, std::int64_t id) = nullptr;
    std::size_t (*tensor_offset)(const void* ctx, std::int64_t id) = nullptr;
    std::size_t (*tensor_size)(const void* ctx, std::int64_t id) = nullptr;
    void (*free_context)(void* ggml_ctx) = nullptr;  // ggml_free
    const std::int64_t* (*tensor_ne)(const void* ctx, std::int64_t id) = nullptr;  // optional
  };
  GgufApi gguf_;
};

}  // namespace qd::ggml

#endif  // QUANTDIFF_THIRDPARTY_GGML_GGML_LIBRARY_H_
