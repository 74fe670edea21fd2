// The reference kernel against a straight-from-the-formula implementation written here: explicit
// loops in float64, the papers' formulas re-derived without method.cpp (frequencies, slopes,
// YaRN, NTK, LogN, InfoScale, scale-invariant, KERPLE-log, T5's buckets). A learned bias reaches
// the reference as the table its registry row builds, so these formulas check the rows too.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/method.h"
#include "attention/reference.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace {

// The test's own reading of a method.
struct Spec {
  std::string positional, transform;
  double tau = 10, rope_base = 10000, p_base = 1024, p_fraction = 0.5;
  bool truncate = false;
  int64_t L = 64, D = 16, H = 3;
};

const std::map<std::string, std::pair<std::string, std::string>> kPresets = {
    {"rope", {"rope", "none"}},
    {"p-rope", {"p-rope", "none"}},
    {"nope", {"nope", "none"}},
    {"rope+ntk", {"ntk", "none"}},
    {"yarn", {"yarn", "none"}},
    {"logn+rope", {"rope", "logn"}},
    {"logn+p-rope", {"p-rope", "logn"}},
    {"logn+ntk", {"ntk", "logn"}},
    {"alibi", {"alibi", "none"}},
    {"si+p-rope", {"p-rope", "scale-invariant"}},
    {"si+rope", {"rope", "scale-invariant"}},
    {"si+nope", {"nope", "scale-invariant"}},
    {"kerple", {"nope", "kerple-log"}},
    {"kerple+p-rope", {"p-rope", "kerple-log"}},
    {"t5", {"nope", "t5-bias"}},
    {"fire", {"nope", "fire"}},
    {"fire+p-rope", {"p-rope", "fire"}},
};

// FIRE's bias (Li et al. 2023, arXiv 2310.04418) of query i at distance t: the MLP
// f(x) = b2 + Σ_k w2_k·max(0, w1_k·x + b1_k) at x = ln(1 + c·t) / (ln(1 + c·max(L, i)) + ε),
// as the kernels see it: f on 128 points of [0, 1], linear between them. p: w1, b1, w2 (32 each),
// b2, c, L / L_train, where attention::FireLayout places them.
double formula_fire(const double* p, double L_train, double i, double t) {
  using F = attention::FireLayout;
  auto mlp = [&](double x) {
    double f = p[F::kB2];
    for (int k = 0; k < 32; ++k) f += p[F::kW2 + k] * std::max(0.0, p[F::kW1 + k] * x + p[F::kB1 + k]);
    return f;
  };
  const double c = p[F::kC], L = p[F::kL] * L_train;
  const double x = std::log(1 + c * t) / (std::log(1 + c * std::max(L, i)) + double(1e-6f));
  const double u = x * 127;
  const int g = std::min(int(u), 126);
  const double w = u - g;
  return (1 - w) * mlp(g / 127.0) + w * mlp((g + 1) / 127.0);
}

// T5's causal bucket of distance t (Raffel et al. 2020; HF transformers'
// _relative_position_bucket(bidirectional=False, num_buckets=32, max_distance=128)).
int64_t formula_t5_bucket(int64_t t) {
  if (t < 16) return t;
  return std::min<int64_t>(31, 16 + int64_t(std::floor(std::log(double(t) / 16) / std::log(128.0 / 16) * 16)));
}

