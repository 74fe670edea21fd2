// The fused CPU attention kernel's tiles and workers (fused_cpu.cpp describes the layout of a
// call): register-blocked tile matmuls over GCC vector types and the online softmax, forward and
// backward workers that take (b, h, block) tasks from a shared counter, compiled three times
// (AVX-512, AVX2+FMA, baseline) and selected at run time.
//
// This file is compiled with -fopenmp (attention/CMakeLists.txt): LibTorch's at::parallel_for is
// header-only for its OpenMP backend and silently runs serially in a TU built without it.
#include "attention/fused_cpu_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"  // vector types in always-inline helpers only
#endif

#define ATTN_INLINE inline __attribute__((always_inline))

namespace attention {
namespace fused_cpu_detail {
namespace {

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
#if defined(__clang__)  // no __builtin_shuffle (the fuzz build, docs/fuzzing.md): a lane loop, one broadcast
    V v;
    for (int l = 0; l < W; ++l) v[l] = x;
    return v;
#else
    typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I
        __attribute__((vector_size(Bytes)));
    V v{};
    v[0] = x;
    return __builtin_shuffle(v, I{});
#endif
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
#if defined(__clang__)  // clang checks the asm below outside the AVX-512 workers too (fuzz build)
    constexpr bool scalef = false;
#else
    constexpr bool scalef = sizeof(V) == 64;  // AVX-512: only its workers use 64-byte vectors
#endif
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

// Work distribution: at::parallel_for starts one worker per thread; workers then take tasks one
// at a time from a shared counter (costliest first). Causal tasks differ in cost, and on a shared
// machine a thread can be descheduled for a while: static chunks would leave the other threads
// waiting, a shared counter lets them take over the remaining tasks.
using TaskCounter = std::atomic<int64_t>;

// Key block of the z-th task of a key-block set: zig-zag (0, n−1, 1, n−2, …) so that the sets
// z ≡ c (mod C) of a head split over C tasks get similar amounts of work.
inline int64_t zigzag(int64_t w, int64_t n) { return (w % 2 == 0) ? w / 2 : n - 1 - w / 2; }

// ---- FIRE: a bias that sees the query position ---------------------------------------------------
// Distance-only methods read a tile row's bias straight from the per-distance table; FIRE's adds
// f_h(ψ_h(t) / N_h(i)) per pair (score_mod.h), so its rows go through a strip. The workers take it
// as a template parameter (QueryBias): the distance-only instantiations are the code without it.

template <class T>
FireRow<T> fire_row_of(const Problem<T>& P, int64_t h) {
  return {P.fire + h * P.fire_len, int(P.fire_len - 2)};
}

// Row i's bias over the tile's columns j0 .. j0 + nc − 1: the distance table's plus FIRE's.
template <class T>
const T* fire_strip(const Problem<T>& P, int64_t h, int64_t i, int64_t j0, int64_t nc, const T* bias, T* out) {
  const FireRow<T> r = fire_row_of(P, h);
  const T* psi = P.fire_psi + h * P.n_ctx;
  const T norm = P.fire_norm[h * P.n_ctx + i];
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t t = i - (j0 + c);
    out[c] = t >= 0 ? bias[c] + r.bias(psi[t], norm) : bias[c];  // masked pairs stay −inf
  }
  return out;
}

// Row i's d loss/d logit over the tile's columns (dl) into d loss/d FIRE's table (drow).
template <class T>
void fire_scatter(const Problem<T>& P, int64_t h, int64_t i, int64_t j0, int64_t nc, const T* dl, T* drow) {
  const FireRow<T> r = fire_row_of(P, h);
  const T* psi = P.fire_psi + h * P.n_ctx;
  const T norm = P.fire_norm[h * P.n_ctx + i];
  FireRowSums<T> sums;
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t t = i - (j0 + c);
    if (t >= 0) fire_pair_gradient(r, psi[t], norm, int(t), dl[c], drow, sums);
  }
  fire_row_gradient(r, int(i), sums, drow);
}

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

template <class I, bool QueryBias, class T>
ATTN_INLINE void forward_worker(const Problem<T>& P, const ForwardOut<T>& F, TaskCounter& next) {
  const int64_t T_ = P.n_ctx, D = P.D, Dp = P.Dp, Tp = P.Tp, Bq = P.Bq, Bk = P.Bk;
  const int64_t nq = (T_ + Bq - 1) / Bq;
  const int64_t BH = P.B * P.H, tasks = BH * nq;
  std::vector<T> s(Bq * Bk), o(Bq * Dp), m_run(Bq), l_run(Bq), rc(Bq), strip(QueryBias ? Bk : 0);
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
        const T* bias = bias_h + e0;
        if constexpr (QueryBias) bias = fire_strip(P, h, i0 + r, j0, nc, bias, strip.data());
        online_softmax_row<I>(s.data() + r * Bk, nc, rc[r], P.mult + e0, bias, m_run[r], l_run[r],
                              o.data() + r * Dp, Dp);
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

template <class I, bool ParamGrad, bool QueryBias, class T>
ATTN_INLINE void backward_worker(const Problem<T>& P, const BackwardIO<T>& G, TaskCounter& next) {
  const int64_t T_ = P.n_ctx, D = P.D, Dp = P.Dp, Tp = P.Tp, Bq = P.Bq, Bk = P.Bk, C = G.C;
  const int64_t nk = P.nkb;
  const int64_t tasks = P.B * P.H * C;
  std::vector<T> s(Bq * Bk), dp(Bq * Bk), dk(Bk * Dp), dv(Bk * Dp), dq(T_ * Dp);
  std::vector<T> strip(QueryBias ? Bk : 0), dl(QueryBias ? Bk : 0);  // FIRE's bias and d loss/d logit of a row
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
          const T* bias = bias_h + e0;
          T* gb = gbias ? gbias + e0 : nullptr;
          if constexpr (QueryBias) {
            bias = fire_strip(P, h, i, j0, nc, bias, strip.data());
            if (gbias) {  // the row's d loss/d logit, for fire_scatter
              std::fill_n(dl.data(), nc, T(0));
              gb = dl.data();
            }
          }
          const T g = backward_row<I, ParamGrad>(s.data() + r * Bk, dp.data() + r * Bk, nc,
                                                 hs * P.row[i], P.mult + e0, bias, lse[i], delta[i], gb);
          if constexpr (ParamGrad) dhead += double(g) * double(P.row[i]);
          if constexpr (QueryBias)
            if (gbias) fire_scatter(P, h, i, j0, nc, dl.data(), gbias);
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
  template <class T, bool QueryBias>                                                             \
  TARGET void forward_##NAME(const Problem<T>& P, const ForwardOut<T>& F, TaskCounter& next) {   \
    forward_worker<ISA<T>, QueryBias>(P, F, next);                                               \
  }                                                                                              \
  template <class T, bool ParamGrad, bool QueryBias>                                             \
  TARGET void backward_##NAME(const Problem<T>& P, const BackwardIO<T>& G, TaskCounter& next) {  \
    backward_worker<ISA<T>, ParamGrad, QueryBias>(P, G, next);                                   \
  }

ATTN_DEFINE_WORKERS(avx512, Avx512, ATTN_TARGET_AVX512)
ATTN_DEFINE_WORKERS(avx2, Avx2, ATTN_TARGET_AVX2)
ATTN_DEFINE_WORKERS(generic, Generic, )

std::atomic<int> g_isa_override{-1};  // −1: auto

// One worker per thread (never more than tasks); each drains the shared task counter.
template <class Worker>
void run_workers(int64_t tasks, const Worker& worker) {
  TaskCounter next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(tasks, at::get_num_threads()));
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) { worker(next); });
}

}  // namespace

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


