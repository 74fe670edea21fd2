// Fused causal attention, FlashAttention-2 style, with the score_mod.h logit transform.
//
// Layout: q, k, v, o, dO, dq, dk, dv are (B, H, T, D) contiguous; lse and the backward's row
// deltas are (B, H, T) float32. All arithmetic is fp32 FMA on shared-memory tiles (bf16 inputs are
// widened on load), which keeps one code path for both element types. bf16 on sm_80+ takes the
// tensor-core kernels of fused_attention_tc.cu instead (fused_attention_forward/backward below).
//
// Tiling. A block of 256 threads is a 16 × 16 grid (tx = thread % 16, ty = thread / 16) working on
// a 64-query × 64-key tile pair. For the score tile S (64 × 64) a thread owns rows ty + 16a and
// columns tx + 16b (a, b < 4); for a (64, D) output tile it owns rows ty + 16a and the four
// consecutive columns 4·tx + 64g (g < D/64). A row's 16 owners are 16 consecutive lanes of one
// warp, so row reductions are 4 xor-shuffles. Shared tiles are row-major with rows padded by 4
// floats: 16-byte aligned float4 reads, and the 8 rows read by a quarter-warp start in distinct
// banks.
//
// The logit of pair (i, j) needs row_factor(i), distance_factor(i − j) and distance_bias(i − j).
// Within a tile pair i − j takes only 64 + 64 − 1 values, so each tile pair first tabulates the
// distance terms in shared memory (127 transcendental evaluations instead of 4096), and each row's
// head_scale · row_factor · scale lives in a register (forward) or shared memory (backward).
//
// FIRE (has_query_bias: a bias that depends on the query row too) is the kernels' QueryBias
// instantiation, so that distance-only methods run exactly the code they ran without it: ψ(t) is
// tabulated per tile pair beside the distance terms, the normaliser per query row, the head's table
// row copied to shared memory, and the bias interpolated per pair; the backward pass gathers
// d loss/d table in shared memory (shared-memory atomics) and adds it to the (H, G + 2) gradient
// once per block.
#include "attention/cuda/fused_attention.cuh"
#include "attention/cuda/fused_attention_tc.cuh"
#include "attention/cuda/kernel_limits.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

namespace attention::cuda {
namespace {

constexpr int kThreads = 256;                  // a 16 × 16 thread grid
constexpr int kBlockQ = 64;                    // query rows per tile
constexpr int kBlockK = 64;                    // key rows per tile
constexpr int kRowsPerThread = kBlockQ / 16;   // score-tile rows a thread owns (ty + 16a)
constexpr int kColsPerThread = kBlockK / 16;   // score-tile columns a thread owns (tx + 16b)
constexpr int kPad = 4;                        // row padding (floats) of every shared tile
constexpr int kPTileLd = kBlockK + kPad;       // leading dim of the (64, 64) probability tiles
constexpr int kDistances = kBlockQ + kBlockK - 1;  // distinct i − j values within a tile pair
constexpr int kDistanceTableLen = kBlockQ + kBlockK;  // kDistances rounded up to keep alignment

// The thread-grid mapping below assumes square 64-tiles: the diagonal key tile of query tile n is
// key tile n, so every processed (row, tile) pair has at least one unmasked key.
static_assert(kBlockQ == kBlockK && kBlockQ == 64, "the 16 × 16 thread mapping assumes 64-tiles");
static_assert(kThreads == 256, "the 16 × 16 thread mapping assumes 256 threads");

constexpr float kNegInf = -__builtin_huge_valf();

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------------------------
// Element access: 4 consecutive elements as a float4 (fp32 or bf16 in global memory).

__device__ __forceinline__ float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}

__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(p);
  const float2 lo = __bfloat1622float2(pairs[0]);
  const float2 hi = __bfloat1622float2(pairs[1]);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

__device__ __forceinline__ void store4(float* p, float4 value) {
  *reinterpret_cast<float4*>(p) = value;
}

__device__ __forceinline__ void store4(__nv_bfloat16* p, float4 value) {
  __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(p);
  pairs[0] = __floats2bfloat162_rn(value.x, value.y);
  pairs[1] = __floats2bfloat162_rn(value.z, value.w);
}

__device__ __forceinline__ float4 shared4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}

// acc += scalar · v, component-wise.
__device__ __forceinline__ void axpy4(float4& acc, float scalar, const float4& v) {
  acc.x = fmaf(scalar, v.x, acc.x);
  acc.y = fmaf(scalar, v.y, acc.y);
  acc.z = fmaf(scalar, v.z, acc.z);
  acc.w = fmaf(scalar, v.w, acc.w);
}

__device__ __forceinline__ void scale4(float4& acc, float scalar) {
  acc.x *= scalar;
  acc.y *= scalar;
  acc.z *= scalar;
  acc.w *= scalar;
}

