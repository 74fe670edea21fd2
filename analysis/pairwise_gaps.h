// `harness export pairs`: which differences between the arms of a sweep (methods, τ values) the
// data resolve, at each validation context — every pair, not only against a column's best.
//
// Each pair's gap is the seed-paired gap of seed_paired_gap.h (seeds paired, windows clustered by
// document, Student's t at the smaller degrees of freedom), on the seeds both arms have. With m
// pairs at a context, some intervals exclude zero by chance alone (m · 5% at 95%), so "resolved"
// is decided by Holm's step-down procedure over the context's pairs: the family-wise error rate
// stays at 1 − level. Each pair's own interval is at `level` (not simultaneous) and printed beside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/arm_grid.h"

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
};

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
};

// Holm's step-down: which of the p-values are rejected with family-wise error rate `alpha`.
std::vector<bool> holm_rejections(const std::vector<double>& p, double alpha);

// One context's table. Throws std::invalid_argument for level outside (0, 1).
PairTable pairwise_gaps(const ArmGrid& grid, double level = 0.95);

// A planned comparison's verdicts: every estimable pair of every table is one family, tested with
// `correction` ("bonferroni": each p against alpha / m; "holm": step-down) at family-wise error
// `alpha`; replaces the per-context Holm verdicts, thresholds and family of `tables`. Throws
// std::invalid_argument for another correction or alpha outside (0, 1).
void apply_planned_family(std::vector<PairTable>& tables, const std::string& correction, double alpha);

// Markdown: per context a matrix (row − column, arms by mean loss; a resolved gap plain, an
// unresolved one in parentheses) and the list of the unresolved pairs with their intervals.
// `train_context` labels contexts as multiples of L.
std::string format_pairs_markdown(const std::vector<PairTable>& tables, int64_t train_context);
// CSV, one row per pair: context, a, b, gap, se, df, lo, hi, p, resolved, seeds, threshold, family.
std::string format_pairs_csv(const std::vector<PairTable>& tables);

}  // namespace analysis
