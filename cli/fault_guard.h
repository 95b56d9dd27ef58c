// fault_guard.h: what the process does when a signal ends it early.
//
// quantdiff reads its inputs through memory mappings. When another process
// truncates a file while it is mapped, touching a page past the new end
// raises SIGBUS, which by default kills the process with a core dump and
// leaves any half-written output behind. The guard turns that into what a
// script can rely on (README "Exit codes"): a message naming the input, the
// temporary files quantdiff created removed, and exit code 2. SIGINT, SIGTERM
// and SIGHUP also remove those temporary files before the process ends with
// the signal as usual.
//
// Only async-signal-safe work happens in the handler: the message and the
// paths are prepared when a mapping or a temporary file is registered, and
// the handler calls only write, unlink and _exit.
//
//   qd::cli::GuardedMapping guard(view.data, view.size, path);  // input
//   qd::cli::GuardedTemporary temp(tmp_path);                   // output
#ifndef QUANTDIFF_CLI_FAULT_GUARD_H_
#define QUANTDIFF_CLI_FAULT_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace qd::cli {

// Installs the handlers once (idempotent). Called by the registrations
// below, so a verb never has to remember it.
void InstallFaultGuard();

// While alive, a SIGBUS inside [data, data + size) ends the process with
// exit code 2 and "quantdiff: PATH: the file changed (shrank?) while being
// read" on standard error. A SIGBUS anywhere else is not ours to explain: the
// default action runs (a crash is a bug and must stay visible).
class GuardedMapping {
 public:
  GuardedMapping() = default;
  GuardedMapping(const std::uint8_t* data, std::size_t size, const std::string& path);
  GuardedMapping(const GuardedMapping&) = delete;
  GuardedMapping& operator=(const GuardedMapping&) = delete;
  ~GuardedMapping();

 private:
  int slot_ = -1;
};

// While alive, PATH is unlinked if the process is ended by a guarded signal.
// Only files quantdiff itself created exclusively are registered. A
// DIRECTORY (created exclusively, e.g. `convert DIR`'s output being built) is
// emptied and removed instead, after every registered file.
class GuardedTemporary {
 public:
  GuardedTemporary() = default;
  explicit GuardedTemporary(const std::string& path, bool directory = false);
  GuardedTemporary(const GuardedTemporary&) = delete;
  GuardedTemporary& operator=(const GuardedTemporary&) = delete;
  ~GuardedTemporary();
  // Forgets the path (it was renamed into place or removed by its owner).
  void Release();

 private:
  int slot_ = -1;
};

// Removes the entries directly in PATH, then PATH itself: a directory
// quantdiff created exclusively and filled with files only (never followed
// through a link; a subdirectory is left, and so is PATH then).
// Async-signal-safe (open, getdents64, unlinkat, close, rmdir), so the
// handler and an abandoned output share it.
void RemoveOwnDirectory(const char* path);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_FAULT_GUARD_H_
