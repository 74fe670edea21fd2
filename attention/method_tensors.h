// The tensors a method gives a module or kernel: rotary cos/sin tables and the rotation itself,
// and ALiBi slopes (a learned distance bias's table: learned_bias.h). Apart from method.h, which stays
// torch-free so that torch-free code (the CUDA kernels' own test) resolves methods from the same
// registry rows as a run.
#pragma once

#include "attention/method.h"

#include <torch/types.h>

namespace attention {

// cos/sin of i·freq_k for positions i < T: both (T, D/2), in `options`' dtype, computed in float64
// on `options`' device (no host tensor, no host→device copy: safe inside a CUDA step). Undefined
// tensors when the method has no rotary encoding.
struct RotaryTables {
  torch::Tensor cos;  // (T, D/2)
  torch::Tensor sin;  // (T, D/2)
  bool defined() const { return cos.defined(); }
};
RotaryTables rotary_tables(const Method& method, int64_t T, const torch::TensorOptions& options);
// x: (..., T, D) → rotated x (differentiable); returns x itself for undefined tables.
// Composed from ATen ops: the reference kernel's (and the tests') form.
torch::Tensor apply_rotary(const torch::Tensor& x, const RotaryTables& tables);
// The same rotation in one pass forward and one backward (rotary_fused.cpp) for CPU float32 /
// float64; contiguous out (its backward is not itself differentiable). Other devices and dtypes
// take apply_rotary.
torch::Tensor apply_rotary_fused(const torch::Tensor& x, const RotaryTables& tables);

// ALiBi slopes as a (H) tensor made on `options`' device and in its dtype (no host→device copy),
// undefined for other methods; without options a float64 CPU tensor (the CPU kernels cast).
torch::Tensor alibi_slope_tensor(const Method& method, const torch::TensorOptions& options);
torch::Tensor alibi_slope_tensor(const Method& method);

}  // namespace attention
