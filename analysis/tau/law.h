// The law of the best τ against the training context L (`harness tau law`, docs/tau-vs-context.md):
// runs of one method on a τ grid at several L with several seeds, validated at multiples of L.
//
//  * τ* per L and context: the vertex of the least-squares quadratic in ln τ through the seed-mean
//    losses at the grid's best τ (the argmin b) and the grid points within an octave of it (a factor
//    of 2 in τ), its two neighbours in any case: on a 2×-spaced grid the parabola through b and its
//    neighbours, on a √2 grid five points. Only those: points further out lie where a quadratic no
//    longer holds — the flattening far below the optimum, the breakdown wall above it (at L = 256,
//    4L the wall at τ = 16, 0.32 above the minimum, dragged the 5-point fit on the 2× grid from
//    ≈ 4.4 to 2.5). In studies simulated from the measured curves (2× grid) a 5-point fit was biased
//    by −0.08 to −0.18 in ln τ per L, one admitting points two steps out where a parabola allows them
//    (rise ≤ 4× the neighbours') by −0.04 to −0.15, the octave's 3 points by under 0.02. τ* is not
//    located when b ends the grid, when the quadratic opens downward or when its vertex lies outside
//    the fitted points (neither can happen with 3 points whose middle is lowest); it is then censored
//    to where a curve with one minimum has it, (τ_{b−1}, τ_{b+1}), with τ_{−1} = 0 and τ_K = ∞.
//  * Its interval: a bootstrap over seeds. Seeds are paired across τ (same initial weights and data
//    order), so a replicate redraws n whole per-seed curves with replacement at each L (the same
//    draw for every τ and context of that L; independently between L, which are different runs),
//    and refits. No variance is pooled over τ: the noise near the minimum is what moves τ*, and it
//    is several times smaller than near the breakdown. A resample's deviations from the seed means
//    are scaled by √(n/(n−1)), undoing the (n−1)/n by which resampling n seeds shrinks the variance.
//    Every replicate counts: each gives τ* as a point or as its censored span, and the interval is
//    [the (1−level)/2 quantile of the spans' lower ends, the (1+level)/2 quantile of their upper
//    ends] over all replicates — 0 or ∞ where the grid does not bound it. The share of replicates
//    per cause of censoring is kept.
//  * The slope k of ln τ* on ln L (least squares over the L), per context. With τ* censored at
//    some L, a replicate bounds k instead of giving it: k = Σ w_i ln τ*_i with w_i = (x_i − x̄)/Sxx,
//    x = ln L, so a span at an L below the mean (w < 0) turns into the opposite bounds on k, one
//    above it into the same; τ* ≤ τ_1 at the smallest L bounds k from below only. The interval is
//    taken from these per-replicate bounds as for τ*.
//  * The breakdown τ per L: the smallest τ above the one extrapolating best where the loss at
//    `breakdown_factor`·L rises `breakdown_rise` above the loss at L, linear in ln τ between grid
//    points; bootstrapped as above on the per-seed rises (0 or ∞ where not reached on the grid).
//
// Coverage (tests/analysis_tau_law_coverage_test.cpp: studies simulated from the measured curves,
// 2× grid, true k = 1.25): the 90% interval of k covered the true k in 79–83% of studies at 3 seeds,
// 84–87% at 4 and 86–89% at 6, 8 and 12 — short of 90% by about what a percentile interval from n
// resampled seeds lacks (Student's t); τ*'s per L in 72–89% at 6 seeds (72–76% at L = 512, where
// the noise is least and the fit's bias from the curve's shape, +0.02 in ln τ, is half the spread).
// `kSeedsForCoverage` is the fewest seeds at which k's coverage is within 0.85–0.95; with fewer the
// text warns. On a √2 grid (five points fitted) k covered in 94–97%.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/run_set.h"

