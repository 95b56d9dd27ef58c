// gguf_file_diff: native .gguf files (docs/gguf.md), raw or generated and
// edited as fuzz/common/gguf_file_input.h says. Codec and oracle must agree
// on the detected format, the verdict, every finding and every decoded
// value, the check-only path must report the same findings
// (registry_diff.h), and the codec must decode alike with every kernel.
// When ggml's library opens (thirdparty/ggml/, dlopen), ggml's
// gguf_init_from_file_ptr reads the same bytes as a third reader and must
// agree as docs/gguf.md section 6 says: it refuses what quantdiff refuses
// with a rule ggml also checks, accepts what quantdiff accepts (unless the
// file holds nested arrays or is not packed: GGUF-102), and then lists the
// same tensors (names, types, offsets), alignment and data offset.
//
// Signature on divergence: DIFF:gguf_file:<kind>:<rule-or-part>
// (kind ggml for the third reader).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codecs/gguf.h"
#include "codecs/kernels.h"
#include "fuzz/common/fuzz_support.h"
#include "fuzz/common/gguf_file_input.h"
#include "fuzz/common/registry_diff.h"
#include "harness/differ.h"
#include "harness/registry.h"
#include "oracles/gguf.h"
#include "thirdparty/ggml/ggml_library.h"

namespace {

// Rules whose files ggml refuses too (section 6): not GGUF-012 (ggml reads
// an empty name), GGUF-014 (its overflow check wraps: an upstream finding,
// corpus/upstream/ggml/gguf/), GGUF-018 and GGUF-019 (no data read),
// GGUF-020 (ggml reads any non-zero BOOL byte as true).
bool GgmlRefusesToo(const std::string& rule) {
  return rule != "GGUF-012" && rule != "GGUF-014" && rule != "GGUF-018" && rule != "GGUF-019" &&
         rule != "GGUF-020";
}

void CompareWithGgml(qd::ByteView file, const qd::Outcome& oracle) {
  const qd::ggml::Library* ggml = qd::ggml::SharedDefaultLibrary();
  if (ggml == nullptr || !ggml->HasGguf()) return;
  qd::ggml::GgufTable theirs;
  if (!ggml->ReadGgufTable(file.data, file.size, &theirs)) return;
  if (oracle.refused) {
    const std::string& rule = oracle.findings.back().rule;
    if (theirs.accepted && GgmlRefusesToo(rule)) qd::fuzz::Diverge("DIFF:gguf_file:ggml:" + rule, "ggml accepts");
    return;
  }
  const qd::codec::GgufResult ours = qd::codec::ReadGguf(file, "");
  for (const qd::Finding& f : oracle.findings) {
    if (f.rule == "GGUF-102") return;  // ggml refuses any other layout
  }
  if (ours.nested_arrays) return;  // ggml refuses nested arrays
  if (!theirs.accepted) qd::fuzz::Diverge("DIFF:gguf_file:ggml:accept", "ggml refuses an accepted file");
  std::vector<qd::oracle::GgufTensorInfo> infos;
  std::uint64_t alignment = 0;
  std::uint64_t data_start = 0;
  qd::oracle::GgufTable(file, &infos, &alignment, &data_start);
  // With no tensor ggml reports the end of the metadata unpadded as its
  // data offset (docs/gguf.md 6): the offsets are compared when a tensor is there.
  const bool offset_differs = !infos.empty() && theirs.data_offset != data_start;
  if (theirs.alignment != alignment || offset_differs || theirs.tensors.size() != infos.size()) {
    qd::fuzz::Diverge("DIFF:gguf_file:ggml:table", "alignment, data offset or tensor count");
  }
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const qd::ggml::GgufTensorRow& t = theirs.tensors[i];
    // ggml keeps names as C strings: it reads a name up to its first NUL
    // byte (docs/gguf.md 6); quantdiff keeps every byte.
    const std::string as_c_string = infos[i].name.substr(0, infos[i].name.find('\0'));
    // ggml reports all four dims (innermost first), unused ones 1; quantdiff
    // the n_dims stored ones (docs/gguf.md 6).
    std::vector<std::int64_t> ne(infos[i].ne.begin(), infos[i].ne.end());
    ne.resize(4, 1);
    const bool ne_differs = !t.ne.empty() && t.ne != ne;
    if (t.name != as_c_string || t.type != static_cast<int>(infos[i].type) || t.offset != infos[i].offset ||
        ne_differs) {
      qd::fuzz::Diverge("DIFF:gguf_file:ggml:tensor",
                        "tensor " + std::to_string(i) + ": ours " + infos[i].name + " type " +
                            std::to_string(infos[i].type) + " offset " + std::to_string(infos[i].offset) +
                            ", ggml " + t.name + " type " + std::to_string(t.type) + " offset " +
                            std::to_string(t.offset));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const qd::harness::FormatEntry& format = qd::fuzz::FormatOrTrap("gguf", "gguf_file");
  const std::vector<std::uint8_t> bytes = qd::fuzz::GgufFileFromInput(data, size);
  const qd::ByteView file{bytes.data(), bytes.size()};
  const std::string name = "input.gguf";
  const qd::fuzz::RegistryReadings r = qd::fuzz::DiffThroughRegistry(format, "gguf_file", file, name, {});
  const qd::codec::Kernel best = qd::codec::BestKernel();
  for (qd::codec::Kernel kernel : qd::codec::AvailableKernels()) {
    if (kernel == best || r.oracle.refused) continue;
    const qd::Outcome forced = qd::codec::DecodeGgufFile(file, name, kernel);
    if (std::optional<qd::harness::Divergence> d = qd::harness::Compare(forced, r.oracle, "gguf_file")) {
      qd::fuzz::Diverge(d->signature, "kernel=" + std::string(qd::codec::KernelName(kernel)) + ": " + d->detail);
    }
  }
  CompareWithGgml(file, r.oracle);
  return 0;
}
