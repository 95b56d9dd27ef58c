/* ggml_module.c: ggml's own .gguf reader as a reader module
 * (interface/quantdiff/impl_module.h), in plain C.
 *
 * ggml reads the file (gguf_init_from_file_ptr, no_alloc and no context: its
 * header, metadata and tensor-info checks, docs/gguf.md section 6), and
 * each tensor's bytes are decoded with ggml's own row converters
 * (dequantize_row_<type>, ggml_fp16_to_fp32_row, ggml_bf16_to_fp32_row; f32
 * as it is). Nothing of ggml is copied: its libggml-base.so (the pinned npm
 * package of scripts/fetch_ggml.sh) is opened with dlopen, from
 * QD_GGML_LIBRARY in the environment or the path the build was configured
 * with. What this adapter adds, and says so in its refusals' messages:
 * - a tensor whose bytes lie past the end of the file is refused (ggml's
 *   loader fails its read there; without a context ggml does not look);
 * - a type ggml has no row converter for (f64) is refused: ggml cannot give
 *   its values;
 * - a name is what ggml keeps, a C string: cut at its first NUL byte;
 * - the shape is ggml's ne[] reversed up to its last dimension other than 1
 *   (ggml_n_dims: ggml keeps no n_dims, so [1, 4] reads as [4] and a scalar
 *   as [1]).
 * ggml states no rule IDs: every refusal has rule NULL.
 *
 * quantdiff test-impl --module build/default/examples/libggml_gguf_module.so --format gguf
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantdiff/impl_module.h"

/* ggml's exports (ggml.h, gguf.h, ggml-quants.h), by their C signatures. */
struct gguf_init_params {
  bool no_alloc;
  void** ctx;
};
typedef void* (*gguf_init_fn)(FILE* file, struct gguf_init_params params);
typedef void (*gguf_free_fn)(void* ctx);
typedef int64_t (*gguf_count_fn)(const void* ctx);
typedef size_t (*gguf_data_offset_fn)(const void* ctx);
typedef const char* (*gguf_tensor_name_fn)(const void* ctx, int64_t id);
typedef int (*gguf_tensor_type_fn)(const void* ctx, int64_t id);
typedef size_t (*gguf_tensor_size_fn)(const void* ctx, int64_t id);
typedef const int64_t* (*gguf_tensor_ne_fn)(const void* ctx, int64_t id);
typedef const char* (*type_name_fn)(int type);
typedef size_t (*type_size_fn)(int type);
typedef int64_t (*block_size_fn)(int type);
typedef void (*to_float_fn)(const void* in, float* out, int64_t count);
typedef void (*log_callback_fn)(int level, const char* text, void* user_data);
typedef void (*log_set_fn)(log_callback_fn callback, void* user_data);

enum { kTypeF32 = 0, kTypeF16 = 1, kTypeBf16 = 30 };

static struct {
  void* handle;
  const char* error;
  gguf_init_fn init;
  gguf_free_fn free;
  gguf_count_fn n_tensors;
  gguf_data_offset_fn data_offset;
  gguf_tensor_name_fn tensor_name;
  gguf_tensor_type_fn tensor_type;
  gguf_tensor_size_fn tensor_offset, tensor_size;
  gguf_tensor_ne_fn tensor_ne;
  type_name_fn type_name;
  type_size_fn type_size;
  block_size_fn block_size;
  to_float_fn f16_row, bf16_row;
} ggml;

/* ggml logs every refusal to standard error by default; a module must not
 * write to quantdiff's streams (impl_module.h), and the refusal's message
 * says what ggml refused. */
static void Quiet(int level, const char* text, void* user_data) {
  (void)level;
  (void)text;
  (void)user_data;
}