// Reductions over the 16 lanes that own one score-tile row (lanes 0–15 or 16–31 of a warp).
// Every lane of the warp must call them.
__device__ __forceinline__ float row_max16(float x) {
  for (int offset = 8; offset > 0; offset >>= 1) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

__device__ __forceinline__ float row_sum16(float x) {
  for (int offset = 8; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Shared-memory tiles.

// Copies rows [row0, row0 + kRows) of one head's (T, D) matrix into a (kRows, D + kPad) fp32 tile;
// rows at or past T are zero-filled. All threads must call it.
template <int kRows, int D, class Elem>
__device__ void load_tile(float* tile, const Elem* head, int row0, int seq_len) {
  constexpr int kVecsPerRow = D / 4;
  for (int index = threadIdx.x; index < kRows * kVecsPerRow; index += kThreads) {
    const int r = index / kVecsPerRow;
    const int col = (index % kVecsPerRow) * 4;
    const int row = row0 + r;
    const float4 value = row < seq_len ? load4(head + static_cast<size_t>(row) * D + col)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
    *reinterpret_cast<float4*>(tile + r * (D + kPad) + col) = value;
  }
}

// Distance terms for every (query, key) pair of the tile pair (i0, j0): entry k holds the terms for
// t = i − j = k + i0 − j0 − (kBlockK − 1), so pair (row r, column c) reads entry r − c + kBlockK − 1.
// Entries no visible pair reads (t < 0, t ≥ T) hold a clamped distance (table_distance).
__device__ void fill_distance_table(float* factor, float* bias, const ScoreMod& mod, int i0, int j0,
                                    int head, int seq_len) {
  const int t_first = i0 - j0 - (kBlockK - 1);
  for (int k = threadIdx.x; k < kDistances; k += kThreads) {
    const int t = table_distance(k + t_first, seq_len);
    factor[k] = distance_factor<float>(mod, t);
    bias[k] = distance_bias<float>(mod, t, head);
  }
}

__device__ __forceinline__ int distance_index(int r, int c) { return r - c + kBlockK - 1; }

// ---------------------------------------------------------------------------------------------
// FIRE (the QueryBias instantiations only).

// ψ(t) of the FIRE table for the entries of fill_distance_table (same distances, same clamping).
__device__ void fill_psi_table(float* psi, const FireRow<float>& fire, int i0, int j0, int seq_len) {
  const int t_first = i0 - j0 - (kBlockK - 1);
  for (int k = threadIdx.x; k < kDistances; k += kThreads)
    psi[k] = fire.psi(static_cast<float>(table_distance(k + t_first, seq_len)));
}

// acc[a][b] = Σ_d A[ty + 16a][d] · B[tx + 16b][d] for two (64, D + kPad) tiles: one thread's part of
// A·Bᵀ (Q·Kᵀ or dO·Vᵀ).
template <int D>
__device__ __forceinline__ void tile_dot(float (&acc)[kRowsPerThread][kColsPerThread],
                                         const float* a_tile, const float* b_tile, int ty, int tx) {
  constexpr int kLd = D + kPad;
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
    for (int b = 0; b < kColsPerThread; ++b) acc[a][b] = 0.f;
  }
#pragma unroll 4
  for (int d = 0; d < D; d += 4) {
    float4 a4[kRowsPerThread];
    float4 b4[kColsPerThread];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) a4[a] = shared4(a_tile + (ty + 16 * a) * kLd + d);
#pragma unroll
    for (int b = 0; b < kColsPerThread; ++b) b4[b] = shared4(b_tile + (tx + 16 * b) * kLd + d);
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
      for (int b = 0; b < kColsPerThread; ++b) {
        float s = acc[a][b];
        s = fmaf(a4[a].x, b4[b].x, s);
        s = fmaf(a4[a].y, b4[b].y, s);
        s = fmaf(a4[a].z, b4[b].z, s);
        s = fmaf(a4[a].w, b4[b].w, s);
        acc[a][b] = s;
      }
    }
  }
}

