// Critical attention scaling (Chen, Lin, Polyanskiy, Rigollet, arXiv 2510.05554): one attention
// step on unit tokens with logits scaled by β = γ·ln n collapses every token onto one direction
// below a critical γ_c = 1/(1 − ρ), keeps sparse, content-adaptive attention at γ_c, and becomes
// the identity above it (ρ = the tokens' mutual cosine). This module simulates that step, gives
// the closed-form oracle for exactly equiangular tokens, estimates γ̂_c, and runs the grid of
// `harness theory critical` (critical_scaling_config.h).
//
// The model (the paper's simplified attention: Q = K = V = I, no mask, no 1/√d):
//   tokens  x_i = √ρ·z_0 + √(1−ρ)·z_i,  z ~ N(0, I_d), z_0 rescaled to norm √d;  y_i = x_i/|x_i|
//   step    A = softmax_row(β·Y·Yᵀ),  y'_i = N(Σ_j A_ij·y_j),  N(u) = u/|u|
// Measured per (n, d, ρ, γ):
//   c_in      mean pairwise input cosine (exact, all n(n−1) pairs)
//   c_out     mean pairwise output cosine among the sampled query rows;
//   λ         arccos(c_out)/arccos(c_in of the same rows) (0: collapse, 1: identity): both cosines
//             over the same tokens, so that λ = 1 exactly when the step is the identity
//   A_ii      mean self-weight;  entropy: mean row entropy −Σ_j A_ij ln A_ij / ln n ∈ [0, 1]
//   η         ‖∂Y'/∂Y‖²_F/(n·d): the Jacobian of the step as a map of the unit tokens Y (n, d) in
//             ambient coordinates. Identity phase: η → (d−1)/d (the normalisation's projection);
//             γ = 0: η = (d−1)/(n·d·|ȳ|²) exactly, ȳ = mean token (gradients vanish as 1/n).
//   γ̂_c       the γ where the mean A_ii crosses ½ (the oracle's A_ii at 1/(1−ρ) is n/(2n−1) ≈ ½)
//
// Sampling. The statistics use the first `rows` query rows against all n keys: the tokens are
// i.i.d., so any fixed set of rows is a uniform sample. Each statistic comes with a standard
// error of that row sampling (conditional on the tokens; 0 when rows = n): sd/√m·√(1−(m−1)/(n−1))
// for the per-row means, and the Hoeffding form 2·sd(r_i)/√m·√(…) for the pairwise c_out, where
// r_i is row i's mean cosine to the other sampled rows. η's error is the spread over probes, each
// of which draws both its own rows and its own random signs (so it includes the row sampling).
#pragma once

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/theory/critical_scaling_config.h"

namespace analysis {

// ---- tokens -----------------------------------------------------------------------------------

// The correlated token model above: y (n, d), unit rows, in `dtype`.
torch::Tensor correlated_tokens(int64_t n, int64_t d, double rho, at::Generator& generator,
                                torch::ScalarType dtype = torch::kFloat64);
// n unit vectors in n + 1 dimensions with every pairwise cosine exactly ρ:
// y_i = √ρ·e_0 + √(1−ρ)·e_{i+1}, (n, n + 1).
torch::Tensor equiangular_tokens(int64_t n, double rho, torch::ScalarType dtype = torch::kFloat64);
// Mean of y_i·y_j over all ordered pairs i ≠ j of the rows of `y` (n, d), exactly:
// (|Σ_i y_i|² − Σ_i |y_i|²) / (n(n−1)).
double mean_pairwise_cosine(const torch::Tensor& y);

// ---- the closed-form oracle (exactly equiangular tokens) ---------------------------------------

struct EquiangularOracle {
  double self_weight;  // a = 1/(1 + (n−1)·n^(−γ(1−ρ)))
  double c_out;        // (c²ρ + 2cb·S1 + b²·S2)/(c² + 2cb·S1 + b²·S2)
};
// b = (1−a)/(n−1), c = a − b, S1 = 1 + (n−1)ρ, S2 = n + n(n−1)ρ. As n → ∞, c_out → 1 below
// γ_c = 1/(1−ρ), 4ρ/(1+3ρ) at γ_c and ρ above it.
EquiangularOracle equiangular_oracle(int64_t n, double rho, double gamma);

// λ = arccos(c_out)/arccos(c_in) (c_out clamped to [−1, 1]).
double angle_ratio(double c_out, double c_in);

// ---- one attention step -------------------------------------------------------------------------

// y'_r = N(Σ_j softmax_j(β·y_r·y_j)·y_j) for the query rows `rows` (int64 indices into y): (m, d).
// Differentiable in y (queries, keys and values all are y).
torch::Tensor attention_step_rows(const torch::Tensor& y, const torch::Tensor& rows, double beta);

struct StepStatistics {
  double c_out = 0, c_out_se = 0;              // mean pairwise output cosine (over sampled rows)
  double self_weight = 0, self_weight_se = 0;  // mean A_ii
  double entropy = 0, entropy_se = 0;          // mean row entropy / ln n
};

// One token set and its first `rows` query rows: the cosines (rows, n) are computed once and every
// β reuses them. Call under torch::NoGradGuard.
class StepSampler {
 public:
  StepSampler(torch::Tensor y, int64_t rows);
  StepStatistics statistics(double beta) const;
  // The mean pairwise input cosine among the sampled rows: λ's denominator (c_out is over them).
  double rows_input_cosine() const { return rows_c_in_; }
  double mean_self_weight(double beta) const;  // A_ii alone (no A·Y): for the γ̂_c search
  const torch::Tensor& tokens() const { return y_; }
  int64_t n() const { return y_.size(0); }
  int64_t rows() const { return cosines_.size(0); }

