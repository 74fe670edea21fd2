// The attention methods' numeric parameters (τ, the RoPE bases), one row each: the single source
// of a parameter's config key (attention.<name>), its default and range, whether it may be written
// relative to the training context L, and which methods read it. The config schema makes one key
// per row, the run id leaves a parameter out when the run's method does not read it, and
// resolve_method resolves and checks the values; a transform's policy reads them as
// method.value(Parameter::k…). Adding a parameter is an enum value (method_types.h) and a row here.
// (Learned parameters, such as KERPLE's r1 and r2, are declared by their transform's row instead:
// transforms.h.)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "attention/method_types.h"

namespace attention {

// A number given absolutely (`10`) or relative to the training context L (`L/400`, `4L`),
// resolved once L is known. The paper's constants assume L = 4096 (τ = 10 ≈ L/400, p-RoPE base
// 1024 = L/4); relative values carry those ratios to any L.
struct LengthValue {
  double value = 0.0;  // the absolute value, or the coefficient of L when relative
  bool relative = false;

  LengthValue() = default;
  LengthValue(double v) : value(v) {}  // NOLINT: an absolute value reads as a plain number
  LengthValue(double v, bool is_relative) : value(v), relative(is_relative) {}
  static LengthValue absolute(double v) { return {v, false}; }
  static LengthValue times_l(double coefficient) { return {coefficient, true}; }

  double resolve(int64_t train_context) const {
    return relative ? value * double(train_context) : value;
  }
  std::string text() const;  // as a user would write it: "0.16", "L/400", "4L"
};

struct ParameterSpec {
  Parameter id;
  const char* name;  // the config key is attention.<name>
  const char* help;  // what `harness config keys` prints
  double default_value;
  double min;              // the resolved value must be > min, or >= min when min_inclusive
  bool min_inclusive;
  bool may_be_relative;    // may be written relative to L (`L/400`)
  // About L / value at the paper's own setting (L = 4096), 0 when the parameter has none:
  // `config show` notes a run whose ratio is far from it.
  double paper_ratio;
  // Whether a (resolved) method reads it: otherwise it is not part of the run id, and
  // resolve_method leaves it unchecked (the config key still refuses a value outside the range:
  // no method could use it).
  bool (*reads)(const Method& m);
};

// In the order of enum Parameter (which is also the order of the config keys).
const std::vector<ParameterSpec>& parameters();
const ParameterSpec& parameter_spec(Parameter p);

// The values a config gives, indexed by Parameter; each starts at its row's default.
struct ParameterValues {
  ParameterValues();
  LengthValue& operator[](Parameter p) { return values[size_t(p)]; }
  const LengthValue& operator[](Parameter p) const { return values[size_t(p)]; }
  std::array<LengthValue, kParameterCount> values;
};

}  // namespace attention
