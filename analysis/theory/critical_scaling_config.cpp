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
#include <set>
#include <sstream>

#include "harness/config/schema.h"
#include "harness/config/yaml_values.h"
#include "common/did_you_mean.h"
#include "common/errors.h"

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

const std::vector<std::string> kTopKeys = {"experiment", "n",          "d",      "rho",
                                           "gamma",      "trials",     "seed",   "rows",
                                           "hutchinson", "causal",     "precision", "threads"};
const std::vector<std::string> kGammaKeys = {"count", "max_over_gamma_c"};
const std::vector<std::string> kRhoKeys = {"from", "to", "count"};
const std::vector<std::string> kHutchinsonKeys = {"rows", "probes", "precision"};
const std::vector<std::string> kCausalKeys = {"rows", "thresholds"};

struct Parser {
  std::string source;

  Location at(const YAML::Node& node) const { return Location::of(source, node); }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& key,
                         const std::string& expected) const {
    fail_at(at(node), key, fmt::format("expected {}, got {}", expected, describe(node)));
  }

  // The run config's parsers (harness/config/yaml_values.h): the same forms and messages.
  int64_t integer(const YAML::Node& node, const std::string& key, int64_t lo, int64_t hi) const {
    const std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
    const int64_t v = harness::config::parse_int(node, at(node), key, expected);
    if (v < lo || v > hi) fail(node, key, expected);
    return v;
  }

  double number(const YAML::Node& node, const std::string& key, const std::string& expected) const {
    return harness::config::parse_double(node, at(node), key, expected);
  }

  // A number in [lo, hi) (hi_open) or [lo, hi].
  double number_in(const YAML::Node& node, const std::string& key, double lo, double hi,
                   bool hi_open) const {
    const std::string expected =
        fmt::format("a number in [{}, {}{}", lo, hi, hi_open ? ")" : "]");
    const double v = number(node, key, expected);
    if (v < lo || (hi_open ? v >= hi : v > hi)) fail(node, key, expected);
    return v;
  }

  // true for float64, false for float32.
  bool precision(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar() || (node.Scalar() != "float32" && node.Scalar() != "float64"))
      fail(node, key, "one of: float32, float64");
    return node.Scalar() == "float64";
  }

  const YAML::Node& sequence(const YAML::Node& node, const std::string& key,
                             const std::string& expected) const {
    if (!node.IsSequence() || node.size() == 0) fail(node, key, expected);
    return node;
  }

  // Checks a mapping's keys (plain names, no duplicates, known) and returns them in order.
  void check_keys(const YAML::Node& map, const std::string& prefix,
                  const std::vector<std::string>& valid) const {
    std::set<std::string> seen;
    for (const auto& kv : map) {
      const Location where = at(kv.first);
      if (!kv.first.IsScalar())
        throw InputError(fmt::format("{}: keys must be plain names", where.str()));
      const std::string name = kv.first.Scalar();
      const std::string path = prefix.empty() ? name : prefix + "." + name;
      if (!seen.insert(name).second)
        throw InputError(fmt::format("{}: duplicate key '{}'", where.str(), path));
      if (std::find(valid.begin(), valid.end(), name) != valid.end()) continue;
      std::string msg = fmt::format("{}: unknown key '{}'", where.str(), path);
      if (const auto close = harness::did_you_mean(name, valid); !close.empty())
        msg += fmt::format(" — did you mean '{}'?", close.front());
      msg += fmt::format("; valid keys{}: {}", prefix.empty() ? "" : " in '" + prefix + "'",
                         fmt::join(valid, ", "));
      throw InputError(msg);
    }
  }

  void mapping(const YAML::Node& node, const std::string& key, const std::string& expected,
               const std::vector<std::string>& valid) const {
    if (!node.IsMap()) fail(node, key, expected);
    check_keys(node, key, valid);
  }
};

