// analysis/stats/exact_tests.h, and `export pairs`' sign tests, seed spreads and planned families
// built on it, against independent values:
// binomial and hypergeometric probabilities worked by hand (counted tables, written out below),
// closed forms where one exists (χ² on 2 df: the quantile is −2 ln(1 − p); Clopper–Pearson at 0
// successes: 1 − (α/2)^(1/n)), and scipy's quantiles otherwise. scipy is not in .venv; the values
// were printed on 2026-12-07 by
//   python3 -m venv v && v/bin/pip install scipy   (scipy 1.17.1)
//   v/bin/python -c "from scipy import stats; print(repr(stats.chi2.ppf(0.05,7)), repr(stats.chi2.ppf(0.95,7)),
//       repr(stats.f.ppf(0.05,7,7)), repr(stats.f.ppf(0.95,7,7)), repr(stats.f.ppf(0.05,3,5)),
//       repr(stats.f.ppf(0.95,3,5)), repr(stats.beta.ppf(0.025,3,6)), repr(stats.beta.ppf(0.975,4,5)))"
//   → 2.167349909298057 14.067140449340169 0.26405822628038594 3.7870435399280686 0.1109452459033928
//     5.409451318056488 0.08523341413725354 0.7551367836334484
// (and stats.fisher_exact / stats.binomtest agreed with every hand-worked p below).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/arm_grid.h"
#include "analysis/pairwise_gaps.h"
#include "analysis/run_set.h"
#include "analysis/stats/exact_tests.h"

namespace st = analysis::stats;

TEST(Stats, SignTestIsTheExactTwoSidedBinomial) {
  EXPECT_DOUBLE_EQ(st::sign_test_p(8, 0), 2.0 / 256);             // 0.0078125
  EXPECT_DOUBLE_EQ(st::sign_test_p(0, 8), 2.0 / 256);
  EXPECT_DOUBLE_EQ(st::sign_test_p(7, 1), 2.0 * (1 + 8) / 256);   // 18/256 = 0.0703125
  EXPECT_DOUBLE_EQ(st::sign_test_p(6, 2), 2.0 * (1 + 8 + 28) / 256);
  EXPECT_DOUBLE_EQ(st::sign_test_p(5, 2), 2.0 * (1 + 7 + 21) / 128);  // 7 non-tied pairs
  EXPECT_DOUBLE_EQ(st::sign_test_p(4, 4), 1.0);                   // capped at 1
  EXPECT_DOUBLE_EQ(st::sign_test_p(0, 0), 1.0);                   // every pair tied: nothing to test
  EXPECT_THROW(st::sign_test_p(-1, 3), std::invalid_argument);
}

TEST(Stats, SdIntervalIsChiSquaredOnNMinusOneDf) {
  const double s = 0.01;
  // 8 values, 7 df: scipy's χ²_7 quantiles (header).
  const auto ci = st::sd_interval(s, 8, 0.90);
  EXPECT_NEAR(ci.lo, s * std::sqrt(7 / 14.067140449340169), 1e-12);
  EXPECT_NEAR(ci.hi, s * std::sqrt(7 / 2.167349909298057), 1e-12);
  // 3 values, 2 df: the χ²_2 quantile is −2 ln(1 − p).
  const auto two = st::sd_interval(s, 3, 0.90);
  EXPECT_NEAR(two.lo, s * std::sqrt(2 / (-2 * std::log(0.05))), 1e-12);
  EXPECT_NEAR(two.hi, s * std::sqrt(2 / (-2 * std::log(0.95))), 1e-12);
  EXPECT_TRUE(std::isnan(st::sd_interval(s, 1, 0.90).lo));
  const double x[] = {1.0, 1.1, 1.3};  // mean 1.1333…, Σ(x − x̄)² = 0.046666…
  EXPECT_NEAR(st::sample_sd(x, 3), std::sqrt(0.0466666666666667 / 2), 1e-12);
}

TEST(Stats, SdRatioIntervalIsFOnNMinusOneDf) {
  const auto ci = st::sd_ratio_interval(0.08, 8, 0.01, 8, 0.90);
  EXPECT_NEAR(ci.lo, 8 / std::sqrt(3.7870435399280686), 1e-10);
  EXPECT_NEAR(ci.hi, 8 / std::sqrt(0.26405822628038594), 1e-10);
  // F on 7, 7 df is its own reciprocal: the interval of the inverse ratio is the inverted interval.
  const auto inverse = st::sd_ratio_interval(0.01, 8, 0.08, 8, 0.90);
  EXPECT_NEAR(inverse.lo, 1 / ci.hi, 1e-10);
  EXPECT_NEAR(inverse.hi, 1 / ci.lo, 1e-10);
  // Unequal df (4 and 6 values: F on 3, 5).
  const auto uneven = st::sd_ratio_interval(2.0, 4, 1.0, 6, 0.90);
  EXPECT_NEAR(uneven.lo, 2 / std::sqrt(5.409451318056488), 1e-10);
  EXPECT_NEAR(uneven.hi, 2 / std::sqrt(0.1109452459033928), 1e-10);
  EXPECT_TRUE(std::isnan(st::sd_ratio_interval(0.1, 8, 0.0, 8, 0.90).lo));
}

