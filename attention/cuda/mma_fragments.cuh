// Internal to the bf16 tensor-core kernels (fused_attention_tc.cu): the index arithmetic of
// mma.sync.m16n8k16 fragments, ldmatrix addresses, the shared-memory swizzle, the causal tile
// ranges and the per-element logit terms. Plain C++ as well as CUDA, with no runtime and no torch,
// so that tests/cuda/mma_layout_test.cpp checks on the host the very functions the kernels
// call.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16" with .bf16 operands). In a warp,
// lane l has group g = l / 4 and thread-in-group t = l % 4.
//   A (16 × 16, row-major m × k): 8 bf16 in 4 registers; element e (register e / 2, low half when
//     e is even) is at row g + 8·[e ∈ {2,3,6,7}], column 2t + (e & 1) + 8·[e ≥ 4].
//   B (16 × 8, k × n):            4 bf16 in 2 registers; element e at k = 2t + (e & 1) + 8·[e ≥ 2],
//                                 n = g.
//   C (16 × 8 fp32, m × n):       4 floats; element e at row g + 8·[e ≥ 2], column 2t + (e & 1).
// The C fragments of two adjacent n-blocks are, element for element, the A fragment of the 16 × 16
// tile they form (a_from_c_*): P = softmax(S) goes from the S·V accumulators straight into the
// A operand of P·V, as in FlashAttention-2.
#pragma once

#if defined(__CUDACC__)
#define ATTN_MMA_HD __host__ __device__ __forceinline__
#else
#define ATTN_MMA_HD inline
#endif

#include <math.h>

