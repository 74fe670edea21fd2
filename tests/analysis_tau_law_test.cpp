// The law of the best τ (analysis/tau/law.h): the 3-point fit, the breakdown and the slope's bounds
// against numbers worked by hand or by brute force, the seed bootstrap against its exact discrete
// distribution, censored replicates kept at their bounds, the words of the law, and the curves read
// back from run files (/analysis before /eval) and from the CSV `tau law` writes. Coverage on studies
// simulated from the measured curves: analysis_tau_law_coverage_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "analysis/run_set.h"
#include "analysis/tau/law.h"
#include "analysis/tau/law_figure.h"
#include "common/errors.h"
#include "harness/config/schema.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;
using analysis::TauStarOutcome;

namespace {

std::vector<double> grid(double first, int n) {  // first · 2^k
  std::vector<double> t;
  for (int k = 0; k < n; ++k) t.push_back(first * std::pow(2.0, k));
  return t;
}

double default_star(int64_t L) { return double(L) / 200 * std::sqrt(double(L) / 64); }

// Four L with seed means 1.2 + 0.03·(ln τ − ln τ*(L))², by default τ*(L) = L/200 · (L/64)^0.5
// (k = 1.5), a seed offset shared by every τ (sd 0.01) and noise (sd σ), at 1L, 4L and 16L (with a
// breakdown at 16L above L/32): a symmetric test bed for the words and the files.
std::vector<analysis::TauLawCurve> simulated(std::mt19937_64& rng, double sigma, int seeds = 4,
                                             double (*star_of)(int64_t) = default_star) {
  std::normal_distribution<double> z;
  std::vector<analysis::TauLawCurve> curves;
  for (int64_t L : {64, 128, 256, 512}) {
    analysis::TauLawCurve c;
    c.L = L;
    c.tau = grid(double(L) / 1024, 8);
    for (int s = 0; s < seeds; ++s) c.seeds.push_back(s);
    const double star = star_of(L);
    std::vector<double> offset;
    for (int s = 0; s < seeds; ++s) offset.push_back(0.01 * z(rng));
    for (int64_t factor : {1, 4, 16}) {
      auto& y = c.loss[factor];
      for (double t : c.tau) {
        y.emplace_back();
        for (int s = 0; s < seeds; ++s)
          y.back().push_back(1.2 + 0.03 * std::pow(std::log(t / star), 2) + offset[size_t(s)] + sigma * z(rng) +
                             (factor == 16 ? 0.2 * std::max(0.0, std::log2(t / (double(L) / 32))) : 0.0));
      }
    }
    curves.push_back(c);
  }
  return curves;
}

// L = 256, τ = 0.5 · 2^k (k < 7), 4L only: two seeds whose curves are exact parabolas in ln τ with
// vertices va and vb (and offsets 2.0, 2.3).
analysis::TauLawCurve two_seed_curve(double va, double vb) {
  analysis::TauLawCurve c;
  c.L = 256;
  c.tau = grid(0.5, 7);
  c.seeds = {0, 1};
  for (double t : c.tau)
    c.loss[4].push_back({2.0 + 0.04 * std::pow(std::log(t) - va, 2), 2.3 + 0.04 * std::pow(std::log(t) - vb, 2)});
  return c;
}

// The least-squares slope of y on x, the textbook way.
double naive_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  double sx = 0, sy = 0, sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i], sxy += x[i] * y[i], sxx += x[i] * x[i];
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

}  // namespace

TEST(TauLaw, TheFitIsTheParabolaThroughTheBestTauAndItsNeighbours) {
  // An exact parabola in ln τ: its vertex, from any three points around it.
  const auto tau = grid(0.1, 7);
  std::vector<double> mean;
  for (double t : tau) mean.push_back(1.2 + 0.05 * std::pow(std::log(t / 0.7), 2));
  const auto exact = analysis::fit_tau_star(tau, mean);
  EXPECT_EQ(exact.outcome, TauStarOutcome::kLocated);
  EXPECT_NEAR(std::exp(exact.log_tau), 0.7, 1e-9);
  EXPECT_EQ(exact.first, exact.best - 1);
  EXPECT_EQ(exact.last, exact.best + 1);
  // The measured L = 256 curve at 4L (docs/results/tau-law/tau_law_loss_4L.csv, loss above the best):
  // the vertex of the three around τ = 4, h/2·(y₋ − y₊)/(y₋ − 2y₀ + y₊) on the evenly spaced ln τ, and
  // the breakdown wall at τ = 16 (+0.318) does not move it.
  std::vector<double> measured = {0.0227, 0.0212, 0.0121, 0.0088, 0, 0.0049, 0.318, 0.877};
  const auto tau256 = grid(0.25, 8);
  const double h = std::log(2.0), by_hand = 4 * std::exp(h / 2 * (0.0088 - 0.0049) / (0.0088 + 0.0049));
  EXPECT_NEAR(std::exp(analysis::fit_tau_star(tau256, measured).log_tau), by_hand, 1e-9);
  EXPECT_NEAR(by_hand, 4.41, 0.01);
  measured[6] = 0.05;
  EXPECT_NEAR(std::exp(analysis::fit_tau_star(tau256, measured).log_tau), by_hand, 1e-9);
}

