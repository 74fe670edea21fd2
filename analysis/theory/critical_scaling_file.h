// The critical-scaling results as one HDF5 file (default runs/theory/critical-scaling.h5), written
// atomically (results/hdf5_io.h) and readable with h5py alone. Every dataset has `units` and
// `description` attributes. Axes: N = len(n), D = len(d), R = len(rho), G = γ points per ρ.
//
//   /                        attrs kind = "critical-scaling" (what exporters dispatch on),
//                            format_version, paper, description, source, config_yaml, seed, trials,
//                            rows, hutchinson_rows, hutchinson_probes, causal_rows, precision,
//                            hutchinson_precision, threads, seconds, git_revision,
//                            libtorch_version
//   /grid/n (N) int64 · /grid/d (D) int64 · /grid/rho (R) · /grid/gamma (R, G)
//   /simulation/c_in (N, D, R)
//   /simulation/{c_out, c_out_se, lambda, self_weight, self_weight_se, entropy, entropy_se,
//                eta, eta_se} (N, D, R, G)
//   /oracle/{c_out, self_weight, lambda} (N, R, G)            exactly equiangular tokens, c_in = ρ
//   /critical/gamma_c_hat (N, D, R) · /critical/in_grid (N, D, R) int64
//   /critical/gamma_c_rho (R) = 1/(1−ρ) · /critical/gamma_c_c_in (N, D, R) = 1/(1−c_in)
//   /causal/fraction (N, D, R, G, 2, 3) · /causal/self_weight (N, D, R, G, 2)
//                            attrs scalings, phases, collapse_below, identity_above
//   /trained/<run name>/{scale, gamma_eff, key_cosine, key_cosine_rotated, gamma_c,
//                        gamma_c_rotated} (layers, heads)       one group per --run
//                            attrs run_dir, name, method, train_context, context, windows,
//                            head_dim, score_scale
#pragma once

#include <string>
#include <vector>

#include "analysis/theory/critical_scaling.h"
#include "analysis/critical_trained.h"

namespace analysis {

inline constexpr const char* kCriticalScalingKind = "critical-scaling";

void write_critical_scaling_file(const std::string& path, const CriticalScalingResult& result,
                                 const std::vector<TrainedLognReport>& trained = {});

struct CriticalScalingFile {
  CriticalScalingResult result;  // config: n, d, rho, trials, seed, rows, thresholds filled in
  std::vector<TrainedLognReport> trained;
};

// Reads a file written by write_critical_scaling_file. Throws std::runtime_error naming the path
// (not an HDF5 file, kind is not "critical-scaling", a dataset missing or of the wrong shape).
CriticalScalingFile read_critical_scaling_file(const std::string& path);

}  // namespace analysis
