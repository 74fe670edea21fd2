#include "attention/transforms.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace attention {

// The policy's formula (score_mod.h) in float64.
double scale_invariant_multiplier(double tau, int64_t t) { return scale_invariant_multiplier_of(double(t) / tau); }
double scale_invariant_bias(double tau, int64_t t) { return scale_invariant_bias_of(double(t) / tau); }

namespace {

double one(const Method&, int64_t) { return 1.0; }
double zero(const Method&, int64_t, int64_t) { return 0.0; }

// KERPLE-log's initial r1 (p = 0) and r2 (p = 1) of head h: the per-head quantiles of the uniform
// laws KERPLE's code draws from (r1 ~ U(0, 2), r2 ~ U(0, 1)), deterministic, spread from flat
// (small r1, r2) to local heads as ALiBi's slopes are.
double kerple_initial(const Method& m, int64_t h, int p) {
  const double u = (double(h) + 0.5) / double(m.heads);
  return p == 0 ? 2.0 * u : u;
}

double tau(const Method& m) { return m.value(Parameter::kTau); }

// InfoScale's exponent −2/d.
double info_exponent(const Method& m) { return -2.0 / double(m.head_dim); }

// A row with the defaults of a transform that changes nothing: rows below set only what differs,
// by field name.
TransformSpec row(Transform id, const char* name, const char* formula) {
  TransformSpec s{};
  s.id = id;
  s.name = name;
  s.formula = formula;
  s.needs_train_context = false;
  s.learned_head_scale = false;
  s.fill = [](const Method&, ScoreMod&) {};
  s.row = one;
  s.distance_multiplier = one;
  s.distance_bias = zero;
  s.initial_head_scale = nullptr;
  return s;
}

TransformSpec none() { return row(Transform::kNone, "none", "none"); }

// SSMax / LogN (arXiv 2501.19399): s_h·ln n_i·s, s_h learned from 1/ln L.
TransformSpec logn() {
  TransformSpec s = row(Transform::kLogN, "logn", "logn (s_h·ln n_i·s, learned s_h initialised to 1/ln L)");
  s.needs_train_context = true;
  s.learned_head_scale = true;
  s.fill = [](const Method&, ScoreMod& mod) { mod.row = RowFactor::kLogN; };
  s.row = [](const Method&, int64_t n) { return std::log(double(n)); };
  s.initial_head_scale = [](const Method& m) { return 1.0 / std::log(double(m.train_context)); };
  return s;
}

// arXiv 2505.17083: a_t·s + m_t, reading τ (parameters.h).
TransformSpec scale_invariant() {
  TransformSpec s = row(Transform::kScaleInvariant, "scale-invariant", "scale-invariant (a_t·s + m_t)");
  s.fill = [](const Method& m, ScoreMod& mod) {
    mod.distance = DistanceMod::kScaleInvariant;
    mod.inv_tau = float(1.0 / tau(m));
  };
  s.distance_multiplier = [](const Method& m, int64_t t) { return scale_invariant_multiplier(tau(m), t); };
  s.distance_bias = [](const Method& m, int64_t t, int64_t) { return scale_invariant_bias(tau(m), t); };
  return s;
}

// InfoScale: max(1, sqrt((1 − n_i^(−2/d)) / (1 − L^(−2/d))))·s.
TransformSpec infoscale() {
  TransformSpec s = row(Transform::kInfoScale, "infoscale",
                        "infoscale (max(1, sqrt((1-n_i^(-2/d))/(1-L^(-2/d))))·s)");
  s.needs_train_context = true;
  s.fill = [](const Method& m, ScoreMod& mod) {
    mod.row = RowFactor::kInfoScale;
    mod.info_exponent = float(info_exponent(m));
    mod.info_inv_denominator = float(1.0 / (1.0 - std::pow(double(m.train_context), info_exponent(m))));
  };
  s.row = [](const Method& m, int64_t n) {
    const double e = info_exponent(m);
    const double r = (1.0 - std::pow(double(n), e)) / (1.0 - std::pow(double(m.train_context), e));
    return std::max(1.0, std::sqrt(std::max(r, 0.0)));
  };
  return s;
}

// KERPLE-log (Chi et al. 2022, arXiv 2205.09921): s − r1_h·ln(1 + r2_h·t), r1, r2 learned per
// head and kept >= 0.01 (KERPLE clamps them so before every forward).
TransformSpec kerple_log() {
  TransformSpec s = row(Transform::kKerpleLog, "kerple-log",
                        "kerple-log (s − r1_h·ln(1 + r2_h·t), learned r1_h, r2_h >= 0.01)");
  s.learned = {{"kerple_r1", 1, 0.01, [](const Method& m, int64_t h, int64_t) { return kerple_initial(m, h, 0); }},
               {"kerple_r2", 1, 0.01, [](const Method& m, int64_t h, int64_t) { return kerple_initial(m, h, 1); }}};
  s.learned_bias = [](const Method&, const double* r, int64_t t) { return -r[0] * std::log1p(r[1] * double(t)); };
  s.learned_bias_grad = [](const Method&, const double* r, int64_t t, double g, double* d) {
    d[0] += g * -std::log1p(r[1] * double(t));              // ∂/∂r1
    d[1] += g * -r[0] * double(t) / (1.0 + r[1] * double(t));  // ∂/∂r2
  };
  return s;
}

// T5's relative attention bias (Raffel et al. 2020, arXiv 1910.10683), causal: a learned scalar
// per head and bucket of the distance; 16 exact buckets for t < 16, then 16 logarithmic ones up to
// t = 128, beyond which every distance shares the last (T5's defaults: 32 buckets, max distance
// 128; HF transformers' _relative_position_bucket with bidirectional=False). Initialised to 0
// (T5 draws them at random): a T5 model starts as NoPE, and every run starts from the same point.
constexpr int64_t kT5Buckets = 32, kT5MaxDistance = 128;

}  // namespace

