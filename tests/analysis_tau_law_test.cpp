// The law of the best τ (analysis/tau_law.h): the quadratic fit and the breakdown against numbers
// worked by hand, the bootstrap intervals' coverage on simulated sweeps with a known law, and the
// curves read back from run files.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <random>

#include "analysis/run_set.h"
#include "analysis/tau_law.h"
#include "analysis/tau_law_figure.h"
#include "harness/common/errors.h"
#include "harness/config/schema.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

std::vector<double> grid(double first, int n) {  // first · 2^k
  std::vector<double> t;
  for (int k = 0; k < n; ++k) t.push_back(first * std::pow(2.0, k));
  return t;
}

// A sweep with a known law: at each L the seed-mean loss is a + q·(ln τ − ln τ*(L))², τ*(L) =
// L/200 · (L/64)^0.5 (k = 1.5), plus a seed offset shared by every τ (sd 0.01) and noise (sd σ).
std::vector<analysis::TauLawCurve> simulated(std::mt19937_64& rng, double sigma, int seeds = 3) {
  std::normal_distribution<double> z;
  std::vector<analysis::TauLawCurve> curves;
  for (int64_t L : {64, 128, 256, 512}) {
    analysis::TauLawCurve c;
    c.L = L;
    c.tau = grid(double(L) / 1024, 8);
    for (int s = 0; s < seeds; ++s) c.seeds.push_back(s);
    const double star = double(L) / 200 * std::sqrt(double(L) / 64);
    std::vector<double> offset;
    for (int s = 0; s < seeds; ++s) offset.push_back(0.01 * z(rng));
    auto& y = c.loss[4];
    for (double t : c.tau) {
      y.emplace_back();
      for (int s = 0; s < seeds; ++s) y.back().push_back(1.2 + 0.03 * std::pow(std::log(t / star), 2) + offset[size_t(s)] + sigma * z(rng));
    }
    curves.push_back(c);
  }
  return curves;
}

}  // namespace

TEST(TauLaw, TheQuadraticFindsTheMinimumOfAParabolaInLnTau) {
  const auto tau = grid(0.1, 7);
  std::vector<double> mean;
  for (double t : tau) mean.push_back(1.2 + 0.05 * std::pow(std::log(t / 0.7), 2));
  EXPECT_NEAR(std::exp(analysis::quadratic_log_tau_star(tau, mean)), 0.7, 1e-9);
  // Its lowest point at the grid's ends: beyond the grid; a dip the parabola cannot hold: none.
  EXPECT_EQ(analysis::quadratic_log_tau_star(tau, {1, 2, 3, 4, 5, 6, 7}), -INFINITY);
  EXPECT_EQ(analysis::quadratic_log_tau_star(tau, {7, 6, 5, 4, 3, 2, 1}), INFINITY);
  EXPECT_TRUE(std::isnan(analysis::quadratic_log_tau_star(grid(1, 5), {-1, 0, -1.05, 0, -1})));
}

TEST(TauLaw, TheBreakdownIsInterpolatedInLnTauFromTheLowestRiseUp) {
  // 0.1 is reached between τ = 2 (0.05) and 4 (0.15), halfway in ln τ: 2^1.5.
  EXPECT_NEAR(std::exp(analysis::breakdown_log_tau({1, 2, 4, 8}, {0.0, 0.05, 0.15, 0.5}, 0.1)), std::pow(2, 1.5), 1e-12);
  // Small τ can extrapolate badly too: the scan starts at the lowest rise (τ = 2).
  EXPECT_NEAR(std::exp(analysis::breakdown_log_tau({1, 2, 4, 8}, {0.3, 0.0, 0.05, 0.15}, 0.1)), std::pow(2, 2.5), 1e-12);
  EXPECT_EQ(analysis::breakdown_log_tau({1, 2, 4}, {0.0, 0.02, 0.05}, 0.1), INFINITY);
  EXPECT_EQ(analysis::breakdown_log_tau({1, 2, 4}, {0.2, 0.3, 0.4}, 0.1), -INFINITY);
}

TEST(TauLaw, IntervalsCoverTheTrueBestTauAndSlopeAtTheirLevel) {
  std::mt19937_64 rng(7);
  analysis::TauLawOptions o;
  o.replicates = 400;
  const int simulations = 200;
  int star_covered = 0, star_total = 0, slope_covered = 0;
  double width_noisy = 0, width_quiet = 0;
  for (int i = 0; i < simulations; ++i) {
    o.seed = uint64_t(i + 1);
    const auto law = analysis::tau_law(simulated(rng, 0.004), o);
    for (const auto& r : law.rows) {
      const double star = double(r.L) / 200 * std::sqrt(double(r.L) / 64);
      star_covered += r.tau_star.lo <= star && star <= r.tau_star.hi;
      ++star_total;
      width_noisy += std::log(r.tau_star.hi / r.tau_star.lo);
    }
    ASSERT_EQ(law.slopes.size(), 1u);
    slope_covered += law.slopes[0].lo <= 1.5 && 1.5 <= law.slopes[0].hi;
    for (const auto& r : analysis::tau_law(simulated(rng, 0.001), o).rows) width_quiet += std::log(r.tau_star.hi / r.tau_star.lo);
  }
  // Nominal 90%; 200 simulations: a binomial s.e. of about 2%.
  EXPECT_GE(double(star_covered) / star_total, 0.85) << star_covered << " of " << star_total;
  EXPECT_LE(double(star_covered) / star_total, 0.97) << star_covered << " of " << star_total;
  EXPECT_GE(double(slope_covered) / simulations, 0.85) << slope_covered;
  EXPECT_LE(double(slope_covered) / simulations, 0.98) << slope_covered;
  // Four times less noise: intervals about four times narrower in ln τ.
  EXPECT_LT(width_quiet, 0.4 * width_noisy);
}

