// Attention statistics (attention/statistics.h) against a naive oracle written here: the float64
// reference's materialised (T × T) logits, a softmax per row, and the definitions of entropy, band
// and range mass and renormalised entropy written out directly.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/reference.h"
#include "attention/statistics.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace {

using attention::StatsLayout;

// Entropy and mass of p restricted to keys at distances [a, b) of row i (p indexed by key j).
struct Piece {
  double mass = 0, entropy = 0;
};
Piece piece(const std::vector<double>& p, int64_t i, int64_t a, int64_t b) {
  Piece out;
  for (int64_t t = a; t < b && t <= i; ++t) out.mass += p[i - t];
  for (int64_t t = a; t < b && t <= i; ++t) {
    const double q = p[i - t] / out.mass;
    if (q > 0) out.entropy -= q * std::log(q);
  }
  return out;
}

struct Expected {
  std::vector<double> entropy, recent;          // (H)
  std::vector<std::vector<double>> band_mass, band_entropy, range_mass, range_entropy;  // (H, ·)
};

// The oracle: softmax of materialised logits (B, H, T, T), rows T − Q … T − 1, averaged.
Expected oracle(const torch::Tensor& logits, int64_t Q, const StatsLayout& layout) {
  const int64_t B = logits.size(0), H = logits.size(1), T = logits.size(2);
  const auto p_all = torch::softmax(logits, -1).contiguous();
  Expected e;
  e.entropy.assign(H, 0);
  e.recent.assign(H, 0);
  e.band_mass.assign(H, std::vector<double>(layout.bands(), 0));
  e.band_entropy = e.band_mass;
  e.range_mass.assign(H, std::vector<double>(layout.ranges(), 0));
  e.range_entropy = e.range_mass;
  std::vector<std::vector<int64_t>> band_rows(H, std::vector<int64_t>(layout.bands(), 0));
  const double rows = double(B * Q);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = T - Q; i < T; ++i) {
        const auto row = p_all[b][h][i];
        std::vector<double> p(row.data_ptr<double>(), row.data_ptr<double>() + T);
        e.entropy[h] += piece(p, i, 0, T).entropy / rows;
        e.recent[h] += piece(p, i, 0, 100).mass / rows;
        for (size_t k = 0; k < layout.bands(); ++k) {
          const auto s = piece(p, i, layout.band_edges[k], layout.band_edges[k + 1]);
          e.band_mass[h][k] += s.mass / rows;
          if (layout.band_edges[k] <= i) {
            e.band_entropy[h][k] += s.entropy;
            ++band_rows[h][k];
          }
        }
        for (size_t r = 0; r < layout.ranges(); ++r) {
          const auto s = piece(p, i, layout.range_start[r], layout.range_start[r] * layout.range_ratio[r]);
          e.range_mass[h][r] += s.mass / rows;
          e.range_entropy[h][r] += s.entropy / rows;
        }
      }
  for (int64_t h = 0; h < H; ++h)
    for (size_t k = 0; k < layout.bands(); ++k) e.band_entropy[h][k] /= double(band_rows[h][k]);
  return e;
}

attention::MethodOptions method(const std::string& name, int64_t H, int64_t D) {
  attention::MethodOptions o;
  o.method = name;
  o.heads = H;
  o.head_dim = D;
  o.train_context = 32;
  o.parameters[attention::Parameter::kTau] = 0.4;
  o.parameters[attention::Parameter::kPRopeBase] = 8;
  o.kernel = "reference";
  return o;
}

}  // namespace

TEST(AttentionStatistics, BandEdgesCoverTheContextExactlyOnce) {
  for (const int64_t T : {1, 2, 9, 10, 11, 99, 100, 101, 1000, 16384}) {
    const auto l = attention::stats_layout(T, T);
    ASSERT_GE(l.band_edges.size(), 2u) << T;
    EXPECT_EQ(l.band_edges.front(), 0) << T;
    EXPECT_EQ(l.band_edges.back(), T) << T;
    for (size_t b = 0; b + 1 < l.band_edges.size(); ++b) EXPECT_LT(l.band_edges[b], l.band_edges[b + 1]) << T;
    for (size_t b = 1; b + 1 < l.band_edges.size(); ++b)  // log decades: 1, 10, 100, …
      EXPECT_EQ(l.band_edges[b], int64_t(std::llround(std::pow(10.0, double(b - 1))))) << T;
    // Every range fits the keys a query sees.
    for (size_t r = 0; r < l.ranges(); ++r) EXPECT_LE(l.range_start[r] * l.range_ratio[r], T);
  }
  EXPECT_EQ(attention::log_grid(100), (std::vector<int64_t>{1, 2, 3, 6, 10, 18, 32, 56, 100}));
}