std::vector<double> evenly_spaced(double from, double to, int64_t count) {
  std::vector<double> out;
  for (int64_t k = 0; k < count; ++k)
    out.push_back(count == 1 ? from : from + (to - from) * double(k) / double(count - 1));
  return out;
}

// Rounds grid values written as from/to/count to 12 significant digits, so 0.05 + 18·0.05 prints
// and compares as 0.95.
double tidy(double v) { return std::stod(fmt::format("{:.12g}", v)); }

// rho: a list of values in [0, 1), increasing, or {from, to, count}.
void read_rho(const Parser& p, const YAML::Node& rho, CriticalScalingConfig& c) {
  c.rho.clear();
  const std::string expected = "a list of numbers in [0, 1) or a mapping {from, to, count}";
  if (rho.IsSequence()) {
    for (const auto& item : p.sequence(rho, "rho", expected))
      c.rho.push_back(p.number_in(item, "rho", 0.0, 1.0, true));
    for (size_t i = 1; i < c.rho.size(); ++i)
      if (!(c.rho[i] > c.rho[i - 1]))
        p.fail(rho[i], "rho", fmt::format("values in increasing order (after {})", c.rho[i - 1]));
  } else {
    p.mapping(rho, "rho", expected, kRhoKeys);
    if (!rho["from"] || !rho["to"] || !rho["count"])
      fail_at(p.at(rho), "rho", "the mapping needs from, to and count");
    const double from = p.number_in(rho["from"], "rho.from", 0.0, 1.0, true);
    const double to = p.number_in(rho["to"], "rho.to", 0.0, 1.0, true);
    const int64_t count = p.integer(rho["count"], "rho.count", 1, 1000);
    if (!(to > from) && count > 1)
      p.fail(rho["to"], "rho.to", fmt::format("a value above rho.from ({})", from));
    if (count == 1 && to != from)
      p.fail(rho["to"], "rho.to", fmt::format("rho.from ({}) when rho.count is 1", from));
    for (double v : evenly_spaced(from, to, count)) c.rho.push_back(tidy(v));
  }
}

