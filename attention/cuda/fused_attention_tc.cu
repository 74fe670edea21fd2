// Fused causal attention for bf16 on tensor cores (sm_80+): FlashAttention-2's algorithm on
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (inline PTX), with the score_mod.h logit
// transform applied to the fp32 accumulator fragments. fused_attention.cu dispatches here for bf16
// on sm_80+; the SIMT kernels there serve fp32 and older devices. Same inputs, outputs and
// workspace as the SIMT path (fused_attention.cuh).
//
// Block: 4 warps (128 threads); tiles of 64 queries × 64 keys; D ∈ {64, 128}. Index arithmetic of
// fragments, ldmatrix addresses, swizzle and tile ranges: mma_fragments.cuh (checked on the host
// by mma_layout_test.cpp).
//
// Forward, one block per (64-query tile, batch·head): warp w owns query rows 16w .. 16w + 15 of
// the tile, held in registers as A fragments for the whole pass. Key and value tiles stream
// through shared memory with cp.async, double buffered (tile n + 1 loads while tile n is used),
// in bf16 with a 16-byte-chunk XOR swizzle, and reach the MMAs through ldmatrix (.trans for V).
// Per key tile: S = Q·Kᵀ (fp32 accumulators), logit = row_coef · factor(t) · S + bias(t) per
// element, the mask only on tiles that need one (the diagonal tile, ragged tiles), the online
// softmax in fp32 (row max / row sum across the 4 lanes sharing a row: two xor shuffles), then P
// rounded to bf16 and re-packed from the accumulator layout into A fragments for O += P·V. Tiles
// above the diagonal are never visited.
//
// Backward, one block per (64-key tile, batch·head): warp w owns key rows 16w .. 16w + 15 and
// accumulates their dK and dV in registers over the query tiles at and below the diagonal. Q and
// dO tiles stream through shared memory (cp.async, double buffered). Per query tile and per chunk
// of 16 queries, a warp forms the transposed products Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for its 16 keys,
// recomputes P from the saved lse, dS = P ⊙ (dP − D_i) · multiplier · scale, and adds
// dV += Pᵀ·dO and dK += dSᵀ·Q with the chunk as the k of one MMA (Pᵀ, dSᵀ re-packed from the
// accumulators, bf16). dSᵀ also goes to shared memory; after the chunks, warp w forms dQ of query
// rows 16w .. 16w + 15 as dS·K (dS read back with ldmatrix.trans) and adds it with fp32 atomics.
//
// FIRE (has_query_bias) is the kernels' kQueryBias instantiation, as in the SIMT kernels, so that
// distance-only methods run the code they ran without it: ψ(t) double buffered beside the distance
// tables, the normaliser per query row (forward: registers; backward: double buffered in shared
// memory), the head's table row in shared memory, the bias added to `bias` before tc_logit. The
// backward pass scatters d loss/d table onto the grid in shared memory and gathers each query row's
// sums for c and L over the warps in shared memory too (fire_row_gradient once per row and tile).
#include "attention/cuda/fused_attention_tc.cuh"

#include <cuda_bf16.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "attention/cuda/fused_attention.cuh"
#include "attention/cuda/mma_fragments.cuh"
#include "attention/score_mod.h"

