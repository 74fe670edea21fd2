// What a sweep's run is doing, from its run directory alone (run.h5, the lock, train.log), so
// that `sweep plan/status/run` on any machine sharing the results directory agree.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "sweeps/sweep_file.h"

namespace harness::sweeps {

enum class RunState { kPending, kRunning, kDone, kFailed, kInterrupted };
const char* to_string(RunState s);

struct RunStatus {
  RunState state = RunState::kPending;
  bool locked = false;          // a live process holds the run's lock
  bool killed = false;          // run.h5 says running but nobody holds the lock: it was killed
  bool unreadable = false;      // run.h5 exists but cannot be read (scheduled as failed)
  std::string holder;           // "pid@host" of the lock holder
  std::string reason;           // why it failed / was interrupted
  int64_t step = 0, total = 0;  // optimiser steps done (the log's latest when running)
  std::map<int64_t, double> eval_loss;  // latest validation loss by context
  int64_t eval_step = 0;                // the step of those losses
  std::map<int64_t, double> needle_accuracy;  // task: needle: retrieval accuracy by context
};

// What a user reads: to_string(state), or "unreadable" for a run.h5 that cannot be read (its state
// is kFailed: it is retried with --retry-failed like a failed run).
std::string state_name(const RunStatus& s);

// A `task: needle` run's pretraining run: the run of its keys with task: lm, under init_from (or
// init_from itself when that is a run directory), and what state it is in.
struct Pretraining {
  std::string id;   // its run id
  std::string dir;  // where it is, or would be
  RunStatus status;
};
// nullopt for a run that is not a needle run.
std::optional<Pretraining> pretraining_of(const PlannedRun& run);

// Checks, before anything starts, that each needle run among `to_run` (plan indices) can find a
// done pretraining run. With `can_order` a pretraining run that is itself among `to_run` is fine:
// the returned map (needle index → pretraining index) tells the caller to train it first.
// Otherwise one harness::InputError lists every needle run that cannot start, each located at its
// init_from, with its pretraining run's id and state (exit 2; nothing is written).
std::map<size_t, size_t> check_pretraining(const Sweep& sweep, const std::vector<size_t>& to_run, bool can_order);

// `ignore_lock`: the caller holds the lock itself (run-one).
RunStatus inspect_run(const PlannedRun& run, bool ignore_lock = false);

// The latest "step N/T ..." progress line of <run_dir>/train.log ("" when none).
std::string latest_progress_line(const std::string& run_dir, int64_t* step = nullptr);

}  // namespace harness::sweeps
