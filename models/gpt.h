// The causal GPT the experiments train: a small modded-nanogpt-style decoder (the paper's base).
//
//   tokens (B, T) → embed → RMSNorm → [block]×layers → RMSNorm → head → logits (B, T, V)
//   block:  x = x + o(attn(QKNorm(q(n(x))), QKNorm(k(n(x))), v(n(x))))     n = RMSNorm
//           x = x + proj(relu(fc(n(x)))²)
//
// Choices (modded-nanogpt's, kept because they train well at small scale too; see gpt.cpp):
//  * every RMSNorm (embeddings, pre-attention, pre-MLP, final, and the QK-norm over head_dim) is
//    parameter-free: no learned gain, eps = 1e-6. The only non-matrix parameters therefore come
//    from the attention method itself (e.g. LogN's learned per-head scales).
//  * no biases anywhere; untied output head.
//  * init: embeddings N(0, 1); q/k/v/fc weights U(±√3·0.5/√fan_in) (std 0.5/√fan_in);
//    the residual output projections (attn.o, mlp.proj) and the head are zero-initialised, so the
//    untrained model is the identity on the residual stream and its loss is exactly ln(V).
//    At CPU scale this also trained slightly better than N(0, 0.02) for those three (val loss
//    2.226 vs 2.261 after 200 steps; the sweep is in models/optimizers.h).
//
// Parameter names (the optimiser groups rely on them, see models/optimizers.h):
//   embed.weight (V, C) · head.weight (V, C)
//   blocks.<i>.attn.{q,k,v}.weight (H·D, C) · blocks.<i>.attn.o.weight (C, H·D)
//   blocks.<i>.attn.core.*  (whatever the attention method learns, e.g. logn_scale)
//   blocks.<i>.mlp.fc.weight (M, C) · blocks.<i>.mlp.proj.weight (C, M),  M = round(mlp_ratio·C)
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "attention/attention.h"
#include "models/pointwise.h"  // rms_norm, relu_squared

namespace models {

struct GPTOptions {
  int64_t vocab_size = 256;
  int64_t layers = 2;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t head_dim = 32;   // q/k/v project d_model → heads·head_dim (need not equal d_model)
  double mlp_ratio = 4.0;  // MLP hidden = round(mlp_ratio · d_model)
  // Mixed precision: kBFloat16 runs every matmul (projections, MLP, head) and the attention
  // kernel in bfloat16 from the float32 master weights, as autocast does; norms, the residual
  // stream, the softmax statistics and the loss stay float32. kFloat32: everything in the
  // parameters' own dtype.
  torch::ScalarType compute_dtype = torch::kFloat32;
  // Recompute each block's activations in the backward instead of keeping them (training only):
  // the same gradients, memory of one block's activations plus each block's input.
  bool activation_checkpointing = false;
  int64_t loss_chunk_rows = 0;  // rows of logits at once in loss(); 0: default_loss_chunk_rows(V)
  // The attention method. Its `heads` and `head_dim` are overwritten with the model's; the rest
  // (method, τ, bases, train_context, kernel) is passed through unchanged.
  attention::MethodOptions attention;
};

// Throws std::invalid_argument naming the offending option. (Method-specific constraints, e.g.
// an odd head_dim with a RoPE-family method, are the attention layer's to reject.)
void validate(const GPTOptions& options);

// Keys and values of the positions decoded so far, per layer, for greedy decoding
// (GPTImpl::forward_cached). `context` is the length of the whole sequence being decoded: every
// per-context quantity of the attention method (rotary frequencies, NTK, YaRN) is that of
// `context`, as GPTImpl::forward(tokens, context) uses.
struct KVCache {
  explicit KVCache(int64_t context) : context(context) {}
  int64_t context;
  std::vector<torch::Tensor> k, v;  // per layer: (B, H, length, D), keys rotated
  int64_t length() const { return k.empty() || !k[0].defined() ? 0 : k[0].size(2); }
};

struct AttentionBlockImpl : torch::nn::Module {
  AttentionBlockImpl(const GPTOptions& options, int64_t layer);
  // (B, T, C) → (B, T, C), before the residual add; context 0: T (see GPTImpl::forward).
  torch::Tensor forward(const torch::Tensor& x, int64_t context = 0,
                        attention::AttentionProbe* probe = nullptr);
  // (B, n, C) of the next n positions → (B, n, C); extends the layer's cache.
  torch::Tensor forward_cached(const torch::Tensor& x, torch::Tensor& k_cache,
                               torch::Tensor& v_cache, int64_t context);