namespace attention::cuda::tc {
namespace {

using namespace attention::cuda::mma;
using bf16 = __nv_bfloat16;

constexpr float kNegInf = -__builtin_huge_valf();

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_80+; the kernels compile to a trap below sm_80 and are never launched there).

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronous; zero-filled (nothing read) when !valid.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// d += A·B for one 16 × 8 × 16 tile: a = A fragment, (b0, b1) = B fragment, d = C fragment.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two floats as a bf16 pair: `lo` (the lower column index) in the low 16 bits, as fragments and
// row-major memory both hold them.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// A fragments of a 16 × 16 tile from the C fragments c[0] (columns 0–7) and c[1] (8–15), rounded
// to bf16: register r holds A elements 2r, 2r + 1 (mma::a_from_c_block / a_from_c_elem).
__device__ __forceinline__ void pack_a_from_c(uint32_t (&a)[4], const float (&c0)[4],
                                              const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Shared-memory tiles.

// Issues the cp.async copy of rows [row0, row0 + 64) of one head's (T, D) bf16 matrix into a
// swizzled (64, D) tile; rows at or past T are zero-filled. All threads call it.
template <int D>
__device__ __forceinline__ void load_tile_async(bf16* tile, const bf16* head, int row0, int seq_len) {
  constexpr int kChunks = kTileK * D / 8;
  static_assert(kChunks % kThreads == 0, "whole passes");
  const uint32_t base = smem_u32(tile);
#pragma unroll
  for (int pass = 0; pass < kChunks / kThreads; ++pass) {
    const int index = pass * kThreads + static_cast<int>(threadIdx.x);
    const int r = copy_row<D>(index);
    const int col = copy_col<D>(index);
    const int row = row0 + r;
    const bool valid = row < seq_len;
    const bf16* src = head + static_cast<size_t>(valid ? row : 0) * D + col;  // row 0 exists
    cp_async16(base + 2u * static_cast<uint32_t>(swizzled<D>(r, col)), src, valid);
  }
}

// Distance terms of the tile pair (i0, j0): entry d for t = distance_of_entry(d, i0, j0), clamped
// (table_distance) for the entries no visible pair reads (t < 0, t ≥ T).
__device__ __forceinline__ void fill_distance_table(float* factor, float* bias, const ScoreMod& mod,
                                                    int i0, int j0, int head, int seq_len) {
  for (int d = threadIdx.x; d < kDistances; d += kThreads) {
    const int t = table_distance(distance_of_entry(d, i0, j0), seq_len);
    factor[d] = distance_factor<float>(mod, t);
    bias[d] = distance_bias<float>(mod, t, head);
  }
}

// ---------------------------------------------------------------------------------------------
// FIRE (the kQueryBias instantiations only).

// ψ(t) of the FIRE table for the entries of fill_distance_table (same distances, same clamping).
__device__ __forceinline__ void fill_psi_table(float* psi, const FireRow<float>& fire, int i0, int j0,
                                               int seq_len) {
  for (int d = threadIdx.x; d < kDistances; d += kThreads)
    psi[d] = fire.psi(static_cast<float>(table_distance(distance_of_entry(d, i0, j0), seq_len)));
}

// Copies the head's table row to shared memory (and zeroes its gradient there, when given).
__device__ __forceinline__ void stage_fire_row(float* row, SharedAtomic* grad, const FireRow<float>& fire) {
  for (int n = threadIdx.x; n < fire.G + 2; n += kThreads) {
    row[n] = fire.f[n];
    if (grad) grad[n].value = 0.f;
  }
}

// ---------------------------------------------------------------------------------------------
// Forward.

template <int D>
constexpr size_t forward_smem_bytes() {
  return sizeof(bf16) * 5 * kTileK * D                // q, k[2], v[2]
         + sizeof(float) * 2 * 2 * kDistanceTableLen;  // factor[2], bias[2]
}

// What the kQueryBias instantiation adds at the end: ψ[2], the table row.
size_t fire_forward_smem_bytes(const ScoreMod& mod) {
  return sizeof(float) * (2 * kDistanceTableLen + fire_row_floats(mod));
}

// Grid: (ceil(T / 64), B·H). kTrackFixed: also the P-weighted mean of the fixed logit (for the
// head-scale gradient). kQueryBias: mod has a FIRE table (has_query_bias), added per pair.
template <int D, bool kTrackFixed, bool kQueryBias>
__global__ void __launch_bounds__(kThreads)
    tc_forward_kernel(const bf16* __restrict__ q,  // (B, H, T, D)
                      const bf16* __restrict__ k,  // (B, H, T, D)
                      const bf16* __restrict__ v,  // (B, H, T, D)
                      bf16* __restrict__ o,        // (B, H, T, D)
                      float* __restrict__ lse,     // (B, H, T)
                      float* __restrict__ fixed_logit_mean,  // (B, H, T) when kTrackFixed
                      int heads, int seq_len, ScoreMod mod) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kTileElems = kTileK * D;
  constexpr int kKSlices = D / 16;         // k-steps of Q·Kᵀ
  constexpr int kKeyBlocks = kTileK / 8;   // n-blocks of S (8 keys each)
  constexpr int kDimBlocks = D / 8;        // n-blocks of O (8 columns each)

  extern __shared__ __align__(128) unsigned char tc_smem[];
  bf16* q_s = reinterpret_cast<bf16*>(tc_smem);  // (64, D)
  bf16* k_s = q_s + kTileElems;                  // [2] (64, D)
  bf16* v_s = k_s + 2 * kTileElems;              // [2] (64, D)
  float* factor_s = reinterpret_cast<float*>(v_s + 2 * kTileElems);  // [2] (kDistanceTableLen)
  float* bias_s = factor_s + 2 * kDistanceTableLen;                  // [2] (kDistanceTableLen)
  float* psi_s = bias_s + 2 * kDistanceTableLen;      // [2] (kDistanceTableLen) ψ(t), kQueryBias only
  float* fire_f = psi_s + 2 * kDistanceTableLen;      // (G + 2) the head's FIRE row, kQueryBias only

  // Causal work grows with the query tile: launch the longest first.
  const int q_tile = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int i0 = q_tile * kTileQ;
  const int batch_head = blockIdx.y;
  const int head = batch_head % heads;
  const size_t head_offset = static_cast<size_t>(batch_head) * seq_len * D;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = warp * kWarpRows;  // first tile row of this warp

  // This lane's two rows: local rows warp_row0 + c_row(lane, 2h), h = 0, 1 (accumulator elements
  // 2h, 2h + 1). Their multiplier without the distance factor, scale folded in (as the SIMT
  // kernel): row_coef = head_scale · row_factor(i) · scale, row_fixed = row_factor(i) · scale.
  const float head_scale = mod.head_scale ? mod.head_scale[head] : 1.f;
  float row_coef[2], row_fixed[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float factor = row_factor<float>(mod, i0 + warp_row0 + c_row(lane, 2 * h));
    row_coef[h] = head_scale * factor * mod.scale;
    row_fixed[h] = factor * mod.scale;
  }
  // FIRE: the table row read per pair in shared memory (visible after tile 0's barrier), the
  // normalisers of this lane's two rows in registers.
  const FireRow<float> fire = fire_row(mod, head);  // global memory: tables and row terms
  const FireRow<float> fire_s{fire_f, fire.G};      // shared memory: per pair
  float row_norm[2];
  if constexpr (kQueryBias) {
    stage_fire_row(fire_f, nullptr, fire);
#pragma unroll
    for (int h = 0; h < 2; ++h) row_norm[h] = fire.norm(i0 + warp_row0 + c_row(lane, 2 * h));
  }

  const int n_tiles = fwd_key_tiles(q_tile, seq_len);
  load_tile_async<D>(q_s, q + head_offset, i0, seq_len);
  load_tile_async<D>(k_s, k + head_offset, 0, seq_len);
  load_tile_async<D>(v_s, v + head_offset, 0, seq_len);
  cp_async_commit();
  fill_distance_table(factor_s, bias_s, mod, i0, 0, head, seq_len);
  if constexpr (kQueryBias) fill_psi_table(psi_s, fire, i0, 0, seq_len);

  uint32_t q_frag[kKSlices][4];  // this warp's 16 query rows as A fragments, loaded at tile 0
  float o_acc[kDimBlocks][4];    // unnormalised output, fp32
  float row_max[2] = {kNegInf, kNegInf};
  float row_sum[2] = {0.f, 0.f};    // this lane's part of Σ exp(logit − max) (its 16 columns)
  float fixed_sum[2] = {0.f, 0.f};  // ... and of Σ exp(logit − max) · fixed logit
#pragma unroll
  for (int b = 0; b < kDimBlocks; ++b) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[b][e] = 0.f;
  }

