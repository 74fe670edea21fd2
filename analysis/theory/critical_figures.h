// Figures and tables of a critical-scaling file (critical_scaling_file.h), as CSV + gnuplot
// (analysis/export/plot.h). What `harness export curves FILE --out DIR` calls for files whose kind is
// "critical-scaling", and `harness theory critical --figures DIR`.
//
//   critical_lambda_n<n>_d<d>.{gp,svg,png}  heatmap of λ over (ρ, γ), log γ, with γ = 1/(1−ρ),
//                                          1/(1−c_in) and the measured γ̂_c
//   critical_eta_n<n>_d<d>.{gp,svg,png}     the same for η
//   critical_n<n>_d<d>.csv                  the data of both heatmaps (every grid point)
//   critical_gamma_c_n<n>.{csv,gp,svg,png}  γ̂_c against ρ for every d, with both theory curves
//   critical_causal_n<n>_d<d>.{csv,gp,...}  fraction of causal rows per phase against γ(1−ρ) at the
//                                          ρ nearest ½, per-row ln(i+1) vs global ln T scaling
//   critical_trained.{csv,gp,svg,png}       trained LogN heads (γ_eff against c_k) on the theory
//                                          curve, when the file has /trained runs
//   critical_gamma_c.md                     the γ̂_c table (markdown)
#pragma once

#include <string>
#include <vector>

#include "analysis/theory/critical_scaling.h"

namespace analysis {

struct CriticalFigures {
  std::vector<std::string> files;    // every file written, in order
  std::vector<std::string> notices;  // gnuplot missing or failed (the CSVs and scripts are written)
  std::string gamma_c_table;         // markdown, as written to critical_gamma_c.md
};

// Reads `h5_path` and writes the figures above into `out_dir` (created). Throws
// std::runtime_error for a file that is not a critical-scaling file.
CriticalFigures export_critical_scaling_figures(const std::string& h5_path,
                                                const std::string& out_dir);

// γ̂_c against 1/(1 − ρ) and 1/(1 − c_in): one markdown table per d, a row per ρ, columns per n.
// γ̂_c found beyond the γ grid is marked *, never reached: "—".
std::string format_gamma_c_table(const CriticalScalingResult& result);

}  // namespace analysis
