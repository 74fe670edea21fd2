#include "cli/commands.h"

namespace harness::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train one run from a config file (or resume it)", &train_command},
      {"config", "list config keys; show a resolved config and its run id", &config_command},
      {"attention", "inspect what a method does to the logit at each distance", &attention_command},
      {"sweep", "plan, run, inspect and submit declarative sweeps", &sweep_command},
      {"tau", "tau check: is a config's τ close to the best τ? a small grid, resumable, with a verdict", &tau_command},
      {"analyse", "attention statistics of finished runs at any context, into their run.h5", &analyse_command},
      {"export", "tables (md, csv, tex) and figures (CSV + gnuplot SVG/PNG) from runs and theory files", &export_command},
      {"report", "one self-contained HTML page of a sweep: results table, figures, run states, config differences, provenance", &report_command},
      {"theory", "experiments without training: entropy of IID Gaussian logits per transform, critical scaling", &theory_command},
  };
  return table;
}

}  // namespace harness::cli
