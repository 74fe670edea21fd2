// Blockwise causal attention on the CPU (FlashAttention-2 style), forward and backward.
//
// Layout of one call:
//   1. Tables of the score-mod, built once (O(H·T)): per-query factor row[i] = scale·row_factor(i),
//      and, indexed by e = (T−1) − t so that a tile row reads them with ascending addresses, the
//      distance multiplier mult[e] and the per-head bias bias[h][e] (ALiBi included). Entries with
//      t < 0 (above the diagonal) hold mult 0 and bias −inf: the causal mask costs nothing extra.
//   2. Operands padded once (D and T to 64 bytes, zeros), K and V also transposed, so that tiles
//      are read in place, never packed.
//   3. Forward: tasks (b, h, query block), a head's blocks in a row so that the threads share its
//      K and V in the cache; key blocks from the diagonal down to 0 with an online softmax.
//   4. Backward: tasks (b, h, set of key blocks); for each key block, all query blocks at or below
//      the diagonal: dV, dK accumulate in the task, dQ in a per-task (T × D) buffer (one per task
//      set, summed when a head is split over several threads).
// Tile matmuls are register-blocked loops over GCC vector types, compiled three times (AVX-512,
// AVX2+FMA, baseline) and selected at run time.
//
// This file is compiled with -fopenmp (attention/CMakeLists.txt): LibTorch's at::parallel_for is
// header-only for its OpenMP backend and silently runs serially in a TU built without it.
#include "attention/fused_cpu.h"


#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"  // vector types in always-inline helpers only
#endif

#define ATTN_INLINE inline __attribute__((always_inline))

