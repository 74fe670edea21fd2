// The figure of `harness tau check`: per context, each τ's loss above the grid's best (mean over
// seeds, with the seeds' t interval), so that 0.01 nats show; the config's τ as a dashed line; at
// 0, the best τ and the span of the τ not resolved from it. CSV beside it.
#pragma once

#include <string>
#include <vector>

#include "analysis/export/figure_writer.h"
#include "analysis/tau/verdict.h"

namespace analysis {

// Writes <dir>/tau_check.csv, tau_check_best.csv and the figure tau_check (gnuplot).
FigureFiles write_tau_check_figure(const std::string& dir, const std::vector<ContextRuns>& grid,
                                   const std::vector<TauVerdict>& verdicts, double own_tau, int64_t train_context);

}  // namespace analysis