// acc[a][g] += Σ_c C[ty + 16a][c] · V[c][4·tx + 64g : 4·tx + 64g + 4] for a (64, 64 + kPad)
// coefficient tile C and a (64, D + kPad) value tile V: one thread's part of C·V (P·V in the
// forward pass, dS·K for dq in the backward pass), in one summation order for both.
template <int D>
__device__ __forceinline__ void tile_product_accumulate(float4 (&acc)[kRowsPerThread][D / 64],
                                                        const float* c_tile, const float* v_tile,
                                                        int ty, int tx) {
  constexpr int kLd = D + kPad;
  constexpr int kColGroups = D / 64;
#pragma unroll 2
  for (int c = 0; c < kBlockK; c += 4) {
    float coeff[kRowsPerThread][4];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      const float4 c4 = shared4(c_tile + (ty + 16 * a) * kPTileLd + c);
      coeff[a][0] = c4.x;
      coeff[a][1] = c4.y;
      coeff[a][2] = c4.z;
      coeff[a][3] = c4.w;
    }
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      float4 v4[kColGroups];
#pragma unroll
      for (int g = 0; g < kColGroups; ++g) v4[g] = shared4(v_tile + (c + cc) * kLd + 4 * tx + 64 * g);
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
        for (int g = 0; g < kColGroups; ++g) axpy4(acc[a][g], coeff[a][cc], v4[g]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Forward.

template <int D>
constexpr size_t forward_smem_bytes() {
  return sizeof(float) * (static_cast<size_t>(kBlockQ + 2 * kBlockK) * (D + kPad)  // q, k, v
                          + kBlockQ * kPTileLd                                      // p
                          + 2 * kDistanceTableLen);                                 // distance
}

// What the QueryBias instantiation adds at the end: ψ per distance, the table row.
size_t fire_forward_smem_bytes(const ScoreMod& mod) {
  return sizeof(float) * (kDistanceTableLen + fire_row_floats(mod));
}

// One block per (64-query tile, batch·head). Grid: (ceil(T / 64), B·H). QueryBias: mod has a FIRE
// table (has_query_bias), added per pair.
template <class Elem, int D, bool QueryBias>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const Elem* __restrict__ q,  // (B, H, T, D)
                   const Elem* __restrict__ k,  // (B, H, T, D)
                   const Elem* __restrict__ v,  // (B, H, T, D)
                   Elem* __restrict__ o,        // (B, H, T, D)
                   float* __restrict__ lse,     // (B, H, T)
                   float* __restrict__ fixed_logit_mean,  // (B, H, T), or null
                   int heads, int seq_len, ScoreMod mod) {
  constexpr int kLd = D + kPad;
  constexpr int kColGroups = D / 64;  // float4 column groups a thread owns in a (64, D) tile

  extern __shared__ float4 smem_raw[];  // float4: 16-byte alignment for the float4 accesses
  float* q_tile = reinterpret_cast<float*>(smem_raw);  // (64, D + pad)
  float* k_tile = q_tile + kBlockQ * kLd;               // (64, D + pad)
  float* v_tile = k_tile + kBlockK * kLd;               // (64, D + pad)
  float* p_tile = v_tile + kBlockK * kLd;               // (64, 64 + pad) probabilities
  float* dist_factor = p_tile + kBlockQ * kPTileLd;     // (kDistances)
  float* dist_bias = dist_factor + kDistanceTableLen;   // (kDistances)
  float* fire_psi = dist_bias + kDistanceTableLen;      // (kDistances) ψ(t), QueryBias only
  float* fire_f = fire_psi + kDistanceTableLen;         // (G + 2) the head's FIRE row, QueryBias only

  // Causal work grows with the query tile index: launch the longest tiles first.
  const int q_tile_index = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int i0 = q_tile_index * kBlockQ;
  const int batch_head = blockIdx.y;
  const int head = batch_head % heads;
  const size_t head_offset = static_cast<size_t>(batch_head) * seq_len * D;
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;

  // Per-row part of the logit's multiplier, score scale folded in: head_scale · row_factor(i) · scale
  // (row_coef), and the same without the learned head scale (row_fixed).
  const float head_scale = mod.head_scale ? mod.head_scale[head] : 1.f;
  // The P-weighted mean of the fixed logit is needed only for the head-scale gradient.
  const bool track_fixed_logit = mod.head_scale != nullptr && fixed_logit_mean != nullptr;
  float row_coef[kRowsPerThread];
  float row_fixed[kRowsPerThread];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    const float factor = row_factor<float>(mod, i0 + ty + 16 * a);
    row_coef[a] = head_scale * factor * mod.scale;
    row_fixed[a] = factor * mod.scale;
  }

  // FIRE: the table row read per pair goes to shared memory (visible after the first tile's
  // barrier); the normaliser of each owned row stays in a register.
  const FireRow<float> fire = fire_row(mod, head);  // global memory: tables and row terms
  const FireRow<float> fire_s{fire_f, fire.G};      // shared memory: per pair
  float row_norm[kRowsPerThread];
  if constexpr (QueryBias) {
    for (int n = threadIdx.x; n < fire.G + 2; n += kThreads) fire_f[n] = fire.f[n];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) row_norm[a] = fire.norm(i0 + ty + 16 * a);
  }

  load_tile<kBlockQ, D>(q_tile, q + head_offset, i0, seq_len);

  // Online softmax state: running max of each owned row (identical on its 16 owners), this
  // thread's partial sum of exp(logit − max) over its columns, and its part of the unnormalised o.
  float row_max[kRowsPerThread];
  float row_sum[kRowsPerThread];
  float fixed_sum[kRowsPerThread];  // partial Σ exp(logit − max) · fixed logit, when tracked
  float4 out[kRowsPerThread][kColGroups];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    row_max[a] = kNegInf;
    row_sum[a] = 0.f;
    fixed_sum[a] = 0.f;