namespace attention {
namespace {

using torch::Tensor;

// ---- SIMD building blocks ----------------------------------------------------------------------

template <class T, int Bytes>
struct Simd {
  typedef T V __attribute__((vector_size(Bytes)));
  static constexpr int W = Bytes / int(sizeof(T));
  static ATTN_INLINE V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static ATTN_INLINE void store(T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); }
  // Lane 0 permuted everywhere: one broadcast. (V{} + x costs an add, 0 + x being no identity
  // for −0; x − V{} and lane loops sometimes become W masked inserts in large functions.)
  static ATTN_INLINE V splat(T x) {
    typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I
        __attribute__((vector_size(Bytes)));
    V v{};
    v[0] = x;
    return __builtin_shuffle(v, I{});
  }
  static ATTN_INLINE V max(V a, V b) { return a > b ? a : b; }
  // The low and high halves of v (H: the half-width vector type).
  template <class H>
  static ATTN_INLINE void split(V v, H& lo, H& hi) {
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  }
  // Horizontal max / sum: halve the vector down to 16 bytes, then lanes.
  static ATTN_INLINE T hmax(V v) {
    if constexpr (Bytes > 16) {
      using Half = Simd<T, Bytes / 2>;
      typename Half::V lo, hi;
      split(v, lo, hi);
      return Half::hmax(Half::max(lo, hi));
    } else {
      T m = v[0];
      for (int l = 1; l < W; ++l) m = v[l] > m ? v[l] : m;
      return m;
    }
  }
  static ATTN_INLINE T hsum(V v) {
    if constexpr (Bytes > 16) {
      using Half = Simd<T, Bytes / 2>;
      typename Half::V lo, hi;
      split(v, lo, hi);
      return Half::hsum(lo + hi);
    } else {
      T s = v[0];
      for (int l = 1; l < W; ++l) s += v[l];
      return s;
    }
  }
};

// exp on a vector. float: Cephes-style range reduction + degree-6 polynomial (≤ 2 ulp), exactly 0
// far below the float range (masked logits are −inf), NaN stays NaN. double: libm per lane (the
// float64 path exists for gradient checks, not speed).
template <class S>
ATTN_INLINE typename S::V vexp(typename S::V x) {
  using V = typename S::V;
  if constexpr (std::is_same_v<decltype(x[0] + 0), float>) {
    constexpr bool scalef = sizeof(V) == 64;  // AVX-512: only its workers use 64-byte vectors
    // With vscalefps, p·2^n is exact down to the denormals and 0 below: clamping at −110
    // (2^−159·p rounds to 0) replaces the old clamps and zero select; without it, 2^n is built
    // from bits and n must stay within the normal exponents.
    const V lo = S::splat(scalef ? -110.0f : -87.3365478515625f);
    V xc = x < lo ? lo : x;  // NaN stays NaN
    if constexpr (!scalef) {
      const V hi = S::splat(88.3762626647949f);
      xc = xc > hi ? hi : xc;
    }
    const V magic = S::splat(12582912.0f);  // 1.5·2^23: adding it rounds to the nearest integer
    const V n = (xc * S::splat(1.44269504088896341f) + magic) - magic;
    V r = xc - n * S::splat(0.693359375f);
    r = r - n * S::splat(-2.12194440e-4f);
    V p = S::splat(1.9875691500e-4f);
    p = p * r + S::splat(1.3981999507e-3f);
    p = p * r + S::splat(8.3334519073e-3f);
    p = p * r + S::splat(4.1665795894e-2f);
    p = p * r + S::splat(1.6666665459e-1f);
    p = p * r + S::splat(5.0000001201e-1f);
    p = p * (r * r) + r + S::splat(1.0f);
    if constexpr (scalef) {
      // One vscalefps instead of convert, add, shift, multiply and select. Inline asm: the
      // intrinsic would need this helper itself compiled for AVX-512, not just its callers.
      V y;
      asm("vscalefps %2, %1, %0" : "=v"(y) : "v"(p), "v"(n));
      return y;
    } else {
      typedef int32_t IV __attribute__((vector_size(sizeof(V))));
      const IV bits = (__builtin_convertvector(n, IV) + 127) << 23;  // 2^n
      const V y = p * (V)bits;
      return x < lo ? S::splat(0.0f) : y;
    }
  } else {
    for (int l = 0; l < S::W; ++l) x[l] = std::exp(x[l]);
    return x;
  }
}

// An instruction-set configuration: vector width and register tile (R rows × NV vectors).
template <class T, int Bytes, int Rows, int Vecs>
struct Isa {
  using S = Simd<T, Bytes>;
  using V = typename S::V;
  static constexpr int W = S::W, R = Rows, NV = Vecs;
};

// ---- tile matmul -------------------------------------------------------------------------------
// C (m × n) = or += A·B, with A(r, p) = A[r·ars + p·acs] (so Aᵀ is just swapped strides), B (k × n)
// row-major with leading dimension ldb, C row-major ldc; n a multiple of the vector width W.

template <class I, bool Acc, int R, int NV, class T>
ATTN_INLINE void micro_kernel(int64_t k, const T* A, int64_t ars, int64_t acs, const T* B,
                              int64_t ldb, T* C, int64_t ldc) {
  using S = typename I::S;
  using V = typename I::V;
  constexpr int W = I::W;
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Acc ? S::load(C + r * ldc + v * W) : V{};
  for (int64_t p = 0; p < k; ++p) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = S::load(B + p * ldb + v * W);
    for (int r = 0; r < R; ++r) {
      const T a = A[r * ars + p * acs];  // scalar × vector: one broadcast load
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) S::store(C + r * ldc + v * W, acc[r][v]);
}

template <class I, bool Acc, int R, class T>
ATTN_INLINE void gemm_rows(int64_t nvec, int64_t k, const T* A, int64_t ars, int64_t acs,
                           const T* B, int64_t ldb, T* C, int64_t ldc) {
  constexpr int W = I::W, NV = I::NV;
  int64_t v = 0;
  for (; v + NV <= nvec; v += NV)
    micro_kernel<I, Acc, R, NV>(k, A, ars, acs, B + v * W, ldb, C + v * W, ldc);
  const int64_t rest = nvec - v;
  B += v * W;
  C += v * W;
  if constexpr (NV > 1)
    if (rest == 1) micro_kernel<I, Acc, R, 1>(k, A, ars, acs, B, ldb, C, ldc);
  if constexpr (NV > 2)
    if (rest == 2) micro_kernel<I, Acc, R, 2>(k, A, ars, acs, B, ldb, C, ldc);
  if constexpr (NV > 3)
    if (rest == 3) micro_kernel<I, Acc, R, 3>(k, A, ars, acs, B, ldb, C, ldc);
}

template <class I, bool Acc, class T>
ATTN_INLINE void gemm(int64_t m, int64_t n, int64_t k, const T* A, int64_t ars, int64_t acs,
                      const T* B, int64_t ldb, T* C, int64_t ldc) {
  const int64_t nvec = n / I::W;
  int64_t i = 0;
  for (; i + I::R <= m; i += I::R)
    gemm_rows<I, Acc, I::R>(nvec, k, A + i * ars, ars, acs, B, ldb, C + i * ldc, ldc);
  for (; i < m; ++i) gemm_rows<I, Acc, 1>(nvec, k, A + i * ars, ars, acs, B, ldb, C + i * ldc, ldc);
}

// ---- problem description -----------------------------------------------------------------------

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
  int64_t Tt;     // entries per row of dbias (the tables' length)
  int64_t C;      // key-block sets per head
};

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Work distribution: at::parallel_for starts one worker per thread; workers then take tasks one
// at a time from a shared counter (costliest first). Causal tasks differ in cost, and on a shared
// machine a thread can be descheduled for a while: static chunks would leave the other threads
// waiting, a shared counter lets them take over the remaining tasks.
using TaskCounter = std::atomic<int64_t>;

// Key block of the z-th task of a key-block set: zig-zag (0, n−1, 1, n−2, …) so that the sets
// z ≡ c (mod C) of a head split over C tasks get similar amounts of work.
inline int64_t zigzag(int64_t w, int64_t n) { return (w % 2 == 0) ? w / 2 : n - 1 - w / 2; }

// ---- forward -----------------------------------------------------------------------------------

