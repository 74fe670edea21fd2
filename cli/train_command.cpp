#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "harness/distributed/launcher.h"
#include "harness/distributed/world.h"
#include "harness/tasks/task.h"
#include "common/errors.h"

namespace harness::cli {

namespace {

// A stop the user asked for (--stop-after-steps) is a success; a signal's is 130, as for Ctrl-C.
int exit_code(const train::TrainOutcome& outcome) {
  if (outcome.stopped_as_asked) return kExitOk;
  switch (outcome.state) {
    case results::RunState::kDone: return kExitOk;
    case results::RunState::kInterrupted: return kExitInterrupted;
    default: return kExitFailure;
  }
}

}  // namespace

int train_command(const Args& args) {
  po::options_description options("train options");
  std::string config_path, run_dir;
  std::vector<std::string> overrides;
  options.add_options()
      ("config,c", po::value(&config_path)->required(), "run config (YAML)")
      ("set", po::value(&overrides)->composing(), "override a key: --set attention.tau=L/400 (repeatable)")
      ("run-dir", po::value(&run_dir), "results directory (default <run.out_dir>/<name>)")
      ("resume", "continue from the last checkpoint if there is one")
      ("overwrite", "discard an existing run in the results directory")
      ("stop-after-steps", po::value<int64_t>(), "checkpoint and stop after this many steps (resume later)")
      ("nproc", po::value<int>()->default_value(1),
       "data parallel: run as N local processes (like torchrun --standalone); ranks launched "
       "elsewhere read RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT or Slurm's SLURM_PROCID/SLURM_NTASKS")
      ("no-progress", "log lines instead of a progress bar");
  po::variables_map vm;
  if (!parse("usage: harness train --config FILE [--set key=value]... [--resume] [--nproc N]\n"
             "example: harness train --config sweeps/examples/tiny.yaml --nproc 2",
             args, options, vm))
    return kExitOk;

  const auto loaded = load_config_with_overrides(config_path, overrides);
  const int nproc = vm["nproc"].as<int>();
  if (nproc > 1) {
    std::vector<std::string> rank_args = {"train"};
    const auto rest = distributed::without_option(args, "--nproc");
    rank_args.insert(rank_args.end(), rest.begin(), rest.end());
    return launch_ranks(loaded, rank_args, nproc);
  }
  if (nproc < 1) throw InputError(fmt::format("--nproc: expected 1 or more, got {}", nproc));
  train::TrainOptions opts;
  opts.world = distributed::world_from_environment();
  opts.run_dir = run_dir;
  // torchrun --max_restarts: a restarted group (TORCHELASTIC_RESTART_COUNT > 0) continues from the
  // last checkpoint by itself, as its workers are expected to.
  opts.resume = vm.count("resume") > 0 || opts.world.restart_count > 0;
  opts.overwrite = vm.count("overwrite") > 0;
  if (vm.count("no-progress")) opts.progress_bar = 0;
  if (vm.count("stop-after-steps")) opts.stop_after_steps = vm["stop-after-steps"].as<int64_t>();
  const auto outcome = run_task(loaded, opts);
  if (opts.world.rank != 0) return exit_code(outcome);  // rank 0 reports

  fmt::print("run: {}  ({} at step {}{})\n", outcome.run_dir, results::to_string(outcome.state),
             outcome.step, outcome.reason.empty() ? "" : ": " + outcome.reason);
  if (!outcome.eval_loss.empty()) {
    fmt::print("{:>10}  {:>10}\n", "context", "val loss");
    for (const auto& [T, loss] : outcome.eval_loss) fmt::print("{:>10}  {:>10.4f}\n", T, loss);
  }
  return exit_code(outcome);
}

}  // namespace harness::cli
