#include "analysis/theory/critical_scaling_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "common/errors.h"
#include "harness/config/key_builders.h"
#include "harness/config/key_table.h"
#include "harness/config/schema.h"
#include "harness/config/yaml_values.h"

namespace analysis {

namespace {

using harness::InputError;
using harness::config::describe;
using harness::config::fail_at;
using harness::config::Location;

constexpr int64_t kMaxTokens = 65536;
constexpr int64_t kMaxDim = 8192;
// n·d of one token set: 2^26 values are 512 MiB in float64 (the tokens; the row blocks are smaller).
constexpr int64_t kMaxTokenValues = int64_t(1) << 26;

std::vector<double> evenly_spaced(double from, double to, int64_t count) {
  std::vector<double> out;
  for (int64_t k = 0; k < count; ++k)
    out.push_back(count == 1 ? from : from + (to - from) * double(k) / double(count - 1));
  return out;
}

// Rounds grid values written as from/to/count to 12 significant digits, so 0.05 + 18·0.05 prints
// and compares as 0.95.
double tidy(double v) { return std::stod(fmt::format("{:.12g}", v)); }

using harness::config::format_double;
using harness::config::integer_key_of;
using harness::config::key_of;
using harness::config::KeySpecOf;
using harness::config::parse_double;
using harness::config::parse_int;
using harness::config::real_key_of;

// What the file's keys set: the config, and what is resolved into it once every key is read (ρ
// written as {from, to, count}, the precisions by name).
struct CriticalScalingInput {
  CriticalScalingConfig config = default_critical_scaling_config();
  std::string experiment;
  double rho_from = 0.05, rho_to = 0.95;
  int64_t rho_count = 19;
  std::string precision = "float64", hutchinson_precision = "float32";
};
using Key = KeySpecOf<CriticalScalingInput>;

std::vector<std::string> precisions() { return {"float32", "float64"}; }
std::vector<std::string> experiments() { return {"critical-scaling"}; }

Key key(std::string path, std::string expected, std::string help) {
  return key_of<CriticalScalingInput>(std::move(path), std::move(expected), std::move(help));
}

[[noreturn]] void fail_expected(const Location& at, const std::string& key, const std::string& expected,
                                const std::string& got) {
  fail_at(at, key, fmt::format("expected {}, got {}", expected, got));
}

// A non-empty list whose items `item` parses, each at its own place in the file.
template <class T, class Item>
std::vector<T> list_of(const YAML::Node& n, const Location& at, const std::string& key,
                       const std::string& expected, Item item) {
  if (!n.IsSequence() || n.size() == 0) fail_expected(at, key, expected, describe(n));
  std::vector<T> out;
  for (const auto& v : n) out.push_back(item(v, Location::of(at.source, v)));
  return out;
}

// n, d: a list of integers in [lo, hi].
Key integer_list_key(std::string path, std::vector<int64_t> CriticalScalingConfig::*member, int64_t lo,
                     int64_t hi, std::string help) {
  Key k = key(path, fmt::format("a list of integers in [{}, {}]", lo, hi), std::move(help));
  k.set = [=, expected = k.expected](CriticalScalingInput& in, const YAML::Node& n, const Location& at) {
    const std::string each = fmt::format("an integer in [{}, {}]", lo, hi);
    in.config.*member = list_of<int64_t>(n, at, path, expected, [&](const YAML::Node& v, const Location& v_at) {
      const int64_t x = parse_int(v, v_at, path, each);
      if (x < lo || x > hi) fail_expected(v_at, path, each, std::to_string(x));
      return x;
    });
  };
  k.get = [=](const CriticalScalingInput& in) {
    return fmt::format("[{}]", fmt::join(in.config.*member, ", "));
  };
  return k;
}

// rho, gamma: at least `min_size` increasing numbers, each in [lo, hi) (hi_open) or [lo, hi].
Key increasing_list_key(std::string path, std::vector<double> CriticalScalingConfig::*member, double lo,
                        double hi, bool hi_open, size_t min_size, std::string expected, std::string help) {
  Key k = key(path, std::move(expected), std::move(help));
  k.set = [=, expected = k.expected](CriticalScalingInput& in, const YAML::Node& n, const Location& at) {
    const std::string each =
        fmt::format("a number in [{}, {}{}", format_double(lo), format_double(hi), hi_open ? ")" : "]");
    auto values = list_of<double>(n, at, path, expected, [&](const YAML::Node& v, const Location& v_at) {
      const double x = parse_double(v, v_at, path, each);
      if (!(x >= lo) || !(hi_open ? x < hi : x <= hi)) fail_expected(v_at, path, each, v.Scalar());
      return x;
    });
    if (values.size() < min_size)
      fail_expected(at, path, fmt::format("at least {} values", min_size), std::to_string(values.size()));
    for (size_t i = 1; i < values.size(); ++i)
      if (!(values[i] > values[i - 1]))
        fail_expected(Location::of(at.source, n[i]), path,
                      fmt::format("values in increasing order (after {})", values[i - 1]), describe(n[i]));
    in.config.*member = std::move(values);
  };
  k.get = [=](const CriticalScalingInput& in) {
    const auto& v = in.config.*member;
    return v.empty() ? std::string("none") : fmt::format("[{}]", fmt::join(v, ", "));
  };
  return k;
}

template <class Access>
Key choice(std::string path, Access access, std::vector<std::string> (*allowed)(), std::string help) {
  return harness::config::choice_key_of<CriticalScalingInput>(std::move(path), access, allowed,
                                                              std::move(help));
}

// The causal phases' self-weight thresholds [low, high], 0 < low < high < 1.
Key thresholds_key() {
  const std::string path = "causal.thresholds";
  Key k = key(path, "two self-weights [low, high] with 0 < low < high < 1",
              "a causal row's phase from its self-weight A_ii: < low collapse, > high identity");
  k.set = [path, expected = k.expected](CriticalScalingInput& in, const YAML::Node& t, const Location& at) {
    if (!t.IsSequence() || t.size() != 2) fail_expected(at, path, expected, describe(t));
    const double low = parse_double(t[0], Location::of(at.source, t[0]), path, expected);
    const double high = parse_double(t[1], Location::of(at.source, t[1]), path, expected);
    if (!(low > 0 && low < high && high < 1))
      fail_expected(at, path, expected, fmt::format("[{}, {}]", low, high));
    in.config.collapse_below = low;
    in.config.identity_above = high;
  };
  k.get = [](const CriticalScalingInput& in) {
    return fmt::format("[{}, {}]", in.config.collapse_below, in.config.identity_above);
  };
  return k;
}

template <class... A>
Key integer(A&&... a) { return integer_key_of<CriticalScalingInput>(std::forward<A>(a)...); }
template <class... A>
Key real(A&&... a) { return real_key_of<CriticalScalingInput>(std::forward<A>(a)...); }

// The file's keys, in the order of the default file (sweeps/critical-scaling.yaml).
std::vector<Key> build_table() {
  std::vector<Key> s;
  s.push_back(choice("experiment", [](auto& in) -> auto& { return in.experiment; }, experiments,
                     "the file's kind (required): a critical-scaling grid, not a run config"));
  s.back().get = [](const CriticalScalingInput&) { return std::string("none (required)"); };
  s.push_back(integer_list_key("n", &CriticalScalingConfig::n, 2, kMaxTokens,
                               "tokens per set: the context length in ln n"));
  s.push_back(integer_list_key("d", &CriticalScalingConfig::d, 1, kMaxDim, "token dimensions"));
  s.push_back(increasing_list_key("rho", &CriticalScalingConfig::rho, 0.0, 1.0, true, 1,
                                  "a list of numbers in [0, 1), increasing, or a mapping {from, to, count}",
                                  "the tokens' correlation ρ (or rho.from, rho.to, rho.count)"));
  s.push_back(real("rho.from", [](auto& in) -> auto& { return in.rho_from; }, 0.0, 1.0, false,
                   "first ρ of an evenly spaced grid", true, /*hi_open=*/true));
  s.push_back(real("rho.to", [](auto& in) -> auto& { return in.rho_to; }, 0.0, 1.0, false, "last ρ of the grid",
                   true, /*hi_open=*/true));
  s.push_back(integer("rho.count", [](auto& in) -> auto& { return in.rho_count; }, 1, 1000, "ρ values of the grid"));
  s.push_back(increasing_list_key(
      "gamma", &CriticalScalingConfig::gamma_values, 0.0, 1e6, false, 2,
      "a list of γ values (numbers >= 0, increasing) or a mapping {count, max_over_gamma_c}",
      "the same γ for every ρ (or gamma.count, gamma.max_over_gamma_c)"));
  s.push_back(integer("gamma.count", [](auto& in) -> auto& { return in.config.gamma_count; }, 2, 1000,
                      "γ values per ρ, from 0 to max_over_gamma_c/(1 − ρ)"));
  s.push_back(real("gamma.max_over_gamma_c", [](auto& in) -> auto& { return in.config.gamma_max_over_critical; },
                   0.0, 1000.0, true, "the largest γ of the grid over γ_c = 1/(1 − ρ)"));
  s.push_back(integer("trials", [](auto& in) -> auto& { return in.config.trials; }, 1, 1000,
                      "token sets per (n, d, ρ), averaged"));
  s.push_back(integer("seed", [](auto& in) -> auto& { return in.config.seed; }, 0,
                      std::numeric_limits<int64_t>::max(),
                      "each (n, d, ρ, trial) draws from its own seed derived from this"));
  s.push_back(integer("rows", [](auto& in) -> auto& { return in.config.rows; }, 2, kMaxTokens,
                      "query rows for c_out, λ, A_ii and the entropy (<= n)"));
  s.push_back(integer("hutchinson.rows", [](auto& in) -> auto& { return in.config.hutchinson_rows; }, 1,
                      kMaxTokens, "η: output rows per Hutchinson probe"));
  s.push_back(integer("hutchinson.probes", [](auto& in) -> auto& { return in.config.hutchinson_probes; }, 2,
                      100000, "η: Hutchinson probes"));
  s.push_back(choice("hutchinson.precision", [](auto& in) -> auto& { return in.hutchinson_precision; },
                     precisions, "η's dtype (its probe noise dwarfs float32 rounding)"));
  s.push_back(integer("causal.rows", [](auto& in) -> auto& { return in.config.causal_rows; }, 1, kMaxTokens,
                      "query positions of the causal variant"));
  s.push_back(thresholds_key());
  s.push_back(choice("precision", [](auto& in) -> auto& { return in.precision; }, precisions,
                     "tokens, statistics and γ̂_c (arccos(c_out ≈ 1) magnifies rounding)"));
  s.push_back(integer("threads", [](auto& in) -> auto& { return in.config.threads; }, 0, 1024, "0: every core"));
  return s;
}

const std::vector<Key>& table() {
  static const std::vector<Key> keys = build_table();
  return keys;
}

const std::vector<std::string>& paths() {
  static const std::vector<std::string> p = harness::config::key_paths(table());
  return p;
}

// The checks across keys, once every key is read: experiment given, ρ's grid, n·d, precisions.
void resolve(CriticalScalingInput& in, const YAML::Node& root, const std::map<std::string, Location>& where,
             const std::string& source) {
  CriticalScalingConfig& c = in.config;
  if (in.experiment.empty())
    throw InputError(fmt::format("{}: experiment: missing; this file needs experiment: critical-scaling at "
                                 "the top level",
                                 source));
  const bool from = where.count("rho.from"), to = where.count("rho.to"), count = where.count("rho.count");
  if (from || to || count) {
    if (!(from && to && count))
      fail_at(Location::of(source, root["rho"]), "rho", "the mapping needs from, to and count");
    const Location& to_at = where.at("rho.to");
    if (!(in.rho_to > in.rho_from) && in.rho_count > 1)
      fail_expected(to_at, "rho.to", fmt::format("a value above rho.from ({})", in.rho_from),
                    format_double(in.rho_to));
    if (in.rho_count == 1 && in.rho_to != in.rho_from)
      fail_expected(to_at, "rho.to", fmt::format("rho.from ({}) when rho.count is 1", in.rho_from),
                    format_double(in.rho_to));
    c.rho.clear();
    for (double v : evenly_spaced(in.rho_from, in.rho_to, in.rho_count)) c.rho.push_back(tidy(v));
  }
  for (size_t i = 0; i < c.d.size(); ++i)
    for (const int64_t n : c.n)
      if (n * c.d[i] > kMaxTokenValues)
        fail_at(root["d"] ? Location::of(source, root["d"][i]) : where.at("n"), "d",
                fmt::format("n·d must be at most {} (the token set's size), got {}·{} with n = {}",
                            kMaxTokenValues, n, c.d[i], n));
  c.float64 = in.precision == "float64";
  c.hutchinson_float64 = in.hutchinson_precision == "float64";
}

}  // namespace

std::vector<double> CriticalScalingConfig::gammas(size_t r) const {
  if (!gamma_values.empty()) return gamma_values;
  return evenly_spaced(0.0, gamma_max_over_critical / (1.0 - rho.at(r)), gamma_count);
}

size_t CriticalScalingConfig::gamma_points() const {
  return gamma_values.empty() ? size_t(gamma_count) : gamma_values.size();
}

CriticalScalingConfig default_critical_scaling_config() {
  CriticalScalingConfig c;
  for (double v : evenly_spaced(0.05, 0.95, 19)) c.rho.push_back(tidy(v));
  return c;
}

CriticalScalingConfig quick_critical_scaling_config() {
  CriticalScalingConfig c;
  c.source = "<quick grid>";
  c.n = {256};
  c.d = {4, 64};
  c.rho = {0.25, 0.5, 0.75};
  c.gamma_count = 12;
  c.rows = 64;
  c.hutchinson_rows = 16;
  c.hutchinson_probes = 2;
  c.causal_rows = 64;
  return c;
}

std::string critical_scaling_reference() {
  return harness::config::key_reference(table(), CriticalScalingInput{});
}

CriticalScalingConfig load_critical_scaling_config_text(const std::string& text,
                                                        const std::string& source) {
  // const: lookups of absent keys must not touch the document
  const YAML::Node root = harness::config::parse_yaml(text, source);
  if (!root.IsMap())
    throw InputError(fmt::format("{}: expected a mapping with experiment: critical-scaling at the "
                                 "top level, got {}",
                                 Location::of(source, root).str(), describe(root)));
  CriticalScalingInput in;
  std::map<std::string, Location> where;
  harness::config::apply_keys(table(), paths(), in, root, source, where);
  resolve(in, root, where, source);
  CriticalScalingConfig c = std::move(in.config);
  c.source = source;
  c.text = text;
  return c;
}

CriticalScalingConfig load_critical_scaling_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the file", path));
  std::stringstream text;
  text << in.rdbuf();
  return load_critical_scaling_config_text(text.str(), path);
}