  for (int n = 0; n < n_tiles; ++n) {
    const int buf = n & 1;
    const int j0 = n * kTileK;
    if (n + 1 < n_tiles) {  // prefetch tile n + 1 into the other buffer
      load_tile_async<D>(k_s + (buf ^ 1) * kTileElems, k + head_offset, j0 + kTileK, seq_len);
      load_tile_async<D>(v_s + (buf ^ 1) * kTileElems, v + head_offset, j0 + kTileK, seq_len);
      cp_async_commit();
      fill_distance_table(factor_s + (buf ^ 1) * kDistanceTableLen,
                          bias_s + (buf ^ 1) * kDistanceTableLen, mod, i0, j0 + kTileK, head, seq_len);
      if constexpr (kQueryBias)
        fill_psi_table(psi_s + (buf ^ 1) * kDistanceTableLen, fire, i0, j0 + kTileK, seq_len);
      cp_async_wait<1>();  // tile n (and q) landed; tile n + 1 may still be in flight
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // every thread's copies of tile n, and the tables of tile n, are visible

    if (n == 0) {
      const uint32_t q_base = smem_u32(q_s);
#pragma unroll
      for (int s = 0; s < kKSlices; ++s) {
        ldsm_x4(q_frag[s], q_base + 2u * swizzled<D>(warp_row0 + ldsm_a_row(lane), 16 * s + ldsm_a_col(lane)));
      }
    }

    // S = Q·Kᵀ for this warp's 16 rows × 64 keys.
    const uint32_t k_base = smem_u32(k_s + buf * kTileElems);
    float s_acc[kKeyBlocks][4];
#pragma unroll
    for (int b = 0; b < kKeyBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s_acc[b][e] = 0.f;
    }
#pragma unroll
    for (int s = 0; s < kKSlices; ++s) {
#pragma unroll
      for (int p = 0; p < kKeyBlocks / 2; ++p) {
        uint32_t b[4];  // B fragments of key blocks 2p (b[0], b[1]) and 2p + 1 (b[2], b[3])
        ldsm_x4(b, k_base + 2u * swizzled<D>(16 * p + ldsm_b_row(lane), 16 * s + ldsm_b_col(lane)));
        mma_bf16(s_acc[2 * p], q_frag[s], b[0], b[1]);
        mma_bf16(s_acc[2 * p + 1], q_frag[s], b[2], b[3]);
      }
    }

    // Logits and the tile's row maxima. Without kTrackFixed the logits replace S in place; with it,
    // S is kept and the second pass recomputes each logit (same expression, same value) beside
    // the fixed logit, rather than holding 32 more registers.
    const float* factor_t = factor_s + buf * kDistanceTableLen;
    const float* bias_t = bias_s + buf * kDistanceTableLen;
    const float* psi_t = psi_s + buf * kDistanceTableLen;
    const bool masked = tile_needs_mask(i0, j0, seq_len);
    float tile_max[2] = {kNegInf, kNegInf};
#pragma unroll
    for (int b = 0; b < kKeyBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = warp_row0 + c_row(lane, e);  // local query row
        const int c = 8 * b + c_col(lane, e);      // local key
        const int d = distance_index(r, c);
        float bias = bias_t[d];
        if constexpr (kQueryBias) bias += fire_s.bias(psi_t[d], row_norm[e >> 1]);
        float logit = tc_logit(row_coef[e >> 1], factor_t[d], bias, s_acc[b][e]);
        if (masked && !pair_visible(i0 + r, j0 + c, seq_len)) logit = kNegInf;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], logit);
        if constexpr (!kTrackFixed) s_acc[b][e] = logit;
      }
    }

    // Online softmax: new running max per row (its 4 lanes agree), rescale what came before.
    float shift[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float new_max = fmaxf(row_max[h], quad_max(tile_max[h]));
      // A real row sees key 0 in tile 0, so new_max is finite; padding rows (i ≥ T) see none and
      // stay at −inf: shift 0 keeps exp() away from (−inf) − (−inf).
      shift[h] = new_max == kNegInf ? 0.f : new_max;
      const float correction = expf(row_max[h] - shift[h]);  // 0 on the first tile
      row_max[h] = new_max;
      row_sum[h] *= correction;
      fixed_sum[h] *= correction;
#pragma unroll
      for (int b = 0; b < kDimBlocks; ++b) {
        o_acc[b][2 * h] *= correction;
        o_acc[b][2 * h + 1] *= correction;
      }
    }
#pragma unroll
    for (int b = 0; b < kKeyBlocks; ++b) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float logit = s_acc[b][e];
        float fixed_logit = 0.f;
        if constexpr (kTrackFixed) {
          const int r = warp_row0 + c_row(lane, e);
          const int c = 8 * b + c_col(lane, e);
          const int d = distance_index(r, c);
          fixed_logit = row_fixed[e >> 1] * factor_t[d] * s_acc[b][e];
          float bias = bias_t[d];
          if constexpr (kQueryBias) bias += fire_s.bias(psi_t[d], row_norm[e >> 1]);
          logit = tc_logit(row_coef[e >> 1], factor_t[d], bias, s_acc[b][e]);
          if (masked && !pair_visible(i0 + r, j0 + c, seq_len)) logit = kNegInf;
        }
        const float p = expf(logit - shift[e >> 1]);  // exactly 0 where masked
        row_sum[e >> 1] += p;                          // fp32 P, as FlashAttention-2
        if constexpr (kTrackFixed) fixed_sum[e >> 1] = fmaf(p, fixed_logit, fixed_sum[e >> 1]);
        s_acc[b][e] = p;
      }
    }

    // O += P·V: P (bf16) as A fragments straight from the accumulators, V through ldmatrix.trans.
    const uint32_t v_base = smem_u32(v_s + buf * kTileElems);
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      uint32_t p_frag[4];
      pack_a_from_c(p_frag, s_acc[2 * kk], s_acc[2 * kk + 1]);
#pragma unroll
      for (int p = 0; p < D / 16; ++p) {
        uint32_t b[4];  // B fragments of output columns 16p .. +7 (b[0], b[1]) and +8 .. +15
        ldsm_x4_trans(b, v_base + 2u * swizzled<D>(16 * kk + ldsm_a_row(lane), 16 * p + ldsm_a_col(lane)));
        mma_bf16(o_acc[2 * p], p_frag, b[0], b[1]);
        mma_bf16(o_acc[2 * p + 1], p_frag, b[2], b[3]);
      }
    }
    __syncthreads();  // all warps are done with buffer `buf` before tile n + 2 is loaded into it
  }

  // o = O / Σ exp, lse = max + log Σ exp, fixed_logit_mean = Σ exp · fixed / Σ exp.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = quad_sum(row_sum[h]);  // every lane: shuffles before any divergence
    const float fixed_total = kTrackFixed ? quad_sum(fixed_sum[h]) : 0.f;
    const int i = i0 + warp_row0 + c_row(lane, 2 * h);
    if (i >= seq_len) continue;
    const float inv_total = 1.f / total;
    bf16* o_row = o + head_offset + static_cast<size_t>(i) * D;
