#include "attention/parameters.h"

#include "attention/method.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace attention {

namespace {

bool p_rope(const Method& m, PRoPEVariant variant) {
  return m.positional == Positional::kPRoPE && m.p_rope_variant == variant;
}

const std::vector<ParameterSpec> kParameters = {
    {Parameter::kTau, "tau", "scale-invariant τ (paper: 10 at L = 4096, i.e. about L/400)", 10.0,
     0.0, false, true, 400.0,
     [](const Method& m) { return m.transform == Transform::kScaleInvariant; }},
    {Parameter::kRopeBase, "rope_base", "RoPE base (rope, ntk, yarn, truncated p-rope)", 10000.0, 1.0,
     false, true, 0.0,
     [](const Method& m) {
       return m.positional == Positional::kRoPE || m.positional == Positional::kNTK ||
              m.positional == Positional::kYaRN || p_rope(m, PRoPEVariant::kTruncate);
     }},
    {Parameter::kPRopeBase, "p_rope_base",
     "respread p-RoPE: longest wavelength / 2π (paper: 1024 = L/4)", 1024.0, 1.0, true, true, 4.0,
     [](const Method& m) { return p_rope(m, PRoPEVariant::kRespread); }},
};

}  // namespace

std::string LengthValue::text() const {
  if (!relative) return fmt::format("{}", value);
  if (value == 1) return "L";
  if (value >= 1 && value == std::floor(value)) return fmt::format("{}L", value);
  const double inv = 1.0 / value;
  if (std::fabs(inv - std::round(inv)) < 1e-9) return fmt::format("L/{}", std::round(inv));
  return fmt::format("{}L", value);
}

const std::vector<ParameterSpec>& parameters() { return kParameters; }

const ParameterSpec& parameter_spec(Parameter p) {
  const auto& spec = kParameters.at(size_t(p));
  if (spec.id != p) throw std::logic_error("parameters(): rows out of the order of enum Parameter");
  return spec;
}

ParameterValues::ParameterValues() {
  for (const auto& spec : kParameters) values[size_t(spec.id)] = LengthValue(spec.default_value);
}

}  // namespace attention