TEST(AttentionStatistics, UniformAttentionHasLogNEntropy) {
  // Equal logits: entropy ln n for a row with n keys, band entropy ln(band size), mass ∝ size.
  const int64_t T = 150, Q = 5;
  const auto layout = attention::stats_layout(T, T - Q + 1);
  attention::StatsSums sums(layout);
  const std::vector<double> zeros(T, 0.0);
  for (int64_t n = T - Q + 1; n <= T; ++n) attention::add_row(zeros.data(), n, layout, sums);
  double entropy = 0, recent = 0;
  for (int64_t n = T - Q + 1; n <= T; ++n) entropy += std::log(double(n)) / Q, recent += 100.0 / n / Q;
  EXPECT_NEAR(sums.entropy / double(sums.rows), entropy, 1e-12);
  EXPECT_NEAR(sums.recent_mass / double(sums.rows), recent, 1e-12);
  ASSERT_EQ(layout.band_edges, (std::vector<int64_t>{0, 1, 10, 100, 150}));
  EXPECT_NEAR(sums.band_entropy[2] / double(sums.band_rows[2]), std::log(90.0), 1e-12);
  for (size_t r = 0; r < layout.ranges(); ++r) {
    const double size = double(layout.range_start[r] * (layout.range_ratio[r] - 1));
    EXPECT_NEAR(sums.range_entropy[r] / double(sums.range_rows[r]), std::log(size), 1e-12);
  }
}

// A segment 600–1000 nats below the row's maximum (ALiBi far away): its terms against the row's
// maximum are tiny normals, subnormals or zeros, so the statistics recompute it against its own
// maximum. Checked against −Σ q ln q and log-sum-exp in long double, written out here.
TEST(AttentionStatistics, SegmentsFarBelowTheRowMaximumKeepFullPrecision) {
  const int64_t n = 150;
  const auto layout = attention::stats_layout(n, n);
  for (const double gap : {600.0, 720.0, 1000.0}) {  // e^−gap: normal, subnormal, zero
    std::vector<double> l(n);
    for (int64_t t = 0; t < n; ++t)  // distances < 10 near 0, the rest ~gap nats lower
      l[t] = t < 10 ? std::sin(double(t)) : -gap - 3.0 * (0.5 + 0.5 * std::cos(0.7 * double(t)));
    attention::StatsSums sums(layout);
    attention::add_row(l.data(), n, layout, sums);
    const auto lse = [&](int64_t a, int64_t b) {
      long double m = l[a], z = 0;
      for (int64_t t = a; t < b; ++t) m = std::max<long double>(m, l[t]);
      for (int64_t t = a; t < b; ++t) z += std::exp(static_cast<long double>(l[t]) - m);
      return m + std::log(z);
    };
    const auto entropy = [&](int64_t a, int64_t b) {
      const long double z = lse(a, b);
      long double h = 0;
      for (int64_t t = a; t < b; ++t) {
        const long double q = std::exp(static_cast<long double>(l[t]) - z);
        h -= q * std::log(q);
      }
      return double(h);
    };
    const long double row = lse(0, n);
    for (size_t b = 1; b < layout.bands(); ++b) {
      const int64_t a = layout.band_edges[b], e = layout.band_edges[b + 1];
      EXPECT_NEAR(sums.band_entropy[b], entropy(a, e), 1e-9) << "gap " << gap << ", band " << b;
      const double mass = double(std::exp(lse(a, e) - row));
      EXPECT_NEAR(sums.band_mass[b], mass, 1e-9 * mass) << "gap " << gap << ", band " << b;
    }
    for (size_t r = 0; r < layout.ranges(); ++r) {
      const int64_t a = layout.range_start[r], e = a * layout.range_ratio[r];
      if (a < 10) continue;  // ranges wholly in the far segment
      EXPECT_NEAR(sums.range_entropy[r], entropy(a, e), 1e-9) << "gap " << gap << ", range " << r;
      EXPECT_GT(sums.range_entropy[r], 0.5) << "gap " << gap << ", range " << r;  // not a 0 or NaN
    }
    for (const double h : sums.band_entropy) EXPECT_GE(h, 0.0) << "gap " << gap;  // clamped, never −1e-17
    for (const double h : sums.range_entropy) EXPECT_GE(h, 0.0) << "gap " << gap;
  }
}

