#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "harness/train/trainer.h"
#include "harness/util/errors.h"

namespace harness::cli {

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
      ("no-progress", "log lines instead of a progress bar");
  po::variables_map vm;
  if (!parse("usage: harness train --config FILE [--set key=value]... [--resume]", args, options, vm))
    return kExitOk;

  const auto loaded = load_config_with_overrides(config_path, overrides);
  train::TrainOptions opts;
  opts.run_dir = run_dir;
  opts.resume = vm.count("resume") > 0;
  opts.overwrite = vm.count("overwrite") > 0;
  if (vm.count("no-progress")) opts.progress_bar = 0;
  if (vm.count("stop-after-steps")) opts.stop_after_steps = vm["stop-after-steps"].as<int64_t>();
  const auto outcome = train::train(loaded, opts);

  fmt::print("run: {}  ({} at step {}{})\n", outcome.run_dir, results::to_string(outcome.state),
             outcome.step, outcome.reason.empty() ? "" : ": " + outcome.reason);
  if (!outcome.eval_loss.empty()) {
    fmt::print("{:>10}  {:>10}\n", "context", "val loss");
    for (const auto& [T, loss] : outcome.eval_loss) fmt::print("{:>10}  {:>10.4f}\n", T, loss);
  }
  switch (outcome.state) {
    case results::RunState::kDone: return kExitOk;
    case results::RunState::kInterrupted: return kExitInterrupted;
    default: return kExitFailure;
  }
}

}  // namespace harness::cli
