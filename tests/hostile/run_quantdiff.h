// run_quantdiff.h: runs the built quantdiff binary as a user would, for the
// hostile-input suite (ctest label `hostile`).
//
// fork + exec, no shell: how the process ended (exit code or signal) is seen
// exactly, a signal death is never mistaken for an exit code, and the child
// can be given extra environment (LD_PRELOAD of a test shim) and resource
// limits (RLIMIT_AS) without touching the test process.
//
//   qd::hostile::RunResult r = qd::hostile::Quantdiff({"decode", in, "--out", out});
//   EXPECT_EQ(r.exit_code, 2) << r.err;
#ifndef QUANTDIFF_TESTS_HOSTILE_RUN_QUANTDIFF_H_
#define QUANTDIFF_TESTS_HOSTILE_RUN_QUANTDIFF_H_

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace qd::hostile {

struct RunResult {
  int exit_code = -1;  // -1 when the process ended by a signal
  int signal = 0;      // the signal that ended it, else 0
  std::string out;     // standard output
  std::string err;     // standard error
};

struct RunOptions {
  std::vector<std::string> environment;  // "NAME=value" added to the child's
  std::uint64_t address_space_limit = 0;  // RLIMIT_AS in bytes; 0 = none
  std::string working_directory;          // "" = the test's
};

inline std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteWhole(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                               static_cast<std::streamsize>(bytes.size()));
}

// DIR emptied (removed and made again) with a folder DIR/scratch for
// Quantdiff's output files: a test's own working folder. Returns DIR.
inline std::filesystem::path FreshFolder(const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "scratch");
  return dir;
}

// Runs QUANTDIFF_BIN with ARGS; standard output and error go through files
// in SCRATCH (a folder the caller owns).
inline RunResult Quantdiff(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                     const RunOptions& options = {}) {
  const std::filesystem::path out_path = scratch / "run.stdout";
  const std::filesystem::path err_path = scratch / "run.stderr";
  RunResult run;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (!options.working_directory.empty() && ::chdir(options.working_directory.c_str()) != 0) {
      ::_exit(127);
    }
    for (const std::string& e : options.environment) ::putenv(const_cast<char*>(e.c_str()));
    if (options.address_space_limit != 0) {
      const rlimit limit{options.address_space_limit, options.address_space_limit};
      if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(125);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(QUANTDIFF_BIN));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(QUANTDIFF_BIN, argv.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return run;
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  run.out = ReadWhole(out_path);
  run.err = ReadWhole(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return run;
}

}  // namespace qd::hostile

#endif  // QUANTDIFF_TESTS_HOSTILE_RUN_QUANTDIFF_H_