IsaKind active_isa() {
  static const IsaKind detected = detected_isa();
  const int o = g_isa_override.load();
  return o < 0 ? detected : IsaKind(o);
}

template <class T, bool QueryBias>
void forward_on(IsaKind isa, const Problem<T>& P, const ForwardOut<T>& F, TaskCounter& next) {
  switch (isa) {
    case IsaKind::kAvx512: forward_avx512<T, QueryBias>(P, F, next); break;
    case IsaKind::kAvx2: forward_avx2<T, QueryBias>(P, F, next); break;
    default: forward_generic<T, QueryBias>(P, F, next); break;
  }
}

template <class T, bool ParamGrad, bool QueryBias>
void backward_on(IsaKind isa, const Problem<T>& P, const BackwardIO<T>& G, TaskCounter& next) {
  switch (isa) {
    case IsaKind::kAvx512: backward_avx512<T, ParamGrad, QueryBias>(P, G, next); break;
    case IsaKind::kAvx2: backward_avx2<T, ParamGrad, QueryBias>(P, G, next); break;
    default: backward_generic<T, ParamGrad, QueryBias>(P, G, next); break;
  }
}

template <class T>
void run_forward(const Problem<T>& P, const ForwardOut<T>& F) {
  const IsaKind isa = active_isa();
  run_workers(P.B * P.H * ((P.n_ctx + P.Bq - 1) / P.Bq), [&](TaskCounter& next) {
    if (P.fire)
      forward_on<T, true>(isa, P, F, next);
    else
      forward_on<T, false>(isa, P, F, next);
  });
}

template <class T, bool ParamGrad>
void run_backward(const Problem<T>& P, const BackwardIO<T>& G) {
  const IsaKind isa = active_isa();
  run_workers(P.B * P.H * G.C, [&](TaskCounter& next) {
    if (P.fire)
      backward_on<T, ParamGrad, true>(isa, P, G, next);
    else
      backward_on<T, ParamGrad, false>(isa, P, G, next);
  });
}

void set_isa_override(int isa) { g_isa_override = isa; }

template void run_forward<float>(const Problem<float>&, const ForwardOut<float>&);
template void run_forward<double>(const Problem<double>&, const ForwardOut<double>&);
template void run_backward<float, true>(const Problem<float>&, const BackwardIO<float>&);
template void run_backward<float, false>(const Problem<float>&, const BackwardIO<float>&);
template void run_backward<double, true>(const Problem<double>&, const BackwardIO<double>&);
template void run_backward<double, false>(const Problem<double>&, const BackwardIO<double>&);

}  // namespace fused_cpu_detail
}  // namespace attention
