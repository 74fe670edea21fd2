// The attention engine's public face: a method (positional encoding × logit transform) resolved
// from options, and the causal attention module the models call.
#pragma once

#include "attention/method_tensors.h"
#include "attention/method_options.h"
#include "attention/score_mod.h"
#include "attention/statistics.h"

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace attention {

// MethodOptions (method_options.h): everything that defines a method.

std::vector<std::string> preset_names();

// Causal self-attention for one layer, after the q/k/v projections (and QK-norm).
// Throws std::invalid_argument from the constructor for impossible options, and from forward for
// shapes that do not match (heads, head_dim) or T outside [1, kMaxContext].
struct CausalAttentionImpl : torch::nn::Module {
  explicit CausalAttentionImpl(MethodOptions options);

  // q, k, v: (B, H, T, D) → (B, H, T, D). T may exceed the training context (zero-shot eval).
  // Applies the rotation for this T, builds the ScoreMod for this T, runs options.kernel.
  // probe (statistics.h), when given, receives what it asks for: the std of the raw scores
  // s = scale·q·k (the theory assumes ~1; q, k the rotated ones the kernel sees, scale the
  // method's score_scale without YaRN's temperature; estimated from a fixed sample of at most 4096
  // causal (i, j) pairs, uniform over the T(T+1)/2, all of them when there are no more, the same
  // pairs for every batch row and head, pooled), and the attention statistics of the last rows
  // (entropy, mass and entropy by distance band and range), whatever the kernel.
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        AttentionProbe* probe = nullptr);

  // As forward, plus the per-query log-normaliser LSE_i = log Σ_{j≤i} exp(logit_ij) (B, H, T)
  // (kernels reference and fused; never materialises T×T with fused).
  std::tuple<torch::Tensor, torch::Tensor> forward_with_lse(const torch::Tensor& q,
                                                            const torch::Tensor& k,
                                                            const torch::Tensor& v,
                                                            AttentionProbe* probe = nullptr);

  // As forward, with the per-context quantities (rotary frequencies, NTK's base, YaRN's
  // factor and temperature) of `context` >= T instead of T: position i of a prefix sees what it
  // would see inside a sequence of length `context`. forward_at(q, k, v, T) == forward(q, k, v).
  torch::Tensor forward_at(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           int64_t context, AttentionProbe* probe = nullptr);

  // Incremental decoding with a KV cache. q, k, v: (B, H, n, D), positions [start, start + n),
  // not rotated; k_cache, v_cache: (B, H, start, D) of the earlier positions (keys rotated), or
  // undefined for start = 0. Both caches are replaced by their extension with this call's keys
  // and values. Returns (B, H, n, D): exactly what forward_at(q_all, k_all, v_all, context)
  // returns for these rows. start = 0 runs the configured kernel (the prefill); later calls
  // attend from the n new rows over all start + n keys, materialising (B, H, n, start + n).
  torch::Tensor forward_cached(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, torch::Tensor& k_cache,
                               torch::Tensor& v_cache, int64_t context);

  const MethodOptions& options() const { return options_; }
  const Method& method() const { return method_; }

  // q, k (B, H, T, D) rotated for context T = q.size(2) (returned unchanged for non-rotary
  // methods); differentiable.
  std::pair<torch::Tensor, torch::Tensor> rotate(const torch::Tensor& q,
                                                 const torch::Tensor& k) const;
  // The score-mod at context T (per-head parameters not attached: see head_scale/alibi_slopes).
  ScoreMod score_mod(int64_t T) const { return attention::score_mod(method_, T); }
  // (H) learned LogN scale, registered as parameter "logn_scale" (init 1/ln L); undefined for
  // other transforms.
  torch::Tensor logn_scale;
  // A learned distance bias's parameters, (H) or (H, per_head) each, registered under the row's
  // names (kerple-log: "kerple_r1", "kerple_r2"; t5-bias: "t5_bias"), initialised per
  // transforms.cpp, clamped to their floor before every forward; empty for other transforms.
  std::vector<torch::Tensor> learned_bias_params;
  // (H, T) the table b_h(t) the kernels read (learned_bias.h), differentiable w.r.t.
  // learned_bias_params; undefined without a learned bias.
  torch::Tensor bias_table(int64_t T) const;
  // (H) ALiBi slopes (float64, CPU), undefined for other methods. Not a parameter or buffer.
  const torch::Tensor& alibi_slopes() const { return alibi_slopes_; }

 private:
  std::tuple<torch::Tensor, torch::Tensor> run(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v, bool want_lse,
                                               int64_t context, AttentionProbe* probe);
  // q, k rotated for `context`, rows [start, start + n); the score-mod of `context`.
  std::pair<torch::Tensor, torch::Tensor> rotate_rows(const torch::Tensor& q, const torch::Tensor& k,
                                                      int64_t start, int64_t context) const;
  // Attention of rotated rows [start, start + n) over rotated keys [0, Tk), materialised.
  torch::Tensor attend_rows(const torch::Tensor& qr, const torch::Tensor& kr, const torch::Tensor& v,
                            int64_t start, int64_t context) const;

  // Rotary tables of `context` in `options`; the training context's are built once and kept on
  // the device they are used on, not rebuilt in float64 on the host every layer and step.
  RotaryTables cached_rotary_tables(int64_t context, const torch::TensorOptions& options) const;

  MethodOptions options_;
  Method method_;
  torch::Tensor alibi_slopes_;
  torch::Tensor alibi_slopes_device_;  // float32, made on the CUDA kernel's device (no copy)
  mutable std::map<std::string, RotaryTables> rotary_cache_;
};
TORCH_MODULE(CausalAttention);

}  // namespace attention
