// apply_rotary as one pass over memory each way (method_tensors.h). Compiled with -fopenmp
// -fno-trapping-math (attention/CMakeLists.txt), as the fused kernel is.
//
// Half-split pairs (x[k], x[k + D/2]) rotate by the angle of position t:
//   y1 = x1·cos − x2·sin,  y2 = x1·sin + x2·cos;   backward (the inverse rotation):
//   dx1 = g1·cos + g2·sin, dx2 = −g1·sin + g2·cos.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "attention/method_tensors.h"

namespace attention {

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One row of D = 2·half values at one position; sign = +1 rotates forward, −1 backward.
template <typename scalar_t>
void rotate_row(const scalar_t* __restrict x, const scalar_t* __restrict c,
                const scalar_t* __restrict s, scalar_t sign, scalar_t* __restrict y,
                int64_t half) {
#pragma omp simd
  for (int64_t k = 0; k < half; ++k) {
    const scalar_t x1 = x[k], x2 = x[k + half], sk = sign * s[k];
    y[k] = x1 * c[k] - x2 * sk;
    y[k + half] = x1 * sk + x2 * c[k];
  }
}

// x: (..., T, D) contiguous; cos, sin: (T, D/2) contiguous, x's dtype.
Tensor rotate(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse) {
  const int64_t D = x.size(-1), T = x.size(-2), half = D / 2, rows = x.numel() / D;
  Tensor y = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "apply_rotary_fused", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* cp = cos.data_ptr<scalar_t>();
    const scalar_t* sp = sin.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    const scalar_t sign = inverse ? scalar_t(-1) : scalar_t(1);
    at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / D), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t t = r % T;
        rotate_row(xp + r * D, cp + t * half, sp + t * half, sign, yp + r * D, half);
      }
    });
  });
  return y;
}

struct RotaryFunction : public torch::autograd::Function<RotaryFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& cos,
                        const Tensor& sin) {
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    return rotate(x.contiguous(), cos, sin, /*inverse=*/false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor dx = rotate(grads[0].contiguous(), ctx->saved_data["cos"].toTensor(),
                             ctx->saved_data["sin"].toTensor(), /*inverse=*/true);
    return {dx, Tensor(), Tensor()};
  }
};

}  // namespace

Tensor apply_rotary_fused(const Tensor& x, const RotaryTables& tables) {
  if (!tables.defined()) return x;
  const bool fusable = x.device().is_cpu() && x.layout() == at::kStrided && x.dim() >= 2 &&
                       x.numel() > 0 &&
                       (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) &&
                       x.size(-1) % 2 == 0 && tables.cos.device().is_cpu() &&
                       tables.cos.dim() == 2 && tables.cos.size(0) == x.size(-2) &&
                       tables.cos.size(1) == x.size(-1) / 2 &&
                       tables.sin.sizes() == tables.cos.sizes();
  if (!fusable) return apply_rotary(x, tables);
  const auto as_x = [&](const Tensor& t) { return t.to(x.scalar_type()).contiguous(); };
  return RotaryFunction::apply(x, as_x(tables.cos), as_x(tables.sin));
}

}  // namespace attention
