/* impl_module.h: the C interface of a reader module, another implementation
 * quantdiff runs in-process (issue 13, item 3).
 *
 * A module is a shared library (.so) holding one reader of quantized weight
 * files, written in any language that can export C symbols. quantdiff opens it
 * with dlopen and judges its decodes by the same vectors and the same
 * comparison as a command under `quantdiff test-impl --cmd` (README "Testing
 * your own reader in-process"):
 *
 *   quantdiff test-impl --module ./libmy_reader.so --format gguf
 *
 * and the fuzz target impl_module_diff runs it beside quantdiff's codec and
 * oracle on every input. Plain C (C99), usable from C and C++; nothing but
 * fixed-size integers, pointers and NUL-terminated strings crosses the
 * boundary.
 *
 * What a module exports: one function, named by QD_IMPL_MODULE_ENTRY,
 *
 *   const qd_impl_module* qd_impl_module_get(void);
 *
 * returning a table that lives as long as the library is loaded. Its
 * abi_version must be QD_IMPL_MODULE_ABI_VERSION of the header it was built
 * with; quantdiff refuses a module of another version (and one whose
 * struct_size is smaller than the table it knows) instead of calling it.
 *
 * The decode contract, one call per file:
 * - `bytes`/`size` hold the whole file; `file_name` is its name as the vector
 *   folder lays it out ("gguf/3.gguf", "gptq/5/model.safetensors"), for
 *   messages only. `side_files` are the files that come with it (the configs
 *   beside a GPTQ checkpoint), in config-discovery priority order, each with
 *   its name relative to the vector folder. All of it is quantdiff's memory,
 *   read-only, valid only during the call: copy what you keep.
 * - The module fills `*result` (quantdiff zeroes it before the call) and
 *   returns nothing:
 *     QD_IMPL_ACCEPTED: `tensors`/`tensor_count` hold every decoded tensor
 *       as `quantdiff decode` writes it: its name (UTF-8, with its size),
 *       its shape (`rank` dimensions, row major, outermost first) and its
 *       values as IEEE binary32, `value_count` = the product of the shape
 *       (1 for rank 0). Tensors whose names `decode` cannot write (not
 *       UTF-8: ST-004, twice: ST-005, "__metadata__": ST-006) make decode
 *       refuse the file with that rule; so does a module that conforms.
 *     QD_IMPL_REFUSED: the file is not one the module reads. `rule`, when not
 *       NULL, is the rule ID it breaks (e.g. "GGUF-018", catalogue
 *       oracles/rules.json) and is compared with the vector's; NULL means
 *       "refused, no rule stated" (as a process that exits 1 with no rule on
 *       its standard error). `message` (optional) is shown in reports.
 *     QD_IMPL_FAILED: the module could not do its job (out of memory, an
 *       internal error): reported like a crashed process.
 * - Memory: everything `*result` points at belongs to the module and stays
 *   valid until quantdiff passes the same result to `free_result`, which it
 *   does exactly once for every decode call, whatever the status (a module
 *   may keep its allocations behind `module_state`). quantdiff never frees
 *   or writes the module's memory.
 * - Threads: when `flags` has QD_IMPL_THREAD_SAFE, quantdiff may call decode
 *   and free_result from several threads at once (on different results);
 *   otherwise it calls them from one thread at a time (test-impl --jobs
 *   serialises such a module). A module must not install signal handlers,
 *   call exit, or write to quantdiff's standard streams.
 * - Trust: quantdiff checks what it is handed before it believes it. A
 *   status outside the three, a NULL table, name, shape or value pointer
 *   where one is needed, a pointer into unmapped memory, a value count that
 *   is not the shape's product or larger than any decode of the input, a
 *   name or rule that is not UTF-8 (a rule must look like PREFIX-NNN), a
 *   NUL-terminated string without its NUL within its limit (limits: a
 *   tensor name 65536 bytes, a rule 64, a message or the module's name and
 *   version 4096, 2^20 tensors, rank 8) is
 *   reported as garbage from that module, never a crash of quantdiff. A
 *   module that crashes or hangs inside decode takes quantdiff with it
 *   (it runs in-process): use `test-impl --cmd` for a reader you do not
 *   trust that far.
 */
#ifndef QUANTDIFF_IMPL_MODULE_H_
#define QUANTDIFF_IMPL_MODULE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever a field's meaning changes or one is removed; a field added
 * at the end of qd_impl_module keeps the version and grows struct_size. */
#define QD_IMPL_MODULE_ABI_VERSION 1u

/* The one symbol a module exports, as a string for dlsym. */
#define QD_IMPL_MODULE_ENTRY "qd_impl_module_get"

enum {
  QD_IMPL_ACCEPTED = 0,
  QD_IMPL_REFUSED = 1,
  QD_IMPL_FAILED = 2
};

/* qd_impl_module.flags */
#define QD_IMPL_THREAD_SAFE 1u

typedef struct qd_impl_side_file {
  const char* name; /* relative to the vector folder, NUL-terminated */
  const uint8_t* bytes;
  size_t size;
} qd_impl_side_file;

typedef struct qd_impl_tensor {
  const char* name;       /* name_size bytes of UTF-8, not NUL-terminated */
  size_t name_size;       /* not 0; a name may hold NUL (a .gguf name can) */
  const uint64_t* shape;  /* rank dimensions; may be NULL when rank is 0 */
  size_t rank;            /* at most 8 */
  const float* values;    /* value_count binary32 values, row major */
  size_t value_count;     /* the product of shape */
} qd_impl_tensor;

typedef struct qd_impl_result {
  int32_t status;          /* QD_IMPL_ACCEPTED, QD_IMPL_REFUSED or QD_IMPL_FAILED */
  const char* rule;        /* REFUSED: the rule ID, or NULL when none is stated */
  const char* message;     /* optional, NUL-terminated, one line */
  const qd_impl_tensor* tensors; /* ACCEPTED: tensor_count tensors */
  size_t tensor_count;
  void* module_state;      /* the module's own, untouched by quantdiff */
} qd_impl_result;

typedef struct qd_impl_module {
  uint32_t abi_version; /* QD_IMPL_MODULE_ABI_VERSION */
  uint32_t struct_size; /* sizeof(qd_impl_module) as the module was built */
  const char* name;     /* e.g. "ggml-gguf", NUL-terminated UTF-8 */
  const char* version;  /* e.g. "3.21.1", NUL-terminated UTF-8 */
  uint32_t flags;       /* QD_IMPL_THREAD_SAFE or 0 */
  void (*decode)(const uint8_t* bytes, size_t size, const char* file_name,
                 const qd_impl_side_file* side_files, size_t side_file_count,
                 qd_impl_result* result);
  void (*free_result)(qd_impl_result* result);
} qd_impl_module;

typedef const qd_impl_module* (*qd_impl_module_get_fn)(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* QUANTDIFF_IMPL_MODULE_H_ */
