// decoded_output.h: the files quantdiff writes, and the check they must pass.
//
// What quantdiff writes, it must accept (issue 9 section 2): `decode` and
// `convert` outputs pass `quantdiff check` with exit code 0. Two pieces serve
// that, shared by the verbs and the property tests that hold them to it:
//   - SafetensorsF32Sink, the decode writer: the F32 safetensors file built
//     from a codec's stream, one tensor at a time. A tensor name that cannot
//     stand in a safetensors header is a finding before anything is written.
//   - CheckVerbOutcome: exactly what `check` runs on a file (detection, then
//     the detected format's codec_check with the side files given), so an
//     output is verified as `check` will later find it.
//
//   qd::cli::SafetensorsF32Sink sink([&](const void* p, std::size_t n) { return out.Write(p, n); });
//   qd::Outcome o = format.codec_stream(bytes, path, side_files, sink);
//   if (sink.finding()) ... // a name the output cannot hold
#ifndef QUANTDIFF_CLI_DECODED_OUTPUT_H_
#define QUANTDIFF_CLI_DECODED_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codecs/safetensors.h"
#include "quantdiff/tensor_sink.h"
#include "harness/registry.h"
#include "quantdiff/plain_data.h"

namespace qd::cli {

// The header (cli writes it first, then the tensors' bytes in the order given)
// of a safetensors file holding TENSORS and METADATA, or the finding that
// refuses it: a tensor name or a metadata key or value that is ill-formed
// UTF-8 (ST-004), a name twice (ST-005), a tensor named "__metadata__"
// (ST-006), a header over 100,000,000 bytes (ST-002). OUTPUT_NAME is the file
// the finding names.
std::optional<qd::Finding> BuildOutputHeader(const std::vector<qd::codec::TensorToWrite>& tensors,
                                             const qd::codec::MetadataList* metadata,
                                             const std::string& output_name, std::string* header);

class SafetensorsF32Sink : public qd::TensorSink {
 public:
  using ByteWriter = std::function<bool(const void* data, std::size_t size)>;
  // OUTPUT_NAME is the file named in a finding about the output.
  SafetensorsF32Sink(ByteWriter write, std::string output_name);

  // Refuses (false, finding() set) what BuildOutputHeader refuses; else
  // writes the header.
  using TensorSink::Plan;
  bool Plan(const qd::TensorPlan& tensors) override;
  bool Take(const qd::TensorChunk& chunk) override;

  // The reason Plan refused, as a finding about the output file.
  const std::optional<qd::Finding>& finding() const { return finding_; }
  std::uint64_t tensors() const { return tensors_; }
  std::uint64_t values() const { return values_; }

 private:
  ByteWriter write_;
  std::string output_name_;
  std::optional<qd::Finding> finding_;
  std::uint64_t tensors_ = 0;
  std::uint64_t values_ = 0;
};

// What `quantdiff check FILE` decides (FORCED: its --format, or null; the
// format it read the file as goes to *format), or nullopt with *error when
// the reader threw (a reader must not throw: that is a finding of its own).
std::optional<qd::Outcome> CheckVerbOutcome(qd::ByteView bytes, const std::string& name,
                                            const qd::harness::SideFiles& side_files,
                                            const qd::harness::FormatEntry* forced,
                                            const qd::harness::FormatEntry** format,
                                            std::string* error);

// The side files `quantdiff check TARGET` will find (cli/common.h
// FindSideFiles) once PENDING are written beside TARGET: a pending file takes
// the place of one of the same name, else it comes first (the only file a
// verb writes beside an output is STEM.quantize_config.json, the first name
// discovery tries). False with *error when a source cannot be read.
bool SideFilesAfterWriting(const std::string& target, const qd::harness::SideFiles& pending,
                           qd::harness::SideFiles* out, std::string* error);

// 0 when `quantdiff check TARGET` will accept BYTES (the output about to be
// committed) with SIDE_FILES. Otherwise prints the findings and why, and
// returns 1 (the output would fail check: nothing is to be written) or 2
// with *error (the reader threw).
int VerifyAsCheckWould(qd::ByteView bytes, const std::string& target,
                       const qd::harness::SideFiles& side_files, std::string* error);

// VerifyAsCheckWould on the file written at TEMPORARY (about to be renamed
// to TARGET) with the configs found beside TARGET; 2 with *error when either
// cannot be read. With CONTAINER_NOTE: a file `check` reads as a format that
// needs a quantize config (GPTQ), with no config beside TARGET, is checked as
// the safetensors container alone and *container_note says so (convert of a
// .pt, whose tensors were never read as that format: docs/pt.md 6.4).
int VerifyWrittenAsCheckWould(const std::string& temporary, const std::string& target,
                              std::string* error, std::string* container_note = nullptr);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_DECODED_OUTPUT_H_
