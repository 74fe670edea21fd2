// The fused CPU attention kernel's two halves meet here: fused_cpu.cpp lays out one call (the
// score-mod tables, padded operands, the autograd function), fused_cpu_kernels.cpp runs it (SIMD
// tiles, forward and backward workers, instruction-set dispatch). Private to those two files.
#pragma once

#include <cstdint>

#include "attention/score_mod.h"

namespace attention::fused_cpu_detail {

constexpr int64_t kPadBytes = 64;  // D and key tiles padded to 64 bytes: a multiple of every W

// Operands are laid out once per call so that no tile is ever packed: D padded to Dp (a multiple
// of 64 bytes), T to Tp = nkb·Bk, zero filled; Kᵀ and Vᵀ stored per key block, (Dp, Bk) each, so
// a tile's rows are Bk apart (rows T apart would alias in the L1 cache for power-of-2 T).
template <class T>
struct Problem {
  const T* q;   // (B, H, T, Dp)
  const T* k;   // (B, H, Tp, Dp)        backward only (dQ += dS·K)
  const T* kt;  // (B, H, nkb, Dp, Bk)   Kᵀ per key block: S = Q·Kᵀ
  const T* v;   // (B, H, Tp, Dp)        forward only (O += P·V)
  const T* vt;  // (B, H, nkb, Dp, Bk)   Vᵀ per key block, backward only (dP = dO·Vᵀ)
  int64_t B, H, n_ctx, D;  // n_ctx: the context length T
  int64_t Dp, Tp, nkb;     // padded D, padded T = nkb·Bk, number of key blocks
  int64_t Bq, Bk;          // tile sizes (Bk a multiple of 64 bytes)
  const T* row;            // (T)   scale · row_factor(i)
  const T* head;           // (H)   head scale
  const T* mult;           // (Tt)  distance multiplier at e = (T−1) − t
  const T* bias;           // (Hb, Tt) distance bias (ALiBi and the causal mask included)
  int64_t bias_stride;     // Tt, or 0 when every head shares one bias row
  // FIRE's bias, which sees the query position (score_mod.h), or null: added per pair.
  const T* fire;           // (H, fire_len) f_h on a grid, c_h, L_h
  int64_t fire_len;        // G + 2
  const T* fire_psi;       // (H, T) ψ_h(t)
  const T* fire_norm;      // (H, T) ψ_h(max(L_h, i)) + ε
};

template <class T>
struct ForwardOut {
  T* out;  // (B, H, T, D)
  T* lse;  // (B, H, T)
};

template <class T>
struct BackwardIO {
  const T* dout;  // (B, H, T, Dp)
  const T* lse;   // (B, H, T)
  const T* delta; // (B, H, T): rowsum(dO ∘ O) − dLSE
  T* dq_parts;    // (C, B, H, T, D)
  T* dk;          // (B, H, T, D)
  T* dv;          // (B, H, T, D)
  double* dhead;  // (B·H·C) partial sums of d loss / d head_scale, or null
  T* dbias;       // (B·H·C, Tt) partial sums of d loss / d logit per distance entry e, or null
                  // (FIRE: of d loss / d its table, Tt = G + 2)
  int64_t Tt;     // entries per row of dbias (the tables' length)
  int64_t C;      // key-block sets per head
};

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

enum class IsaKind { kAvx512, kAvx2, kGeneric };
// The best instruction set this CPU runs, and the one the kernels dispatch to (the best unless
// set_isa_override chose another; −1: none).
IsaKind detected_isa();
IsaKind active_isa();
void set_isa_override(int isa);

// The forward (out, lse) and backward (dq parts, dk, dv, and with ParamGrad the head-scale and
// per-distance bias sums) over every (b, h) of P, on all threads. Instantiated for float and
// double.
template <class T>
void run_forward(const Problem<T>& P, const ForwardOut<T>& F);
template <class T, bool ParamGrad>
void run_backward(const Problem<T>& P, const BackwardIO<T>& G);

}  // namespace attention::fused_cpu_detail
