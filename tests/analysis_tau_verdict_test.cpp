// The verdict of `harness tau check` (analysis/tau_verdict.h) on a hand-made table: the gap to the
// best τ in combined standard errors, over seeds when a cell has two or more, over validation
// windows for one seed.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/tau_verdict.h"
#include "harness/common/errors.h"

namespace {

analysis::Cell cell(double mean, double se, int n, double window_se) {
  analysis::Cell c;
  c.mean = mean;
  c.se = se;
  c.n = n;
  c.window_se = window_se;
  return c;
}

// τ ∈ {0.016, 0.16, 1.6} × T ∈ {64, 256}; the config's τ is 0.16.
analysis::Table table() {
  analysis::Table t;
  t.row_keys = {"attention.tau"};
  t.col_keys = {"context"};
  t.rows = {{"0.016"}, {"0.16"}, {"1.6"}};
  t.cols = {{"64"}, {"256"}};
  t.cells = {{cell(1.40, 0.03, 2, 0.004), cell(1.40, std::nan(""), 1, 0.004)},
             {cell(1.30, 0.01, 2, 0.004), cell(1.50, std::nan(""), 1, 0.003)},
             {cell(1.27, 0.02, 2, 0.005), std::nullopt}};
  return t;
}

}  // namespace

TEST(TauVerdict, GapInCombinedStandardErrorsAsComputedByHand) {
  const auto v = analysis::tau_verdicts(table(), "0.16");
  ASSERT_EQ(v.size(), 2u);
  // T = 64: best τ = 1.6; seeds' s.e. on both sides: 0.03 / √(0.01² + 0.02²) = 1.3416.
  EXPECT_EQ(v[0].context, 64);
  EXPECT_EQ(v[0].best_tau, "1.6");
  EXPECT_NEAR(v[0].gap, 0.03, 1e-12);
  EXPECT_NEAR(v[0].k, 0.03 / std::sqrt(0.0005), 1e-9);
  EXPECT_TRUE(v[0].within);
  EXPECT_EQ(v[0].uncertainty, "seeds");
  // T = 256: one seed each, so the windows' s.e.: 0.1 / √(0.003² + 0.004²) = 20.
  EXPECT_EQ(v[1].best_tau, "0.016");
  EXPECT_NEAR(v[1].k, 20.0, 1e-9);
  EXPECT_FALSE(v[1].within);
  EXPECT_EQ(v[1].uncertainty, "windows");
  const std::string text = analysis::format_verdicts(v, 64);
  EXPECT_NE(text.find("T = 64 (1L): τ = 0.16 is within 1.3 s.e. of the best (best τ = 1.6"), std::string::npos) << text;
  EXPECT_NE(text.find("T = 256 (4L): τ = 0.16 is worse by 20.0 s.e."), std::string::npos) << text;
  EXPECT_NE(text.find("verdict: τ = 0.16 is more than 2 s.e. from the best τ at 1 of 2 contexts"), std::string::npos)
      << text;
  // A looser k accepts both.
  const auto loose = analysis::tau_verdicts(table(), "0.16", 25.0);
  EXPECT_TRUE(loose[0].within && loose[1].within);
  EXPECT_NE(analysis::format_verdicts(loose, 64, 25.0).find("within 25 s.e. of the best τ at every context"),
            std::string::npos);
}

TEST(TauVerdict, TheBestTauIsItsOwnVerdictAndUnknownErrorsGiveNone) {
  auto t = table();
  const auto best = analysis::tau_verdicts(t, "1.6");
  ASSERT_EQ(best.size(), 1u);  // 1.6 has no cell at T = 256
  EXPECT_EQ(best[0].k, 0.0);
  EXPECT_NE(analysis::format_verdicts(best, 64).find("τ = 1.6 is the best of the grid"), std::string::npos);
  t.cells[1][1]->window_se = std::nan("");  // a file from before the window s.e. was stored
  const auto none = analysis::tau_verdicts(t, "0.16");
  EXPECT_TRUE(std::isnan(none[1].k));
  EXPECT_NE(analysis::format_verdicts(none, 64).find("no verdict"), std::string::npos);
  EXPECT_THROW(analysis::tau_verdicts(t, "3.2"), harness::InputError);
}

TEST(TauVerdict, OneSeedGapIsPairedOverTheSameWindows) {
  auto t = table();
  // T = 256, one seed each, four shared windows: the config's τ is worse by 0.10, 0.12, 0.08, 0.10.
  t.cells[0][1]->windows = {{1.3, 1.5, 1.4, 1.4}, "fnv1a64:same"};
  t.cells[1][1]->windows = {{1.4, 1.62, 1.48, 1.5}, "fnv1a64:same"};
  const auto v = analysis::tau_verdicts(t, "0.16");
  ASSERT_EQ(v.size(), 2u);
  // Differences: mean 0.1, squared deviations 0 + 0.0004 + 0.0004 + 0, so
  // s.e. = √(0.0008 / 3 / 4) and k = 0.1 / s.e. = √150, not the unpaired 20.
  EXPECT_NEAR(v[1].gap_se, std::sqrt(0.0008 / 12), 1e-12);
  EXPECT_NEAR(v[1].k, std::sqrt(150.0), 1e-9);
  EXPECT_EQ(v[1].uncertainty, "paired windows");
  EXPECT_EQ(v[0].uncertainty, "seeds");  // two seeds: the seeds' s.e., windows or not
  const std::string text = analysis::format_verdicts(v, 64);
  EXPECT_NE(text.find("worse by 12.2 s.e."), std::string::npos) << text;
  EXPECT_NE(text.find("the gap 0.1000 ± 0.0082 over the same windows, paired"), std::string::npos) << text;
  // Every window shifted alike: a paired s.e. of 0 would make any gap infinitely many s.e., so
  // the windows' s.e. in quadrature instead.
  // (Binary fractions, so that the differences are exactly equal.)
  const auto paired_values = t.cells[0][1]->windows.loss;
  t.cells[0][1]->windows.loss = {1.5, 1.75, 1.25, 1.5};
  t.cells[1][1]->windows.loss = {1.75, 2.0, 1.5, 1.75};
  EXPECT_EQ(analysis::tau_verdicts(t, "0.16")[1].uncertainty, "windows");
  t.cells[0][1]->windows.loss = paired_values;
  t.cells[1][1]->windows.loss = {1.4, 1.62, 1.48, 1.5};
  // Other windows (a fingerprint differs), or none known: no pairing, the windows' s.e. in
  // quadrature as before.
  t.cells[0][1]->windows.fingerprint = "fnv1a64:other";
  EXPECT_EQ(analysis::tau_verdicts(t, "0.16")[1].uncertainty, "windows");
  t.cells[0][1]->windows.fingerprint = "";
  t.cells[1][1]->windows.fingerprint = "";
  EXPECT_EQ(analysis::tau_verdicts(t, "0.16")[1].uncertainty, "windows");
  t.cells[0][1]->windows.fingerprint = t.cells[1][1]->windows.fingerprint = "fnv1a64:same";
  // Different window counts: no pairing.
  t.cells[0][1]->windows.loss.pop_back();
  const auto unpaired = analysis::tau_verdicts(t, "0.16");
  EXPECT_NEAR(unpaired[1].k, 20.0, 1e-9);
  EXPECT_EQ(unpaired[1].uncertainty, "windows");
}
