// What a sweep's run is doing, from its run directory alone (run.h5, the lock, train.log), so
// that `sweep plan/status/run` on any machine sharing the results directory agree.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "sweeps/sweep_file.h"

namespace harness::sweeps {

enum class RunState { kPending, kRunning, kDone, kFailed, kInterrupted };
const char* to_string(RunState s);

struct RunStatus {
  RunState state = RunState::kPending;
  bool locked = false;          // a live process holds the run's lock
  bool killed = false;          // run.h5 says running but nobody holds the lock: it was killed
  std::string holder;           // "pid@host" of the lock holder
  std::string reason;           // why it failed / was interrupted
  int64_t step = 0, total = 0;  // optimiser steps done (the log's latest when running)
  std::map<int64_t, double> eval_loss;  // latest validation loss by context
  int64_t eval_step = 0;                // the step of those losses
  std::map<int64_t, double> needle_accuracy;  // task: needle: retrieval accuracy by context
};

// `ignore_lock`: the caller holds the lock itself (run-one).
RunStatus inspect_run(const PlannedRun& run, bool ignore_lock = false);

// The latest "step N/T ..." progress line of <run_dir>/train.log ("" when none).
std::string latest_progress_line(const std::string& run_dir, int64_t* step = nullptr);

}  // namespace harness::sweeps