#pragma unroll
    for (int g = 0; g < kColGroups; ++g) out[a][g] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // Key tiles up to the diagonal: the last row of this tile sees keys 0 .. min(i0 + 63, T − 1).
  const int last_row = min(i0 + kBlockQ, seq_len) - 1;
  const int num_k_tiles = last_row / kBlockK + 1;
  for (int k_tile_index = 0; k_tile_index < num_k_tiles; ++k_tile_index) {
    const int j0 = k_tile_index * kBlockK;
    __syncthreads();  // every thread is done reading the previous k, v, p tiles and tables
    load_tile<kBlockK, D>(k_tile, k + head_offset, j0, seq_len);
    load_tile<kBlockK, D>(v_tile, v + head_offset, j0, seq_len);
    fill_distance_table(dist_factor, dist_bias, mod, i0, j0, head, seq_len);
    if constexpr (QueryBias) fill_psi_table(fire_psi, fire, i0, j0, seq_len);
    __syncthreads();  // q (first pass), k, v and the tables are in place

    float score[kRowsPerThread][kColsPerThread];  // raw q_i·k_j, then the logits
    float fixed_logit[kRowsPerThread][kColsPerThread];  // fixed_multiplier · scale · q_i·k_j
    tile_dot<D>(score, q_tile, k_tile, ty, tx);

#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      const int r = ty + 16 * a;
      const int i = i0 + r;
      float tile_max = kNegInf;
#pragma unroll
      for (int b = 0; b < kColsPerThread; ++b) {
        const int c = tx + 16 * b;
        const int j = j0 + c;
        const int dist = distance_index(r, c);
        const bool visible = j <= i && j < seq_len;
        fixed_logit[a][b] = row_fixed[a] * dist_factor[dist] * score[a][b];
        float bias = dist_bias[dist];
        if constexpr (QueryBias) bias += fire_s.bias(fire_psi[dist], row_norm[a]);
        score[a][b] = visible ? row_coef[a] * dist_factor[dist] * score[a][b] + bias : kNegInf;
        tile_max = fmaxf(tile_max, score[a][b]);
      }
      const float new_max = fmaxf(row_max[a], row_max16(tile_max));
      // Key 0 is visible to every row, so new_max is finite from the first tile on; the guard
      // keeps exp() away from (−inf) − (−inf) should that ever change.
      const float shift = new_max == kNegInf ? 0.f : new_max;
      const float correction = expf(row_max[a] - shift);  // 0 on the first tile
      row_max[a] = new_max;
      row_sum[a] *= correction;
      fixed_sum[a] *= correction;
#pragma unroll
      for (int g = 0; g < kColGroups; ++g) scale4(out[a][g], correction);
#pragma unroll
      for (int b = 0; b < kColsPerThread; ++b) {
        const float p = expf(score[a][b] - shift);  // exactly 0 for masked pairs
        row_sum[a] += p;
        if (track_fixed_logit) fixed_sum[a] = fmaf(p, fixed_logit[a][b], fixed_sum[a]);
        p_tile[r * kPTileLd + tx + 16 * b] = p;
      }
    }
    __syncthreads();  // the probability tile is complete

    // out[r][:] += Σ_c P[r][c] · V[c][:]
    tile_product_accumulate<D>(out, p_tile, v_tile, ty, tx);
  }

  // o = out / Σ exp, lse = max + log Σ exp, fixed_logit_mean = Σ exp · fixed logit / Σ exp.
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    const float total = row_sum16(row_sum[a]);  // all lanes: shuffles before any divergence
    const float fixed_total = track_fixed_logit ? row_sum16(fixed_sum[a]) : 0.f;  // uniform branch
    const int i = i0 + ty + 16 * a;
    if (i >= seq_len) continue;
    const float inv_total = 1.f / total;
    Elem* o_row = o + head_offset + static_cast<size_t>(i) * D;
