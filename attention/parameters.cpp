#include "attention/parameters.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace attention {

namespace {

bool p_rope(const Method& m, PRoPEVariant variant) {
  return m.positional == Positional::kPRoPE && m.p_rope_variant == variant;
}

ParameterSpec tau() {
  ParameterSpec s{};
  s.id = Parameter::kTau;
  s.name = "tau";
  s.help = "scale-invariant τ (paper: 10 at L = 4096, i.e. about L/400)";
  s.default_value = 10.0;
  s.min = 0.0;  // τ > 0
  s.min_inclusive = false;
  s.may_be_relative = true;
  s.paper_ratio = 400.0;
  s.reads = [](const Method& m) { return m.transform == Transform::kScaleInvariant; };
  return s;
}

ParameterSpec rope_base() {
  ParameterSpec s{};
  s.id = Parameter::kRopeBase;
  s.name = "rope_base";
  s.help = "RoPE base (rope, ntk, yarn, truncated p-rope)";
  s.default_value = 10000.0;
  s.min = 1.0;  // base > 1: every pair rotates slower than the one before
  s.min_inclusive = false;
  s.may_be_relative = true;
  s.paper_ratio = 0.0;
  s.reads = [](const Method& m) {
    return m.positional == Positional::kRoPE || m.positional == Positional::kNTK ||
           m.positional == Positional::kYaRN || p_rope(m, PRoPEVariant::kTruncate);
  };
  return s;
}

ParameterSpec p_rope_base() {
  ParameterSpec s{};
  s.id = Parameter::kPRopeBase;
  s.name = "p_rope_base";
  s.help = "respread p-RoPE: longest wavelength / 2π (paper: 1024 = L/4)";
  s.default_value = 1024.0;
  s.min = 1.0;
  s.min_inclusive = true;
  s.may_be_relative = true;
  s.paper_ratio = 4.0;
  s.reads = [](const Method& m) { return p_rope(m, PRoPEVariant::kRespread); };
  return s;
}


// The shortest text that reads back as x, as fmt's "{}" writes it ("10", "100000", "0.0025";
// exponents only outside [1e-4, 1e16), which a config would not hold), without fmt: this file
// stays free of dependencies (the CUDA kernel test links it).
std::string number(double x) {
  char buf[64];
  const double a = std::fabs(x);
  const auto format = a == 0 || (a >= 1e-4 && a < 1e16) ? std::chars_format::fixed : std::chars_format::scientific;
  const auto end = std::to_chars(buf, buf + sizeof(buf), x, format).ptr;
  return std::string(buf, end);
}

}  // namespace

std::string LengthValue::text() const {
  if (!relative) return number(value);
  if (value == 1) return "L";
  if (value >= 1 && value == std::floor(value)) return number(value) + "L";
  const double inv = 1.0 / value;
  if (std::fabs(inv - std::round(inv)) < 1e-9) return "L/" + number(std::round(inv));
  return number(value) + "L";
}

const std::vector<ParameterSpec>& parameters() {
  // In the order of enum Parameter. A function-local static: built on first use, whatever the
  // order of static initialisation between files.
  static const std::vector<ParameterSpec> rows = {tau(), rope_base(), p_rope_base()};
  return rows;
}

const ParameterSpec& parameter_spec(Parameter p) {
  const auto& spec = parameters().at(size_t(p));
  if (spec.id != p) throw std::logic_error("parameters(): rows out of the order of enum Parameter");
  return spec;
}

ParameterValues::ParameterValues() {
  for (const auto& spec : parameters()) values[size_t(spec.id)] = LengthValue(spec.default_value);
}

}  // namespace attention