#pragma unroll
    for (int b = 0; b < kDimBlocks; ++b) {
      *reinterpret_cast<uint32_t*>(o_row + 8 * b + c_col(lane, 0)) =
          pack_bf16(o_acc[b][2 * h] * inv_total, o_acc[b][2 * h + 1] * inv_total);
    }
    if (lane_in_group(lane) == 0) {
      const size_t row = static_cast<size_t>(batch_head) * seq_len + i;
      lse[row] = row_max[h] + logf(total);
      if constexpr (kTrackFixed) fixed_logit_mean[row] = fixed_total * inv_total;
    }
  }
#else
  __trap();  // built for an architecture without bf16 mma.sync: never launched (see usable())
#endif
}

// ---------------------------------------------------------------------------------------------
// Backward.

// delta[row] = Σ_d dO[row][d] · O[row][d] (= Σ_j P_ij dP_ij): one warp per row.
template <int D>
__global__ void __launch_bounds__(kThreads)
    tc_row_delta_kernel(const bf16* __restrict__ o, const bf16* __restrict__ d_o,
                        float* __restrict__ delta, size_t num_rows) {
  const size_t row = static_cast<size_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= num_rows) return;  // whole warps leave together
  const int lane = threadIdx.x % kWarpSize;
  float sum = 0.f;
  for (int col = 2 * lane; col < D; col += 2 * kWarpSize) {
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(o + row * D + col));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(d_o + row * D + col));
    sum += a.x * b.x + a.y * b.y;
  }
  sum = warp_sum(sum);
  if (lane == 0) delta[row] = sum;
}

// dq (bf16) from its fp32 accumulator.
__global__ void __launch_bounds__(kThreads)
    tc_convert_kernel(const float* __restrict__ source, bf16* __restrict__ target, size_t count) {
  for (size_t index = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; index < count;
       index += static_cast<size_t>(gridDim.x) * kThreads) {
    target[index] = __float2bfloat16_rn(source[index]);
  }
}

constexpr int kRowTerms = 5;  // per query row: lse, delta, row_coef, row_fixed, fixed_logit_mean

template <int D>
constexpr size_t backward_smem_bytes() {
  return sizeof(bf16) * (6 * kTileK * D       // k, v, q[2], dO[2]
                         + kTileK * kTileQ)   // dSᵀ
         + sizeof(float) * (2 * 2 * kDistanceTableLen  // factor[2], bias[2]
                            + 2 * kRowTerms * kTileQ    // row terms [2]
                            + kDistanceTableLen         // d loss / d logit per distance
                            + kWarps);                  // block reduction
}

// What the kQueryBias instantiation adds at the end: ψ[2], the normaliser per query row [2], the
// rows' sums for c and L, the table row and its gradient.
constexpr int kFireRowTerms = 4;  // per query row: normaliser [2], sums a and b
size_t fire_backward_smem_bytes(const ScoreMod& mod) {
  return sizeof(float) * (2 * kDistanceTableLen + kFireRowTerms * kTileQ + 2 * fire_row_floats(mod));
}

// Per query row of tile i0 into one buffer of the row terms.
__device__ __forceinline__ void fill_row_terms(float* terms, const float* lse, const float* delta,
                                               const float* fixed_logit_mean, size_t row_offset,
                                               int i0, int seq_len, float head_scale,
                                               bool want_dhead_scale, const ScoreMod& mod) {
  for (int r = threadIdx.x; r < kTileQ; r += kThreads) {
    const int i = i0 + r;
    const bool valid = i < seq_len;
    const float factor = row_factor<float>(mod, i);
    terms[0 * kTileQ + r] = valid ? lse[row_offset + i] : 0.f;
    terms[1 * kTileQ + r] = valid ? delta[row_offset + i] : 0.f;
    terms[2 * kTileQ + r] = head_scale * factor * mod.scale;  // same expressions as the forward
    terms[3 * kTileQ + r] = factor * mod.scale;
    terms[4 * kTileQ + r] = valid && want_dhead_scale ? fixed_logit_mean[row_offset + i] : 0.f;
  }
}

