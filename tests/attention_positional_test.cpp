// Positional encodings of the method layer: rotary frequency tables (RoPE, p-RoPE, NTK, YaRN),
// ALiBi's slopes, LogN's row factor and the rotation's properties. Every expectation is computed
// here from the papers' formulas, independently of method.cpp.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/method.h"
#include "attention/reference.h"
#include "attention/score_mod.h"
#include "test_models.h"

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using attention::Method;
using attention::MethodOptions;

using test_support::method_options;

}  // namespace

// ---- rotary frequency tables ------------------------------------------------------------------

TEST(AttentionMethod, RopeFrequencies) {
  const Method m = attention::resolve_method(method_options("rope", 16));
  const auto f = attention::rotary_frequencies(m, 100);
  ASSERT_EQ(f.size(), 8u);
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(f[k], std::pow(10000.0, -2.0 * k / 16), 1e-15);
}

TEST(AttentionMethod, PRopeRespreadFrequencies) {
  // modded-nanogpt: (1/1024)^linspace(0, 1, D/4) on the first D/4 pairs, 0 on the rest.
  const Method m = attention::resolve_method(method_options("p-rope", 16));
  const auto f = attention::rotary_frequencies(m, 100);
  const std::vector<double> want = {1.0,
                                    std::pow(1024.0, -1.0 / 3),
                                    std::pow(1024.0, -2.0 / 3),
                                    1.0 / 1024,
                                    0,
                                    0,
                                    0,
                                    0};
  ASSERT_EQ(f.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(f[k], want[k], 1e-15) << k;
  // Fraction 0.25 of D = 64 → 8 pairs rotate, spread down to 1/256 with p_rope_base 256.
  auto o = method_options("p-rope", 64);
  o.p_rope_fraction = 0.25;
  o.parameters[attention::Parameter::kPRopeBase] = 256;
  const auto g = attention::rotary_frequencies(attention::resolve_method(o), 10);
  for (int k = 0; k < 32; ++k)
    EXPECT_NEAR(g[k], k < 8 ? std::pow(1.0 / 256, k / 7.0) : 0.0, 1e-15) << k;
}

TEST(AttentionMethod, PRopeTruncateFrequencies) {
  // Barbero et al.: RoPE's base^(−2k/D), only the highest fraction p (default 0.75) kept.
  auto o = method_options("p-rope", 16);
  o.p_rope_variant = "truncate";
  const auto f = attention::rotary_frequencies(attention::resolve_method(o), 100);
  ASSERT_EQ(f.size(), 8u);
  for (int k = 0; k < 8; ++k)
    EXPECT_NEAR(f[k], k < 6 ? std::pow(10000.0, -2.0 * k / 16) : 0.0, 1e-15) << k;
  o.p_rope_fraction = 0.5;
  const auto g = attention::rotary_frequencies(attention::resolve_method(o), 100);
  for (int k = 0; k < 8; ++k)
    EXPECT_NEAR(g[k], k < 4 ? std::pow(10000.0, -2.0 * k / 16) : 0.0, 1e-15) << k;
  o.p_rope_fraction = 0.0;  // NoPE in disguise
  for (double x : attention::rotary_frequencies(attention::resolve_method(o), 100))
    EXPECT_EQ(x, 0.0);
}

TEST(AttentionMethod, NtkBaseAtFourTimesTrainingContext) {
  const int64_t L = 64, D = 16;
  const Method m = attention::resolve_method(method_options("rope+ntk", D, L));
  const double want = 10000.0 * std::pow(4.0, 16.0 / 14.0);
  EXPECT_NEAR(attention::ntk_base(m, 4 * L), want, 1e-9 * want);
  EXPECT_EQ(attention::ntk_base(m, L), 10000.0);  // T ≤ L: plain RoPE
  EXPECT_EQ(attention::ntk_base(m, L / 2), 10000.0);
  const auto f = attention::rotary_frequencies(m, 4 * L);
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(f[k], std::pow(want, -2.0 * k / D), 1e-15);
  const auto g = attention::rotary_frequencies(m, L);
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(g[k], std::pow(10000.0, -2.0 * k / D), 1e-15);
}

TEST(AttentionMethod, YarnTemperatureAndByPartsFrequencies) {
  const int64_t L = 256, D = 16;
  const Method m = attention::resolve_method(method_options("yarn", D, L));
  // Temperature: logits × (0.1·ln s + 1)² for s = T/L > 1, identity otherwise.
  EXPECT_NEAR(attention::yarn_logit_multiplier(m, 4 * L), std::pow(0.1 * std::log(4.0) + 1, 2),
              1e-14);
  EXPECT_EQ(attention::yarn_logit_multiplier(m, L), 1.0);
  EXPECT_NEAR(attention::score_mod(m, 4 * L).scale,
              0.25 * std::pow(0.1 * std::log(4.0) + 1, 2), 1e-7);
  EXPECT_FLOAT_EQ(attention::score_mod(m, L).scale, 0.25f);
  // NTK-by-parts: r = L/λ; γ = clamp((r − 1)/31, 0, 1); θ' = (1 − γ)θ/s + γθ.
  const auto f = attention::rotary_frequencies(m, 4 * L);
  int interpolated = 0, kept = 0, blended = 0;
  for (int k = 0; k < 8; ++k) {
    const double theta = std::pow(10000.0, -2.0 * k / D);
    const double r = double(L) * theta / (2 * M_PI);
    const double gamma = std::min(1.0, std::max(0.0, (r - 1) / 31));
    EXPECT_NEAR(f[k], (1 - gamma) * theta / 4 + gamma * theta, 1e-15) << k;
    interpolated += gamma == 0, kept += gamma == 1, blended += gamma > 0 && gamma < 1;
  }
  EXPECT_GT(interpolated, 0);  // these sizes exercise all three regimes of the ramp
  EXPECT_GT(kept, 0);
  EXPECT_GT(blended, 0);
  const auto g = attention::rotary_frequencies(m, L);  // T ≤ L: plain RoPE
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(g[k], std::pow(10000.0, -2.0 * k / D), 1e-15);
}

// ---- ALiBi ------------------------------------------------------------------------------------

TEST(AttentionMethod, AlibiSlopes) {
  const std::vector<double> six = {1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8};
  const auto s6 = attention::alibi_slopes(6);
  ASSERT_EQ(s6.size(), 6u);
  for (int h = 0; h < 6; ++h) EXPECT_DOUBLE_EQ(s6[h], six[h]) << h;
  const auto s8 = attention::alibi_slopes(8);
  ASSERT_EQ(s8.size(), 8u);
  for (int h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(s8[h], std::pow(2.0, -(h + 1.0))) << h;
  const auto s4 = attention::alibi_slopes(4);
  for (int h = 0; h < 4; ++h) EXPECT_DOUBLE_EQ(s4[h], std::pow(2.0, -2.0 * (h + 1))) << h;
  // H = 12: the 8 slopes of H = 8, then 2^(−0.5), 2^(−1.5), 2^(−2.5), 2^(−3.5) from the 16-set.
  const auto s12 = attention::alibi_slopes(12);
  ASSERT_EQ(s12.size(), 12u);
  for (int h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(s12[h], std::pow(2.0, -(h + 1.0)));
  for (int h = 0; h < 4; ++h) EXPECT_DOUBLE_EQ(s12[8 + h], std::pow(2.0, -(0.5 + h)));
  // The method's bias is −m_h·t.
  const Method m = attention::resolve_method(method_options("alibi", 16, 0, 6));
  EXPECT_DOUBLE_EQ(attention::distance_bias(m, 10, 4), -0.5 * 10);
  EXPECT_DOUBLE_EQ(attention::distance_multiplier(m, 10), 1.0);
}

// ---- LogN ---------------------------------------------------------------------------------------

TEST(AttentionMethod, LogNRowFactorAndInitialScale) {
  const Method m = attention::resolve_method(method_options("logn+rope", 16, 64));
  for (int64_t n : {1, 2, 10, 64, 1000})
    EXPECT_NEAR(attention::row_multiplier(m, n), std::log(double(n)), 1e-15);
  EXPECT_NEAR(attention::initial_head_scale(m), 1.0 / std::log(64.0), 1e-15);
  // The module registers the learned s_h under "logn_scale", initialised to 1/ln L.
  attention::CausalAttention attn(method_options("logn+rope", 16, 64, 3));
  auto params = attn->named_parameters();
  ASSERT_TRUE(params.contains("logn_scale"));
  const auto s = params["logn_scale"];
  ASSERT_EQ(s.sizes(), torch::IntArrayRef({3}));
  for (int h = 0; h < 3; ++h) EXPECT_NEAR(s[h].item<double>(), 1.0 / std::log(64.0), 1e-7);
  EXPECT_TRUE(s.requires_grad());
  attention::CausalAttention plain(method_options("rope"));
  EXPECT_EQ(plain->named_parameters().size(), 0u);
  // Per-row factor in the reference logits: row i of logits = s_h·ln(i+1)·s.
  torch::manual_seed(3);
  const auto q = torch::randn({1, 3, 9, 16}, torch::kFloat64);
  const auto k = torch::randn({1, 3, 9, 16}, torch::kFloat64);
  auto nope = method_options("nope", 16, 64, 3);
  const auto plain_logits = attention::reference_logits(q, k, attention::resolve_method(nope));
  nope.transform = "logn";
  const auto hs = torch::tensor({0.5, 1.0, 2.0}, torch::kFloat64);
  const auto logn_logits = attention::reference_logits(q, k, attention::resolve_method(nope), hs);
  for (int h = 0; h < 3; ++h)
    for (int i = 0; i < 9; ++i)
      for (int j = 0; j <= i; ++j)
        EXPECT_NEAR(logn_logits[0][h][i][j].item<double>(),
                    hs[h].item<double>() * std::log(i + 1.0) * plain_logits[0][h][i][j].item<double>(),
                    1e-12);
}

// ---- RoPE properties ----------------------------------------------------------------------------

TEST(AttentionMethod, RotationPreservesNormsAndDependsOnlyOnDistance) {
  for (const char* name : {"rope", "p-rope", "rope+ntk", "yarn"}) {
    const Method m = attention::resolve_method(method_options(name, 16, 32));
    const int64_t T = 128;  // 4L: ntk / yarn scaled
    const auto tables = attention::rotary_tables(m, T, torch::kFloat64);
    torch::manual_seed(7);
    const auto a = torch::randn({16}, torch::kFloat64), b = torch::randn({16}, torch::kFloat64);
    // The same vectors at every position.
    const auto qa = attention::apply_rotary(a.expand({1, 1, T, 16}), tables);
    const auto kb = attention::apply_rotary(b.expand({1, 1, T, 16}), tables);
    const auto norms = qa.norm(2, -1);  // (1, 1, T)
    EXPECT_LT((norms - a.norm()).abs().max().item<double>(), 1e-12) << name;
    const auto dots = torch::matmul(qa, kb.transpose(-1, -2))[0][0];  // (T, T)
    for (int64_t d : {0, 1, 5, 40}) {
      const double ref = dots[d][0].item<double>();
      for (int64_t j : {1, 17, 60}) EXPECT_NEAR(dots[j + d][j].item<double>(), ref, 1e-10) << name;
    }
    // And it is a real rotation: position 0 is the identity, others are not (for rotated pairs).
    EXPECT_LT((qa[0][0][0] - a).abs().max().item<double>(), 1e-15);
    EXPECT_GT((qa[0][0][5] - a).abs().max().item<double>(), 1e-3);
  }
}

TEST(AttentionMethod, FusedRotaryMatchesComposedValuesAndGradients) {
  for (const char* name : {"rope", "p-rope", "yarn"}) {
    const Method m = attention::resolve_method(method_options(name, 16, 32));
    const int64_t T = 40;
    torch::manual_seed(8);
    for (const auto dtype : {torch::kFloat64, torch::kFloat32}) {
      const auto tables = attention::rotary_tables(m, T, dtype);
      // (B, H, T, D) as a transposed view, as the model hands it over.
      const auto x0 = torch::randn({2, T, 3, 16}, dtype).transpose(1, 2);
      auto xf = x0.clone().set_requires_grad(true), xc = x0.clone().set_requires_grad(true);
      const auto yf = attention::apply_rotary_fused(xf, tables);
      const auto yc = attention::apply_rotary(xc, tables);
      const auto w = torch::randn(yc.sizes(), dtype);
      (yf * w).sum().backward();
      (yc * w).sum().backward();
      const double tol = dtype == torch::kFloat64 ? 1e-14 : 1e-6;
      EXPECT_TRUE(yf.is_contiguous());
      EXPECT_LT((yf - yc).abs().max().item<double>(), tol) << name;
      EXPECT_LT((xf.grad() - xc.grad()).abs().max().item<double>(), tol) << name;
    }
  }
  // No rotary encoding: the input itself.
  const auto x = torch::randn({1, 1, 4, 8});
  EXPECT_TRUE(attention::apply_rotary_fused(x, attention::RotaryTables{}).is_same(x));
}