namespace analysis {

constexpr int kSeedsForCoverage = 6;

// Where a run's loss at one context comes from: its last validation (/eval/<T>) or the
// re-validation `harness analyse` wrote (/analysis/<T>, often on more tokens).
enum class LossSource { kEval, kAnalysis };
const char* to_string(LossSource s);

// One training context: τ ascending, the seeds every τ has, and each context factor's losses.
struct TauLawCurve {
  int64_t L = 0;
  std::vector<double> tau;     // tokens, ascending
  std::vector<int64_t> seeds;  // ascending
  std::map<int64_t, std::vector<std::vector<double>>> loss;        // factor T / L → [τ][seed]
  std::map<int64_t, std::vector<std::vector<LossSource>>> source;  // the same shape; may be empty (all eval)
};

struct TauLawCurves {
  std::vector<TauLawCurve> curves;
  std::vector<std::string> skipped;  // τ or whole L left out, and why (a sweep still running)
};

struct TauLawOptions {
  double level = 0.9;
  int replicates = 4000;
  uint64_t seed = 1;              // of the bootstrap's generator
  double breakdown_rise = 0.1;    // nats per token
  int64_t breakdown_factor = 16;  // the context whose rise over 1L defines the breakdown
};

// Fractions of bootstrap replicates whose τ* is not located, by cause.
struct Censoring {
  double low_edge = 0;   // the best grid τ is the smallest (τ* < τ_1)
  double high_edge = 0;  // the best grid τ is the largest (τ* > τ_{K−2})
  double downward = 0;   // the quadratic opens downward (more than 3 points fitted)
  double outside = 0;    // its vertex lies outside the fitted points (likewise)
  double any = 0;        // any of these (a slope's replicate may count under several, at different L)
};

// A τ in tokens with its interval; lo may be 0 and hi +∞ (not bounded by the grid).
struct TauEstimate {
  double value = 0;                // NaN: not located (`note` says why; [at_least, at_most] bounds it)
  double at_least = 0, at_most = 0;  // = value when located
  double lo = 0, hi = 0;
  Censoring censored;
  std::string note;
};

struct TauLawRow {
  int64_t L = 0, factor = 0;
  double best_grid_tau = 0;  // the lowest seed mean
  TauEstimate tau_star;
  std::vector<std::pair<double, double>> replicate_log_span;  // each replicate's ln τ* span (lo = hi when located)
};

struct TauLawSlope {
  int64_t factor = 0;
  double k = 0;                  // NaN: τ* not located at some L (or one L)
  double at_least = 0, at_most = 0;  // bounds on k from the censored τ*; = k when located
  double lo = 0, hi = 0;         // the interval over all replicates; ±∞ where not bounded
  Censoring censored;            // replicates with τ* not located at some L, by cause
  std::string note;
};

struct TauLaw {
  TauLawOptions options;
  int seeds = 0;                // the fewest seeds of any L
  int from_eval = 0, from_analysis = 0;  // loss values by source
  std::vector<std::string> mixed;  // (L, context) whose losses mix both sources
  std::vector<TauLawRow> rows;  // by L, then factor
  std::vector<TauLawSlope> slopes;
  std::map<int64_t, TauEstimate> breakdown;  // by L
};

// The curves of a run set (done runs; rows attention.tau × train.context × train.seed), each loss
// from the run's /analysis at that context where `harness analyse` wrote one, else its last /eval.
// At each L only the τ with every seed any τ of that L has are kept, and only the L with 3 or more
// such τ and 2 or more seeds; what is left out is said. Throws harness::InputError when no L is left.
TauLawCurves tau_law_curves(const RunSet& set);

// The per-seed curves as CSV, one row per value: L,factor,tau,seed,loss,source (eval|analysis);
// exact (shortest round-trip digits), so that reading it back gives the same law.
std::string tau_law_curves_csv(const std::vector<TauLawCurve>& curves);
// Reads such a CSV (from `path`, for messages) with the same rules as tau_law_curves. Throws
// harness::InputError naming the file and line when malformed or when no L is left.
TauLawCurves parse_tau_law_curves_csv(const std::string& text, const std::string& path);

// Throws std::invalid_argument for malformed curves.
TauLaw tau_law(const std::vector<TauLawCurve>& curves, const TauLawOptions& options = {});

// The tables in Markdown, then the law in the words its intervals allow.
std::string format_tau_law(const TauLaw& law);
// One row per (L, factor): τ* with its bounds and interval, the shares of censored replicates by
// cause, and the breakdown τ with its interval (header in tau_law.cpp).
std::string tau_law_csv(const TauLaw& law);

// τ* of one group of runs against another's at the same L and validation context (`harness tau law
// --by KEY`: e.g. the same L trained with two batch sizes). Different runs, so the two bootstraps
// are independent: replicate r of each is paired only by its index, and the ratio's span in that
// replicate is [lo_a / hi_b, hi_a / lo_b] of their τ* spans; its interval the quantiles over all
// replicates as for τ* (law.h above), 0 or ∞ where a grid does not bound it.
struct TauStarRatio {
  int64_t L = 0, factor = 0;
  std::string a, b;                  // the groups' names
  double ratio = 0;                  // τ*_a / τ*_b; NaN when either is not located
  double at_least = 0, at_most = 0;  // bounds from the censored point estimates; = ratio when located
  double lo = 0, hi = 0;
};
// Throws std::invalid_argument when the two laws were bootstrapped with different replicate counts.
std::vector<TauStarRatio> compare_tau_star(const TauLaw& a, const std::string& name_a, const TauLaw& b,
                                           const std::string& name_b);
// A Markdown table, each ratio with its interval and what the interval allows one to say.
std::string format_tau_star_ratios(const std::vector<TauStarRatio>& ratios, double level);
std::string tau_star_ratios_csv(const std::vector<TauStarRatio>& ratios);

// ---- the fits, exposed for tests ---------------------------------------------------------------

enum class TauStarOutcome { kLocated, kLowEdge, kHighEdge, kDownward, kOutside };

struct TauStarFit {
  TauStarOutcome outcome = TauStarOutcome::kLocated;
  double log_tau = 0;               // the vertex (kLocated), else NaN
  double log_lo = 0, log_hi = 0;    // = log_tau when located; else the censored span (ln τ_{b−1}, ln τ_{b+1}), ±∞ beyond the grid
  size_t best = 0, first = 0, last = 0;  // the argmin and the fitted points' span (grid indices)
};

// τ* of the seed means `mean` (per τ of `tau`, ascending), as the header says.
TauStarFit fit_tau_star(const std::vector<double>& tau, const std::vector<double>& mean);
// ln τ where `rise` first reaches `threshold`, scanning up the grid from its lowest point (linear
// in ln τ between grid points); +∞ when it never does, −∞ when it has already at its lowest point.
double breakdown_log_tau(const std::vector<double>& tau, const std::vector<double>& rise, double threshold);
// Bounds on the least-squares slope of y on x when each y_i is only known to lie in [lo_i, hi_i]
// (equal where known; ±∞ allowed): {min, max} of the slope over those boxes.
std::pair<double, double> slope_bounds(const std::vector<double>& x, const std::vector<double>& lo,
                                       const std::vector<double>& hi);

}  // namespace analysis
