// The theory of arXiv 2505.17083 by Monte Carlo: a query attends to N keys whose raw scores are IID
// N(0, 1), each transformed per method through the same score-mod policy the kernels use
// (attention/score_mod.h): standard attention (logit = s), LogN (s_h·ln N·s, s_h = 0.4 by
// default) and scale-invariant attention at τ (a_t·s + m_t). For each N of a log grid it
// measures what the trained models are measured with (attention/statistics.h): global entropy,
// band mass and entropy, the recent-100 mass (Fig. 1); at one large N, the entropy and mass in
// ranges [t, tΔ) with least-squares fits against ln t and √(ln t) (Figs 2 and 6), and the total
// unnormalised attention in each range against Lemma 1's α·τ·Σ_{k=t}^{tΔ−1} 1/(k+τ), α = e^½.
// Every mean comes with its standard error over trials.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "results/dataset_group.h"

namespace analysis {

struct EntropyTheoryOptions {
  std::vector<int64_t> contexts;        // the N grid; empty: 10 … 10^5, 4 per decade
  int64_t trials = 256;                 // independent rows of N logits per N
  std::vector<double> taus = {10.0};    // one scale-invariant transform per τ
  double logn_scale = 0.4;              // LogN's s: logit = s·ln N·score
  int64_t range_keys = 100000;          // N of the range experiment (Figs 2, 6, Lemma 1)
  std::vector<int64_t> range_ratios = {2, 5, 10};
  uint64_t seed = 0;
};

// One transform's results: the DatasetGroup written as /<name> (attention_datasets.h names):
//   integers context (N grid), band_edges, range_start, range_ratio, recent_keys, fit_ratio
//   arrays over the N grid: entropy, recent_mass (N); band_mass, band_entropy (N, bands)
//   arrays over ranges at N = range_keys: range_mass, range_entropy (ranges)
//   range_total (ranges): mean Σ e^logit over the range; for scale-invariant transforms
//   lemma1_sum and lemma1_limit (ranges)
//   fit_ln_t, fit_sqrt_ln_t (fit ratios, 3): slope, intercept, R² of range_entropy against
//   ln t and √(ln t) for each Δ
//   every mean X has X_se, its standard error over trials
struct TheoryTransform {
  std::string name;  // "standard", "logn", "scale-invariant-tau10"
  results::DatasetGroup datasets;
};

// Runs the Monte Carlo (on the threads torch is set to); `progress` (may be empty) is called with
// a line per finished piece. Throws std::invalid_argument on impossible options.
std::vector<TheoryTransform> entropy_theory(const EntropyTheoryOptions& options,
                                            const std::function<void(const std::string&)>& progress = {});

// Writes the transforms to `path` atomically: root attributes kind = "theory-entropy", trials,
// seed; one group per transform.
void write_entropy_theory(const std::string& path, const EntropyTheoryOptions& options,
                          const std::vector<TheoryTransform>& transforms);

// Least squares y = slope·x + intercept, and R².
struct LineFit {
  double slope = 0, intercept = 0, r2 = 0;
};
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace analysis
