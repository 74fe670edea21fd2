// The method layer: closed forms, frequency tables, slopes, per-context quantities, score-mod.
// Every expectation is computed here from the papers' formulas, independently of method.cpp.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/inspect.h"
#include "attention/learned_bias.h"
#include "attention/method.h"
#include "attention/reference.h"
#include "attention/score_mod.h"
#include "test_models.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using attention::Method;
using attention::MethodOptions;

using test_support::method_options;

// ---- scale-invariant a_t, m_t ----------------------------------------------------------------

TEST(AttentionMethod, ScaleInvariantClosedFormAtTau10) {
  const double tau = 10.0;
  for (int64_t t : {0, 1, 10, 100, 1000, 10000, 65536}) {
    const double lg = std::log(1.0 + double(t) / tau);
    EXPECT_NEAR(attention::scale_invariant_multiplier(tau, t), std::sqrt(1.0 + 2.0 * lg), 1e-12)
        << "t = " << t;
    EXPECT_NEAR(attention::scale_invariant_bias(tau, t), -2.0 * lg, 1e-12) << "t = " << t;
  }
  EXPECT_EQ(attention::scale_invariant_multiplier(tau, 0), 1.0);
  EXPECT_EQ(attention::scale_invariant_bias(tau, 0), 0.0);
  // Hand-computed values: t = 10 → ln 2, t = 65536 → ln 6554.6.
  EXPECT_NEAR(attention::scale_invariant_multiplier(tau, 10), 1.544763529191407, 1e-12);
  EXPECT_NEAR(attention::scale_invariant_bias(tau, 10), -1.3862943611198906, 1e-12);
  EXPECT_NEAR(attention::scale_invariant_bias(tau, 65536), -2.0 * 8.787922372215355, 1e-12);
}

TEST(AttentionMethod, ScoreModMatchesClosedForms) {
  // The float-parameter ScoreMod the kernels consume agrees with the float64 closed forms (to the
  // precision of its float fields).
  auto o = method_options("si+p-rope");
  o.parameters[attention::Parameter::kTau] = 10.0;
  const Method m = attention::resolve_method(o);
  const attention::ScoreMod mod = attention::score_mod(m, 4096);
  EXPECT_EQ(mod.distance, attention::DistanceMod::kScaleInvariant);
  EXPECT_EQ(mod.row, attention::RowFactor::kNone);
  EXPECT_FLOAT_EQ(mod.scale, 0.25f);  // 1/sqrt(16)
  for (int t : {0, 1, 10, 100, 1000, 10000, 65536}) {
    const double lg = std::log1p(t / 10.0);
    EXPECT_NEAR(attention::distance_factor<double>(mod, t), std::sqrt(1 + 2 * lg), 1e-6);
    EXPECT_NEAR(attention::distance_bias<double>(mod, t, 0), -2 * lg, 1e-6);
  }
  // InfoScale row factor via the ScoreMod.
  o = method_options("rope", 16, 64);
  o.transform = "infoscale";
  const attention::ScoreMod info = attention::score_mod(attention::resolve_method(o), 1000);
  for (int n : {1, 2, 64, 65, 1000}) {
    const double r = (1 - std::pow(double(n), -2.0 / 16)) / (1 - std::pow(64.0, -2.0 / 16));
    EXPECT_NEAR(attention::row_factor<double>(info, n - 1), std::max(1.0, std::sqrt(r)), 1e-6);
  }
}