// One tile row: logits in place, then the online-softmax update of (m_run, l_run, o).
template <class I, class T>
ATTN_INLINE void online_softmax_row(T* s, int64_t nc, T rc, const T* mu, const T* bi, T& m_run,
                                    T& l_run, T* o, int64_t Dp) {
  using S = typename I::S;
  using V = typename I::V;
  constexpr int W = I::W;
  const V vrc = S::splat(rc);
  V vmax = S::splat(-std::numeric_limits<T>::infinity());
  for (int64_t c = 0; c < nc; c += W) {
    const V x = vrc * S::load(mu + c) * S::load(s + c) + S::load(bi + c);
    S::store(s + c, x);
    vmax = S::max(vmax, x);
  }
  const T m_new = std::max(m_run, S::hmax(vmax));
  if (m_new == -std::numeric_limits<T>::infinity()) {  // nothing visible yet in this row
    std::fill(s, s + nc, T(0));
    return;
  }
  const V vm = S::splat(m_new);
  V vsum = V{};
  for (int64_t c = 0; c < nc; c += W) {
    const V p = vexp<S>(S::load(s + c) - vm);
    S::store(s + c, p);
    vsum += p;
  }
  // Rescale what was accumulated only when the maximum grows: with key blocks taken nearest
  // first, under a bias that falls with distance (scale-invariant, ALiBi) it seldom does.
  if (m_new > m_run) {
    const T alpha = std::exp(m_run - m_new);
    l_run *= alpha;
    const V va = S::splat(alpha);
    for (int64_t d = 0; d < Dp; d += W) S::store(o + d, S::load(o + d) * va);
    m_run = m_new;
  }
  l_run += S::hsum(vsum);
}

template <class I, class T>
ATTN_INLINE void forward_worker(const Problem<T>& P, const ForwardOut<T>& F, TaskCounter& next) {
  const int64_t T_ = P.n_ctx, D = P.D, Dp = P.Dp, Tp = P.Tp, Bq = P.Bq, Bk = P.Bk;
  const int64_t nq = (T_ + Bq - 1) / Bq;
  const int64_t BH = P.B * P.H, tasks = BH * nq;
  std::vector<T> s(Bq * Bk), o(Bq * Dp), m_run(Bq), l_run(Bq), rc(Bq);
  for (int64_t w = next++; w < tasks; w = next++) {
    // Task w: head w / nq, query block nq − 1 − w % nq (its last blocks, with the most keys,
    // first). Both threads on one head: at T = 16384 its K and V (8 MB) stay in L3 for both,
    // ~6% faster than heads side by side (forward alone, measured at 64 × 128 tiles).
    const int64_t bh = w / nq, h = bh % P.H;
    const int64_t i0 = (nq - 1 - w % nq) * Bq, m = std::min(Bq, T_ - i0);
    const T* qi = P.q + (bh * T_ + i0) * Dp;  // (m, Dp)
    const T* kth = P.kt + bh * Tp * Dp;       // (nkb, Dp, Bk)
    const T* vh = P.v + bh * Tp * Dp;         // (Tp, Dp)
    const T* bias_h = P.bias + h * P.bias_stride;
    for (int64_t r = 0; r < m; ++r) {
      rc[r] = P.head[h] * P.row[i0 + r];
      m_run[r] = -std::numeric_limits<T>::infinity();
      l_run[r] = T(0);
    }
    std::fill(o.begin(), o.begin() + m * Dp, T(0));
    const int64_t last = i0 + m - 1;  // last query row; keys beyond it are masked for the block
    for (int64_t j0 = last / Bk * Bk; j0 >= 0; j0 -= Bk) {
      // Columns past min(T, last + 1) are masked for every row of the block: not computed.
      const int64_t nc = round_up(std::min({Bk, T_ - j0, last - j0 + 1}), I::W);
      gemm<I, false>(m, nc, Dp, qi, Dp, 1, kth + j0 * Dp, Bk, s.data(), Bk);  // S = Q·Kᵀ
      for (int64_t r = 0; r < m; ++r) {
        const int64_t e0 = (T_ - 1) - (i0 + r) + j0;
        online_softmax_row<I>(s.data() + r * Bk, nc, rc[r], P.mult + e0, bias_h + e0, m_run[r],
                              l_run[r], o.data() + r * Dp, Dp);
      }
      gemm<I, true>(m, Dp, nc, s.data(), Bk, 1, vh + j0 * Dp, Dp, o.data(), Dp);  // O += P·V
    }
    T* out = F.out + (bh * T_ + i0) * D;
    for (int64_t r = 0; r < m; ++r) {
      const T inv = T(1) / l_run[r];
      for (int64_t d = 0; d < D; ++d) out[r * D + d] = o[r * Dp + d] * inv;
      F.lse[bh * T_ + i0 + r] = m_run[r] + std::log(l_run[r]);
    }
  }
}

// ---- backward ----------------------------------------------------------------------------------

