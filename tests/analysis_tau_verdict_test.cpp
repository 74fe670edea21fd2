// The verdict of `harness tau check` (analysis/tau/verdict.h) on hand-made grids whose gaps and
// noise are known: each class of verdict, the best τ at the end of the grid, one seed, and the
// simultaneous level. (The interval itself: analysis_seed_paired_gap_test.cpp.)
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "analysis/tau/verdict.h"
#include "common/errors.h"

using analysis::TauClass;

namespace {

// τ ∈ {0.05, 0.16, 0.5} (the config's: 0.16) at T = 64; 12 windows in 4 documents. Arm a's run of
// seed s at window i: base_i + offset[a] + seed_noise · (a deterministic ±1 pattern in s and a).
analysis::ContextRuns grid(const std::vector<double>& offset, double seed_noise, int seeds) {
  analysis::ContextRuns c;
  c.context = 64;
  const std::vector<std::string> taus = {"0.05", "0.16", "0.5"};
  const std::vector<double> values = {0.05, 0.16, 0.5};
  for (int g = 0; g < 4; ++g)
    for (int k = 0; k < 3; ++k) c.document.push_back(g);
  for (size_t a = 0; a < taus.size(); ++a) {
    analysis::TauArm arm;
    arm.tau = taus[a];
    arm.value = values[a];
    for (int s = 0; s < seeds; ++s) {
      analysis::SeedWindows run{s, {}};
      const double sign = ((s * 7 + int(a) * 3) % 4 < 2) ? 1.0 : -1.0;
      for (size_t i = 0; i < c.document.size(); ++i)
        run.loss.push_back(3.0 + 0.2 * std::sin(double(i)) + offset[a] + seed_noise * sign +
                           1e-4 * std::cos(double(i * (s + 1) + a)));
      arm.runs.push_back(run);
    }
    c.arms.push_back(arm);
  }
  return c;
}

analysis::TauVerdict verdict(const analysis::ContextRuns& c) { return analysis::tau_verdicts({c}, "0.16").at(0); }

}  // namespace

TEST(TauVerdict, NearOptimalWhenNoTauIsBetterBeyondTheMargin) {
  const auto v = verdict(grid({0.03, 0.0, 0.02}, 0.0005, 4));
  EXPECT_EQ(v.verdict, TauClass::kNearOptimal) << v.why;
  EXPECT_EQ(v.best_tau, "0.16");
  EXPECT_EQ(v.near_best, std::vector<std::string>{"0.16"});
  EXPECT_EQ(v.seeds, 4);
  EXPECT_EQ(v.documents, 4);
  EXPECT_NEAR(v.level_each, 1 - 0.05 / 2, 1e-12);  // two comparisons share the 95%
  ASSERT_EQ(v.comparisons.size(), 2u);
  EXPECT_NEAR(v.comparisons[0].gap.gap, -0.03, 1e-3);  // own − τ = 0.05
  EXPECT_TRUE(v.edge.empty());
}

TEST(TauVerdict, WorseWhenATauIsBetterByMoreThanTheMargin) {
  const auto v = verdict(grid({0.03, 0.05, 0.0}, 0.0005, 4));
  EXPECT_EQ(v.verdict, TauClass::kWorse) << v.why;
  EXPECT_NE(v.why.find("τ = 0.5 is better by more than the margin 0.01"), std::string::npos) << v.why;
  EXPECT_EQ(v.best_tau, "0.5");
  // The best ends the grid: said so, with factors beyond it (0.5 / 0.16 = 3.125 × 3 and × 10).
  EXPECT_EQ(v.edge, "largest");
  EXPECT_EQ(v.factors_to_add, (std::vector<std::string>{"9.38", "31.2"}));
  const std::string text = analysis::format_verdicts({v}, 64);
  EXPECT_NE(text.find("T = 64 (1L): worse — "), std::string::npos) << text;
  EXPECT_NE(text.find("the best τ is the grid's largest: the optimum may lie beyond it; extend --factors with 9.38,31.2"),
            std::string::npos) << text;
  EXPECT_NE(text.find("verdict: τ = 0.16 is worse at 1 of 1 contexts"), std::string::npos) << text;
}

TEST(TauVerdict, ABetterTauWithinTheMarginIsResolvedAsSuch) {
  const auto v = verdict(grid({0.03, 0.004, 0.0}, 0.0002, 6));
  EXPECT_EQ(v.verdict, TauClass::kBetterExists) << v.why;
  EXPECT_NE(v.why.find("τ = 0.5 is better, by less than the margin"), std::string::npos) << v.why;
}

TEST(TauVerdict, InconclusiveWhenSeedsVaryTooMuchToTell) {
  const auto v = verdict(grid({0.03, 0.004, 0.0}, 0.01, 3));
  EXPECT_EQ(v.verdict, TauClass::kInconclusive) << v.why;
  EXPECT_NE(v.why.find("reaches beyond the margin"), std::string::npos) << v.why;
  // With that much seed noise every τ of the grid is within the noise of the best.
  EXPECT_EQ(v.near_best, (std::vector<std::string>{"0.05", "0.16", "0.5"}));
}

// How many seeds would resolve an inconclusive gap, by hand: gap 0.03 against a margin 0.01 (a
// distance of 0.02), var_s(d) = 0.01² · 3 = 3e-4, no window part, 95% each, df = n − 1:
// n = 5: t(4) = 2.776 · √(3e-4 / 5) = 0.0215 > 0.02; n = 6: t(5) = 2.571 · √(5e-5) = 0.0182 < 0.02.
TEST(TauVerdict, TheSeedsThatWouldResolveAnInconclusiveGap) {
  analysis::PairedGap g;
  g.gap = 0.03, g.seed_se = 0.01, g.window_se = 0, g.pairs = 3, g.documents = 100;
  EXPECT_EQ(analysis::seeds_to_resolve(g, 0.01, 0.95), 6);
  g.gap = -0.01;  // 0.02 below the margin: resolved as within it at the same n
  EXPECT_EQ(analysis::seeds_to_resolve(g, 0.01, 0.95), 6);
  g.window_se = 0.02;  // the windows alone are wider than the distance: no number of seeds will do
  EXPECT_EQ(analysis::seeds_to_resolve(g, 0.01, 0.95), 0);
  const auto v = verdict(grid({0.03, 0.004, 0.0}, 0.01, 3));
  ASSERT_EQ(v.verdict, TauClass::kInconclusive);
  EXPECT_GT(v.seeds_to_resolve, 3) << v.why;
  EXPECT_NE(v.why.find(fmt::format("about {} seeds per τ would resolve a gap this size", v.seeds_to_resolve)),
            std::string::npos) << v.why;
}

TEST(TauVerdict, OneSeedGivesNoVerdict) {
  const auto v = verdict(grid({0.03, 0.05, 0.0}, 0.0, 1));
  EXPECT_EQ(v.verdict, TauClass::kInconclusive);
  EXPECT_NE(v.why.find("one seed cannot measure how much seeds vary"), std::string::npos) << v.why;
  EXPECT_TRUE(v.comparisons.empty());
}

TEST(TauVerdict, AnUnknownTauIsAnInputError) {
  EXPECT_THROW(analysis::tau_verdicts({grid({0, 0, 0}, 0.001, 2)}, "3.2"), harness::InputError);
}