TEST(AttentionStatistics, RowsEqualMaterialisedFloat64Attention) {
  torch::manual_seed(7);
  const int64_t B = 2, H = 3, T = 150, D = 8, Q = 12;
  for (const std::string name : {"si+p-rope", "alibi", "logn+rope", "yarn", "rope", "si+nope"}) {
    attention::CausalAttention attn(method(name, H, D));
    torch::NoGradGuard no_grad;
    // Large enough scores that attention is far from uniform.
    const auto q = torch::randn({B, H, T, D}, torch::kFloat64) * 2;
    const auto k = torch::randn({B, H, T, D}, torch::kFloat64) * 2;
    if (attn->logn_scale.defined()) attn->logn_scale.copy_(torch::tensor({0.2, 0.3, 0.5}));
    auto recorder = std::make_shared<attention::AttentionStatsRecorder>(Q, /*raw_scores=*/true);
    attention::AttentionProbe probe;
    probe.stats = recorder.get();
    attn->forward(q, k, torch::randn({B, H, T, D}, torch::kFloat64), &probe);
    const auto& layout = recorder->layout();
    ASSERT_GT(layout.ranges(), 0u);

    const auto logits = attention::reference_logits(q, k, attn->method(), attn->logn_scale);
    const Expected e = oracle(logits, Q, layout);
    for (int64_t h = 0; h < H; ++h) {
      const auto& s = recorder->heads()[h];
      ASSERT_EQ(s.rows, B * Q);
      const double rows = double(s.rows);
      EXPECT_NEAR(s.entropy / rows, e.entropy[h], 1e-6) << name << " h" << h;
      EXPECT_NEAR(s.recent_mass / rows, e.recent[h], 1e-6) << name << " h" << h;
      for (size_t b = 0; b < layout.bands(); ++b) {
        EXPECT_NEAR(s.band_mass[b] / rows, e.band_mass[h][b], 1e-6) << name << " band " << b;
        EXPECT_NEAR(s.band_entropy[b] / double(s.band_rows[b]), e.band_entropy[h][b], 1e-6)
            << name << " band " << b;
      }
      for (size_t r = 0; r < layout.ranges(); ++r) {
        ASSERT_EQ(s.range_rows[r], B * Q);
        EXPECT_NEAR(s.range_mass[r] / rows, e.range_mass[h][r], 1e-6) << name << " range " << r;
        EXPECT_NEAR(s.range_entropy[r] / rows, e.range_entropy[h][r], 1e-6) << name << " range " << r;
      }
    }
    // Raw scores s = score_scale·q·k (rotated, before the transform) of the same rows, pooled.
    const auto method = attn->method();
    const auto rotated = attn->rotate(q, k);
    const auto dots = torch::matmul(rotated.first, rotated.second.transpose(-2, -1)) * method.score_scale;
    std::vector<double> all;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = T - Q; i < T; ++i)
          for (int64_t j = 0; j <= i; ++j) all.push_back(dots[b][h][i][j].item<double>());
    const double n = double(all.size());
    const double mean = std::accumulate(all.begin(), all.end(), 0.0) / n;
    double m2 = 0, m3 = 0, m4 = 0;
    for (const double x : all) m2 += std::pow(x - mean, 2), m3 += std::pow(x - mean, 3), m4 += std::pow(x - mean, 4);
    const auto& scores = recorder->scores();
    EXPECT_EQ(scores.count, int64_t(all.size()));
    EXPECT_NEAR(scores.mean, mean, 1e-9);
    EXPECT_NEAR(scores.variance(), m2 / n, 1e-9 * m2 / n);
    EXPECT_NEAR(scores.skewness(), std::sqrt(n) * m3 / std::pow(m2, 1.5), 1e-9);
    EXPECT_NEAR(scores.excess_kurtosis(), n * m4 / (m2 * m2) - 3, 1e-9);
  }
}
