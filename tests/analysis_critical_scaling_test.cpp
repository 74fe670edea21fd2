// Critical attention scaling (analysis/theory/critical_scaling.h) against independent references: the
// closed-form oracle for equiangular tokens, its n → ∞ limits, the exact Jacobian (central finite
// differences, no autograd) and closed forms of η and of the causal self-weights.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "analysis/theory/critical_scaling.h"

namespace {

using analysis::equiangular_oracle;

std::vector<double> linspace(double from, double to, int count) {
  std::vector<double> v;
  for (int k = 0; k < count; ++k) v.push_back(from + (to - from) * k / (count - 1));
  return v;
}

}  // namespace

TEST(CriticalScaling, EquiangularSimulationEqualsTheOracle) {
  torch::NoGradGuard no_grad;
  for (const int64_t n : {8, 64, 300})
    for (const double rho : {0.1, 0.5, 0.9}) {
      const auto y = analysis::equiangular_tokens(n, rho);  // (n, n + 1)
      EXPECT_NEAR(analysis::mean_pairwise_cosine(y), rho, 1e-12);
      const analysis::StepSampler sampler(y, n);  // every row
      for (const double over : {0.0, 0.3, 0.9, 1.0, 1.1, 2.0, 3.0}) {
        const double gamma = over / (1 - rho);
        const auto s = sampler.statistics(gamma * std::log(double(n)));
        const auto o = equiangular_oracle(n, rho, gamma);
        EXPECT_NEAR(s.c_out, o.c_out, 1e-6) << "n " << n << " rho " << rho << " gamma " << gamma;
        EXPECT_NEAR(s.self_weight, o.self_weight, 1e-6) << "n " << n << " rho " << rho;
        EXPECT_NEAR(sampler.mean_self_weight(gamma * std::log(double(n))), o.self_weight, 1e-12);
        EXPECT_EQ(s.c_out_se, 0.0);  // every row: no sampling error
      }
    }
}

TEST(CriticalScaling, OracleHasThePapersLimits) {
  const int64_t n = 1000000000;  // n → ∞
  for (const double rho : {0.2, 0.5, 0.8}) {
    const double gamma_c = 1 / (1 - rho);
    EXPECT_NEAR(equiangular_oracle(n, rho, 0).c_out, 1.0, 1e-12);
    EXPECT_NEAR(equiangular_oracle(n, rho, 0.5 * gamma_c).c_out, 1.0, 1e-6);   // collapse
    EXPECT_NEAR(equiangular_oracle(n, rho, gamma_c).c_out, 4 * rho / (1 + 3 * rho), 1e-6);
    EXPECT_NEAR(equiangular_oracle(n, rho, gamma_c).self_weight, 0.5, 1e-6);
    EXPECT_NEAR(equiangular_oracle(n, rho, 2 * gamma_c).c_out, rho, 1e-6);      // identity
  }
}

TEST(CriticalScaling, ZeroGammaCollapsesEveryToken) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(1);
  const int64_t n = 512;
  const auto y = analysis::correlated_tokens(n, 32, 0.3, generator);
  const analysis::StepSampler sampler(y, 128);
  const auto s = sampler.statistics(0.0);
  EXPECT_NEAR(s.c_out, 1.0, 1e-9);  // uniform attention: every output is the mean token
  EXPECT_NEAR(s.self_weight, 1.0 / n, 1e-12);
  EXPECT_NEAR(s.entropy, 1.0, 1e-9);
  EXPECT_LT(analysis::angle_ratio(s.c_out, analysis::mean_pairwise_cosine(y)), 1e-3);
}

TEST(CriticalScaling, ThreeTimesCriticalGammaKeepsTheAngles) {
  torch::NoGradGuard no_grad;
  const int64_t n = 1024;
  for (const double rho : {0.25, 0.5, 0.75}) {
    auto generator = at::detail::createCPUGenerator(2);
    const auto y = analysis::correlated_tokens(n, 512, rho, generator);
    const double gamma = 3 / (1 - rho);
    const analysis::StepSampler sampler(y, 128);
    const auto s = sampler.statistics(gamma * std::log(double(n)));
    EXPECT_NEAR(analysis::angle_ratio(s.c_out, sampler.rows_input_cosine()), 1.0, 0.01) << "rho " << rho;
    EXPECT_NEAR(analysis::angle_ratio(equiangular_oracle(n, rho, gamma).c_out, rho), 1.0, 0.01);
  }
}

