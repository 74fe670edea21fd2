// The score-mod policy: the one description of an attention method that every kernel (reference,
// fused CPU, CUDA) consumes the same way, like FlexAttention's score_mod or FlashAttention's
// alibi.h. No torch, no STL: this header compiles in plain C++ and in nvcc device code.
//
// For query i, key j <= i, distance t = i - j, head h and raw dot product q_i·k_j:
//
//     s          = scale · q_i·k_j
//     logit(i,j) = multiplier(i, t, h) · s + bias(t, h)
//     multiplier = head_scale[h] · row_factor(i) · distance_factor(t)
//     bias       = distance_bias(t) + bias_table[h][t] − alibi_slope[h] · t  + query_bias(i, t, h)
//
// bias_table is a learned bias as data, a table that autograd builds from the transform's learned
// parameters (attention/learned_bias.h) before the kernel runs, indexed as `table_index` says:
//   kDistance  (H, T): b_h(t) (KERPLE-log, T5's buckets); d loss/d bias_table[h][t] = the sum of
//              d loss/d logit over the pairs at distance t.
//   kFire      (H, G + 2): FIRE's f_h on G points of x ∈ [0, 1], then c_h and L_h: the bias of
//              query i at distance t is f_h(x) interpolated linearly, x = ψ(t) / (ψ(max(L_h, i)) + ε),
//              ψ(y) = ln(1 + c_h·y) (arXiv 2310.04418). It depends on the query position, so a
//              kernel adds it per pair (query_bias); its gradient (fire_pair_gradient) scatters onto the
//              two grid points and into c_h and L_h.
// A kernel only reads the table and returns d loss/d table. No learned transform appears here.
//
// Rotary encodings (rope, p-rope, ntk, yarn) act on q and k before the kernel; what they leave
// for the kernel (YaRN's temperature) is folded into `scale`.
#pragma once

#if defined(__CUDACC__)
#define ATTN_HD __host__ __device__ __forceinline__
#include <math.h>
#else
#define ATTN_HD inline
#include <cmath>
#endif

