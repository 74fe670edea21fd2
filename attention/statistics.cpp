#include "attention/statistics.h"

#include <ATen/Parallel.h>
#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace attention {

std::vector<int64_t> log_grid(int64_t limit, int per_decade) {
  std::vector<int64_t> out;
  for (int j = 0;; ++j) {
    const auto t = int64_t(std::llround(std::pow(10.0, double(j) / per_decade)));
    if (t > limit) break;
    if (out.empty() || t != out.back()) out.push_back(t);
  }
  return out;
}

StatsLayout stats_layout(int64_t context, int64_t min_keys, const std::vector<int64_t>& ratios) {
  if (context < 1) throw std::invalid_argument("stats_layout: context must be >= 1");
  StatsLayout l;
  l.context = context;
  l.band_edges = {0};
  for (int64_t e = 1; e < context; e *= 10) l.band_edges.push_back(e);
  l.band_edges.push_back(context);
  for (const int64_t ratio : ratios) {
    if (ratio < 2) throw std::invalid_argument("stats_layout: a range ratio must be >= 2");
    for (const int64_t t : log_grid(min_keys / ratio)) {
      l.range_start.push_back(t);
      l.range_ratio.push_back(ratio);
    }
  }
  return l;
}

StatsSums::StatsSums(const StatsLayout& layout)
    : band_mass(layout.bands(), 0.0),
      band_entropy(layout.bands(), 0.0),
      band_rows(layout.bands(), 0),
      range_mass(layout.ranges(), 0.0),
      range_entropy(layout.ranges(), 0.0),
      range_rows(layout.ranges(), 0) {}

void StatsSums::add(const StatsSums& o) {
  rows += o.rows;
  entropy += o.entropy;
  recent_mass += o.recent_mass;
  for (size_t b = 0; b < band_mass.size(); ++b) {
    band_mass[b] += o.band_mass[b];
    band_entropy[b] += o.band_entropy[b];
    band_rows[b] += o.band_rows[b];
  }
  for (size_t r = 0; r < range_mass.size(); ++r) {
    range_mass[r] += o.range_mass[r];
    range_entropy[r] += o.range_entropy[r];
    range_rows[r] += o.range_rows[r];
  }
}

namespace {

// log Σ e^l over a segment and the mean logit under its renormalised distribution: the segment's
// entropy is lse − mean_logit, its mass in the row exp(lse − LSE).
struct Segment {
  double lse, mean_logit;
};

// Against the segment's own maximum: exact however far below the row's maximum it lies.
Segment own_segment(const double* l, int64_t begin, int64_t end) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t t = begin; t < end; ++t) m = std::max(m, l[t]);
  double z = 0, s = 0;
  for (int64_t t = begin; t < end; ++t) {
    const double e = std::exp(l[t] - m);
    z += e;
    s += e * l[t];
  }
  return {m + std::log(z), s / z};
}

// One exp per key, against the row's maximum M; every band and range of the row sums its share
// (bands, recent keys and ranges cover ~5n keys in all, so this saves ~4 exps in 5). A segment
// whose terms sum below 1e-250 (all of them at least ~575 nats below M: ALiBi far away) would be
// made of subnormals and zeros; it is recomputed against its own maximum, so it keeps a
// full-precision entropy. Above that threshold every term that underflows weighs < e^−140 of
// the segment's largest.
class RowSegments {
 public:
  RowSegments(const double* l, int64_t n) : l_(l) {
    thread_local std::vector<double> e, el;
    e.resize(size_t(n));
    el.resize(size_t(n));
    max_ = -std::numeric_limits<double>::infinity();
    for (int64_t t = 0; t < n; ++t) max_ = std::max(max_, l[t]);
    for (int64_t t = 0; t < n; ++t) {
      e[t] = std::exp(l[t] - max_);
      el[t] = e[t] * l[t];
    }
    e_ = e.data();
    el_ = el.data();
  }
  Segment operator()(int64_t begin, int64_t end) const {
    double z = 0, s = 0;
    for (int64_t t = begin; t < end; ++t) {
      z += e_[t];
      s += el_[t];
    }
    if (z < 1e-250) return own_segment(l_, begin, end);
    return {max_ + std::log(z), s / z};
  }

 private:
  const double* l_;
  const double* e_ = nullptr;
  const double* el_ = nullptr;
  double max_ = 0;
};

}  // namespace

void add_row(const double* l, int64_t n, const StatsLayout& layout, StatsSums& sums) {
  const RowSegments segment(l, n);
  const Segment row = segment(0, n);
  // Entropies are ≥ 0; a one-key segment's lse − mean_logit rounds to ±1e-17: clamp at 0.
  sums.entropy += std::max(0.0, row.lse - row.mean_logit);
  for (size_t b = 0; b < layout.bands(); ++b) {
    const int64_t begin = layout.band_edges[b], end = std::min(layout.band_edges[b + 1], n);
    if (begin >= end) continue;
    const Segment s = segment(begin, end);
    sums.band_mass[b] += std::exp(s.lse - row.lse);
    sums.band_entropy[b] += std::max(0.0, s.lse - s.mean_logit);
    ++sums.band_rows[b];
  }
  sums.recent_mass += std::exp(segment(0, std::min(layout.recent, n)).lse - row.lse);
  for (size_t r = 0; r < layout.ranges(); ++r) {
    const int64_t begin = layout.range_start[r], end = begin * layout.range_ratio[r];
    if (end > n) continue;
    const Segment s = segment(begin, end);
    sums.range_mass[r] += std::exp(s.lse - row.lse);
    sums.range_entropy[r] += std::max(0.0, s.lse - s.mean_logit);
    ++sums.range_rows[r];
  }
  ++sums.rows;
}