// One tile row: s holds q·k on entry and P on exit; dp holds dO·v on entry and d logit/d(q·k) ·
// d loss/d logit on exit. Returns Σ_c dlogit·mult·(q·k) (the head-scale gradient, without row[i]);
// adds each dlogit to gb[c] (the bias-table gradient at the row's distance entries) when gb is set.
template <class I, bool ParamGrad, class T>
ATTN_INLINE T backward_row(T* s, T* dp, int64_t nc, T rc, const T* mu, const T* bi, T lse,
                           T delta, T* gb) {
  using S = typename I::S;
  using V = typename I::V;
  constexpr int W = I::W;
  const V vrc = S::splat(rc), vlse = S::splat(lse), vdelta = S::splat(delta);
  V vhead = V{};
  for (int64_t c = 0; c < nc; c += W) {
    const V dot = S::load(s + c), m = S::load(mu + c);
    const V p = vexp<S>(vrc * m * dot + S::load(bi + c) - vlse);
    const V dlogit = p * (S::load(dp + c) - vdelta);
    if constexpr (ParamGrad) {
      vhead += dlogit * m * dot;
      if (gb) S::store(gb + c, S::load(gb + c) + dlogit);
    }
    S::store(s + c, p);
    S::store(dp + c, dlogit * vrc * m);
  }
  return ParamGrad ? S::hsum(vhead) : T(0);
}

template <class I, bool ParamGrad, class T>
ATTN_INLINE void backward_worker(const Problem<T>& P, const BackwardIO<T>& G, TaskCounter& next) {
  const int64_t T_ = P.n_ctx, D = P.D, Dp = P.Dp, Tp = P.Tp, Bq = P.Bq, Bk = P.Bk, C = G.C;
  const int64_t nk = P.nkb;
  const int64_t tasks = P.B * P.H * C;
  std::vector<T> s(Bq * Bk), dp(Bq * Bk), dk(Bk * Dp), dv(Bk * Dp), dq(T_ * Dp);
  T* gbias = nullptr;  // this task's row of G.dbias
  for (int64_t w = next++; w < tasks; w = next++) {
    const int64_t bh = w / C, c = w % C, h = bh % P.H;  // (b, h) and its key-block set c
    const T* qh = P.q + bh * T_ * Dp;     // (T, Dp)
    const T* doh = G.dout + bh * T_ * Dp; // (T, Dp)
    const T* kh = P.k + bh * Tp * Dp;     // (Tp, Dp)
    const T* kth = P.kt + bh * Tp * Dp;   // (nkb, Dp, Bk)
    const T* vth = P.vt + bh * Tp * Dp;   // (nkb, Dp, Bk)
    const T* lse = G.lse + bh * T_;
    const T* delta = G.delta + bh * T_;
    const T* bias_h = P.bias + h * P.bias_stride;
    const T hs = P.head[h];
    double dhead = 0.0;
    std::fill(dq.begin(), dq.end(), T(0));
    if (G.dbias) {
      gbias = G.dbias + w * G.Tt;
      std::fill(gbias, gbias + G.Tt, T(0));
    }
    for (int64_t z = c; z < nk; z += C) {  // this task's key blocks, zig-zag for balance
      const int64_t j0 = zigzag(z, nk) * Bk, n = std::min(Bk, T_ - j0);
      std::fill(dk.begin(), dk.end(), T(0));
      std::fill(dv.begin(), dv.end(), T(0));
      for (int64_t i0 = j0 / Bq * Bq; i0 < T_; i0 += Bq) {
        const int64_t m = std::min(Bq, T_ - i0);
        // Keys past the block's last query row are masked for every row: skip their columns.
        const int64_t nc = round_up(std::min(n, i0 + m - j0), I::W);
        const T* qi = qh + i0 * Dp;
        const T* doi = doh + i0 * Dp;
        gemm<I, false>(m, nc, Dp, qi, Dp, 1, kth + j0 * Dp, Bk, s.data(), Bk);    // Q·Kᵀ
        gemm<I, false>(m, nc, Dp, doi, Dp, 1, vth + j0 * Dp, Bk, dp.data(), Bk);  // dO·Vᵀ
        for (int64_t r = 0; r < m; ++r) {
          const int64_t i = i0 + r, e0 = (T_ - 1) - i + j0;
          const T g = backward_row<I, ParamGrad>(s.data() + r * Bk, dp.data() + r * Bk, nc,
                                                 hs * P.row[i], P.mult + e0, bias_h + e0, lse[i],
                                                 delta[i], gbias ? gbias + e0 : nullptr);
          if constexpr (ParamGrad) dhead += double(g) * double(P.row[i]);
        }
        gemm<I, true>(nc, Dp, m, s.data(), 1, Bk, doi, Dp, dv.data(), Dp);   // dV += Pᵀ·dO
        gemm<I, true>(nc, Dp, m, dp.data(), 1, Bk, qi, Dp, dk.data(), Dp);   // dK += dSᵀ·Q
        gemm<I, true>(m, Dp, nc, dp.data(), Bk, 1, kh + j0 * Dp, Dp, dq.data() + i0 * Dp, Dp);
      }
      T* dkh = G.dk + (bh * T_ + j0) * D;
      T* dvh = G.dv + (bh * T_ + j0) * D;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t d = 0; d < D; ++d) {
          dkh[r * D + d] = dk[r * Dp + d];
          dvh[r * D + d] = dv[r * Dp + d];
        }
    }
    T* dqh = G.dq_parts + (c * P.B * P.H + bh) * T_ * D;
    for (int64_t i = 0; i < T_; ++i)
      for (int64_t d = 0; d < D; ++d) dqh[i * D + d] = dq[i * Dp + d];
    if (G.dhead) G.dhead[w] = dhead;
  }
}

