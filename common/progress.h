// Console output of a run: spdlog to the console and to the run's log file; on a terminal a
// progress bar (step/total, tokens/s, loss, ETA) redrawn in place, otherwise a log line every N
// steps.
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace harness {

// `all` writes to stderr and appends to the run's log file; `file` only to the file (the console
// shows the progress bar instead of per-step lines).
struct RunLog {
  std::shared_ptr<spdlog::logger> all, file;
};
RunLog make_run_log(const std::string& log_file);

bool stderr_is_terminal();

class Progress {
 public:
  Progress(RunLog log, int64_t total_steps, int64_t log_every, bool bar);
  ~Progress();

  // After each optimiser step.
  void update(int64_t step, double loss, double tokens_per_second);
  // Log a message without tearing the bar.
  void message(const std::string& text);
  void finish();

 private:
  void clear_bar();

  RunLog log_;
  int64_t total_, log_every_;
  bool bar_, bar_drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t first_step_ = -1;
};

}  // namespace harness
