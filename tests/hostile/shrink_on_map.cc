// shrink_on_map.cc: an LD_PRELOAD shim for the hostile suite that makes
// "another process truncates the input while quantdiff reads it" happen every
// time, at the worst moment: right after the file is mapped.
//
// mmap is passed through to the C library; when the mapped file's path ends
// with the suffix in QD_SHRINK_SUFFIX, the file is then truncated to 0 bytes,
// so the first touch of the mapping raises SIGBUS. Nothing in quantdiff
// knows about this file; it only sees a file that shrank.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" void* mmap(void* address, size_t length, int protection, int flags, int fd,
                      off_t offset) {
  using Mmap = void* (*)(void*, size_t, int, int, int, off_t);
  static Mmap real = reinterpret_cast<Mmap>(dlsym(RTLD_NEXT, "mmap"));
  void* mapped = real(address, length, protection, flags, fd, offset);
  const char* suffix = std::getenv("QD_SHRINK_SUFFIX");
  if (mapped == MAP_FAILED || fd < 0 || suffix == nullptr || *suffix == '\0') return mapped;
  char link[64];
  char path[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return mapped;
  path[n] = '\0';
  const std::size_t suffix_size = std::strlen(suffix);
  if (static_cast<std::size_t>(n) >= suffix_size &&
      std::strcmp(path + n - suffix_size, suffix) == 0) {
    const int writable = open(path, O_WRONLY | O_CLOEXEC);
    if (writable >= 0) {
      if (ftruncate(writable, 0) != 0) std::perror("shrink_on_map: ftruncate");
      close(writable);
    }
  }
  return mapped;
}