// ---- instruction-set dispatch ------------------------------------------------------------------

enum class IsaKind { kAvx512, kAvx2, kGeneric };

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define ATTN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define ATTN_HAVE_X86_ISAS 1
#else
#define ATTN_TARGET_AVX512
#define ATTN_TARGET_AVX2
#define ATTN_HAVE_X86_ISAS 0
#endif

template <class T>
using Avx512 = Isa<T, 64, 4, 4>;
template <class T>
using Avx2 = Isa<T, 32, 4, 2>;
template <class T>
using Generic = Isa<T, 16, 4, 2>;

#define ATTN_DEFINE_WORKERS(NAME, ISA, TARGET)                                                   \
  template <class T>                                                                             \
  TARGET void forward_##NAME(const Problem<T>& P, const ForwardOut<T>& F, TaskCounter& next) {   \
    forward_worker<ISA<T>>(P, F, next);                                                          \
  }                                                                                              \
  template <class T, bool ParamGrad>                                                             \
  TARGET void backward_##NAME(const Problem<T>& P, const BackwardIO<T>& G, TaskCounter& next) {  \
    backward_worker<ISA<T>, ParamGrad>(P, G, next);                                              \
  }

ATTN_DEFINE_WORKERS(avx512, Avx512, ATTN_TARGET_AVX512)
ATTN_DEFINE_WORKERS(avx2, Avx2, ATTN_TARGET_AVX2)
ATTN_DEFINE_WORKERS(generic, Generic, )

IsaKind detected_isa() {
#if ATTN_HAVE_X86_ISAS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return IsaKind::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IsaKind::kAvx2;
#endif
  return IsaKind::kGeneric;
}

std::atomic<int> g_isa_override{-1};  // −1: auto

IsaKind active_isa() {
  static const IsaKind detected = detected_isa();
  const int o = g_isa_override.load();
  return o < 0 ? detected : IsaKind(o);
}

// One worker per thread (never more than tasks); each drains the shared task counter.
template <class Worker>
void run_workers(int64_t tasks, const Worker& worker) {
  TaskCounter next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(tasks, at::get_num_threads()));
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) { worker(next); });
}

template <class T>
void run_forward(const Problem<T>& P, const ForwardOut<T>& F) {
  const IsaKind isa = active_isa();
  run_workers(P.B * P.H * ((P.n_ctx + P.Bq - 1) / P.Bq), [&](TaskCounter& next) {
    switch (isa) {
      case IsaKind::kAvx512: forward_avx512(P, F, next); break;
      case IsaKind::kAvx2: forward_avx2(P, F, next); break;
      default: forward_generic(P, F, next); break;
    }
  });
}

template <class T, bool ParamGrad>
void run_backward(const Problem<T>& P, const BackwardIO<T>& G) {
  const IsaKind isa = active_isa();
  run_workers(P.B * P.H * G.C, [&](TaskCounter& next) {
    switch (isa) {
      case IsaKind::kAvx512: backward_avx512<T, ParamGrad>(P, G, next); break;
      case IsaKind::kAvx2: backward_avx2<T, ParamGrad>(P, G, next); break;
      default: backward_generic<T, ParamGrad>(P, G, next); break;
    }
  });
}

// ---- tables and the autograd function ----------------------------------------------------------

struct Tables {
  Tensor row;   // (T)
  Tensor mult;  // (Tt)
  Tensor bias;  // (Hb, Tt)
};

// Built in float64 from score_mod.h, stored in the kernel's dtype. alibi: (H) or undefined;
// bias_table: (H, T' >= T) or undefined (a learned distance bias).
Tables build_tables(const ScoreMod& mod_in, int64_t T, int64_t H, int64_t pad,
                    const Tensor& alibi, const Tensor& bias_table, at::ScalarType dtype) {
  ScoreMod mod = mod_in;
  mod.head_scale = nullptr;   // travels as a tensor
  mod.alibi_slope = nullptr;  // added below from `alibi`
  mod.bias_table = nullptr;   // added below from `bias_table`
  const int64_t Tt = T + pad;
  const double inf = std::numeric_limits<double>::infinity();
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  Tensor row = at::empty({T}, f64), mult = at::empty({Tt}, f64);
  const int64_t Hb = alibi.defined() || bias_table.defined() ? H : 1;
  Tensor bias = at::empty({Hb, Tt}, f64);
  double* rp = row.data_ptr<double>();
  double* mp = mult.data_ptr<double>();
  double* bp = bias.data_ptr<double>();
  std::vector<double> slopes(Hb, 0.0);
  if (alibi.defined()) {
    Tensor a = alibi.to(at::kDouble).contiguous();
    std::copy(a.data_ptr<double>(), a.data_ptr<double>() + H, slopes.begin());
  }
  Tensor learned;  // (H, T) float64
  if (bias_table.defined()) learned = bias_table.narrow(1, 0, T).to(at::kDouble).contiguous();
  const double* lp = learned.defined() ? learned.data_ptr<double>() : nullptr;
  for (int64_t i = 0; i < T; ++i) rp[i] = double(mod.scale) * row_factor<double>(mod, int(i));
  for (int64_t e = 0; e < Tt; ++e) {
    const int64_t t = (T - 1) - e;
    mp[e] = t >= 0 ? distance_factor<double>(mod, int(t)) : 0.0;
    const double b = t >= 0 ? distance_bias<double>(mod, int(t), 0) : -inf;
    for (int64_t h = 0; h < Hb; ++h) {
      const double l = t >= 0 && lp ? lp[h * T + t] : 0.0;
      bp[h * Tt + e] = t >= 0 ? b + l - slopes[h] * double(t) : -inf;
    }
  }
  return {row.to(dtype), mult.to(dtype), bias.to(dtype)};
}

