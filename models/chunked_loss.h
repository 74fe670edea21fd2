// Next-token cross-entropy through the output head, a chunk of rows at a time.
//
// The head's logits are (rows, V): at the paper's scale (rows = B·T = 64·4096, V = 50304) that
// is 53 GB in fp32 at once. Here no more than `chunk_rows` rows of logits exist at any moment,
// forward or backward, as in Liger-Kernel's fused linear cross-entropy: when a gradient is
// wanted the forward computes it chunk by chunk (softmax − one-hot, then both GEMMs) and the
// backward only scales it by the incoming gradient, so no logits are kept for the backward.
//
// Precision: the GEMMs run in `compute` (float32, or bfloat16 for mixed precision) with the
// weight cast from its float32 master copy; the log-sum-exp, the loss and both gradients' sums
// are float32 (float64 in, float64 throughout: the tests' oracle).
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace models {

// Rows of logits one chunk holds by default: about 128 MiB of float32 at any vocabulary.
int64_t default_loss_chunk_rows(int64_t vocab_size);

// Mean over rows of −log softmax(hidden·weightᵀ)[target]: hidden (N, C), weight (V, C),
// targets (N) int64 → scalar, differentiable w.r.t. hidden and weight.
torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, torch::ScalarType compute,
                                    int64_t chunk_rows);

// The per-row losses (N), float32 (float64 for float64 input), without gradient: validation.
torch::Tensor chunked_nll(const torch::Tensor& hidden, const torch::Tensor& weight,
                          const torch::Tensor& targets, torch::ScalarType compute,
                          int64_t chunk_rows);

}  // namespace models
