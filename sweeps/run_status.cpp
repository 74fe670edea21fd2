#include "sweeps/run_status.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "harness/tasks/needle/needle_run.h"
#include "common/errors.h"
#include "harness/train/checkpoint_list.h"
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

std::optional<Pretraining> pretraining_of(const PlannedRun& run) {
  const auto& c = run.loaded.config;
  if (c.task != "needle") return std::nullopt;
  Pretraining p;
  PlannedRun base;
  base.loaded.config = needle::pretraining_config(c);
  base.id = p.id = config::config_hash(base.loaded.config);
  const fs::path from = c.init_from;
  const bool is_run_dir = fs::exists(results::RunPaths(from.string()).results) ||
                          !train::RunCheckpoints(from.string()).empty();
  base.run_dir = p.dir = is_run_dir ? from.string() : (from / p.id).string();
  p.status = inspect_run(base);
  return p;
}

std::map<size_t, size_t> check_pretraining(const Sweep& sweep, const std::vector<size_t>& to_run, bool can_order) {
  const auto same_dir = [](const std::string& a, const std::string& b) {
    std::error_code ec1, ec2;
    return fs::weakly_canonical(a, ec1) == fs::weakly_canonical(b, ec2);
  };
  std::map<size_t, size_t> waits_on;
  std::vector<std::string> problems;
  for (const size_t i : to_run) {
    const auto p = pretraining_of(sweep.runs[i]);
    if (!p || p->status.state == RunState::kDone) continue;
    std::optional<size_t> in_sweep;
    for (const size_t j : to_run)
      if (sweep.runs[j].id == p->id && same_dir(sweep.runs[j].run_dir, p->dir)) in_sweep = j;
    if (in_sweep && can_order) {
      waits_on[i] = *in_sweep;
      continue;
    }
    const std::string state = in_sweep            ? "in this sweep, not done (a job array cannot order it)"
                              : !fs::exists(p->dir) ? "missing"
                                                    : state_name(p->status);
    problems.push_back(fmt::format("{}: init_from: run #{} {} fine-tunes {} ({}), which is {}",
                                   sweep.runs[i].loaded.location_of("init_from").str(), i, sweep.runs[i].id,
                                   p->id, p->dir, state));
  }
  if (!problems.empty())
    throw InputError(fmt::format(
        "{} needle run{} cannot start: {} pretraining run{} not done; train {} first (for the shipped "
        "sweeps: harness sweep run sweeps/needle-base.yaml)\n  {}",
        problems.size(), problems.size() == 1 ? "" : "s", problems.size() == 1 ? "its" : "their",
        problems.size() == 1 ? " is" : "s are", problems.size() == 1 ? "it" : "them",
        fmt::join(problems, "\n  ")));
  return waits_on;
}

std::string state_name(const RunStatus& s) { return s.unreadable ? "unreadable" : to_string(s.state); }

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
      status.unreadable = true;
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