// Grid: (ceil(T / 64), B·H); dq_accum (fp32, zeroed) gathers dQ across blocks.
//
// dQ by fp32 atomics: a query row's dQ sums over every key tile, i.e. over blocks. The
// alternatives are a second pass over query tiles (recomputing P and dP once more: ~1.4× the
// backward's MMA work) or per-key-tile partial dQ buffers (T/64 × the size of dQ); FlashAttention-2
// takes the atomics too. Floating-point addition is not associative and the order in which blocks'
// atomicAdds land varies from run to run, so dq (and dhead_scale, dbias_table, also summed
// with atomics) are NOT bit-for-bit reproducible between GPU runs; dk, dv, o and lse are.
// kQueryBias: mod has a FIRE table; its gradient (H, G + 2) goes to dbias_table.
template <int D, bool kQueryBias>
__global__ void __launch_bounds__(kThreads)
    tc_backward_kernel(const bf16* __restrict__ q,          // (B, H, T, D)
                       const bf16* __restrict__ k,          // (B, H, T, D)
                       const bf16* __restrict__ v,          // (B, H, T, D)
                       const bf16* __restrict__ d_o,        // (B, H, T, D)
                       const float* __restrict__ lse,       // (B, H, T)
                       const float* __restrict__ delta,     // (B, H, T)
                       const float* __restrict__ fixed_logit_mean,  // (B, H, T); read if dhead_scale
                       float* __restrict__ dq_accum,        // (B, H, T, D) fp32, zeroed
                       bf16* __restrict__ dk,               // (B, H, T, D)
                       bf16* __restrict__ dv,               // (B, H, T, D)
                       float* __restrict__ dhead_scale,     // (H) zeroed, or null
                       float* __restrict__ dbias_table,  // (H, T) or (H, G + 2) zeroed, or null
                       int heads, int seq_len, ScoreMod mod) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kTileElems = kTileK * D;
  constexpr int kKSlices = D / 16;    // k-steps of K·Qᵀ and V·dOᵀ
  constexpr int kDimBlocks = D / 8;   // n-blocks of dK, dV
  // K and V of the warp's 16 keys stay in registers as A fragments at D = 64; at D = 128 they are
  // re-read from shared memory per chunk (64 more registers would not fit beside dK and dV).
  constexpr bool kHoldKV = D == 64;

  extern __shared__ __align__(128) unsigned char tc_smem[];
  bf16* k_s = reinterpret_cast<bf16*>(tc_smem);   // (64, D)
  bf16* v_s = k_s + kTileElems;                   // (64, D)
  bf16* q_s = v_s + kTileElems;                   // [2] (64, D)
  bf16* do_s = q_s + 2 * kTileElems;              // [2] (64, D)
  bf16* dst_s = do_s + 2 * kTileElems;            // (64 keys, 64 queries): dSᵀ, swizzled
  float* factor_s = reinterpret_cast<float*>(dst_s + kTileK * kTileQ);  // [2] (kDistanceTableLen)
  float* bias_s = factor_s + 2 * kDistanceTableLen;                     // [2]
  float* terms_s = bias_s + 2 * kDistanceTableLen;                      // [2] (kRowTerms, 64)
  float* dist_grad = terms_s + 2 * kRowTerms * kTileQ;                  // (kDistanceTableLen)
  float* reduce_s = dist_grad + kDistanceTableLen;                      // (kWarps)
  // kQueryBias only: ψ(t) [2] (kDistanceTableLen), the normaliser per query row [2] (64), the
  // sums a, b of fire_row_gradient per query row (2, 64), the head's FIRE row and its gradient.
  float* psi_s = reduce_s + kWarps;
  float* norm_s = psi_s + 2 * kDistanceTableLen;
  float* fire_sum_s = norm_s + 2 * kTileQ;
  float* fire_f = fire_sum_s + 2 * kTileQ;
  SharedAtomic* fire_grad = reinterpret_cast<SharedAtomic*>(fire_f + fire_row_floats(mod));

  const int k_tile = blockIdx.x;  // tile 0 has the most query tiles: launched first
  const int j0 = k_tile * kTileK;
  const int batch_head = blockIdx.y;
  const int head = batch_head % heads;
  const size_t head_offset = static_cast<size_t>(batch_head) * seq_len * D;
  const size_t row_offset = static_cast<size_t>(batch_head) * seq_len;  // into lse / delta
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp_row0 = warp * kWarpRows;  // this warp's first key (backward) / query row (dQ)
  const float head_scale = mod.head_scale ? mod.head_scale[head] : 1.f;
  const bool want_dhead_scale = mod.head_scale != nullptr && dhead_scale != nullptr;
  // A distance table's gradient per distance; a FIRE table's (kQueryBias) per grid point, c and L.
  const bool want_dbias = !kQueryBias && mod.bias_table != nullptr && dbias_table != nullptr;
  const bool want_dfire = kQueryBias && dbias_table != nullptr;
  const FireRow<float> fire = fire_row(mod, head);  // global memory: tables and row terms
  const FireRow<float> fire_s{fire_f, fire.G};      // shared memory: per pair

  const int m_first = bwd_first_q_tile(k_tile);
  const int m_end = num_tiles(seq_len);
  load_tile_async<D>(k_s, k + head_offset, j0, seq_len);
  load_tile_async<D>(v_s, v + head_offset, j0, seq_len);
  load_tile_async<D>(q_s, q + head_offset, m_first * kTileQ, seq_len);
  load_tile_async<D>(do_s, d_o + head_offset, m_first * kTileQ, seq_len);
  cp_async_commit();
  fill_row_terms(terms_s, lse, delta, fixed_logit_mean, row_offset, m_first * kTileQ, seq_len,
                 head_scale, want_dhead_scale, mod);
  fill_distance_table(factor_s, bias_s, mod, m_first * kTileQ, j0, head, seq_len);
  for (int d = threadIdx.x; d < kDistanceTableLen; d += kThreads) dist_grad[d] = 0.f;
  if constexpr (kQueryBias) {  // all visible after the first query tile's barrier
    stage_fire_row(fire_f, fire_grad, fire);
    fill_psi_table(psi_s, fire, m_first * kTileQ, j0, seq_len);
    for (int r = threadIdx.x; r < kTileQ; r += kThreads) {
      norm_s[r] = fire.norm(m_first * kTileQ + r);
      fire_sum_s[r] = fire_sum_s[kTileQ + r] = 0.f;
    }
  }

  float dk_acc[kDimBlocks][4], dv_acc[kDimBlocks][4];  // keys warp_row0 + c_row, columns 8b + c_col
