// The law of the best τ against the training context L (`harness tau law`, docs/tau-vs-context.md):
// runs of one method on a τ grid at several L with several seeds, validated at multiples of L.
//
//  * τ* per L and context: the minimum of the quadratic in ln τ through the seed-mean losses at the
//    grid's best τ and up to two grid points either side. A best τ at the end of the grid has no τ*
//    (the grid does not bracket it); a parabola opening downward has none either.
//  * Its interval: a parametric bootstrap of the seed means. Seeds are paired across τ (same initial
//    weights and data order), so each loss is split as y_ks = μ_k + β_s + e_ks; a seed's offset β_s
//    moves every τ alike and cannot move the minimum, so a replicate redraws only e: m*_k = m_k +
//    N(0, σ*²/n), σ*² = σ̂²·χ²_df/df with σ̂² the two-way residual variance on df = (K − 1)(n − 1)
//    degrees of freedom. Each replicate refits from its own best grid point; one without an
//    interior minimum counts as τ* = 0 or ∞ (beyond the grid's end) and widens the interval.
//  * The slope k of ln τ* on ln L (least squares over the L), per context, with the percentile
//    interval of the same replicates (independent between L: different runs).
//  * The breakdown τ per L: the smallest τ above the one extrapolating best where the loss at
//    `breakdown_factor`·L rises `breakdown_rise` above the loss at L, linear in ln τ between grid
//    points; bootstrapped as above on the per-seed rises.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/run_set.h"

namespace analysis {

// One training context: τ ascending, the seeds every τ has, and each context factor's losses.
struct TauLawCurve {
  int64_t L = 0;
  std::vector<double> tau;     // tokens, ascending
  std::vector<int64_t> seeds;  // ascending
  std::map<int64_t, std::vector<std::vector<double>>> loss;  // factor T / L → [τ][seed]
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

// A τ in tokens with its interval; lo may be 0 and hi +∞ (beyond the grid's ends).
struct TauEstimate {
  double value = 0, lo = 0, hi = 0;  // value NaN: none (`note` says why)
  double unbracketed = 0;            // fraction of replicates beyond the grid's ends
  std::string note;
};

struct TauLawRow {
  int64_t L = 0, factor = 0;
  double best_grid_tau = 0;  // the lowest seed mean
  TauEstimate tau_star;
};

struct TauLawSlope {
  int64_t factor = 0;
  double k = 0, lo = 0, hi = 0;  // k NaN: no τ* at some L
  double unbracketed = 0;        // fraction of replicates with τ* beyond the grid at some L
  std::string note;
};

struct TauLaw {
  TauLawOptions options;
  int seeds = 0;
  std::vector<TauLawRow> rows;  // by L, then factor
  std::vector<TauLawSlope> slopes;
  std::map<int64_t, TauEstimate> breakdown;  // by L
};

// The curves of a run set (done runs; rows attention.tau × train.context × train.seed). At each L
// only the τ with every seed any τ of that L has are kept, and only the L with 3 or more such τ
// and 2 or more seeds; what is left out is said. Throws harness::InputError when no L is left.
TauLawCurves tau_law_curves(const RunSet& set);

// Throws std::invalid_argument for malformed curves.
TauLaw tau_law(const std::vector<TauLawCurve>& curves, const TauLawOptions& options = {});

// The tables in Markdown, then the law in the words its intervals allow.
std::string format_tau_law(const TauLaw& law);
// One row per (L, factor): L,factor,best_grid_tau,tau_star,lo,hi,unbracketed,breakdown,b_lo,b_hi.
std::string tau_law_csv(const TauLaw& law);

// ---- the fits, exposed for tests ---------------------------------------------------------------

// ln τ* of the quadratic through `mean` (per τ) around its lowest point; −∞ / +∞ when that point
// ends the grid, NaN when the parabola opens downward.
double quadratic_log_tau_star(const std::vector<double>& tau, const std::vector<double>& mean);
// ln τ where `rise` first reaches `threshold`, scanning up the grid from its lowest point (linear
// in ln τ between grid points); +∞ when it never does, −∞ when it has already at its lowest point.
double breakdown_log_tau(const std::vector<double>& tau, const std::vector<double>& rise, double threshold);

}  // namespace analysis