namespace attention::cuda::mma {

// ---------------------------------------------------------------------------------------------
// Block shape shared by the forward and backward tensor-core kernels.

constexpr int kWarpSize = 32;
constexpr int kWarps = 4;                     // warps per block
constexpr int kThreads = kWarps * kWarpSize;  // 128
constexpr int kTileQ = 64;                    // query rows per tile (16 per warp in the forward)
constexpr int kTileK = 64;                    // key rows per tile (16 per warp in the backward)
constexpr int kWarpRows = 16;                 // the m of one mma: rows a warp owns
constexpr int kDistances = kTileQ + kTileK - 1;  // distinct i − j within a tile pair
constexpr int kDistanceTableLen = kTileQ + kTileK;  // kDistances, padded

static_assert(kTileQ == kWarps * kWarpRows && kTileK == kWarps * kWarpRows,
              "each warp owns 16 rows of a tile");
static_assert(kTileQ == kTileK, "square tiles: the diagonal key tile of query tile m is tile m");

// ---------------------------------------------------------------------------------------------
// mma.m16n8k16 fragments.

ATTN_MMA_HD constexpr int lane_group(int lane) { return lane >> 2; }
ATTN_MMA_HD constexpr int lane_in_group(int lane) { return lane & 3; }

// A: element e ∈ [0, 8).
ATTN_MMA_HD constexpr int a_row(int lane, int e) { return lane_group(lane) + ((e & 2) ? 8 : 0); }
ATTN_MMA_HD constexpr int a_col(int lane, int e) {
  return 2 * lane_in_group(lane) + (e & 1) + ((e & 4) ? 8 : 0);
}
// B: element e ∈ [0, 4).
ATTN_MMA_HD constexpr int b_k(int lane, int e) {
  return 2 * lane_in_group(lane) + (e & 1) + ((e & 2) ? 8 : 0);
}
ATTN_MMA_HD constexpr int b_n(int lane, int /*e*/) { return lane_group(lane); }
// C (accumulator): element e ∈ [0, 4).
ATTN_MMA_HD constexpr int c_row(int lane, int e) { return lane_group(lane) + ((e & 2) ? 8 : 0); }
ATTN_MMA_HD constexpr int c_col(int lane, int e) { return 2 * lane_in_group(lane) + (e & 1); }

// A element e of a 16 × 16 tile is element a_from_c_elem(e) of the C fragment of its n-block
// a_from_c_block(e) (0: columns 0–7, 1: columns 8–15), in the same lane.
ATTN_MMA_HD constexpr int a_from_c_block(int e) { return e >> 2; }
ATTN_MMA_HD constexpr int a_from_c_elem(int e) { return e & 3; }

// ---------------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.x4: lanes 8m .. 8m + 7 give the addresses of rows 0..7 of matrix m,
// and register m of lane l receives row l / 4, columns 2(l % 4), 2(l % 4) + 1 of matrix m (with
// .trans: rows 2(l % 4), 2(l % 4) + 1 of column l / 4). Each function below is the (row, column)
// of the 8-element row that lane l points at, relative to the 16 × 16 block being loaded.
//
// Pattern "a": matrices (rows 0–7, cols 0–7), (8–15, 0–7), (0–7, 8–15), (8–15, 8–15).
//   - without .trans from a row-major [m][k] tile: the A fragment of rows m, columns k;
//   - with .trans from a row-major [k][n] tile: the B fragments of n-blocks 0–7 (registers 0, 1)
//     and 8–15 (registers 2, 3).
ATTN_MMA_HD constexpr int ldsm_a_row(int lane) { return lane & 15; }
ATTN_MMA_HD constexpr int ldsm_a_col(int lane) { return (lane >> 4) << 3; }
// Pattern "b": matrices (rows 0–7, cols 0–7), (0–7, 8–15), (8–15, 0–7), (8–15, 8–15).
//   - without .trans from a row-major [n][k] tile: the B fragments of n-blocks 0–7 (registers
//     0, 1) and 8–15 (registers 2, 3);
//   - with .trans from a row-major [k][m] tile: the A fragment of the transposed block.
ATTN_MMA_HD constexpr int ldsm_b_row(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
ATTN_MMA_HD constexpr int ldsm_b_col(int lane) { return ((lane >> 3) & 1) << 3; }

// ---------------------------------------------------------------------------------------------
// Shared-memory tiles: bf16, row-major [rows][kCols], kCols ∈ {64, 128}. The 16-byte chunk
// (8 elements) c of row r is stored at chunk c ^ (r % 8): the 8 rows one ldmatrix matrix reads
// (or 8 lanes' cp.async writes of one row) land in 8 distinct 16-byte bank groups.
template <int kCols>
ATTN_MMA_HD constexpr int swizzled(int row, int col) {
  static_assert(kCols % 64 == 0, "the swizzle permutes 8 chunks of 8 elements");
  return row * kCols + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// The cp.async copy of a (kRows, kCols) tile: 16-byte chunk `index` (kThreads consecutive
// indices per pass) is row index / (kCols / 8), column 8 · (index % (kCols / 8)).
template <int kCols>
ATTN_MMA_HD constexpr int copy_row(int index) { return index / (kCols / 8); }
template <int kCols>
ATTN_MMA_HD constexpr int copy_col(int index) { return (index % (kCols / 8)) * 8; }

// ---------------------------------------------------------------------------------------------
// Causal tile ranges and masks (tiles of 64; T need not be a multiple).

ATTN_MMA_HD constexpr int num_tiles(int seq_len) { return (seq_len + kTileQ - 1) / kTileQ; }

// Forward: query tile m visits key tiles [0, fwd_key_tiles(m, T)): up to the one holding its last
// row's diagonal (tile m); tiles above the diagonal are skipped.
ATTN_MMA_HD constexpr int fwd_key_tiles(int q_tile, int seq_len) {
  const int rows_end = (q_tile + 1) * kTileQ < seq_len ? (q_tile + 1) * kTileQ : seq_len;
  return rows_end <= 0 ? 0 : (rows_end - 1) / kTileK + 1;
}

// Backward: key tile n visits query tiles [bwd_first_q_tile(n), num_tiles(T)): rows below its
// first key see none of it.
ATTN_MMA_HD constexpr int bwd_first_q_tile(int k_tile) { return k_tile * kTileK / kTileQ; }

// Whether pair (query i, key j) enters the softmax: causal, and a real row (which implies a real
// key). Padding rows i ≥ T get no visible key; their values are never stored.
ATTN_MMA_HD constexpr bool pair_visible(int i, int j, int seq_len) { return j <= i && i < seq_len; }

// Whether the tile pair (rows i0.., keys j0..) holds any pair that pair_visible rejects: it
// reaches above the diagonal or past T. Only such tiles (the diagonal ones, and the ragged last
// tile) pay for the per-element mask.
ATTN_MMA_HD constexpr bool tile_needs_mask(int i0, int j0, int seq_len) {
  return j0 + kTileK - 1 > i0 || i0 + kTileQ > seq_len || j0 + kTileK > seq_len;
}

// Distance tables. Entry d of a tile pair (i0, j0) holds the terms of t = d + i0 − j0 − (kTileK − 1);
// pair (local row r, local key c) reads entry distance_index(r, c).
ATTN_MMA_HD constexpr int distance_index(int r, int c) { return r - c + kTileK - 1; }
ATTN_MMA_HD constexpr int distance_of_entry(int d, int i0, int j0) { return d + i0 - j0 - (kTileK - 1); }

// ---------------------------------------------------------------------------------------------
// Per-element terms, the same expressions as the SIMT kernel (fused_attention.cu):
//   logit = row_coef · factor · acc + bias
// with acc the fp32 accumulator q_i·k_j, row_coef = head_scale · row_factor(i) · scale,
// factor = distance_factor(t) and bias = distance_bias(t, h) (score_mod.h), t = i − j.

ATTN_MMA_HD float tc_logit(float row_coef, float factor, float bias, float acc) {
  return row_coef * factor * acc + bias;
}

// Backward, one (i, j): P recomputed from the forward's lse, dLogit = P (dP − D_i), the gradient of
// q·k (dLogit · multiplier · scale) and this pair's part of dhead_scale,
// P (c − mean_i c) dP with c = row_fixed · factor · acc (row_fixed = row_factor(i) · scale).
struct BackwardTerms {
  float p;       // P_ij (0 when masked)
  float dlogit;  // d loss / d logit_ij
  float ds;      // d loss / d (q_i·k_j)
  float dhead;   // contribution to d loss / d head_scale
};

ATTN_MMA_HD BackwardTerms tc_backward_terms(bool visible, float acc, float dp, float row_coef,
                                            float row_fixed, float factor, float bias, float lse,
                                            float delta, float fixed_mean) {
  BackwardTerms r;
  const float logit = tc_logit(row_coef, factor, bias, acc);
  r.p = visible ? expf(logit - lse) : 0.f;
  r.dlogit = r.p * (dp - delta);
  r.ds = r.dlogit * row_coef * factor;
  r.dhead = r.p * (row_fixed * factor * acc - fixed_mean) * dp;
  return r;
}

}  // namespace attention::cuda::mma