TEST(AttentionReference, T5BucketsAtHandComputedDistances) {
  // 16 + floor(ln(t/16) / ln 8 · 16): t = 23 → 16 + floor(2.79) = 18, t = 32 → 16 + floor(16/3) = 21, t = 64 → 26,
  // t = 100 → 16 + floor(14.10) = 30, t = 127 → 31, t >= 128 → 31 (every distance shares it).
  const auto& spec = attention::transform_spec(attention::Transform::kT5);
  attention::MethodOptions o;
  o.method = "t5";
  o.heads = 2;
  o.head_dim = 16;
  const auto m = attention::resolve_method(o);
  std::vector<double> b(32);
  for (int k = 0; k < 32; ++k) b[size_t(k)] = 100.0 + k;  // bucket k's bias is 100 + k
  const std::pair<int64_t, int> want[] = {{0, 0},   {1, 1},   {15, 15},  {16, 16},  {17, 16},  {23, 18},
                                          {32, 21}, {64, 26}, {100, 30}, {127, 31}, {128, 31}, {100000, 31}};
  for (const auto& [t, bucket] : want) {
    EXPECT_EQ(formula_t5_bucket(t), bucket) << "t = " << t;
    EXPECT_EQ(spec.learned_bias(m, b.data(), t), 100.0 + bucket) << "t = " << t;
  }
  // 32 values per head, initialised to 0 (a T5 model starts as NoPE), with no floor: a value set
  // below 0 stays there.
  EXPECT_EQ(attention::learned_values_per_head(m), 32);
  for (double v : attention::initial_learned_values(m)) EXPECT_EQ(v, 0.0);
  attention::CausalAttention attn(o);
  EXPECT_EQ(attn->named_parameters()["t5_bias"].sizes(), torch::IntArrayRef({2, 32}));
  {
    torch::NoGradGuard g;
    attn->learned_bias_params[0].fill_(-3.0);
  }
  const auto x = torch::randn({1, 2, 5, 16});
  attn->forward(x, x, x);
  EXPECT_TRUE(attn->learned_bias_params[0].eq(-3.0f).all().item<bool>());
}

std::vector<double> formula_frequencies(const Spec& s, int64_t T) {
  const int64_t P = s.D / 2;
  std::vector<double> f(P, 0.0);
  if (s.positional == "nope" || s.positional == "alibi") return f;
  double base = s.rope_base;
  if (s.positional == "ntk" && T > s.L)
    base *= std::pow(double(T) / s.L, double(s.D) / double(s.D - 2));
  for (int64_t k = 0; k < P; ++k) f[k] = std::pow(base, -2.0 * k / s.D);
  if (s.positional == "yarn" && T > s.L) {
    const double scale = double(T) / s.L;
    for (int64_t k = 0; k < P; ++k) {
      const double r = s.L / (2 * M_PI / f[k]);
      const double g = r < 1 ? 0.0 : r > 32 ? 1.0 : (r - 1) / 31;
      f[k] = (1 - g) * f[k] / scale + g * f[k];
    }
  }
  if (s.positional == "p-rope") {
    const int64_t n = int64_t(std::floor(s.p_fraction * P + 1e-9));
    for (int64_t k = 0; k < P; ++k) {
      if (k >= n)
        f[k] = 0;
      else if (!s.truncate)
        f[k] = n == 1 ? 1.0 : std::pow(1.0 / s.p_base, double(k) / (n - 1));
    }
  }
  return f;
}

// ALiBi reference code (get_slopes), ported line by line.
std::vector<double> formula_slopes(int64_t n) {
  auto pow2 = [](int64_t m) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(double(m)) - 3)));
    std::vector<double> out;
    for (int64_t i = 0; i < m; ++i) out.push_back(start * std::pow(start, double(i)));
    return out;
  };
  const double lg = std::log2(double(n));
  if (lg == std::floor(lg)) return pow2(n);
  const int64_t closest = int64_t(1) << int64_t(std::floor(lg));
  auto out = pow2(closest);
  const auto extra = formula_slopes(2 * closest);
  for (int64_t i = 0; int64_t(out.size()) < n; i += 2) out.push_back(extra[i]);
  return out;
}

