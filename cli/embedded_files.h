// embedded_files.h: files of the source tree compiled into quantdiff
// (cmake/embed_files.cmake): the upstream findings `export-vectors` exports
// (corpus/upstream/, cli/upstream_vectors.h) and the JSON Schema of the
// vector files (cli/vectors.schema.json), so an export needs no source tree.
//
//   if (const qd::cli::EmbeddedFile* f = qd::cli::FindEmbeddedFile("cli/vectors.schema.json")) ...
#ifndef QUANTDIFF_CLI_EMBEDDED_FILES_H_
#define QUANTDIFF_CLI_EMBEDDED_FILES_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace qd::cli {

struct EmbeddedFile {
  std::string_view name;  // path relative to the source tree
  const unsigned char* data;
  std::size_t size;

  std::vector<std::uint8_t> Bytes() const { return {data, data + size}; }
};

namespace internal {
extern const EmbeddedFile kEmbeddedFiles[];
extern const std::size_t kEmbeddedFileCount;
}  // namespace internal

// nullptr when NAME was not embedded (cli/CMakeLists.txt lists the files).
inline const EmbeddedFile* FindEmbeddedFile(std::string_view name) {
  for (std::size_t i = 0; i < internal::kEmbeddedFileCount; ++i) {
    if (internal::kEmbeddedFiles[i].name == name) return &internal::kEmbeddedFiles[i];
  }
  return nullptr;
}

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_EMBEDDED_FILES_H_
