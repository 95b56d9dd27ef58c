#include "thirdparty/ggml/ggml_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace qd::ggml {

std::string DefaultLibraryPath() {
  if (const char* env = std::getenv("QD_GGML_LIBRARY"); env != nullptr && *env != '\0') return env;
#ifdef QD_GGML_LIBRARY
  return QD_GGML_LIBRARY;
#else
  return "";
#endif
}

std::optional<Library> Library::Open(const std::string& path, std::string* error) {
  if (path.empty()) {
    *error = "no ggml library configured (scripts/fetch_ggml.sh fetches it; QD_GGML_LIBRARY names it)";
    return std::nullopt;
  }
  // RTLD_LOCAL: its symbols stay out of the global namespace, so nothing of
  // ggml can stand in for a symbol of quantdiff's own.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = "cannot load " + path + ": " + (why != nullptr ? why : "dlopen failed");
    return std::nullopt;
  }
  Library library;
  library.handle_ = handle;
  library.path_ = path;
  library.type_size_ = reinterpret_cast<std::size_t (*)(int)>(library.Symbol("ggml_type_size"));
  library.block_size_ = reinterpret_cast<std::int64_t (*)(int)>(library.Symbol("ggml_blck_size"));
  library.validate_row_ =
      reinterpret_cast<bool (*)(int, const void*, std::size_t)>(library.Symbol("ggml_validate_row_data"));
  if (library.type_size_ == nullptr || library.block_size_ == nullptr || library.validate_row_ == nullptr ||
      library.Symbol("dequantize_row_mxfp4") == nullptr) {
    *error = path + " is not a ggml base library with MXFP4: ggml_type_size, ggml_blck_size, "
                    "ggml_validate_row_data or dequantize_row_mxfp4 is missing";
    return std::nullopt;
  }
  library.ResolveGguf();
  return library;
}

void Library::ResolveGguf() {
  GgufApi api;
  api.init = reinterpret_cast<decltype(api.init)>(Symbol("gguf_init_from_file_ptr"));
  api.free = reinterpret_cast<decltype(api.free)>(Symbol("gguf_free"));
  api.version = reinterpret_cast<decltype(api.version)>(Symbol("gguf_get_version"));
  api.alignment = reinterpret_cast<decltype(api.alignment)>(Symbol("gguf_get_alignment"));
  api.data_offset = reinterpret_cast<decltype(api.data_offset)>(Symbol("gguf_get_data_offset"));
  api.n_tensors = reinterpret_cast<decltype(api.n_tensors)>(Symbol("gguf_get_n_tensors"));
  api.tensor_name = reinterpret_cast<decltype(api.tensor_name)>(Symbol("gguf_get_tensor_name"));
  api.tensor_type = reinterpret_cast<decltype(api.tensor_type)>(Symbol("gguf_get_tensor_type"));
  api.tensor_offset = reinterpret_cast<decltype(api.tensor_offset)>(Symbol("gguf_get_tensor_offset"));
  api.tensor_size = reinterpret_cast<decltype(api.tensor_size)>(Symbol("gguf_get_tensor_size"));
  api.free_context = reinterpret_cast<decltype(api.free_context)>(Symbol("ggml_free"));
  api.tensor_ne = reinterpret_cast<decltype(api.tensor_ne)>(Symbol("gguf_get_tensor_ne"));
  const bool complete = api.free_context && api.init && api.free && api.version && api.alignment && api.data_offset &&
                        api.n_tensors && api.tensor_name && api.tensor_type && api.tensor_offset &&
                        api.tensor_size;
  gguf_ = complete ? api : GgufApi{};
}

namespace {

constexpr int kGgmlMaxDims = 4;  // GGML_MAX_DIMS

// An in-memory FILE over the bytes (fmemopen refuses size 0: an empty
// temporary file then).
std::FILE* OpenBytes(const void* bytes, std::size_t size) {
  return size > 0 ? fmemopen(const_cast<void*>(bytes), size, "rb") : std::tmpfile();
}

}  // namespace

bool Library::LoadGgufWithData(const void* bytes, std::size_t size) const {
  if (!HasGguf()) return false;
  std::FILE* file = OpenBytes(bytes, size);
  if (file == nullptr) return false;
  void* data_ctx = nullptr;
  void* ctx = gguf_.init(file, GgufInitParams{false, &data_ctx});
  std::fclose(file);
  if (ctx == nullptr) return false;
  gguf_.free(ctx);
  if (data_ctx != nullptr) gguf_.free_context(data_ctx);
  return true;
}