TEST(TauLaw, AFitThatDoesNotLocateTauStarIsCensoredToWhereOneMinimumCanBe) {
  const auto tau = grid(1, 5);
  const auto low = analysis::fit_tau_star(tau, {1, 2, 3, 4, 5});
  EXPECT_EQ(low.outcome, TauStarOutcome::kLowEdge);
  EXPECT_EQ(low.log_lo, -INFINITY);
  EXPECT_DOUBLE_EQ(low.log_hi, std::log(2.0));  // below the grid's second τ
  const auto high = analysis::fit_tau_star(tau, {5, 4, 3, 2, 1});
  EXPECT_EQ(high.outcome, TauStarOutcome::kHighEdge);
  EXPECT_DOUBLE_EQ(high.log_lo, std::log(8.0));
  EXPECT_EQ(high.log_hi, INFINITY);
  // A tie takes the first lowest: the parabola still opens upward, its vertex halfway.
  const auto tie = analysis::fit_tau_star(tau, {2, 1, 1, 3, 4});
  EXPECT_EQ(tie.outcome, TauStarOutcome::kLocated);
  EXPECT_NEAR(tie.log_tau, std::log(2.0) + std::log(2.0) / 2, 1e-12);
  // On a √2 grid five points reach an octave; their quadratic may open downward, or put its vertex
  // beyond them: censored between the argmin's neighbours.
  std::vector<double> fine;
  for (int k = 0; k < 7; ++k) fine.push_back(std::pow(2.0, k / 2.0));
  const auto down = analysis::fit_tau_star(fine, {5, 3, 1.05, 1, 1.05, 3, 5});
  EXPECT_EQ(down.first, 1u);
  EXPECT_EQ(down.last, 5u);
  EXPECT_EQ(down.outcome, TauStarOutcome::kLocated);  // a 5-point parabola, by symmetry at the middle
  EXPECT_NEAR(down.log_tau, std::log(fine[3]), 1e-12);
  const auto flat = analysis::fit_tau_star(fine, {5, 1.0, 1.05, 0.99, 1.05, 1.0, 5});  // a W: opens downward
  EXPECT_EQ(flat.outcome, TauStarOutcome::kDownward);
  EXPECT_DOUBLE_EQ(flat.log_lo, std::log(fine[2]));
  EXPECT_DOUBLE_EQ(flat.log_hi, std::log(fine[4]));
  // A step up right of the best τ: the least-squares vertex lands left of the fitted points (−2.07
  // steps, worked by hand on the normal equations).
  const auto beyond = analysis::fit_tau_star(fine, {5, 1.0, 1.0, 0.99, 3, 3.01, 5});
  EXPECT_EQ(beyond.first, 1u);
  EXPECT_EQ(beyond.outcome, TauStarOutcome::kOutside) << std::exp(beyond.log_tau);
}

TEST(TauLaw, TheBreakdownIsInterpolatedInLnTauFromTheLowestRiseUp) {
  // 0.1 is reached between τ = 2 (0.05) and 4 (0.15), halfway in ln τ: 2^1.5.
  EXPECT_NEAR(std::exp(analysis::breakdown_log_tau({1, 2, 4, 8}, {0.0, 0.05, 0.15, 0.5}, 0.1)), std::pow(2, 1.5), 1e-12);
  // Small τ can extrapolate badly too: the scan starts at the lowest rise (τ = 2).
  EXPECT_NEAR(std::exp(analysis::breakdown_log_tau({1, 2, 4, 8}, {0.3, 0.0, 0.05, 0.15}, 0.1)), std::pow(2, 2.5), 1e-12);
  EXPECT_EQ(analysis::breakdown_log_tau({1, 2, 4}, {0.0, 0.02, 0.05}, 0.1), INFINITY);
  EXPECT_EQ(analysis::breakdown_log_tau({1, 2, 4}, {0.2, 0.3, 0.4}, 0.1), -INFINITY);
}