static void OpenGgml(void) {
  const char* path = getenv("QD_GGML_LIBRARY");
#ifdef QD_GGML_LIBRARY
  if (path == NULL || *path == '\0') path = QD_GGML_LIBRARY;
#endif
  if (path == NULL || *path == '\0') {
    ggml.error = "no ggml library configured (QD_GGML_LIBRARY)";
    return;
  }
  ggml.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (ggml.handle == NULL) {
    ggml.error = "cannot load ggml's library (QD_GGML_LIBRARY)";
    return;
  }
  const log_set_fn log_set = (log_set_fn)dlsym(ggml.handle, "ggml_log_set");
  if (log_set != NULL) log_set(Quiet, NULL);
  ggml.init = (gguf_init_fn)dlsym(ggml.handle, "gguf_init_from_file_ptr");
  ggml.free = (gguf_free_fn)dlsym(ggml.handle, "gguf_free");
  ggml.n_tensors = (gguf_count_fn)dlsym(ggml.handle, "gguf_get_n_tensors");
  ggml.data_offset = (gguf_data_offset_fn)dlsym(ggml.handle, "gguf_get_data_offset");
  ggml.tensor_name = (gguf_tensor_name_fn)dlsym(ggml.handle, "gguf_get_tensor_name");
  ggml.tensor_type = (gguf_tensor_type_fn)dlsym(ggml.handle, "gguf_get_tensor_type");
  ggml.tensor_offset = (gguf_tensor_size_fn)dlsym(ggml.handle, "gguf_get_tensor_offset");
  ggml.tensor_size = (gguf_tensor_size_fn)dlsym(ggml.handle, "gguf_get_tensor_size");
  ggml.tensor_ne = (gguf_tensor_ne_fn)dlsym(ggml.handle, "gguf_get_tensor_ne");
  ggml.type_name = (type_name_fn)dlsym(ggml.handle, "ggml_type_name");
  ggml.type_size = (type_size_fn)dlsym(ggml.handle, "ggml_type_size");
  ggml.block_size = (block_size_fn)dlsym(ggml.handle, "ggml_blck_size");
  ggml.f16_row = (to_float_fn)dlsym(ggml.handle, "ggml_fp16_to_fp32_row");
  ggml.bf16_row = (to_float_fn)dlsym(ggml.handle, "ggml_bf16_to_fp32_row");
  if (!ggml.init || !ggml.free || !ggml.n_tensors || !ggml.data_offset || !ggml.tensor_name || !ggml.tensor_type ||
      !ggml.tensor_offset || !ggml.tensor_size || !ggml.tensor_ne || !ggml.type_name || !ggml.type_size || !ggml.block_size || !ggml.f16_row ||
      !ggml.bf16_row) {
    ggml.error = "ggml's library lacks a gguf or row-conversion export";
  }
}

/* ggml's converter of a type's rows; NULL when it has none. */
static to_float_fn RowConverter(int type) {
  if (type == kTypeF16) return ggml.f16_row;
  if (type == kTypeBf16) return ggml.bf16_row;
  const char* name = ggml.type_name(type);
  if (name == NULL) return NULL;
  char symbol[96];
  snprintf(symbol, sizeof symbol, "dequantize_row_%s", name);
  return (to_float_fn)dlsym(ggml.handle, symbol);
}

/* One decode's memory, all behind module_state. */
typedef struct {
  qd_impl_tensor* tensors;
  size_t count;
  char message[160];
} Held;

static void FreeHeld(Held* held) {
  if (held == NULL) return;
  for (size_t i = 0; i < held->count; ++i) {
    free((void*)held->tensors[i].name);
    free((void*)held->tensors[i].shape);
    free((void*)held->tensors[i].values);
  }
  free(held->tensors);
  free(held);
}

static void Refuse(qd_impl_result* result, Held* held, const char* why, const char* tensor) {
  snprintf(held->message, sizeof held->message, "%s%s%s", why, tensor ? ": " : "", tensor ? tensor : "");
  result->status = QD_IMPL_REFUSED;
  result->message = held->message;
}

