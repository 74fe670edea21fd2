#include "attention/inspect.h"

#include "attention/method_tensors.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace attention {

namespace {

std::string num(double x, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string describe_positional(const Method& m) {
  switch (m.positional) {
    case Positional::kRoPE: return "rope (base " + num(m.value(Parameter::kRopeBase)) + ")";
    case Positional::kNTK: return "ntk (base " + num(m.value(Parameter::kRopeBase)) + ")";
    case Positional::kYaRN:
      return "yarn (base " + num(m.value(Parameter::kRopeBase)) + ", ramp alpha " + num(kYaRNAlpha) + ", beta " +
             num(kYaRNBeta) + ")";
    case Positional::kPRoPE:
      return m.p_rope_variant == PRoPEVariant::kRespread
                 ? "p-rope respread (fraction " + num(m.p_rope_fraction) + ", base " +
                       num(m.value(Parameter::kPRopeBase)) + ")"
                 : "p-rope truncate (fraction " + num(m.p_rope_fraction) + ", base " +
                       num(m.value(Parameter::kRopeBase)) + ")";
    case Positional::kALiBi: return "alibi";
    default: return "nope";
  }
}

// The declared parameters (parameters.h) this method reads, resolved.
std::string describe_parameters(const Method& m) {
  std::string out;
  for (const ParameterSpec& p : parameters())
    if (p.reads(m)) out += std::string(out.empty() ? "" : ", ") + p.name + " " + num(m.value(p.id));
  return out.empty() ? "none" : out;
}

// The learned bias's initial values, per parameter and head.
void write_learned_initial_values(std::ostringstream& os, const Method& m) {
  const auto& spec = transform_spec(m.transform);
  const std::vector<double> init = initial_learned_values(m);  // (H, P)
  const int64_t P = learned_values_per_head(m);
  int64_t column = 0;
  for (const auto& p : spec.learned) {
    os << "initial " << p.name << " (head 1.." << m.heads
       << (p.per_head > 1 ? ", " + std::to_string(p.per_head) + " values each" : std::string()) << ", learned"
       << (std::isfinite(p.floor) ? ", floor " + num(p.floor) : std::string()) << "):";
    for (int64_t h = 0; h < m.heads; ++h) {
      if (p.per_head > 1) os << (h ? " |" : "");
      for (int64_t k = 0; k < p.per_head; ++k) os << " " << num(init[size_t(h * P + column + k)]);
    }
    os << "\n";
    column += p.per_head;
  }
}

// The rotary pairs' frequencies and wavelengths at T (nothing for a method without rotation).
void write_rotary_frequencies(std::ostringstream& os, const Method& m, int64_t T) {
  const std::vector<double> freq = rotary_frequencies(m, T);
  if (freq.empty()) return;
  int64_t rotated = 0;
  for (double f : freq) rotated += f > 0;
  os << "rotary frequencies at T (half-split pairs (k, k+d/2); " << rotated << " of "
     << freq.size() << " pairs rotate):\n";
  os << "  pair  frequency (rad/token)  wavelength (tokens)\n";
  for (size_t k = 0; k < freq.size(); ++k) {
    char line[128];
    if (freq[k] > 0)
      std::snprintf(line, sizeof line, "  %4zu  %21.9g  %19.6g\n", k, freq[k],
                    2.0 * M_PI / freq[k]);
    else
      std::snprintf(line, sizeof line, "  %4zu  %21s  %19s\n", k, "0 (unrotated)", "-");
    os << line;
  }
}

}  // namespace

std::string inspect_method(const MethodOptions& options, const std::vector<int64_t>& distances,
                           int64_t T) {
  const Method m = resolve_method(options);
  check_context(m, T);
  const int64_t L = m.train_context;
  std::ostringstream os;
  os << "method " << m.preset << ": positional " << describe_positional(m) << ", transform "
     << transform_spec(m.transform).formula << "\n";
  os << "parameters read: " << describe_parameters(m) << "\n";
  os << "eval context T = " << T << ", train context L = " << (L > 0 ? std::to_string(L) : "not set")
     << ", heads " << m.heads << ", head_dim " << m.head_dim << "\n";
  os << "score s = " << num(m.score_scale) << "·q·k";
  if (m.positional == Positional::kYaRN) {
    os << "; YaRN scale factor T/L = " << num(yarn_factor(m, T)) << " (1 when T <= L), logit "
       << "multiplier (0.1·ln(T/L) + 1)^2 = " << num(yarn_logit_multiplier(m, T))
       << " (folded into the score scale)";
  }
  os << "\n";
  if (m.positional == Positional::kNTK)
    os << "NTK base at T: " << num(ntk_base(m, T), "%.10g")
       << (T > L ? "  (= base·(T/L)^(d/(d-2)))" : "  (T <= L: plain RoPE base)") << "\n";
  if (m.alibi()) {
    os << "ALiBi slopes (head 1.." << m.heads << "):";
    for (double s : alibi_slopes(m.heads)) os << " " << num(s);
    os << "\n";
  }
  if (m.learned_bias()) write_learned_initial_values(os, m);
  write_rotary_frequencies(os, m, T);
  os << "per distance t, query with n_i = T = " << T << " visible keys"
     << (m.learned_head_scale() ? " (s_h at its initial " + num(initial_head_scale(m)) + ")"
                                : std::string())
     << (m.learned_bias() ? " (learned bias parameters at their initial values)" : std::string())
     << ": logit = multiplier·s + bias\n";
  const double row = row_multiplier(m, T) * initial_head_scale(m);
  const bool per_head = m.alibi() || m.learned_bias();
  const int64_t bias_columns = per_head ? m.heads : 1;
  os << "  " << std::string(10, ' ') << "t" << "  " << std::string(8, ' ') << "multiplier";
  for (int64_t h = 0; h < bias_columns; ++h) {
    const std::string name = per_head ? "bias h" + std::to_string(h + 1) : "bias";
    os << "  " << std::string(18 - name.size(), ' ') << name;
  }
  os << "\n";
  for (int64_t t : distances) {
    if (t < 0) throw std::invalid_argument("inspect_method: distances must be >= 0");
    char line[64];
    std::snprintf(line, sizeof line, "  %11lld  %18.10g", (long long)t,
                  row * distance_multiplier(m, t));
    os << line;
    for (int64_t h = 0; h < bias_columns; ++h) {
      std::snprintf(line, sizeof line, "  %18.10g", distance_bias(m, t, h) + 0.0);  // no "-0"
      os << line;
    }
    if (t >= T) os << "  (not visible at T)";
    os << "\n";
  }
  return os.str();
}

}  // namespace attention
