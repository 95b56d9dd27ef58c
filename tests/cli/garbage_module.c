/* garbage_module.c: a reader module (interface/quantdiff/impl_module.h) that
 * hands quantdiff what the header forbids, chosen by the environment
 * variable QD_GARBAGE at each decode, so that test_impl_test can show each
 * is reported as garbage (or a failure), never a crash of quantdiff:
 *   null-name          an accepted tensor whose name is NULL
 *   unmapped-name      a name whose last bytes lie in an unmapped page
 *   huge-name          name_size 2^40
 *   non-utf8-name      a name "\xc0\xaf" (an overlong '/')
 *   unterminated-rule  a refusal whose rule runs into an unmapped page
 *   unmapped-values    a values pointer into the first page (never mapped)
 *   count-not-shape    value_count 2^40 for shape [2]
 *   huge-shape         shape [2^40, 2^40]: more values than any decode
 *   non-utf8-rule      a refusal whose rule is "\xff\xfe-001"
 *   not-a-rule         a refusal whose rule is "refused"
 *   bad-status         status 7
 *   twice              the same tensor twice (judged wrong-output, not garbage:
 *                      the table itself holds up)
 *   failed             QD_IMPL_FAILED
 * QD_GARBAGE_ABI, when set, is the abi_version its table declares. Plain C:
 * the header compiled as C. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "quantdiff/impl_module.h"

static const uint64_t kShape[2] = {2, 0};
static const uint64_t kHugeShape[2] = {1ull << 40, 1ull << 40};
static const float kValues[2] = {1.0f, 2.0f};

/* 16 letters at the end of a page whose successor is unmapped. */
static const char* BeforeAHole(void) {
  const long page = sysconf(_SC_PAGESIZE);
  char* two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (two == MAP_FAILED) return NULL;
  memset(two, 'a', (size_t)page);
  munmap(two + page, (size_t)page);
  return two + page - 16;  /* 16 letters, then the hole (leaked: a test's) */
}

static void Decode(const uint8_t* bytes, size_t size, const char* file_name, const qd_impl_side_file* side_files,
                   size_t side_file_count, qd_impl_result* result) {
  (void)bytes, (void)size, (void)file_name, (void)side_files, (void)side_file_count;
  static qd_impl_tensor tensors[2];
  qd_impl_tensor* t = &tensors[0];
  const char* kind = getenv("QD_GARBAGE");
  if (kind == NULL) kind = "";
  t->name = "blk.0.weight";
  t->name_size = strlen(t->name);
  t->shape = kShape;
  t->rank = 1;
  t->values = kValues;
  t->value_count = 2;
  result->status = QD_IMPL_ACCEPTED;
  result->tensors = tensors;
  result->tensor_count = 1;
  if (strcmp(kind, "null-name") == 0) t->name = NULL;
  if (strcmp(kind, "unmapped-name") == 0) {
    t->name = BeforeAHole();
    t->name_size = 32;
  }
  if (strcmp(kind, "huge-name") == 0) t->name_size = (size_t)1 << 40;
  if (strcmp(kind, "non-utf8-name") == 0) {
    t->name = "\xc0\xaf";
    t->name_size = 2;
  }
  if (strcmp(kind, "unterminated-rule") == 0) {
    result->status = QD_IMPL_REFUSED;
    result->rule = BeforeAHole();
  }
  if (strcmp(kind, "unmapped-values") == 0) t->values = (const float*)(uintptr_t)16;
  if (strcmp(kind, "count-not-shape") == 0) t->value_count = (size_t)1 << 40;
  if (strcmp(kind, "huge-shape") == 0) {
    t->shape = kHugeShape;
    t->rank = 2;
    t->value_count = 0;  /* the product wraps to 0 in 64 bits */
  }
  if (strcmp(kind, "non-utf8-rule") == 0 || strcmp(kind, "not-a-rule") == 0) {
    result->status = QD_IMPL_REFUSED;
    result->rule = strcmp(kind, "non-utf8-rule") == 0 ? "\xff\xfe-001" : "refused";
  }
  if (strcmp(kind, "bad-status") == 0) result->status = 7;
  if (strcmp(kind, "failed") == 0) result->status = QD_IMPL_FAILED;
  if (strcmp(kind, "twice") == 0) {
    tensors[1] = tensors[0];
    result->tensor_count = 2;
  }
}

static void FreeResult(qd_impl_result* result) { (void)result; }

static qd_impl_module table = {
    QD_IMPL_MODULE_ABI_VERSION, sizeof(qd_impl_module), "garbage", "1", 0, Decode, FreeResult,
};

__attribute__((visibility("default"))) const qd_impl_module* qd_impl_module_get(void) {
  const char* abi = getenv("QD_GARBAGE_ABI");
  if (abi != NULL) table.abi_version = (uint32_t)strtoul(abi, NULL, 10);
  return &table;
}
