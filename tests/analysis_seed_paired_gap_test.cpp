// The seed-paired gap (analysis/seed_paired_gap.h): a hand-worked example, Student's t quantiles
// from tables, and the coverage of its interval on simulated loss tables whose seed, document and
// window variances are known — where an interval from the windows alone (the spread of per-window
// differences, as `tau check` had it) covers far too rarely.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "analysis/seed_paired_gap.h"

using analysis::SeedWindows;

TEST(SeedPairedGap, HandWorkedExample) {
  // Two seeds, four windows in two documents. d_1i = (.1, .2, −.1, .1), d_2i = (.1, 0, .1, .2):
  // d_s = (.075, .1), gap .0875, v_seed = .0125²·2 / 1 / 2 = 1.5625e-4; d̄_i = (.1, .1, 0, .15),
  // residuals by document (.025, −.025): v_win = 2 · 1.25e-3 / 16 = 1.5625e-4; df = min(1, 1).
  const std::vector<SeedWindows> a = {{1, {1.0, 1.2, 0.9, 1.1}}, {2, {1.1, 1.0, 1.0, 1.2}}};
  const std::vector<SeedWindows> b = {{2, {1.0, 1.0, 0.9, 1.0}}, {1, {0.9, 1.0, 1.0, 1.0}}};
  const auto g = analysis::seed_paired_gap(a, b, {0, 0, 1, 1});
  EXPECT_TRUE(g.paired_by_seed);
  EXPECT_EQ(g.pairs, 2);
  EXPECT_EQ(g.documents, 2);
  EXPECT_NEAR(g.gap, 0.0875, 1e-12);
  EXPECT_NEAR(g.seed_se, std::sqrt(1.5625e-4), 1e-12);
  EXPECT_NEAR(g.window_se, std::sqrt(1.5625e-4), 1e-12);
  EXPECT_NEAR(g.df, 1.0, 1e-12);
  EXPECT_NEAR(g.lo, 0.0875 - 12.706205 * std::sqrt(3.125e-4), 1e-6);
  EXPECT_NEAR(g.hi, 0.0875 + 12.706205 * std::sqrt(3.125e-4), 1e-6);
  EXPECT_FALSE(g.excludes_zero());  // 2 seeds: one degree of freedom, a wide interval
}

// Three seeds, six documents: the seeds set the degrees of freedom, n − 1 = 2 (not n = 3, which
// would narrow the interval to exclude 0). d_s = (.1, .2, .3) in every window: gap .2,
// v_seed = var(.1, .2, .3) / 3 = .01 / 3, v_win = 0 (every window's mean difference is .2).
TEST(SeedPairedGap, TheSeedCountSetsTheDegreesOfFreedom) {
  std::vector<SeedWindows> a, b;
  for (int s = 1; s <= 3; ++s) {
    b.push_back({s, std::vector<double>(6, 1.0)});
    a.push_back({s, std::vector<double>(6, 1.0 + 0.1 * s)});
  }
  const auto g = analysis::seed_paired_gap(a, b, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(g.documents, 6);
  EXPECT_NEAR(g.gap, 0.2, 1e-12);
  EXPECT_NEAR(g.seed_se, std::sqrt(0.01 / 3), 1e-12);
  EXPECT_NEAR(g.window_se, 0.0, 1e-12);
  EXPECT_NEAR(g.df, 2.0, 1e-12);
  EXPECT_NEAR(g.lo, 0.2 - 4.302653 * std::sqrt(0.01 / 3), 1e-6);  // t(0.975, 2)
  EXPECT_FALSE(g.excludes_zero());
}

TEST(SeedPairedGap, StudentTQuantilesMatchTheTables) {
  EXPECT_NEAR(analysis::t_quantile(0.975, 1), 12.7062, 1e-4);
  EXPECT_NEAR(analysis::t_quantile(0.975, 2), 4.3027, 1e-4);
  EXPECT_NEAR(analysis::t_quantile(0.95, 4), 2.1318, 1e-4);
  EXPECT_NEAR(analysis::t_quantile(0.975, 10), 2.2281, 1e-4);
  EXPECT_NEAR(analysis::t_quantile(0.975, 1e6), 1.95996, 1e-4);
}

TEST(SeedPairedGap, BadShapesAreRefused) {
  EXPECT_THROW(analysis::seed_paired_gap({{1, {1.0}}}, {{1, {1.0}}}, {0}), std::invalid_argument);
  EXPECT_THROW(analysis::seed_paired_gap({{1, {1.0}}, {2, {1.0}}}, {{1, {1.0}}, {2, {1.0, 2.0}}}, {0}),
               std::invalid_argument);
}

namespace {

// A simulated comparison: the true gap Δ (over the population of documents), G documents of K
// windows each drawn afresh, n seed pairs. The per-window difference of seed pair s at window i
// of document g is Δ + doc_g + win_i + seed_s + noise_si, with the given standard deviations.
struct Noise {
  double seed, document, window, seed_window;
};

struct Coverage {
  double ours = 0, windows_only = 0;
};

Coverage simulate(const Noise& sd, int n, int G, int K, int trials, uint64_t rng_seed) {
  std::mt19937_64 rng(rng_seed);
  std::normal_distribution<double> z(0.0, 1.0);
  const double truth = 0.02;
  int ours = 0, windows_only = 0;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<int64_t> document;
    std::vector<double> shared;  // doc_g + win_i
    for (int g = 0; g < G; ++g) {
      const double doc = sd.document * z(rng);
      for (int k = 0; k < K; ++k) {
        document.push_back(g);
        shared.push_back(doc + sd.window * z(rng));
      }
    }
    std::vector<SeedWindows> a, b;
    for (int s = 0; s < n; ++s) {
      SeedWindows ra{s, {}}, rb{s, {}};
      const double seed = sd.seed * z(rng);
      for (const double x : shared) {
        const double base = 3.0 + 0.5 * z(rng);  // what both arms share at this window: cancels
        rb.loss.push_back(base);
        ra.loss.push_back(base + truth + x + seed + sd.seed_window * z(rng));
      }
      a.push_back(ra);
      b.push_back(rb);
    }
    const auto gap = analysis::seed_paired_gap(a, b, document);
    ours += gap.lo <= truth && truth <= gap.hi;
    if (std::getenv("SEED_PAIRED_GAP_PRINT") && trial == trials - 1)
      std::printf("n=%d: df %.2f, seed se %.4f, window se %.4f\n", n, gap.df, gap.seed_se, gap.window_se);
    // The windows alone: the spread of the per-window differences (one seed's paired s.e.).
    const size_t W = document.size();
    std::vector<double> d(W, 0.0);
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < W; ++i) d[i] += (a[s].loss[i] - b[s].loss[i]) / n;
    double mean = 0, ss = 0;
    for (const double x : d) mean += x / double(W);
    for (const double x : d) ss += (x - mean) * (x - mean);
    const double se = std::sqrt(ss / double(W - 1) / double(W));
    const double t = analysis::t_quantile(0.975, double(W - 1));
    windows_only += std::abs(mean - truth) <= t * se;
  }
  if (std::getenv("SEED_PAIRED_GAP_PRINT"))
    std::printf("coverage: ours %.4f, windows only %.4f\n", double(ours) / trials, double(windows_only) / trials);
  return {double(ours) / trials, double(windows_only) / trials};
}

}  // namespace