  int64_t heads, head_dim;
  torch::ScalarType compute;  // GPTOptions::compute_dtype
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
  attention::CausalAttention core{nullptr};
};
TORCH_MODULE(AttentionBlock);

struct MLPImpl : torch::nn::Module {
  explicit MLPImpl(const GPTOptions& options);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) → (B, T, C), ReLU²

  torch::ScalarType compute;  // GPTOptions::compute_dtype
  torch::nn::Linear fc{nullptr}, proj{nullptr};
};
TORCH_MODULE(MLP);

struct BlockImpl : torch::nn::Module {
  BlockImpl(const GPTOptions& options, int64_t layer);
  // (B, T, C) → (B, T, C)
  torch::Tensor forward(const torch::Tensor& x, int64_t context = 0,
                        attention::AttentionProbe* probe = nullptr);
  torch::Tensor forward_cached(const torch::Tensor& x, torch::Tensor& k_cache,
                               torch::Tensor& v_cache, int64_t context);  // (B, n, C) → (B, n, C)

  AttentionBlock attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  explicit GPTImpl(GPTOptions options);

  // tokens (B, T) int64 in [0, vocab_size) → logits (B, T, V) float32. T may exceed the training
  // context (zero-shot length generalisation).
  torch::Tensor forward(const torch::Tensor& tokens);
  // As forward, for the first T positions of a sequence of length `context` >= T: the attention
  // method's per-context quantities are those of `context` (forward(tokens) = forward(tokens, T)).
  // Greedy decoding by full recomputation calls this with a growing prefix.
  torch::Tensor forward(const torch::Tensor& tokens, int64_t context);
  // As forward(tokens), with one probe per layer (attention/statistics.h): each layer's attention
  // fills what its probe asks for (the raw scores' std, the attention statistics).
  torch::Tensor forward(const torch::Tensor& tokens, std::vector<attention::AttentionProbe>& probes);
  // tokens (B, n) of the next n positions after cache.length() → logits (B, n, V); extends the
  // cache. The logits equal those of forward(all tokens so far, cache.context) at these rows.
  torch::Tensor forward_cached(const torch::Tensor& tokens, KVCache& cache);

  // The final normalised hidden states (B, T, C) the head reads: forward without the head.
  // probes: none, or one per layer (as forward).
  torch::Tensor features(const torch::Tensor& tokens,
                         std::vector<attention::AttentionProbe>* probes = nullptr);

  // Mean next-token cross-entropy (nats) of forward(tokens_in) against targets (B, T) int64,
  // through the head a chunk of rows at a time (models/chunked_loss.h): no (B, T, V) tensor.
  torch::Tensor loss(const torch::Tensor& tokens_in, const torch::Tensor& targets);
  // Per-position losses (B, T) float32 of forward(tokens_in, probes) against targets, chunked
  // and without gradient (validation).
  torch::Tensor position_losses(const torch::Tensor& tokens_in, const torch::Tensor& targets,
                                std::vector<attention::AttentionProbe>* probes = nullptr);

  const GPTOptions& options() const { return options_; }
  int64_t num_parameters() const;

  torch::nn::Embedding embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  std::vector<Block> block_list;  // the same modules as `blocks`, typed
  torch::nn::Linear head{nullptr};

 private:
  torch::Tensor logits(const torch::Tensor& features);  // (B, T, C) → (B, T, V) float32
  int64_t loss_chunk_rows() const;
  torch::ScalarType head_gemm_dtype() const;  // compute_dtype when reduced, else the weights'

  GPTOptions options_;
};
TORCH_MODULE(GPT);

// x·Wᵀ in `compute`: with kBFloat16, x and the (float32 master) weight cast to bfloat16 — a
// differentiable copy, as autocast makes — else the layer as it is.
torch::Tensor apply_linear(torch::nn::Linear& layer, const torch::Tensor& x,
                           torch::ScalarType compute);

}  // namespace models
