// module_compare.h: one reader module's decode of one file judged against
// quantdiff's oracle reading of it, the comparison the fuzz target
// impl_module_diff and `quantdiff campaign --module` share (issue 13,
// item 3: many modules, one comparison, signatures that dedupe).
//
// The module is held to what `quantdiff decode` makes of the oracle's
// reading, what test-impl judges by (cli/vector_set.h ExpectationOf: a
// family quantdiff only recognises is refused with REC-001, tensors a
// safetensors header cannot hold with ST-004..006): the verdict, the rule
// when the module states one, and for an accepted file every tensor (by
// name: shape, then every value bit for bit, NaNs equal, harness/differ.h).
// A module's garbage (module_loader.h) and its failures are divergences too.
//
// Signature: DIFF:<format>:module:<module>:<kind>:<part>, kinds verdict,
// rule, tensor, bytes, garbage, failed.
//
//   if (auto d = qd::cli::CompareModule(module, format, bytes, name, sides, oracle)) Record(d->signature, ...);
#ifndef QUANTDIFF_CLI_MODULE_COMPARE_H_
#define QUANTDIFF_CLI_MODULE_COMPARE_H_

#include <optional>
#include <string>

#include "harness/differ.h"
#include "harness/registry.h"
#include "quantdiff/plain_data.h"
#include "thirdparty/impl_module/module_loader.h"

namespace qd::cli {

// The first way MODULE's decode of FILE (named FILE_NAME, SIDE_FILES beside
// it) departs from decode's reading of ORACLE (FORMAT's oracle on the same
// bytes), or nullopt when it conforms.
std::optional<qd::harness::Divergence> CompareModule(const qd::impl::Module& module,
                                                     const qd::harness::FormatEntry& format, qd::ByteView file,
                                                     const std::string& file_name,
                                                     const qd::harness::SideFiles& side_files,
                                                     const qd::Outcome& oracle);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_MODULE_COMPARE_H_
