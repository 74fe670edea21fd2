// The oracle: materialises the (B, H, T, T) logits with plain LibTorch ops in float64, straight
// from the method's closed forms (method.h), then a masked softmax. Differentiable by autograd
// (q, k, v, the learned head scale and a learned bias table). Memory O(B·H·T²): for tests and small T only.
#pragma once

#include "attention/method_tensors.h"

#include <torch/types.h>

#include <tuple>

namespace attention {

// q, k, v: (B, H, T, D), NOT rotated (the reference applies the method's rotation itself).
// head_scale: (H) learned per-head multiplier (LogN's s_h) or undefined (= 1).
// bias_table: (H, T' >= T) a learned distance bias b_h(t) (learned_bias.h; its closed forms are
// tested on their own), added at t = i − j, or FIRE's (H, G + 2) table (score_mod.h), read by the
// paper's formula; required when the method learns one, else unused.
// Returns the masked logits (B, H, T, T) in float64, −inf above the diagonal.
torch::Tensor reference_logits(const torch::Tensor& q, const torch::Tensor& k, const Method& method,
                               const torch::Tensor& head_scale = {},
                               const torch::Tensor& bias_table = {});

// Rows [start, start + n) of the masked logits, (B, H, n, Tk) float64, over keys [0, Tk) of a
// sequence of length `context` >= Tk, from q and k ALREADY rotated for that context ((B, H, n, D),
// (B, H, Tk, D)): the closed forms of reference_logits (which is start = 0, n = Tk = T after its
// own rotation), built on q's device — no host table. The decode path's logits
// (CausalAttention::forward_cached, and a prefix at an overridden context).
torch::Tensor reference_logits_rows(const torch::Tensor& q_rotated, const torch::Tensor& k_rotated,
                                    const Method& method, int64_t start, int64_t context,
                                    const torch::Tensor& head_scale = {},
                                    const torch::Tensor& bias_table = {});

// Output (B, H, T, D) in q's dtype (computed in float64).
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const Method& method,
                                  const torch::Tensor& head_scale = {},
                                  const torch::Tensor& bias_table = {});

// Output (B, H, T, D) and log-normaliser LSE_i = log Σ_j exp(logit_ij) (B, H, T), in q's dtype.
std::tuple<torch::Tensor, torch::Tensor> reference_attention_with_lse(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const Method& method,
    const torch::Tensor& head_scale = {}, const torch::Tensor& bias_table = {});

}  // namespace attention
