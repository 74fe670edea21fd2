// The attention engine's public face: a method (positional encoding × logit transform) resolved
// from options, and the causal attention module the models call.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace attention {

// Everything that defines a method, with τ and bases already resolved to absolute values
// (the config layer resolves "L/400"-style values against the training context).
struct MethodOptions {
  std::string method = "si+p-rope";   // a preset name (see preset_names())
  std::string positional;             // override of the preset's positional encoding ("" = keep)
  std::string transform;              // override of the preset's logit transform ("" = keep)
  double tau = 10.0;                  // scale-invariant τ (> 0)
  double rope_base = 10000.0;         // rope, ntk, yarn, p-rope (truncate)
  double p_rope_base = 1024.0;        // p-rope (respread): longest wavelength / 2π
  double p_rope_fraction = -1.0;      // fraction of rotated frequency pairs; < 0 = variant default
  std::string p_rope_variant = "respread";  // respread | truncate
  double score_scale = 0.0;           // s = score_scale · q·k; 0 = 1/sqrt(head_dim)
  int64_t train_context = 0;          // L
  int64_t heads = 1;
  int64_t head_dim = 64;
  std::string kernel = "fused";       // reference | fused | cuda
};

std::vector<std::string> preset_names();

// Causal self-attention for one layer, after the q/k/v projections (and QK-norm).
struct CausalAttentionImpl : torch::nn::Module {
  explicit CausalAttentionImpl(MethodOptions options);

  // q, k, v: (B, H, T, D) → (B, H, T, D). T may exceed the training context (zero-shot eval).
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

  const MethodOptions& options() const { return options_; }

  // Standard deviation of the raw scores s = scale·q·k of the last forward pass (the theory
  // assumes ~1); computed only while record_score_std is set.
  bool record_score_std = false;
  double last_score_std = 0.0;

 private:
  MethodOptions options_;
};
TORCH_MODULE(CausalAttention);

}  // namespace attention