TEST(AttentionMethod, EveryRegistryTransformMatchesThePolicyAndTheReference) {
  // Each registry row three ways: its float64 closed forms, the policy it fills (what the kernels
  // evaluate), and the independent float64 reference's logits. A new row is covered here as is.
  const int64_t T = 40, H = 2, D = 16, L = 16;
  torch::manual_seed(7);
  const auto q = torch::randn({1, H, T, D}, torch::kFloat64);
  const auto k = torch::randn({1, H, T, D}, torch::kFloat64);
  const auto dots = torch::matmul(q, k.transpose(-2, -1))[0];  // (H, T, T)
  for (const auto& spec : attention::transforms()) {
    for (const std::string positional : {"nope", "alibi"}) {
      auto o = method_options("nope", D, L, H);
      o.positional = positional;
      o.transform = spec.name;
      o.parameters[attention::Parameter::kTau] = 0.5;
      const Method m = attention::resolve_method(o);
      EXPECT_EQ(attention::to_string(m.transform), spec.name);
      EXPECT_EQ(m.learned_head_scale(), spec.learned_head_scale) << spec.name;
      const auto head = m.learned_head_scale() ? torch::tensor({0.6, 1.3}, torch::kFloat64) : torch::Tensor();
      const std::vector<float> head_f = {0.6f, 1.3f};
      std::vector<float> slopes;
      for (double x : attention::alibi_slopes(H)) slopes.push_back(float(x));
      attention::ScoreMod mod = attention::score_mod(m, T);
      if (m.learned_head_scale()) mod.head_scale = head_f.data();
      if (m.alibi()) mod.alibi_slope = slopes.data();
      // A learned bias's table at its initial values (what the closed forms evaluate).
      const std::vector<double> table =
          attention::learned_bias_table_values(m, attention::initial_learned_values(m), T);  // (H, T)
      const std::vector<float> table_f(table.begin(), table.end());
      const int64_t E = attention::learned_table_length(spec, T);
      torch::Tensor bias;
      if (!table.empty()) {
        mod.bias_table = table_f.data();
        mod.bias_table_len = int(E);
        bias = torch::tensor(table, torch::kFloat64).view({H, E});
      }
      EXPECT_EQ(m.learned_bias(), spec.learned_bias != nullptr) << spec.name;
      EXPECT_EQ(m.learned_bias(), !spec.learned.empty()) << spec.name;
      const auto ref = attention::reference_logits(q, k, m, head, bias)[0];  // (H, T, T)
      for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) {
          const int t = i - j;
          const std::string at = std::string(spec.name) + " " + positional + " i=" + std::to_string(i) +
                                 " t=" + std::to_string(t);
          const double closed = attention::row_multiplier(m, i + 1) * attention::distance_multiplier(m, t);
          ASSERT_NEAR(attention::fixed_multiplier<double>(mod, i, t), closed, 1e-6 * std::abs(closed)) << at;
          for (int h = 0; h < H; ++h) {
            ASSERT_NEAR(attention::distance_bias<double>(mod, t, h), attention::distance_bias(m, t, h), 1e-5) << at;
            const double policy = attention::logit<double>(mod, dots[h][i][j].item<double>(), i, j, h);
            ASSERT_NEAR(policy, ref[h][i][j].item<double>(), 1e-5 * (1 + std::abs(policy))) << at;
          }
        }
    }
  }
}

// ---- learned distance biases ------------------------------------------------------------------

// A method of a learned row's transform alone: `heads` heads of width 8, L = 16.
MethodOptions learned_row_options(const attention::TransformSpec& spec, int64_t heads) {
  MethodOptions o;
  o.transform = spec.name;
  o.heads = heads;
  o.head_dim = 8;
  o.train_context = 16;
  return o;
}

