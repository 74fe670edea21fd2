#include "attention/method_tensors.h"

#include <torch/torch.h>

namespace attention {

RotaryTables rotary_tables(const Method& m, int64_t T, const torch::TensorOptions& options) {
  const std::vector<double> freq = rotary_frequencies(m, T);
  if (freq.empty()) return {};
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  auto f = torch::tensor(freq, f64);                           // (D/2)
  auto angle = torch::arange(T, f64).unsqueeze(1) * f.unsqueeze(0);  // (T, D/2)
  return {angle.cos().to(options), angle.sin().to(options)};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryTables& tables) {
  if (!tables.defined()) return x;
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);  // (..., T, D/2) each
  return torch::cat({x1 * tables.cos - x2 * tables.sin, x1 * tables.sin + x2 * tables.cos}, -1);
}

torch::Tensor alibi_slope_tensor(const Method& m) {
  if (!m.alibi()) return {};
  return torch::tensor(alibi_slopes(m.heads), torch::TensorOptions().dtype(torch::kFloat64));
}

}  // namespace attention
