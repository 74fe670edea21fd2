#include "attention/method.h"


#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace attention {

namespace {

struct Preset {
  const char* name;
  Positional positional;
  Transform transform;
};

// The baselines of the paper's Table 1 / Appendix I, its own method (si+…), and the learned
// distance biases KERPLE-log and T5's buckets.
const Preset kPresets[] = {
    {"rope", Positional::kRoPE, Transform::kNone},
    {"p-rope", Positional::kPRoPE, Transform::kNone},
    {"nope", Positional::kNoPE, Transform::kNone},
    {"rope+ntk", Positional::kNTK, Transform::kNone},
    {"yarn", Positional::kYaRN, Transform::kNone},
    {"logn+rope", Positional::kRoPE, Transform::kLogN},
    {"logn+p-rope", Positional::kPRoPE, Transform::kLogN},
    {"logn+ntk", Positional::kNTK, Transform::kLogN},
    {"alibi", Positional::kALiBi, Transform::kNone},
    {"si+p-rope", Positional::kPRoPE, Transform::kScaleInvariant},
    {"si+rope", Positional::kRoPE, Transform::kScaleInvariant},
    {"si+nope", Positional::kNoPE, Transform::kScaleInvariant},
    {"kerple", Positional::kNoPE, Transform::kKerpleLog},
    {"kerple+p-rope", Positional::kPRoPE, Transform::kKerpleLog},
    {"t5", Positional::kNoPE, Transform::kT5},
    {"fire", Positional::kNoPE, Transform::kFire},
    {"fire+p-rope", Positional::kPRoPE, Transform::kFire},
};

const std::pair<const char*, Positional> kPositionals[] = {
    {"nope", Positional::kNoPE}, {"rope", Positional::kRoPE}, {"p-rope", Positional::kPRoPE},
    {"ntk", Positional::kNTK},   {"yarn", Positional::kYaRN}, {"alibi", Positional::kALiBi},
};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("attention: " + what); }

std::string fmt(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}
std::vector<std::string> positional_names() {
  std::vector<std::string> names;
  for (const auto& p : kPositionals) names.emplace_back(p.first);
  return names;
}
std::vector<std::string> transform_names() {
  std::vector<std::string> names;
  for (const auto& t : transforms()) names.emplace_back(t.name);
  return names;
}
std::vector<std::string> kernel_names() { return {"reference", "fused", "cuda"}; }

std::string to_string(Positional p) {
  for (const auto& e : kPositionals)
    if (e.second == p) return e.first;
  return "?";
}
std::string to_string(Transform t) { return transform_spec(t).name; }

bool Method::rotary() const {
  return positional == Positional::kRoPE || positional == Positional::kPRoPE ||
         positional == Positional::kNTK || positional == Positional::kYaRN;
}

bool Method::learned_head_scale() const { return transform_spec(transform).learned_head_scale; }
bool Method::learned_bias() const { return transform_spec(transform).learned_bias != nullptr; }