// Every learned row's gradient (transforms.h: learned_bias_grad) against central differences of
// its own value, at values away from the initial ones; the table the module builds from its
// parameters (learned_bias.h) equals the row's closed form.
TEST(AttentionMethod, EveryLearnedBiasRowGradientMatchesFiniteDifferences) {
  int rows = 0;
  for (const attention::TransformSpec& spec : attention::transforms()) {
    if (!spec.learned_bias) continue;
    ++rows;
    const MethodOptions o = learned_row_options(spec, 2);
    const Method m = attention::resolve_method(o);
    const int64_t P = attention::learned_values_per_head(m);
    std::vector<double> p = attention::initial_learned_values(m);
    for (size_t e = 0; e < p.size(); ++e) p[e] = 0.7 * p[e] + 0.3 + 0.01 * double(e);
    for (int64_t t : {0, 1, 7, 15, 16, 40, 127, 128, 129, 1000}) {  // FIRE's entries: 130
      if (t >= attention::learned_table_length(spec, 1001)) continue;
      std::vector<double> d(size_t(P), 0.0);
      spec.learned_bias_grad(m, p.data() + P, t, 1.0, d.data());  // head 1
      for (int64_t k = 0; k < P; ++k) {
        std::vector<double> up(p.begin() + P, p.end()), down = up;
        up[size_t(k)] += 1e-6;
        down[size_t(k)] -= 1e-6;
        const double numeric = (spec.learned_bias(m, up.data(), t) - spec.learned_bias(m, down.data(), t)) / 2e-6;
        ASSERT_NEAR(d[size_t(k)], numeric, 1e-7 * (1 + std::abs(numeric))) << spec.name << " t=" << t << " k=" << k;
      }
    }
    // The module's table from its parameters: the closed form, entry by entry.
    attention::CausalAttention attn(o);
    {
      torch::NoGradGuard g;
      int64_t column = 0;
      for (size_t n = 0; n < spec.learned.size(); ++n) {
        auto& param = attn->learned_bias_params[n];
        ASSERT_EQ(param.numel(), 2 * spec.learned[n].per_head) << spec.name;
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t k = 0; k < spec.learned[n].per_head; ++k)
            param.view(-1)[h * spec.learned[n].per_head + k] = p[size_t(h * P + column + k)];
        column += spec.learned[n].per_head;
      }
    }
    const auto table = attn->bias_table(200).to(torch::kFloat64);
    const auto want = attention::learned_bias_table_values(m, p, 200);
    ASSERT_EQ(table.numel(), int64_t(want.size())) << spec.name;
    for (int64_t e = 0; e < table.numel(); ++e)
      ASSERT_NEAR(table.view(-1)[e].item<double>(), want[size_t(e)], 1e-6 * (1 + std::abs(want[size_t(e)])))
          << spec.name << " entry " << e;
  }
  EXPECT_GE(rows, 3);  // kerple-log, t5-bias, fire
}

