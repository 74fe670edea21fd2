#include "attention/learned_bias.h"

#include <torch/torch.h>

namespace attention {

torch::Tensor learned_bias_table(const Method& m, const std::vector<torch::Tensor>& params, int64_t T) {
  const auto& spec = transform_spec(m.transform);
  if (!spec.learned_bias) return {};
  if (params.size() != spec.learned.size())
    throw std::invalid_argument("learned_bias_table: " + std::string(spec.name) + " learns " +
                                std::to_string(spec.learned.size()) + " parameters, got " +
                                std::to_string(params.size()));
  const int64_t H = m.heads, P = learned_values_per_head(m);
  std::vector<torch::Tensor> per_head;
  for (size_t k = 0; k < params.size(); ++k) per_head.push_back(params[k].reshape({H, spec.learned[k].per_head}));
  const torch::Tensor values = torch::cat(per_head, 1);  // (H, P)
  const torch::Tensor v64 = values.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const double* vp = v64.data_ptr<double>();
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor table = torch::empty({H, T}, f64);
  double* tp = table.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) tp[h * T + t] = spec.learned_bias(m, vp + h * P, t);
  // The parameters' precision: float32, or float64 for a float64 module (gradient checks).
  const auto out = values.options().dtype(values.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
  if (!(torch::GradMode::is_enabled() && values.requires_grad())) return table.to(out);
  // The gradient: the table's first-order expansion around the current values,
  // b + J·(values − values.detach()), J = ∂b_h(t)/∂p (H, T, P) from the row's closed form. Its
  // value is b exactly and its gradient J; J is built only when a gradient is wanted.
  torch::Tensor jacobian = torch::zeros({H, T, P}, f64);
  double* jp = jacobian.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) spec.learned_bias_grad(m, vp + h * P, t, 1.0, jp + (h * T + t) * P);
  // Formed in float64 on the CPU (H·T·P values), like the table, then moved once.
  const torch::Tensor delta = (values - values.detach()).to(torch::kCPU, torch::kFloat64).unsqueeze(1);  // (H, 1, P)
  return (table + (jacobian * delta).sum(-1)).to(out);
}

ScoreMod with_bias_table(ScoreMod mod, const torch::Tensor& table, std::vector<float>& storage) {
  if (!table.defined()) return mod;
  const auto c = table.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  storage.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  mod.bias_table = storage.data();
  mod.bias_table_len = int(c.size(1));
  return mod;
}

}  // namespace attention
