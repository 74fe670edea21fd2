#include "sweeps/slurm.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "common/atomic_file.h"
#include "sweeps/plan.h"
#include "sweeps/run_status.h"

namespace fs = std::filesystem;

namespace harness::sweeps {

namespace {

// Single-quoted for bash.
std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string self_executable() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot resolve /proc/self/exe: " + ec.message());
  return p.string();
}

// Which run each array task runs: a commented table, the indices and the ids as planned (a sweep
// file edited after submission cannot start another run under an index: run-one --expect-id).
std::string array_tasks(const Sweep& sweep, const std::vector<size_t>& run_indices) {
  std::string out;
  out += "\n# Array task k runs run RUN_INDICES[k]:\n";
  for (size_t k = 0; k < run_indices.size(); ++k)
    out += fmt::format("#   task {:<3} run #{:<3} {}  {}\n", k, run_indices[k], sweep.runs[run_indices[k]].id,
                       varying_settings(sweep, run_indices[k]));
  out += fmt::format("RUN_INDICES=({})\n", fmt::join(run_indices, " "));
  std::vector<std::string> ids;
  for (const size_t i : run_indices) ids.push_back(sweep.runs[i].id);
  out += fmt::format("RUN_IDS=({})\n", fmt::join(ids, " "));
  return out;
}

}  // namespace

std::string slurm_script(const Sweep& sweep, const std::vector<size_t>& run_indices,
                         const SlurmOptions& options, const std::string& executable,
                         const std::string& submit_dir) {
  const fs::path sweep_dir = fs::absolute(fs::path(submit_dir) / sweep.sweep_dir).lexically_normal();
  const fs::path sweep_file = fs::absolute(fs::path(submit_dir) / sweep.path).lexically_normal();
  std::string s;
  s += "#!/bin/bash\n";
  s += fmt::format("# Slurm job array for sweep {} ({}), written by `harness sweep submit`.\n",
                   sweep.name, sweep_file.string());
  s += "# One array task per run that still needed running at submission; each runs\n"
       "# `harness sweep run-one <sweep> --index <run index>` under the run's lock.\n";
  s += fmt::format("#SBATCH --job-name=sweep-{}\n", sweep.name);
  s += fmt::format("#SBATCH --array=0-{}{}\n", run_indices.size() - 1,
                   options.max_parallel > 0 ? fmt::format("%{}", options.max_parallel) : "");
  s += fmt::format("#SBATCH --output={}\n", (sweep_dir / "slurm" / "%A_%a.out").string());
  s += "#SBATCH --open-mode=append\n";
  s += "#SBATCH --requeue\n";
  // B: signals only this shell, which forwards SIGTERM (the harness checkpoints on it) and
  // requeues the task; USR1 sent to the harness itself would kill it.
  s += fmt::format("#SBATCH --signal=B:USR1@{}\n", options.signal_seconds);
  s += fmt::format("#SBATCH --chdir={}\n", submit_dir);
  s += fmt::format("#SBATCH --cpus-per-task={}\n", options.cpus_per_task);
  if (!options.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", options.partition);
  if (!options.time.empty()) s += fmt::format("#SBATCH --time={}\n", options.time);
  if (options.gpus_per_task > 0) s += fmt::format("#SBATCH --gpus-per-task={}\n", options.gpus_per_task);
  const int ranks = options.nodes_per_run * options.ntasks_per_node;
  if (ranks > 1)
    s += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node={}\n", options.nodes_per_run,
                     options.ntasks_per_node);
  for (const auto& extra : options.sbatch_args) s += fmt::format("#SBATCH {}\n", extra);
  s += array_tasks(sweep, run_indices);
  s += fmt::format("HARNESS={}\n", shell_quoted(executable));
  s += fmt::format("SWEEP={}\n", shell_quoted(sweep_file.string()));
  s += fmt::format("RETRY_FAILED={}\n", options.retry_failed ? "--retry-failed" : "");
  if (ranks > 1) {
    s += fmt::format(
        "# Data parallel: {} ranks ({} node(s) x {}) meet on the first node of the srun step (c10d\n"
        "# TCPStore; each rank reads SLURM_PROCID, SLURM_STEP_NODELIST and a port from the job and step\n"
        "# ids, unless MASTER_ADDR / MASTER_PORT are exported); srun ends every rank when one fails.\n"
        "LAUNCH=\"srun --kill-on-bad-exit=1 --ntasks={} --ntasks-per-node={}\"\n\n",
        ranks, options.nodes_per_run, options.ntasks_per_node, ranks, options.ntasks_per_node);
  } else {
    s += "LAUNCH=\n\n";
  }
  s += R"(run_index=${RUN_INDICES[$SLURM_ARRAY_TASK_ID]}
run_id=${RUN_IDS[$SLURM_ARRAY_TASK_ID]}
echo "[$(date +%T)] array task ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} (job $SLURM_JOB_ID, restart ${SLURM_RESTART_COUNT:-0}) on $(hostname): run #$run_index"

# USR1 arrives shortly before the time limit: the harness checkpoints on SIGTERM, then this task
# requeues itself alone and resumes from the checkpoint. TERM (scancel, preemption) is passed on.
requeue=0
child=
forward() { [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; }
trap 'requeue=1; forward' USR1
trap 'forward' TERM INT
$LAUNCH "$HARNESS" sweep run-one "$SWEEP" --index "$run_index" --expect-id "$run_id" --threads "${SLURM_CPUS_PER_TASK:-1}" $RETRY_FAILED &
child=$!
# `wait` returns early when a trapped signal arrives: wait until the harness has really exited.
while true; do
  wait "$child"
  status=$?
  kill -0 "$child" 2>/dev/null || break
done
if [ "$requeue" = 1 ]; then
  echo "[$(date +%T)] time limit near: run #$run_index checkpointed (exit $status); requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
# 75: another process holds this run's lock (it is running elsewhere), not a failure here.
[ "$status" = 75 ] && status=0
exit "$status"
)";
  return s;
}