namespace {

// The names of the options (preset, positional encoding, transform, p-RoPE variant, kernel) as
// the registry's values.
void resolve_names(const MethodOptions& o, Method& m) {
  const Preset* preset = nullptr;
  for (const auto& p : kPresets)
    if (o.method == p.name) preset = &p;
  if (!preset) bad("unknown method '" + o.method + "'; valid methods: " + join(preset_names()));
  m.preset = preset->name;
  m.positional = preset->positional;
  m.transform = preset->transform;

  if (!o.positional.empty()) {
    bool found = false;
    for (const auto& p : kPositionals)
      if (o.positional == p.first) m.positional = p.second, found = true;
    if (!found)
      bad("unknown positional encoding '" + o.positional +
          "'; valid positional encodings: " + join(positional_names()));
  }
  if (!o.transform.empty()) {
    const TransformSpec* t = find_transform(o.transform);
    if (!t)
      bad("unknown logit transform '" + o.transform +
          "'; valid transforms: " + join(transform_names()));
    m.transform = t->id;
  }
  if (o.p_rope_variant == "respread")
    m.p_rope_variant = PRoPEVariant::kRespread;
  else if (o.p_rope_variant == "truncate")
    m.p_rope_variant = PRoPEVariant::kTruncate;
  else
    bad("unknown p_rope_variant '" + o.p_rope_variant + "'; valid variants: respread, truncate");

  const auto kernels = kernel_names();
  if (std::find(kernels.begin(), kernels.end(), o.kernel) == kernels.end())
    bad("unknown kernel '" + o.kernel + "'; valid kernels: " + join(kernels));
  m.kernel = o.kernel == "reference" ? Kernel::kReference : o.kernel == "cuda" ? Kernel::kCuda : Kernel::kFused;
}

// Heads, head size, score scale and p-RoPE fraction, and what the rotary encodings need of them.
void resolve_shape(const MethodOptions& o, Method& m) {
  if (o.heads < 1) bad("heads must be >= 1, got " + std::to_string(o.heads));
  if (o.head_dim < 1) bad("head_dim must be >= 1, got " + std::to_string(o.head_dim));
  m.heads = o.heads;
  m.head_dim = o.head_dim;

  if (!(o.score_scale >= 0) || !std::isfinite(o.score_scale))
    bad("score_scale must be >= 0 (0 = 1/sqrt(head_dim)), got " + fmt(o.score_scale));
  m.score_scale = o.score_scale > 0 ? o.score_scale : 1.0 / std::sqrt(double(o.head_dim));

  // p: < 0 selects the variant's default; NaN or > 1 is an error.
  if (std::isnan(o.p_rope_fraction) || o.p_rope_fraction > 1)
    bad("p_rope_fraction must be in [0, 1] (or < 0 for the variant's default), got " +
        fmt(o.p_rope_fraction));
  m.p_rope_fraction = o.p_rope_fraction >= 0 ? o.p_rope_fraction : default_p_rope_fraction(m.p_rope_variant);

  if (m.rotary() && o.head_dim % 2 != 0)
    bad("head_dim must be even for the rotary encoding '" + to_string(m.positional) + "', got " +
        std::to_string(o.head_dim));
  if (m.positional == Positional::kNTK && o.head_dim <= 2)
    bad("ntk needs head_dim > 2 (the base exponent is D/(D-2)), got " +
        std::to_string(o.head_dim));
}

// The declared parameters and the training context, checked where the method reads them.
void resolve_parameters(const MethodOptions& o, Method& m) {
  for (const ParameterSpec& p : parameters()) {
    const LengthValue& given = o.parameters[p.id];
    const double v = given.resolve(o.train_context);
    m.values[size_t(p.id)] = v;
    if (!p.reads(m)) continue;
    if (given.relative && o.train_context < 1)
      bad(std::string(p.name) + " = " + given.text() +
          " is relative to the training context, but train_context is " +
          std::to_string(o.train_context));
    if (!(p.min_inclusive ? v >= p.min : v > p.min) || !std::isfinite(v))
      bad(std::string(p.name) + " must be " + (p.min_inclusive ? ">= " : "> ") + fmt(p.min) +
          " for " + to_string(m.positional) + " × " + to_string(m.transform) + ", got " + fmt(v));
  }

  const bool needs_L = m.positional == Positional::kNTK || m.positional == Positional::kYaRN ||
                       transform_spec(m.transform).needs_train_context;
  if (needs_L && o.train_context < 2)
    bad("method '" + o.method + "' (" + to_string(m.positional) + " × " +
        to_string(m.transform) + ") needs train_context >= 2, got " +
        std::to_string(o.train_context));
  if (o.train_context < 0) bad("train_context must be >= 0, got " + std::to_string(o.train_context));
  m.train_context = o.train_context;
}

}  // namespace

Method resolve_method(const MethodOptions& o) {
  Method m;
  resolve_names(o, m);
  resolve_shape(o, m);
  resolve_parameters(o, m);
  return m;
}

