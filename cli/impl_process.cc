#include "cli/impl_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

extern char** environ;

namespace qd::cli {
namespace {

std::string ReadHead(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(kStderrKept, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head;
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

ProcessResult RunBounded(const std::string& command, double timeout_seconds,
                         const std::string& stderr_path) {
  ProcessResult result;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attributes);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  // Its own process group (pgid = its pid), so a timeout kills what it
  // started too; the default signal dispositions, whatever quantdiff set.
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGBUS);
  sigaddset(&defaults, SIGSEGV);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::string shell = "/bin/sh", dash_c = "-c", text = command;
  std::vector<char*> argv = {shell.data(), dash_c.data(), text.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    result.start_error = std::strerror(spawned);
    return result;
  }

  // Polled, not waited on with a signal: test-impl runs several commands
  // from worker threads, and SIGCHLD or an alarm belongs to the process.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  auto pause = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      result.start_error = std::string("waitpid: ") + std::strerror(errno);
      ::kill(-pid, SIGKILL);
      return result;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      result.end = ProcessEnd::kTimedOut;
      result.stderr_head = ReadHead(stderr_path);
      return result;
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(20)) pause *= 2;
  }
  // What the command left running in its group goes with it: a reader's
  // helper process must not outlive the vector it was run on.
  ::kill(-pid, SIGKILL);
  if (WIFEXITED(status)) {
    result.end = ProcessEnd::kExited;
    result.exit_code = WEXITSTATUS(status);
  } else {
    result.end = ProcessEnd::kSignalled;
    result.signal = WTERMSIG(status);
  }
  result.stderr_head = ReadHead(stderr_path);
  return result;
}

}  // namespace qd::cli