struct Geometry {
  int64_t Bq, Bk, Dp, lanes;  // lanes: elements per 64 bytes (the padding unit)
};

// A key tile no longer than the context: at T = 64 a 128-key tile would double the padded Kᵀ
// and V copies (and their zero work) for nothing.
Geometry geometry(const FusedCpuConfig& cfg, int64_t T, int64_t D, at::ScalarType dtype) {
  const int64_t lanes = kPadBytes / int64_t(at::elementSize(dtype));
  const int64_t block_k = std::min(std::max<int64_t>(1, cfg.block_k), T);
  return {std::max<int64_t>(1, cfg.block_q), round_up(block_k, lanes), round_up(D, lanes), lanes};
}

// x (B, H, T, D) → (B, H, rows, Dp), zero padded, contiguous (x itself when nothing to pad).
Tensor padded(const Tensor& x, int64_t rows, int64_t Dp) {
  if (x.size(2) == rows && x.size(3) == Dp) return x.contiguous();
  return at::constant_pad_nd(x, {0, Dp - x.size(3), 0, rows - x.size(2)}, 0).contiguous();
}
// x (B, H, T, D) → (B, H, nkb, Dp, Bk): per key block, transposed, zero padded.
Tensor blocked_transposed(const Tensor& x, int64_t nkb, int64_t Bk, int64_t Dp) {
  return padded(x, nkb * Bk, Dp)
      .view({x.size(0), x.size(1), nkb, Bk, Dp})
      .transpose(3, 4)
      .contiguous();
}

// The padded operands of one call (only those the pass needs are defined).
struct Operands {
  Tensor q, k, kt, v, vt;
};

template <class T>
Problem<T> make_problem(const Operands& ops, int64_t B, int64_t H, int64_t n_ctx, int64_t D,
                        const Tensor& head, const Tables& tab, const Geometry& g) {
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
  Problem<T> P;
  P.q = ptr(ops.q);
  P.k = ptr(ops.k);
  P.kt = ptr(ops.kt);
  P.v = ptr(ops.v);
  P.vt = ptr(ops.vt);
  P.B = B;
  P.H = H;
  P.n_ctx = n_ctx;
  P.D = D;
  P.Dp = g.Dp;
  P.nkb = (n_ctx + g.Bk - 1) / g.Bk;
  P.Tp = P.nkb * g.Bk;
  P.Bq = g.Bq;
  P.Bk = g.Bk;
  P.row = tab.row.data_ptr<T>();
  P.head = head.data_ptr<T>();
  P.mult = tab.mult.data_ptr<T>();
  P.bias = tab.bias.data_ptr<T>();
  P.bias_stride = tab.bias.size(0) > 1 ? tab.bias.size(1) : 0;
  return P;
}

// (out, lse) from (B, H, T, D) inputs.
std::pair<Tensor, Tensor> forward_impl(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& head, const Tables& tab, const Geometry& g) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t nkb = (T + g.Bk - 1) / g.Bk;
  Operands ops;
  ops.q = padded(q, T, g.Dp);
  ops.kt = blocked_transposed(k, nkb, g.Bk, g.Dp);
  ops.v = padded(v, nkb * g.Bk, g.Dp);
  Tensor out = at::empty({B, H, T, D}, q.options()), lse = at::empty({B, H, T}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_attention_cpu_forward", [&] {
    run_forward<scalar_t>(make_problem<scalar_t>(ops, B, H, T, D, head, tab, g),
                          {out.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>()});
  });
  return {out, lse};
}

struct BackwardResult {
  Tensor dq, dk, dv, dhead, dbias;  // dbias: (H, Tt) d loss / d bias table, summed over b, i
};