// λ compares the outputs' angles with the inputs' over the same rows: in the identity phase the
// outputs are the inputs and λ is 1, at small d (where a subset's cosine strays from all pairs')
// as at large.
TEST(CriticalScaling, LambdaIsOneInTheIdentityPhase) {
  torch::NoGradGuard no_grad;
  const int64_t n = 1024;
  for (const int64_t d : {4, 64}) {
    auto generator = at::detail::createCPUGenerator(5);
    const auto y = analysis::correlated_tokens(n, d, 0.75, generator);
    const analysis::StepSampler sampler(y, 128);
    double beta = 1;
    while (sampler.mean_self_weight(beta) < 0.9995 && beta < 1e6) beta *= 1.5;
    const auto s = sampler.statistics(beta);
    ASSERT_GT(s.self_weight, 0.999) << "d " << d;
    EXPECT_NEAR(analysis::angle_ratio(s.c_out, sampler.rows_input_cosine()), 1.0, 0.005) << "d " << d;
  }
}

TEST(CriticalScaling, MeasuredCriticalGammaIsWithinTwoPercentOfTheoryAtD512) {
  torch::NoGradGuard no_grad;
  const int64_t n = 1024;
  for (const double rho : {0.25, 0.5, 0.75}) {
    auto generator = at::detail::createCPUGenerator(3);
    const analysis::StepSampler sampler(analysis::correlated_tokens(n, 512, rho, generator), 128);
    const double theory = 1 / (1 - rho);
    const auto grid = linspace(0, 3 * theory, 30);
    std::vector<double> self;
    for (double g : grid) self.push_back(sampler.mean_self_weight(g * std::log(double(n))));
    const auto hat = analysis::critical_gamma({&sampler}, grid, self);
    EXPECT_TRUE(hat.bracketed_in_grid);
    EXPECT_NEAR(hat.gamma / theory, 1.0, 0.02) << "rho " << rho << ": gamma_c_hat " << hat.gamma;
    EXPECT_NEAR(sampler.mean_self_weight(hat.gamma * std::log(double(n))), 0.5, 1e-7);
  }
}

TEST(CriticalScaling, CriticalGammaOfEquiangularTokensIsTheOraclesCrossing) {
  torch::NoGradGuard no_grad;
  // a = ½ ⇔ (n−1)·n^(−γ(1−ρ)) = 1 ⇔ γ = ln(n−1)/((1−ρ)·ln n), whatever the grid's spacing.
  const int64_t n = 200;
  for (const double rho : {0.3, 0.7}) {
    const analysis::StepSampler sampler(analysis::equiangular_tokens(n, rho), 50);
    for (const int points : {4, 7, 30}) {
      const auto grid = linspace(0, 3 / (1 - rho), points);
      std::vector<double> self;
      for (double g : grid) self.push_back(equiangular_oracle(n, rho, g).self_weight);
      const auto hat = analysis::critical_gamma({&sampler}, grid, self);
      EXPECT_NEAR(hat.gamma, std::log(n - 1.0) / ((1 - rho) * std::log(double(n))), 1e-7)
          << "rho " << rho << ", " << points << " grid points";
    }
    // A grid that stops short of the crossing: found beyond it, and flagged.
    const std::vector<double> short_grid = {0, 0.1, 0.2};
    std::vector<double> self;
    for (double g : short_grid) self.push_back(equiangular_oracle(n, rho, g).self_weight);
    const auto beyond = analysis::critical_gamma({&sampler}, short_grid, self);
    EXPECT_FALSE(beyond.bracketed_in_grid);
    EXPECT_NEAR(beyond.gamma, std::log(n - 1.0) / ((1 - rho) * std::log(double(n))), 1e-7);
  }
}