SlurmSubmission submit_slurm(const Sweep& sweep, const SlurmOptions& options) {
  SlurmSubmission out;
  const auto statuses = inspect_runs(sweep);
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const RunState state = statuses[i].state;
    if (state == RunState::kPending || state == RunState::kInterrupted ||
        (state == RunState::kFailed && options.retry_failed))
      out.run_indices.push_back(i);
  }
  check_pretraining(sweep, out.run_indices, false);  // an array's tasks run in no set order
  write_sweep_record(sweep);
  if (out.run_indices.empty()) return out;

  const std::string executable = options.executable.empty() ? self_executable() : options.executable;
  out.script = slurm_script(sweep, out.run_indices, options, executable, fs::current_path().string());
  const fs::path slurm_dir = fs::path(sweep.sweep_dir) / "slurm";
  fs::create_directories(slurm_dir);
  const std::time_t now = std::time(nullptr);
  out.script_path = (slurm_dir / fmt::format("{}-{:%Y%m%d-%H%M%S}.sbatch", sweep.name, fmt::localtime(now))).string();
  harness::write_file_atomically(out.script_path, out.script);
  fs::permissions(out.script_path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  if (options.dry_run) return out;

  const std::string command = fmt::format("sbatch --parsable {} 2>&1", shell_quoted(out.script_path));
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run sbatch");
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = ::pclose(pipe);
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (status != 0) {
    const bool missing = WIFEXITED(status) && WEXITSTATUS(status) == 127;
    throw std::runtime_error(fmt::format(
        "sbatch {} failed{}: {}\n(the script is written; --dry-run only writes it)", out.script_path,
        missing ? " (sbatch not found: not a Slurm submission host?)" : "", output));
  }
  out.job_id = output.substr(0, output.find(';'));  // --parsable: "jobid[;cluster]"
  return out;
}

}  // namespace harness::sweeps