/* Tensor ID's values into T, or a refusal (false). */
static bool DecodeTensor(const void* ctx, int64_t id, const uint8_t* bytes, size_t size, qd_impl_tensor* t,
                         qd_impl_result* result, Held* held) {
  const char* name = ggml.tensor_name(ctx, id);
  const int type = ggml.tensor_type(ctx, id);
  const size_t begin = ggml.data_offset(ctx), offset = ggml.tensor_offset(ctx, id), nbytes = ggml.tensor_size(ctx, id);
  if (begin > size || offset > size - begin || nbytes > size - begin - offset) {
    Refuse(result, held, "tensor data past the end of the file", name);
    return false;
  }
  const to_float_fn convert = type == kTypeF32 ? NULL : RowConverter(type);
  if (type != kTypeF32 && convert == NULL) {
    Refuse(result, held, "ggml has no row converter for this tensor's type", name);
    return false;
  }
  const int64_t* ne = ggml.tensor_ne(ctx, id);
  size_t rank = 1;
  for (size_t i = 1; i < 4; ++i) {
    if (ne[i] != 1) rank = i + 1;
  }
  /* The values ggml's nbytes holds, so that no conversion reads past it (a
   * count ggml let wrap, docs/gguf.md section 6, is refused here). */
  const int64_t per_block = ggml.block_size(type);
  const size_t block_bytes = ggml.type_size(type);
  size_t count = 1;
  bool fits = per_block > 0 && block_bytes > 0;
  for (size_t i = 0; i < 4 && fits; ++i) {
    fits = ne[i] >= 0 && (ne[i] == 0 || count <= SIZE_MAX / (size_t)ne[i]);
    if (fits) count *= (size_t)ne[i];
  }
  if (!fits || count % (size_t)per_block != 0 || count / (size_t)per_block > nbytes / block_bytes ||
      count / (size_t)per_block * block_bytes != nbytes) {
    Refuse(result, held, "tensor's element count does not match its bytes", name);
    return false;
  }
  uint64_t* shape = malloc(rank * sizeof *shape);
  float* values = malloc((count > 0 ? count : 1) * sizeof *values);
  char* copy = strdup(name);
  t->name = copy;
  t->name_size = copy != NULL ? strlen(copy) : 0;
  t->shape = shape;
  t->values = values;
  if (shape == NULL || values == NULL || copy == NULL) {
    result->status = QD_IMPL_FAILED;
    return false;
  }
  for (size_t i = 0; i < rank; ++i) shape[i] = (uint64_t)ne[rank - 1 - i];
  t->rank = rank;
  t->value_count = count;
  const uint8_t* data = bytes + begin + offset;
  if (type == kTypeF32) {
    memcpy(values, data, count * sizeof(float));
  } else {
    convert(data, values, (int64_t)count);
  }
  return true;
}

static pthread_once_t ggml_once = PTHREAD_ONCE_INIT;

static void Decode(const uint8_t* bytes, size_t size, const char* file_name, const qd_impl_side_file* side_files,
                   size_t side_file_count, qd_impl_result* result) {
  (void)file_name;
  (void)side_files;
  (void)side_file_count;
  pthread_once(&ggml_once, OpenGgml);
  Held* held = calloc(1, sizeof *held);
  result->module_state = held;
  if (held == NULL || ggml.error != NULL) {
    result->status = QD_IMPL_FAILED;
    result->message = ggml.error;
    return;
  }
  /* fmemopen refuses an empty buffer; ggml refuses an empty file. */
  FILE* file = size > 0 ? fmemopen((void*)bytes, size, "rb") : NULL;
  if (file == NULL) {
    Refuse(result, held, size > 0 ? "fmemopen failed" : "empty file", NULL);
    return;
  }
  struct gguf_init_params params = {true, NULL};
  void* ctx = ggml.init(file, params);
  fclose(file);
  if (ctx == NULL) {
    Refuse(result, held, "gguf_init_from_file_ptr refused the file", NULL);
    return;
  }
  const int64_t n = ggml.n_tensors(ctx);
  held->tensors = calloc(n > 0 ? (size_t)n : 1, sizeof *held->tensors);
  if (held->tensors == NULL) {
    result->status = QD_IMPL_FAILED;
    ggml.free(ctx);
    return;
  }
  result->status = QD_IMPL_ACCEPTED;
  for (int64_t id = 0; id < n; ++id) {
    ++held->count;
    if (!DecodeTensor(ctx, id, bytes, size, &held->tensors[id], result, held)) break;
  }
  ggml.free(ctx);
  if (result->status == QD_IMPL_ACCEPTED) {
    result->tensors = held->tensors;
    result->tensor_count = held->count;
  }
}

static void FreeResult(qd_impl_result* result) { FreeHeld((Held*)result->module_state); }

static const qd_impl_module kModule = {
    QD_IMPL_MODULE_ABI_VERSION, sizeof(qd_impl_module), "ggml-gguf", "node-llama-cpp 3.21.1", 0, Decode, FreeResult,
};

__attribute__((visibility("default"))) const qd_impl_module* qd_impl_module_get(void) { return &kModule; }