BackwardResult backward_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& head,
                             const Tables& tab, const Geometry& g, const Tensor& out,
                             const Tensor& lse, const Tensor& dout, const Tensor& dlse,
                             bool head_grad, bool bias_grad) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t nk = (T + g.Bk - 1) / g.Bk;
  // Split a head's key blocks over C tasks when there are fewer than 2 (b, h) per thread, so that
  // the workers stay balanced; each split head costs a (T, D) dQ partial sum.
  const int64_t C =
      std::min(nk, std::max<int64_t>(1, (2 * at::get_num_threads() + B * H - 1) / (B * H)));
  Tensor delta = (dout * out).sum(-1);  // (B, H, T)
  if (dlse.defined()) delta = delta - dlse;
  delta = delta.contiguous();
  Operands ops;
  ops.q = padded(q, T, g.Dp);
  ops.k = padded(k, nk * g.Bk, g.Dp);
  ops.kt = blocked_transposed(k, nk, g.Bk, g.Dp);
  ops.vt = blocked_transposed(v, nk, g.Bk, g.Dp);
  const Tensor dout_p = padded(dout, T, g.Dp);
  Tensor dq_parts = at::empty({C, B, H, T, D}, q.options());
  Tensor dk = at::empty({B, H, T, D}, q.options()), dv = at::empty({B, H, T, D}, q.options());
  std::vector<double> dhead(size_t(B * H * C), 0.0);
  const int64_t Tt = tab.mult.size(0);
  Tensor dbias_parts = bias_grad ? at::empty({B, H, C, Tt}, q.options()) : Tensor();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_attention_cpu_backward", [&] {
    const auto P = make_problem<scalar_t>(ops, B, H, T, D, head, tab, g);
    BackwardIO<scalar_t> G{dout_p.data_ptr<scalar_t>(),    lse.data_ptr<scalar_t>(),
                           delta.data_ptr<scalar_t>(),     dq_parts.data_ptr<scalar_t>(),
                           dk.data_ptr<scalar_t>(),        dv.data_ptr<scalar_t>(),
                           head_grad ? dhead.data() : nullptr,
                           bias_grad ? dbias_parts.data_ptr<scalar_t>() : nullptr, Tt, C};
    if (head_grad || bias_grad)
      run_backward<scalar_t, true>(P, G);
    else
      run_backward<scalar_t, false>(P, G);
  });
  BackwardResult r;
  r.dq = C == 1 ? dq_parts[0] : dq_parts.sum(0);
  r.dk = dk;
  r.dv = dv;
  if (head_grad) {
    std::vector<double> per_head(size_t(H), 0.0);
    for (int64_t w = 0; w < B * H * C; ++w) per_head[size_t((w / C) % H)] += dhead[size_t(w)];
    r.dhead = at::tensor(per_head, at::TensorOptions().dtype(at::kDouble)).to(q.scalar_type());
  }
  if (bias_grad) r.dbias = dbias_parts.to(at::kDouble).sum(at::IntArrayRef{0, 2});  // (H, Tt)
  return r;
}

struct FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
  // bias_table: (H, T' >= T), or an empty tensor when the method has none; only its shape is
  // read here (its values are in tab.bias).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const Tensor& q, const Tensor& k,
                                                const Tensor& v, const Tensor& head,
                                                const Tensor& bias_table, const Tables& tab,
                                                const Geometry& g) {
    auto [out, lse] = forward_impl(q, k, v, head, tab, g);
    ctx->save_for_backward({q, k, v, head, out, lse});
    ctx->saved_data["bias_table_columns"] = bias_table.numel() > 0 ? bias_table.size(1) : int64_t(0);
    ctx->saved_data["bias_table_dtype"] = int64_t(bias_table.scalar_type());
    ctx->saved_data["row"] = tab.row;
    ctx->saved_data["mult"] = tab.mult;
    ctx->saved_data["bias"] = tab.bias;
    ctx->saved_data["geometry"] = std::vector<int64_t>{g.Bq, g.Bk, g.Dp, g.lanes};
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &head = saved[3];
    const Tensor &out = saved[4], &lse = saved[5];
    const Tables tab{ctx->saved_data["row"].toTensor(), ctx->saved_data["mult"].toTensor(),
                     ctx->saved_data["bias"].toTensor()};
    const auto gv = ctx->saved_data["geometry"].toIntVector();
    const Geometry g{gv[0], gv[1], gv[2], gv[3]};
    const int64_t columns = ctx->saved_data["bias_table_columns"].toInt();
    Tensor dout = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(out);
    const bool head_grad = ctx->needs_input_grad(3);
    const bool bias_grad = ctx->needs_input_grad(4) && columns > 0;
    const auto r = backward_impl(q, k, v, head, tab, g, out, lse, dout, grads[1], head_grad, bias_grad);
    Tensor dtable;  // (H, columns): d loss/d b_h(t), zero for t >= T
    if (bias_grad) {
      // The kernel's table is indexed by e = (T − 1) − t: its first T entries reversed are by distance.
      const int64_t T = q.size(2);
      dtable = at::constant_pad_nd(r.dbias.narrow(1, 0, T).flip(1), {0, columns - T}, 0)
                   .to(at::ScalarType(ctx->saved_data["bias_table_dtype"].toInt()));
    }
    return {r.dq, r.dk, r.dv, r.dhead, dtable, Tensor(), Tensor()};
  }
};

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("fused_attention_cpu: " + what);
}

}  // namespace

