#include "cli/output_file.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "reports/escape.h"

namespace qd::cli {
namespace {

std::string Shown(const std::string& path) { return qd::reports::ForTerminal(path); }

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

// "dir/name" -> {"dir", "name"}; "name" -> {".", "name"}.
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// A name no other writer picks: the target's name (shortened so the whole
// stays under NAME_MAX), the process id and 64 random bits.
std::string TemporaryName(const std::string& base) {
  static std::mt19937_64 rng(std::random_device{}() ^
                             (static_cast<std::uint64_t>(::getpid()) << 32));
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".quantdiff-%d-%016llx.tmp", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng()));
  return "." + base.substr(0, 160) + suffix;
}

// fsync of a folder, best effort (some file systems refuse it): what makes a
// rename in it durable.
void SyncFolder(const std::string& path) {
  const int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

// RESULT of renaming a temporary output to TARGET: on success the rename is
// made durable (the folder fsync'ed); otherwise *error says why.
bool Renamed(int result, const std::string& target, std::string* error) {
  if (result != 0) {
    *error = errno == EEXIST ? "refusing to write " + Shown(target) + ": it appeared meanwhile"
                             : "cannot write " + Shown(target) + ": " + std::strerror(errno);
    return false;
  }
  SyncFolder(SplitPath(target).first);
  return true;
}

// PATH without trailing slashes ("out/" names the folder "out").
std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

bool CheckOutputTarget(const std::string& target, const std::vector<std::string>& inputs,
                       std::string* error) {
  if (target == kStandardOutput) return true;
  if (target.empty() || target.back() == '/') {
    *error = "cannot write '" + Shown(target) + "': not a file name";
    return false;
  }
  struct stat link {};
  if (::lstat(target.c_str(), &link) != 0) {
    if (errno == ENOENT) return true;  // a new file; its folder is checked on open
    *error = "cannot write " + Shown(target) + ": " + std::strerror(errno);
    return false;
  }
  struct stat st = link;
  if (S_ISLNK(link.st_mode) && ::stat(target.c_str(), &st) != 0) {
    *error = "refusing to write " + Shown(target) + ": a symbolic link to nothing (" +
             std::strerror(errno) + ")";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "refusing to write " + Shown(target) + ": it exists and is " + KindOf(st.st_mode) +
             " (give a regular file name, or - for standard output where allowed)";
    return false;
  }
  for (const std::string& input : inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
      *error = "refusing to write " + Shown(target) + ": it is the input " + Shown(input) +
               " (the same file); choose another output name";
      return false;
    }
  }
  return true;
}

OutputFile::~OutputFile() {
  if (fd_ >= 0 || !temporary_.empty()) Abandon();
}

bool OutputFile::Open(const std::string& target, const std::vector<std::string>& inputs,
                      std::string* error) {
  target_ = target;
  if (target == kStandardOutput) {
    to_stdout_ = true;
    return true;
  }
  if (!CheckOutputTarget(target, inputs, error)) return false;
  inputs_ = inputs;
  const auto [dir, base] = SplitPath(target);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string candidate = (dir == "/" ? "/" : dir + "/") + TemporaryName(base);
    // O_EXCL|O_NOFOLLOW: never open something that is already there, a
    // symbolic link planted under the name included. 0644 less the umask,
    // as any new file of the user's.
    const int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          0644);
    if (fd >= 0) {
      struct stat st {};
      ::fstat(fd, &st);
      device_ = st.st_dev;
      inode_ = st.st_ino;
      fd_ = fd;
      temporary_ = candidate;
      guard_ = std::make_unique<GuardedTemporary>(temporary_);
      return true;
    }
    if (errno != EEXIST) {
      *error = "cannot write " + Shown(target) + ": cannot create a file in " + Shown(dir) + ": " +
               std::strerror(errno);
      return false;
    }
  }
  *error = "cannot write " + Shown(target) + ": no free temporary name in " + Shown(dir);
  return false;
}

