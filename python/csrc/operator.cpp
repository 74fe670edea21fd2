// The attention engine as PyTorch operators (namespace scale_invariant), for people who use
// scale-invariant attention in their own PyTorch model rather than in this harness. Built by
// setup.py (`pip install --no-build-isolation .`); python/scale_invariant_attention/ loads it and
// registers the autograd formula and the fake (meta) implementations that torch.compile needs.
//
//   attention(q, k, v, method, train_context, parameter_names, parameter_values, head_scale, learned)
//       -> out                                        CompositeImplicitAutograd: attention_with_lse[0]
//   attention_with_lse(...same...) -> (out, lse)      CPU: the fused kernel (fused_cpu.h);
//                                                     CUDA: the fused CUDA kernels (cuda/binding.h)
//   attention_backward(grad_out, grad_lse, q, k, v, out, lse, ...same...) -> (dq, dk, dv, dhead, dlearned)
//   presets(), parameter_names() -> str[]             the registry's methods and parameters
//
// q, k, v: (B, H, T, D), not rotated: a rotary method rotates them here for context T (its
// backward rotates the gradients back). The method is the registry's (method.h), resolved per call
// from its name, the training context L (0: T) and registry parameters by name (parameters.h:
// tau, rope_base, p_rope_base; absolute values). head_scale: the learned per-head multiplier of
// the methods that have one (LogN's s_h), its initial value when None; learned: a learned bias's
// parameters in its row's order (transforms.h), their initial values when empty.
#include "attention/fused_cpu.h"
#include "attention/learned_bias.h"
#include "attention/method.h"
#include "attention/method_tensors.h"
#include "attention/parameters.h"
#include "attention/transforms.h"
#ifdef SCALE_INVARIANT_WITH_CUDA
#include "attention/cuda/binding.h"
#endif

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using attention::Method;
using torch::Tensor;

