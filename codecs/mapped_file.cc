#include "codecs/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace qd::codec {

MappedFile::~MappedFile() {
  if (data_ != nullptr && size_ > 0) {
    munmap(const_cast<std::uint8_t*>(data_), size_);
  }
}

bool MappedFile::Open(const std::string& path, std::string* error) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below as not a regular file. Regular files ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file";
    ::close(fd);
    return false;
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) {  // mmap refuses length 0; an empty view is fine
    ::close(fd);
    data_ = nullptr;
    return true;
  }
  void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *error = path + ": mmap: " + std::strerror(errno);
    size_ = 0;
    return false;
  }
  madvise(p, size_, MADV_SEQUENTIAL);
  data_ = static_cast<const std::uint8_t*>(p);
  return true;
}

void MappedFile::ReleasePages() const {
  // MADV_DONTNEED on a private read-only file mapping drops the pages; a
  // later read faults them in from the file as the first did.
  if (data_ != nullptr && size_ > 0) madvise(const_cast<std::uint8_t*>(data_), size_, MADV_DONTNEED);
}

}  // namespace qd::codec