bool OutputFile::Write(const void* data, std::size_t size) {
  if (error_ != 0) return false;
  if (to_stdout_) {
    if (size != 0 && std::fwrite(data, 1, size, stdout) != size) error_ = errno ? errno : EIO;
    return error_ == 0;
  }
  if (fd_ < 0) {
    error_ = EBADF;
    return false;
  }
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = n < 0 ? errno : EIO;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool OutputFile::Commit(std::string* error) {
  if (to_stdout_) {
    if (std::fflush(stdout) != 0 && error_ == 0) error_ = errno ? errno : EIO;
    if (error_ != 0) *error = std::string("cannot write to standard output: ") + std::strerror(error_);
    return error_ == 0;
  }
  if (fd_ < 0 && error_ == 0) error_ = EBADF;
  if (error_ == 0 && ::fsync(fd_) != 0) error_ = errno;
  if (fd_ >= 0 && ::close(fd_) != 0 && error_ == 0) error_ = errno;
  fd_ = -1;
  if (error_ != 0) {
    *error = "cannot write " + Shown(target_) + ": " + std::strerror(error_);
    Abandon();
    return false;
  }
  // The target may have been replaced while we wrote (by a FIFO, or by a
  // link to an input): the same checks again, just before the rename.
  if (!CheckOutputTarget(target_, inputs_, error)) {
    Abandon();
    return false;
  }
  if (!Renamed(::rename(temporary_.c_str(), target_.c_str()), target_, error)) {
    Abandon();
    return false;
  }
  temporary_.clear();
  guard_.reset();
  return true;
}

void OutputFile::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temporary_.empty()) {
    // Remove only the file this object created: if the name now holds
    // something else (another writer replaced it), leave that alone.
    struct stat st {};
    if (::lstat(temporary_.c_str(), &st) == 0 && st.st_dev == device_ && st.st_ino == inode_) {
      ::unlink(temporary_.c_str());
    }
    temporary_.clear();
  }
  guard_.reset();
}

bool CheckNewDirectoryTarget(const std::string& target, std::string* error) {
  if (target.empty() || target == kStandardOutput) {
    *error = "cannot write '" + Shown(target) + "': not a directory name";
    return false;
  }
  struct stat st {};
  if (::lstat(WithoutTrailingSlashes(target).c_str(), &st) == 0) {
    *error = "refusing to write " + Shown(target) + ": it exists (" + KindOf(st.st_mode) +
             "); give the name of a new directory, which quantdiff creates whole";
    return false;
  }
  if (errno != ENOENT) {
    *error = "cannot write " + Shown(target) + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

OutputDirectory::~OutputDirectory() { Abandon(); }

bool OutputDirectory::Open(const std::string& target, std::string* error) {
  if (!CheckNewDirectoryTarget(target, error)) return false;
  target_ = WithoutTrailingSlashes(target);
  const auto [dir, base] = SplitPath(target_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string candidate = (dir == "/" ? "/" : dir + "/") + TemporaryName(base);
    // mkdir fails on any existing name, a planted link included.
    if (::mkdir(candidate.c_str(), 0755) == 0) {
      temporary_ = candidate;
      guard_ = std::make_unique<GuardedTemporary>(temporary_, /*directory=*/true);
      return true;
    }
    if (errno != EEXIST) {
      *error = "cannot write " + Shown(target) + ": cannot create a directory in " + Shown(dir) +
               ": " + std::strerror(errno);
      return false;
    }
  }
  *error = "cannot write " + Shown(target) + ": no free temporary name in " + Shown(dir);
  return false;
}

bool OutputDirectory::Commit(std::string* error) {
  if (temporary_.empty()) {
    *error = "cannot write " + Shown(target_) + ": the output directory was not opened";
    return false;
  }
  SyncFolder(temporary_);
  // RENAME_NOREPLACE: a directory created under the name meanwhile is never
  // replaced. Without it (a file system that lacks it) the name is checked
  // again just before a plain rename, which replaces at most an empty
  // directory and fails on anything else.
  int renamed = ::renameat2(AT_FDCWD, temporary_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE);
  if (renamed != 0 && (errno == EINVAL || errno == ENOSYS)) {
    if (!CheckNewDirectoryTarget(target_, error)) {
      Abandon();
      return false;
    }
    renamed = ::rename(temporary_.c_str(), target_.c_str());
  }
  if (!Renamed(renamed, target_, error)) {
    Abandon();
    return false;
  }
  temporary_.clear();
  guard_.reset();
  return true;
}

void OutputDirectory::Abandon() {
  if (!temporary_.empty()) RemoveOwnDirectory(temporary_.c_str());
  temporary_.clear();
  guard_.reset();
}

bool WriteFileAtomic(const std::string& path, std::string_view bytes,
                     const std::vector<std::string>& inputs, std::string* error) {
  OutputFile out;
  if (!out.Open(path, inputs, error)) return false;
  out.Write(bytes);
  return out.Commit(error);
}

}  // namespace qd::cli