// ---- raw-score moments ---------------------------------------------------------------------

void ScoreSample::merge(const ScoreSample& b) {
  if (b.count == 0) return;
  if (count == 0) {
    *this = b;
    return;
  }
  // Pébay (2008): central moment sums of the union of two sets.
  const double na = double(count), nb = double(b.count), n = na + nb;
  const double d = b.mean - mean, d2 = d * d;
  const double new_m4 = m4 + b.m4 + d2 * d2 * na * nb * (na * na - na * nb + nb * nb) / (n * n * n) +
                        6 * d2 * (na * na * b.m2 + nb * nb * m2) / (n * n) +
                        4 * d * (na * b.m3 - nb * m3) / n;
  const double new_m3 =
      m3 + b.m3 + d2 * d * na * nb * (na - nb) / (n * n) + 3 * d * (na * b.m2 - nb * m2) / n;
  m2 += b.m2 + d2 * na * nb / n;
  m3 = new_m3;
  m4 = new_m4;
  mean += d * nb / n;
  count += b.count;
  sample.insert(sample.end(), b.sample.begin(), b.sample.end());
}

void ScoreSample::add(const double* v, int64_t n, int64_t keep) {
  if (n <= 0) return;
  ScoreSample batch;
  batch.count = n;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += v[i];
  batch.mean = sum / double(n);
  for (int64_t i = 0; i < n; ++i) {
    const double d = v[i] - batch.mean, d2 = d * d;
    batch.m2 += d2;
    batch.m3 += d2 * d;
    batch.m4 += d2 * d2;
  }
  const int64_t stride = std::max<int64_t>(1, (n + keep - 1) / std::max<int64_t>(keep, 1));
  for (int64_t i = stride / 2; i < n && keep > 0; i += stride) batch.sample.push_back(v[i]);
  merge(batch);
}

double ScoreSample::variance() const { return count ? m2 / double(count) : 0.0; }
double ScoreSample::skewness() const {
  return m2 > 0 ? std::sqrt(double(count)) * m3 / std::pow(m2, 1.5) : 0.0;
}
double ScoreSample::excess_kurtosis() const {
  return m2 > 0 ? double(count) * m4 / (m2 * m2) - 3.0 : 0.0;
}

std::vector<double> ScoreSample::standardised_quantiles(const std::vector<double>& probabilities) const {
  std::vector<double> sorted = sample;
  std::sort(sorted.begin(), sorted.end());
  const double sd = std::sqrt(variance());
  std::vector<double> out;
  for (const double p : probabilities) {
    if (sorted.empty() || !(sd > 0)) {
      out.push_back(std::nan(""));
      continue;
    }
    // Linear interpolation between order statistics (Hyndman & Fan type 7, numpy's default).
    const double x = p * double(sorted.size() - 1);
    const size_t lo = size_t(std::floor(x)), hi = std::min(lo + 1, sorted.size() - 1);
    const double v = sorted[lo] + (x - double(lo)) * (sorted[hi] - sorted[lo]);
    out.push_back((v - mean) / sd);
  }
  return out;
}

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("normal_quantile: p must be in (0, 1)");
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step on Φ(x) − p.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

// ---- the recorder ------------------------------------------------------------------------------

AttentionStatsRecorder::AttentionStatsRecorder(int64_t queries, bool raw_scores)
    : queries_(queries), raw_scores_(raw_scores) {
  if (queries < 1) throw std::invalid_argument("AttentionStatsRecorder: queries must be >= 1");
}

void AttentionStatsRecorder::begin(int64_t T, int64_t H) {
  const int64_t first = T - std::min(queries_, T);  // rows first … T − 1
  layout_ = stats_layout(T, first + 1);
  heads_.assign(size_t(H), StatsSums(layout_));
}

std::vector<double> AttentionStatsRecorder::flat_sums(int64_t T, int64_t H) {
  if (heads_.empty()) begin(T, H);
  std::vector<double> out;
  for (const auto& h : heads_) {
    out.push_back(double(h.rows));
    out.push_back(h.entropy);
    out.push_back(h.recent_mass);
    for (const auto* v : {&h.band_mass, &h.band_entropy, &h.range_mass, &h.range_entropy})
      out.insert(out.end(), v->begin(), v->end());
    for (const auto* v : {&h.band_rows, &h.range_rows})
      for (const int64_t n : *v) out.push_back(double(n));
  }
  return out;
}