int64_t t5_bucket(int64_t t) {
  const int64_t exact = kT5Buckets / 2;
  if (t < exact) return t;
  const auto log_bucket = int64_t(std::log(double(t) / double(exact)) /
                                  std::log(double(kT5MaxDistance) / double(exact)) * double(kT5Buckets - exact));
  return std::min(exact + log_bucket, kT5Buckets - 1);
}

namespace {

TransformSpec t5() {
  TransformSpec s = row(Transform::kT5, "t5-bias", "t5-bias (s + b_h(bucket(t)), 32 learned buckets per head)");
  s.learned = {{"t5_bias", kT5Buckets, -INFINITY, [](const Method&, int64_t, int64_t) { return 0.0; }}};
  s.learned_bias = [](const Method&, const double* b, int64_t t) { return b[t5_bucket(t)]; };
  s.learned_bias_grad = [](const Method&, const double*, int64_t t, double g, double* d) { d[t5_bucket(t)] += g; };
  return s;
}

// FIRE (Li et al. 2023, arXiv 2310.04418): s + f_h(ψ(t)/ψ(max(L_h, i))), ψ(y) = ln(1 + c_h·y), f_h a
// 1 → kFireWidth → 1 ReLU MLP. The kernels read f_h on a grid of x ∈ [0, 1], interpolated
// linearly (exact at the grid; a ReLU MLP is piecewise linear, so only a grid cell holding a kink
// differs), then c_h and L_h (score_mod.h: TableIndex::kFire). Per head, as every learned
// parameter here: FIRE shares the hidden layer, c and L across heads; per-head ones can represent
// that. Initialised to a hinge basis (w1 = 1, b1 = −(k + ½)/width: kinks spread over [0, 1]) with
// w2 = b2 = 0, so that a FIRE model starts as NoPE, deterministically (FIRE draws the MLP at
// random); c = 0.1 and L = L_train/4 as FIRE's 0.1 and 512 at its 2048 (L_h is learned in units of
// L_train, c_h ≥ 0.001 and L_h ≥ 0 before every forward).
using F = FireLayout;

double fire_initial(int64_t parameter, int64_t k) {
  switch (parameter) {
    case 0: return 1.0;                                              // w1
    case 1: return -(double(k) + 0.5) / double(kFireWidth);          // b1
    case 4: return 0.1;                                              // c
    case 5: return 0.25;                                             // L / L_train
    default: return 0.0;                                             // w2, b2
  }
}

// f_h(x_e) from head h's values p, or c_h, or L_h (in positions).
double fire_entry(const Method& m, const double* p, int64_t e) {
  if (e == kFireGrid) return p[F::kC];
  if (e == kFireGrid + 1) return p[F::kL] * double(m.train_context);
  const double x = double(e) / double(kFireGrid - 1);
  double f = p[F::kB2];
  for (int64_t k = 0; k < kFireWidth; ++k) f += p[F::kW2 + k] * std::max(0.0, p[F::kW1 + k] * x + p[F::kB1 + k]);
  return f;
}

void fire_entry_grad(const Method& m, const double* p, int64_t e, double g, double* d) {
  if (e == kFireGrid) {
    d[F::kC] += g;
    return;
  }
  if (e == kFireGrid + 1) {
    d[F::kL] += g * double(m.train_context);
    return;
  }
  const double x = double(e) / double(kFireGrid - 1);
  d[F::kB2] += g;
  for (int64_t k = 0; k < kFireWidth; ++k) {
    const double pre = p[F::kW1 + k] * x + p[F::kB1 + k];
    if (pre <= 0.0) continue;
    d[F::kW2 + k] += g * pre;
    d[F::kW1 + k] += g * p[F::kW2 + k] * x;
    d[F::kB1 + k] += g * p[F::kW2 + k];
  }
}

TransformSpec fire() {
  TransformSpec s = row(Transform::kFire, "fire",
                        "fire (s + f_h(psi(t)/psi(max(L_h, i))), psi(y) = ln(1 + c_h·y), f_h a learned MLP)");
  s.needs_train_context = true;
  s.table = TableIndex::kFire;
  s.fill = [](const Method&, ScoreMod& mod) { mod.table_index = TableIndex::kFire; };
  s.learned = {{"fire_w1", kFireWidth, -INFINITY, [](const Method&, int64_t, int64_t k) { return fire_initial(0, k); }},
               {"fire_b1", kFireWidth, -INFINITY, [](const Method&, int64_t, int64_t k) { return fire_initial(1, k); }},
               {"fire_w2", kFireWidth, -INFINITY, [](const Method&, int64_t, int64_t k) { return fire_initial(2, k); }},
               {"fire_b2", 1, -INFINITY, [](const Method&, int64_t, int64_t k) { return fire_initial(3, k); }},
               {"fire_c", 1, 0.001, [](const Method&, int64_t, int64_t k) { return fire_initial(4, k); }},
               {"fire_threshold", 1, 0.0, [](const Method&, int64_t, int64_t k) { return fire_initial(5, k); }}};
  s.learned_bias = fire_entry;
  s.learned_bias_grad = fire_entry_grad;
  return s;
}

}  // namespace

int64_t learned_table_length(const TransformSpec& spec, int64_t T) {
  return spec.table == TableIndex::kFire ? kFireGrid + 2 : T;
}

const std::vector<TransformSpec>& transforms() {
  // Built on first use, whatever the order of static initialisation between files.
  static const std::vector<TransformSpec> rows = {none(), logn(), scale_invariant(), infoscale(), kerple_log(), t5(),
                                                  fire()};
  return rows;
}

const TransformSpec& transform_spec(Transform t) {
  for (const auto& s : transforms())
    if (s.id == t) return s;
  throw std::logic_error("transform_spec: a Transform without a registry row");
}

const TransformSpec* find_transform(const std::string& name) {
  for (const auto& s : transforms())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace attention