#pragma unroll
  for (int b = 0; b < kDimBlocks; ++b) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[b][e] = dv_acc[b][e] = 0.f;
  }
  // This thread's share of dhead_scale, as Σ_ij P_ij (c_ij − mean_i c) dP_ij (see the SIMT kernel).
  float dhead_part = 0.f;
  uint32_t k_frag[kHoldKV ? kKSlices : 1][4], v_frag[kHoldKV ? kKSlices : 1][4];
  const uint32_t k_base = smem_u32(k_s);
  const uint32_t v_base = smem_u32(v_s);
  const uint32_t dst_base = smem_u32(dst_s);

  for (int m = m_first; m < m_end; ++m) {
    const int buf = (m - m_first) & 1;
    const int i0 = m * kTileQ;
    if (m + 1 < m_end) {  // prefetch query tile m + 1 into the other buffer
      load_tile_async<D>(q_s + (buf ^ 1) * kTileElems, q + head_offset, i0 + kTileQ, seq_len);
      load_tile_async<D>(do_s + (buf ^ 1) * kTileElems, d_o + head_offset, i0 + kTileQ, seq_len);
      cp_async_commit();
      fill_row_terms(terms_s + (buf ^ 1) * kRowTerms * kTileQ, lse, delta, fixed_logit_mean,
                     row_offset, i0 + kTileQ, seq_len, head_scale, want_dhead_scale, mod);
      fill_distance_table(factor_s + (buf ^ 1) * kDistanceTableLen,
                          bias_s + (buf ^ 1) * kDistanceTableLen, mod, i0 + kTileQ, j0, head, seq_len);
      if constexpr (kQueryBias) {
        fill_psi_table(psi_s + (buf ^ 1) * kDistanceTableLen, fire, i0 + kTileQ, j0, seq_len);
        for (int r = threadIdx.x; r < kTileQ; r += kThreads)
          norm_s[(buf ^ 1) * kTileQ + r] = fire.norm(i0 + kTileQ + r);
      }
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile m (and k, v), its tables and row terms are visible

    if constexpr (kHoldKV) {
      if (m == m_first) {
#pragma unroll
        for (int s = 0; s < kKSlices; ++s) {
          const int offset = swizzled<D>(warp_row0 + ldsm_a_row(lane), 16 * s + ldsm_a_col(lane));
          ldsm_x4(k_frag[s], k_base + 2u * offset);
          ldsm_x4(v_frag[s], v_base + 2u * offset);
        }
      }
    }

    const uint32_t q_base = smem_u32(q_s + buf * kTileElems);
    const uint32_t do_base = smem_u32(do_s + buf * kTileElems);
    const float* factor_t = factor_s + buf * kDistanceTableLen;
    const float* bias_t = bias_s + buf * kDistanceTableLen;
    const float* terms = terms_s + buf * kRowTerms * kTileQ;
    const float* row_lse = terms;
    const float* row_delta = terms + kTileQ;
    const float* row_coef = terms + 2 * kTileQ;
    const float* row_fixed = terms + 3 * kTileQ;
    const float* row_mean = terms + 4 * kTileQ;
    const bool masked = tile_needs_mask(i0, j0, seq_len);

#pragma unroll 1
    for (int chunk = 0; chunk < kTileQ / 16; ++chunk) {  // 16 queries: 16chunk .. 16chunk + 15
      // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for this warp's 16 keys × the chunk's 16 queries (2 n-blocks).
      float s_acc[2][4] = {}, dp_acc[2][4] = {};
#pragma unroll
      for (int s = 0; s < kKSlices; ++s) {
        uint32_t ka[4], va[4];
        if constexpr (kHoldKV) {
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            ka[x] = k_frag[s][x];
            va[x] = v_frag[s][x];
          }
        } else {
          const int offset = swizzled<D>(warp_row0 + ldsm_a_row(lane), 16 * s + ldsm_a_col(lane));
          ldsm_x4(ka, k_base + 2u * offset);
          ldsm_x4(va, v_base + 2u * offset);
        }
        const int offset = swizzled<D>(16 * chunk + ldsm_b_row(lane), 16 * s + ldsm_b_col(lane));
        uint32_t b[4];
        ldsm_x4(b, q_base + 2u * offset);
        mma_bf16(s_acc[0], ka, b[0], b[1]);
        mma_bf16(s_acc[1], ka, b[2], b[3]);
        ldsm_x4(b, do_base + 2u * offset);
        mma_bf16(dp_acc[0], va, b[0], b[1]);
        mma_bf16(dp_acc[1], va, b[2], b[3]);
      }

      // Element (key kr, query qr) of the chunk: P, dS (in place of S, dP) and the side sums.
      // FIRE's row sums: this lane's queries are 16·chunk + 8b + 2·(lane % 4) + x, x = e & 1.
      FireRowSums<float> fire_sums[2][2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int kr = warp_row0 + c_row(lane, e);         // local key
          const int qr = 16 * chunk + 8 * b + c_col(lane, e);  // local query
          const int d = distance_index(qr, kr);
          const bool visible = !masked || pair_visible(i0 + qr, j0 + kr, seq_len);
          // FIRE's ψ(t) and row normaliser (this tile's buffers) and its bias, added to bias(t).
          const float* psi_t = psi_s + buf * kDistanceTableLen;
          const float* row_norm = norm_s + buf * kTileQ;
          const BackwardTerms t = tc_backward_terms(
              visible, s_acc[b][e], dp_acc[b][e], row_coef[qr], row_fixed[qr], factor_t[d],
              kQueryBias ? bias_t[d] + fire_s.bias(psi_t[d], row_norm[qr]) : bias_t[d], row_lse[qr],
              row_delta[qr], row_mean[qr]);
          if (want_dhead_scale) dhead_part += t.dhead;
          if (want_dbias && visible) atomicAdd(dist_grad + d, t.dlogit);  // shared-memory atomic
          if constexpr (kQueryBias) {
            if (want_dfire && visible)
              fire_pair_gradient(fire_s, psi_t[d], row_norm[qr], (i0 + qr) - (j0 + kr), t.dlogit,
                                 fire_grad, fire_sums[b][e & 1]);
          }
          s_acc[b][e] = t.p;
          dp_acc[b][e] = t.ds;
        }
      }
      // The 8 lane groups hold the same queries (other keys): sum them, and add the warp's part
      // to the rows' sums (the 4 warps hold the tile's other keys).
      if constexpr (kQueryBias) {
        if (want_dfire) {  // uniform across the block: every lane shuffles
#pragma unroll
          for (int b = 0; b < 2; ++b) {
#pragma unroll
            for (int x = 0; x < 2; ++x) {
              float a_sum = fire_sums[b][x].a, b_sum = fire_sums[b][x].b;
#pragma unroll
              for (int offset = 4; offset < kWarpSize; offset <<= 1) {
                a_sum += __shfl_xor_sync(0xffffffffu, a_sum, offset);
                b_sum += __shfl_xor_sync(0xffffffffu, b_sum, offset);
              }
              if (lane_group(lane) == 0) {
                const int qr = 16 * chunk + 8 * b + c_col(lane, x);
                atomicAdd(fire_sum_s + qr, a_sum);
                atomicAdd(fire_sum_s + kTileQ + qr, b_sum);
              }
            }
          }
        }
      }

      // dV += Pᵀ·dO and dK += dSᵀ·Q over the chunk's 16 queries (the k of one MMA).
      uint32_t p_frag[4], ds_frag[4];
      pack_a_from_c(p_frag, s_acc[0], s_acc[1]);
      pack_a_from_c(ds_frag, dp_acc[0], dp_acc[1]);
#pragma unroll
      for (int p = 0; p < D / 16; ++p) {
        const int offset = swizzled<D>(16 * chunk + ldsm_a_row(lane), 16 * p + ldsm_a_col(lane));
        uint32_t b[4];
        ldsm_x4_trans(b, do_base + 2u * offset);
        mma_bf16(dv_acc[2 * p], p_frag, b[0], b[1]);
        mma_bf16(dv_acc[2 * p + 1], p_frag, b[2], b[3]);
        ldsm_x4_trans(b, q_base + 2u * offset);
        mma_bf16(dk_acc[2 * p], ds_frag, b[0], b[1]);
        mma_bf16(dk_acc[2 * p + 1], ds_frag, b[2], b[3]);
      }

      // dSᵀ (bf16, the values the dK product used) to shared memory for dQ: row kr, columns qr, qr + 1.
#pragma unroll
      for (int b = 0; b < 2; ++b) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int kr = warp_row0 + c_row(lane, 2 * h);
          const int qr = 16 * chunk + 8 * b + c_col(lane, 2 * h);
          *reinterpret_cast<uint32_t*>(dst_s + swizzled<kTileQ>(kr, qr)) =
              ds_frag[2 * b + h];  // = pack_bf16(dp_acc[b][2h], dp_acc[b][2h + 1])
        }
      }
    }
    __syncthreads();  // dSᵀ and dist_grad are complete

    // FIRE: each query row's c and L gradient from this tile pair's sums (fire_row_gradient is
    // linear in them); the sums are zeroed for the next query tile.
    if constexpr (kQueryBias) {
      if (want_dfire) {
        for (int r = threadIdx.x; r < kTileQ; r += kThreads) {
          FireRowSums<float> sums;
          sums.a = fire_sum_s[r];
          sums.b = fire_sum_s[kTileQ + r];
          fire_sum_s[r] = fire_sum_s[kTileQ + r] = 0.f;
          if (i0 + r < seq_len) fire_row_gradient(fire_s, i0 + r, sums, fire_grad);
        }
      }
    }

    // This tile pair's d loss/d logit per distance into (H, T); the table is zeroed for the next.
    if (want_dbias) {
      for (int d = threadIdx.x; d < kDistances; d += kThreads) {
        const int t = distance_of_entry(d, i0, j0);
        const float value = dist_grad[d];
        dist_grad[d] = 0.f;
        if (t >= 0 && t < seq_len && value != 0.f)
          atomicAdd(dbias_table + static_cast<size_t>(head) * seq_len + t, value);
      }
    }

    // dQ of query rows warp_row0 .. + 15 of this tile: dS·K, 64 columns at a time, into dq_accum.
