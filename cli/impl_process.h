// impl_process.h: one run of another implementation's command, bounded.
//
// `quantdiff test-impl` runs a command per vector (issue 13, the process
// protocol). Whatever the command does (crash, hang, fill standard error,
// fork children that linger), quantdiff must neither crash nor wait past the
// timeout: the command runs through /bin/sh in a process group of its own
// (posix_spawn, safe beside other threads), standard input is /dev/null,
// standard output is discarded, standard error goes to a file of which the
// first kStderrKept bytes are kept; on timeout the whole group is killed.
//
//   qd::cli::ProcessResult r = qd::cli::RunBounded("my_reader in out", 10.0, "/tmp/x/err");
//   if (r.end == qd::cli::ProcessEnd::kTimedOut) ...
#ifndef QUANTDIFF_CLI_IMPL_PROCESS_H_
#define QUANTDIFF_CLI_IMPL_PROCESS_H_

#include <cstddef>
#include <string>

namespace qd::cli {

inline constexpr std::size_t kStderrKept = 4096;

enum class ProcessEnd {
  kExited,      // exit_code holds its status
  kSignalled,   // signal holds the signal that ended it
  kTimedOut,    // killed (the whole process group) at the timeout
  kNotStarted,  // posix_spawn failed: start_error says why
};

struct ProcessResult {
  ProcessEnd end = ProcessEnd::kNotStarted;
  int exit_code = 0;
  int signal = 0;
  std::string stderr_head;  // at most kStderrKept bytes
  std::string start_error;
};

// Runs `/bin/sh -c COMMAND` with its standard error in STDERR_PATH (created,
// replaced if it exists: a path in test-impl's own scratch folder).
ProcessResult RunBounded(const std::string& command, double timeout_seconds,
                         const std::string& stderr_path);

// COMMAND's words quoted for /bin/sh: 'it'\''s'.
std::string ShellQuote(const std::string& word);

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_IMPL_PROCESS_H_