// A breakdown the grid never reaches, in any replicate, is said so — not as an interval "≥ ∞".
TEST(TauLaw, ABreakdownNeverReachedIsSaidInWords) {
  std::mt19937_64 rng(5);
  auto curves = simulated(rng, 0.001);
  for (auto& c : curves) c.loss[16] = c.loss[1];  // the 16L loss never rises above the 1L loss
  analysis::TauLawOptions o;
  o.replicates = 200;
  const std::string text = analysis::format_tau_law(analysis::tau_law(curves, o));
  EXPECT_NE(text.find("beyond the grid's largest τ in every replicate"), std::string::npos) << text;
  EXPECT_EQ(text.find("≥ ∞"), std::string::npos) << text;
}

TEST(TauLaw, ACensoredTauStarBoundsTheSlopeOnTheSideItsLSets) {
  const std::vector<double> x = {std::log(64.0), std::log(128.0), std::log(256.0), std::log(512.0)};
  const std::vector<double> y = {-1.0, -0.2, 0.9, 1.5};
  const auto [k, k_again] = analysis::slope_bounds(x, y, y);
  EXPECT_NEAR(k, naive_slope(x, y), 1e-12);
  EXPECT_EQ(k, k_again);
  // Finite boxes: the bounds are the extreme slopes over the boxes' corners (brute force).
  const std::vector<double> lo = {-1.5, -0.2, 0.5, 1.5}, hi = {-0.5, 0.1, 0.9, 2.5};
  double least = INFINITY, most = -INFINITY;
  for (int corner = 0; corner < 16; ++corner) {
    std::vector<double> yc;
    for (int i = 0; i < 4; ++i) yc.push_back(corner >> i & 1 ? hi[size_t(i)] : lo[size_t(i)]);
    least = std::min(least, naive_slope(x, yc)), most = std::max(most, naive_slope(x, yc));
  }
  const auto [at_least, at_most] = analysis::slope_bounds(x, lo, hi);
  EXPECT_NEAR(at_least, least, 1e-12);
  EXPECT_NEAR(at_most, most, 1e-12);
  // τ* ≤ τ_1 at the smallest L: k is bounded below (by the slope with τ* = τ_1 there), not above.
  auto below = analysis::slope_bounds(x, {-INFINITY, -0.2, 0.9, 1.5}, {-1.0, -0.2, 0.9, 1.5});
  EXPECT_NEAR(below.first, k, 1e-12);
  EXPECT_EQ(below.second, INFINITY);
  // Beyond the grid's top at the largest L: the same side; at the smallest L above it: the other.
  EXPECT_EQ(analysis::slope_bounds(x, {-1.0, -0.2, 0.9, 1.5}, {-1.0, -0.2, 0.9, INFINITY}).second, INFINITY);
  EXPECT_EQ(analysis::slope_bounds(x, {-1.0, -0.2, 0.9, 1.5}, {INFINITY, -0.2, 0.9, 1.5}).first, -INFINITY);
  // Two L: k = (y₁ − y₀)/(x₁ − x₀); τ* ≤ e^0.5 at the smaller L gives k ≥ (1.2 − 0.5)/ln 2.
  const auto two = analysis::slope_bounds({std::log(64.0), std::log(128.0)}, {-INFINITY, 1.2}, {0.5, 1.2});
  EXPECT_NEAR(two.first, 0.7 / std::log(2.0), 1e-12);
  EXPECT_EQ(two.second, INFINITY);
  // The middle of three L does not move the slope, censored or not.
  const std::vector<double> x3 = {std::log(64.0), std::log(128.0), std::log(256.0)};
  const auto middle = analysis::slope_bounds(x3, {0.0, -INFINITY, 1.0}, {0.0, INFINITY, 1.0});
  EXPECT_NEAR(middle.first, 1.0 / std::log(4.0), 1e-12);
  EXPECT_NEAR(middle.second, 1.0 / std::log(4.0), 1e-12);
}

