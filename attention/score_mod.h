// The score-mod policy: the one description of an attention method that every kernel (reference,
// fused CPU, CUDA) consumes the same way, like FlexAttention's score_mod or FlashAttention's
// alibi.h. No torch, no STL: this header compiles in plain C++ and in nvcc device code.
//
// For query i, key j <= i, distance t = i - j, head h and raw dot product q_i·k_j:
//
//     s          = scale · q_i·k_j
//     logit(i,j) = multiplier(i, t, h) · s + bias(t, h)
//     multiplier = head_scale[h] · row_factor(i) · distance_factor(t)
//     bias       = distance_bias(t) + bias_table[h][t] − alibi_slope[h] · t
//
// bias_table is a learned distance bias (KERPLE-log, T5's buckets) as data: an (H, T) table that
// autograd builds from the transform's learned parameters (attention/learned_bias.h) before the
// kernel runs. A kernel only reads it, and returns its gradient: d loss/d bias_table[h][t] = the
// sum of d loss/d logit over the pairs at distance t. No learned transform appears here.
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

struct ScoreMod {
  float scale = 1.0f;                      // s = scale · q·k (1/sqrt(d) · YaRN temperature, ...)
  RowFactor row = RowFactor::kNone;
  float info_exponent = 0.0f;              // InfoScale: −2/d
  float info_inv_denominator = 1.0f;       // InfoScale: 1 / (1 − L^(−2/d))
  DistanceMod distance = DistanceMod::kNone;
  float inv_tau = 0.1f;                    // scale-invariant: 1/τ
  const float* head_scale = nullptr;       // (H) learned per-head multiplier (LogN's s_h), or null
  const float* alibi_slope = nullptr;      // (H) ALiBi slopes m_h, or null
  const float* bias_table = nullptr;       // (H, bias_table_len) learned distance bias, or null
  int bias_table_len = 0;                  // entries per head: every distance t < T the kernel sees
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

// ln(1 + t/τ), shared by a_t and m_t.
template <class T>
ATTN_HD T si_log(const ScoreMod& m, int t) {
  return detail::log1p_(static_cast<T>(t) * static_cast<T>(m.inv_tau));
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
  return m.distance == DistanceMod::kScaleInvariant ? detail::sqrt_(T(1) + T(2) * si_log<T>(m, t))
                                                    : T(1);
}

// The bias without the learned table (scale-invariant's m_t).
template <class T>
ATTN_HD T fixed_bias(const ScoreMod& m, int t) {
  return m.distance == DistanceMod::kScaleInvariant ? T(-2) * si_log<T>(m, t) : T(0);
}

template <class T>
ATTN_HD T distance_bias(const ScoreMod& m, int t, int h) {
  T b = fixed_bias<T>(m, t);
  if (m.bias_table) b += static_cast<T>(m.bias_table[h * m.bias_table_len + t]);
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

// The logit of one (query, key) pair from its raw dot product q_i·k_j.
template <class T>
ATTN_HD T logit(const ScoreMod& m, T dot, int i, int j, int h) {
  const int t = i - j;
  return multiplier<T>(m, i, t, h) * static_cast<T>(m.scale) * dot + distance_bias<T>(m, t, h);
}

}  // namespace attention
