// stream_differ.h: codec and oracle compared as their values arrive.
//
// What `quantdiff diff` runs (issue 9 section 3: "decode and diff stream by
// tensor and by row chunk (compare as you go)", within input size + 64 MiB).
// The readers run one after the other, so that one reader's records are
// alive at a time, not both (a header of 1M tiny entries costs each reader
// about its own size again). Each streams into a summary: SHA-256 over its
// plan and over its values in element order, its chunk order checked
// against the sink contract. Then, as Compare on whole outcomes (differ.h):
// detection aside, verdict first, then the findings, then, for an accepted
// file, the streams: equal summaries of two well-ordered, complete streams
// are no divergence. Unequal ones are read a second time side by side, the
// oracle's stream on a second thread handing each chunk to the codec's, so
// that the first difference is named at its element; only that second read
// holds both readers' records at once. A difference the second read does
// not find is itself a divergence ("unrepeatable").
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
