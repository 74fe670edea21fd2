// Memory-efficient causal attention on the CPU: blockwise, online softmax (FlashAttention-2
// style), forward and backward, driven only by an attention::ScoreMod (score_mod.h).
//
//  * Never materialises T×T: per thread O(block_q·block_k + T·D) scratch, plus O(H·T) tables of
//    the score-mod (row factors, distance multiplier/bias) built once per call.
//  * Key blocks entirely above the diagonal are skipped; the causal mask lives in the bias table.
//  * Parallel over (batch, head, query block) forward and (batch, head, key-block set) backward:
//    at::parallel_for starts one worker per thread, workers take tasks from a shared counter,
//    costliest first. Tile matmuls are register-blocked SIMD loops compiled for AVX-512,
//    AVX2+FMA and baseline x86-64, picked at run time (no per-tile dispatch: at::mm_out costs
//    ~6 µs per 64×64×64 tile here, ~2.4× the loop's time).
//  * float32 and float64; gradients for q, k, v, the learned head scale, the learned bias
//    parameters (from d loss/d bias summed per distance) and the LSE output.
#pragma once

#include "attention/score_mod.h"

#include <torch/types.h>

#include <string>
#include <tuple>

namespace attention {

struct FusedCpuConfig {
  int64_t block_q = 64;   // query rows per tile
  int64_t block_k = 128;  // keys per tile (rounded up to a multiple of 64 bytes)
};

// q, k: (B, H, T, D), ALREADY rotated (method_tensors.h: apply_rotary); v: (B, H, T, D). CPU, float32 or
// float64 (all three the same dtype). head_scale: (H) learned multiplier (LogN's s_h) or
// undefined (then mod.head_scale, if set, is read as a constant). alibi_slopes: (H) or undefined
// (then mod.alibi_slope, if set). bias_table: (H, T' >= T) a learned distance bias b_h(t)
// (learned_bias.h) or undefined (then mod.bias_table, if set, as a constant).
// Differentiable w.r.t. q, k, v, head_scale and bias_table. Returns (B, H, T, D).
torch::Tensor fused_attention_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const ScoreMod& mod,
                                  const torch::Tensor& head_scale = {},
                                  const torch::Tensor& alibi_slopes = {},
                                  const torch::Tensor& bias_table = {},
                                  const FusedCpuConfig& config = {});

// As above, also returning the per-query log-normaliser LSE_i = log Σ_{j≤i} exp(logit_ij)
// (B, H, T) (natural log, logits as defined in score_mod.h). Both outputs are differentiable.
std::tuple<torch::Tensor, torch::Tensor> fused_attention_cpu_with_lse(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const ScoreMod& mod,
    const torch::Tensor& head_scale = {}, const torch::Tensor& alibi_slopes = {},
    const torch::Tensor& bias_table = {}, const FusedCpuConfig& config = {});

// The two passes without autograd, for a caller that keeps the graph itself (the PyTorch operator,
// python/csrc/operator.cpp). Arguments as above. The forward returns (out, lse); the backward takes
// them with d loss/d out (B, H, T, D) and d loss/d lse (B, H, T, or undefined) and returns the
// gradients of q, k, v and, where head_scale / bias_table are defined tensors, of those (bias_table's
// shaped like it, zero beyond T). Must be called with the forward's arguments.
struct FusedCpuGradients {
  torch::Tensor dq, dk, dv, dhead_scale, dbias_table;
};
std::tuple<torch::Tensor, torch::Tensor> fused_attention_cpu_forward(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const ScoreMod& mod,
    const torch::Tensor& head_scale = {}, const torch::Tensor& alibi_slopes = {},
    const torch::Tensor& bias_table = {}, const FusedCpuConfig& config = {});
FusedCpuGradients fused_attention_cpu_backward(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& out, const torch::Tensor& lse, const torch::Tensor& dout,
    const torch::Tensor& dlse, const ScoreMod& mod, const torch::Tensor& head_scale = {},
    const torch::Tensor& alibi_slopes = {}, const torch::Tensor& bias_table = {},
    const FusedCpuConfig& config = {});

// The instruction set the kernels dispatch to: "avx512", "avx2" or "generic" (best the CPU
// supports unless overridden).
const char* fused_cpu_isa();
// Override for tests and benchmarks: "auto" | "avx512" | "avx2" | "generic"; throws
// std::invalid_argument for an unknown name or one this CPU cannot run. Process-wide.
void set_fused_cpu_isa(const std::string& isa);

}  // namespace attention