std::tuple<Tensor, Tensor> fused_attention_cpu_with_lse(const Tensor& q_in, const Tensor& k_in,
                                                        const Tensor& v_in, const ScoreMod& mod,
                                                        const Tensor& head_scale,
                                                        const Tensor& alibi_slopes,
                                                        const Tensor& bias_table_in,
                                                        const FusedCpuConfig& config) {
  if (q_in.dim() != 4) bad("q must be (B, H, T, D), got " + std::to_string(q_in.dim()) + "-D");
  if (k_in.sizes() != q_in.sizes() || v_in.sizes() != q_in.sizes())
    bad("q, k and v must have the same (B, H, T, D) shape");
  if (!q_in.device().is_cpu() || !k_in.device().is_cpu() || !v_in.device().is_cpu())
    bad("tensors must be on the CPU (this is the CPU kernel)");
  const auto dtype = q_in.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) bad("dtype must be float32 or float64");
  if (k_in.scalar_type() != dtype || v_in.scalar_type() != dtype)
    bad("q, k and v must share one dtype");
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), D = q_in.size(3);
  if (T > (int64_t(1) << 30)) bad("T too large");
  if (head_scale.defined() && (head_scale.dim() != 1 || head_scale.size(0) != H))
    bad("head_scale must be (H) = (" + std::to_string(H) + ")");
  if (alibi_slopes.defined() && (alibi_slopes.dim() != 1 || alibi_slopes.size(0) != H))
    bad("alibi_slopes must be (H) = (" + std::to_string(H) + ")");
  // The learned bias table: the tensor (differentiable), else mod's constants, else none.
  Tensor bias_table = bias_table_in;
  if (!bias_table.defined() && mod.bias_table)
    bias_table = at::from_blob(const_cast<float*>(mod.bias_table), {H, mod.bias_table_len}, at::kFloat).clone();
  if (bias_table.defined() && (bias_table.dim() != 2 || bias_table.size(0) != H || bias_table.size(1) < T))
    bad("bias_table must be (H, T' >= T) = (" + std::to_string(H) + ", >= " + std::to_string(T) + ")");
  if (B == 0 || H == 0 || T == 0 || D == 0)
    return {at::zeros_like(q_in), at::zeros({B, H, T}, q_in.options())};

  const Geometry g = geometry(config, T, D, dtype);
  Tensor head;  // (H) in the kernel dtype; differentiable when it is the learned parameter
  if (head_scale.defined())
    head = head_scale.to(dtype);
  else if (mod.head_scale)
    head = at::from_blob(const_cast<float*>(mod.head_scale), {H}, at::kFloat).to(dtype);
  else
    head = at::ones({H}, q_in.options());
  Tensor alibi = alibi_slopes;
  if (!alibi.defined() && mod.alibi_slope)
    alibi = at::from_blob(const_cast<float*>(mod.alibi_slope), {H}, at::kFloat).clone();
  Tables tab;
  {
    at::NoGradGuard no_grad;
    tab = build_tables(mod, T, H, g.Bq + g.Bk, alibi.defined() ? alibi.detach() : alibi,
                       bias_table.defined() ? bias_table.detach() : bias_table, dtype);
  }

  const bool needs_graph =
      at::GradMode::is_enabled() &&
      (q_in.requires_grad() || k_in.requires_grad() || v_in.requires_grad() || head.requires_grad() ||
       (bias_table.defined() && bias_table.requires_grad()));
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  if (!needs_graph) {
    at::NoGradGuard no_grad;
    auto [out, lse] = forward_impl(q, k, v, head.contiguous(), tab, g);
    return {out, lse};
  }
  const Tensor table = bias_table.defined() ? bias_table : at::empty({0}, q.options());
  auto outs = FusedAttentionFunction::apply(q, k, v, head.contiguous(), table, tab, g);
  return {outs[0], outs[1]};
}

Tensor fused_attention_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const ScoreMod& mod,
                           const Tensor& head_scale, const Tensor& alibi_slopes,
                           const Tensor& bias_table, const FusedCpuConfig& config) {
  return std::get<0>(
      fused_attention_cpu_with_lse(q, k, v, mod, head_scale, alibi_slopes, bias_table, config));
}

const char* fused_cpu_isa() {
  switch (active_isa()) {
    case IsaKind::kAvx512: return "avx512";
    case IsaKind::kAvx2: return "avx2";
    default: return "generic";
  }
}

void set_fused_cpu_isa(const std::string& isa) {
  if (isa == "auto") {
    g_isa_override = -1;
    return;
  }
  const IsaKind best = detected_isa();
  IsaKind want;
  if (isa == "avx512")
    want = IsaKind::kAvx512;
  else if (isa == "avx2")
    want = IsaKind::kAvx2;
  else if (isa == "generic")
    want = IsaKind::kGeneric;
  else
    throw std::invalid_argument("set_fused_cpu_isa: unknown '" + isa +
                                "'; valid: auto, avx512, avx2, generic");
  if (int(want) < int(best))
    throw std::invalid_argument("set_fused_cpu_isa: '" + isa + "' is not supported by this CPU");
  g_isa_override = int(want);
}

}  // namespace attention
