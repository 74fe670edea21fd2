// `harness sweep submit --slurm`: one sbatch job array per submission, one array task per run
// that still needs running; each task executes `harness sweep run-one <sweep> --index <i>`.
#pragma once

#include <string>
#include <vector>

#include "sweeps/sweep_file.h"

namespace harness::sweeps {

struct SlurmOptions {
  std::string partition, time;       // "" = the cluster's defaults
  int cpus_per_task = 1;             // also the run's thread count
  int gpus_per_task = 0;             // 0: no GPU request
  int max_parallel = 0;              // array throttle %K; 0: none
  int nodes_per_run = 1;             // data parallel: each task is nodes × ntasks_per_node ranks,
  int ntasks_per_node = 1;           // launched with srun (harness/distributed)
  int signal_seconds = 120;          // USR1 this long before the time limit: checkpoint + requeue
  std::vector<std::string> sbatch_args;  // extra #SBATCH lines, e.g. "--account=abc"
  bool retry_failed = false;
  bool dry_run = false;              // write and print the script; do not submit
  std::string executable;            // the harness binary (absolute); "" = this executable
};

struct SlurmSubmission {
  std::vector<size_t> run_indices;   // array task k runs run_indices[k]
  std::string script_path, script;
  std::string job_id;                // empty for a dry run or when nothing was pending
};

// The sbatch script (no side effects). `submit_dir` is where tasks run (relative paths of the
// sweep resolve from there).
std::string slurm_script(const Sweep& sweep, const std::vector<size_t>& run_indices,
                         const SlurmOptions& options, const std::string& executable,
                         const std::string& submit_dir);

// Picks the runs to submit (pending, interrupted, killed; failed with retry_failed), writes the
// sweep record and <sweep dir>/slurm/<name>-<time>.sbatch, and runs sbatch unless dry_run.
// Throws std::runtime_error when sbatch fails.
SlurmSubmission submit_slurm(const Sweep& sweep, const SlurmOptions& options);

}  // namespace harness::sweeps
