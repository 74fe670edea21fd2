// Muon (Keller Jordan, as in modded-nanogpt): SGD-momentum with Nesterov whose update is replaced
// by its nearest semi-orthogonal matrix, approximated by 5 quintic Newton–Schulz iterations.
// Used only for the 2-D hidden weights (attention q/k/v/o and MLP fc/proj).
#pragma once

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/collectives.h"

namespace models {

// Quintic coefficients of modded-nanogpt's zeropower_via_newtonschulz5: they push every singular
// value of the normalised input into roughly [0.5, 1.5] (not exactly 1) in 5 steps.
constexpr double kNewtonSchulzA = 3.4445;
constexpr double kNewtonSchulzB = -4.7750;
constexpr double kNewtonSchulzC = 2.0315;

// Approximate U·Vᵀ of G = U·S·Vᵀ (G: 2-D). X ← G/(‖G‖_F + 1e-7), transposed so that
// rows ≤ cols; then `steps` times: A = X·Xᵀ, X ← a·X + (b·A + c·A·A)·X; transposed back.
// Computed in float32 on CPU (bfloat16 on CUDA, like the reference); returns G's dtype.
torch::Tensor newton_schulz5(const torch::Tensor& G, int64_t steps = 5);

// The momentum part of a Muon step, in place on buf (modded-nanogpt's lerp form):
//   buf ← momentum·buf + (1 − momentum)·grad
//   returns (1 − momentum)·grad + momentum·buf   (nesterov)   or   buf   (plain)
torch::Tensor muon_momentum(const torch::Tensor& grad, torch::Tensor& buf, double momentum,
                            bool nesterov);

// Shape-dependent lr multiplier, max(1, rows/cols)^0.5 (modded-nanogpt).
double muon_shape_scale(int64_t rows, int64_t cols);

struct MuonOptions {
  double lr = 0.02;
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  double weight_decay = 0.0;  // decoupled: p ← p·(1 − lr·wd) before the update
};

// One Muon parameter group. Step: for each 2-D parameter p with gradient g,
//   u = newton_schulz5(muon_momentum(g, buf, momentum, nesterov))
//   p ← p·(1 − lr_eff·wd) − lr_eff·muon_shape_scale(rows, cols)·u,   lr_eff = lr·lr_factor
// Data-parallel (a `group` of W ranks, gradients already averaged): every rank keeps every
// momentum buffer, each orthogonalises its share of the matrices (costliest first, to the
// least-loaded rank) and one all-gather hands every rank every update, as modded-nanogpt does.
class Muon {
 public:
  Muon(std::vector<torch::Tensor> params, MuonOptions options);

  void step(double lr_factor = 1.0, Collectives* group = nullptr);
  void zero_grad();

  // State (momentum buffers, step count) under keys "<prefix>_<i>_momentum", "<prefix>_steps".
  void save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  void load(torch::serialize::InputArchive& archive, const std::string& prefix);

  const std::vector<torch::Tensor>& params() const { return params_; }
  const std::vector<torch::Tensor>& momentum_buffers() const { return buffers_; }
  MuonOptions& options() { return options_; }
  const MuonOptions& options() const { return options_; }
  int64_t steps() const { return steps_; }

 private:
  void exchange_updates(std::vector<torch::Tensor>& updates, const std::vector<int>& owner,
                        Collectives& group) const;

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> buffers_;
  MuonOptions options_;
  int64_t steps_ = 0;
};

}  // namespace models
