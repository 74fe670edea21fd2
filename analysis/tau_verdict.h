// The verdict of `harness tau check`: at each validation context, how far the config's τ is from
// the best τ of the grid, in standard errors of the gap. With two or more seeds a cell's
// uncertainty is its standard error over seeds, and two cells combine in quadrature (independent
// runs; the shared validation windows cancel in the gap). With one seed the gap's standard error
// is over validation windows, paired: sd of the per-window differences / √windows, since both
// runs are scored on the same windows (in quadrature only when the run files lack per-window
// losses or their windows differ: their fingerprints, harness/data/windows.h, are not equal).
// "Within" means a gap of at most `k_max` such standard errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/export/export_table.h"

namespace analysis {

struct TauVerdict {
  int64_t context = 0;          // T
  std::string tau, best_tau;    // as written in the sweep
  double loss = 0, loss_u = 0;  // the config's τ: mean loss and its uncertainty
  double best_loss = 0, best_u = 0;
  double gap = 0;               // loss − best_loss (>= 0)
  double gap_se = 0;            // its standard error: paired over windows, or √(loss_u² + best_u²)
  double k = 0;                 // gap / gap_se; 0 when τ is the best
  bool within = true;           // k <= k_max
  std::string uncertainty;      // "seeds", "windows" or "paired windows"
};

// `table`: rows attention.tau, columns context (build_table with window_se). One verdict per
// column where the config's τ (`tau_text`) and another τ have cells. Throws harness::InputError
// when the table is not laid out so or `tau_text` is not a row.
std::vector<TauVerdict> tau_verdicts(const Table& table, const std::string& tau_text, double k_max = 2.0);

// "T = 64 (1L): τ = 0.16 is within 1.3 s.e. of the best (best τ = 0.48) ...", one line per verdict,
// then a one-line summary.
std::string format_verdicts(const std::vector<TauVerdict>& verdicts, int64_t train_context, double k_max = 2.0);

}  // namespace analysis
