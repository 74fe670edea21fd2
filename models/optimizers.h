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
#include "models/optim_options.h"

namespace models {

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

  // Data-parallel: the gradients are averaged over `group` before step(), which then shares
  // Muon's orthogonalisation among the ranks (muon.h); nullptr (the default): one process.
  void set_collectives(Collectives* group) { group_ = group; }

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
  Collectives* group_ = nullptr;
  std::unique_ptr<Muon> muon_;                         // hidden group under "muon"
  std::array<std::unique_ptr<Adam>, kNumParamGroups> adam_;  // the other groups (all under "adamw")
};

// Global L2 norm of all gradients of `model` (computed in float64), returned before clipping as a
// 0-dim float64 tensor on their device (reading it is the caller's choice: on a GPU a host
// synchronisation); if max_norm > 0, every gradient is scaled by min(1, max_norm / (norm + 1e-6)).
torch::Tensor clip_grad_norm(GPT& model, double max_norm);

}  // namespace models