#pragma unroll
    for (int g = 0; g < kColGroups; ++g) {
      float4 value = out[a][g];
      scale4(value, inv_total);
      store4(o_row + 4 * tx + 64 * g, value);
    }
    if (tx == 0) {
      const size_t row = static_cast<size_t>(batch_head) * seq_len + i;
      lse[row] = row_max[a] + logf(total);
      if (track_fixed_logit) fixed_logit_mean[row] = fixed_total * inv_total;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward.

// delta[row] = Σ_d dO[row][d] · O[row][d] (= Σ_j P_ij dP_ij): one warp per row of the (B·H·T, D)
// matrices.
template <class Elem, int D>
__global__ void __launch_bounds__(kThreads)
    row_delta_kernel(const Elem* __restrict__ o,    // (B, H, T, D)
                     const Elem* __restrict__ d_o,  // (B, H, T, D)
                     float* __restrict__ delta,     // (B, H, T)
                     size_t num_rows) {
  const size_t row = static_cast<size_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (row >= num_rows) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  float sum = 0.f;
  for (int col = 4 * lane; col < D; col += 4 * 32) {
    const float4 a = load4(o + row * D + col);
    const float4 b = load4(d_o + row * D + col);
    sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
  }
  sum = warp_sum(sum);
  if (lane == 0) delta[row] = sum;
}

// dq (bf16) from its fp32 accumulator.
__global__ void __launch_bounds__(kThreads)
    convert_kernel(const float* __restrict__ source, __nv_bfloat16* __restrict__ target,
                   size_t count) {
  for (size_t index = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; index < count;
       index += static_cast<size_t>(gridDim.x) * kThreads) {
    target[index] = __float2bfloat16_rn(source[index]);
  }
}

template <int D>
constexpr size_t backward_smem_bytes() {
  return sizeof(float) * (static_cast<size_t>(2 * kBlockK + 2 * kBlockQ) * (D + kPad)  // k v q dO
                          + 2 * kBlockQ * kPTileLd       // p, dS
                          + 2 * kDistanceTableLen        // distance
                          + 5 * kBlockQ                  // per-row lse, delta, coefficients, mean
                          + kThreads / 32                // block reduction
                          + kDistanceTableLen);          // d loss/d logit per distance
}

// What the QueryBias instantiation adds at the end: ψ per distance, the normaliser per query row,
// the table row and its gradient.
size_t fire_backward_smem_bytes(const ScoreMod& mod) {
  return sizeof(float) * (kDistanceTableLen + kBlockQ + 2 * fire_row_floats(mod));
}

// One block per (64-key tile, batch·head): dk and dv of the tile accumulate in registers over the
// query tiles at and below the diagonal; dq is accumulated across blocks with fp32 atomics into
// dq_accum (zeroed beforehand). Grid: (ceil(T / 64), B·H). QueryBias: mod has a FIRE table; its
// gradient (H, G + 2) goes to dbias_table.
template <class Elem, int D, bool QueryBias>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(const Elem* __restrict__ q,       // (B, H, T, D)
                    const Elem* __restrict__ k,       // (B, H, T, D)
                    const Elem* __restrict__ v,       // (B, H, T, D)
                    const Elem* __restrict__ d_o,     // (B, H, T, D)
                    const float* __restrict__ lse,    // (B, H, T)
                    const float* __restrict__ delta,  // (B, H, T)
                    const float* __restrict__ fixed_logit_mean,  // (B, H, T); read if dhead_scale
                    float* __restrict__ dq_accum,     // (B, H, T, D) fp32, zeroed
                    Elem* __restrict__ dk,            // (B, H, T, D)
                    Elem* __restrict__ dv,            // (B, H, T, D)
                    float* __restrict__ dhead_scale,  // (H) zeroed, or null
                    float* __restrict__ dbias_table,  // (H, T) or (H, G + 2) zeroed, or null
                    int heads, int seq_len, ScoreMod mod) {
  constexpr int kLd = D + kPad;
  constexpr int kColGroups = D / 64;

  extern __shared__ float4 smem_raw[];
  float* k_tile = reinterpret_cast<float*>(smem_raw);  // (64, D + pad)
  float* v_tile = k_tile + kBlockK * kLd;               // (64, D + pad)
  float* q_tile = v_tile + kBlockK * kLd;               // (64, D + pad)
  float* do_tile = q_tile + kBlockQ * kLd;              // (64, D + pad)
  float* p_tile = do_tile + kBlockQ * kLd;              // (64, 64 + pad) probabilities
  float* ds_tile = p_tile + kBlockQ * kPTileLd;         // (64, 64 + pad) d(loss)/d(q·k)
  float* dist_factor = ds_tile + kBlockQ * kPTileLd;    // (kDistances)
  float* dist_bias = dist_factor + kDistanceTableLen;   // (kDistances)
  float* row_lse = dist_bias + kDistanceTableLen;       // (64)
  float* row_delta = row_lse + kBlockQ;                 // (64)
  float* row_coef = row_delta + kBlockQ;                // (64) head_scale · row_factor · scale
  float* row_fixed = row_coef + kBlockQ;                // (64) row_factor · scale
  float* row_fixed_mean = row_fixed + kBlockQ;          // (64) Σ_j P_ij · fixed logit
  float* reduce_scratch = row_fixed_mean + kBlockQ;     // (kThreads / 32)
  float* dist_grad = reduce_scratch + kThreads / 32;    // (kDistances) Σ dLogit per distance
  float* fire_psi = dist_grad + kDistanceTableLen;      // (kDistances) ψ(t), QueryBias only
  float* fire_norm = fire_psi + kDistanceTableLen;      // (64) normaliser per query row, QueryBias only
  float* fire_f = fire_norm + kBlockQ;                  // (G + 2) the head's FIRE row, QueryBias only
  SharedAtomic* fire_grad =                             // (G + 2) its d loss/d table, QueryBias only
      reinterpret_cast<SharedAtomic*>(fire_f + fire_row_floats(mod));

  const int k_tile_index = blockIdx.x;  // tile 0 has the most query tiles: launched first
  const int j0 = k_tile_index * kBlockK;
  const int batch_head = blockIdx.y;
  const int head = batch_head % heads;
  const size_t head_offset = static_cast<size_t>(batch_head) * seq_len * D;
  const size_t row_offset = static_cast<size_t>(batch_head) * seq_len;  // into lse / delta
  const int tx = threadIdx.x % 16;
  const int ty = threadIdx.x / 16;
  const float head_scale = mod.head_scale ? mod.head_scale[head] : 1.f;
  const bool want_dhead_scale = mod.head_scale != nullptr && dhead_scale != nullptr;
  // A distance table's gradient per distance; a FIRE table's (QueryBias) per grid point, c and L.
  const bool want_dbias = !QueryBias && mod.bias_table != nullptr && dbias_table != nullptr;
  const bool want_dfire = QueryBias && dbias_table != nullptr;
  const FireRow<float> fire = fire_row(mod, head);  // global memory: tables and row terms
  const FireRow<float> fire_s{fire_f, fire.G};      // shared memory: per pair
  if constexpr (QueryBias) {  // visible after the first query tile's barrier
    for (int n = threadIdx.x; n < fire.G + 2; n += kThreads) {
      fire_f[n] = fire.f[n];
      fire_grad[n].value = 0.f;
    }
  }

  load_tile<kBlockK, D>(k_tile, k + head_offset, j0, seq_len);
  load_tile<kBlockK, D>(v_tile, v + head_offset, j0, seq_len);

  // This thread's part of dk and dv: key rows ty + 16a, columns 4·tx + 64g .. + 3.
  float4 dk_acc[kRowsPerThread][kColGroups];
  float4 dv_acc[kRowsPerThread][kColGroups];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
    for (int g = 0; g < kColGroups; ++g) {
      dk_acc[a][g] = make_float4(0.f, 0.f, 0.f, 0.f);
      dv_acc[a][g] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  // This thread's share of dhead_scale = Σ_ij c_ij · dLogit_ij (c = fixed_multiplier · scale · q·k),
  // summed as Σ_ij P_ij (c_ij − mean_i c) dP_ij: equal because Σ_j P_ij = 1 and
  // delta_i = Σ_j P_ij dP_ij, but free of delta, which the rounding of o to bf16 perturbs and
  // which the plain form multiplies by the large mean_i c.
  float dhead_scale_part = 0.f;

  // Query rows i < j0 see none of these keys: start at the diagonal tile.
  const int num_q_tiles = ceil_div(seq_len, kBlockQ);
  for (int q_tile_index = j0 / kBlockQ; q_tile_index < num_q_tiles; ++q_tile_index) {
    const int i0 = q_tile_index * kBlockQ;
    __syncthreads();  // every thread is done with the previous q, dO, p, dS tiles and tables
    load_tile<kBlockQ, D>(q_tile, q + head_offset, i0, seq_len);
    load_tile<kBlockQ, D>(do_tile, d_o + head_offset, i0, seq_len);
    fill_distance_table(dist_factor, dist_bias, mod, i0, j0, head, seq_len);
    if constexpr (QueryBias) fill_psi_table(fire_psi, fire, i0, j0, seq_len);
    if (want_dbias)
      for (int d = threadIdx.x; d < kDistances; d += kThreads) dist_grad[d] = 0.f;
    for (int r = threadIdx.x; r < kBlockQ; r += kThreads) {
      const int i = i0 + r;
      const bool valid = i < seq_len;
      const float factor = row_factor<float>(mod, i);
      if constexpr (QueryBias) fire_norm[r] = fire.norm(i);
      row_lse[r] = valid ? lse[row_offset + i] : 0.f;
      row_delta[r] = valid ? delta[row_offset + i] : 0.f;
      row_coef[r] = head_scale * factor * mod.scale;  // same expression as the forward pass
      row_fixed[r] = factor * mod.scale;
      row_fixed_mean[r] = valid && want_dhead_scale ? fixed_logit_mean[row_offset + i] : 0.f;
    }
    __syncthreads();  // k, v (first pass), q, dO, tables and row terms are in place

    float score[kRowsPerThread][kColsPerThread];  // q_i·k_j   (rows: queries, columns: keys)
    float dprob[kRowsPerThread][kColsPerThread];  // dO_i·v_j  (= dP_ij)
    tile_dot<D>(score, q_tile, k_tile, ty, tx);
    tile_dot<D>(dprob, do_tile, v_tile, ty, tx);

#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      const int r = ty + 16 * a;
      const int i = i0 + r;
      FireRowSums<float> fire_sums;  // this thread's part of row i's FIRE sums (QueryBias)
#pragma unroll
      for (int b = 0; b < kColsPerThread; ++b) {
        const int c = tx + 16 * b;
        const int j = j0 + c;
        const int dist = distance_index(r, c);
        const bool visible = j <= i && i < seq_len;  // implies j < T
        const float factor = dist_factor[dist];
        float bias = dist_bias[dist];
        if constexpr (QueryBias) bias += fire_s.bias(fire_psi[dist], fire_norm[r]);
        const float logit = row_coef[r] * factor * score[a][b] + bias;
        const float p = visible ? expf(logit - row_lse[r]) : 0.f;
        const float dlogit = p * (dprob[a][b] - row_delta[r]);
        const float fixed_logit = row_fixed[r] * factor * score[a][b];
        dhead_scale_part += p * (fixed_logit - row_fixed_mean[r]) * dprob[a][b];
        if (want_dbias && visible) atomicAdd(dist_grad + dist, dlogit);  // shared-memory atomic
        if constexpr (QueryBias) {
          if (want_dfire && visible)
            fire_pair_gradient(fire_s, fire_psi[dist], fire_norm[r], i - j, dlogit, fire_grad, fire_sums);
        }
        p_tile[r * kPTileLd + c] = p;
        ds_tile[r * kPTileLd + c] = dlogit * row_coef[r] * factor;  // chain rule through s = q·k
      }
      // Row i's c and L gradient from this tile pair's part of its sums (fire_row_gradient is
      // linear in them): its 16 owners' parts summed, added by one of them.
      if constexpr (QueryBias) {
        if (want_dfire) {  // uniform across the block: every lane shuffles
          fire_sums.a = row_sum16(fire_sums.a);
          fire_sums.b = row_sum16(fire_sums.b);
          if (tx == 0 && i < seq_len) fire_row_gradient(fire_s, i, fire_sums, fire_grad);
        }
      }
    }
    __syncthreads();  // p and dS tiles (and dist_grad) are complete

    // This tile pair's d loss/d logit per distance t = d + i0 − j0 − (kBlockK − 1), into (H, T).
    if (want_dbias) {
      const int t_first = i0 - j0 - (kBlockK - 1);
      for (int d = threadIdx.x; d < kDistances; d += kThreads) {
        const int t = d + t_first;
        if (t >= 0 && t < seq_len) atomicAdd(dbias_table + static_cast<size_t>(head) * seq_len + t, dist_grad[d]);
      }
    }

    // dv[c][:] += Σ_r P[r][c] · dO[r][:],   dk[c][:] += Σ_r dS[r][c] · Q[r][:]   (c = ty + 16a)
#pragma unroll 2
    for (int r = 0; r < kBlockQ; ++r) {
      float p[kRowsPerThread];
      float ds[kRowsPerThread];
#pragma unroll
      for (int a = 0; a < kRowsPerThread; ++a) {
        p[a] = p_tile[r * kPTileLd + ty + 16 * a];
        ds[a] = ds_tile[r * kPTileLd + ty + 16 * a];
      }
#pragma unroll
      for (int g = 0; g < kColGroups; ++g) {
        const float4 do4 = shared4(do_tile + r * kLd + 4 * tx + 64 * g);
        const float4 q4 = shared4(q_tile + r * kLd + 4 * tx + 64 * g);
#pragma unroll
        for (int a = 0; a < kRowsPerThread; ++a) {
          axpy4(dv_acc[a][g], p[a], do4);
          axpy4(dk_acc[a][g], ds[a], q4);
        }
      }
    }

    // dq[r][:] += Σ_c dS[r][c] · K[c][:]   (r = ty + 16a), summed over key tiles in global memory.
    float4 dq_part[kRowsPerThread][kColGroups];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
      for (int g = 0; g < kColGroups; ++g) dq_part[a][g] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    tile_product_accumulate<D>(dq_part, ds_tile, k_tile, ty, tx);
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a) {
      const int i = i0 + ty + 16 * a;
      if (i >= seq_len) continue;
      float* dq_row = dq_accum + head_offset + static_cast<size_t>(i) * D;
#pragma unroll
      for (int g = 0; g < kColGroups; ++g) {
        float* target = dq_row + 4 * tx + 64 * g;
        atomicAdd(target + 0, dq_part[a][g].x);
        atomicAdd(target + 1, dq_part[a][g].y);
        atomicAdd(target + 2, dq_part[a][g].z);
        atomicAdd(target + 3, dq_part[a][g].w);
      }
    }
  }

  // dk, dv of this key tile (ds already carries multiplier · scale: no further scaling).
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    const int j = j0 + ty + 16 * a;
    if (j >= seq_len) continue;
    const size_t row = head_offset + static_cast<size_t>(j) * D;
#pragma unroll
    for (int g = 0; g < kColGroups; ++g) {
      store4(dk + row + 4 * tx + 64 * g, dk_acc[a][g]);
      store4(dv + row + 4 * tx + 64 * g, dv_acc[a][g]);
    }
  }

  // This block's d loss/d FIRE table into the head's row of (H, G + 2).
  if constexpr (QueryBias) {
    if (want_dfire) flush_fire_gradient<kThreads>(dbias_table, head, fire.G, fire_grad);  // uniform
  }

  // Σ over the block, then over blocks (and batches) with one atomic per block.
  if (want_dhead_scale) {  // uniform across the block
    const float warp_total = warp_sum(dhead_scale_part);
    if (threadIdx.x % 32 == 0) reduce_scratch[threadIdx.x / 32] = warp_total;
    __syncthreads();
    if (threadIdx.x == 0) {
      float block_total = 0.f;
      for (int w = 0; w < kThreads / 32; ++w) block_total += reduce_scratch[w];
      atomicAdd(dhead_scale + head, block_total);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

size_t align_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

size_t num_rows(const FusedArgs& args) {
  return static_cast<size_t>(args.batch) * args.heads * args.seq_len;
}

bool is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Shapes the kernels handle; pointers are checked by the callers.
bool valid_shape(const FusedArgs& args) {
  return args.batch >= 0 && args.heads >= 0 && args.seq_len >= 0 &&
         static_cast<long long>(args.batch) * args.heads <= 65535 &&
         fused_attention_supported(args.head_dim, args.dtype) &&
         (!has_query_bias(args.mod) || supported_fire_table_len(args.mod.bias_table_len));
}

// Zeroes dbias_table (H, bias_gradient_len) when set.
cudaError_t clear_dbias(const FusedArgs& args, cudaStream_t stream) {
  if (args.dbias_table == nullptr) return cudaSuccess;
  return cudaMemsetAsync(args.dbias_table, 0,
                         static_cast<size_t>(args.heads) * bias_gradient_len(args) * sizeof(float), stream);
}

bool empty(const FusedArgs& args) { return args.batch == 0 || args.heads == 0 || args.seq_len == 0; }

template <class Elem, int D>
cudaError_t launch_forward(const FusedArgs& args, cudaStream_t stream) {
  const bool fire = has_query_bias(args.mod);
  const size_t smem = forward_smem_bytes<D>() + (fire ? fire_forward_smem_bytes(args.mod) : 0);
  auto kernel = fire ? forward_kernel<Elem, D, true> : forward_kernel<Elem, D, false>;
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (status != cudaSuccess) return status;
  const dim3 grid(ceil_div(args.seq_len, kBlockQ), args.batch * args.heads);
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const Elem*>(args.q), static_cast<const Elem*>(args.k),
      static_cast<const Elem*>(args.v), static_cast<Elem*>(args.o), args.lse, args.fixed_logit_mean,
      args.heads, args.seq_len, args.mod);
  return cudaGetLastError();
}

template <class Elem, int D>
cudaError_t launch_backward(const FusedArgs& args, cudaStream_t stream) {
  const size_t rows = num_rows(args);
  char* workspace = static_cast<char*>(args.workspace);
  float* delta = reinterpret_cast<float*>(workspace);
  // fp32 dq accumulates in place; bf16 dq goes through an fp32 accumulator in the workspace.
  constexpr bool kAccumulateInPlace = sizeof(Elem) == sizeof(float);
  float* dq_accum = kAccumulateInPlace ? static_cast<float*>(args.dq)
                                       : reinterpret_cast<float*>(workspace + align_up(rows * sizeof(float), 256));

  cudaError_t status = cudaMemsetAsync(dq_accum, 0, rows * args.head_dim * sizeof(float), stream);
  if (status != cudaSuccess) return status;
  if (args.dhead_scale != nullptr) {
    status = cudaMemsetAsync(args.dhead_scale, 0, args.heads * sizeof(float), stream);
    if (status != cudaSuccess) return status;
  }
  status = clear_dbias(args, stream);
  if (status != cudaSuccess) return status;

  constexpr int kRowsPerBlock = kThreads / 32;
  const unsigned delta_blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  row_delta_kernel<Elem, D><<<delta_blocks, kThreads, 0, stream>>>(
      static_cast<const Elem*>(args.o), static_cast<const Elem*>(args.d_o), delta, rows);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  const bool fire = has_query_bias(args.mod);
  const size_t smem = backward_smem_bytes<D>() + (fire ? fire_backward_smem_bytes(args.mod) : 0);
  auto kernel = fire ? backward_kernel<Elem, D, true> : backward_kernel<Elem, D, false>;
  status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (status != cudaSuccess) return status;
  const dim3 grid(ceil_div(args.seq_len, kBlockK), args.batch * args.heads);
  kernel<<<grid, kThreads, smem, stream>>>(
      static_cast<const Elem*>(args.q), static_cast<const Elem*>(args.k),
      static_cast<const Elem*>(args.v), static_cast<const Elem*>(args.d_o), args.lse, delta,
      args.fixed_logit_mean, dq_accum,
      static_cast<Elem*>(args.dk), static_cast<Elem*>(args.dv), args.dhead_scale,
      args.dbias_table, args.heads, args.seq_len, args.mod);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  if constexpr (!kAccumulateInPlace) {
    const size_t count = rows * D;
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((count + kThreads - 1) / kThreads, 65535));
    convert_kernel<<<blocks, kThreads, 0, stream>>>(dq_accum, static_cast<__nv_bfloat16*>(args.dq), count);
    status = cudaGetLastError();
  }
  return status;
}

}  // namespace

