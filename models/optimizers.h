// All optimiser state of one training run: the GPT's parameters split into groups, each with its
// own base learning rate, stepped together and saved/loaded together (bit-exact resume).
//
//   group    parameters                                          "muon"          "adamw"
//   hidden   2-D weights in the blocks (attn q/k/v/o, mlp fc/proj)  Muon            AdamW
//   embed    embed.weight                                        Adam            AdamW
//   head     head.weight                                         Adam            AdamW
//   scalar   everything else: the attention method's learned      Adam            AdamW
//            parameters (blocks.<i>.attn.core.*, e.g. logn_scale)
//            and any 0-D/1-D parameter
//
// weight_decay (decoupled, p ← p·(1 − lr·wd)) applies to the hidden group only.
#pragma once

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/gpt.h"
#include "models/muon.h"

namespace models {

// Defaults for the CPU-scale model (2–4 layers, d_model 128, byte-level, context 64, batch 32).
// The paper's 162M-model values are lr_embed 0.3, lr_hidden 0.02 (Muon), lr_head = lr_scalar
// 0.002, betas (0.9, 0.95), and they carry over except the head: its lr is 4× the paper's.
// Experiment (200 steps, batch 32 × 64 bytes of English licence text, constant-cooldown 0.4,
// 2 layers, seed 0; validation loss in nats/byte on held-out text):
//   si+p-rope   muon head 0.002: 1.593   head 0.008: 1.550   head 0.02: 1.566
//               muon lr_hidden 0.04 (head 0.008): 1.576
//               adamw (head 0.008) lr_hidden 0.002: 1.739   0.004: 1.734   0.008: 1.868
//   logn+p-rope muon, head 0.008, lr_scalar 0.002: 1.554   0.008: 1.571   0.03: 1.610
//   with the positional-free placeholder attention (2 layers unless noted):
//     muon lr_hidden 0.01 / 0.02 / 0.04 / 0.08: 2.350 / 2.317 / 2.360 / 2.408
//     lr_embed 0.03 / 0.1 / 0.3 / 1.0: 2.343 / 2.298 / 2.317 / 2.292
//     lr_head 0.0005 / 0.002 / 0.008 / 0.02: 2.551 / 2.317 / 2.226 / 2.260;  4 layers 0.002 → 2.123,
//     0.008 → 1.948;  seed 1: 2.262 → 2.183
//     eps 1e-8 vs 1e-10: 2.318 vs 2.317;  standard N(0, 0.02) init of head/o/proj instead of zero:
//     2.283 (head 0.002) and 2.261 (head 0.008) vs 2.226 zero-init; grad clip 1.0: 2.227 (same).
// The zero-initialised head learns slowly at 0.002 over a few hundred steps, hence 0.008.
struct OptimOptions {
  std::string name = "muon";  // muon | adamw   (see optimizer_names())
  double lr_hidden = 0.02;    // Muon lr for the hidden matrices (adamw: its AdamW lr)
  double lr_embed = 0.3;
  double lr_head = 0.008;
  double lr_scalar = 0.002;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-10;
  double weight_decay = 0.0;  // hidden group only
  double momentum = 0.95;     // Muon
};

// Recommended defaults for an optimiser name: for "adamw", lr_hidden = 0.003 (an AdamW learning
// rate; Muon's 0.02 is far too large for Adam on matrices, see above); everything else as
// OptimOptions{}.
OptimOptions default_optim_options(const std::string& name);

std::vector<std::string> optimizer_names();  // {"muon", "adamw"}
// Throws std::invalid_argument (listing the valid names) on an unknown name, and on negative
// learning rates / weight decay, betas or momentum outside [0, 1), eps <= 0.
void validate(const OptimOptions& options);

enum class ParamGroup : int { kHidden = 0, kEmbed = 1, kHead = 2, kScalar = 3 };
constexpr int kNumParamGroups = 4;
const char* param_group_name(ParamGroup g);  // "hidden", "embed", "head", "scalar"

// The group a GPT parameter (by its named_parameters() name) belongs to, as in the table above.
ParamGroup classify_parameter(const std::string& name, const torch::Tensor& param);

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-10;
  double weight_decay = 0.0;  // decoupled (AdamW); 0 = plain Adam
};

// Adam / AdamW over one parameter group (bias-corrected; the state is the two moments and t):
//   m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//   p ← p·(1 − lr·wd) − lr · (m/(1−β1^t)) / (sqrt(v/(1−β2^t)) + eps)
class Adam {
 public:
  Adam(std::vector<torch::Tensor> params, AdamOptions options);

  void step(double lr_factor = 1.0);
  void zero_grad();

  void save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  void load(torch::serialize::InputArchive& archive, const std::string& prefix);

  const std::vector<torch::Tensor>& params() const { return params_; }
  AdamOptions& options() { return options_; }
  const AdamOptions& options() const { return options_; }
  int64_t steps() const { return steps_; }

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;
  AdamOptions options_;
  int64_t steps_ = 0;
};

class Optimizers {
 public:
  // Takes every parameter of `model` that requires grad; throws std::invalid_argument on bad
  // options. The model must outlive this object only in the sense that the parameter tensors
  // are shared (loading a model checkpoint with Module::load keeps them shared).
  Optimizers(GPT& model, OptimOptions options);

  void step();
  void zero_grad();  // sets every gradient to none (undefined), as PyTorch's set_to_none=True

  // Multiplies every group's base lr (the schedule's factor); applies from the next step().
  void set_lr_factor(double f);
  double lr_factor() const { return lr_factor_; }

  // Optimiser state only (not the model's parameters) under keys "optim_*". Loading checks the
  // optimiser name and every group's parameter count and shapes.
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);

  const OptimOptions& options() const { return options_; }
  // The parameters in each group, in named_parameters() order.
  const std::vector<torch::Tensor>& group(ParamGroup g) const;
  const std::vector<std::string>& group_names(ParamGroup g) const;
  double base_lr(ParamGroup g) const;
  int64_t steps() const { return steps_; }

 private:
  OptimOptions options_;
  double lr_factor_ = 1.0;
  int64_t steps_ = 0;
  std::array<std::vector<torch::Tensor>, kNumParamGroups> groups_;
  std::array<std::vector<std::string>, kNumParamGroups> names_;
  std::unique_ptr<Muon> muon_;                         // hidden group under "muon"
  std::array<std::unique_ptr<Adam>, kNumParamGroups> adam_;  // the other groups (all under "adamw")
};

// Global L2 norm of all gradients of `model` (computed in float64), returned before clipping;
// if max_norm > 0 and the norm exceeds it, every gradient is scaled by max_norm / (norm + 1e-6).
double clip_grad_norm(GPT& model, double max_norm);

}  // namespace models