namespace attention {

// Per-query factor that depends on the number of visible keys n_i = i + 1.
enum class RowFactor : int {
  kNone = 0,
  kLogN = 1,       // ln(n_i)                                    (SSMax / LogN, arXiv 2501.19399)
  kInfoScale = 2,  // max(1, sqrt((1 − n_i^(−2/d)) / (1 − L^(−2/d))))   (InfoScale)
};

// Per-distance multiplier and bias.
enum class DistanceMod : int {
  kNone = 0,
  kScaleInvariant = 1,  // a_t = sqrt(1 + 2·ln(1 + t/τ)),  m_t = −2·ln(1 + t/τ)  (arXiv 2505.17083)
};

// How a kernel reads bias_table (above).
enum class TableIndex : int {
  kDistance = 0,
  kFire = 1,
};

struct ScoreMod {
  float scale = 1.0f;                      // s = scale · q·k (1/sqrt(d) · YaRN temperature, ...)
  RowFactor row = RowFactor::kNone;
  float info_exponent = 0.0f;              // InfoScale: −2/d
  float info_inv_denominator = 1.0f;       // InfoScale: 1 / (1 − L^(−2/d))
  DistanceMod distance = DistanceMod::kNone;
  float inv_tau = 0.1f;                    // scale-invariant: 1/τ
  const float* head_scale = nullptr;       // (H) learned per-head multiplier (LogN's s_h), or null
  const float* alibi_slope = nullptr;      // (H) ALiBi slopes m_h, or null
  const float* bias_table = nullptr;       // (H, bias_table_len) learned bias, or null
  int bias_table_len = 0;                  // entries per head (kDistance: every t < T the kernel sees)
  TableIndex table_index = TableIndex::kDistance;
};

namespace detail {
ATTN_HD float log1p_(float x) { return ::log1pf(x); }
ATTN_HD double log1p_(double x) { return ::log1p(x); }
ATTN_HD float log_(float x) { return ::logf(x); }
ATTN_HD double log_(double x) { return ::log(x); }
ATTN_HD float sqrt_(float x) { return ::sqrtf(x); }
ATTN_HD double sqrt_(double x) { return ::sqrt(x); }
ATTN_HD float pow_(float x, float y) { return ::powf(x, y); }
ATTN_HD double pow_(double x, double y) { return ::pow(x, y); }
}  // namespace detail

// The scale-invariant transform (arXiv 2505.17083) at distance t, from u = t/τ: its one formula.
// The kernels take u as t·(1/τ) in the ScoreMod's precision, the float64 closed forms
// (transforms.cpp) as t/τ; the float64 reference (reference.cpp) writes its own, as the oracle.
template <class T>
ATTN_HD T scale_invariant_multiplier_of(T u) {  // a_t = sqrt(1 + 2·ln(1 + t/τ))
  return detail::sqrt_(T(1) + T(2) * detail::log1p_(u));
}
template <class T>
ATTN_HD T scale_invariant_bias_of(T u) {  // m_t = −2·ln(1 + t/τ)
  return T(-2) * detail::log1p_(u);
}

template <class T>
ATTN_HD T t_over_tau(const ScoreMod& m, int t) {
  return static_cast<T>(t) * static_cast<T>(m.inv_tau);
}

template <class T>
ATTN_HD T row_factor(const ScoreMod& m, int i) {
  const T n = static_cast<T>(i + 1);
  switch (m.row) {
    case RowFactor::kLogN:
      return detail::log_(n);
    case RowFactor::kInfoScale: {
      const T r = (T(1) - detail::pow_(n, static_cast<T>(m.info_exponent))) *
                  static_cast<T>(m.info_inv_denominator);
      return r > T(1) ? detail::sqrt_(r) : T(1);
    }
    default:
      return T(1);
  }
}

template <class T>
ATTN_HD T distance_factor(const ScoreMod& m, int t) {
  return m.distance == DistanceMod::kScaleInvariant ? scale_invariant_multiplier_of<T>(t_over_tau<T>(m, t)) : T(1);
}

// The bias without the learned table (scale-invariant's m_t).
template <class T>
ATTN_HD T fixed_bias(const ScoreMod& m, int t) {
  return m.distance == DistanceMod::kScaleInvariant ? scale_invariant_bias_of<T>(t_over_tau<T>(m, t)) : T(0);
}

template <class T>
ATTN_HD T distance_bias(const ScoreMod& m, int t, int h) {
  T b = fixed_bias<T>(m, t);
  if (m.bias_table && m.table_index == TableIndex::kDistance)
    b += static_cast<T>(m.bias_table[h * m.bias_table_len + t]);
  if (m.alibi_slope) b -= static_cast<T>(m.alibi_slope[h]) * static_cast<T>(t);
  return b;
}

// The distance a kernel's per-tile table holds for t = i − j: t clamped to [0, seq_len − 1], the
// distances of visible pairs. Only masked pairs (t < 0) and the padding rows of a ragged last tile
// (t ≥ T) read clamped entries; unclamped, those rows would index bias_table (T entries a head)
// past the head's row, and past the buffer for the last head.
ATTN_HD int table_distance(int t, int seq_len) { return t < 0 ? 0 : t < seq_len ? t : seq_len - 1; }

// Multiplier of s at (i, t, h), without the learned head scale (its gradient needs this part).
template <class T>
ATTN_HD T fixed_multiplier(const ScoreMod& m, int i, int t) {
  return row_factor<T>(m, i) * distance_factor<T>(m, t);
}

template <class T>
ATTN_HD T multiplier(const ScoreMod& m, int i, int t, int h) {
  const T hs = m.head_scale ? static_cast<T>(m.head_scale[h]) : T(1);
  return hs * fixed_multiplier<T>(m, i, t);
}

// ---- a bias that sees the query position: FIRE (TableIndex::kFire) -------------------------------
// A kernel that tabulates per distance for a tile keeps doing so and adds the FIRE bias per pair
// when has_query_bias(m); distance-only methods never reach this code. The pieces are split so
// that a kernel can hoist them: ψ(t) per distance, the normaliser per query row, the lerp per pair.
// They read one head's row of the table through FireRow, in the kernel's own precision (the
// float64 CPU path keeps a float64 table for gradient checks).

constexpr float kFireEps = 1e-6f;  // FIRE's ε in the normaliser (x stays finite at i = 0)

ATTN_HD bool has_query_bias(const ScoreMod& m) {
  return m.bias_table != nullptr && m.table_index == TableIndex::kFire;
}

// Head h's row: f on G points x_g = g/(G − 1), then c and L.
template <class T>
struct FireRow {
  const T* f;
  int G;
  ATTN_HD T c() const { return f[G]; }
  ATTN_HD T threshold() const { return f[G + 1]; }
  // ψ(y) = ln(1 + c·y) and ∂ψ/∂c = y / (1 + c·y).
  ATTN_HD T psi(T y) const { return detail::log1p_(c() * y); }
  ATTN_HD T psi_dc(T y) const { return y / (T(1) + c() * y); }
  // The normaliser of query row i: ψ(max(L, i)) + ε.
  ATTN_HD T norm(int i) const {
    const T y = static_cast<T>(i) > threshold() ? static_cast<T>(i) : threshold();
    return psi(y) + static_cast<T>(kFireEps);
  }
  // Where x ∈ [0, 1] falls on the grid: f(x) = (1 − w)·f[g] + w·f[g + 1].
  ATTN_HD int cell(T x, T& w) const {
    const T u = x * static_cast<T>(G - 1);
    int g = static_cast<int>(u);
    g = g < 0 ? 0 : g > G - 2 ? G - 2 : g;
    w = u - static_cast<T>(g);
    return g;
  }
  // f(x) at x = ψ(t) / N_i.
  ATTN_HD T bias(T psi_t, T norm_i) const {
    T w;
    const int g = cell(psi_t / norm_i, w);
    return f[g] + w * (f[g + 1] - f[g]);
  }
};

// Head h's row of a float table (the CUDA kernels', the statistics').
ATTN_HD FireRow<float> fire_row(const ScoreMod& m, int h) {
  return {m.bias_table + h * m.bias_table_len, m.bias_table_len - 2};
}

template <class T>
ATTN_HD T query_bias(const ScoreMod& m, int i, int t, int h) {
  if (!has_query_bias(m)) return T(0);
  const FireRow<float> r = fire_row(m, h);
  return static_cast<T>(r.bias(r.psi(static_cast<float>(t)), r.norm(i)));
}

// d loss/d table for one query row's pairs, in two steps so that a kernel sums per row:
//   fire_pair_gradient, per pair with g = d loss/d logit: adds to the two grid points of drow
//     (head h's row of d loss/d table) and to the row sums (a, b) below;
//   fire_row_gradient, once per row: adds the row's c and L gradients from those sums.
// With x = ψ(t)/N_i, N_i = ψ(max(L, i)) + ε and s = ∂f/∂x (the segment's slope):
//   ∂x/∂c = (ψ_c(t) − x·ψ_c(max(L, i))) / N_i,   ∂x/∂L = −x·c/((1 + c·L)·N_i) when L > i, else 0;
// so with a = Σ g·s·ψ_c(t) and b = Σ g·s·x over the row: dc += (a − b·ψ_c(max(L, i)))/N_i, and
// dL −= b·c/((1 + c·L)·N_i) when L > i.
template <class T>
struct FireRowSums {
  T a = T(0), b = T(0);
};
template <class T, class D>
ATTN_HD void fire_pair_gradient(const FireRow<T>& r, T psi_t, T norm_i, int t, T g, D* drow,
                                FireRowSums<T>& sums) {
  const T x = psi_t / norm_i;
  T w;
  const int c = r.cell(x, w);
  drow[c] += static_cast<D>((T(1) - w) * g);
  drow[c + 1] += static_cast<D>(w * g);
  const T gs = g * (r.f[c + 1] - r.f[c]) * static_cast<T>(r.G - 1);
  sums.a += gs * r.psi_dc(static_cast<T>(t));
  sums.b += gs * x;
}
template <class T, class D>
ATTN_HD void fire_row_gradient(const FireRow<T>& r, int i, const FireRowSums<T>& sums, D* drow) {
  const T c = r.c(), L = r.threshold(), n = r.norm(i);
  const bool held = L > static_cast<T>(i);  // the threshold is the normaliser's argument
  drow[r.G] += static_cast<D>((sums.a - sums.b * r.psi_dc(held ? L : static_cast<T>(i))) / n);
  if (held) drow[r.G + 1] -= static_cast<D>(sums.b * c / ((T(1) + c * L) * n));
}

// The logit of one (query, key) pair from its raw dot product q_i·k_j.
template <class T>
ATTN_HD T logit(const ScoreMod& m, T dot, int i, int j, int h) {
  const int t = i - j;
  return multiplier<T>(m, i, t, h) * static_cast<T>(m.scale) * dot + distance_bias<T>(m, t, h) +
         query_bias<T>(m, i, t, h);
}

}  // namespace attention
