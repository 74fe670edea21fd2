// The curves the law of the best τ is fitted to (analysis/tau/law.h): from run files, each loss
// from /analysis where `harness analyse` wrote it, else /eval; or from the CSV `tau law` writes.
// Both go through one table and one set of rules about what is complete enough to keep.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "analysis/tau/law.h"
#include "attention/parameters.h"
#include "common/errors.h"

namespace analysis {
namespace {

struct Value {
  double loss = 0;
  LossSource source = LossSource::kEval;
};
// L → τ → seed → factor T / L → the loss.
using Table = std::map<int64_t, std::map<double, std::map<int64_t, std::map<int64_t, Value>>>>;

// The run's loss at context T: /analysis when it has one (more windows, re-validated), else the
// mean of the last validation's windows; none when neither is there.
std::optional<Value> run_loss(const results::RunRecord& r, int64_t T) {
  const auto a = r.analysis.find(T);
  if (a != r.analysis.end()) {
    const auto loss = a->second.arrays.find("loss");
    if (loss != a->second.arrays.end() && !loss->second.values.empty() && std::isfinite(loss->second.values[0]))
      return Value{loss->second.values[0], LossSource::kAnalysis};
  }
  const auto e = r.eval.find(T);
  if (e == r.eval.end() || e->second.window_loss.empty()) return std::nullopt;
  double s = 0;
  for (double v : e->second.window_loss) s += v;
  return Value{s / double(e->second.window_loss.size()), LossSource::kEval};
}

// The factors every (τ, seed) of one L has.
std::set<int64_t> common_factors(const std::map<double, std::map<int64_t, std::map<int64_t, Value>>>& by_tau) {
  std::set<int64_t> common;
  bool first = true;
  for (const auto& [tau, by_seed] : by_tau)
    for (const auto& [seed, by_factor] : by_seed) {
      std::set<int64_t> here;
      for (const auto& [f, v] : by_factor) here.insert(f);
      if (first) common = here;
      else for (auto it = common.begin(); it != common.end();) it = here.count(*it) ? std::next(it) : common.erase(it);
      first = false;
    }
  return common;
}

// One L's curve from its table: the τ with every seed; empty `tau` when fewer than 3 are left.
TauLawCurve assemble_one(int64_t L, const std::map<double, std::map<int64_t, std::map<int64_t, Value>>>& by_tau,
                         std::vector<std::string>& skipped) {
  std::set<int64_t> seeds;
  for (const auto& [tau, by_seed] : by_tau)
    for (const auto& [seed, f] : by_seed) seeds.insert(seed);
  TauLawCurve c;
  c.L = L;
  c.seeds.assign(seeds.begin(), seeds.end());
  std::map<double, std::map<int64_t, std::map<int64_t, Value>>> complete;
  for (const auto& [tau, by_seed] : by_tau) {
    if (by_seed.size() < seeds.size()) {
      skipped.push_back(fmt::format("L = {}: τ = {:g} left out ({} of {} seeds done)", L, tau, by_seed.size(), seeds.size()));
      continue;
    }
    complete[tau] = by_seed;
  }
  const auto factors = common_factors(complete);
  for (const auto& [tau, by_seed] : complete) {
    c.tau.push_back(tau);
    for (int64_t factor : factors) {
      auto& loss = c.loss[factor].emplace_back();
      auto& source = c.source[factor].emplace_back();
      for (int64_t seed : seeds) loss.push_back(by_seed.at(seed).at(factor).loss), source.push_back(by_seed.at(seed).at(factor).source);
    }
  }
  return c;
}

TauLawCurves assemble(const Table& data, const std::string& where) {
  TauLawCurves out;
  for (const auto& [L, by_tau] : data) {
    TauLawCurve c = assemble_one(L, by_tau, out.skipped);
    if (c.tau.size() < 3 || c.seeds.size() < 2 || c.loss.empty()) {
      out.skipped.push_back(fmt::format("L = {} left out: {} τ with all {} seeds done (the law needs 3 τ and 2 seeds)",
                                        L, c.tau.size(), c.seeds.size()));
      continue;
    }
    out.curves.push_back(std::move(c));
  }
  if (out.curves.empty())
    throw harness::InputError(fmt::format("{}: no training context has 3 τ with 2 or more seeds done{}", where,
                                          out.skipped.empty() ? "" : " (" + out.skipped.back() + ")"));
  return out;
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

template <class T>
T number(const std::string& text, const std::string& where, const char* column) {
  try {
    size_t used = 0;
    const T v = std::is_integral_v<T> ? T(std::stoll(text, &used)) : T(std::stod(text, &used));
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw harness::InputError(fmt::format("{}: {} '{}' is not a number", where, column, text));
}

// What two runs' values differ in: "key = x and y; …" over the keys that vary.
std::string differing_keys(const RunSet& set, const RunEntry& a, const RunEntry& b) {
  std::vector<std::string> keys;
  for (const auto& k : set.keys)
    if (a.values.at(k) != b.values.at(k)) keys.push_back(fmt::format("{} = {} and {}", k, a.values.at(k), b.values.at(k)));
  return keys.empty() ? "no key" : fmt::format("{}", fmt::join(keys, "; "));
}

}  // namespace

TauLawCurves tau_law_curves(const RunSet& set) {
  Table data;
  // Runs of one L, τ and seed that differ in something else (e.g. the batch) would be mixed into
  // one curve: refused, with the key to split them by.
  std::map<std::tuple<int64_t, double, int64_t>, const RunEntry*> seen;
  for (const auto& run : set.runs) {
    if (!run.record || run.state != "done") continue;
    const int64_t L = run.train_context;
    const double tau = run.config.attention.parameters[attention::Parameter::kTau].resolve(L);
    const auto [other, fresh] = seen.try_emplace({L, tau, int64_t(run.config.train.seed)}, &run);
    if (!fresh)
      throw harness::InputError(fmt::format(
          "{}: runs {} and {} have the same L ({}), τ ({:g}) and seed ({}) but differ in {}: the law needs one curve "
          "per L; split them with `--by KEY`", set.dir, other->second->id, run.id, L, tau, run.config.train.seed,
          differing_keys(set, *other->second, run)));
    std::set<int64_t> contexts;
    for (const auto& [T, rows] : run.record->eval) contexts.insert(T);
    for (const auto& [T, group] : run.record->analysis) contexts.insert(T);
    for (int64_t T : contexts) {
      if (T % L != 0) continue;
      if (const auto v = run_loss(*run.record, T)) data[L][tau][int64_t(run.config.train.seed)][T / L] = *v;
    }
  }
  return assemble(data, set.dir);
}

std::string tau_law_curves_csv(const std::vector<TauLawCurve>& curves) {
  std::string out = "L,factor,tau,seed,loss,source\n";
  for (const auto& c : curves)
    for (const auto& [factor, y] : c.loss) {
      const auto source = c.source.find(factor);
      for (size_t k = 0; k < c.tau.size(); ++k)
        for (size_t s = 0; s < c.seeds.size(); ++s)
          out += fmt::format("{},{},{},{},{},{}\n", c.L, factor, c.tau[k], c.seeds[s], y[k][s],
                             to_string(source == c.source.end() ? LossSource::kEval : source->second[k][s]));
    }
  return out;
}

TauLawCurves parse_tau_law_curves_csv(const std::string& text, const std::string& path) {
  std::stringstream in(text);
  std::string line;
  const std::string header = "L,factor,tau,seed,loss,source";
  if (!std::getline(in, line) || line != header)
    throw harness::InputError(fmt::format("{}:1: expected the header '{}' (the tau-law-curves.csv `harness tau law "
                                          "--out` writes), got '{}'", path, header, line));
  Table data;
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, n);
    const auto f = fields_of(line);
    if (f.size() != 6) throw harness::InputError(fmt::format("{}: expected 6 fields ({}), got {}", where, header, f.size()));
    if (f[5] != "eval" && f[5] != "analysis")
      throw harness::InputError(fmt::format("{}: source '{}': expected eval or analysis", where, f[5]));
    const auto L = number<int64_t>(f[0], where, "L"), factor = number<int64_t>(f[1], where, "factor");
    const auto tau = number<double>(f[2], where, "tau"), loss = number<double>(f[4], where, "loss");
    if (L < 1 || factor < 1 || !(tau > 0) || !std::isfinite(loss))
      throw harness::InputError(fmt::format("{}: expected L and factor ≥ 1, tau > 0 and a finite loss", where));
    auto& cell = data[L][tau][number<int64_t>(f[3], where, "seed")];
    if (!cell.emplace(factor, Value{loss, f[5] == "analysis" ? LossSource::kAnalysis : LossSource::kEval}).second)
      throw harness::InputError(fmt::format("{}: a second loss for the same L, factor, tau and seed", where));
  }
  return assemble(data, path);
}

}  // namespace analysis
