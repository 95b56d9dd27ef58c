#include "cli/progress_line.h"

#include <unistd.h>

#include <cstdio>

namespace qd::cli {

ProgressLine::ProgressLine(Where where) : terminal_(::isatty(STDERR_FILENO) == 1) {
  enabled_ = where == kAlways || (where == kTerminalOnly && terminal_);
}

ProgressLine::~ProgressLine() { Clear(); }

void ProgressLine::Show(const std::string& line, bool final) {
  if (!enabled_) return;
  if (terminal_) {
    // Carriage return, then erase to the end of the line (ECMA-48 EL).
    std::fprintf(stderr, "\r\x1b[K%s%s", line.c_str(), final ? "\n" : "");
    shown_ = !final;
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void ProgressLine::Clear() {
  if (terminal_ && shown_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
  shown_ = false;
}

}  // namespace qd::cli
