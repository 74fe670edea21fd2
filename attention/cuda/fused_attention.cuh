// Fused causal attention for CUDA (FlashAttention-2 style): the host API. Plain C++ and the CUDA
// runtime only (no torch), so that both the torch binding and torch-free tests can call it.
//
// For query i, key j <= i, distance t = i - j and head h the kernels compute, in fp32 registers,
//
//     logit(i, j) = multiplier(i, t, h) · scale · q_i·k_j + bias(t, h) + query_bias(i, t, h)
//                                                                          (attention/score_mod.h)
//     P(i, j)     = exp(logit(i, j) − lse_i),   lse_i = log Σ_{j<=i} exp(logit(i, j))
//     o_i         = Σ_j P(i, j) · v_j
//
// tile by tile with an online softmax, never materialising the T×T matrix. Backward recomputes P
// from the saved lse and uses dLogit = P ⊙ (dP − rowsum(dO ⊙ O)), dP = dO·Vᵀ; the gradient of
// q·k is multiplier · scale · dLogit, and that of the learned head scale is
// Σ_{i,j} fixed_multiplier · scale · q·k · dLogit, computed in the equivalent form
// Σ_i Σ_j P_ij (c_ij − Σ_k P_ik c_ik) dP_ij with c = fixed_multiplier · scale · q·k.
//
// A FIRE table (has_query_bias(mod)) takes a second instantiation of every kernel (a compile-time
// branch), so that distance-only methods run the same code as without it: per tile pair ψ(t) is
// tabulated beside the distance terms, per query row the normaliser, and the head's table row
// lives in shared memory, as does its gradient in the backward pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "attention/cuda/kernel_limits.h"
#include "attention/score_mod.h"

namespace attention::cuda {

// Element type of q, k, v, o, dO, dq, dk, dv (the kernels accumulate in fp32 either way).
enum class DType : int {
  kFloat32 = 0,
  kBFloat16 = 1,
};

// One call's tensors: raw device pointers into contiguous buffers. Every (B, H, T, D) buffer must be
// 16-byte aligned (the kernels move 4 elements at a time).
struct FusedArgs {
  int batch = 0;      // B
  int heads = 0;      // H (B·H ≤ 65535)
  int seq_len = 0;    // T ≥ 1 (any value; 0 is a no-op)
  int head_dim = 0;   // D ∈ {64, 128}
  DType dtype = DType::kFloat32;
  // The logit transform. mod.head_scale and mod.alibi_slope, when set, are DEVICE pointers to
  // (H) float32 arrays; mod.bias_table a DEVICE pointer to (H, mod.bias_table_len) float32:
  // bias_table_len >= T for TableIndex::kDistance, G + 2 with 2 <= G <= kMaxFireGrid
  // (kernel_limits.h) for TableIndex::kFire.
  ScoreMod mod;

  // Forward inputs; backward inputs too.
  const void* q = nullptr;  // (B, H, T, D)
  const void* k = nullptr;  // (B, H, T, D)
  const void* v = nullptr;  // (B, H, T, D)
  // Forward outputs; backward inputs.
  void* o = nullptr;        // (B, H, T, D)
  float* lse = nullptr;     // (B, H, T) float32: per-row log-sum-exp of the logits
  // (B, H, T) float32, used only when mod.head_scale is set: per-row mean under P of the "fixed
  // logit" c_ij = fixed_multiplier · scale · q_i·k_j (the part of the logit head_scale multiplies).
  // Lets backward write dhead_scale as Σ_ij P_ij (c_ij − mean_i) dP_ij, free of the rounding of o
  // to bf16. Forward writes it when non-null; backward needs it when dhead_scale is requested.
  float* fixed_logit_mean = nullptr;

  // Backward only.
  const void* d_o = nullptr;     // (B, H, T, D) gradient of the loss w.r.t. o
  void* dq = nullptr;            // (B, H, T, D) output
  void* dk = nullptr;            // (B, H, T, D) output
  void* dv = nullptr;            // (B, H, T, D) output
  float* dhead_scale = nullptr;  // (H) float32 output, or null. Overwritten (zeros when
                                 // mod.head_scale is null).
  // (H, bias_gradient_len(*this)) float32 output, or null: d loss/d mod.bias_table. For a
  // distance table (H, T): Σ over batch rows and queries i of d loss/d logit(i, i − t), the
  // gradient of the entry at distance t; for a FIRE table (H, G + 2): the gradient of f's grid
  // points, c and L (score_mod.h: fire_pair_gradient). Overwritten (zeros when mod.bias_table is
  // null).
  float* dbias_table = nullptr;
  void* workspace = nullptr;     // fused_attention_backward_workspace_bytes(args) bytes of device
                                 // memory, 256-byte aligned; contents need no initialisation
};

// Whether the kernels support this head dim / element type.
bool fused_attention_supported(int head_dim, DType dtype);

// Entries per head of dbias_table: the FIRE table's row length G + 2, else T.
inline int bias_gradient_len(const FusedArgs& args) {
  return has_query_bias(args.mod) ? args.mod.bias_table_len : args.seq_len;
}

// Writes o, lse and (when non-null and mod.head_scale is set) fixed_logit_mean. Asynchronous on `stream`; returns launch / argument errors
// (cudaErrorInvalidValue for unsupported shapes, FIRE table lengths or missing pointers).
cudaError_t fused_attention_forward(const FusedArgs& args, cudaStream_t stream);

// Scratch the backward pass needs: the per-row rowsum(dO ⊙ O), and an fp32 dq accumulator when the
// element type is bf16.
std::size_t fused_attention_backward_workspace_bytes(const FusedArgs& args);

// Writes dq, dk, dv, dhead_scale and dbias_table from q, k, v, o, lse, fixed_logit_mean (of the forward pass)
// and d_o. Asynchronous on `stream`.
cudaError_t fused_attention_backward(const FusedArgs& args, cudaStream_t stream);

#if defined(__CUDACC__)
// What both kernels' FIRE paths share. One entry of d loss/d table in shared memory:
// fire_pair_gradient and fire_row_gradient (score_mod.h) add to it through shared-memory atomics
// (the pairs of many threads fall on the same grid points).
struct SharedAtomic {
  float value;
  __device__ explicit SharedAtomic(float x) : value(x) {}
  __device__ void operator+=(SharedAtomic x) { atomicAdd(&value, x.value); }
  __device__ void operator-=(SharedAtomic x) { atomicAdd(&value, -x.value); }
};
static_assert(sizeof(SharedAtomic) == sizeof(float), "a float in shared memory");

// Floats of shared memory for one FIRE table row (G + 2), rounded up to 16 bytes (float4 alignment).
__host__ __device__ inline size_t fire_row_floats(const ScoreMod& mod) {
  return (static_cast<size_t>(mod.bias_table_len) + 3) / 4 * 4;
}

// A block's d loss/d FIRE table, summed in shared memory, into the head's row of the (H, G + 2)
// output. Called by every thread of the block.
template <int kThreads>
__device__ __forceinline__ void flush_fire_gradient(float* dtable, int head, int G, const SharedAtomic* grad) {
  __syncthreads();  // every pair's and row's part is in grad
  float* target = dtable + static_cast<size_t>(head) * (G + 2);
  for (int n = threadIdx.x; n < G + 2; n += kThreads) {
    const float value = grad[n].value;
    if (value != 0.f) atomicAdd(target + n, value);
  }
}
#endif

}  // namespace attention::cuda
