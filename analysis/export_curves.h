// `harness export curves`: the dispatch over the kinds of input, above both the run figures
// (analysis/export/) and the theory figures (analysis/theory/) it draws. The paper's figures as
// data (one CSV per figure, header row) and as pictures (gnuplot → SVG and PNG;
// analysis/export/plot.h), from a sweep file, a run or results directory, or a theory file:
//
//   runs (run_figures.h):
//           loss_vs_step_T<T>       validation loss against step, a line per run
//           loss_vs_tau             final loss against τ/L per context, error bars over seeds (Fig. 5);
//                                   `harness analyse`'s loss when every run has it
//           loss_vs_tau_tokens      the same against τ in tokens (runs trained at several L)
//           entropy_vs_context      attention entropy against T (Fig. 1), theory overlaid if given
//           recent_mass_vs_context  attention on the last 100 keys against T, theory overlaid
//           band_mass_T<T>          attention mass per distance band at the longest T
//           range_entropy_T<T>      entropy in [t, tΔ) against t at the longest T (Fig. 2)
//           qq_T<T>                 raw-score quantiles against normal ones (Appendix J; needs
//                                   `harness analyse`)
//   theory (analysis/theory/theory_figures.h):
//           theory_entropy_vs_context, theory_recent_mass_vs_context, theory_band_entropy,
//           theory_range_entropy_D<Δ> with the ln t and √(ln t) fits (Figs 2, 6), theory_lemma1
//   critical scaling (`harness theory critical`): the heatmaps of λ and η over (ρ, γ), γ̂_c
//           against ρ, the causal phases and the γ̂_c table (analysis/theory/critical_figures.h)
//
// Series are groups of runs that differ only in the seed (mean ± standard error over seeds).
#pragma once

#include <string>
#include <vector>

#include "analysis/export/figure_writer.h"

namespace analysis {

struct CurvesOptions {
  std::string out_dir;
  std::string theory;  // a `harness theory entropy` file to overlay on the runs' figures
};

// Throws harness::InputError when the input is none of the accepted kinds.
CurvesResult export_curves(const std::string& input, const CurvesOptions& options);

// The transforms of a `harness theory entropy` file, to overlay on the runs' figures (--theory).
// Throws harness::InputError naming `path` when it is not such a file.
TheoryGroups read_theory(const std::string& path);

// The file kind of an HDF5 results file: its root `kind` attribute ("theory-entropy", ...), or ""
// (run.h5 files and anything else).
std::string results_file_kind(const std::string& path);

}  // namespace analysis