// learned_bias.cpp's table forms (torch ops, differentiated by autograd) against each row's float64
// closed forms: the table entry by entry, the gradient of ⟨G, table⟩ w.r.t. every parameter
// against learned_bias_grad contracted with G, learned_bias_table_backward against autograd, a
// value below its floor differentiated at the floor (straight through); and on the meta device,
// whose tensors have no data to copy, the table is built there: nothing goes through the host.
TEST(AttentionMethod, LearnedBiasTablesAreBuiltOnTheParametersDevice) {
  int rows = 0;
  for (const attention::TransformSpec& spec : attention::transforms()) {
    if (!spec.learned_bias) continue;
    ++rows;
    const Method m = attention::resolve_method(learned_row_options(spec, 3));
    const int64_t H = 3, T = 300, P = attention::learned_values_per_head(m);
    const int64_t E = attention::learned_table_length(spec, T);  // T, or FIRE's 130
    std::vector<double> p = attention::initial_learned_values(m);
    for (size_t e = 0; e < p.size(); ++e) p[e] = 0.6 * p[e] + 0.2 + 0.013 * double(e);
    // The parameters as the module holds them, one tensor per `learned` entry; the first value of
    // each below its floor where it has one.
    std::vector<torch::Tensor> params;
    std::vector<double> floored = p;
    int64_t column = 0;
    for (const auto& lp : spec.learned) {
      auto t = torch::empty({H, lp.per_head}, torch::kFloat64);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t k = 0; k < lp.per_head; ++k) t[h][k] = p[size_t(h * P + column + k)];
      if (std::isfinite(lp.floor)) {
        t[0][0] = lp.floor - 0.5;
        floored[size_t(column)] = lp.floor;
      }
      params.push_back((lp.per_head == 1 ? t.view({H}) : t).requires_grad_(true));
      column += lp.per_head;
    }
    const auto table = attention::learned_bias_table(m, params, T);
    ASSERT_EQ(table.sizes(), (std::vector<int64_t>{H, E})) << spec.name;
    ASSERT_EQ(table.scalar_type(), torch::kFloat64) << spec.name;
    const auto want = attention::learned_bias_table_values(m, floored, T);
    for (int64_t e = 0; e < H * E; ++e)
      ASSERT_NEAR(table.view(-1)[e].item<double>(), want[size_t(e)], 1e-12 * (1 + std::abs(want[size_t(e)])))
          << spec.name << " entry " << e;
    // ⟨G, table⟩'s gradient against the closed form's, with G varied over every entry.
    const auto G = torch::sin(torch::arange(H * E, torch::kFloat64) * 0.37).view({H, E});
    const auto grads = torch::autograd::grad({(table * G).sum()}, params);
    std::vector<double> closed(size_t(H * P), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < E; ++t)
        spec.learned_bias_grad(m, floored.data() + h * P, t, G[h][t].item<double>(), closed.data() + h * P);
    const auto backward = attention::learned_bias_table_backward(m, params, G);
    column = 0;
    for (size_t n = 0; n < spec.learned.size(); ++n) {
      const int64_t w = spec.learned[n].per_head;
      const auto g = grads[n].reshape({H, w}), b = backward[n].reshape({H, w});
      for (int64_t h = 0; h < H; ++h)
        for (int64_t k = 0; k < w; ++k) {
          const double c = closed[size_t(h * P + column + k)];
          EXPECT_NEAR(g[h][k].item<double>(), c, 1e-10 * (1 + std::abs(c))) << spec.name << " " << n << " " << h;
          EXPECT_NEAR(b[h][k].item<double>(), g[h][k].item<double>(), 1e-12 * (1 + std::abs(c))) << spec.name;
        }
      column += w;
    }
    // On the meta device (shapes only, no data): built there, or this throws.
    std::vector<torch::Tensor> meta;
    for (const auto& q : params) meta.push_back(torch::empty(q.sizes(), q.options().device(torch::kMeta)));
    const auto on_meta = attention::learned_bias_table(m, meta, T);
    EXPECT_EQ(on_meta.device().type(), torch::kMeta) << spec.name;
    EXPECT_EQ(on_meta.sizes(), (std::vector<int64_t>{H, E})) << spec.name;
  }
  EXPECT_GE(rows, 3);  // kerple-log, t5-bias, fire
}