TEST(TauLaw, TheLawIsSaidInTheWordsItsIntervalAllows) {
  std::mt19937_64 rng(3);
  const auto law = analysis::tau_law(simulated(rng, 0.001));
  ASSERT_EQ(law.slopes.size(), 1u);
  EXPECT_NEAR(law.slopes[0].k, 1.5, 0.15);
  const std::string text = analysis::format_tau_law(law);
  EXPECT_NE(text.find("τ* grows faster than L (k = 1 excluded)"), std::string::npos) << text;
  // Noise as large as the curvature's effect: nothing resolvable.
  const auto noisy = analysis::format_tau_law(analysis::tau_law(simulated(rng, 0.05)));
  EXPECT_TRUE(noisy.find("no trend resolvable") != std::string::npos || noisy.find("beyond the grid") != std::string::npos)
      << noisy;
}

TEST(TauLaw, CurvesAreReadFromRunFilesPerTrainingContextTauAndSeed) {
  test_support::TempDir tmp;
  // L = 64 and 128, τ = 1, 2, 4, seeds 0 and 1: loss at T = kL is k + τ/10 + seed/100.
  for (int64_t L : {64, 128})
    for (double tau : {1.0, 2.0, 4.0})
      for (int seed : {0, 1}) {
        const auto c = harness::config::load_run_config_text(
            fmt::format("attention: {{method: si+p-rope, tau: {}}}\ntrain: {{context: {}, seed: {}}}\n", tau, L, seed), "x.yaml");
        results::RunRecord r;
        r.config["canonical"] = harness::config::canonical_text(c.config, false);
        r.config["hash"] = harness::config::config_hash(c.config);
        r.state = results::RunState::kDone;
        for (int64_t k : {1, 4, 16}) {
          auto& rows = r.eval[k * L];
          rows.step = {100};
          rows.loss = {0};
          const double loss = double(k) + tau / 10 + seed / 100.0;
          rows.window_loss = {loss - 0.5, loss + 0.5};
          rows.window_fingerprint = "fnv1a64:test";
        }
        const auto dir = tmp.path / fmt::format("L{}-t{}-s{}", L, tau, seed);
        fs::create_directories(dir);
        results::publish(r, (dir / "run.h5").string());
      }
  const auto curves = analysis::tau_law_curves(analysis::load_run_set(tmp.path.string())).curves;
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[1].L, 128);
  EXPECT_EQ(curves[1].tau, (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(curves[1].seeds, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(curves[1].loss.size(), 3u);
  EXPECT_NEAR(curves[1].loss.at(16)[2][1], 16 + 0.4 + 0.01, 1e-12);
  // A τ short of a seed (a sweep still running) is left out and said so; an L left with fewer than 3
  // τ is left out; none left is an error.
  fs::remove_all(tmp.path / "L64-t2-s1");
  const auto partial = analysis::tau_law_curves(analysis::load_run_set(tmp.path.string()));
  ASSERT_EQ(partial.curves.size(), 1u);
  EXPECT_EQ(partial.curves[0].L, 128);
  ASSERT_EQ(partial.skipped.size(), 2u);
  EXPECT_EQ(partial.skipped[0], "L = 64: τ = 2 left out (1 of 2 seeds done)");
  EXPECT_EQ(partial.skipped[1], "L = 64 left out: 2 τ with all 2 seeds done (the law needs 3 τ and 2 seeds)");
  fs::remove_all(tmp.path / "L128-t4-s0");
  EXPECT_THROW(analysis::tau_law_curves(analysis::load_run_set(tmp.path.string())), harness::InputError);
}

TEST(TauLaw, FiguresHoldTheFitsAndTheLossesTheyDraw) {
  std::mt19937_64 rng(5);
  const auto curves = simulated(rng, 0.002);
  const auto law = analysis::tau_law(curves);
  test_support::TempDir tmp;
  const auto result = analysis::write_tau_law_figures(tmp.path.string(), curves, law);
  ASSERT_EQ(result.figures.size(), 2u);  // tau_law_loss_4L, tau_law_star
  for (const auto& f : result.figures) {
    EXPECT_FALSE(f.render.failed) << f.render.notice;
    for (const auto& image : f.render.images) EXPECT_GT(fs::file_size(image), 1000u) << image;
  }
  // tau_law_star.csv: L, τ*, lo, hi, open — τ* as fitted, the interval inside the grid.
  std::ifstream in(tmp.path / "tau_law_star.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "L,4L_tau_star,4L_lo,4L_hi,4L_open");
  for (const auto& r : law.rows) {
    ASSERT_TRUE(std::getline(in, line));
    double L, star, lo, hi, open;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%lf,%lf,%lf", &L, &star, &lo, &hi, &open), 5) << line;
    EXPECT_EQ(L, double(r.L));
    EXPECT_NEAR(star, r.tau_star.value, 1e-6 * star);
    EXPECT_LE(lo, star);
    EXPECT_GE(hi, star);
  }
}