bool Library::ReadGgufTable(const void* bytes, std::size_t size, GgufTable* out) const {
  if (!HasGguf()) return false;
  std::FILE* file = OpenBytes(bytes, size);
  if (file == nullptr) return false;
  *out = GgufTable{};
  void* ctx = gguf_.init(file, GgufInitParams{true, nullptr});
  std::fclose(file);
  if (ctx == nullptr) return true;
  out->accepted = true;
  out->version = gguf_.version(ctx);
  out->alignment = gguf_.alignment(ctx);
  out->data_offset = gguf_.data_offset(ctx);
  const std::int64_t n = gguf_.n_tensors(ctx);
  for (std::int64_t i = 0; i < n; ++i) {
    out->tensors.push_back({gguf_.tensor_name(ctx, i), gguf_.tensor_type(ctx, i), gguf_.tensor_offset(ctx, i),
                            gguf_.tensor_size(ctx, i), {}});
    if (gguf_.tensor_ne != nullptr) {
      const std::int64_t* ne = gguf_.tensor_ne(ctx, i);
      out->tensors.back().ne.assign(ne, ne + kGgmlMaxDims);
    }
  }
  gguf_.free(ctx);
  return true;
}

namespace {

// ggml.h's struct ggml_init_params, passed by value to ggml_init.
struct GgmlInitParams {
  std::size_t mem_size;
  void* mem_buffer;
  bool no_alloc;
};

// gguf.h's scalar setter names by gguf_type id (9, ARRAY, has none).
constexpr const char* kScalarSetters[] = {"gguf_set_val_u8",  "gguf_set_val_i8",   "gguf_set_val_u16",
                                          "gguf_set_val_i16", "gguf_set_val_u32",  "gguf_set_val_i32",
                                          "gguf_set_val_f32", "gguf_set_val_bool", "gguf_set_val_str",
                                          nullptr,            "gguf_set_val_u64",  "gguf_set_val_i64",
                                          "gguf_set_val_f64"};

template <typename T>
bool CallSetter(void* setter, void* ctx, const GgufWriteValue& value) {
  if (value.bytes.size() != sizeof(T)) return false;
  T v;
  std::memcpy(&v, value.bytes.data(), sizeof(T));
  reinterpret_cast<void (*)(void*, const char*, T)>(setter)(ctx, value.key.c_str(), v);
  return true;
}

}  // namespace

bool Library::SetGgufValue(void* ctx, const GgufWriteValue& value) const {
  if (value.is_array) {
    if (value.type == 8) {
      auto set = reinterpret_cast<void (*)(void*, const char*, const char**, std::size_t)>(
          Symbol("gguf_set_arr_str"));
      std::vector<const char*> texts;
      for (const std::string& s : value.strings) texts.push_back(s.c_str());
      if (set != nullptr) set(ctx, value.key.c_str(), texts.data(), texts.size());
      return set != nullptr;
    }
    auto set = reinterpret_cast<void (*)(void*, const char*, int, const void*, std::size_t)>(
        Symbol("gguf_set_arr_data"));
    // Element bytes by gguf_type id; 0 for STRING and ARRAY.
    static constexpr std::size_t kElementBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (set == nullptr || value.type > 12 || kElementBytes[value.type] == 0) return false;
    set(ctx, value.key.c_str(), static_cast<int>(value.type), value.bytes.data(),
        value.bytes.size() / kElementBytes[value.type]);
    return true;
  }
  if (value.type > 12 || kScalarSetters[value.type] == nullptr) return false;
  void* setter = Symbol(kScalarSetters[value.type]);
  if (setter == nullptr) return false;
  switch (value.type) {
    case 0: return CallSetter<std::uint8_t>(setter, ctx, value);
    case 1: return CallSetter<std::int8_t>(setter, ctx, value);
    case 2: return CallSetter<std::uint16_t>(setter, ctx, value);
    case 3: return CallSetter<std::int16_t>(setter, ctx, value);
    case 4: return CallSetter<std::uint32_t>(setter, ctx, value);
    case 5: return CallSetter<std::int32_t>(setter, ctx, value);
    case 6: return CallSetter<float>(setter, ctx, value);
    case 7: return CallSetter<bool>(setter, ctx, value);
    case 8:
      if (value.strings.size() != 1) return false;
      reinterpret_cast<void (*)(void*, const char*, const char*)>(setter)(ctx, value.key.c_str(),
                                                                         value.strings[0].c_str());
      return true;
    case 10: return CallSetter<std::uint64_t>(setter, ctx, value);
    case 11: return CallSetter<std::int64_t>(setter, ctx, value);
    default: return CallSetter<double>(setter, ctx, value);
  }
}