bool fused_attention_supported(int head_dim, DType dtype) {
  return supported_head_dim(head_dim) && (dtype == DType::kFloat32 || dtype == DType::kBFloat16);
}

cudaError_t fused_attention_forward(const FusedArgs& args, cudaStream_t stream) {
  if (!valid_shape(args)) return cudaErrorInvalidValue;
  if (empty(args)) return cudaSuccess;
  if (!is_aligned16(args.q) || !is_aligned16(args.k) || !is_aligned16(args.v) ||
      !is_aligned16(args.o) || args.q == nullptr || args.k == nullptr || args.v == nullptr ||
      args.o == nullptr || args.lse == nullptr) {
    return cudaErrorInvalidValue;
  }
  const bool bf16 = args.dtype == DType::kBFloat16;
  // bf16 on sm_80+: the tensor-core kernels (fused_attention_tc.cu); fp32 and older devices: SIMT.
  if (bf16 && tc::usable(args, /*backward=*/false)) return tc::forward(args, stream);
  if (args.head_dim == 64) {
    return bf16 ? launch_forward<__nv_bfloat16, 64>(args, stream) : launch_forward<float, 64>(args, stream);
  }
  return bf16 ? launch_forward<__nv_bfloat16, 128>(args, stream) : launch_forward<float, 128>(args, stream);
}