namespace {

// One field as text, ended by '|': a string after its length (no two lists of strings read the
// same), a number as its shortest exact text (every bit counts).
void append_field(std::string& key, const std::string& s) { key += std::to_string(s.size()) + ':' + s + '|'; }
void append_field(std::string& key, double x) {
  char buf[32];
  key.append(buf, std::to_chars(buf, buf + sizeof(buf), x).ptr);
  key += '|';
}
void append_field(std::string& key, int64_t n) { key += std::to_string(n) + '|'; }
void append_field(std::string& key, const ParameterValues& p) {
  for (const LengthValue& v : p.values) {
    append_field(key, v.value);
    key += v.relative ? "L|" : "|";
  }
}

}  // namespace

std::string options_key(const MethodOptions& o) {
  std::string key;
  for_each_field(o, [&key](const auto& field) { append_field(key, field); });
  return key;
}

void check_context(const Method& method, int64_t T) {
  if (T < 1 || T > kMaxContext)
    bad("context length must be in [1, " + std::to_string(kMaxContext) + "], got " +
        std::to_string(T));
}

// ---- per-context quantities --------------------------------------------------------------------

double ntk_base(const Method& m, int64_t T) {
  const double D = double(m.head_dim);
  if (m.train_context <= 0 || T <= m.train_context) return m.value(Parameter::kRopeBase);
  return m.value(Parameter::kRopeBase) * std::pow(double(T) / double(m.train_context), D / (D - 2));
}

double yarn_factor(const Method& m, int64_t T) {
  if (m.positional != Positional::kYaRN || T <= m.train_context) return 1.0;
  return double(T) / double(m.train_context);
}

double yarn_logit_multiplier(const Method& m, int64_t T) {
  const double s = yarn_factor(m, T);
  if (s <= 1.0) return 1.0;
  const double sqrt_inv_t = 0.1 * std::log(s) + 1.0;  // YaRN's sqrt(1/t)
  return sqrt_inv_t * sqrt_inv_t;
}

std::vector<double> rotary_frequencies(const Method& m, int64_t T) {
  if (!m.rotary()) return {};
  const int64_t pairs = m.head_dim / 2;
  const double D = double(m.head_dim);
  std::vector<double> freq(pairs, 0.0);
  auto rope = [&](double base) {
    for (int64_t k = 0; k < pairs; ++k) freq[k] = std::pow(base, -2.0 * double(k) / D);
  };
  // Number of rotated pairs for p-RoPE: floor(p·D/2) (the epsilon absorbs p·D/2 rounding).
  const int64_t n_rot = std::min<int64_t>(
      pairs, int64_t(std::floor(m.p_rope_fraction * double(pairs) + 1e-9)));
  switch (m.positional) {
    case Positional::kRoPE:
      rope(m.value(Parameter::kRopeBase));
      break;
    case Positional::kNTK:
      rope(ntk_base(m, T));
      break;
    case Positional::kYaRN: {
      rope(m.value(Parameter::kRopeBase));
      const double s = yarn_factor(m, T);
      if (s > 1.0) {
        const double L = double(m.train_context);
        for (int64_t k = 0; k < pairs; ++k) {
          const double wavelength = 2.0 * M_PI / freq[k];
          const double r = L / wavelength;  // rotations of pair k within the training context
          const double gamma =
              std::clamp((r - kYaRNAlpha) / (kYaRNBeta - kYaRNAlpha), 0.0, 1.0);
          freq[k] = (1.0 - gamma) * freq[k] / s + gamma * freq[k];
        }
      }
      break;
    }
    case Positional::kPRoPE:
      if (m.p_rope_variant == PRoPEVariant::kTruncate) {
        // Barbero et al.: RoPE's frequencies, only the n_rot highest (k < n_rot) kept.
        rope(m.value(Parameter::kRopeBase));
        for (int64_t k = n_rot; k < pairs; ++k) freq[k] = 0.0;
      } else {
        // modded-nanogpt: n_rot frequencies log-uniform from 1 down to 1/base, rest 0.
        for (int64_t k = 0; k < n_rot; ++k)
          freq[k] = n_rot == 1 ? 1.0
                               : std::pow(1.0 / m.value(Parameter::kPRopeBase), double(k) / double(n_rot - 1));
      }
      break;
    default:
      break;
  }
  return freq;
}

