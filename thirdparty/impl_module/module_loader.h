// module_loader.h: a reader module (interface/quantdiff/impl_module.h) opened
// with dlopen and its decodes turned into qd::Outcome (issue 13, item 3).
//
// The module is another implementation, not quantdiff: nothing it hands back
// is believed before it is checked. Every pointer it returns is read through
// process_vm_readv on this process, which fails with EFAULT on unmapped
// memory instead of faulting, and every count is bounded before anything is
// sized by it; what does not hold up is an answer of its own kind (garbage),
// never a crash of the caller. test-impl --module and the fuzz target
// impl_module_diff use it; codecs/ and oracles/ never see it.
//
//   std::string error;
//   auto module = qd::impl::Module::Open("./libreader.so", &error);
//   qd::impl::ModuleAnswer a = module->Decode(bytes, "gguf/1.gguf", {}, 1u << 24);
//   if (a.end == qd::impl::ModuleEnd::kAnswered && a.outcome.refused) ...
#ifndef QUANTDIFF_THIRDPARTY_IMPL_MODULE_MODULE_LOADER_H_
#define QUANTDIFF_THIRDPARTY_IMPL_MODULE_MODULE_LOADER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quantdiff/impl_module.h"
#include "quantdiff/plain_data.h"

namespace qd::impl {

enum class ModuleEnd {
  kAnswered,  // outcome holds the module's verdict
  kFailed,    // the module said QD_IMPL_FAILED: like a crashed process
  kGarbage,   // what it returned does not hold up (problem says what)
};

struct ModuleAnswer {
  ModuleEnd end = ModuleEnd::kGarbage;
  // kAnswered: accepted with its tensors, or refused with one kError finding
  // whose rule is the one the module stated ("" when it stated none) and
  // whose message is the module's.
  qd::Outcome outcome;
  std::string problem;  // kFailed, kGarbage: why; the module's message, if any
};

// PREFIX-NNN: upper-case letters and digits, a dash, three digits (the
// catalogue's rule IDs, oracles/rules.json).
bool LooksLikeRuleId(std::string_view word);

class Module {
 public:
  // The module at PATH, or nullopt with *error: not loadable, no
  // QD_IMPL_MODULE_ENTRY, a NULL or unreadable table, another ABI version, a
  // table smaller than this header's, a NULL function, a name or version
  // that is not UTF-8.
  static std::optional<Module> Open(const std::string& path, std::string* error);

  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) = delete;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  // One decode of FILE. MAX_VALUES bounds the values of all tensors
  // together (more is garbage: no decode of the input is that large). Calls
  // are serialised unless the module declares QD_IMPL_THREAD_SAFE.
  ModuleAnswer Decode(qd::ByteView file, const std::string& file_name, const std::vector<qd::SideFile>& side_files,
                      std::uint64_t max_values) const;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& path() const { return path_; }

 private:
  Module() = default;
  void* handle_ = nullptr;
  std::string path_, name_, version_;
  qd_impl_module table_{};
  std::unique_ptr<std::mutex> serial_;  // set when the module is not thread safe
};

// The modules of a colon-separated list ("a.so:b.so", as QD_IMPL_MODULES
// names them); false with *error at the first that does not open.
bool OpenModules(std::string_view list, std::vector<Module>* out, std::string* error);

}  // namespace qd::impl

#endif  // QUANTDIFF_THIRDPARTY_IMPL_MODULE_MODULE_LOADER_H_