// ‖J‖²_F/(n·d) of the whole step from central finite differences (float64, no autograd).
double exact_eta(const torch::Tensor& y, double beta) {
  torch::NoGradGuard no_grad;
  const int64_t n = y.size(0), d = y.size(1);
  const auto all = torch::arange(n, torch::kLong);
  const double h = 1e-6;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) {
      auto plus = y.clone(), minus = y.clone();
      plus[i][k] += h;
      minus[i][k] -= h;
      const auto column = (analysis::attention_step_rows(plus, all, beta) -
                           analysis::attention_step_rows(minus, all, beta)) / (2 * h);  // (n, d)
      sum += column.pow(2).sum().item<double>();
    }
  return sum / double(n * d);
}

TEST(CriticalScaling, HutchinsonEtaMatchesTheExactJacobianNorm) {
  const int64_t n = 6, d = 3;
  const double rho = 0.4;
  auto tokens = at::detail::createCPUGenerator(4);
  const auto y = analysis::correlated_tokens(n, d, rho, tokens);
  for (const double over : {0.0, 1.0, 3.0}) {
    const double beta = over / (1 - rho) * std::log(double(n));
    const double exact = exact_eta(y, beta);
    auto probes = at::detail::createCPUGenerator(5);
    const auto e = analysis::jacobian_norm_hutchinson(y, beta, n, 4000, probes);
    EXPECT_LT(std::fabs(e.value - exact), 4 * e.se) << "gamma/gamma_c " << over << ": exact " << exact
                                                    << ", Hutchinson " << e.value << " ± " << e.se;
    EXPECT_LT(e.se / exact, 0.03);
    EXPECT_NEAR(e.value / exact, 1.0, 0.06);
  }
}

TEST(CriticalScaling, EtaHasItsClosedFormsAtZeroAndLargeGamma) {
  const int64_t n = 64, d = 8;
  auto tokens = at::detail::createCPUGenerator(6);
  const auto y = analysis::correlated_tokens(n, d, 0.5, tokens);
  // γ = 0: y'_i = N(ȳ) for every i, ∂y'_i/∂y_j = P/(n|ȳ|): η = (d−1)/(n·d·|ȳ|²).
  const double mean_sq = y.mean(0).pow(2).sum().item<double>();
  auto probes = at::detail::createCPUGenerator(7);
  const auto zero = analysis::jacobian_norm_hutchinson(y, 0.0, 16, 3000, probes);
  const double expected_zero = double(d - 1) / (double(n * d) * mean_sq);
  EXPECT_LT(std::fabs(zero.value - expected_zero), 4 * zero.se + 1e-9)
      << zero.value << " ± " << zero.se << " vs " << expected_zero;
  EXPECT_NEAR(zero.value / expected_zero, 1.0, 0.1);
  // Far above γ_c the step is y'_i = N(y_i): ∂y'_i/∂y_i = I − y_i y_iᵀ, η = (d−1)/d.
  const auto identity = analysis::jacobian_norm_hutchinson(y, 1e4, 16, 400, probes);
  EXPECT_NEAR(identity.value, double(d - 1) / d, 4 * identity.se + 1e-3);
}