// (out (B, H, T, D), lse (B, H, T)) by explicit loops.
std::pair<torch::Tensor, torch::Tensor> formula_attention(const torch::Tensor& q,
                                                          const torch::Tensor& k,
                                                          const torch::Tensor& v, const Spec& s,
                                                          const std::vector<double>& hs) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), P = D / 2;
  const auto freq = formula_frequencies(s, T);
  const auto slopes = formula_slopes(H);
  double scale = 1.0 / std::sqrt(double(D));
  if (s.positional == "yarn" && T > s.L) scale *= std::pow(0.1 * std::log(double(T) / s.L) + 1, 2);
  auto out = torch::zeros({B, H, T, D}, torch::kFloat64);
  auto lse = torch::zeros({B, H, T}, torch::kFloat64);
  auto qa = q.accessor<double, 4>(), ka = k.accessor<double, 4>(), va = v.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  auto la = lse.accessor<double, 3>();
  auto rotate = [&](const auto& x, int64_t pos) {
    std::vector<double> y(D);
    for (int64_t d = 0; d < D; ++d) y[d] = x[d];
    for (int64_t p = 0; p < P; ++p) {
      const double c = std::cos(pos * freq[p]), sn = std::sin(pos * freq[p]);
      y[p] = x[p] * c - x[p + P] * sn;
      y[p + P] = x[p] * sn + x[p + P] * c;
    }
    return y;
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const auto qi = rotate(qa[b][h][i], i);
        std::vector<double> logit(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          const auto kj = rotate(ka[b][h][j], j);
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          const double sc = scale * dot, t = double(i - j), n = double(i + 1);
          double mult = 1, bias = 0;
          if (s.transform == "logn") mult = hs[h] * std::log(n);
          if (s.transform == "infoscale") {
            const double e = -2.0 / D;
            mult = std::max(1.0, std::sqrt((1 - std::pow(n, e)) / (1 - std::pow(double(s.L), e))));
          }
          if (s.transform == "scale-invariant") {
            mult = std::sqrt(1 + 2 * std::log(1 + t / s.tau));
            bias = -2 * std::log(1 + t / s.tau);
          }
          if (s.transform == "kerple-log") bias = -hs[2 * h] * std::log(1 + hs[2 * h + 1] * t);  // r1, r2
          if (s.transform == "t5-bias") bias = hs[size_t(32 * h + formula_t5_bucket(int64_t(t)))];
          if (s.transform == "fire") bias = formula_fire(hs.data() + attention::FireLayout::kCount * h, double(s.L), double(i), t);
          if (s.positional == "alibi") bias -= slopes[h] * t;
          logit[j] = mult * sc + bias;
        }
        const double mx = *std::max_element(logit.begin(), logit.end());
        double z = 0;
        for (double x : logit) z += std::exp(x - mx);
        la[b][h][i] = mx + std::log(z);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(logit[j] - la[b][h][i]);
          for (int64_t d = 0; d < D; ++d) oa[b][h][i][d] += p * va[b][h][j][d];
        }
      }
  return {out, lse};
}

attention::MethodOptions options_for(const std::string& preset, const Spec& s) {
  attention::MethodOptions o;
  o.method = preset;
  o.parameters[attention::Parameter::kTau] = s.tau;
  o.parameters[attention::Parameter::kRopeBase] = s.rope_base;
  o.parameters[attention::Parameter::kPRopeBase] = s.p_base;
  o.p_rope_fraction = s.p_fraction;
  o.p_rope_variant = s.truncate ? "truncate" : "respread";
  o.train_context = s.L;
  o.heads = s.H;
  o.head_dim = s.D;
  o.kernel = "reference";
  return o;
}

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-300, b.abs().max().item<double>());
}

void check_against_formula(const std::string& preset, Spec s, int64_t B, int64_t T,
                           const std::string& transform_override = "") {
  const auto& pt = kPresets.at(preset);
  s.positional = pt.first;
  s.transform = transform_override.empty() ? pt.second : transform_override;
  auto o = options_for(preset, s);
  o.transform = transform_override;
  const auto method = attention::resolve_method(o);
  torch::manual_seed(1234 + T);
  const auto q = torch::randn({B, s.H, T, s.D}, torch::kFloat64);
  const auto k = torch::randn({B, s.H, T, s.D}, torch::kFloat64);
  const auto v = torch::randn({B, s.H, T, s.D}, torch::kFloat64);
  std::vector<double> hs;
  torch::Tensor head;
  if (s.transform == "logn") {
    for (int64_t h = 0; h < s.H; ++h) hs.push_back(0.2 + 0.15 * h);  // not all equal
    head = torch::tensor(hs, torch::kFloat64);
  }
  // A learned bias's values per head in hs (KERPLE: r1_0, r2_0, r1_1, …; T5: 32 buckets per
  // head), and the table the row builds from them (the reference's input).
  if (s.transform == "kerple-log")
    for (int64_t h = 0; h < s.H; ++h) hs.push_back(0.3 + 0.5 * h), hs.push_back(0.9 - 0.2 * h);
  if (s.transform == "t5-bias")
    for (int64_t e = 0; e < 32 * s.H; ++e) hs.push_back(std::sin(0.7 * double(e)));
  if (s.transform == "fire")  // w1, b1, w2 (32 each), b2, c, L / L_train per head
    for (int64_t h = 0; h < s.H; ++h) {
      for (int k = 0; k < 32; ++k) hs.push_back(1.0 + 0.1 * std::sin(double(k)));
      for (int k = 0; k < 32; ++k) hs.push_back(-(k + 0.5) / 32 + 0.05 * std::cos(double(k)));
      for (int k = 0; k < 32; ++k) hs.push_back(0.3 * std::sin(0.7 * k + double(h)));
      hs.insert(hs.end(), {0.1 * double(h), 0.1 + 0.05 * double(h), 0.3 + 0.1 * double(h)});
    }
  torch::Tensor bias;
  if (method.learned_bias()) {
    const auto table = attention::learned_bias_table_values(method, hs, T);
    bias = torch::tensor(table, torch::kFloat64).view({s.H, int64_t(table.size()) / s.H});
  }
  const auto [want_out, want_lse] = formula_attention(q, k, v, s, hs);
  const auto [out, lse] = attention::reference_attention_with_lse(q, k, v, method, head, bias);
  const std::string what = preset + (transform_override.empty() ? "" : "/" + transform_override) +
                           " T=" + std::to_string(T) + " L=" + std::to_string(s.L);
  EXPECT_LT(max_rel(out, want_out), 1e-10) << what;
  EXPECT_LT(max_rel(lse, want_lse), 1e-10) << what;
}

