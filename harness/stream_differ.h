// stream_differ.h: codec and oracle compared as their values arrive.
//
// What `quantdiff diff` runs (issue 9 section 3: "decode and diff stream by
// tensor and by row chunk (compare as you go)"). The oracle's stream runs on
// a second thread and the codec's on the caller's; each chunk the codec hands
// over is compared with the oracle's values at the same place while both are
// held, so the memory is one chunk per side, not two whole decodes. Both
// readers always run to their end (a difference does not stop them), so
// their findings are complete, and the verdict is the same as Compare's on
// their whole outcomes (differ.h): detection aside, verdict first, then the
// findings, then, for an accepted file, plans and values.
//
//   const qd::harness::StreamedDiff d = qd::harness::DiffStreams(format, bytes, path, sides);
//   if (d.out_of_memory) ...                     // the machine's limit: exit 2
//   else if (d.divergence) ...                   // DIFF:<format>:...
#ifndef QUANTDIFF_HARNESS_STREAM_DIFFER_H_
#define QUANTDIFF_HARNESS_STREAM_DIFFER_H_

#include <functional>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "harness/differ.h"
#include "harness/registry.h"
#include "quantdiff/plain_data.h"

namespace qd::harness {

// Runs READ() and turns an escaping exception into *error (a reader must not
// throw: if one does, that is a finding, not a crash of the tool).
// std::bad_alloc sets *out_of_memory when given: running out of memory is the
// machine's limit, an I/O-style error, not a difference between readers.
template <class Read>
std::optional<qd::Outcome> GuardedRead(Read&& read, std::string* error,
                                       bool* out_of_memory = nullptr) {
  try {
    return read();
  } catch (const std::bad_alloc&) {
    *error = "reader ran out of memory";
    if (out_of_memory != nullptr) *out_of_memory = true;
  } catch (const std::exception& e) {
    *error = std::string("reader threw: ") + e.what();
  } catch (...) {
    *error = "reader threw a non-standard exception";
  }
  return std::nullopt;
}

struct StreamedDiff {
  // Each reader's findings and verdict (tensors left empty: they were
  // compared as they came), or nullopt with the error when it threw.
  std::optional<qd::Outcome> codec;
  std::optional<qd::Outcome> oracle;
  std::string codec_error;
  std::string oracle_error;
  bool out_of_memory = false;
  // When both returned: Compare's answer on what they gave. When one threw:
  // "DIFF:<format>:exception:<side>".
  std::optional<Divergence> divergence;
};

// FORMAT's codec_stream and oracle_stream on FILE with SIDE_FILES, compared.
StreamedDiff DiffStreams(const FormatEntry& format, qd::ByteView file, const std::string& name,
                         const SideFiles& side_files);

// Any two readers of the same input, each streaming into the sink it is
// given, compared as above; TARGET names them in signatures
// ("DIFF:<target>:..."). What DiffStreams and the model-directory diff run.
using StreamReader = std::function<qd::Outcome(qd::TensorSink&)>;
StreamedDiff DiffReaders(const std::string& target, const StreamReader& codec,
                         const StreamReader& oracle);

}  // namespace qd::harness

#endif  // QUANTDIFF_HARNESS_STREAM_DIFFER_H_