TEST(CriticalScaling, CausalSelfWeightsMatchTheOracleRowByRow) {
  // Equiangular tokens: causal row i sees i + 1 tokens with mutual cosine ρ, so per-row scaling
  // gives the oracle's a at n = i + 1, global scaling a = 1/(1 + i·T^(−γ(1−ρ))).
  const int64_t T = 64;
  const double rho = 0.5, lo = 0.25, hi = 0.75;
  const analysis::CausalSampler sampler(analysis::equiangular_tokens(T, rho), T);  // every row
  // (γ/γ_c = 0.5 would put global row 24 exactly on A_ii = 0.25, a tie rounding decides.)
  for (const double over : {0.0, 0.45, 1.0, 2.0}) {
    const double gamma = over / (1 - rho);
    double expected[2][3] = {}, mean[2] = {};
    for (int64_t i = 0; i < T; ++i) {
      const double a[2] = {i == 0 ? 1.0 : equiangular_oracle(i + 1, rho, gamma).self_weight,
                           1 / (1 + double(i) * std::pow(double(T), -gamma * (1 - rho)))};
      for (int s = 0; s < 2; ++s) {
        expected[s][a[s] < lo ? 0 : a[s] > hi ? 2 : 1] += 1.0 / T;
        mean[s] += a[s] / T;
      }
    }
    const auto phases = sampler.phases(gamma, lo, hi);
    for (int s = 0; s < 2; ++s) {
      EXPECT_NEAR(phases.self_weight[s], mean[s], 1e-9) << "scaling " << s << ", gamma/gamma_c " << over;
      for (int p = 0; p < 3; ++p)
        EXPECT_NEAR(phases.fraction[s][p], expected[s][p], 1e-12) << "scaling " << s << " phase " << p;
    }
  }
  // At γ_c per-row scaling keeps every row but the first critical; ln T over-scales early rows.
  const auto at_critical = sampler.phases(1 / (1 - rho), lo, hi);
  EXPECT_NEAR(at_critical.fraction[analysis::kPerRowScaling][analysis::kCritical], 63.0 / 64, 1e-12);
  EXPECT_LT(at_critical.fraction[analysis::kGlobalScaling][analysis::kCritical], 0.8);
}

TEST(CriticalScaling, GridCellsAreDeterministicWhateverElseIsInTheGrid) {
  auto small = analysis::quick_critical_scaling_config();
  small.n = {64};
  small.d = {4};
  small.rho = {0.5};
  small.gamma_count = 5;
  small.rows = 16;
  small.hutchinson_rows = 8;
  small.causal_rows = 16;
  small.threads = 1;
  auto larger = small;
  larger.d = {8, 4};
  larger.rho = {0.3, 0.5};
  const auto a = analysis::run_critical_scaling(small);
  const auto b = analysis::run_critical_scaling(larger);
  ASSERT_EQ(a.G, 5u);
  for (size_t g = 0; g < a.G; ++g) {
    const size_t ka = a.at(0, 0, 0, g), kb = b.at(0, 1, 1, g);  // n 64, d 4, ρ 0.5 in both
    EXPECT_EQ(a.c_out[ka], b.c_out[kb]);
    EXPECT_EQ(a.eta[ka], b.eta[kb]);
    EXPECT_EQ(a.self_weight[ka], b.self_weight[kb]);
    EXPECT_EQ(a.gamma[g], 3.0 / (1 - 0.5) * double(g) / 4);
    EXPECT_NEAR(a.oracle_c_out[a.oracle_at(0, 0, g)], equiangular_oracle(64, 0.5, a.gamma[g]).c_out, 0);
  }
  EXPECT_EQ(a.gamma_c_hat[0], b.gamma_c_hat[b.cell(0, 1, 1)]);
  EXPECT_GT(a.lambda[a.at(0, 0, 0, 4)], a.lambda[a.at(0, 0, 0, 0)]);
}

// The grid's λ: where the step is the identity (A_ii > 0.999), λ is 1 (#26: c_out over the
// sampled rows against c_in over all pairs gave 0.977 at d = 64 and 1.07 at d = 4).
TEST(CriticalScaling, GridLambdaIsOneWhereTheStepIsTheIdentity) {
  auto c = analysis::quick_critical_scaling_config();
  c.n = {256};
  c.d = {4, 64};
  c.rho = {0.75};
  c.gamma_max_over_critical = 12;  // far into the identity phase
  c.gamma_count = 7;
  c.rows = 64;
  c.trials = 2;
  c.hutchinson_rows = 8;
  c.hutchinson_probes = 2;
  c.causal_rows = 16;
  c.threads = 1;
  const auto r = analysis::run_critical_scaling(c);
  int identity_points = 0;
  for (size_t id = 0; id < r.D; ++id)
    for (size_t g = 0; g < r.G; ++g) {
      const size_t k = r.at(0, id, 0, g);
      if (r.self_weight[k] <= 0.999) continue;
      ++identity_points;
      EXPECT_NEAR(r.lambda[k], 1.0, 0.005) << "d " << c.d[id] << ", gamma " << r.gamma[g];
    }
  EXPECT_GE(identity_points, 2);
}