TEST(TauLaw, TheBootstrapRedrawsWholeSeedCurvesAndScalesTheirSpread) {
  // Two seeds, exact parabolas in u = ln τ with vertices v0, v1 and their own offsets. A replicate
  // draws {0,0}, {1,1} (1/4 each) or a mix (1/2): m + √2·(draw mean − m) has its vertex at
  // v̄ ± (v0 − v1)/√2 or v̄. The 90% interval's ends are the two single-seed draws.
  const double v0 = std::log(3.0), v1 = std::log(5.0), vbar = (v0 + v1) / 2;
  const auto c = two_seed_curve(v0, v1);
  analysis::TauLawOptions o;
  o.replicates = 2000;
  const auto law = analysis::tau_law({c}, o);
  ASSERT_EQ(law.rows.size(), 1u);
  const auto& star = law.rows[0].tau_star;
  EXPECT_NEAR(std::log(star.value), vbar, 1e-9);
  EXPECT_NEAR(std::log(star.lo), vbar - (v1 - v0) / std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(std::log(star.hi), vbar + (v1 - v0) / std::sqrt(2.0), 1e-9);
  EXPECT_EQ(star.censored.any, 0);
  EXPECT_EQ(law.slopes[0].note, "one training context: no slope");
}

TEST(TauLaw, CensoredReplicatesStayInTheIntervalAtTheirBounds) {
  // τ* at L = 512 sits by the grid's top (40, grid 0.5 … 64): some replicates' best τ is the largest,
  // and they open both its interval and the slope's upper end.
  std::mt19937_64 rng(9);
  const auto curves = simulated(rng, 0.003, 4, [](int64_t L) { return L == 512 ? 40.0 : default_star(L); });
  analysis::TauLawOptions o;
  o.replicates = 1000;
  const auto law = analysis::tau_law(curves, o);
  const auto& top = law.rows[10].tau_star;  // L = 512, 4L
  ASSERT_EQ(law.rows[10].L, 512);
  ASSERT_EQ(law.rows[10].factor, 4);
  EXPECT_GT(top.censored.high_edge, 0.05);
  EXPECT_LT(top.censored.high_edge, 0.95);
  EXPECT_EQ(top.censored.any, top.censored.high_edge);
  EXPECT_EQ(top.hi, INFINITY);
  EXPECT_GT(top.lo, 0);
  const auto& slope = law.slopes[1];
  ASSERT_EQ(slope.factor, 4);
  EXPECT_EQ(slope.hi, INFINITY);  // the largest L's τ* has w > 0: unbounded above, the same side
  EXPECT_TRUE(std::isfinite(slope.lo));
  EXPECT_DOUBLE_EQ(slope.censored.high_edge, top.censored.high_edge);  // only L = 512 censors
  EXPECT_NE(analysis::format_tau_law(law).find(fmt::format("k ≥ {:.2f}, upper end not bounded by this grid", slope.lo)),
            std::string::npos)
      << analysis::format_tau_law(law);
}

TEST(TauLaw, TheLawIsSaidInTheWordsItsIntervalAllows) {
  analysis::TauLaw law;
  law.seeds = 6;
  law.from_eval = 10;
  law.from_analysis = 86;
  auto slope = [](double k, double lo, double hi) {
    analysis::TauLawSlope s;
    s.factor = 4, s.k = s.at_least = s.at_most = k, s.lo = lo, s.hi = hi;
    return s;
  };
  law.slopes = {slope(1.5, 1.2, 2.0), slope(1.4, 0.9, INFINITY), slope(0.5, -INFINITY, 2.0), slope(0.5, 0.2, 0.8),
                slope(-0.5, -INFINITY, -0.1)};
  law.slopes[1].censored = {0.31, 0, 0.12, 0, 0.43};
  analysis::TauLawSlope unlocated = slope(NAN, 2.04, INFINITY);
  unlocated.at_least = 2.04, unlocated.at_most = INFINITY, unlocated.note = "τ* not located at L = 128";
  law.slopes.push_back(unlocated);
  analysis::TauLawRow row{128, 16, 0.125, {}};
  row.tau_star.value = NAN, row.tau_star.at_least = 0, row.tau_star.at_most = 0.25, row.tau_star.lo = 0;
  row.tau_star.hi = 1.22, row.tau_star.censored = {0.3, 0, 0, 0.01, 0.31}, row.tau_star.note = "the best τ is the grid's smallest";
  law.rows.push_back(row);
  const std::string text = analysis::format_tau_law(law);
  EXPECT_NE(text.find("| 128 | 16L | 0.125 | < 0.25 (the best τ is the grid's smallest) | ≤ 1.22 (lower end not bounded "
                      "by the grid) | 31% (low edge 30%, vertex outside 1%) |"), std::string::npos) << text;
  EXPECT_NE(text.find("k not located (τ* not located at L = 128; between 2.04 and ∞); 90% interval k ≥ 2.04, upper end "
                      "not bounded by this grid — τ* grows faster than L (k = 1 excluded)"), std::string::npos) << text;
  EXPECT_NE(text.find("k = 1.50; 90% interval [1.20, 2.00] — τ* grows faster than L (k = 1 excluded)"), std::string::npos) << text;
  EXPECT_NE(text.find("k = 1.40; 90% interval k ≥ 0.90, upper end not bounded by this grid — τ* grows with L (k = 0 "
                      "excluded); k = 1 is not excluded. τ* not located at some L in 43% of replicates (best τ at the "
                      "grid's low edge 31%, at its high edge 0%, quadratic opening downward 12%, vertex outside the "
                      "fitted points 0%; a replicate may count under several): kept at their bounds, the interval "
                      "is over all replicates"),
            std::string::npos) << text;
  EXPECT_NE(text.find("k ≤ 2.00, lower end not bounded by this grid — no trend resolvable"), std::string::npos) << text;
  EXPECT_NE(text.find("[0.20, 0.80] — τ* grows with L, slower than L"), std::string::npos) << text;
  EXPECT_NE(text.find("— τ* shrinks as L grows"), std::string::npos) << text;
  EXPECT_NE(text.find("losses: 86 from /analysis (`harness analyse`), 10 from /eval"), std::string::npos) << text;
  EXPECT_EQ(text.find("warning"), std::string::npos) << text;
  law.seeds = 3;
  EXPECT_NE(analysis::format_tau_law(law).find("warning: 3 seeds: the seed bootstrap's intervals are too narrow"),
            std::string::npos);
}

// A done run of si+p-rope at (τ, L, seed) whose /eval loss at T = kL is loss_of(k), into dir/run.h5;
// `more_yaml` adds keys to its train section (e.g. "batch_size: 8").
template <class LossOf>
results::RunRecord write_run(const fs::path& dir, double tau, int64_t L, int seed, LossOf loss_of,
                             const std::string& more_train = "") {
  const auto c = harness::config::load_run_config_text(
      fmt::format("attention: {{method: si+p-rope, tau: {}}}\ntrain: {{context: {}, seed: {}{}}}\n", tau, L, seed,
                  more_train.empty() ? "" : ", " + more_train),
      "x.yaml");
  results::RunRecord r;
  r.config["canonical"] = harness::config::canonical_text(c.config, false);
  r.config["hash"] = harness::config::config_hash(c.config);
  r.state = results::RunState::kDone;
  for (int64_t k : {1, 4, 16}) {
    auto& rows = r.eval[k * L];
    rows.step = {100};
    rows.loss = {0};
    const double loss = loss_of(k);
    rows.window_loss = {loss - 0.5, loss + 0.5};
    rows.window_fingerprint = "fnv1a64:test";
  }
  fs::create_directories(dir);
  results::publish(r, (dir / "run.h5").string());
  return r;
}

TEST(TauLaw, CurvesAreReadFromRunFilesAnalysisBeforeEval) {
  test_support::TempDir tmp;
  // L = 64 and 128, τ = 1, 2, 4, seeds 0 and 1: loss at T = kL is k + τ/10 + seed/100 in /eval; the
  // runs of L = 128 also have /analysis at 4L, 1 higher.
  for (int64_t L : {64, 128})
    for (double tau : {1.0, 2.0, 4.0})
      for (int seed : {0, 1}) {
        const auto dir = tmp.path / fmt::format("L{}-t{}-s{}", L, tau, seed);
        auto r = write_run(dir, tau, L, seed, [&](int64_t k) { return double(k) + tau / 10 + seed / 100.0; });
        if (L == 128) {
          r.analysis[4 * L].arrays["loss"] = {{1}, {5 + tau / 10 + seed / 100.0}, "nats/token"};
          results::publish(r, (dir / "run.h5").string());
        }
      }
  const auto curves = analysis::tau_law_curves(analysis::load_run_set(tmp.path.string())).curves;
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[1].L, 128);
  EXPECT_EQ(curves[1].tau, (std::vector<double>{1, 2, 4}));
  EXPECT_EQ(curves[1].seeds, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(curves[1].loss.size(), 3u);
  EXPECT_NEAR(curves[1].loss.at(16)[2][1], 16 + 0.4 + 0.01, 1e-12);
  EXPECT_NEAR(curves[1].loss.at(4)[2][1], 5 + 0.4 + 0.01, 1e-12);
  EXPECT_EQ(curves[1].source.at(4)[2][1], analysis::LossSource::kAnalysis);
  EXPECT_EQ(curves[1].source.at(16)[2][1], analysis::LossSource::kEval);
  analysis::TauLawOptions o;
  o.replicates = 100;
  const auto law = analysis::tau_law(curves, o);
  EXPECT_EQ(law.from_analysis, 6);  // 3 τ × 2 seeds at L = 128, 4L
  EXPECT_EQ(law.from_eval, 2 * 3 * 3 * 2 - 6);
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

TEST(TauLaw, RunsThatDifferInAnotherKeyAreRefusedUnlessSplitByIt) {
  // L = 64 at batch 8 and 32 (τ = 1, 2, 4, seeds 0 and 1; the minimum at τ = 2): one (L, τ, seed)
  // twice. The law refuses to mix them into one curve and names the key; split by it, each batch
  // is its own curve, with its own losses (batch 32's are 1 lower).
  test_support::TempDir tmp;
  for (int batch : {8, 32})
    for (double tau : {1.0, 2.0, 4.0})
      for (int seed : {0, 1})
        write_run(tmp.path / fmt::format("b{}-t{}-s{}", batch, tau, seed), tau, 64, seed,
                  [&](int64_t k) { return double(k) + 0.1 * std::pow(std::log(tau / 2), 2) + seed / 100.0 - (batch == 32 ? 1 : 0); },
                  fmt::format("batch_size: {}", batch));
  const auto set = analysis::load_run_set(tmp.path.string());
  try {
    analysis::tau_law_curves(set);
    ADD_FAILURE() << "runs differing in the batch were mixed into one curve";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("differ in train.batch_size = 8 and 32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--by KEY"), std::string::npos) << e.what();
  }
  const auto parts = analysis::split_run_set(set, "train.batch_size");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].first, "8");  // in the runs' order: numbers by value
  for (const auto& [batch, part] : parts) {
    EXPECT_EQ(part.runs.size(), 6u);
    const auto curves = analysis::tau_law_curves(part).curves;
    ASSERT_EQ(curves.size(), 1u);
    EXPECT_NEAR(curves[0].loss.at(4)[2][1], 4 + 0.1 * std::pow(std::log(2.0), 2) + 0.01 - (batch == "32" ? 1 : 0), 1e-12);
  }
  // The command: refused without --by (exit 2), each group's law and their ratio with it.
  const auto log = tmp.path / "log.txt";
  auto harness = [&](const std::string& args) {
    const int status = std::system(fmt::format("{} tau law '{}' --replicates 200 {} > '{}' 2>&1", HARNESS_BINARY,
                                               tmp.path.string(), args, log.string()).c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(harness(""), 2) << test_support::read_text(log);
  ASSERT_EQ(harness(fmt::format("--by train.batch_size --out '{}'", (tmp.path / "law").string())), 0)
      << test_support::read_text(log);
  const std::string out = test_support::read_text(log);
  EXPECT_NE(out.find("## train.batch_size=8"), std::string::npos) << out;
  EXPECT_NE(out.find("## τ* between the values of train.batch_size"), std::string::npos) << out;
  EXPECT_NE(out.find("| 64 | 4L | train.batch_size=8 | train.batch_size=32 | 1.00 |"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(tmp.path / "law" / "train.batch_size=32" / "tau-law-curves.csv"));
  // The groups' curves files, given in the same order, give the same ratios without the runs.
  const std::string ratio_row = out.substr(out.find("| 64 | 4L | train.batch_size=8"));
  const int status = std::system(fmt::format("{} tau law --replicates 200 --curves '{}' --curves '{}' > '{}' 2>&1",
                                             HARNESS_BINARY, (tmp.path / "law/train.batch_size=8/tau-law-curves.csv").string(),
                                             (tmp.path / "law/train.batch_size=32/tau-law-curves.csv").string(), log.string())
                                     .c_str());
  ASSERT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << test_support::read_text(log);
  const std::string again = test_support::read_text(log);
  EXPECT_EQ(again.substr(again.find("| 64 | 4L | train.batch_size=8")).substr(0, ratio_row.find('\n')),
            ratio_row.substr(0, ratio_row.find('\n')));
  EXPECT_NE(test_support::read_text(tmp.path / "law" / "tau-star-ratios.csv").find("\"train.batch_size=8\",\"train.batch_size=32\""),
            std::string::npos);
  try {
    analysis::split_run_set(set, "train.context");
    ADD_FAILURE() << "split by a key that does not vary";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'train.context' does not vary between these runs; keys that vary: "),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("train.batch_size"), std::string::npos) << e.what();
  }
}

TEST(TauLaw, TwoGroupsTauStarAreComparedAsARatioOverIndependentBootstraps) {
  // Group a: the two-seed curves of TheBootstrapRedrawsWholeSeedCurvesAndScalesTheirSpread, whose
  // replicates put ln τ* at v̄ or v̄ ± (v1 − v0)/√2 exactly; group b: two identical seeds with the
  // vertex at w, so every replicate of b is w. The ratio's interval is then exp(a's interval − w).
  const double v0 = std::log(3.0), v1 = std::log(5.0), vbar = (v0 + v1) / 2, spread = (v1 - v0) / std::sqrt(2.0);
  analysis::TauLawOptions o;
  o.replicates = 2000;
  const auto a = analysis::tau_law({two_seed_curve(v0, v1)}, o);
  for (const double w : {std::log(1.5), std::log(3.9)}) {
    auto ob = o;
    ob.seed = 2;
    const auto b = analysis::tau_law({two_seed_curve(w, w)}, ob);
    const auto r = analysis::compare_tau_star(a, "batch=8", b, "batch=32");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].L, 256);
    EXPECT_EQ(r[0].factor, 4);
    EXPECT_NEAR(std::log(r[0].ratio), vbar - w, 1e-9);
    EXPECT_NEAR(std::log(r[0].lo), vbar - spread - w, 1e-9);
    EXPECT_NEAR(std::log(r[0].hi), vbar + spread - w, 1e-9);
    const std::string text = analysis::format_tau_star_ratios(r, o.level);
    // w = ln 1.5: the interval [e^(v̄−spread)/1.5, …] = [2.09, …] excludes 1; w = ln 3.9 holds 1.
    const bool resolved = vbar - spread - w > 0;
    EXPECT_EQ(resolved, w < std::log(2.0));
    EXPECT_NE(text.find(resolved ? "τ* larger under batch=8 (1 excluded)" : "not resolved (1 inside the interval)"),
              std::string::npos) << text;
  }
  // A group whose best τ is the grid's smallest: its τ* is only bounded above, so the ratio a / b
  // is bounded below only (b's τ* may be anywhere under 0.5 · 2 = 1).
  auto ob = o;
  ob.seed = 3;
  const auto edge = analysis::tau_law({two_seed_curve(std::log(0.1), std::log(0.1))}, ob);
  const auto r = analysis::compare_tau_star(a, "a", edge, "b");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(std::isnan(r[0].ratio));
  EXPECT_EQ(r[0].hi, INFINITY);
  EXPECT_NEAR(std::log(r[0].lo), vbar - spread - std::log(1.0), 1e-9);
  EXPECT_NE(analysis::format_tau_star_ratios(r, o.level).find(fmt::format("≥ {:.2f}", r[0].lo)), std::string::npos);
  EXPECT_EQ(analysis::tau_star_ratios_csv(r).substr(0, 47), "L,factor,a,b,ratio,ratio_at_least,ratio_at_most");
}

