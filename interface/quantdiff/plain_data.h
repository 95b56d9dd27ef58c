// plain_data.h: the only header that codecs/ and oracles/ both include.
//
// It holds plain data and nothing else: byte views, decoded tensors and
// findings. No tables, no block sizes, no helpers: anything that encodes
// knowledge of a format is written twice on purpose, once in codecs/ (fast)
// and once in oracles/ (plain, from the spec text), so that a layout bug in
// one cannot hide in the other.
//
//   qd::Outcome outcome = qd::oracle::ReadRbqFile(bytes, "model.safetensors");
//   if (outcome.refused) { for (const qd::Finding& f : outcome.findings) ... }
#ifndef QUANTDIFF_PLAIN_DATA_H_
#define QUANTDIFF_PLAIN_DATA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qd {

// A read-only view of bytes the caller owns (a file mapping, a fuzz input).
struct ByteView {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
};

// kError: a MUST rule is violated and the reader refuses the file.
// kWarning: a SHOULD rule or advisory; the file is still read.
enum class Severity : std::uint8_t { kError = 0, kWarning = 1 };

// One finding. Every field that does not apply stays at its default
// (empty string or -1), so a finding can always be printed in full.
struct Finding {
  std::string rule;  // public rule ID, e.g. "ST-003", "RBQ-005"
  Severity severity = Severity::kError;
  std::string file;    // file name as given by the caller
  std::string tensor;  // tensor name, empty for file-level findings
  std::string field;   // header field or data part, e.g. "data_offsets", "scale"
  std::int64_t byte_offset = -1;  // absolute offset in the file
  std::int64_t row = -1;
  std::int64_t block = -1;
  std::int64_t element = -1;
  std::string message;  // one human sentence; never compared by the differ
};

// A file that comes with the one being read and changes how it reads, such
// as the quantize_config.json beside a GPTQ checkpoint. Readers take a list
// of them in priority order (docs/gptq.md, config discovery); name is what
// findings about the side file report (the path as found or as given).
struct SideFile {
  std::string name;
  std::vector<std::uint8_t> bytes;
};

// One entry of a model directory as the caller found it (docs/model_dir.md
// section 1). Both readers get the same listing, as they get the same bytes.
enum class DirEntryKind : std::uint8_t {
  kRegular,   // a regular file, or a link resolving to one inside the directory
  kEscaping,  // a symbolic link resolving outside the directory
  kOther,     // a subdirectory, a dangling link, a device, ...
};
struct DirEntry {
  std::string name;  // the entry's name inside the directory (no '/')
  DirEntryKind kind = DirEntryKind::kOther;
  ByteView bytes;    // a regular entry's bytes (a mapping the caller owns)
};
struct ModelDirListing {
  std::string dir;     // the directory as given: findings about it name this
  std::string prefix;  // dir ending in '/': findings name an entry prefix + name
  std::vector<DirEntry> entries;  // sorted by name bytes, names unique
};

// A logical tensor decoded to binary32, row major.
struct DecodedTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::vector<float> values;
};

// What a reader makes of a file: the findings in check order and, when the
// file is accepted, every logical weight decoded to binary32 in data-offset
// order. refused is true exactly when findings holds a kError finding; a
// reader stops at the first kError (the documented check order decides
// which one that is), so a refused outcome holds exactly one kError, last.
struct Outcome {
  bool refused = false;
  std::vector<Finding> findings;
  std::vector<DecodedTensor> tensors;
};

}  // namespace qd

#endif  // QUANTDIFF_PLAIN_DATA_H_