void AttentionStatsRecorder::set_flat_sums(const std::vector<double>& flat) {
  size_t i = 0;
  const auto take = [&] {
    if (i >= flat.size()) throw std::invalid_argument("AttentionStatsRecorder: flat sums too short");
    return flat[i++];
  };
  for (auto& h : heads_) {
    h.rows = int64_t(take());
    h.entropy = take();
    h.recent_mass = take();
    for (auto* v : {&h.band_mass, &h.band_entropy, &h.range_mass, &h.range_entropy})
      for (double& x : *v) x = take();
    for (auto* v : {&h.band_rows, &h.range_rows})
      for (int64_t& n : *v) n = int64_t(take());
  }
  if (i != flat.size()) throw std::invalid_argument("AttentionStatsRecorder: flat sums too long");
}

void AttentionStatsRecorder::add(const torch::Tensor& q, const torch::Tensor& k, const ScoreMod& mod_in,
                                 const torch::Tensor& head_scale, const torch::Tensor& alibi_slopes,
                                 double raw_scale) {
  torch::NoGradGuard no_grad;
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2);
  const int64_t Q = std::min(queries_, T), first = T - Q;  // rows first … T − 1
  if (heads_.empty()) {
    begin(T, H);
  } else if (layout_.context != T || int64_t(heads_.size()) != H) {
    throw std::invalid_argument("AttentionStatsRecorder: every call must have the first call's T "
                                "and H (T = " + std::to_string(layout_.context) + ", got " +
                                std::to_string(T) + ")");
  }

  // The score-mod's per-head parameters as the policy reads them, then its tables in float64:
  // logit(i, t, h) = head[h]·row[i]·dist[t]·scale·(q_i·k_j) + bias[h][t] + query_bias(i, t, h)
  // (score_mod.h; the last is FIRE's, 0 for every other method).
  ScoreMod mod = mod_in;
  std::vector<float> hs, slopes;
  if (head_scale.defined()) {
    const auto c = head_scale.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    hs.assign(c.data_ptr<float>(), c.data_ptr<float>() + H);
    mod.head_scale = hs.data();
  }
  if (alibi_slopes.defined()) {
    const auto c = alibi_slopes.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    slopes.assign(c.data_ptr<float>(), c.data_ptr<float>() + H);
    mod.alibi_slope = slopes.data();
  }
  std::vector<double> dist(static_cast<size_t>(T)), bias(static_cast<size_t>(H * T)),
      row(static_cast<size_t>(Q)), head(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    dist[t] = distance_factor<double>(mod, int(t));
    for (int64_t h = 0; h < H; ++h) bias[h * T + t] = distance_bias<double>(mod, int(t), int(h));
  }
  for (int64_t r = 0; r < Q; ++r) row[r] = row_factor<double>(mod, int(first + r));
  for (int64_t h = 0; h < H; ++h) head[h] = mod.head_scale ? double(mod.head_scale[h]) : 1.0;

  // Raw dot products of the sampled rows with every key: (B, H, Q, T), float64, computed where
  // q and k live (on a GPU: only the Q·T dots per head cross to the host, not k's T·D values).
  const auto qs = q.detach().narrow(2, first, Q).to(torch::kFloat64);
  const auto ks = k.detach().to(torch::kFloat64);
  const auto dots = torch::matmul(qs, ks.transpose(-2, -1)).to(torch::kCPU).contiguous();
  const double* dot = dots.data_ptr<double>();

  // One task per (b, h): its rows in order, so the sums do not depend on the thread count.
  std::vector<StatsSums> per_head(static_cast<size_t>(B * H), StatsSums(layout_));
  std::vector<ScoreSample> per_head_scores(raw_scores_ ? size_t(B * H) : 0);
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> logit(static_cast<size_t>(T)), raw(static_cast<size_t>(T));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t h = bh % H;
      for (int64_t r = 0; r < Q; ++r) {
        const int64_t i = first + r, n = i + 1;
        const double* d = dot + (bh * Q + r) * T;  // the row's dots with keys j = 0..T−1
        const double m = head[h] * row[r] * double(mod.scale);
        for (int64_t t = 0; t < n; ++t)
          logit[t] = m * dist[t] * d[i - t] + bias[h * T + t] + query_bias<double>(mod, int(i), int(t), int(h));
        add_row(logit.data(), n, layout_, per_head[bh]);
        if (raw_scores_) {
          for (int64_t j = 0; j < n; ++j) raw[j] = raw_scale * d[j];
          per_head_scores[bh].add(raw.data(), n, /*keep=*/128);
        }
      }
    }
  });
  for (int64_t bh = 0; bh < B * H; ++bh) {
    heads_[size_t(bh % H)].add(per_head[bh]);
    if (raw_scores_) scores_.merge(per_head_scores[bh]);
  }
}

double AttentionProbe::pooled_score_std() const {
  if (score_count < 2) return 0.0;
  const double mean = score_sum / score_count;
  const double var = (score_sum_sq - score_count * mean * mean) / (score_count - 1);  // as torch's std
  return std::sqrt(std::max(var, 0.0));
}

}  // namespace attention