TEST(TauLaw, TheCurvesCsvReadsBackToTheSameLaw) {
  std::mt19937_64 rng(4);
  auto curves = simulated(rng, 0.002, 3);
  curves[1].source[4] = std::vector<std::vector<analysis::LossSource>>(8, {analysis::LossSource::kAnalysis,
                                                                          analysis::LossSource::kAnalysis,
                                                                          analysis::LossSource::kEval});
  const std::string csv = analysis::tau_law_curves_csv(curves);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "L,factor,tau,seed,loss,source");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4 * 3 * 8 * 3);
  const auto back = analysis::parse_tau_law_curves_csv(csv, "curves.csv");
  ASSERT_EQ(back.curves.size(), curves.size());
  EXPECT_TRUE(back.skipped.empty());
  for (size_t i = 0; i < curves.size(); ++i) {
    EXPECT_EQ(back.curves[i].L, curves[i].L);
    EXPECT_EQ(back.curves[i].tau, curves[i].tau);
    EXPECT_EQ(back.curves[i].seeds, curves[i].seeds);
    EXPECT_EQ(back.curves[i].loss, curves[i].loss);  // exact: shortest round-trip digits
  }
  EXPECT_EQ(back.curves[1].source.at(4)[5][1], analysis::LossSource::kAnalysis);
  EXPECT_EQ(back.curves[1].source.at(4)[5][2], analysis::LossSource::kEval);
  analysis::TauLawOptions o;
  o.replicates = 200;
  const std::string text = analysis::format_tau_law(analysis::tau_law(curves, o));
  EXPECT_EQ(analysis::format_tau_law(analysis::tau_law(back.curves, o)), text);
  EXPECT_NE(text.find("warning: L = 128 at 4L mixes /analysis and /eval losses"), std::string::npos) << text;
  EXPECT_NE(text.find("losses: 16 from /analysis"), std::string::npos) << text;
  // Malformed files are user errors naming the file and line.
  auto error_of = [](const std::string& text) {
    try {
      analysis::parse_tau_law_curves_csv(text, "c.csv");
    } catch (const harness::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string header = "L,factor,tau,seed,loss,source\n";
  EXPECT_NE(error_of("L,tau\n").find("c.csv:1: expected the header"), std::string::npos);
  EXPECT_NE(error_of(header + "64,4,1,0,2.5,train\n").find("c.csv:2: source 'train': expected eval or analysis"),
            std::string::npos);
  EXPECT_NE(error_of(header + "64,4,x,0,2.5,eval\n").find("c.csv:2: tau 'x' is not a number"), std::string::npos);
  EXPECT_NE(error_of(header + "64,4,1,0,2.5,eval\n64,4,1,0,2.6,eval\n").find("c.csv:3: a second loss"), std::string::npos);
  EXPECT_NE(error_of(header + "64,4,1,0,2.5,eval\n").find("c.csv: no training context has 3 τ"), std::string::npos);
}

TEST(TauLaw, TheCommandWritesTheCurvesItUsedAndReadsThemBack) {
  test_support::TempDir tmp;
  std::mt19937_64 rng(6);
  const std::string csv = analysis::tau_law_curves_csv(simulated(rng, 0.002, 3));
  std::ofstream(tmp.path / "in.csv") << csv;
  auto harness = [&](const std::string& args) {
    const auto log = tmp.path / "log.txt";
    const int status = std::system(fmt::format("{} tau law {} > '{}' 2>&1", HARNESS_BINARY, args, log.string()).c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, test_support::read_text(log));
  };
  const auto [code, out] = harness(fmt::format("--curves '{}' --replicates 200 --out '{}'", (tmp.path / "in.csv").string(),
                                               (tmp.path / "out").string()));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("losses: 0 from /analysis (`harness analyse`), 288 from /eval"), std::string::npos) << out;
  EXPECT_EQ(test_support::read_text(tmp.path / "out" / "tau-law-curves.csv"), csv);
  EXPECT_EQ(test_support::read_text(tmp.path / "out" / "tau-law.md"), out.substr(0, out.find("tau_law_")));
  EXPECT_EQ(harness(fmt::format("--curves '{}'", (tmp.path / "missing.csv").string())).first, 2);
  EXPECT_EQ(harness(fmt::format("'{}' --curves '{}'", tmp.path.string(), (tmp.path / "in.csv").string())).first, 2);
  EXPECT_EQ(harness("").first, 2);
}