// Python's ValueError, for a bad method, parameter or shape.
[[noreturn]] void value_error(const std::string& what) {
  C10_THROW_ERROR(ValueError, "scale_invariant.attention: " + what);
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The method of one call, resolved from the registry; errors as Python ValueError.
Method resolve(const Tensor& q, const std::string& method, int64_t train_context,
               const std::vector<std::string>& names, c10::ArrayRef<double> values) {
  TORCH_CHECK_VALUE(q.dim() == 4, "scale_invariant.attention: q must be (B, H, T, D), got ", q.sizes());
  TORCH_CHECK_VALUE(names.size() == values.size(), "scale_invariant.attention: ", names.size(),
                    " parameter names for ", values.size(), " values");
  attention::MethodOptions o;
  o.method = method;
  o.train_context = train_context > 0 ? train_context : q.size(2);
  o.heads = q.size(1);
  o.head_dim = q.size(3);
  for (size_t i = 0; i < names.size(); ++i) {
    const attention::ParameterSpec* spec = nullptr;
    std::vector<std::string> known;
    for (const auto& p : attention::parameters()) {
      known.emplace_back(p.name);
      if (names[i] == p.name) spec = &p;
    }
    TORCH_CHECK_VALUE(spec, "scale_invariant.attention: unknown parameter '", names[i],
                      "'; valid: ", join(known));
    o.parameters[spec->id] = attention::LengthValue::absolute(values[i]);
  }
  try {
    Method m = attention::resolve_method(o);
    attention::check_context(m, q.size(2));
    return m;
  } catch (const std::invalid_argument& e) {
    value_error(e.what());
  }
}

// What the kernels read besides q, k, v for one call.
struct Inputs {
  Method method;
  attention::RotaryTables rotary;  // undefined without a rotary encoding
  attention::ScoreMod mod;
  Tensor head_scale, alibi, bias_table;
  std::vector<Tensor> learned;  // the learned bias's parameters, as given or initial
};

std::vector<Tensor> initial_learned(const Method& m, const torch::TensorOptions& options) {
  const auto& spec = attention::transform_spec(m.transform);
  const std::vector<double> all = attention::initial_learned_values(m);  // (H, P)
  const int64_t P = attention::learned_values_per_head(m);
  const Tensor values = torch::tensor(all, torch::kFloat64).reshape({m.heads, P});
  std::vector<Tensor> params;
  int64_t column = 0;
  for (const auto& p : spec.learned) {
    params.push_back(values.narrow(1, column, p.per_head).reshape(p.per_head == 1 ? torch::IntArrayRef{m.heads}
                                                                                   : torch::IntArrayRef{m.heads, p.per_head})
                         .to(options));
    column += p.per_head;
  }
  return params;
}

Inputs inputs(const Tensor& q, const std::string& method, int64_t train_context,
              const std::vector<std::string>& names, c10::ArrayRef<double> values,
              const std::optional<Tensor>& head_scale, const std::vector<Tensor>& learned) {
  Inputs in{resolve(q, method, train_context, names, values)};
  const Method& m = in.method;
  const int64_t T = q.size(2);
  in.rotary = attention::rotary_tables(m, T, q.options());
  in.mod = attention::score_mod(m, T);
  const auto params = q.options().dtype(q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32);
  if (head_scale) {
    TORCH_CHECK_VALUE(m.learned_head_scale(), "scale_invariant.attention: '", m.preset,
                      "' has no learned head scale; pass head_scale=None");
    TORCH_CHECK_VALUE(head_scale->dim() == 1 && head_scale->size(0) == m.heads,
                      "scale_invariant.attention: head_scale must be (H) = (", m.heads, "), got ",
                      head_scale->sizes());
    in.head_scale = head_scale->to(params);
  } else if (m.learned_head_scale()) {
    in.head_scale = torch::full({m.heads}, attention::initial_head_scale(m), params);
  }
  if (m.alibi()) in.alibi = attention::alibi_slope_tensor(m, params);  // made on q's device
  if (m.learned_bias()) {
    in.learned = learned.empty() ? initial_learned(m, params) : learned;
    try {
      in.bias_table = attention::learned_bias_table_forward(m, in.learned, T).to(params);
    } catch (const std::invalid_argument& e) {
      value_error(e.what());
    }
  } else {
    TORCH_CHECK_VALUE(learned.empty(), "scale_invariant.attention: '", m.preset,
                      "' learns no distance bias; pass learned=[]");
  }
  return in;
}

Tensor rotate(const Tensor& x, const attention::RotaryTables& tables) {
  return tables.defined() ? attention::apply_rotary(x, tables).contiguous() : x;
}
// The rotation's transpose: by −angle (the gradient of a rotation).
Tensor unrotate(const Tensor& x, const attention::RotaryTables& tables) {
  return tables.defined() ? attention::apply_rotary(x, {tables.cos, -tables.sin}) : x;
}

std::tuple<Tensor, Tensor> attention_with_lse_cpu(const Tensor& q, const Tensor& k, const Tensor& v,
                                                  const std::string& method, int64_t train_context,
                                                  std::vector<std::string> names, std::vector<double> values,
                                                  const std::optional<Tensor>& head_scale,
                                                  std::vector<Tensor> learned) {
  const Inputs in = inputs(q, method, train_context, names, values, head_scale, learned);
  try {
    return attention::fused_attention_cpu_forward(rotate(q, in.rotary), rotate(k, in.rotary), v, in.mod,
                                                  in.head_scale, in.alibi, in.bias_table);
  } catch (const std::invalid_argument& e) {
    value_error(e.what());
  }
}

using BackwardResult = std::tuple<Tensor, Tensor, Tensor, Tensor, std::vector<Tensor>>;

// d loss/d learned parameters from d loss/d table; empty when the method has none or they were
// not passed (their initial values are constants then).
std::vector<Tensor> learned_gradients(const Inputs& in, const std::vector<Tensor>& learned,
                                      const Tensor& dtable) {
  if (learned.empty() || !dtable.defined()) return {};
  return attention::learned_bias_table_backward(in.method, learned, dtable);
}

BackwardResult attention_backward_cpu(const Tensor& grad_out, const std::optional<Tensor>& grad_lse,
                                      const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& out, const Tensor& lse, const std::string& method,
                                      int64_t train_context, std::vector<std::string> names,
                                      std::vector<double> values, const std::optional<Tensor>& head_scale,
                                      std::vector<Tensor> learned) {
  const Inputs in = inputs(q, method, train_context, names, values, head_scale, learned);
  const auto g = attention::fused_attention_cpu_backward(
      rotate(q, in.rotary), rotate(k, in.rotary), v, out, lse, grad_out,
      grad_lse ? *grad_lse : Tensor(), in.mod, in.head_scale, in.alibi, in.bias_table);
  const Tensor dhead = head_scale ? g.dhead_scale.to(head_scale->scalar_type()) : q.new_empty({0});
  return {unrotate(g.dq, in.rotary), unrotate(g.dk, in.rotary), g.dv, dhead,
          learned_gradients(in, learned, g.dbias_table)};
}

#ifdef SCALE_INVARIANT_WITH_CUDA
// The CUDA kernels: float32 or bfloat16, D ∈ {64, 128}; the per-head tensors in float32.
std::tuple<Tensor, Tensor> attention_with_lse_cuda(const Tensor& q, const Tensor& k, const Tensor& v,
                                                   const std::string& method, int64_t train_context,
                                                   std::vector<std::string> names, std::vector<double> values,
                                                   const std::optional<Tensor>& head_scale,
                                                   std::vector<Tensor> learned) {
  const Inputs in = inputs(q, method, train_context, names, values, head_scale, learned);
  auto f32 = [](const Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  const auto f = attention::cuda::fused_attention_forward_pass(
      rotate(q, in.rotary), rotate(k, in.rotary), v, in.mod, f32(in.head_scale), f32(in.alibi), f32(in.bias_table));
  return {f.o, f.lse};  // LSE in float32 whatever q's dtype (the fake implementation says so)
}

BackwardResult attention_backward_cuda(const Tensor& grad_out, const std::optional<Tensor>& grad_lse,
                                       const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, const std::string& method,
                                       int64_t train_context, std::vector<std::string> names,
                                       std::vector<double> values, const std::optional<Tensor>& head_scale,
                                       std::vector<Tensor> learned) {
  TORCH_CHECK(!grad_lse || !grad_lse->defined() || !grad_lse->ne(0).any().item<bool>(),
              "scale_invariant.attention: the CUDA kernels have no gradient for lse");
  const Inputs in = inputs(q, method, train_context, names, values, head_scale, learned);
  auto f32 = [](const Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  const Tensor qr = rotate(q, in.rotary), kr = rotate(k, in.rotary);
  // With a head scale, the backward needs a row statistic of the forward pass: rerun it (only then).
  attention::cuda::ForwardPass f;
  if (in.head_scale.defined())
    f = attention::cuda::fused_attention_forward_pass(qr, kr, v, in.mod, f32(in.head_scale), f32(in.alibi),
                                                      f32(in.bias_table));
  else
    f = {out, lse.to(torch::kFloat32), Tensor()};
  const auto g = attention::cuda::fused_attention_backward_pass(
      qr, kr, v, f, grad_out, in.mod, f32(in.head_scale), f32(in.alibi), f32(in.bias_table));
  const Tensor dhead = head_scale ? g.dhead_scale.to(head_scale->scalar_type()) : q.new_empty({0});
  return {unrotate(g.dq, in.rotary), unrotate(g.dk, in.rotary), g.dv, dhead,
          learned_gradients(in, learned, g.dbias_table)};
}
#endif

Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, const std::string& method,
                           int64_t train_context, std::vector<std::string> names, std::vector<double> values,
                           const std::optional<Tensor>& head_scale, std::vector<Tensor> learned) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("scale_invariant::attention_with_lse", "")
                             .typed<decltype(attention_with_lse_cpu)>();
  return std::get<0>(op.call(q, k, v, method, train_context, std::move(names), std::move(values),
                             head_scale, std::move(learned)));
}

std::vector<std::string> presets() { return attention::preset_names(); }
std::vector<std::string> parameter_names() {
  std::vector<std::string> names;
  for (const auto& p : attention::parameters()) names.emplace_back(p.name);
  return names;
}

}  // namespace

