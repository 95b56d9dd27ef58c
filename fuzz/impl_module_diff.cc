// impl_module_diff: other implementations, loaded as reader modules
// (interface/quantdiff/impl_module.h), beside quantdiff's codec and oracle on
// the same bytes, Cryptofuzz style: many modules, one comparison, signatures
// that dedupe.
//
// Environment (read once):
//   QD_IMPL_MODULES  colon-separated module paths (a.so:b.so); none: the
//                    target compares codec and oracle alone
//   QD_IMPL_FORMAT   the registry format every input is read as (default
//                    gguf); its vectors, corpus/vectors/<format>/, are seeds
// Each input is one file of that format, no side files. Codec and oracle
// are compared as every file target does (registry_diff.h); then each
// module against the oracle's reading as `quantdiff decode` gives it, by the
// comparison `quantdiff campaign --module` makes too (cli/module_compare.h).
//
// Signature on divergence: DIFF:<format>:<kind>:<rule-or-part> for codec
// against oracle, DIFF:<format>:module:<module>:<kind>:<rule-or-part> for a
// module (kinds verdict, rule, tensor, bytes, garbage, failed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/module_compare.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "thirdparty/impl_module/module_loader.h"

namespace {

struct Setup {
  const qd::harness::FormatEntry* format = nullptr;
  std::vector<qd::impl::Module> modules;
};

const Setup& LoadSetup() {
  static const Setup* setup = [] {
    auto* s = new Setup;
    const char* format = std::getenv("QD_IMPL_FORMAT");
    const std::string name = format != nullptr && *format != '\0' ? format : "gguf";
    s->format = &qd::fuzz::FormatOrTrap(name, "impl_module_diff");
    const char* list = std::getenv("QD_IMPL_MODULES");
    std::string error;
    if (list != nullptr && !qd::impl::OpenModules(list, &s->modules, &error)) {
      qd::fuzz::Diverge("DIFF:" + name + ":module:setup:open", error);
    }
    return s;
  }();
  return *setup;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Setup& setup = LoadSetup();
  const std::string format(setup.format->name);
  const qd::ByteView file{data, size};
  const std::string name = "input" + std::string(setup.format->file_extension);
  const qd::fuzz::RegistryReadings r = qd::fuzz::DiffThroughRegistry(*setup.format, format, file, name, {});
  for (const qd::impl::Module& module : setup.modules) {
    if (auto d = qd::cli::CompareModule(module, *setup.format, file, name, {}, r.oracle)) {
      qd::fuzz::Diverge(d->signature, d->detail);
    }
  }
  return 0;
}
