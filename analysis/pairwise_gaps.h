// `harness export pairs`: which differences between the arms of a sweep (methods, τ values) the
// data resolve, at each validation context — every pair, not only against a column's best.
//
// Each pair's gap is the seed-paired gap of seed_paired_gap.h (seeds paired, windows clustered by
// document, Student's t at the smaller degrees of freedom), on the seeds both arms have. With m
// pairs at a context, some intervals exclude zero by chance alone (m · 5% at 95%), so "resolved"
// is decided by Holm's step-down procedure over the context's pairs: the family-wise error rate
// stays at 1 − level. Each pair's own interval is at `level` (not simultaneous) and printed beside.
//
// Beside each gap, two things a preregistration may name (sweeps/si-vs-kerple-tuned.yaml): the
// sign test over the seed pairs (exact two-sided binomial p on the signs of the per-seed gaps,
// ties dropped and counted), and each arm's seed-to-seed standard deviation of its runs' mean loss
// with a 90% interval (χ² on n − 1 df) and the ratio of the two with a 90% interval (F on n − 1,
// n − 1 df), on the seeds both arms have — an outcome, not a test. The F interval treats the two
// arms' seeds as independent samples; the same seed in both arms shares initial weights and data
// order, which can correlate them (then the interval is only approximate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/arm_grid.h"
#include "analysis/stats/exact_tests.h"

namespace analysis {

struct PairResult {
  size_t a = 0, b = 0;   // indices into PairTable::arms (a ranks before b)
  PairedGap gap;         // mean loss of a − mean loss of b, on the seeds both have
  double p = 1;          // two-sided p-value of gap = 0 (t at gap.df); 1 when not estimable
  int common_seeds = 0;    // seeds both arms have
  bool estimable = false;  // ≥ 2 seeds in common and a finite, non-zero standard error (zero: the
                           // two arms' runs scored every window alike, e.g. rope and rope+ntk at L)
  bool resolved = false;   // rejected by the table's family procedure (`PairTable::family`)
  double threshold = 0;    // the p-value the pair had to reach at its rank in the family (NaN: not tested)
  // The seed spread on the common seeds (NaN with fewer than 2): each arm's sd over seeds of its
  // runs' mean loss (nats/token) with its interval at kSpreadLevel, and sd_a / sd_b with its.
  double sd_a = 0, sd_b = 0, sd_ratio = 0;
  stats::Interval sd_a_ci, sd_b_ci, sd_ratio_ci;
};

// The level of the seed-spread intervals (fixed: what sweeps/si-vs-kerple-tuned.yaml registered).
constexpr double kSpreadLevel = 0.90;

struct PairTable {
  int64_t context = 0;
  std::vector<std::string> arms;  // ascending mean loss
  std::vector<double> means;      // each arm's mean loss over its seeds
  std::vector<int> seeds;         // each arm's number of runs
  std::vector<PairResult> pairs;  // every a < b
  int documents = 0;              // distinct documents among the windows
  bool documents_known = true;    // false: old run files, each window counted as its own document
  double level = 0.95;
  // How "resolved" was decided: Holm over this context's pairs at 1 − level, or a planned
  // comparison's family (every pair of every context) and criterion.
  std::string family;        // "Holm's procedure over the 15 pairs", ...
  double family_alpha = 0.05;  // its family-wise error rate
  int64_t train_context = 0;   // the arms' training context L when they all share one, else 0
};

// Holm's step-down: which of the p-values are rejected with family-wise error rate `alpha`.
std::vector<bool> holm_rejections(const std::vector<double>& p, double alpha);

// One context's table. Throws std::invalid_argument for level outside (0, 1).
PairTable pairwise_gaps(const ArmGrid& grid, double level = 0.95);

// A planned comparison's verdicts: every estimable pair of every table is one family, tested with
// `correction` ("bonferroni": each p against alpha / m; "holm": step-down) at family-wise error
// `alpha`; replaces the per-context Holm verdicts, thresholds and family of `tables`. Throws
// std::invalid_argument for another correction or alpha outside (0, 1).
// `multiples`, when not empty, restricts the family to the tables whose context is one of these
// multiples of their training context (e.g. {4, 16}: 4L and 16L; a table whose arms do not share
// one L is left out); the other tables' pairs are not tested (threshold NaN, not resolved) and
// their family says so.
void apply_planned_family(std::vector<PairTable>& tables, const std::string& correction, double alpha,
                          const std::vector<int64_t>& multiples = {});

// Markdown: per context a matrix (row − column, arms by mean loss; a resolved gap plain, an
// unresolved one in parentheses), the list of the unresolved pairs with their intervals, and a
// table of each estimable pair's sign test and seed spread.
// `train_context` labels contexts as multiples of L.
std::string format_pairs_markdown(const std::vector<PairTable>& tables, int64_t train_context);
// CSV, one row per pair: context, a, b, gap, se, df, lo, hi, p, resolved, seeds, threshold, family,
// then (appended; docs/export.md) a_higher, b_higher, tied, sign_p, sd_a, sd_a_lo90, sd_a_hi90, sd_b,
// sd_b_lo90, sd_b_hi90, sd_ratio, sd_ratio_lo90, sd_ratio_hi90.
std::string format_pairs_csv(const std::vector<PairTable>& tables);

}  // namespace analysis