// Seeds vary more than windows (as measured here: seed sd 0.003–0.011 against window s.e. of
// 0.001–0.004), windows of one document alike: the 95% interval covers the true gap at least 95%
// of the time (it errs wide: 98.9–99.95% here, the price of taking the smaller degrees of freedom
// with 2–4 seeds; Welch–Satterthwaite's covered 91% with 2); the windows-only interval covers
// 60–68% (SEED_PAIRED_GAP_PRINT=1 prints them).
TEST(SeedPairedGap, IntervalCoversTheTrueGapAtItsLevel) {
  // At least the nominal 95% (docs/tau-vs-context.md says the same number): the interval errs wide.
  const double nominal = 0.95;
  const int trials = 2000;
  const auto three_seeds = simulate({0.01, 0.004, 0.02, 0.005}, 3, 8, 5, trials, 1);
  EXPECT_GE(three_seeds.ours, nominal) << "3 seeds";
  EXPECT_LT(three_seeds.windows_only, 0.80) << "windows only, 3 seeds";
  const auto two_seeds = simulate({0.01, 0.004, 0.02, 0.005}, 2, 8, 5, trials, 2);
  EXPECT_GE(two_seeds.ours, nominal) << "2 seeds";
  EXPECT_LT(two_seeds.windows_only, 0.80) << "windows only, 2 seeds";
  // Documents, not seeds, dominate: the clustered window part carries the interval.
  const auto documents = simulate({0.001, 0.02, 0.01, 0.002}, 4, 10, 6, trials, 3);
  EXPECT_GE(documents.ours, nominal) << "document-dominated";
  EXPECT_LT(documents.windows_only, 0.85) << "windows only, document-dominated";
}

#include "analysis/tau/calibration.h"

TEST(TauCalibration, ClopperPearsonAtTheEndsHasAClosedForm) {
  // 0 of n: [0, 1 − (α/2)^(1/n)]; n of n: [(α/2)^(1/n), 1].
  auto [lo, hi] = analysis::clopper_pearson(0, 60);
  EXPECT_EQ(lo, 0.0);
  EXPECT_NEAR(hi, 1 - std::pow(0.025, 1.0 / 60), 1e-9);
  std::tie(lo, hi) = analysis::clopper_pearson(20, 20);
  EXPECT_NEAR(lo, std::pow(0.025, 1.0 / 20), 1e-9);
  EXPECT_EQ(hi, 1.0);
  // 3 of 60: the p where P(X ≥ 3) = 0.025 and where P(X ≤ 3) = 0.025, by bisection on the exact
  // binomial sums (Python, math.comb): 0.0104323296, 0.1392432467.
  std::tie(lo, hi) = analysis::clopper_pearson(3, 60);
  EXPECT_NEAR(lo, 0.0104323296, 1e-9);
  EXPECT_NEAR(hi, 0.1392432467, 1e-9);
}