bool is_critical_scaling_file(const std::string& path) {
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) return false;
    const YAML::Node experiment = root["experiment"];
    return experiment && experiment.IsScalar() && experiment.Scalar() == "critical-scaling";
  } catch (const std::exception&) {
    return false;
  }
}

std::string describe_plan(const CriticalScalingConfig& c) {
  const size_t sets = c.n.size() * c.d.size() * c.rho.size();
  const size_t steps = sets * c.gamma_points();
  std::string gamma = c.gamma_values.empty()
                          ? fmt::format("{} values per rho, from 0 to {}/(1 - rho)", c.gamma_count,
                                        c.gamma_max_over_critical)
                          : fmt::format("{} values: {}", c.gamma_values.size(), fmt::join(c.gamma_values, ", "));
  return fmt::format(
      "critical-scaling experiment ({})\n"
      "  n:      {}\n"
      "  d:      {}\n"
      "  rho:    {} values: {}\n"
      "  gamma:  {}\n"
      "  trials: {} token set(s) per (n, d, rho), seed {}\n"
      "  rows:   {} query rows for the statistics, {} x {} rows for the Hutchinson estimate of eta,\n"
      "          {} causal positions (phase thresholds on A_ii: {}, {})\n"
      "  work:   {} token sets x {} gamma = {} attention steps ({}), {} Hutchinson VJPs ({});\n"
      "          threads: {}\n",
      c.source, fmt::join(c.n, ", "), fmt::join(c.d, ", "), c.rho.size(), fmt::join(c.rho, ", "),
      gamma, c.trials, c.seed, c.rows, c.hutchinson_probes, c.hutchinson_rows, c.causal_rows,
      c.collapse_below, c.identity_above, sets * size_t(c.trials), c.gamma_points(),
      steps * size_t(c.trials), c.float64 ? "float64" : "float32",
      steps * size_t(c.trials) * size_t(c.hutchinson_probes), c.hutchinson_float64 ? "float64" : "float32", c.threads == 0 ? std::string("all") : std::to_string(c.threads));
}

}  // namespace analysis
