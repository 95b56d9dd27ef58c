// output_file.h: writing a file without ever destroying one quantdiff did
// not create (DESIGN.md "Outputs never destroy anything"; issue 9 section 1).
//
// The bytes go to a temporary file created exclusively (O_CREAT|O_EXCL|
// O_NOFOLLOW, mode 0644 less the umask, a unique name in the target's folder),
// which is fsync'ed and renamed over the target only on success. Nothing else
// is ever removed: a failure or an abandoned write removes that temporary
// file alone. Refused before a byte is written, with exit code 2 in the CLI:
//   - a target that is the same file as an input (same device and inode,
//     through any path, hard link or symbolic link);
//   - a target that exists and is not a regular file (a directory, a FIFO, a
//     device, a dangling symbolic link); "-" means standard output instead.
// A symbolic link to a regular file is replaced by the new file, as rename,
// install and rsync do; the file it pointed to is left as it was.
//
//   qd::cli::OutputFile out;
//   if (!out.Open(path, {input_path}, &error)) return IoError("decode", error);
//   out.Write(bytes.data(), bytes.size());
//   if (!out.Commit(&error)) return IoError("decode", error);
#ifndef QUANTDIFF_CLI_OUTPUT_FILE_H_
#define QUANTDIFF_CLI_OUTPUT_FILE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/fault_guard.h"

namespace qd::cli {

// The name that means standard output where a verb accepts it.
inline constexpr std::string_view kStandardOutput = "-";

class OutputFile {
 public:
  OutputFile() = default;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // an output never committed is abandoned

  // Checks TARGET against INPUTS and creates the temporary file beside it
  // (or, for "-", writes to standard output). False with *error naming the
  // path and the reason.
  bool Open(const std::string& target, const std::vector<std::string>& inputs,
            std::string* error);
  // Appends; the first failure sticks and is reported by Commit.
  bool Write(const void* data, std::size_t size);
  bool Write(std::string_view text) { return Write(text.data(), text.size()); }
  // fsync, close, check the target again (it may have changed meanwhile),
  // rename over it, fsync the folder. False with *error (and the temporary
  // file removed) on any failure.
  bool Commit(std::string* error);
  // Removes the temporary file; the target is untouched.
  void Abandon();

  // The temporary file's path while open ("" for standard output): what a
  // verb reads back to check its own output before committing it.
  const std::string& temporary_path() const { return temporary_; }
  const std::string& target() const { return target_; }

 private:
  std::string target_;
  std::vector<std::string> inputs_;
  std::string temporary_;
  // The temporary file's identity, so Abandon never removes a file another
  // process put under its name.
  unsigned long long device_ = 0;
  unsigned long long inode_ = 0;
  int fd_ = -1;
  bool to_stdout_ = false;
  int error_ = 0;
  std::unique_ptr<GuardedTemporary> guard_;
};

// TARGET may be written as an output next to INPUTS: it does not exist, or it
// is a regular file (after following links) that is none of INPUTS. False
// with *error otherwise. OutputFile::Open runs this; verbs that write several
// files run it for all of them before writing any.
bool CheckOutputTarget(const std::string& target, const std::vector<std::string>& inputs,
                       std::string* error);

// A new directory of outputs (`convert DIR`), built whole before it appears:
// the files go into a temporary directory created exclusively beside TARGET
// (mkdir, mode 0755 less the umask, a unique name), which is renamed to
// TARGET only on success, with RENAME_NOREPLACE where the file system has it,
// so no directory that appeared meanwhile is ever replaced. TARGET must not
// exist (an empty directory included: quantdiff creates the directory it
// fills). A failure, an abandoned output or a guarded signal removes the
// temporary directory and what it holds, nothing else.
//
//   qd::cli::OutputDirectory out;
//   if (!out.Open(outdir, &error)) return IoError("convert", error);
//   WriteFileAtomic(out.PathOf("config.json"), text, inputs, &error);
//   if (!out.Commit(&error)) return IoError("convert", error);
class OutputDirectory {
 public:
  OutputDirectory() = default;
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;
  ~OutputDirectory();  // never committed: abandoned

  bool Open(const std::string& target, std::string* error);
  // Where the file NAME of the finished directory is written meanwhile.
  std::string PathOf(const std::string& name) const { return temporary_ + "/" + name; }
  const std::string& temporary_path() const { return temporary_; }
  // fsync the directory, rename it to the target, fsync the parent. False
  // with *error (and the temporary directory removed) on any failure.
  bool Commit(std::string* error);
  void Abandon();

 private:
  std::string target_;
  std::string temporary_;
  std::unique_ptr<GuardedTemporary> guard_;
};

// TARGET may be created as a new output directory: nothing (not even a
// dangling link) has its name. False with *error otherwise.
bool CheckNewDirectoryTarget(const std::string& target, std::string* error);

// Writes BYTES to PATH through an OutputFile.
bool WriteFileAtomic(const std::string& path, std::string_view bytes,
                     const std::vector<std::string>& inputs, std::string* error);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_OUTPUT_FILE_H_
