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
// module against the oracle's reading as `quantdiff decode` gives it, what
// test-impl judges by (cli/vector_set.h ExpectationOf: a family quantdiff
// only recognises is refused with REC-001, tensors a safetensors header
// cannot hold with ST-004..006): the verdict, the rule when the module
// states one, and for an accepted file every tensor (by name: shape, then
// every value bit for bit, NaNs equal, harness/differ.h). A module's garbage
// (module_loader.h) and its failures are divergences too.
//
// Signature on divergence: DIFF:<format>:<kind>:<rule-or-part> for codec
// against oracle, DIFF:<format>:module:<module>:<kind>:<rule-or-part> for a
// module (kinds verdict, rule, tensor, bytes, garbage, failed).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/vector_set.h"
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

void CompareModule(const qd::impl::Module& module, const qd::harness::FormatEntry& format, qd::ByteView file,
                   const std::string& file_name, const qd::Outcome& oracle) {
  const std::string prefix = "DIFF:" + std::string(format.name) + ":module:" + module.name() + ":";
  qd::cli::TestVector vector;
  vector.file = file_name;
  vector.bytes.assign(file.data, file.data + file.size);
  const qd::cli::Expectation want = qd::cli::ExpectationOf(format, oracle, vector);
  // No decode of a file holds more values than the oracle's, or, for a
  // refused file, some multiple of its bytes (a generous bound: the module
  // is judged on the verdict there).
  std::uint64_t values = 64 * static_cast<std::uint64_t>(file.size) + (1u << 16);
  for (const qd::DecodedTensor& t : want.tensors) values += t.values.size();
  const qd::impl::ModuleAnswer answer = module.Decode(file, file_name, {}, values);
  if (answer.end == qd::impl::ModuleEnd::kGarbage) qd::fuzz::Diverge(prefix + "garbage", answer.problem);
  if (answer.end == qd::impl::ModuleEnd::kFailed) qd::fuzz::Diverge(prefix + "failed", answer.problem);
  const qd::Outcome& theirs = answer.outcome;
  const bool refuse = !want.refusal_rule.empty();
  if (theirs.refused != refuse) {
    qd::fuzz::Diverge(prefix + "verdict:" + (refuse ? want.refusal_rule : "accept"),
                      std::string("the module ") + (theirs.refused ? "refuses: " + answer.problem : "accepts") +
                          "; decode " + (refuse ? "refuses with " + want.refusal_rule : "accepts"));
  }
  if (refuse) {
    const std::string& stated = theirs.findings.back().rule;
    if (!stated.empty() && stated != want.refusal_rule) {
      qd::fuzz::Diverge(prefix + "rule:" + want.refusal_rule, "the module names " + stated);
    }
    return;
  }
  std::map<std::string, const qd::DecodedTensor*> by_name;
  for (const qd::DecodedTensor& t : theirs.tensors) by_name[t.name] = &t;
  if (by_name.size() != theirs.tensors.size() || by_name.size() != want.tensors.size()) {
    qd::fuzz::Diverge(prefix + "tensor:count", "the module " + std::to_string(theirs.tensors.size()) + " tensors (" +
                                                   std::to_string(by_name.size()) + " names), decode " +
                                                   std::to_string(want.tensors.size()));
  }
  for (const qd::DecodedTensor& t : want.tensors) {
    const auto found = by_name.find(t.name);
    if (found == by_name.end()) qd::fuzz::Diverge(prefix + "tensor:missing", "tensor " + t.name);
    if (found->second->shape != t.shape) {
      qd::fuzz::Diverge(prefix + "tensor:shape", "tensor " + t.name + ": the module " +
                                                     qd::harness::ShapeText(found->second->shape) + ", decode " +
                                                     qd::harness::ShapeText(t.shape));
    }
    if (std::optional<qd::harness::Divergence> d =
            qd::harness::CompareValues(found->second->values.data(), t.values.data(), t.values.size(), t.name, 0,
                                       std::string(format.name) + ":module:" + module.name())) {
      qd::fuzz::Diverge(d->signature, d->detail);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Setup& setup = LoadSetup();
  const std::string format(setup.format->name);
  const qd::ByteView file{data, size};
  const std::string name = "input" + std::string(setup.format->file_extension);
  const qd::fuzz::RegistryReadings r = qd::fuzz::DiffThroughRegistry(*setup.format, format, file, name, {});
  for (const qd::impl::Module& module : setup.modules) CompareModule(module, *setup.format, file, name, r.oracle);
  return 0;
}