// Lists of strings and tensors have no defaults in a schema: the Python wrapper fills them in.
#define SCALE_INVARIANT_ARGS                                                                     \
  "str method, int train_context, str[] parameter_names, float[] parameter_values, "             \
  "Tensor? head_scale, Tensor[] learned"

TORCH_LIBRARY(scale_invariant, m) {
  m.set_python_module("scale_invariant_attention");
  m.def("attention(Tensor q, Tensor k, Tensor v, " SCALE_INVARIANT_ARGS ") -> Tensor");
  m.def("attention_with_lse(Tensor q, Tensor k, Tensor v, " SCALE_INVARIANT_ARGS ") -> (Tensor, Tensor)");
  m.def("attention_backward(Tensor grad_out, Tensor? grad_lse, Tensor q, Tensor k, Tensor v, "
        "Tensor out, Tensor lse, " SCALE_INVARIANT_ARGS ") -> (Tensor, Tensor, Tensor, Tensor, Tensor[])");
  m.def("presets() -> str[]", &presets);
  m.def("parameter_names() -> str[]", &parameter_names);
}

TORCH_LIBRARY_IMPL(scale_invariant, CompositeImplicitAutograd, m) {
  m.impl("attention", &attention_composite);
}

TORCH_LIBRARY_IMPL(scale_invariant, CPU, m) {
  m.impl("attention_with_lse", &attention_with_lse_cpu);
  m.impl("attention_backward", &attention_backward_cpu);
}

#ifdef SCALE_INVARIANT_WITH_CUDA
TORCH_LIBRARY_IMPL(scale_invariant, CUDA, m) {
  m.impl("attention_with_lse", &attention_with_lse_cuda);
  m.impl("attention_backward", &attention_backward_cuda);
}
#endif