std::size_t fused_attention_backward_workspace_bytes(const FusedArgs& args) {
  const size_t rows = num_rows(args);
  size_t bytes = align_up(rows * sizeof(float), 256);  // row deltas
  if (args.dtype == DType::kBFloat16) bytes += rows * static_cast<size_t>(args.head_dim) * sizeof(float);
  return bytes;
}

cudaError_t fused_attention_backward(const FusedArgs& args, cudaStream_t stream) {
  if (!valid_shape(args)) return cudaErrorInvalidValue;
  if (empty(args)) {
    // Nothing to differentiate, but dhead_scale and dbias_table are still outputs.
    cudaError_t status = args.dhead_scale
                             ? cudaMemsetAsync(args.dhead_scale, 0, args.heads * sizeof(float), stream)
                             : cudaSuccess;
    return status == cudaSuccess ? clear_dbias(args, stream) : status;
  }
  const void* buffers[] = {args.q, args.k, args.v, args.o, args.d_o, args.dq, args.dk, args.dv};
  for (const void* buffer : buffers) {
    if (buffer == nullptr || !is_aligned16(buffer)) return cudaErrorInvalidValue;
  }
  if (args.lse == nullptr || args.workspace == nullptr || !is_aligned16(args.workspace)) {
    return cudaErrorInvalidValue;
  }
  if (args.mod.head_scale != nullptr && args.dhead_scale != nullptr && args.fixed_logit_mean == nullptr) {
    return cudaErrorInvalidValue;
  }
  const bool bf16 = args.dtype == DType::kBFloat16;
  if (bf16 && tc::usable(args, /*backward=*/true)) return tc::backward(args, stream);
  if (args.head_dim == 64) {
    return bf16 ? launch_backward<__nv_bfloat16, 64>(args, stream) : launch_backward<float, 64>(args, stream);
  }
  return bf16 ? launch_backward<__nv_bfloat16, 128>(args, stream) : launch_backward<float, 128>(args, stream);
}

}  // namespace attention::cuda
