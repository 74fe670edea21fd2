#include "attention/learned_bias.h"

#include <torch/torch.h>

namespace attention {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The table as an autograd function of the values (H, P): forward evaluates the row's closed form
// in float64 on the host; backward contracts d loss/d table (H, T) with the row's gradient into
// (H, P) directly, so ∂b/∂p (H, T, P) is never formed or kept with the graph.
// `method` is the address of the caller's Method, which outlives the graph (the module's own).
struct LearnedBiasFunction : public torch::autograd::Function<LearnedBiasFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& values, int64_t method, int64_t T) {
    const Method& m = *reinterpret_cast<const Method*>(method);
    const auto& spec = transform_spec(m.transform);
    const int64_t H = values.size(0), P = values.size(1);
    const torch::Tensor v64 = values.to(torch::kCPU, torch::kFloat64).contiguous();
    const double* vp = v64.data_ptr<double>();
    torch::Tensor table = torch::empty({H, T}, torch::kFloat64);
    double* tp = table.data_ptr<double>();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) tp[h * T + t] = spec.learned_bias(m, vp + h * P, t);
    ctx->saved_data["values"] = v64;
    ctx->saved_data["method"] = method;
    ctx->saved_data["dtype"] = int64_t(values.scalar_type());
    // The parameters' precision: float32, or float64 for a float64 module (gradient checks).
    const auto dtype = values.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    return table.to(values.options().dtype(dtype));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Method& m = *reinterpret_cast<const Method*>(ctx->saved_data["method"].toInt());
    const auto& spec = transform_spec(m.transform);
    const torch::Tensor v64 = ctx->saved_data["values"].toTensor();
    const torch::Tensor g = grads[0].to(torch::kCPU, torch::kFloat64).contiguous();  // (H, T)
    const int64_t H = g.size(0), T = g.size(1), P = v64.size(1);
    torch::Tensor dvalues = torch::zeros({H, P}, torch::kFloat64);
    const double *vp = v64.data_ptr<double>(), *gp = g.data_ptr<double>();
    double* dp = dvalues.data_ptr<double>();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        if (gp[h * T + t] != 0) spec.learned_bias_grad(m, vp + h * P, t, gp[h * T + t], dp + h * P);
    const auto dtype = c10::ScalarType(ctx->saved_data["dtype"].toInt());
    return {dvalues.to(grads[0].options().dtype(dtype)), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor learned_bias_table(const Method& m, const std::vector<torch::Tensor>& params, int64_t T) {
  const auto& spec = transform_spec(m.transform);
  if (!spec.learned_bias) return {};
  if (params.size() != spec.learned.size())
    throw std::invalid_argument("learned_bias_table: " + std::string(spec.name) + " learns " +
                                std::to_string(spec.learned.size()) + " parameters, got " +
                                std::to_string(params.size()));
  std::vector<torch::Tensor> per_head;
  for (size_t k = 0; k < params.size(); ++k)
    per_head.push_back(params[k].reshape({m.heads, spec.learned[k].per_head}));
  const torch::Tensor values = torch::cat(per_head, 1);  // (H, P)
  return LearnedBiasFunction::apply(values, reinterpret_cast<int64_t>(&m), T);
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
