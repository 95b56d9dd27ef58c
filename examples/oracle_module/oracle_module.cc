// oracle_module.cc: quantdiff's own GGUF oracle as a reader module
// (interface/quantdiff/impl_module.h), the interface's proof: `quantdiff
// test-impl --module liboracle_gguf_module.so --format gguf` must conform.
//
// Written as any outside module would be: C++ inside, the C table outside,
// every result's memory held in one heap block behind module_state and
// released by free_result. The oracle keeps no state between calls, so the
// module is thread safe.
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "oracles/gguf.h"
#include "oracles/json.h"
#include "quantdiff/impl_module.h"

namespace {

// What one decode hands out; the C views point into it.
struct Held {
  qd::Outcome outcome;
  std::vector<qd_impl_tensor> views;
};

void Decode(const std::uint8_t* bytes, std::size_t size, const char* file_name, const qd_impl_side_file*,
            std::size_t, qd_impl_result* result) {
  Held* held = new (std::nothrow) Held;
  if (held == nullptr) {
    result->status = QD_IMPL_FAILED;
    return;
  }
  result->module_state = held;
  held->outcome = qd::oracle::ReadGgufFile(qd::ByteView{bytes, size}, file_name);
  if (held->outcome.refused) {
    // The refusing finding is the last, the only error (plain_data.h).
    const qd::Finding& error = held->outcome.findings.back();
    result->status = QD_IMPL_REFUSED;
    result->rule = error.rule.c_str();
    result->message = error.message.c_str();
    return;
  }
  // What `quantdiff decode` cannot write it refuses (impl_module.h): a name
  // that is not UTF-8 (ST-004) before a tensor named "__metadata__" (ST-006);
  // .gguf names are unique already (GGUF-011).
  const std::vector<qd::DecodedTensor>& tensors = held->outcome.tensors;
  const auto refuse = [result](const char* rule) {
    result->status = QD_IMPL_REFUSED;
    result->rule = rule;
  };
  for (const qd::DecodedTensor& t : tensors) {
    std::size_t bad = 0;
    if (!qd::oracle::IsStrictUtf8(reinterpret_cast<const std::uint8_t*>(t.name.data()), t.name.size(), &bad)) {
      return refuse("ST-004");
    }
  }
  for (const qd::DecodedTensor& t : tensors) {
    if (t.name == "__metadata__") return refuse("ST-006");
  }
  for (const qd::DecodedTensor& t : tensors) {
    held->views.push_back(
        {t.name.data(), t.name.size(), t.shape.data(), t.shape.size(), t.values.data(), t.values.size()});
  }
  result->status = QD_IMPL_ACCEPTED;
  result->tensors = held->views.data();
  result->tensor_count = held->views.size();
}

void FreeResult(qd_impl_result* result) { delete static_cast<Held*>(result->module_state); }

const qd_impl_module kModule = {
    QD_IMPL_MODULE_ABI_VERSION, sizeof(qd_impl_module), "quantdiff-oracle-gguf", "1", QD_IMPL_THREAD_SAFE,
    Decode, FreeResult,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const qd_impl_module* qd_impl_module_get(void) { return &kModule; }
