// The GPT's row-wise and element-wise ops, each one pass over memory forward and one backward.
//
// At CPU scale a training step is bound by passes over the activations, not by arithmetic:
// composed from ATen ops, RMSNorm costs five passes forward (pow, mean, add, rsqrt, mul) and more
// backward, ReLU² two and four. These fused versions (CPU, float32 / float64) give the same
// values (float64 tests against the composed forms) with one pass each way. Other devices and
// dtypes (CUDA, bfloat16) take the composed forms, which autograd differentiates. The fused
// backwards are not themselves differentiable (no double backward; nothing here needs it).
#pragma once

#include <torch/types.h>

namespace models {

// RMSNorm over the last dimension, no learned gain: y = x / sqrt(mean(x²) + eps).
// bfloat16 / half in: computed in float32, returned in the input's dtype. Any strides in (e.g. a (B, H, T, D) transposed view of (B, T, H·D)); contiguous out.
torch::Tensor rms_norm(const torch::Tensor& x, double eps = 1e-6);

// relu(x)².
torch::Tensor relu_squared(const torch::Tensor& x);

// The same ops composed from ATen ops: the fallback above, and the oracle of the tests.
torch::Tensor rms_norm_composed(const torch::Tensor& x, double eps = 1e-6);
torch::Tensor relu_squared_composed(const torch::Tensor& x);

}  // namespace models
