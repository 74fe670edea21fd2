// LibTorch binding of the fused CUDA attention kernels (attention/cuda/fused_attention.cuh).
// Compiled only when LibTorch has CUDA (CMake HARNESS_TORCH_CUDA); callers guard their use with
// #ifdef HARNESS_WITH_CUDA_KERNEL.
#pragma once

#include <torch/types.h>

#include "attention/score_mod.h"

namespace attention::cuda {

// Causal attention o = softmax(logit)·v with logit = multiplier·scale·q·k + bias as described by
// `mod` (attention/score_mod.h), differentiable w.r.t. q, k, v, head_scale and bias_table.
//
//   q, k, v      (B, H, T, D) CUDA tensors, float32 or bfloat16 (all the same), D ∈ {64, 128}
//   mod          scale and row / distance terms; its head_scale and alibi_slope pointers are
//                ignored and replaced by those of the two tensors below
//   head_scale   undefined, or (H) float32 on q's device (learned per-head multiplier; may
//                require grad)
//   alibi_slope  undefined, or (H) float32 on q's device (must not require grad)
//   bias_table   undefined, or float32 on q's device, read as mod.table_index says (score_mod.h):
//                kDistance: (H, T), a learned distance bias b_h(t); kFire: (H, G + 2), FIRE's f_h on
//                G grid points then c_h and L_h, 2 <= G <= kMaxFireGrid (kernel_limits.h). Built by
//                attention/learned_bias.h; may require grad, its gradient is d loss/d table
//
// Returns o: (B, H, T, D), q's dtype. Non-contiguous inputs are copied.
torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const attention::ScoreMod& mod, const torch::Tensor& head_scale,
                              const torch::Tensor& alibi_slope, const torch::Tensor& bias_table = {});

// The two passes without autograd, for a caller that keeps the graph itself (the PyTorch operator,
// python/csrc/operator.cpp); arguments as above, already checked by the caller. The backward takes
// the forward's outputs and d loss/d o (the kernels have no d loss/d lse); dhead_scale and
// dbias_table are defined where head_scale and bias_table are, shaped like them.
struct ForwardPass {
  torch::Tensor o;                 // (B, H, T, D), q's dtype
  torch::Tensor lse;               // (B, H, T) float32
  torch::Tensor fixed_logit_mean;  // (B, H, T) float32 when head_scale is defined (its gradient)
};
struct Gradients {
  torch::Tensor dq, dk, dv, dhead_scale, dbias_table;
};
ForwardPass fused_attention_forward_pass(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, const attention::ScoreMod& mod,
                                         const torch::Tensor& head_scale,
                                         const torch::Tensor& alibi_slope,
                                         const torch::Tensor& bias_table);
Gradients fused_attention_backward_pass(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const ForwardPass& forward,
                                        const torch::Tensor& d_o, const attention::ScoreMod& mod,
                                        const torch::Tensor& head_scale,
                                        const torch::Tensor& alibi_slope,
                                        const torch::Tensor& bias_table);

}  // namespace attention::cuda