TEST(AttentionReference, EveryPresetMatchesTheFormulas) {
  Spec s;
  s.L = 32;
  for (const auto& name : attention::preset_names()) {
    ASSERT_TRUE(kPresets.count(name)) << name;
    check_against_formula(name, s, 2, 1);       // a single token
    check_against_formula(name, s, 2, 23);      // T < L
    check_against_formula(name, s, 1, 4 * 32);  // T = 4L: ntk, yarn, logn, … scaled
  }
}

TEST(AttentionReference, OverridesAndVariantsMatchTheFormulas) {
  Spec s;
  s.L = 32;
  check_against_formula("rope", s, 1, 100, "infoscale");
  check_against_formula("alibi", s, 1, 40, "scale-invariant");
  check_against_formula("nope", s, 1, 40, "logn");
  Spec t = s;
  t.truncate = true;
  t.p_fraction = 0.75;
  check_against_formula("p-rope", t, 1, 50);
  check_against_formula("si+p-rope", t, 1, 50);
  Spec f = s;
  f.p_fraction = 0.25;
  f.p_base = 64;
  f.tau = 3;
  check_against_formula("si+p-rope", f, 1, 70);
  Spec h6 = s;  // ALiBi's non-power-of-two slope rule inside the reference
  h6.H = 6;
  check_against_formula("alibi", h6, 1, 30);
  Spec y = s;  // YaRN with a training context long enough for all three ramp regimes
  y.L = 256;
  y.H = 2;
  check_against_formula("yarn", y, 1, 4 * 256);
}

TEST(AttentionReference, SlopeRulePortMatchesPinnedValues) {
  // Sanity of the test's own port (pinned values from the ALiBi paper's code).
  const auto s6 = formula_slopes(6);
  const std::vector<double> want = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(s6[i], want[i]);
  for (int64_t H : {1, 2, 3, 5, 6, 8, 12, 16, 24}) {
    const auto a = formula_slopes(H), b = attention::alibi_slopes(H);
    ASSERT_EQ(a.size(), b.size());
    for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(a[h], b[h], 1e-15) << H << " " << h;
  }
}

TEST(AttentionReference, DifferentiableWithLearnedHeadScale) {
  Spec s;
  attention::MethodOptions o = options_for("logn+rope", s);
  const auto method = attention::resolve_method(o);
  const auto q = torch::randn({1, 3, 10, 16}, torch::kFloat64).requires_grad_();
  const auto hs = torch::full({3}, 0.3, torch::kFloat64).requires_grad_();
  const auto out = attention::reference_attention(q, q.detach(), q.detach(), method, hs);
  out.sum().backward();
  EXPECT_TRUE(q.grad().defined());
  EXPECT_TRUE(hs.grad().defined());
  EXPECT_GT(hs.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