// FIRE's bias as the kernels read it (score_mod.h: f_h on kFireGrid points, linear between them)
// against the paper's MLP evaluated exactly at x = ψ(t)/ψ(max(L, i)): equal within the lerp's
// bound, which for a piecewise-linear f is (cell width / 4)·Σ_k |slope jump of unit k| =
// (1 / (4·(G − 1)))·Σ_k |w2_k·w1_k|; at query rows on both sides of the threshold. And a FIRE model
// starts as NoPE: its bias is 0 everywhere at the initial values.
TEST(AttentionMethod, FireBiasIsThePapersMlpWithinItsGrid) {
  const auto& spec = attention::transform_spec(attention::Transform::kFire);
  const Method m = attention::resolve_method(learned_row_options(spec, 2));
  using F = attention::FireLayout;
  const int64_t P = attention::learned_values_per_head(m), W = attention::kFireWidth;
  ASSERT_EQ(P, F::kCount);
  std::vector<double> p(size_t(2 * P));  // w1, b1, w2 (W each), b2, c, L / L_train per head
  for (int64_t h = 0; h < 2; ++h) {
    double* v = p.data() + h * P;
    for (int64_t k = 0; k < W; ++k) {
      v[F::kW1 + k] = 1.5 * std::sin(0.9 * double(k + h)) + 0.2;
      v[F::kB1 + k] = 0.8 * std::cos(1.3 * double(k));
      v[F::kW2 + k] = 0.7 * std::sin(0.4 * double(k) + double(h));
    }
    v[F::kB2] = 0.3, v[F::kC] = 0.05 + 0.1 * double(h), v[F::kL] = 0.4;
  }
  const std::vector<double> table = attention::learned_bias_table_values(m, p, 1);
  const std::vector<float> table_f(table.begin(), table.end());
  attention::ScoreMod mod = attention::score_mod(m, 1000);
  mod.bias_table = table_f.data();
  mod.bias_table_len = int(attention::learned_table_length(spec, 1000));
  const double L = 0.4 * double(m.train_context);
  for (int64_t h = 0; h < 2; ++h) {
    const double* v = p.data() + h * P;
    double jumps = 0;
    for (int64_t k = 0; k < W; ++k) jumps += std::abs(v[F::kW1 + k] * v[F::kW2 + k]);
    const double bound = jumps / (4.0 * double(attention::kFireGrid - 1)) + 1e-4;
    double worst = 0;
    for (int i : {0, 3, 50, int(L) + 1, 400, 999})
      for (int t = 0; t <= i; t += 1 + t / 7) {
        const double c = v[F::kC];
        const double x = std::log1p(c * t) / (std::log1p(c * std::max(L, double(i))) + double(attention::kFireEps));
        double exact = v[F::kB2];
        for (int64_t k = 0; k < W; ++k) exact += v[F::kW2 + k] * std::max(0.0, v[F::kW1 + k] * x + v[F::kB1 + k]);
        const double policy = attention::query_bias<double>(mod, i, t, int(h));
        worst = std::max(worst, std::abs(policy - exact));
        ASSERT_NEAR(policy, exact, bound) << "h=" << h << " i=" << i << " t=" << t;
      }
    EXPECT_GT(worst, 1e-6) << "the grid is exact everywhere: the bound is not being exercised";
  }
  // At the initial values f = 0: a FIRE model starts as NoPE.
  const std::vector<double> initial = attention::learned_bias_table_values(m, attention::initial_learned_values(m), 1);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t g = 0; g < attention::kFireGrid; ++g) EXPECT_EQ(initial[size_t(h * (attention::kFireGrid + 2) + g)], 0.0);
}

// FireLayout (transforms.h) places each of the row's learned parameters where the row's `learned`
// order puts its values: the layout the closed forms, the table form and the tests index by.
TEST(AttentionMethod, FireLayoutIsTheRowsLearnedOrder) {
  using F = attention::FireLayout;
  const std::map<std::string, std::pair<int64_t, int64_t>> want = {  // name → (offset, values)
      {"fire_w1", {F::kW1, attention::kFireWidth}}, {"fire_b1", {F::kB1, attention::kFireWidth}},
      {"fire_w2", {F::kW2, attention::kFireWidth}}, {"fire_b2", {F::kB2, 1}},
      {"fire_c", {F::kC, 1}},                       {"fire_threshold", {F::kL, 1}}};
  int64_t offset = 0;
  for (const auto& p : attention::transform_spec(attention::Transform::kFire).learned) {
    ASSERT_EQ(want.count(p.name), 1u) << p.name;
    EXPECT_EQ(std::make_pair(offset, p.per_head), want.at(p.name)) << p.name;
    offset += p.per_head;
  }
  EXPECT_EQ(offset, F::kCount);
}

