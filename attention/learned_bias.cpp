#include "attention/learned_bias.h"

#include <torch/torch.h>

#include <cmath>

namespace attention {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// values (H, P) in float64 on the host, each parameter at least its floor (as the module clamps its
// own before every forward; the operator's callers pass theirs as they are).
torch::Tensor host_values(const Method& m, const torch::Tensor& values) {
  torch::Tensor v64 = values.detach().to(torch::kCPU, torch::kFloat64).contiguous().clone();
  int64_t column = 0;
  for (const auto& p : transform_spec(m.transform).learned) {
    if (std::isfinite(p.floor)) v64.narrow(1, column, p.per_head).clamp_min_(p.floor);
    column += p.per_head;
  }
  return v64;
}

// The table from values (H, P) by the row's closed form, in float64 on the host, returned in the
// parameters' precision (float32, or float64 for a float64 module: gradient checks) and device.
torch::Tensor table_from_values(const Method& m, const torch::Tensor& values, int64_t T) {
  const auto& spec = transform_spec(m.transform);
  const int64_t H = values.size(0), P = values.size(1);
  const torch::Tensor v64 = host_values(m, values);
  const double* vp = v64.data_ptr<double>();
  torch::Tensor table = torch::empty({H, T}, torch::kFloat64);
  double* tp = table.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t) tp[h * T + t] = spec.learned_bias(m, vp + h * P, t);
  const auto dtype = values.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  return table.to(values.options().dtype(dtype));
}

// d loss/d values (H, P) from d loss/d table (H, T): contracted with the row's gradient directly,
// so ∂b/∂p (H, T, P) is never formed.
torch::Tensor values_gradient(const Method& m, const torch::Tensor& values, const torch::Tensor& dtable) {
  const auto& spec = transform_spec(m.transform);
  const torch::Tensor v64 = host_values(m, values);
  const torch::Tensor g = dtable.to(torch::kCPU, torch::kFloat64).contiguous();  // (H, T)
  const int64_t H = g.size(0), T = g.size(1), P = v64.size(1);
  torch::Tensor dvalues = torch::zeros({H, P}, torch::kFloat64);
  const double *vp = v64.data_ptr<double>(), *gp = g.data_ptr<double>();
  double* dp = dvalues.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t t = 0; t < T; ++t)
      if (gp[h * T + t] != 0) spec.learned_bias_grad(m, vp + h * P, t, gp[h * T + t], dp + h * P);
  return dvalues.to(values.options());
}

// A Method as the autograd graph keeps it: by value, in the node's saved data (the graph may outlive
// the module that made it, and a pointer through autograd is no state of the node's own).
void save_method(AutogradContext* ctx, const Method& m) {
  auto& d = ctx->saved_data;
  d["preset"] = m.preset;
  d["enums"] = std::vector<int64_t>{int64_t(m.positional), int64_t(m.transform), int64_t(m.p_rope_variant),
                                    int64_t(m.kernel)};
  d["sizes"] = std::vector<int64_t>{m.train_context, m.heads, m.head_dim};
  d["values"] = std::vector<double>(m.values.begin(), m.values.end());
  d["fractions"] = std::vector<double>{m.p_rope_fraction, m.score_scale};
}

Method load_method(AutogradContext* ctx) {
  auto& d = ctx->saved_data;
  Method m;
  m.preset = d["preset"].toStringRef();
  const auto e = d["enums"].toIntVector(), n = d["sizes"].toIntVector();
  m.positional = Positional(e[0]);
  m.transform = Transform(e[1]);
  m.p_rope_variant = PRoPEVariant(e[2]);
  m.kernel = Kernel(e[3]);
  m.train_context = n[0];
  m.heads = n[1];
  m.head_dim = n[2];
  const auto v = d["values"].toDoubleVector(), f = d["fractions"].toDoubleVector();
  std::copy(v.begin(), v.end(), m.values.begin());
  m.p_rope_fraction = f[0];
  m.score_scale = f[1];
  return m;
}

// The table as an autograd function of the values (H, P).
struct LearnedBiasFunction : public torch::autograd::Function<LearnedBiasFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& values, const Method& m, int64_t T) {
    ctx->save_for_backward({values});
    save_method(ctx, m);
    return table_from_values(m, values, T);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {values_gradient(load_method(ctx), ctx->get_saved_variables()[0], grads[0]), torch::Tensor(),
            torch::Tensor()};
  }
};

// The module's parameters, (H) or (H, per_head) each, as one (H, P) tensor.
torch::Tensor values_of(const Method& m, const std::vector<torch::Tensor>& params) {
  const auto& spec = transform_spec(m.transform);
  if (params.size() != spec.learned.size())
    throw std::invalid_argument("learned_bias_table: " + std::string(spec.name) + " learns " +
                                std::to_string(spec.learned.size()) + " parameters, got " +
                                std::to_string(params.size()));
  std::vector<torch::Tensor> per_head;
  for (size_t k = 0; k < params.size(); ++k) {
    if (params[k].numel() != m.heads * spec.learned[k].per_head)
      throw std::invalid_argument("learned_bias_table: " + std::string(spec.learned[k].name) + " must have " +
                                  std::to_string(m.heads * spec.learned[k].per_head) + " values (" +
                                  std::to_string(spec.learned[k].per_head) + " per head), got " +
                                  std::to_string(params[k].numel()));
    per_head.push_back(params[k].reshape({m.heads, spec.learned[k].per_head}));
  }
  return torch::cat(per_head, 1);  // (H, P)
}

}  // namespace

torch::Tensor learned_bias_table(const Method& m, const std::vector<torch::Tensor>& params, int64_t T) {
  if (!m.learned_bias()) return {};
  return LearnedBiasFunction::apply(values_of(m, params), m, T);
}

torch::Tensor learned_bias_table_forward(const Method& m, const std::vector<torch::Tensor>& params, int64_t T) {
  if (!m.learned_bias()) return {};
  return table_from_values(m, values_of(m, params), T);
}

std::vector<torch::Tensor> learned_bias_table_backward(const Method& m, const std::vector<torch::Tensor>& params,
                                                       const torch::Tensor& dtable) {
  const torch::Tensor dvalues = values_gradient(m, values_of(m, params), dtable);  // (H, P)
  std::vector<torch::Tensor> grads;
  int64_t column = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const int64_t width = transform_spec(m.transform).learned[k].per_head;
    grads.push_back(dvalues.narrow(1, column, width).reshape(params[k].sizes()).to(params[k].options()));
    column += width;
  }
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
