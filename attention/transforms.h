// The logit transforms, one registry row each: everything the harness knows about a transform
// besides its kernel policy (score_mod.h). Adding a fixed transform is one row here, one policy
// case there and one test; a learned distance bias is one row here (its parameters, value and
// gradient in float64), its table as torch ops in learned_bias.cpp, and no policy
// (attention/README.md walks through both); nothing else branches on the transform. The float64 reference (reference.cpp) keeps its own closed forms on purpose: it
// is the independent oracle the kernels and these rows are tested against.
#pragma once

#include "attention/method_types.h"
#include "attention/score_mod.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attention {

// One learned parameter of a distance bias, registered on the attention module as (H) when
// per_head is 1, else (H, per_head).
struct LearnedParameter {
  const char* name;   // the module's parameter name (kerple_r1)
  int64_t per_head;   // values per head
  double floor;       // clamped to at least this before every forward (-inf: never)
  // Initial value k (0 <= k < per_head) of head h.
  double (*initial)(const Method& m, int64_t head, int64_t k);
};

struct TransformSpec {
  Transform id;
  const char* name;     // the value of attention.transform
  const char* formula;  // what `harness attention inspect` prints
  bool needs_train_context;  // reads L (resolve_method requires train_context >= 2)
  bool learned_head_scale;   // a learned per-head multiplier s_h (the kernels' head_scale)
  // The policy's parameters (score_mod.h) at any context, from the method's declared parameters
  // (parameters.h: method.value(Parameter::k…)); scale and per-head pointers are not the
  // transform's.
  void (*fill)(const Method& m, ScoreMod& mod);
  // Closed forms in float64 (inspect, tests): the per-query factor with n visible keys (without
  // s_h), and the multiplier and bias at distance t.
  double (*row)(const Method& m, int64_t n);
  double (*distance_multiplier)(const Method& m, int64_t t);
  // The fixed bias at distance t (scale-invariant's m_t; a learned bias is below).
  double (*distance_bias)(const Method& m, int64_t t, int64_t head);
  // The initial value of s_h (learned_head_scale only).
  double (*initial_head_scale)(const Method& m);
  // A learned bias (score_mod.h's bias_table): its parameters, how kernels index its table
  // (kDistance: entry t is b_h(t), T entries; kFire: f_h on kFireGrid points, then c_h and L_h),
  // and in float64 the table's entry e from head h's values p (the parameters' per-head values
  // concatenated in `learned` order) and its gradient, dp[k] += g·∂entry/∂p[k]: inspect's values
  // and the check of learned_bias.cpp's table form (the same formula as torch ops on the
  // parameters' device, which builds the (H, entries) table autograd differentiates); the kernels
  // never see the parameters.
  std::vector<LearnedParameter> learned;
  TableIndex table = TableIndex::kDistance;
  double (*learned_bias)(const Method& m, const double* p, int64_t e) = nullptr;
  void (*learned_bias_grad)(const Method& m, const double* p, int64_t e, double g, double* dp) = nullptr;
};

// FIRE's table: f_h on kFireGrid points x_g = g/(kFireGrid − 1) of [0, 1] (odd spacing: the
// initial kinks at (k + ½)/kFireWidth never fall on a grid point), and its MLP's hidden width.
constexpr int64_t kFireGrid = 128;
constexpr int64_t kFireWidth = 32;
// Where FIRE's learned values of one head sit, in the row's `learned` order (transforms.cpp):
// w1, b1, w2 (kFireWidth each), b2, c, L / L_train; kCount in all. The row, its table form
// (learned_bias.cpp) and the tests index them by these.
struct FireLayout {
  static constexpr int64_t kW1 = 0, kB1 = kFireWidth, kW2 = 2 * kFireWidth, kB2 = 3 * kFireWidth;
  static constexpr int64_t kC = kB2 + 1, kL = kB2 + 2, kCount = kB2 + 3;
};
// Entries per head of a learned bias's table at context T: T by distance, kFireGrid + 2 for FIRE.
int64_t learned_table_length(const TransformSpec& spec, int64_t T);

const std::vector<TransformSpec>& transforms();
const TransformSpec& transform_spec(Transform t);
// Null when no transform has that name.
const TransformSpec* find_transform(const std::string& name);

// T5's causal bucket of distance t: t below 16, then 16 logarithmic buckets up to 128, then 31.
int64_t t5_bucket(int64_t t);

// Scale-invariant multiplier a_t = sqrt(1 + 2·ln(1 + t/τ)) and bias m_t = −2·ln(1 + t/τ).
double scale_invariant_multiplier(double tau, int64_t t);
double scale_invariant_bias(double tau, int64_t t);

}  // namespace attention
