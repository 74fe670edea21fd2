#include "attention/method_tensors.h"

#include <torch/torch.h>

namespace attention {

namespace {
// A (n) tensor of host values made on `options`' device by one fill per value: no host tensor and
// no host→device copy, so a table built inside a training step does not wait for the GPU (a
// blocking copy there fails HARNESS_CUDA_SYNC_CHECK). n is D/2 or H: a few dozen tiny fills.
torch::Tensor filled_vector(const std::vector<double>& values, const torch::TensorOptions& options) {
  auto out = torch::empty({int64_t(values.size())}, options);  // (n)
  for (size_t k = 0; k < values.size(); ++k) out.narrow(0, int64_t(k), 1).fill_(values[k]);
  return out;
}
}  // namespace

RotaryTables rotary_tables(const Method& m, int64_t T, const torch::TensorOptions& options) {
  const std::vector<double> freq = rotary_frequencies(m, T);
  if (freq.empty()) return {};
  // float64 on the tables' own device: the same ops as on the host, cast once at the end.
  const auto f64 = options.dtype(torch::kFloat64);
  auto f = filled_vector(freq, f64);                                 // (D/2)
  auto angle = torch::arange(T, f64).unsqueeze(1) * f.unsqueeze(0);  // (T, D/2)
  return {angle.cos().to(options), angle.sin().to(options)};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryTables& tables) {
  if (!tables.defined()) return x;
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);  // (..., T, D/2) each
  return torch::cat({x1 * tables.cos - x2 * tables.sin, x1 * tables.sin + x2 * tables.cos}, -1);
}

torch::Tensor alibi_slope_tensor(const Method& m, const torch::TensorOptions& options) {
  if (!m.alibi()) return {};
  return filled_vector(alibi_slopes(m.heads), options);
}

torch::Tensor alibi_slope_tensor(const Method& m) {
  return alibi_slope_tensor(m, torch::TensorOptions().dtype(torch::kFloat64));
}

}  // namespace attention
