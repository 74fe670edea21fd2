// The verdict of `harness tau check`: is the config's τ near the best τ of the grid, at each
// validation context, with intervals that hold seed-to-seed and window-to-window noise?
//
// Each τ has runs with two or more seeds, all scored on the same validation windows. The config's
// τ is compared with every other τ of the grid by the seed-paired gap (seed_paired_gap.h): seeds
// paired, windows clustered by document, Student's t at the smaller degrees of freedom. The m
// comparisons share one confidence level (Bonferroni: each at 1 − (1 − level) / m), since the best τ
// is picked from the same noisy numbers. With a margin δ (nats per token), in this order:
//   worse            some τ is better by more than δ (its interval's lower end > δ)
//   inconclusive     some interval reaches beyond δ: the data cannot tell (add seeds)
//   a better τ exists some τ is better, but by at most δ (lower end > 0, every upper end ≤ δ)
//   near-optimal     no τ is better by more than δ, and none is resolved as better at all
// The best τ of the grid (the lowest mean) comes with the τ not resolved from it; a best τ at the
// end of the grid is reported as such, with the factors to add.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/run_set.h"
#include "analysis/seed_paired_gap.h"

namespace analysis {

// One τ of the grid at one context: its runs' per-window losses.
struct TauArm {
  std::string tau;    // as written in the sweep
  double value = 0;   // in tokens
  std::vector<SeedWindows> runs;
  double mean() const;  // mean over runs of each run's mean window loss
};

// The grid at one context T.
struct ContextRuns {
  int64_t context = 0;
  std::vector<TauArm> arms;        // ascending τ
  std::vector<int64_t> document;   // each window's document
  bool documents_known = true;     // false: run files without /eval/<T>/window_document
};

struct TauVerdictOptions {
  double level = 0.95;   // simultaneous over the grid's comparisons
  double margin = 0.01;  // δ, nats per token
};

enum class TauClass { kNearOptimal, kBetterExists, kWorse, kInconclusive };
const char* to_string(TauClass c);  // "near-optimal", "a better τ exists", "worse", "inconclusive"

struct TauComparison {
  std::string tau;  // the other τ
  PairedGap gap;    // own − other: > 0 where the other is better
};

struct TauVerdict {
  int64_t context = 0;
  std::string tau;                   // the config's
  TauClass verdict = TauClass::kInconclusive;
  std::string why;                   // one clause: what the verdict rests on
  double loss = 0;                   // the config's τ: mean loss over seeds
  std::string best_tau;              // the lowest mean of the grid
  double best_loss = 0;
  std::vector<std::string> near_best;  // τ whose gap to the best is not resolved (the best included)
  std::string edge;                  // "" or "smallest" / "largest": the best τ ends the grid
  std::vector<std::string> factors_to_add;  // beyond that end, as factors of the config's τ
  std::vector<TauComparison> comparisons;   // with every other τ
  double level_each = 0;             // each comparison's level (Bonferroni)
  int seeds = 0, documents = 0;
  // Inconclusive: the seeds per τ at which the comparison it rests on would be resolved either
  // way (the measured gap and seed variance held fixed); 0 when no number up to 64 would (the
  // windows' share alone is too wide: validate on more tokens).
  int seeds_to_resolve = 0;
};

// The smallest n ≤ 64 seeds at which an interval with `g`'s gap, seed variance (seed_se² · its
// pairs) and window part, at `level` and min(n − 1, documents − 1) degrees of freedom, would lie
// wholly on one side of `margin`; 0 when none would. (A planning figure: the next seeds' gap moves.)
int seeds_to_resolve(const PairedGap& g, double margin, double level);

// Throws harness::InputError when `tau_text` is not an arm. A context whose arms hold fewer than
// two runs each, or differing numbers, gets an inconclusive verdict saying so.
std::vector<TauVerdict> tau_verdicts(const std::vector<ContextRuns>& grid, const std::string& tau_text,
                                     const TauVerdictOptions& options = {});

// One paragraph per context, then a one-line summary.
std::string format_verdicts(const std::vector<TauVerdict>& verdicts, int64_t train_context,
                            const TauVerdictOptions& options = {});

// The grid of a tau check's runs (rows attention.tau, seeds train.seed): per context, the last
// validation's window losses. Throws harness::InputError when a run lacks per-window losses or
// the runs were not scored on the same windows.
std::vector<ContextRuns> tau_grid(const RunSet& set);

}  // namespace analysis
