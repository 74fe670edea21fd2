// `harness tau check`: the paper's advice — check that τ is close to the best τ in your setting —
// as an ordinary sweep: the config's τ times each factor, × seeds, written to
// <run.out_dir>/tau-check-<run id>/tau-check.yaml, so it runs, resumes, skips done runs and goes to
// Slurm (`harness sweep submit`) like every other sweep. The verdict is analysis/tau/verdict.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/config/schema.h"

namespace harness::sweeps {

struct TauCheckSpec {
  std::string config_path;             // the run config, as given
  std::vector<std::string> overrides;  // --set key=value, applied to every run
  std::vector<double> factors = {0.1, 0.3, 1.0, 3.0, 10.0};  // must hold 1 (the config's own τ)
  std::vector<int64_t> seeds;          // empty: the config's train.seed and the next two
};

struct TauCheckSweep {
  std::string path;                    // the sweep file: <run.out_dir>/tau-check-<id>/tau-check.yaml
  std::string text;                    // its YAML
  double tau = 0;                      // the config's τ in tokens at its L
  std::vector<std::string> tau_texts;  // the τ values as written in the sweep, one per factor
  std::string own_tau_text;            // the config's τ as written there (factor 1)
};

// `loaded`: the config with the overrides applied and validated. Throws harness::InputError when
// the method does not read attention.tau, a factor is not > 0, or 1 is not among the factors.
TauCheckSweep tau_check_sweep(const config::LoadedConfig& loaded, const TauCheckSpec& spec);

}  // namespace harness::sweeps
