// The gap in validation loss between two arms of a sweep (two τ, two methods), with an interval
// that holds both sources of noise: training seeds and validation windows.
//
// Each arm has runs with seeds s, each scored on the same validation windows i (equal window
// fingerprints), window i lying in document g(i). Seeds are paired: the same seed in both arms
// where every seed is in both (same initial weights and data order, so the pair differs by the arm
// alone), else in rank order. With d_s = mean_i (a_si − b_si):
//   gap         D = mean_s d_s
//   seed part   v_seed = var_s(d_s) / n                       (n − 1 degrees of freedom)
//   window part v_win  = clustered variance of mean_i d̄_i over documents (CR1: G / (G − 1) ·
//               Σ_g (Σ_{i∈g} (d̄_i − D))² / W²; d̄_i = mean_s d_si)         (G − 1 degrees of freedom)
//   se = √(v_seed + v_win), interval D ± t·se with the smaller of the two degrees of freedom.
// v_win counts the seed × window noise a second time (it is in v_seed too): the interval errs wide.
// Windows of one document are not independent, hence documents as the unit; seeds vary more than
// windows at every context measured here (docs/tau-vs-context.md), hence seeds in the interval.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace analysis {

// One run's per-window validation losses at one context.
struct SeedWindows {
  int64_t seed = 0;
  std::vector<double> loss;  // (windows,), the same windows in every run compared
};

struct PairedGap {
  double gap = 0;               // mean loss of a − mean loss of b (nats per token)
  double se = 0;                // √(v_seed + v_win); NaN when it cannot be estimated
  double seed_se = 0, window_se = 0;  // √v_seed, √v_win
  double df = 0;                // degrees of freedom: min(n − 1, G − 1)
  double lo = 0, hi = 0;        // the interval at `level`
  int pairs = 0;                // seed pairs
  int documents = 0;            // distinct documents among the windows
  bool paired_by_seed = false;  // same seeds in both arms (else paired in rank order)
  // The sign test over the seed pairs (analysis/stats/exact_tests.h): how many per-seed gaps d_s are
  // > 0 (a's loss higher), < 0 (b's higher) and exactly 0 (ties: dropped from the test, counted
  // here), and its exact two-sided binomial p on the non-tied pairs.
  int a_higher = 0, b_higher = 0, ties = 0;
  double sign_p = 1;
  bool excludes_zero() const { return lo > 0 || hi < 0; }
};

// The two arms must have the same number of runs (≥ 2) and windows; `document` gives each
// window's document (any integer labels; ≥ 2 distinct for the window part, else it is 0 and only
// seeds count). Throws std::invalid_argument on mismatched shapes. The sign test's counts and p
// are filled whatever the spread (a gap of 0 in every seed: n ties, p = 1).
PairedGap seed_paired_gap(const std::vector<SeedWindows>& a, const std::vector<SeedWindows>& b,
                          const std::vector<int64_t>& document, double level = 0.95);

// Student's t quantile: the t with P(T ≤ t) = p at `df` degrees of freedom (df may be fractional).
double t_quantile(double p, double df);

}  // namespace analysis
