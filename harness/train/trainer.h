// One training run, end to end: data → model → optimiser steps → validation at every context →
// checkpoints and results/<run>/run.h5. Resumable, interruptible, never loses finished work.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "harness/config/schema.h"
#include "harness/distributed/world.h"
#include "results/run_file.h"
#include "results/run_paths.h"

namespace harness::train {

struct TrainOptions {
  std::string run_dir;     // "" = <run.out_dir>/<name>
  bool resume = false;     // continue from the last checkpoint if there is one, else start
  bool overwrite = false;  // discard an existing run in run_dir
  int progress_bar = -1;   // 1 on, 0 off, -1 when stderr is a terminal
  int64_t stop_after_steps = 0;  // > 0: checkpoint and stop (interrupted) after this many steps
                                 // in this session, for time-boxed jobs
  distributed::World world;  // data parallel: this process's rank (distributed::world_from_environment)
};

struct TrainOutcome {
  results::RunState state = results::RunState::kRunning;
  std::string reason;
  int64_t step = 0;
  std::string run_dir;
  std::map<int64_t, double> eval_loss;  // last validation loss by context
  bool stopped_as_asked = false;        // interrupted by --stop-after-steps, not a signal: exit 0
};

// Trains (or resumes) a language-model run: harness::run_task (harness/tasks/task.h) picks this or the
// needle fine-tune by the config's task. Throws harness::InputError on bad input, before anything
// is written.
TrainOutcome train(const config::LoadedConfig& loaded, const TrainOptions& options);

}  // namespace harness::train