std::vector<double> alibi_slopes(int64_t heads) {
  // ALiBi reference (ofirpress/attention_with_linear_biases): geometric slopes 2^(−8h/n) for a
  // power of 2 n; otherwise those of the closest power of 2 below, then every other slope of the
  // 2× set.
  auto power_of_2 = [](int64_t n) {
    std::vector<double> s(n);
    const double start = std::pow(2.0, -8.0 / double(n));
    for (int64_t h = 0; h < n; ++h) s[h] = std::pow(start, double(h + 1));
    return s;
  };
  if (heads < 1) return {};
  if ((heads & (heads - 1)) == 0) return power_of_2(heads);
  int64_t closest = 1;
  while (closest * 2 <= heads) closest *= 2;
  std::vector<double> s = power_of_2(closest);
  const std::vector<double> extra = alibi_slopes(2 * closest);
  for (int64_t h = 0; int64_t(s.size()) < heads; h += 2) s.push_back(extra[h]);
  return s;
}

ScoreMod score_mod(const Method& m, int64_t T) {
  ScoreMod mod;
  mod.scale = float(m.score_scale * yarn_logit_multiplier(m, T));
  transform_spec(m.transform).fill(m, mod);
  return mod;
}

// ---- closed forms ------------------------------------------------------------------------------

double row_multiplier(const Method& m, int64_t n) { return transform_spec(m.transform).row(m, n); }

double distance_multiplier(const Method& m, int64_t t) {
  return transform_spec(m.transform).distance_multiplier(m, t);
}

double distance_bias(const Method& m, int64_t t, int64_t head) {
  const auto& spec = transform_spec(m.transform);
  double b = spec.distance_bias(m, t, head);
  if (spec.learned_bias && spec.table == TableIndex::kDistance) {  // FIRE's depends on the query too
    const std::vector<double> p = initial_learned_values(m);
    const int64_t P = learned_values_per_head(m);
    b += spec.learned_bias(m, p.data() + head * P, t);
  }
  if (m.alibi()) b -= alibi_slopes(m.heads).at(size_t(head)) * double(t);
  return b;
}

int64_t learned_values_per_head(const Method& m) {
  int64_t P = 0;
  for (const auto& p : transform_spec(m.transform).learned) P += p.per_head;
  return P;
}

std::vector<double> initial_learned_values(const Method& m) {
  const auto& spec = transform_spec(m.transform);
  const int64_t P = learned_values_per_head(m);
  std::vector<double> out;
  out.reserve(size_t(m.heads * P));
  for (int64_t h = 0; h < m.heads; ++h)
    for (const auto& p : spec.learned)
      for (int64_t k = 0; k < p.per_head; ++k) out.push_back(p.initial(m, h, k));
  return out;
}

std::vector<double> learned_bias_table_values(const Method& m, const std::vector<double>& values, int64_t T) {
  const auto& spec = transform_spec(m.transform);
  const int64_t P = learned_values_per_head(m);
  if (!spec.learned_bias) return {};
  if (int64_t(values.size()) != m.heads * P)
    throw std::invalid_argument("learned_bias_table_values: expected " + std::to_string(m.heads * P) +
                                " learned values (H × " + std::to_string(P) + "), got " +
                                std::to_string(values.size()));
  const int64_t E = learned_table_length(spec, T);
  std::vector<double> table(size_t(m.heads * E));
  for (int64_t h = 0; h < m.heads; ++h)
    for (int64_t e = 0; e < E; ++e) table[size_t(h * E + e)] = spec.learned_bias(m, values.data() + h * P, e);
  return table;
}

double initial_head_scale(const Method& m) {
  const auto& spec = transform_spec(m.transform);
  return spec.initial_head_scale ? spec.initial_head_scale(m) : 1.0;
}

}  // namespace attention