#pragma unroll 1
    for (int half = 0; half < D / 64; ++half) {
      float dq_acc[8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kTileK / 16; ++kk) {
        uint32_t a[4];  // dS rows (queries) × keys 16kk .. + 15, from dSᵀ [key][query]
        ldsm_x4_trans(a, dst_base + 2u * swizzled<kTileQ>(16 * kk + ldsm_b_row(lane), warp_row0 + ldsm_b_col(lane)));
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          uint32_t b[4];  // K [key][column] as B (k = key): ldmatrix.trans
          ldsm_x4_trans(b, k_base + 2u * swizzled<D>(16 * kk + ldsm_a_row(lane), 64 * half + 16 * p + ldsm_a_col(lane)));
          mma_bf16(dq_acc[2 * p], a, b[0], b[1]);
          mma_bf16(dq_acc[2 * p + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = i0 + warp_row0 + c_row(lane, 2 * h);
        if (i >= seq_len) continue;
        float* dq_row = dq_accum + head_offset + static_cast<size_t>(i) * D + 64 * half;
#pragma unroll
        for (int b = 0; b < 8; ++b) {
          atomicAdd(dq_row + 8 * b + c_col(lane, 2 * h), dq_acc[b][2 * h]);
          atomicAdd(dq_row + 8 * b + c_col(lane, 2 * h + 1), dq_acc[b][2 * h + 1]);
        }
      }
    }
    __syncthreads();  // buffer `buf`, dSᵀ and the tables are free for the next query tile
  }

  // dK, dV of this key tile (dS already carries multiplier · scale).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int j = j0 + warp_row0 + c_row(lane, 2 * h);
    if (j >= seq_len) continue;
    const size_t row = head_offset + static_cast<size_t>(j) * D;
#pragma unroll
    for (int b = 0; b < kDimBlocks; ++b) {
      const int col = 8 * b + c_col(lane, 0);
      *reinterpret_cast<uint32_t*>(dk + row + col) = pack_bf16(dk_acc[b][2 * h], dk_acc[b][2 * h + 1]);
      *reinterpret_cast<uint32_t*>(dv + row + col) = pack_bf16(dv_acc[b][2 * h], dv_acc[b][2 * h + 1]);
    }
  }

  // This block's d loss/d FIRE table into the head's row of (H, G + 2).
  if constexpr (kQueryBias) {
    if (want_dfire) flush_fire_gradient<kThreads>(dbias_table, head, fire.G, fire_grad);  // uniform
  }

  if (want_dhead_scale) {  // uniform across the block
    const float warp_total = warp_sum(dhead_part);
    if (lane == 0) reduce_s[warp] = warp_total;
    __syncthreads();
    if (threadIdx.x == 0) {
      float block_total = 0.f;
      for (int w = 0; w < kWarps; ++w) block_total += reduce_s[w];
      atomicAdd(dhead_scale + head, block_total);
    }
  }
#else
  __trap();  // built for an architecture without bf16 mma.sync: never launched (see usable())
#endif
}

// ---------------------------------------------------------------------------------------------
// Host side.

size_t align_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

size_t num_rows(const FusedArgs& args) {
  return static_cast<size_t>(args.batch) * args.heads * args.seq_len;
}

unsigned ceil_div(size_t a, size_t b) { return static_cast<unsigned>((a + b - 1) / b); }