// Hand-worked: [[8, 0], [2, 6]] has margins 8, 8 and 10 successes; P(a) = C(8,a) C(8,10−a) / C(16,10)
// for a = 2..8 is 28, 448, 1960, 3136, 1960, 448, 28 over 8008. The observed a = 8 (28) and a = 2
// (28) are the tables as or less likely: p = 56/8008. [[7, 1], [2, 6]]: 9 successes, over
// C(16,9) = 11440 the tables a = 1..8 weigh 8, 224, 1568, 3920, 3920, 1568, 224, 8; the observed 224
// and below: a = 1, 2, 7, 8, p = 464/11440. [[1, 3], [4, 0]]: over C(8,5) = 56, a = 1..4 weigh 4,
// 24, 24, 4: p = 8/56.
TEST(Stats, FisherExactTestSumsTheTablesNoMoreLikelyThanTheObserved) {
  EXPECT_NEAR(st::hypergeometric_table_probability(8, 0, 2, 6), 28.0 / 8008, 1e-15);
  EXPECT_NEAR(st::hypergeometric_table_probability(5, 3, 5, 3), 3136.0 / 8008, 1e-14);
  EXPECT_NEAR(st::fisher_exact_p(8, 0, 2, 6), 56.0 / 8008, 1e-14);  // 0.006993…
  EXPECT_NEAR(st::fisher_exact_p(2, 6, 8, 0), 56.0 / 8008, 1e-14);  // rows swapped
  EXPECT_NEAR(st::fisher_exact_p(7, 1, 2, 6), 464.0 / 11440, 1e-14);  // 0.040559…
  EXPECT_NEAR(st::fisher_exact_p(1, 3, 4, 0), 8.0 / 56, 1e-14);
  EXPECT_NEAR(st::fisher_exact_p(8, 0, 1, 7), 16.0 / 11440, 1e-14);  // a = 8: 8, a = 1: 8
  EXPECT_NEAR(st::fisher_exact_p(4, 4, 4, 4), 1.0, 1e-12);
  EXPECT_NEAR(st::fisher_exact_p(8, 0, 8, 0), 1.0, 1e-12);  // one table only
  EXPECT_THROW(st::fisher_exact_p(-1, 0, 2, 2), std::invalid_argument);
}

TEST(Stats, ClopperPearsonAgainstBetaQuantiles) {
  const auto ci = st::clopper_pearson(3, 8, 0.95);
  EXPECT_NEAR(ci.lo, 0.08523341413725354, 1e-10);
  EXPECT_NEAR(ci.hi, 0.7551367836334484, 1e-10);
  const auto none = st::clopper_pearson(0, 8, 0.95);
  EXPECT_EQ(none.lo, 0.0);
  EXPECT_NEAR(none.hi, 1 - std::pow(0.025, 1.0 / 8), 1e-12);
  const auto all = st::clopper_pearson(8, 8, 0.95);
  EXPECT_NEAR(all.lo, std::pow(0.025, 1.0 / 8), 1e-12);
  EXPECT_EQ(all.hi, 1.0);
}

