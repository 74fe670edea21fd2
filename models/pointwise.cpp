// Compiled with -fopenmp -fno-trapping-math (models/CMakeLists.txt): at::parallel_for's OpenMP
// backend is header code, serial in a TU without the flag; `omp simd` vectorises the row
// reductions, and without FP traps GCC vectorises the selects.
#include <ATen/record_function.h>
#include "models/pointwise.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace models {

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool fusable(const Tensor& x) {
  return x.device().is_cpu() && x.layout() == at::kStrided &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) && x.dim() >= 1 &&
         x.numel() > 0;
}

// Element offset of row r of x seen as (rows, D), whatever the strides of the leading dims.
struct RowOffset {
  explicit RowOffset(const Tensor& x)
      : sizes(x.sizes().begin(), x.sizes().end() - 1),
        strides(x.strides().begin(), x.strides().end() - 1) {}
  int64_t operator()(int64_t r) const {
    int64_t off = 0;
    for (size_t i = sizes.size(); i-- > 0;) {
      off += (r % sizes[i]) * strides[i];
      r /= sizes[i];
    }
    return off;
  }
  std::vector<int64_t> sizes, strides;
};

int64_t grain_rows(int64_t D) { return std::max<int64_t>(1, 16384 / D); }

// One row: y = x·s, returns s = (mean(x²) + eps)^(-1/2).
template <typename scalar_t>
scalar_t rms_norm_row(const scalar_t* __restrict x, scalar_t* __restrict y, int64_t D,
                      scalar_t eps) {
  scalar_t ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < D; ++j) ss += x[j] * x[j];
  const scalar_t s = scalar_t(1) / std::sqrt(ss / scalar_t(D) + eps);
#pragma omp simd
  for (int64_t j = 0; j < D; ++j) y[j] = x[j] * s;
  return s;
}

// One row of the backward: dx = s·(g − y·mean(g·y)).
template <typename scalar_t>
void rms_norm_row_backward(const scalar_t* __restrict y, const scalar_t* __restrict g, scalar_t s,
                           scalar_t* __restrict dx, int64_t D) {
  scalar_t dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < D; ++j) dot += g[j] * y[j];
  const scalar_t c = dot / scalar_t(D);
#pragma omp simd
  for (int64_t j = 0; j < D; ++j) dx[j] = s * (g[j] - y[j] * c);
}

constexpr int64_t kElementGrain = 32768;

struct RMSNormFunction : public torch::autograd::Function<RMSNormFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x_in, double eps) {
    const Tensor x = x_in.stride(-1) == 1 ? x_in : x_in.contiguous();
    const int64_t D = x.size(-1), rows = x.numel() / D;
    Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    Tensor inv = at::empty({rows}, x.options());  // 1/sqrt(mean(x²) + eps) per row
    const RowOffset offset(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      scalar_t* ip = inv.data_ptr<scalar_t>();
      at::parallel_for(0, rows, grain_rows(D), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          ip[r] = rms_norm_row(xp + offset(r), yp + r * D, D, scalar_t(eps));
      });
    });
    ctx->save_for_backward({y, inv});
    return y;
  }

  // y = x·s with s = (mean(x²) + eps)^(-1/2):  dx = s·(g − y·mean(g·y)).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &y = saved[0], &inv = saved[1];
    const Tensor g = grads[0].contiguous();
    const int64_t D = y.size(-1), rows = y.numel() / D;
    Tensor dx = at::empty_like(y);
    AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "rms_norm_backward", [&] {
      const scalar_t* yp = y.data_ptr<scalar_t>();
      const scalar_t* gp = g.data_ptr<scalar_t>();
      const scalar_t* ip = inv.data_ptr<scalar_t>();
      scalar_t* dp = dx.data_ptr<scalar_t>();
      at::parallel_for(0, rows, grain_rows(D), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          rms_norm_row_backward(yp + r * D, gp + r * D, ip[r], dp + r * D, D);
      });
    });
    return {dx, Tensor()};
  }
};

// Element-wise loops over [begin, end). They vectorise only with -fno-trapping-math (set for
// this file): GCC does not if-convert the select otherwise, and the scalar loop was 10x slower.
template <typename scalar_t>
void relu_squared_forward(const scalar_t* __restrict x, scalar_t* __restrict y, int64_t begin,
                          int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const scalar_t r = x[i] < scalar_t(0) ? scalar_t(0) : x[i];  // NaN stays NaN
    y[i] = r * r;
  }
}

template <typename scalar_t>
void relu_squared_backward(const scalar_t* __restrict x, const scalar_t* __restrict g,
                           scalar_t* __restrict dx, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const scalar_t d = scalar_t(2) * x[i] * g[i];  // loads outside the select, so it vectorises
    dx[i] = x[i] <= scalar_t(0) ? scalar_t(0) : d;  // 0 where x <= 0 even for g = inf, as ATen
  }
}

struct ReluSquaredFunction : public torch::autograd::Function<ReluSquaredFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x_in) {
    const Tensor x = x_in.contiguous();
    Tensor y = at::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu_squared", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      at::parallel_for(0, x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
        relu_squared_forward(xp, yp, begin, end);
      });
    });
    ctx->save_for_backward({x});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor x = ctx->get_saved_variables()[0];
    const Tensor g = grads[0].contiguous();
    Tensor dx = at::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu_squared_backward", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      const scalar_t* gp = g.data_ptr<scalar_t>();
      scalar_t* dp = dx.data_ptr<scalar_t>();
      at::parallel_for(0, x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
        relu_squared_backward(xp, gp, dp, begin, end);
      });
    });
    return {dx};
  }
};

}  // namespace

Tensor rms_norm_composed(const Tensor& x, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

Tensor relu_squared_composed(const Tensor& x) { return at::relu(x).square(); }

Tensor rms_norm(const Tensor& x, double eps) {
  // bfloat16 / half (mixed precision): the statistics in float32, as autocast runs norms.
  if (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf)
    return rms_norm(x.to(at::kFloat), eps).to(x.scalar_type());
  // A named event for the profiler (the step breakdown, bench/step_breakdown_bench.cpp): the
  // fused forward is no ATen op. Nothing is recorded, and the input not read, without a profiler.
  RECORD_FUNCTION("model.rms_norm", std::vector<c10::IValue>({x}));
  return fusable(x) ? RMSNormFunction::apply(x, eps) : rms_norm_composed(x, eps);
}

Tensor relu_squared(const Tensor& x) {
  RECORD_FUNCTION("model.relu_squared", std::vector<c10::IValue>({x}));
  return fusable(x) ? ReluSquaredFunction::apply(x) : relu_squared_composed(x);
}

}  // namespace models