bool Library::WriteGguf(const std::vector<GgufWriteValue>& values, const std::vector<GgufWriteTensor>& tensors,
                        std::vector<std::uint8_t>* out) const {
  auto init_empty = reinterpret_cast<void* (*)()>(Symbol("gguf_init_empty"));
  auto ggml_init = reinterpret_cast<void* (*)(GgmlInitParams)>(Symbol("ggml_init"));
  auto tensor_overhead = reinterpret_cast<std::size_t (*)()>(Symbol("ggml_tensor_overhead"));
  auto new_tensor = reinterpret_cast<void* (*)(void*, int, int, const std::int64_t*)>(Symbol("ggml_new_tensor"));
  auto set_name = reinterpret_cast<void* (*)(void*, const char*)>(Symbol("ggml_set_name"));
  auto add_tensor = reinterpret_cast<void (*)(void*, const void*)>(Symbol("gguf_add_tensor"));
  auto set_data = reinterpret_cast<void (*)(void*, const char*, const void*)>(Symbol("gguf_set_tensor_data"));
  auto write = reinterpret_cast<bool (*)(const void*, std::FILE*, bool)>(Symbol("gguf_write_to_file_ptr"));
  if (!HasGguf() || !init_empty || !ggml_init || !tensor_overhead || !new_tensor || !set_name || !add_tensor ||
      !set_data || !write) {
    return false;
  }
  void* ctx = init_empty();
  // Tensor headers only (no_alloc): the data stays the caller's.
  void* tensor_ctx = ggml_init({tensor_overhead() * (tensors.size() + 1), nullptr, true});
  bool ok = ctx != nullptr && tensor_ctx != nullptr;
  for (const GgufWriteValue& value : values) ok = ok && SetGgufValue(ctx, value);
  for (const GgufWriteTensor& t : tensors) {
    if (!ok || t.ne.empty() || t.ne.size() > kGgmlMaxDims) {
      ok = false;
      break;
    }
    void* tensor = new_tensor(tensor_ctx, t.type, static_cast<int>(t.ne.size()), t.ne.data());
    ok = tensor != nullptr;
    if (!ok) break;
    set_name(tensor, t.name.c_str());
    add_tensor(ctx, tensor);
    set_data(ctx, t.name.c_str(), t.data);
  }
  std::FILE* file = ok ? std::tmpfile() : nullptr;
  ok = file != nullptr && write(ctx, file, false) && std::fflush(file) == 0;
  if (ok) {
    const long size = std::ftell(file);
    out->assign(size > 0 ? static_cast<std::size_t>(size) : 0, 0);
    std::rewind(file);
    ok = size >= 0 && std::fread(out->data(), 1, out->size(), file) == out->size();
  }
  if (file != nullptr) std::fclose(file);
  if (ctx != nullptr) gguf_.free(ctx);
  if (tensor_ctx != nullptr) gguf_.free_context(tensor_ctx);
  return ok;
}

Library::Library(Library&& other) noexcept { *this = std::move(other); }

Library& Library::operator=(Library&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
    type_size_ = std::exchange(other.type_size_, nullptr);
    block_size_ = std::exchange(other.block_size_, nullptr);
    validate_row_ = std::exchange(other.validate_row_, nullptr);
    gguf_ = std::exchange(other.gguf_, GgufApi{});
  }
  return *this;
}

Library::~Library() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* Library::Symbol(const std::string& name) const {
  return handle_ != nullptr ? dlsym(handle_, name.c_str()) : nullptr;
}

bool Library::BlockGeometry(int type_id, std::int64_t* values_per_block, std::size_t* bytes_per_block) const {
  // ggml indexes its type table with the id unchecked. Every id up to
  // MXFP4 (39), the highest type quantdiff's GGUF tables name, is inside the
  // table of any ggml that exports dequantize_row_mxfp4, as this one must.
  constexpr int kHighestKnownId = 39;
  if (type_id < 0 || type_id > kHighestKnownId) return false;
  *values_per_block = block_size_(type_id);
  *bytes_per_block = type_size_(type_id);
  return *values_per_block > 0 && *bytes_per_block > 0;
}

DequantizeRowFn Library::RowDequantizer(std::string_view type) const {
  return reinterpret_cast<DequantizeRowFn>(Symbol("dequantize_row_" + std::string(type)));
}

QuantizeRowFn Library::RowQuantizer(std::string_view type) const {
  return reinterpret_cast<QuantizeRowFn>(Symbol("quantize_row_" + std::string(type) + "_ref"));
}

bool Library::Dequantize(std::string_view type, const void* blocks, float* out, std::int64_t values) const {
  DequantizeRowFn fn = RowDequantizer(type);
  if (fn == nullptr) return false;
  fn(blocks, out, values);
  return true;
}

bool Library::QuantizeReference(std::string_view type, const float* in, void* blocks,
                                std::int64_t values) const {
  QuantizeRowFn fn = RowQuantizer(type);
  if (fn == nullptr) return false;
  fn(in, blocks, values);
  return true;
}

bool Library::ValidateRow(int type_id, const void* data, std::size_t bytes) const {
  return validate_row_(type_id, data, bytes);
}

const Library* SharedDefaultLibrary() {
  static const Library* const library = [] {
    std::string error;
    std::optional<Library> opened = Library::Open(DefaultLibraryPath(), &error);
    return opened ? new Library(std::move(*opened)) : nullptr;  // kept for the process
  }();
  return library;
}

}  // namespace qd::ggml