TEST(TauLaw, FiguresHoldTheFitsAndTheLossesTheyDraw) {
  std::mt19937_64 rng(5);
  const auto curves = simulated(rng, 0.002);
  analysis::TauLawOptions o;
  o.replicates = 400;
  const auto law = analysis::tau_law(curves, o);
  test_support::TempDir tmp;
  const auto result = analysis::write_tau_law_figures(tmp.path.string(), curves, law);
  ASSERT_EQ(result.figures.size(), 4u);  // tau_law_loss_{1,4,16}L, tau_law_star
  for (const auto& f : result.figures) {
    EXPECT_FALSE(f.render.failed) << f.render.notice;
    for (const auto& image : f.render.images) EXPECT_GT(fs::file_size(image), 1000u) << image;
  }
  // tau_law_star.csv: L, then per context τ*, lo, hi, open — τ* as fitted, the interval inside the grid.
  std::ifstream in(tmp.path / "tau_law_star.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "L,1L_tau_star,1L_lo,1L_hi,1L_open,4L_tau_star,4L_lo,4L_hi,4L_open,16L_tau_star,16L_lo,16L_hi,16L_open");
  for (size_t i = 0; i < curves.size(); ++i) {
    ASSERT_TRUE(std::getline(in, line));
    double L, star, lo, hi, open;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%*f,%*f,%*f,%*f,%lf,%lf,%lf,%lf", &L, &star, &lo, &hi, &open), 5) << line;
    const auto& r = law.rows[3 * i + 1];
    EXPECT_EQ(L, double(r.L));
    EXPECT_NEAR(star, r.tau_star.value, 1e-6 * star);
    EXPECT_NEAR(lo, std::max(r.tau_star.lo, curves[i].tau.front()), 1e-6 * lo);
    EXPECT_NEAR(hi, std::min(r.tau_star.hi, curves[i].tau.back()), 1e-6 * hi);
    EXPECT_LE(lo, star);
    EXPECT_GE(hi, star);
  }
  // One L (a group of `--by`): the loss figures, no τ* against L (one point has no axis range).
  const std::vector<analysis::TauLawCurve> one(curves.begin(), curves.begin() + 1);
  test_support::TempDir tmp1;
  const auto single = analysis::write_tau_law_figures(tmp1.path.string(), one, analysis::tau_law(one, o));
  ASSERT_EQ(single.figures.size(), 3u);
  for (const auto& f : single.figures) EXPECT_FALSE(f.render.failed) << f.name << ": " << f.render.notice;
  EXPECT_FALSE(fs::exists(tmp1.path / "tau_law_star.csv"));
}
