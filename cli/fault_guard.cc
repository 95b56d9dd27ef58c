#include "cli/fault_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "reports/escape.h"

namespace qd::cli {
namespace {

// Fixed tables: the handler must not allocate or take locks. A verb maps one
// input (plus its side files, read into memory) and writes at most two
// outputs at a time, so these are generous.
constexpr int kMappingSlots = 64;  // a sharded model maps every shard
constexpr int kTemporarySlots = 16;
constexpr std::size_t kMessageBytes = 1024;
constexpr std::size_t kPathBytes = 4096;  // PATH_MAX on Linux

struct MappingSlot {
  std::atomic<bool> used{false};
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  char message[kMessageBytes];
  std::size_t message_size = 0;
};

struct TemporarySlot {
  std::atomic<bool> used{false};
  bool directory = false;
  char path[kPathBytes];
};

MappingSlot g_mappings[kMappingSlots];
TemporarySlot g_temporaries[kTemporarySlots];
std::atomic<bool> g_installed{false};

void RemoveTemporaries() {
  for (TemporarySlot& t : g_temporaries) {
    if (t.used.load() && !t.directory) ::unlink(t.path);
  }
  for (TemporarySlot& t : g_temporaries) {
    if (t.used.load() && t.directory) RemoveOwnDirectory(t.path);
  }
}

void WriteAll(const char* text, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<std::size_t>(n);
  }
}

void OnBusError(int signal_number, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const MappingSlot& m : g_mappings) {
    if (m.used.load() && address >= m.begin.load() && address < m.end.load()) {
      WriteAll(m.message, m.message_size);
      RemoveTemporaries();
      ::_exit(2);  // README: 2 is an I/O error
    }
  }
  // Not a page of a mapped input: a real bug. Clean up what we created and
  // let the default action (a core dump) happen when the access repeats.
  RemoveTemporaries();
  ::signal(signal_number, SIG_DFL);
}

void OnTermination(int signal_number) {
  RemoveTemporaries();
  // SA_RESETHAND restored the default action; the signal is blocked while
  // this handler runs and is delivered again, with that action, on return.
  ::raise(signal_number);
}

template <typename Slot, int N>
int ClaimSlot(Slot (&slots)[N]) {
  for (int i = 0; i < N; ++i) {
    bool expected = false;
    if (slots[i].used.compare_exchange_strong(expected, true)) return i;
  }
  return -1;
}

}  // namespace

void InstallFaultGuard() {
  if (g_installed.exchange(true)) return;
  struct sigaction bus {};
  bus.sa_sigaction = OnBusError;
  bus.sa_flags = SA_SIGINFO;
  sigemptyset(&bus.sa_mask);
  sigaction(SIGBUS, &bus, nullptr);
  struct sigaction term {};
  term.sa_handler = OnTermination;
  term.sa_flags = SA_RESETHAND;
  sigemptyset(&term.sa_mask);
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &term, nullptr);
}

GuardedMapping::GuardedMapping(const std::uint8_t* data, std::size_t size,
                               const std::string& path) {
  if (data == nullptr || size == 0) return;
  InstallFaultGuard();
  slot_ = ClaimSlot(g_mappings);
  if (slot_ < 0) return;  // unguarded: a truncation then ends with SIGBUS
  MappingSlot& m = g_mappings[slot_];
  const std::string text = "quantdiff: " + qd::reports::ForTerminal(path) +
                           ": the file changed size while being read (truncated by another "
                           "process?); nothing written\n";
  m.message_size = std::min(text.size(), kMessageBytes);
  std::memcpy(m.message, text.data(), m.message_size);
  m.begin.store(reinterpret_cast<std::uintptr_t>(data));
  m.end.store(reinterpret_cast<std::uintptr_t>(data) + size);
}

GuardedMapping::~GuardedMapping() {
  if (slot_ < 0) return;
  MappingSlot& m = g_mappings[slot_];
  m.begin.store(0);
  m.end.store(0);
  m.used.store(false);
}

GuardedTemporary::GuardedTemporary(const std::string& path, bool directory) {
  if (path.size() >= kPathBytes) return;
  InstallFaultGuard();
  // The slot is filled before it is marked used, so the handler never sees
  // half a path: claim, write, then publish.
  for (int i = 0; i < kTemporarySlots; ++i) {
    TemporarySlot& t = g_temporaries[i];
    if (t.used.load()) continue;
    std::memcpy(t.path, path.c_str(), path.size() + 1);
    t.directory = directory;
    bool expected = false;
    if (t.used.compare_exchange_strong(expected, true)) {
      slot_ = i;
      return;
    }
  }
}

GuardedTemporary::~GuardedTemporary() { Release(); }

void RemoveOwnDirectory(const char* path) {
  const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return;
  // getdents64 records: inode (8), offset (8), record length (2), type (1),
  // then the NUL-terminated name. readdir is not async-signal-safe.
  alignas(8) char buffer[4096];  // on the stack: the handler may interrupt a caller
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      unsigned short length;
      std::memcpy(&length, buffer + at + 16, sizeof length);
      const char* name = buffer + at + 19;
      if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0) ::unlinkat(dir, name, 0);
      at += length;
    }
  }
  ::close(dir);
  ::rmdir(path);
}

void GuardedTemporary::Release() {
  if (slot_ < 0) return;
  g_temporaries[slot_].used.store(false);
  slot_ = -1;
}

}  // namespace qd::cli
