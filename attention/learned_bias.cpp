#include "attention/learned_bias.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "attention/transforms.h"

namespace attention {
namespace {

// A learned distance bias as torch ops: the (H, T) table from the values (H, P) (already at their
// floors), on the values' device and in their dtype, differentiable by autograd. One form per
// registry row with learned parameters (transforms.cpp); the row's float64 closed form and its
// hand-derived gradient are the independent check (EveryLearnedBiasRowGradientMatchesFiniteDifferences,
// LearnedBiasTablesAreBuiltOnTheParametersDevice). Nothing here copies to the host.
struct TableForm {
  Transform id;
  torch::Tensor (*table)(const Method& m, const torch::Tensor& values, int64_t T);
};

const std::vector<TableForm>& table_forms() {
  static const std::vector<TableForm> forms = {
      // KERPLE-log: −r1_h·ln(1 + r2_h·t).
      {Transform::kKerpleLog,
       [](const Method&, const torch::Tensor& v, int64_t T) {
         const auto t = torch::arange(T, v.options());  // (T)
         return -v.narrow(1, 0, 1) * torch::log1p(v.narrow(1, 1, 1) * t);
       }},
      // T5: b_h(bucket(t)); the buckets are fixed, so only their indices travel host → device (an
      // asynchronous copy: the host does not wait for the device's queue).
      {Transform::kT5,
       [](const Method&, const torch::Tensor& v, int64_t T) {
         std::vector<int64_t> buckets(static_cast<size_t>(T));
         for (int64_t t = 0; t < T; ++t) buckets[size_t(t)] = t5_bucket(t);
         const auto index = torch::tensor(buckets, torch::kLong).to(v.device(), /*non_blocking=*/true);
         return v.gather(1, index.expand({v.size(0), T}));  // (H, T)
       }},
      // FIRE: f_h, the MLP, on the grid x_g = g/(G − 1), then c_h and L_h·L_train (H, G + 2); the
      // values as FireLayout places them (transforms.h).
      {Transform::kFire,
       [](const Method& m, const torch::Tensor& v, int64_t) {
         using F = FireLayout;
         const int64_t W = kFireWidth;
         const auto x = torch::linspace(0.0, 1.0, kFireGrid, v.options()).view({1, kFireGrid, 1});  // (1, G, 1)
         const auto hidden =  // ReLU as clamp_min: aten::relu has no meta kernel
             (v.narrow(1, F::kW1, W).unsqueeze(1) * x + v.narrow(1, F::kB1, W).unsqueeze(1)).clamp_min(0.0);  // (H, G, W)
         const auto f = (hidden * v.narrow(1, F::kW2, W).unsqueeze(1)).sum(2) + v.narrow(1, F::kB2, 1);  // (H, G)
         return torch::cat({f, v.narrow(1, F::kC, 1), v.narrow(1, F::kL, 1) * double(m.train_context)}, 1);
       }},
  };
  return forms;
}

const TableForm& table_form(const Method& m) {
  for (const auto& f : table_forms())
    if (f.id == m.transform) return f;
  throw std::logic_error(std::string("learned_bias: transform '") + transform_spec(m.transform).name +
                         "' learns a bias but has no table form in learned_bias.cpp");
}

// The module's parameters, (H) or (H, per_head) each, as one (H, P) tensor in float32 (float64 for
// float64 parameters: gradient checks), each at least its floor. The floor passes the gradient
// straight through (as the module clamps its own parameters before every forward, a caller that
// passes values below it gets the gradient at the floor, not zero).
torch::Tensor values_of(const Method& m, const std::vector<torch::Tensor>& params) {
  const auto& spec = transform_spec(m.transform);
  if (params.size() != spec.learned.size())
    throw std::invalid_argument("learned_bias_table: " + std::string(spec.name) + " learns " +
                                std::to_string(spec.learned.size()) + " parameters, got " +
                                std::to_string(params.size()));
  std::vector<torch::Tensor> per_head;
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& p = spec.learned[k];
    if (params[k].numel() != m.heads * p.per_head)
      throw std::invalid_argument("learned_bias_table: " + std::string(p.name) + " must have " +
                                  std::to_string(m.heads * p.per_head) + " values (" +
                                  std::to_string(p.per_head) + " per head), got " +
                                  std::to_string(params[k].numel()));
    const auto dtype = params[k].scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto x = params[k].reshape({m.heads, p.per_head}).to(dtype);
    if (std::isfinite(p.floor)) x = x + (x.clamp_min(p.floor) - x).detach();
    per_head.push_back(x);
  }
  return torch::cat(per_head, 1);  // (H, P)
}

}  // namespace

torch::Tensor learned_bias_table(const Method& m, const std::vector<torch::Tensor>& params, int64_t T) {
  if (!m.learned_bias()) return {};
  return table_form(m).table(m, values_of(m, params), T);
}

torch::Tensor learned_bias_table_forward(const Method& m, const std::vector<torch::Tensor>& params, int64_t T) {
  if (!m.learned_bias()) return {};
  torch::NoGradGuard no_grad;
  return table_form(m).table(m, values_of(m, params), T);
}

std::vector<torch::Tensor> learned_bias_table_backward(const Method& m, const std::vector<torch::Tensor>& params,
                                                       const torch::Tensor& dtable) {
  torch::AutoGradMode enable(true);
  std::vector<torch::Tensor> leaves;
  for (const auto& p : params) leaves.push_back(p.detach().requires_grad_(true));
  const auto table = table_form(m).table(m, values_of(m, leaves), dtable.size(1));  // T: the table's length
  auto grads = torch::autograd::grad({table}, leaves, {dtable.to(table.options())});
  for (size_t k = 0; k < grads.size(); ++k) grads[k] = grads[k].to(params[k].options());
  return grads;
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