TEST(AttentionMethod, KerpleLogBiasInitAndClamp) {
  // The row's bias −r1·ln(1 + r2·t) at a hand-computed point, the per-head initial values, and
  // the module's floor.
  const auto& spec = attention::transform_spec(attention::Transform::kKerpleLog);
  const Method m = attention::resolve_method(method_options("kerple", 16, 64, 4));
  const double r[2] = {1.3, 0.4};
  EXPECT_NEAR(spec.learned_bias(m, r, 7), -1.3 * std::log(3.8), 1e-14);
  EXPECT_EQ(spec.learned_bias(m, r, 0), 0.0);

  // Presets: kerple = NoPE × kerple-log, kerple+p-rope; r1 = 2(h + ½)/H, r2 = (h + ½)/H.
  EXPECT_EQ(m.positional, attention::Positional::kNoPE);
  EXPECT_TRUE(m.learned_bias());
  EXPECT_EQ(attention::resolve_method(method_options("kerple+p-rope")).positional, attention::Positional::kPRoPE);
  const auto init = attention::initial_learned_values(m);  // (H, 2)
  ASSERT_EQ(init.size(), 8u);
  for (int h = 0; h < 4; ++h) {
    EXPECT_DOUBLE_EQ(init[size_t(2 * h)], 2.0 * (h + 0.5) / 4);
    EXPECT_DOUBLE_EQ(init[size_t(2 * h + 1)], (h + 0.5) / 4);
  }
  EXPECT_TRUE(attention::initial_learned_values(attention::resolve_method(method_options("alibi"))).empty());

  // The module registers kerple_r1, kerple_r2 (H), as checkpoints before the bias became a
  // table did, and clamps them to 0.01 before a forward.
  attention::CausalAttention attn(method_options("kerple", 8, 16, 2));
  const auto params = attn->named_parameters();
  ASSERT_TRUE(params.contains("kerple_r1") && params.contains("kerple_r2"));
  EXPECT_EQ(params["kerple_r1"].sizes(), torch::IntArrayRef({2}));
  {
    torch::NoGradGuard g;
    attn->learned_bias_params[0].fill_(-3.0);
  }
  const auto x = torch::randn({1, 2, 5, 8});
  attn->forward(x, x, x);
  EXPECT_TRUE(attn->learned_bias_params[0].eq(0.01f).all().item<bool>());
}

// ---- score-mod per method -----------------------------------------------------------------------

TEST(AttentionMethod, ScoreModPerPreset) {
  using attention::DistanceMod;
  using attention::RowFactor;
  struct Want {
    const char* name;
    RowFactor row;
    DistanceMod dist;
  };
  for (const Want& w : {Want{"rope", RowFactor::kNone, DistanceMod::kNone},
                        Want{"p-rope", RowFactor::kNone, DistanceMod::kNone},
                        Want{"nope", RowFactor::kNone, DistanceMod::kNone},
                        Want{"rope+ntk", RowFactor::kNone, DistanceMod::kNone},
                        Want{"yarn", RowFactor::kNone, DistanceMod::kNone},
                        Want{"logn+rope", RowFactor::kLogN, DistanceMod::kNone},
                        Want{"logn+p-rope", RowFactor::kLogN, DistanceMod::kNone},
                        Want{"logn+ntk", RowFactor::kLogN, DistanceMod::kNone},
                        Want{"alibi", RowFactor::kNone, DistanceMod::kNone},
                        Want{"si+p-rope", RowFactor::kNone, DistanceMod::kScaleInvariant},
                        Want{"si+rope", RowFactor::kNone, DistanceMod::kScaleInvariant},
                        Want{"si+nope", RowFactor::kNone, DistanceMod::kScaleInvariant},
                        Want{"kerple", RowFactor::kNone, DistanceMod::kNone},
                        Want{"kerple+p-rope", RowFactor::kNone, DistanceMod::kNone}}) {
    const auto mod = attention::score_mod(attention::resolve_method(method_options(w.name)), 128);
    EXPECT_EQ(mod.row, w.row) << w.name;
    EXPECT_EQ(mod.distance, w.dist) << w.name;
    EXPECT_EQ(mod.head_scale, nullptr);
    EXPECT_EQ(mod.alibi_slope, nullptr);
    EXPECT_EQ(mod.bias_table, nullptr);  // a learned bias's table travels as a tensor
  }
  // Every preset resolves, under a name of its own.
  const auto names = attention::preset_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const auto& name : names) EXPECT_EQ(attention::resolve_method(method_options(name)).preset, name);
  // Overrides compose: NoPE positions with the InfoScale transform.
  auto o = method_options("si+p-rope");
  o.positional = "alibi";
  o.transform = "infoscale";
  const Method m = attention::resolve_method(o);
  EXPECT_EQ(m.positional, attention::Positional::kALiBi);
  EXPECT_EQ(m.transform, attention::Transform::kInfoScale);
}

// ---- the options' key: every field ---------------------------------------------------------------

