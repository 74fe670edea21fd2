// The chain rule from a kernel's d loss/d logit summed per distance to the learned bias
// parameters (score_mod.h: learned_bias_grad), shared by the CPU and CUDA kernels' backward.
// Header-only so that the CUDA binding needs no link to the attention library.
#pragma once

#include "attention/score_mod.h"

#include <torch/types.h>

namespace attention {

// g: (H, T') with g[h][t] = Σ over batch rows and queries i of d loss/d logit(i, i − t) (T' >= T
// entries, those at t >= T ignored); bias_params: (H, kBiasParams). Returns d loss/d bias_params
// (H, kBiasParams) in bias_params' dtype and device, computed in float64 on the CPU.
inline torch::Tensor learned_bias_param_grad(const ScoreMod& mod, const torch::Tensor& bias_params,
                                             const torch::Tensor& g, int64_t T) {
  const int64_t H = bias_params.size(0);
  const auto cpu64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor r = bias_params.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const torch::Tensor gt = g.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const int64_t stride = gt.size(1), n = std::min(T, stride);
  torch::Tensor out = torch::zeros({H, kBiasParams}, cpu64);
  const double* rp = r.data_ptr<double>();
  const double* gp = gt.data_ptr<double>();
  double* op = out.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < n; ++t) {
      double d[kBiasParams];
      learned_bias_grad<double>(mod, int(t), rp + h * kBiasParams, d);
      for (int p = 0; p < kBiasParams; ++p) op[h * kBiasParams + p] += gp[h * stride + t] * d[p];
    }
  return out.to(bias_params.options());
}

}  // namespace attention
