// progress_line.h: one status line on standard error for long runs (the
// campaign's counters, `check DIR`'s shards): on a terminal it is rewritten
// in place and erased before other output; elsewhere each update is a line of
// its own, or nothing for a verb that shows progress on terminals only.
//
//   qd::cli::ProgressLine progress(qd::cli::ProgressLine::kTerminalOnly);
//   progress.Show("[2/8] model-00002-of-00008.safetensors", false);
//   progress.Clear();  // before printing anything else on stderr
#ifndef QUANTDIFF_CLI_PROGRESS_LINE_H_
#define QUANTDIFF_CLI_PROGRESS_LINE_H_

#include <string>

namespace qd::cli {

class ProgressLine {
 public:
  enum Where {
    kAlways,        // a terminal: in place; otherwise one line per update (logs)
    kTerminalOnly,  // a terminal: in place; otherwise silent
    kNowhere,       // silent (--quiet)
  };
  explicit ProgressLine(Where where);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine();  // erases a line left in place

  // Shows LINE in place of the previous one; a FINAL line stays (ends with a
  // newline) on a terminal.
  void Show(const std::string& line, bool final);
  // Erases a line shown in place, so other output starts on a clean line.
  void Clear();
  // Whether Show shows anything: a caller can skip building its lines.
  bool enabled() const { return enabled_; }

 private:
  bool terminal_ = false;
  bool enabled_ = false;
  bool shown_ = false;
};

}  // namespace qd::cli

#endif  // QUANTDIFF_CLI_PROGRESS_LINE_H_
