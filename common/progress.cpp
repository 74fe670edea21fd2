#include "common/progress.h"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <cstdio>

namespace harness {

RunLog make_run_log(const std::string& log_file) {
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console->set_pattern("%^[%H:%M:%S %l]%$ %v");
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, /*truncate=*/false);
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e %l] %v");
  RunLog log;
  log.all = std::make_shared<spdlog::logger>("run", spdlog::sinks_init_list{console, file});
  log.file = std::make_shared<spdlog::logger>("run-file", file);
  for (const auto& l : {log.all, log.file}) {
    l->set_level(spdlog::level::info);
    l->flush_on(spdlog::level::info);
  }
  return log;
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(RunLog log, int64_t total_steps, int64_t log_every, bool bar)
    : log_(std::move(log)), total_(total_steps), log_every_(log_every), bar_(bar),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { clear_bar(); }

void Progress::clear_bar() {
  if (bar_drawn_) {
    std::fprintf(stderr, "\r\033[2K");
    std::fflush(stderr);
    bar_drawn_ = false;
  }
}

void Progress::message(const std::string& text) {
  clear_bar();
  log_.all->info(text);
}

void Progress::update(int64_t step, double loss, double tokens_per_second) {
  const auto now = std::chrono::steady_clock::now();
  if (first_step_ < 0) first_step_ = step - 1;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double per_step = elapsed / double(std::max<int64_t>(1, step - first_step_));
  const int64_t eta = int64_t(per_step * double(total_ - step));
  const std::string stats =
      fmt::format("step {}/{} | {:.0f} tok/s | loss {:.4f} | ETA {}:{:02d}", step, total_,
                  tokens_per_second, loss, eta / 60, eta % 60);
  // The log file always gets a line every log_every steps; the console gets the bar instead.
  if (step % log_every_ == 0 || step == total_) {
    (bar_ ? log_.file : log_.all)->info(stats);
  }
  if (bar_ && (std::chrono::duration<double>(now - last_draw_).count() > 0.1 || step == total_)) {
    constexpr int kWidth = 24;
    const int filled = int(kWidth * double(step) / double(std::max<int64_t>(total_, 1)));
    std::fprintf(stderr, "\r\033[2K[%s%s] %s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), stats.c_str());
    std::fflush(stderr);
    bar_drawn_ = true;
    last_draw_ = now;
  }
}

void Progress::finish() { clear_bar(); }

}  // namespace harness
