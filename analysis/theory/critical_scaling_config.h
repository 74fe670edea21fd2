// The settings of the critical-scaling experiment (arXiv 2510.05554; analysis/theory/critical_scaling.h)
// and their YAML form, `experiment: critical-scaling` (sweeps/critical-scaling.yaml is the
// default grid, annotated):
//
//   experiment: critical-scaling
//   n: [1024, 4096]                          # tokens per set (context lengths)
//   d: [2, 32, 512]                          # token dimensions
//   rho: {from: 0.05, to: 0.95, count: 19}   # or a list of values in [0, 1)
//   gamma: {count: 30, max_over_gamma_c: 3}  # γ_k = k/(count−1)·max·1/(1−ρ), or a list of γ
//   trials: 1                                # token sets per (n, d, ρ), averaged
//   seed: 0
//   rows: 256                                # query rows for the statistics
//   hutchinson: {rows: 32, probes: 4, precision: float32}   # η: rows per probe, probes, dtype
//   causal: {rows: 256, thresholds: [0.25, 0.75]}
//   precision: float64                       # float32 | float64: tokens, statistics, γ̂_c
//   threads: 0                               # 0: every core
//
// Every key but experiment is optional (defaults = the default grid). The keys are a table of the
// one config validator (harness/config/key_table.h): errors are harness::InputError in the run
// config's form, "file:line:column: key: expected …, got …"; an unknown key names the closest
// valid one and the valid keys of its section; `harness config keys` lists them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace analysis {

struct CriticalScalingConfig {
  std::string source = "<default grid>";   // where it came from (for the file's attributes)
  std::string text;                        // the YAML text as written ("" for built-in grids)
  std::vector<int64_t> n = {1024, 4096};
  std::vector<int64_t> d = {2, 32, 512};
  std::vector<double> rho;                 // 0.05, 0.10, …, 0.95 by default
  // γ: either `gamma_values` (the same absolute values for every ρ) or, when it is empty,
  // `gamma_count` values from 0 to gamma_max_over_critical/(1 − ρ), evenly spaced, per ρ.
  std::vector<double> gamma_values;
  int64_t gamma_count = 30;
  double gamma_max_over_critical = 3.0;
  int64_t trials = 1;
  uint64_t seed = 0;
  int64_t rows = 256;                      // query rows for c_out, A_ii, entropy (≤ n)
  int64_t hutchinson_rows = 32;            // output rows per Hutchinson probe (≤ n)
  int64_t hutchinson_probes = 4;
  int64_t causal_rows = 256;               // query positions of the causal variant (≤ n)
  double collapse_below = 0.25;            // causal phases by the self-weight A_ii of a row:
  double identity_above = 0.75;            //   < collapse_below | in between | > identity_above
  // float64 for the tokens, the statistics and the γ̂_c search: c_out near 1 goes through arccos,
  // which turns a rounding error ε into √(2ε) (float32: λ off by ~5e-4). η in float32 by default:
  // its probe noise (a few %) dwarfs float32 rounding, and the Hutchinson VJPs are ~¾ of the work
  // of the default grid, which float32 runs twice as fast.
  bool float64 = true;
  bool hutchinson_float64 = false;
  int64_t threads = 0;                     // 0: std::thread::hardware_concurrency()

  // γ values of the grid at ρ = rho[r].
  std::vector<double> gammas(size_t r) const;
  size_t gamma_points() const;  // per ρ
};

// The default grid of the issue (also sweeps/critical-scaling.yaml).
CriticalScalingConfig default_critical_scaling_config();
// A small grid that runs in about a second (smoke runs, tests).
CriticalScalingConfig quick_critical_scaling_config();

// Parses a YAML document with `experiment: critical-scaling` at the top on top of the default
// grid. Throws harness::InputError with file:line:column on any bad key or value; checks every
// value before returning.
CriticalScalingConfig load_critical_scaling_config_text(const std::string& text,
                                                        const std::string& source);
CriticalScalingConfig load_critical_scaling_config(const std::string& path);

// Whether `path` is a YAML file whose top-level mapping says `experiment: critical-scaling` (what
// `harness sweep run|plan` dispatch on). False for unreadable or unparsable files: the caller's
// own loader reports those.
bool is_critical_scaling_file(const std::string& path);

// The file's keys as `harness config keys` lists them: its key table (harness/config/key_table.h),
// checked by the one validator that checks run configs.
std::string critical_scaling_reference();

// A few lines describing the grid and the work it implies (`harness theory critical --plan`).
std::string describe_plan(const CriticalScalingConfig& config);

}  // namespace analysis
