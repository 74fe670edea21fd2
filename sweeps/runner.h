// Running a sweep on this machine: each run in its own worker process (`harness sweep run-one`,
// fork + exec of this executable), so a crash in one run never stops the others. Runs that are
// done are skipped, interrupted or killed runs resume from their checkpoint, and a flock per run
// (sweeps/run_lock.h) keeps two runners — here, on another node, or a Slurm task — from training
// the same run twice.
#pragma once

#include <cstddef>
#include <string>

#include "harness/distributed/world.h"
#include "sweeps/sweep_file.h"

namespace harness::sweeps {

// run-one's exit code when another process holds the run's lock (EX_TEMPFAIL).
constexpr int kExitRunLocked = 75;

struct LocalRunOptions {
  int jobs = 1;                 // runs at a time
  int threads_per_job = 0;      // 0: available cores / (jobs · nproc_per_run), per rank
  int nproc_per_run = 1;        // data-parallel ranks of each run
  bool retry_failed = false;    // resume failed runs too
  int live_display = -1;        // 1 on, 0 off, -1 when stdout is a terminal
  std::string executable = "/proc/self/exe";  // the harness binary the workers run
};

// CPUs this process may run on (its affinity mask, not the machine's count).
int available_cores();

// Runs every run that is not done; returns the exit code: 0 when every run is done (or running
// elsewhere), 1 when any run failed, 130 when interrupted by SIGINT/SIGTERM (forwarded to the
// workers, which checkpoint before this returns).
int run_sweep(const Sweep& sweep, const LocalRunOptions& options);

struct RunOneOptions {
  int threads = 0;            // 0: the config's run.threads
  bool retry_failed = false;
  int nproc = 1;              // > 1: hold the lock and launch this many local ranks
  bool take_lock = true;      // false: the caller (a launcher) holds the run's lock
  distributed::World world;          // this process's rank when it is one (srun, a launcher's child)
};

// Trains run `index` in this process under its lock (what workers and Slurm tasks execute):
// 0 done (or already done), 1 failed, 130 interrupted, kExitRunLocked when locked elsewhere.
// Data parallel: rank 0 takes the lock; every rank reads the run's state and skips a done run.
int run_one(const Sweep& sweep, size_t index, const RunOneOptions& options);

}  // namespace harness::sweeps