// export pairs: the sign test over the seed pairs counts a tied seed and leaves it out of the
// test; the arms' spread is the sd of each run's mean loss over the common seeds.
TEST(Stats, PairsCountTiedSeedsAndReportEachArmsSpread) {
  analysis::ArmGrid g;
  g.context = 64;
  g.document = {0, 0, 1, 1};
  analysis::Arm a, b;
  a.label = "a";
  b.label = "b";
  const double base[] = {1.0, 1.1, 1.3};
  const double shift[] = {0.02, 0.03, 0.0};  // b − a per seed; seed 2 tied
  for (int s = 0; s < 3; ++s) {
    a.runs.push_back({s, {base[s] - 0.01, base[s] + 0.01, base[s] - 0.02, base[s] + 0.02}});
    auto run = a.runs.back();
    for (auto& x : run.loss) x += shift[s];
    b.runs.push_back(run);
  }
  g.arms = {b, a};
  const auto t = analysis::pairwise_gaps(g);
  ASSERT_EQ(t.arms, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(t.pairs.size(), 1u);
  const auto& r = t.pairs[0];
  EXPECT_EQ(r.gap.a_higher, 0);
  EXPECT_EQ(r.gap.b_higher, 2);
  EXPECT_EQ(r.gap.ties, 1);
  EXPECT_DOUBLE_EQ(r.gap.sign_p, 0.5);  // 2 of 2 non-tied: 2 · (1/2)²
  // a's run means are 1.0, 1.1, 1.3 (the window offsets cancel): sd √(0.046666…/2).
  const double sd_a = std::sqrt(0.0466666666666667 / 2);
  EXPECT_NEAR(r.sd_a, sd_a, 1e-12);
  EXPECT_NEAR(r.sd_a_ci.lo, sd_a * std::sqrt(2 / (-2 * std::log(0.05))), 1e-12);
  EXPECT_NEAR(r.sd_a_ci.hi, sd_a * std::sqrt(2 / (-2 * std::log(0.95))), 1e-12);
  const double mb[] = {1.02, 1.13, 1.3};
  EXPECT_NEAR(r.sd_b, st::sample_sd(mb, 3), 1e-12);
  EXPECT_NEAR(r.sd_ratio, sd_a / r.sd_b, 1e-12);
  const std::string csv = analysis::format_pairs_csv({t});
  EXPECT_EQ(csv.rfind("context,a,b,gap,se,df,lo,hi,p,resolved,seeds,threshold,family,a_higher,b_higher,tied,sign_p,"
                      "sd_a,sd_a_lo90,sd_a_hi90,sd_b,sd_b_lo90,sd_b_hi90,sd_ratio,sd_ratio_lo90,sd_ratio_hi90\n", 0),
            0u) << csv;
  EXPECT_NE(csv.find(" at 0.05,0,2,1,0.5,"), std::string::npos) << csv;
  const std::string md = analysis::format_pairs_markdown({t}, 64);
  EXPECT_NE(md.find("| a − b | 0 / 2 / 1 | 0.5 | "), std::string::npos) << md;
  // 8 seeds, every one with b higher: the sign test's smallest p, 2/256.
  analysis::ArmGrid eight = g;
  eight.arms[0].runs.clear();
  eight.arms[1].runs.clear();
  for (int s = 0; s < 8; ++s) {
    const double m = 1.0 + 0.01 * s * s;
    eight.arms[1].runs.push_back({s, {m, m, m + 0.01, m - 0.01}});
    eight.arms[0].runs.push_back({s, {m + 0.001 * (s + 1), m + 0.001, m + 0.01, m - 0.01}});
  }
  const auto t8 = analysis::pairwise_gaps(eight);
  EXPECT_EQ(t8.pairs[0].gap.b_higher, 8);
  EXPECT_DOUBLE_EQ(t8.pairs[0].gap.sign_p, 0.0078125);
}

// A planned comparison restricted to 4L and 16L (sweeps/si-vs-kerple-tuned.yaml): the 1L pair is
// outside the family however small its p, and Holm runs over the two others.
TEST(Stats, APlannedFamilyCanLeaveOutContexts) {
  auto tables_with = [](const std::vector<double>& p) {
    std::vector<analysis::PairTable> tables;
    for (int c = 0; c < 3; ++c) {
      analysis::PairTable t;
      t.train_context = 256;
      t.context = int64_t(256) << (2 * c);  // 1L, 4L, 16L
      t.arms = {"x", "y"};
      analysis::PairResult r;
      r.a = 0, r.b = 1, r.p = p[size_t(c)], r.estimable = true;
      t.pairs = {r};
      tables.push_back(t);
    }
    return tables;
  };
  // Holm over all three: 0.02 > 0.05/3 stops at once; over 4L and 16L: 0.02 ≤ 0.05/2, 0.04 ≤ 0.05.
  auto all = tables_with({0.3, 0.02, 0.04});
  analysis::apply_planned_family(all, "holm", 0.05);
  for (const auto& t : all) EXPECT_FALSE(t.pairs[0].resolved) << t.context;
  auto four = tables_with({0.3, 0.02, 0.04});
  analysis::apply_planned_family(four, "holm", 0.05, {4, 16});
  EXPECT_FALSE(four[0].pairs[0].resolved);
  EXPECT_TRUE(std::isnan(four[0].pairs[0].threshold));
  EXPECT_TRUE(four[1].pairs[0].resolved);
  EXPECT_TRUE(four[2].pairs[0].resolved);
  EXPECT_DOUBLE_EQ(four[1].pairs[0].threshold, 0.025);
  EXPECT_DOUBLE_EQ(four[2].pairs[0].threshold, 0.05);
  EXPECT_NE(four[0].family.find("not tested"), std::string::npos) << four[0].family;
  EXPECT_NE(four[1].family.find("over its 2 tests (every pair at 4L, 16L)"), std::string::npos) << four[1].family;
  // However small the 1L p, it is not tested; a table without one L is left out too.
  auto tiny = tables_with({1e-9, 0.02, 0.04});
  tiny[2].train_context = 0;
  analysis::apply_planned_family(tiny, "holm", 0.05, {4, 16});
  EXPECT_FALSE(tiny[0].pairs[0].resolved);
  EXPECT_TRUE(std::isnan(tiny[2].pairs[0].threshold));
  EXPECT_DOUBLE_EQ(tiny[1].pairs[0].threshold, 0.05);  // a family of one
}

namespace {

// One run of the shape of sweeps/si-vs-kerple-tuned.yaml: trained at L, validated at L and 4L on 8
// windows in 8 documents; kerple does not read τ ("–").
analysis::RunEntry tuned_run(const std::string& method, const std::string& tau, int64_t L, int seed, double loss) {
  analysis::RunEntry e;
  e.dir = fmt::format("runs/t/{}-{}-{}-{}", method, tau, L, seed);
  e.state = "done";
  e.values = {{"attention.method", method}, {"attention.tau", tau}, {"train.context", std::to_string(L)},
              {"train.seed", std::to_string(seed)}};
  e.train_context = L;
  results::RunRecord record;
  for (const int64_t T : {L, 4 * L}) {
    auto& rows = record.eval[T];
    const double x = loss + 0.001 * seed * seed + (T == L ? 0.0 : 0.02 * (method == "si+p-rope"));
    const double own = method == "si+p-rope" ? 0.001 * ((seed * 7) % 5) : 0.0;  // SI's own seed noise
    rows.window_loss = {x + own, x + 0.01, x - 0.01, x + 0.002 * seed, x + 0.03, x, x - 0.5 * own, x + 0.001 * seed};
    rows.window_fingerprint = fmt::format("fnv1a64:{:016x}", T);
    rows.window_document = {0, 1, 2, 3, 4, 5, 6, 7};
  }
  e.record = record;
  return e;
}

}  // namespace

// The planned comparison of si-vs-kerple-tuned.yaml end to end through the analysis: four arms (SI
// at its chosen τ and kerple, at L = 128 and 256) named by their labels, one pair per context (no
// two L share a context), and the family restricted to 4L: two tests, the 1L pairs described only.
TEST(Stats, TheTunedSweepsPlannedFamilyIsItsFourLPairsOnly) {
  analysis::RunSet set;
  set.keys = {"attention.method", "attention.tau", "train.context", "train.seed"};
  for (const int64_t L : {128, 256})
    for (int s = 0; s < 8; ++s) {
      set.runs.push_back(tuned_run("si+p-rope", "L/100", L, s, 1.20));
      set.runs.push_back(tuned_run("si+p-rope", "L/25", L, s, 1.25));
      set.runs.push_back(tuned_run("kerple+p-rope", "–", L, s, 1.21));
    }
  auto grids = analysis::arm_grid(set, {"attention.method", "attention.tau", "train.context"});
  ASSERT_EQ(grids.size(), 4u);  // 128, 256, 512, 1024
  analysis::keep_arms(grids, {"attention.method=si+p-rope, attention.tau=L/100, train.context=128",
                              "attention.method=kerple+p-rope, attention.tau=–, train.context=128",
                              "attention.method=si+p-rope, attention.tau=L/100, train.context=256",
                              "attention.method=kerple+p-rope, attention.tau=–, train.context=256"});
  std::vector<analysis::PairTable> tables;
  for (const auto& g : grids) tables.push_back(analysis::pairwise_gaps(g));
  for (const auto& t : tables) {
    ASSERT_EQ(t.pairs.size(), 1u) << t.context;
    EXPECT_EQ(t.train_context, t.context == 128 || t.context == 512 ? 128 : 256);
    EXPECT_EQ(t.pairs[0].gap.pairs, 8);
  }
  analysis::apply_planned_family(tables, "holm", 0.05, {4});
  int tested = 0;
  for (const auto& t : tables) {
    const bool at_4l = t.context == 4 * t.train_context;
    EXPECT_EQ(std::isfinite(t.pairs[0].threshold), at_4l) << t.context;
    tested += at_4l;
    if (at_4l) {  // SI is 0.02 − 0.01 = 0.01 above kerple in every seed: resolved, 8 of 8 by sign
      EXPECT_TRUE(t.pairs[0].resolved) << t.context;
      EXPECT_EQ(t.arms[0].rfind("attention.method=kerple+p-rope", 0), 0u);
      EXPECT_EQ(t.pairs[0].gap.b_higher, 8);
      EXPECT_DOUBLE_EQ(t.pairs[0].gap.sign_p, 0.0078125);
    }
  }
  EXPECT_EQ(tested, 2);
  EXPECT_NE(tables[2].family.find("over its 2 tests (every pair at 4L)"), std::string::npos) << tables[2].family;
}