// Shared memory of one block: the distance-only kernels', plus FIRE's when has_query_bias.
template <int D>
size_t forward_smem(const FusedArgs& args) {
  return forward_smem_bytes<D>() + (has_query_bias(args.mod) ? fire_forward_smem_bytes(args.mod) : 0);
}
template <int D>
size_t backward_smem(const FusedArgs& args) {
  return backward_smem_bytes<D>() + (has_query_bias(args.mod) ? fire_backward_smem_bytes(args.mod) : 0);
}

template <int D>
cudaError_t launch_forward(const FusedArgs& args, cudaStream_t stream) {
  const size_t smem = forward_smem<D>(args);
  const bool track = args.mod.head_scale != nullptr && args.fixed_logit_mean != nullptr;
  auto kernel = has_query_bias(args.mod)
                    ? (track ? tc_forward_kernel<D, true, true> : tc_forward_kernel<D, false, true>)
                    : (track ? tc_forward_kernel<D, true, false> : tc_forward_kernel<D, false, false>);
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (status != cudaSuccess) return status;
  const dim3 grid(num_tiles(args.seq_len), args.batch * args.heads);
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const bf16*>(args.q), static_cast<const bf16*>(args.k),
      static_cast<const bf16*>(args.v), static_cast<bf16*>(args.o), args.lse,
      args.fixed_logit_mean, args.heads, args.seq_len, args.mod);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_backward(const FusedArgs& args, cudaStream_t stream) {
  const size_t rows = num_rows(args);
  // The workspace of fused_attention_backward_workspace_bytes: row deltas, then (bf16) the fp32
  // dq accumulator.
  char* workspace = static_cast<char*>(args.workspace);
  float* delta = reinterpret_cast<float*>(workspace);
  float* dq_accum = reinterpret_cast<float*>(workspace + align_up(rows * sizeof(float), 256));

  cudaError_t status = cudaMemsetAsync(dq_accum, 0, rows * D * sizeof(float), stream);
  if (status != cudaSuccess) return status;
  if (args.dhead_scale != nullptr) {
    status = cudaMemsetAsync(args.dhead_scale, 0, args.heads * sizeof(float), stream);
    if (status != cudaSuccess) return status;
  }
  if (args.dbias_table != nullptr) {
    status = cudaMemsetAsync(args.dbias_table, 0,
                             static_cast<size_t>(args.heads) * bias_gradient_len(args) * sizeof(float), stream);
    if (status != cudaSuccess) return status;
  }

  tc_row_delta_kernel<D><<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(
      static_cast<const bf16*>(args.o), static_cast<const bf16*>(args.d_o), delta, rows);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  const size_t smem = backward_smem<D>(args);
  auto kernel = has_query_bias(args.mod) ? tc_backward_kernel<D, true> : tc_backward_kernel<D, false>;
  status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (status != cudaSuccess) return status;
  const dim3 grid(num_tiles(args.seq_len), args.batch * args.heads);
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const bf16*>(args.q), static_cast<const bf16*>(args.k),
      static_cast<const bf16*>(args.v), static_cast<const bf16*>(args.d_o), args.lse, delta,
      args.fixed_logit_mean, dq_accum, static_cast<bf16*>(args.dk), static_cast<bf16*>(args.dv),
      args.dhead_scale, args.dbias_table, args.heads, args.seq_len, args.mod);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  const size_t count = rows * D;
  const unsigned blocks = static_cast<unsigned>(ceil_div(count, kThreads) < 65535u ? ceil_div(count, kThreads) : 65535u);
  tc_convert_kernel<<<blocks, kThreads, 0, stream>>>(dq_accum, static_cast<bf16*>(args.dq), count);
  return cudaGetLastError();
}

// What the current device offers the tensor-core kernels, queried once per device.
struct DeviceSupport {
  bool arch_ok = false;  // compute capability ≥ 8.0 and the kernel image in use is sm_80+
  int smem_optin = 0;    // cudaDevAttrMaxSharedMemoryPerBlockOptin
};

DeviceSupport query_device(int device) {
  DeviceSupport s;
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&s.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();  // clear the error: the SIMT path takes the call
    return DeviceSupport{};
  }
  // The kernel image this device runs must be sm_80+ code. (Not caught: a build whose only image
  // is PTX for an older virtual architecture, JIT-compiled for an sm_80+ device; its kernels hold
  // the trapping stub. CMake's default, 90, and gpu-check.sh's native arch are not affected.)
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, tc_forward_kernel<64, false, false>) != cudaSuccess) {
    cudaGetLastError();
    return DeviceSupport{};
  }
  s.arch_ok = major >= 8 && attributes.binaryVersion >= 80;
  return s;
}

constexpr int kCachedDevices = 64;

DeviceSupport device_support() {
  // Per device: 0 not yet queried, else 1 + arch_ok + 2 · smem_optin (benign race: every writer
  // stores the same value).
  static std::atomic<long long> cache[kCachedDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return DeviceSupport{};
  }
  if (device < 0 || device >= kCachedDevices) return query_device(device);
  long long word = cache[device].load(std::memory_order_relaxed);
  if (word == 0) {
    const DeviceSupport s = query_device(device);
    word = 1 + (s.arch_ok ? 1 : 0) + 2 * static_cast<long long>(s.smem_optin);
    cache[device].store(word, std::memory_order_relaxed);
  }
  DeviceSupport s;
  s.arch_ok = ((word - 1) & 1) != 0;
  s.smem_optin = static_cast<int>((word - 1) / 2);
  return s;
}

}  // namespace

bool usable(const FusedArgs& args, bool backward) {
  if (args.dtype != DType::kBFloat16 || (args.head_dim != 64 && args.head_dim != 128)) return false;
  const DeviceSupport s = device_support();
  if (!s.arch_ok) return false;
  const size_t smem = args.head_dim == 64 ? (backward ? backward_smem<64>(args) : forward_smem<64>(args))
                                          : (backward ? backward_smem<128>(args) : forward_smem<128>(args));
  return smem <= static_cast<size_t>(s.smem_optin);
}

cudaError_t forward(const FusedArgs& args, cudaStream_t stream) {
  return args.head_dim == 64 ? launch_forward<64>(args, stream) : launch_forward<128>(args, stream);
}

cudaError_t backward(const FusedArgs& args, cudaStream_t stream) {
  return args.head_dim == 64 ? launch_backward<64>(args, stream) : launch_backward<128>(args, stream);
}

}  // namespace attention::cuda::tc
