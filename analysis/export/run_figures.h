// The figures of finished runs, `harness export curves` on a sweep or run directory: validation
// loss against step and τ, attention entropy and recent mass against context (with the theory
// overlaid when given), mass per distance band, entropy per distance range, raw-score Q-Q plots.
// Series are groups of runs that differ only in the seed (mean ± standard error over seeds).
#pragma once

#include <vector>

#include "analysis/export/figure_writer.h"
#include "analysis/run_set.h"

namespace analysis {

// The runs of `set` that are done, with their records.
std::vector<const RunEntry*> done_runs(const RunSet& set);

void run_figures(const RunSet& set, const std::vector<const RunEntry*>& runs, const TheoryGroups& theory,
                 Writer& w);

}  // namespace analysis
