#include "cli/module_compare.h"

#include <cstdint>
#include <map>

#include "cli/vector_set.h"

namespace qd::cli {

std::optional<qd::harness::Divergence> CompareModule(const qd::impl::Module& module,
                                                     const qd::harness::FormatEntry& format, qd::ByteView file,
                                                     const std::string& file_name,
                                                     const qd::harness::SideFiles& side_files,
                                                     const qd::Outcome& oracle) {
  const std::string prefix = "DIFF:" + std::string(format.name) + ":module:" + module.name() + ":";
  using Found = std::optional<qd::harness::Divergence>;
  TestVector vector;
  vector.file = file_name;
  vector.bytes.assign(file.data, file.data + file.size);
  vector.side_files = side_files;
  const Expectation want = ExpectationOf(format, oracle, vector);
  // No decode of a file holds more values than the oracle's, or, for a
  // refused file, some multiple of its bytes (a generous bound: the module
  // is judged on the verdict there).
  std::uint64_t values = 64 * static_cast<std::uint64_t>(file.size) + (1u << 16);
  for (const qd::DecodedTensor& t : want.tensors) values += t.values.size();
  const qd::impl::ModuleAnswer answer = module.Decode(file, file_name, side_files, values);
  if (answer.end == qd::impl::ModuleEnd::kGarbage) return Found({prefix + "garbage", answer.problem});
  if (answer.end == qd::impl::ModuleEnd::kFailed) return Found({prefix + "failed", answer.problem});
  const qd::Outcome& theirs = answer.outcome;
  const bool refuse = !want.refusal_rule.empty();
  if (theirs.refused != refuse) {
    return Found({prefix + "verdict:" + (refuse ? want.refusal_rule : "accept"),
                  std::string("the module ") + (theirs.refused ? "refuses: " + answer.problem : "accepts") +
                      "; decode " + (refuse ? "refuses with " + want.refusal_rule : "accepts")});
  }
  if (refuse) {
    const std::string& stated = theirs.findings.back().rule;
    if (!stated.empty() && stated != want.refusal_rule) {
      return Found({prefix + "rule:" + want.refusal_rule, "the module names " + stated});
    }
    return std::nullopt;
  }
  std::map<std::string, const qd::DecodedTensor*> by_name;
  for (const qd::DecodedTensor& t : theirs.tensors) by_name[t.name] = &t;
  if (by_name.size() != theirs.tensors.size() || by_name.size() != want.tensors.size()) {
    return Found({prefix + "tensor:count", "the module " + std::to_string(theirs.tensors.size()) + " tensors (" +
                                               std::to_string(by_name.size()) + " names), decode " +
                                               std::to_string(want.tensors.size())});
  }
  for (const qd::DecodedTensor& t : want.tensors) {
    const auto found = by_name.find(t.name);
    if (found == by_name.end()) return Found({prefix + "tensor:missing", "tensor " + t.name});
    if (found->second->shape != t.shape) {
      return Found({prefix + "tensor:shape", "tensor " + t.name + ": the module " +
                                                 qd::harness::ShapeText(found->second->shape) + ", decode " +
                                                 qd::harness::ShapeText(t.shape)});
    }
    if (std::optional<qd::harness::Divergence> d =
            qd::harness::CompareValues(found->second->values.data(), t.values.data(), t.values.size(), t.name, 0,
                                       std::string(format.name) + ":module:" + module.name())) {
      return d;
    }
  }
  return std::nullopt;
}

}  // namespace qd::cli
