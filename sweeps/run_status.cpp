#include "sweeps/run_status.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "results/run_paths.h"
#include "results/run_file.h"
#include "sweeps/run_lock.h"

namespace fs = std::filesystem;

namespace harness::sweeps {

const char* to_string(RunState s) {
  switch (s) {
    case RunState::kPending: return "pending";
    case RunState::kRunning: return "running";
    case RunState::kDone: return "done";
    case RunState::kFailed: return "failed";
    case RunState::kInterrupted: return "interrupted";
  }
  return "?";
}

std::string latest_progress_line(const std::string& run_dir, int64_t* step) {
  const results::RunPaths paths(run_dir);
  std::ifstream in(paths.log, std::ios::binary);
  if (!in) return "";
  // The tail is enough: progress lines come every run.log_every steps.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 8192);
  in.seekg(start);
  std::string tail(size_t(size - start), '\0');
  in.read(tail.data(), size - start);
  static const std::regex progress_re(R"(step (\d+)/(\d+) \|[^\n]*)");
  std::string found;
  for (auto it = std::sregex_iterator(tail.begin(), tail.end(), progress_re);
       it != std::sregex_iterator(); ++it) {
    found = it->str();
    if (step) *step = std::stoll((*it)[1].str());
  }
  return found;
}

RunStatus inspect_run(const PlannedRun& run, bool ignore_lock) {
  RunStatus status;
  const auto& c = run.loaded.config;
  status.total = c.task == "needle" ? c.needle.steps : c.train.steps;  // optimiser steps it takes
  if (!ignore_lock) status.locked = run_lock_held(run.run_dir, &status.holder);
  const results::RunPaths paths(run.run_dir);
  if (fs::exists(paths.results)) {
    try {
      const results::RunRecord record = results::read_run_file(paths.results);
      status.reason = record.reason;
      status.step = record.train.size() ? record.train.step.back() : record.status_step;
      for (const auto& [T, rows] : record.eval)
        if (rows.size()) {
          status.eval_loss[T] = rows.loss.back();
          status.eval_step = std::max(status.eval_step, rows.step.back());
        }
      for (const auto& [T, group] : record.needle) {
        const auto a = group.arrays.find("accuracy");
        if (a != group.arrays.end() && !a->second.values.empty())
          status.needle_accuracy[T] = a->second.values.front();
      }
      switch (record.state) {
        case results::RunState::kDone: status.state = RunState::kDone; break;
        case results::RunState::kFailed: status.state = RunState::kFailed; break;
        case results::RunState::kInterrupted: status.state = RunState::kInterrupted; break;
        case results::RunState::kRunning:
          status.state = RunState::kInterrupted;
          status.killed = !status.locked && !ignore_lock;
          if (status.killed) status.reason = "killed: no process holds its lock";
          break;
      }
    } catch (const std::exception& e) {
      status.state = RunState::kFailed;
      status.reason = fmt::format("unreadable {}: {}", paths.results, e.what());
    }
  }
  // A live holder means running, whatever the file said at its last checkpoint.
  if (status.locked) {
    status.state = RunState::kRunning;
    status.killed = false;
    status.reason.clear();
    int64_t logged = 0;
    if (!latest_progress_line(run.run_dir, &logged).empty()) status.step = std::max(status.step, logged);
  }
  return status;
}

}  // namespace harness::sweeps
