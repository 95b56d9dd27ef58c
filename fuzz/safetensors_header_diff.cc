// safetensors_header_diff: the whole input is a safetensors file; the codec's
// container reader (nlohmann/json SAX) and the oracle's strict hand-written
// parser must agree on accept/reject, on every finding's rule in order, and
// on every decoded floating tensor bit for bit (qd::harness::Compare), and
// the check-only path must report the same findings (registry_diff.h).
//
// Signature on divergence: DIFF:safetensors_header:<kind>:<rule-or-part>.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/registry_diff.h"
#include "harness/differ.h"
#include "harness/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry* const format = [] {
    const qd::harness::FormatEntry* f = qd::harness::FindFormat("safetensors");
    if (f == nullptr) qd::fuzz::Diverge("DIFF:safetensors_header:setup:no-format", "");
    return f;
  }();
  const qd::ByteView file{data, size};
  const std::string name = "input.safetensors";
  qd::fuzz::DiffThroughRegistry(*format, "safetensors_header", file, name, {});
  return 0;
}