// gamma: a list of γ values (increasing), or {count, max_over_gamma_c}.
void read_gamma(const Parser& p, const YAML::Node& gamma, CriticalScalingConfig& c) {
  const std::string expected =
      "a list of γ values (numbers >= 0, increasing) or a mapping {count, max_over_gamma_c}";
  if (gamma.IsSequence()) {
    for (const auto& item : p.sequence(gamma, "gamma", expected))
      c.gamma_values.push_back(p.number_in(item, "gamma", 0.0, 1e6, false));
    if (c.gamma_values.size() < 2) p.fail(gamma, "gamma", "at least 2 values");
    for (size_t i = 1; i < c.gamma_values.size(); ++i)
      if (!(c.gamma_values[i] > c.gamma_values[i - 1]))
        p.fail(gamma[i], "gamma",
               fmt::format("values in increasing order (after {})", c.gamma_values[i - 1]));
  } else {
    p.mapping(gamma, "gamma", expected, kGammaKeys);
    if (const YAML::Node count = gamma["count"]) c.gamma_count = p.integer(count, "gamma.count", 2, 1000);
    if (const YAML::Node max = gamma["max_over_gamma_c"]) {
      c.gamma_max_over_critical = p.number_in(max, "gamma.max_over_gamma_c", 0.0, 1000.0, false);
      if (!(c.gamma_max_over_critical > 0)) p.fail(max, "gamma.max_over_gamma_c", "a number in (0, 1000]");
    }
  }
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

const std::vector<std::string>& critical_scaling_keys() { return kTopKeys; }

CriticalScalingConfig load_critical_scaling_config_text(const std::string& text,
                                                        const std::string& source) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}:{}: cannot parse the YAML: {}", source, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
  const YAML::Node& root = loaded;  // const: lookups of absent keys must not touch the document
  const Parser p{source};
  if (!root.IsMap())
    throw InputError(fmt::format("{}: expected a mapping with experiment: critical-scaling at the "
                                 "top level, got {}",
                                 Location::of(source, root).str(), describe(root)));
  p.check_keys(root, "", kTopKeys);
  const YAML::Node experiment = root["experiment"];
  if (!experiment)
    throw InputError(fmt::format("{}: experiment: missing; this file needs experiment: "
                                 "critical-scaling at the top level",
                                 source));
  if (!experiment.IsScalar() || experiment.Scalar() != "critical-scaling")
    p.fail(experiment, "experiment", "'critical-scaling'");

  CriticalScalingConfig c = default_critical_scaling_config();
  c.source = source;
  c.text = text;

  if (const YAML::Node n = root["n"]) {
    c.n.clear();
    const std::string expected = fmt::format("a list of integers in [2, {}]", kMaxTokens);
    for (const auto& item : p.sequence(n, "n", expected)) c.n.push_back(p.integer(item, "n", 2, kMaxTokens));
  }
  if (const YAML::Node d = root["d"]) {
    c.d.clear();
    const std::string expected = fmt::format("a list of integers in [1, {}]", kMaxDim);
    for (const auto& item : p.sequence(d, "d", expected)) c.d.push_back(p.integer(item, "d", 1, kMaxDim));
    for (size_t i = 0; i < c.d.size(); ++i)
      for (const int64_t n : c.n)
        if (n * c.d[i] > kMaxTokenValues)
          fail_at(p.at(d[i]), "d", fmt::format("n·d must be at most {} (the token set's size), got "
                                               "{}·{} with n = {}",
                                               kMaxTokenValues, n, c.d[i], n));
  }
  if (const YAML::Node rho = root["rho"]) read_rho(p, rho, c);
  if (const YAML::Node gamma = root["gamma"]) read_gamma(p, gamma, c);
  if (const YAML::Node v = root["trials"]) c.trials = p.integer(v, "trials", 1, 1000);
  if (const YAML::Node v = root["seed"])
    c.seed = uint64_t(p.integer(v, "seed", 0, std::numeric_limits<int64_t>::max()));
  if (const YAML::Node v = root["rows"]) c.rows = p.integer(v, "rows", 2, kMaxTokens);
  if (const YAML::Node h = root["hutchinson"]) {
    p.mapping(h, "hutchinson", "a mapping {rows, probes, precision}", kHutchinsonKeys);
    if (const YAML::Node v = h["rows"]) c.hutchinson_rows = p.integer(v, "hutchinson.rows", 1, kMaxTokens);
    if (const YAML::Node v = h["probes"]) c.hutchinson_probes = p.integer(v, "hutchinson.probes", 2, 100000);
    if (const YAML::Node v = h["precision"]) c.hutchinson_float64 = p.precision(v, "hutchinson.precision");
  }
  if (const YAML::Node causal = root["causal"]) {
    p.mapping(causal, "causal", "a mapping {rows, thresholds}", kCausalKeys);
    if (const YAML::Node v = causal["rows"]) c.causal_rows = p.integer(v, "causal.rows", 1, kMaxTokens);
    if (const YAML::Node t = causal["thresholds"]) {
      const std::string expected = "two self-weights [low, high] with 0 < low < high < 1";
      if (!t.IsSequence() || t.size() != 2) p.fail(t, "causal.thresholds", expected);
      c.collapse_below = p.number(t[0], "causal.thresholds", expected);
      c.identity_above = p.number(t[1], "causal.thresholds", expected);
      if (!(c.collapse_below > 0 && c.collapse_below < c.identity_above && c.identity_above < 1))
        p.fail(t, "causal.thresholds",
               fmt::format("{} (read [{}, {}])", expected, c.collapse_below, c.identity_above));
    }
  }
  if (const YAML::Node v = root["precision"]) c.float64 = p.precision(v, "precision");
  if (const YAML::Node v = root["threads"]) c.threads = p.integer(v, "threads", 0, 1024);
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