 private:
  torch::Tensor y_;        // (n, d)
  torch::Tensor cosines_;  // (rows, n): y_r·y_j
  double rows_c_in_ = 0;
};

struct Estimate {
  double value = 0, se = 0;
};

// η = ‖∂Y'/∂Y‖²_F/(n·d) by Hutchinson's estimator on vector–Jacobian products (reverse mode,
// torch::autograd::grad, so it needs no forward-mode AD): for Rademacher v, E‖Jᵀv‖² = ‖J‖²_F.
// Probe p takes the `rows` output rows starting at p·rows (mod n), draws v (rows, d) and scores
// ‖J_Rᵀv‖²/(rows·d), an unbiased estimate of η; the result is the mean over probes ± its standard
// error. Runs with autograd on whatever the caller's grad mode.
Estimate jacobian_norm_hutchinson(const torch::Tensor& y, double beta, int64_t rows,
                                  int64_t probes, at::Generator& generator);

// ---- the critical γ -----------------------------------------------------------------------------

struct CriticalGamma {
  double gamma = 0;        // NaN when the mean A_ii never reaches ½ (searched up to 2^20 × the grid)
  bool bracketed_in_grid = false;  // whether the crossing lies inside the grid (else extrapolated)
};
// The γ where the mean self-weight, averaged over `samplers` (one per trial, all with the same n),
// crosses ½. Bracketed by the grid (`grid_gamma` increasing, `grid_self_weight` its measured
// values), then refined on the same tokens by regula falsi (Illinois) on logit(A_ii), which is
// linear in γ for equiangular tokens, to a relative 1e-9: independent of the grid's spacing.
// A_ii is increasing in γ for any fixed tokens (every other logit falls behind the diagonal one).
CriticalGamma critical_gamma(const std::vector<const StepSampler*>& samplers,
                             const std::vector<double>& grid_gamma,
                             const std::vector<double>& grid_self_weight);

// ---- the causal variant ------------------------------------------------------------------------

enum CausalScaling { kPerRowScaling = 0, kGlobalScaling = 1 };  // β_i = γ·ln(i+1) | γ·ln T
enum CausalPhase { kCollapse = 0, kCritical = 1, kIdentity = 2 };

struct CausalPhases {
  double fraction[2][3] = {};  // [scaling][phase]: fraction of the sampled rows
  double self_weight[2] = {};  // [scaling]: mean A_ii
};

// Causal attention on a token set: row i sees keys j ≤ i. `rows` positions evenly spread over
// [0, T) (stratified: position matters here), i_k = floor((k + ½)·T/rows). A row's phase is read
// from its self-weight: A_ii < collapse_below: collapse; > identity_above: identity; else critical.
class CausalSampler {
 public:
  CausalSampler(torch::Tensor y, int64_t rows);
  CausalPhases phases(double gamma, double collapse_below, double identity_above) const;

 private:
  int64_t T_;
  torch::Tensor positions_;  // (rows) int64
  torch::Tensor cosines_;    // (rows, T), −inf where j > i (masked)
  torch::Tensor log_n_;      // (rows, 1): ln(i + 1)
};

// ---- the grid -----------------------------------------------------------------------------------

struct CriticalScalingResult {
  CriticalScalingConfig config;
  size_t N = 0, D = 0, R = 0, G = 0;  // sizes of the n, d, ρ and γ axes
  std::vector<double> gamma;          // (R, G)
  std::vector<double> c_in;           // (N, D, R)
  // (N, D, R, G):
  std::vector<double> c_out, c_out_se, lambda, self_weight, self_weight_se, entropy, entropy_se,
      eta, eta_se;
  std::vector<double> oracle_c_out, oracle_self_weight, oracle_lambda;  // (N, R, G), c_in = ρ
  std::vector<double> gamma_c_hat;            // (N, D, R)
  std::vector<int64_t> gamma_c_in_grid;       // (N, D, R) 1 when bracketed by the grid
  std::vector<double> causal_fraction;        // (N, D, R, G, 2 scalings, 3 phases)
  std::vector<double> causal_self_weight;     // (N, D, R, G, 2 scalings)
  double seconds = 0;                         // wall time of the grid
  int threads = 0;

  size_t cell(size_t n, size_t d, size_t r) const { return (n * D + d) * R + r; }
  size_t at(size_t n, size_t d, size_t r, size_t g) const { return cell(n, d, r) * G + g; }
  size_t oracle_at(size_t n, size_t r, size_t g) const { return (n * R + r) * G + g; }
};

struct GridProgress {
  size_t done = 0, total = 0;  // (n, d, ρ) cells
  int64_t n = 0, d = 0;
  double rho = 0, c_in = 0, gamma_c_hat = 0;
  double seconds = 0;          // since the grid started
  // Work done and in all, in units where a cell costs n·(d + 64) (measured on this machine: the
  // matmuls grow with n·d, the softmaxes with n alone), for a time-left estimate.
  double work_done = 0, work_total = 0;
};

// Runs every (n, d, ρ) cell of the grid (deterministic: cell (n, d, ρ, trial) draws from its own
// seed, whatever else is in the grid, so a cell of the quick grid equals that cell of any other). Sets torch's thread count to config.threads (0: every
// core). `progress` is called after each cell.
CriticalScalingResult run_critical_scaling(
    const CriticalScalingConfig& config,
    const std::function<void(const GridProgress&)>& progress = nullptr);

// The seed of one random stream of a cell: splitmix64 of (seed, n, d, the bits of ρ, trial,
// stream); stream 0 draws the tokens, stream 1 + (the bits of γ) the Hutchinson probes at γ.
uint64_t cell_seed(uint64_t seed, int64_t n, int64_t d, double rho, int64_t trial, uint64_t stream);

}  // namespace analysis
