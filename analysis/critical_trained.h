// Where a trained LogN model sits relative to the critical scaling γ_c = 1/(1 − ρ)
// (analysis/theory/critical_scaling.h).
//
// LogN's logit for query i, key j ≤ i, head h is s_h·ln(i+1)·scale·q_i·k_j, with q and k RMS-normed
// per head without gain (|q| = |k| = √D), so it equals s_h·scale·D·ln(i+1)·cos(q_i, k_j): the
// paper's β_n = γ·ln n with an effective γ_h = s_h·scale·D (= s_h·√D at the default scale 1/√D),
// with n = i + 1 visible keys (the per-row scaling of the causal variant). The critical γ of a head
// is estimated from its measured key cosines: γ_c = 1/(1 − c_k), c_k = the mean pairwise cosine of
// the head's keys over the positions of a validation window (all T(T−1) ordered pairs), averaged
// over windows. Rotary methods rotate k before the kernel sees it: c_k is reported for the keys as
// projected and QK-normed (content only) and, as c_k_rotated, for the keys the kernel sees.
// γ_h / γ_c < 1 puts a head on the collapse side, > 1 on the identity side.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt.h"

namespace analysis {

struct TrainedHead {
  int64_t layer = 0, head = 0;
  double scale = 0;               // learned s_h (blocks.<layer>.attn.core.logn_scale[head])
  double gamma_eff = 0;           // s_h·scale·D
  double key_cosine = 0;          // c_k: QK-normed keys before any rotary encoding
  double key_cosine_rotated = 0;  // c_k of the keys the kernel sees (= key_cosine without rotary)
  double gamma_c = 0;             // 1/(1 − key_cosine)
  double gamma_c_rotated = 0;     // 1/(1 − key_cosine_rotated)
};

struct TrainedLognReport {
  std::string run_dir, name, method;
  int64_t train_context = 0;  // L
  int64_t context = 0;        // T of the windows the keys were measured on
  int64_t windows = 0;        // validation windows used
  int64_t layers = 0, heads = 0, head_dim = 0;
  double score_scale = 0;     // the kernel's scale at T (1/√D unless attention.score_scale is set)
  std::vector<TrainedHead> table;  // layer-major: (layers · heads)
};

// Each layer's keys as the attention core receives them, during the model's own forward pass.
struct LayerKeys {
  torch::Tensor keys;          // (B, H, T, D) projected and QK-normed
  torch::Tensor rotated_keys;  // (B, H, T, D) as the kernel sees them (== keys without rotary)
};
// Runs `model` on tokens (B, T) layer by layer from its public modules (embedding, blocks, head),
// recording the keys of every layer; returns them, and the logits in *logits when given (the same
// as model->forward(tokens): the tests check it). No grad.
std::vector<LayerKeys> trace_keys(models::GPT& model, const torch::Tensor& tokens,
                                  torch::Tensor* logits = nullptr);

// Mean over all ordered pairs of positions t ≠ u of cos(x_t, x_u), per (B, H): x (B, H, T, D) →
// (B, H) float64.
torch::Tensor mean_pairwise_cosine_over_positions(const torch::Tensor& x);

// Opens the finished run at `run_dir` (harness::train::open_finished_run), checks that its method
// learns LogN scales, and measures every head on `windows` validation windows of `context` tokens
// (0: the training context L), placed by `seed` (< 0: the run's eval.seed, i.e. the windows its
// own validation used). Throws harness::InputError for a run that is not a finished LogN run.
TrainedLognReport trained_logn_report(const std::string& run_dir, int64_t context = 0,
                                      int64_t windows = 16, int64_t seed = -1);

// The report as a text table (one line per head).
std::string format_trained_report(const TrainedLognReport& report);

}  // namespace analysis
