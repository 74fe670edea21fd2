// `harness sweep plan|run|run-one|status|table|submit`: argument parsing only; the logic lives in
// sweeps/ (sweep files, runner, Slurm) and analysis/export/ (the tables).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>

#include "analysis/theory/critical_scaling_config.h"
#include "analysis/export/export_table.h"
#include "analysis/export/loss_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "results/run_paths.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "harness/distributed/world.h"
#include "sweeps/plan.h"
#include "sweeps/runner.h"
#include "sweeps/slurm.h"
#include "sweeps/sweep_file.h"

namespace harness::cli {

namespace {

const char* kUsage =
    "usage: harness sweep plan FILE       the runs (run id, varying keys, state); nothing is written\n"
    "       harness sweep run FILE [--jobs N] [--threads-per-job M] [--retry-failed]\n"
    "                                     run every run not done yet, one worker process each\n"
    "       harness sweep status FILE     state, step and latest validation losses of each run\n"
    "       harness sweep table FILE [--csv PATH] [--mean-over-seeds]\n"
    "                                     final validation loss by run and context\n"
    "       harness sweep submit FILE --slurm [--partition P] [--time T] [--cpus-per-task C]\n"
    "                                        [--nodes-per-run N --ntasks-per-node M]\n"
    "                            [--gpus-per-task G] [--max-parallel K] [--dry-run]\n"
    "                                     an sbatch job array, one task per run not done\n"
    "       harness sweep run-one FILE --index I [--threads M] [--expect-id ID]\n"
    "                                     one run in this process (what workers and Slurm run)\n"
    "examples:\n"
    "  harness sweep plan sweeps/quickstart.yaml\n"
    "  harness sweep run sweeps/quickstart.yaml --jobs 2 --threads-per-job 1\n"
    "  harness sweep submit sweeps/table1.yaml --slurm --max-parallel 8 --dry-run\n"
    "Sweep files: sweeps/README.md";

// Parses `args` (after the action) with a positional FILE; false when --help was printed.
bool parse_action(const std::string& action, const Args& args, po::options_description& options,
                  po::variables_map& vm, std::string& file) {
  po::options_description arguments;
  arguments.add_options()("file", po::value(&file)->required(), "a sweep file (YAML)");
  po::positional_options_description positional;
  positional.add("file", 1);
  if (!parse(fmt::format("usage: harness sweep {} FILE [options]\n\n{}", action, kUsage), args,
             options, vm, &positional, &arguments))
    return false;
  if (file.empty()) throw InputError(fmt::format("sweep {}: a sweep FILE is required\n\n{}", action, kUsage));
  return true;
}

int plan_or_status(const std::string& action, const Args& args) {
  po::options_description options(fmt::format("sweep {} options", action));
  po::variables_map vm;
  std::string file;
  if (!parse_action(action, args, options, vm, file)) return kExitOk;
  // `experiment: critical-scaling` files are a theory experiment, not training runs.
  if (action == "plan" && analysis::is_critical_scaling_file(file))
    return theory_command({"critical", "--config", file, "--plan"});
  const auto sweep = sweeps::load_sweep(file);
  const auto statuses = sweeps::inspect_runs(sweep);
  fmt::print("{}", action == "plan" ? sweeps::format_plan(sweep, statuses)
                                    : sweeps::format_status(sweep, statuses));
  return kExitOk;
}

int run(const Args& args) {
  po::options_description options("sweep run options");
  int jobs = 1, threads = 0;
  options.add_options()
      ("jobs,j", po::value(&jobs)->default_value(1), "runs at a time (one worker process each)")
      ("threads-per-job", po::value(&threads)->default_value(0), "CPU threads per run (per rank); 0: cores / (jobs × ranks)")
      ("nproc-per-run", po::value<int>()->default_value(1), "data parallel: each run as N local ranks")
      ("retry-failed", "resume failed runs too (from their last checkpoint)")
      ("no-live", "event lines only, no live status table");
  po::variables_map vm;
  std::string file;
  if (!parse_action("run", args, options, vm, file)) return kExitOk;
  // `experiment: critical-scaling` files are a theory experiment, not training runs.
  if (analysis::is_critical_scaling_file(file)) return theory_command({"critical", "--config", file});
  if (jobs < 1) throw InputError(fmt::format("--jobs: expected at least 1, got {}", jobs));
  if (threads < 0) throw InputError(fmt::format("--threads-per-job: expected 0 or more, got {}", threads));
  const auto sweep = sweeps::load_sweep(file);  // validates everything before anything starts
  sweeps::LocalRunOptions run_options;
  run_options.jobs = jobs;
  run_options.threads_per_job = threads;
  run_options.nproc_per_run = vm["nproc-per-run"].as<int>();
  if (run_options.nproc_per_run < 1)
    throw InputError(fmt::format("--nproc-per-run: expected 1 or more, got {}", run_options.nproc_per_run));
  run_options.retry_failed = vm.count("retry-failed") > 0;
  if (vm.count("no-live")) run_options.live_display = 0;
  return sweeps::run_sweep(sweep, run_options);
}

int run_one(const Args& args) {
  po::options_description options("sweep run-one options");
  int64_t index = -1;
  int threads = 0;
  options.add_options()
      ("index,i", po::value(&index)->required(), "run index (plan order, as `sweep plan` shows)")
      ("threads", po::value(&threads)->default_value(0), "CPU threads; 0: the config's run.threads")
      ("retry-failed", "resume the run even if it failed before")
      ("nproc", po::value<int>()->default_value(1), "data parallel: hold the run's lock and train it as N local ranks")
      ("no-lock", "the caller holds the run's lock (a --nproc launcher's ranks)")
      ("expect-id", po::value<std::string>(), "fail unless run INDEX has this id (`sweep run` passes it, so that "
       "a sweep file edited while it runs cannot start another run under this index)");
  po::variables_map vm;
  std::string file;
  if (!parse_action("run-one", args, options, vm, file)) return kExitOk;
  if (index < 0) throw InputError(fmt::format("--index: expected 0 or more, got {}", index));
  const auto sweep = sweeps::load_sweep(file);
  if (vm.count("expect-id")) {
    const std::string expected = vm["expect-id"].as<std::string>();
    const size_t i = size_t(index);
    if (i >= sweep.runs.size() || sweep.runs[i].id != expected)
      throw InputError(fmt::format(
          "{}: the sweep file changed since `sweep run` started: run #{} was {}, now {}; nothing was run. Run "
          "`sweep run` again: it plans from the file as it is now (finished runs are kept)",
          file, index, expected,
          i < sweep.runs.size() ? sweep.runs[i].id + " (" + sweeps::varying_settings(sweep, i) + ")"
                                : "beyond its " + std::to_string(sweep.runs.size()) + " runs"));
  }
  sweeps::RunOneOptions o;
  o.threads = threads;
  o.retry_failed = vm.count("retry-failed") > 0;
  o.nproc = vm["nproc"].as<int>();
  o.take_lock = vm.count("no-lock") == 0;
  if (o.nproc < 1) throw InputError(fmt::format("--nproc: expected 1 or more, got {}", o.nproc));
  if (o.nproc == 1) o.world = distributed::world_from_environment();
  return sweeps::run_one(sweep, size_t(index), o);
}

int table(const Args& args) {
  po::options_description options("sweep table options");
  std::string csv_path;
  options.add_options()
      ("csv", po::value(&csv_path), "also write the table as CSV to PATH")
      ("mean-over-seeds", "one row per setting: mean ± standard error over train.seed (export table's)");
  po::variables_map vm;
  std::string file;
  if (!parse_action("table", args, options, vm, file)) return kExitOk;
  if (vm.count("mean-over-seeds")) {
    // `export table`'s table (one builder of mean ± s.e.), over the done runs; the others listed.
    const auto t = analysis::build_table(analysis::load_run_set(file), {});
    fmt::print("{}", analysis::format_table(t, "md"));
    if (!csv_path.empty()) {
      harness::write_file_atomically(csv_path, analysis::format_table(t, "csv"));
      fmt::print("CSV: {}\n", csv_path);
    }
    return kExitOk;
  }
  const auto sweep = sweeps::load_sweep(file);
  const auto statuses = sweeps::inspect_runs(sweep);
  std::vector<analysis::LossTableInput> inputs;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    analysis::LossTableInput in;
    in.run_id = sweep.runs[i].id;
    for (const auto& key : sweep.varying_keys) in.labels.push_back(sweep.value_text(i, key));
    in.run_file = results::RunPaths(sweep.runs[i].run_dir).results;
    inputs.push_back(std::move(in));
  }
  auto loss_table = analysis::build_loss_table(sweep.varying_keys, inputs);
  // The sweep knows more than run.h5 (a live lock means running; no holder means killed).
  for (size_t i = 0; i < statuses.size(); ++i) loss_table.rows[i].state = sweeps::state_name(statuses[i]);
  fmt::print("# sweep {}: final validation loss by run and context ({}/)\n{}", sweep.name,
             sweep.sweep_dir, analysis::format_text(loss_table));
  if (!csv_path.empty()) {
    harness::write_file_atomically(csv_path, analysis::format_csv(loss_table));
    fmt::print("CSV: {}\n", csv_path);
  }
  return kExitOk;
}

int submit(const Args& args) {
  po::options_description options("sweep submit options");
  sweeps::SlurmOptions slurm;
  options.add_options()
      ("slurm", "submit to Slurm as a job array (the only scheduler so far)")
      ("partition,p", po::value(&slurm.partition), "Slurm partition")
      ("time,t", po::value(&slurm.time), "time limit per task, e.g. 04:00:00")
      ("cpus-per-task,c", po::value(&slurm.cpus_per_task)->default_value(1), "CPUs (= threads) per run")
      ("gpus-per-task", po::value(&slurm.gpus_per_task)->default_value(0), "GPUs per run")
      ("max-parallel", po::value(&slurm.max_parallel)->default_value(0), "at most K tasks at once (%K); 0: no limit")
      ("nodes-per-run", po::value(&slurm.nodes_per_run)->default_value(1), "data parallel: nodes of each run")
      ("ntasks-per-node", po::value(&slurm.ntasks_per_node)->default_value(1),
       "data parallel: ranks per node (srun --kill-on-bad-exit; c10d rendezvous on the first node)")
      ("signal-seconds", po::value(&slurm.signal_seconds)->default_value(120),
       "checkpoint and requeue this long before the time limit")
      ("sbatch", po::value(&slurm.sbatch_args)->composing(), "an extra #SBATCH option, e.g. --sbatch=--account=abc (repeatable)")
      ("retry-failed", "submit failed runs too (they resume from their checkpoint)")
      ("dry-run", "write and print the script; do not submit");
  po::variables_map vm;
  std::string file;
  if (!parse_action("submit", args, options, vm, file)) return kExitOk;
  if (!vm.count("slurm")) throw InputError("sweep submit: pass --slurm (the only scheduler supported)");
  if (slurm.cpus_per_task < 1) throw InputError("--cpus-per-task: expected at least 1");
  if (slurm.nodes_per_run < 1 || slurm.ntasks_per_node < 1)
    throw InputError("--nodes-per-run and --ntasks-per-node: expected at least 1");
  if (slurm.gpus_per_task < 0 || slurm.max_parallel < 0 || slurm.signal_seconds < 1)
    throw InputError("--gpus-per-task and --max-parallel: expected 0 or more; --signal-seconds: at least 1");
  slurm.retry_failed = vm.count("retry-failed") > 0;
  slurm.dry_run = vm.count("dry-run") > 0;
  const auto sweep = sweeps::load_sweep(file);
  const auto submission = sweeps::submit_slurm(sweep, slurm);
  if (submission.run_indices.empty()) {
    fmt::print("sweep {}: nothing to submit (every run is done or running)\n", sweep.name);
    return kExitOk;
  }
  if (slurm.dry_run) {
    fmt::print("{}\n# dry run: wrote {} ({} array task{}); not submitted\n", submission.script,
               submission.script_path, submission.run_indices.size(),
               submission.run_indices.size() == 1 ? "" : "s");
    return kExitOk;
  }
  fmt::print("submitted job array {} ({} task{}) for sweep {}: {}\nlogs: {}/slurm/<job>_<task>.out; "
             "progress: harness sweep status {}\n",
             submission.job_id, submission.run_indices.size(),
             submission.run_indices.size() == 1 ? "" : "s", sweep.name, submission.script_path,
             sweep.sweep_dir, file);
  return kExitOk;
}

}  // namespace

int sweep_command(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("{}\n", kUsage);
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const std::string action = args[0];
  const Args rest(args.begin() + 1, args.end());
  if (action == "plan" || action == "status") return plan_or_status(action, rest);
  if (action == "run") return run(rest);
  if (action == "run-one") return run_one(rest);
  if (action == "table") return table(rest);
  if (action == "submit") return submit(rest);
  throw InputError(fmt::format("sweep: unknown action '{}'; expected plan, run, status, table, "
                               "submit or run-one\n\n{}", action, kUsage));
}

}  // namespace harness::cli