// How many initialisers an aggregate takes (a base class counts as one): its fields, counted by
// the compiler, not by a list kept here.
struct AnyField {
  template <class T>
  operator T() const;  // NOLINT: converts to any field's type, in unevaluated code only
};
template <class T, class... Fields>
constexpr auto takes(int) -> decltype(T{Fields{}...}, true) { return true; }
template <class T, class...>
constexpr bool takes(long) { return false; }
template <class T, class... Fields>
constexpr size_t field_count() {
  if constexpr (takes<T, Fields..., AnyField>(0)) return field_count<T, Fields..., AnyField>();
  else return sizeof...(Fields);
}

// The n-th change of one field, false when it has fewer: a string or number, or one parameter's
// value or its being relative to L.
bool change(std::string& s, size_t n) { return n == 0 && (s += "x", true); }
bool change(double& x, size_t n) { return n == 0 && (x += 0.5, true); }
bool change(int64_t& x, size_t n) { return n == 0 && (x += 1, true); }
bool change(attention::ParameterValues& p, size_t n) {
  if (n >= 2 * p.values.size()) return false;
  attention::LengthValue& v = p.values[n / 2];
  n % 2 == 0 ? void(v.value += 0.5) : void(v.relative = !v.relative);
  return true;
}

TEST(AttentionMethod, OptionsKeyVisitsEveryField) {
  size_t visited = 0;
  const MethodOptions o = method_options("si+p-rope");
  attention::for_each_field(o, [&](const auto&) { ++visited; });
  EXPECT_EQ(visited, field_count<attention::MethodConfig>() + field_count<MethodOptions>() - 1)
      << "a field of MethodConfig or MethodOptions that for_each_field (method_options.h) leaves out";
}

TEST(AttentionMethod, OptionsKeyChangesWithEveryField) {
  const MethodOptions base = method_options("si+p-rope");
  EXPECT_EQ(attention::options_key(base), attention::options_key(method_options("si+p-rope")));
  std::set<std::string> keys{attention::options_key(base)};
  size_t changes = 0, field = 0;
  for (;; ++field) {
    bool exists = false;
    for (size_t n = 0;; ++n) {
      MethodOptions o = base;
      bool changed = false;
      size_t i = 0;
      attention::for_each_field(o, [&](auto& f) {
        if (i++ == field) exists = true, changed = change(f, n);
      });
      if (!changed) break;
      ++changes;
      EXPECT_TRUE(keys.insert(attention::options_key(o)).second) << "field " << field << ", change " << n;
    }
    if (!exists) break;
  }
  EXPECT_EQ(changes, field - 1 + 2 * attention::kParameterCount);  // the parameters: each twice
}

// ---- inspect ------------------------------------------------------------------------------------

TEST(AttentionMethod, InspectShowsMultiplierBiasAndFrequencies) {
  auto o = method_options("si+p-rope", 64, 1024);
  o.parameters[attention::Parameter::kTau] = 10;
  const std::string s = attention::inspect_method(o, {0, 1, 10, 100, 1000}, 4096);
  EXPECT_NE(s.find("si+p-rope"), std::string::npos);
  EXPECT_NE(s.find("16 of 32 pairs rotate"), std::string::npos) << s;
  EXPECT_NE(s.find("1.544763529"), std::string::npos) << s;   // a_10
  EXPECT_NE(s.find("-1.386294361"), std::string::npos) << s;  // m_10
  auto a = method_options("alibi", 64, 1024, 6);
  const std::string sa = attention::inspect_method(a, {0, 10}, 100);
  EXPECT_NE(sa.find("0.25 0.0625 0.015625 0.00390625 0.5 0.125"), std::string::npos) << sa;
  EXPECT_NE(attention::inspect_method(method_options("rope+ntk", 64, 1024), {1}, 4096).find("NTK base"),
            std::string::npos);
  EXPECT_NE(attention::inspect_method(method_options("yarn", 64, 1024), {1}, 4096).find("1.29648"),
            std::string::npos);  // (0.1·ln 4 + 1)^2
}

}  // namespace
