// mapped_file.h: read-only memory mapping of a whole file.
//
// The container reader works on views, so a checkpoint larger than memory is
// validated and decoded page by page as the kernel faults it in.
//
//   qd::codec::MappedFile file;
//   std::string error;
//   if (!file.Open("model.safetensors", &error)) return Fail(error);
//   qd::ByteView bytes = file.View();
#ifndef QUANTDIFF_CODECS_MAPPED_FILE_H_
#define QUANTDIFF_CODECS_MAPPED_FILE_H_

#include <string>

#include "quantdiff/plain_data.h"

namespace qd::codec {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // False with *error set (naming the path and errno text) on failure.
  bool Open(const std::string& path, std::string* error);
  qd::ByteView View() const { return {data_, size_}; }
  // Gives the pages read so far back to the kernel; the view stays valid
  // and reads them from the file again if touched. For a caller done with
  // the input before its next large step (decode before it checks its
  // output: issue 9 section 3, the input's pages and the output's would
  // otherwise be resident together).
  void ReleasePages() const;

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_MAPPED_FILE_H_
