// The law of the best τ against L: what tau_law.h says, in that order (curves from runs, the two
// fits, the bootstrap, the slope, the text).
#include "analysis/tau_law.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>

#include "attention/parameters.h"
#include "harness/common/errors.h"

namespace analysis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Seed means per τ of a [τ][seed] table.
std::vector<double> means(const std::vector<std::vector<double>>& y) {
  std::vector<double> m;
  for (const auto& row : y) {
    double s = 0;
    for (double v : row) s += v;
    m.push_back(s / double(row.size()));
  }
  return m;
}

// The two-way residual variance of y_ks = μ_k + β_s + e_ks and its degrees of freedom (K−1)(n−1).
std::pair<double, double> residual_variance(const std::vector<std::vector<double>>& y) {
  const size_t K = y.size(), n = y.front().size();
  const std::vector<double> row = means(y);
  std::vector<double> col(n, 0.0);
  double grand = 0;
  for (size_t k = 0; k < K; ++k)
    for (size_t s = 0; s < n; ++s) col[s] += y[k][s] / double(K), grand += y[k][s] / double(K * n);
  double ss = 0;
  for (size_t k = 0; k < K; ++k)
    for (size_t s = 0; s < n; ++s) ss += std::pow(y[k][s] - row[k] - col[s] + grand, 2);
  const double df = double((K - 1) * (n - 1));
  return {ss / df, df};
}

// Draws of the seed means: m*_k = m_k + N(0, σ*²/n), σ*² = σ̂²·χ²_df/df.
struct MeanSampler {
  std::vector<double> mean;
  double variance = 0, df = 0, n = 0;
  std::vector<double> draw(std::mt19937_64& rng) const {
    std::normal_distribution<double> z;
    std::chi_squared_distribution<double> chi(df);
    const double sd = std::sqrt(variance * chi(rng) / df / n);
    std::vector<double> m = mean;
    for (double& v : m) v += sd * z(rng);
    return m;
  }
};

MeanSampler sampler(const std::vector<std::vector<double>>& y) {
  const auto [variance, df] = residual_variance(y);
  return {means(y), variance, df, double(y.front().size())};
}

// The percentile interval of `values` (NaN dropped; ±∞ kept) at `level`, in ln τ.
std::pair<double, double> percentiles(std::vector<double> values, double level) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return {kNaN, kNaN};
  std::sort(values.begin(), values.end());
  auto at = [&](double p) { return values[size_t(std::clamp(p * double(values.size() - 1), 0.0, double(values.size() - 1)))]; };
  return {at((1 - level) / 2), at(1 - (1 - level) / 2)};
}

TauEstimate estimate(double point, const std::vector<double>& replicates, double level) {
  TauEstimate e;
  e.value = std::exp(point);
  const auto [lo, hi] = percentiles(replicates, level);
  e.lo = std::exp(lo);
  e.hi = std::exp(hi);
  e.unbracketed = double(std::count_if(replicates.begin(), replicates.end(), [](double v) { return std::isinf(v); })) /
                  double(replicates.size());
  if (std::isnan(point)) e.note = "the parabola through the best τ opens downward";
  if (std::isinf(point)) e.note = point < 0 ? "the best τ is the grid's smallest" : "the best τ is the grid's largest";
  if (std::isinf(point)) e.value = kNaN;
  return e;
}

double slope_of(const std::vector<double>& x, const std::vector<double>& y) {
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i] / double(x.size()), my += y[i] / double(x.size());
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
  return sxy / sxx;
}

void check_curve(const TauLawCurve& c) {
  if (c.tau.size() < 3 || c.seeds.size() < 2)
    throw std::invalid_argument(fmt::format("tau law: L = {} needs 3 or more τ and 2 or more seeds", c.L));
  for (const auto& [factor, y] : c.loss) {
    if (y.size() != c.tau.size()) throw std::invalid_argument("tau law: a loss table without a row per τ");
    for (const auto& row : y)
      if (row.size() != c.seeds.size()) throw std::invalid_argument("tau law: a loss row without a value per seed");
  }
}

// Per-seed rise of the breakdown context over 1L: [τ][seed].
std::vector<std::vector<double>> rises(const TauLawCurve& c, int64_t factor) {
  const auto& hi = c.loss.at(factor);
  const auto& lo = c.loss.at(1);
  std::vector<std::vector<double>> r = hi;
  for (size_t k = 0; k < r.size(); ++k)
    for (size_t s = 0; s < r[k].size(); ++s) r[k][s] -= lo[k][s];
  return r;
}

}  // namespace

double quadratic_log_tau_star(const std::vector<double>& tau, const std::vector<double>& mean) {
  const size_t K = tau.size();
  const size_t b = size_t(std::min_element(mean.begin(), mean.end()) - mean.begin());
  if (b == 0) return -kInf;
  if (b == K - 1) return kInf;
  // Least squares y = c0 + c1·u + c2·u², u = ln τ − ln τ_b, over [b − 2, b + 2] ∩ the grid.
  double S[5] = {0, 0, 0, 0, 0}, T[3] = {0, 0, 0};
  for (size_t k = b >= 2 ? b - 2 : 0; k <= std::min(K - 1, b + 2); ++k) {
    const double u = std::log(tau[k]) - std::log(tau[b]);
    double p = 1;
    for (int i = 0; i < 5; ++i) S[i] += p, p *= u;
    T[0] += mean[k], T[1] += mean[k] * u, T[2] += mean[k] * u * u;
  }
  // Cramer's rule on [[S0 S1 S2] [S1 S2 S3] [S2 S3 S4]] · c = T.
  auto det = [](double a, double b_, double c, double d, double e, double f, double g, double h, double i) {
    return a * (e * i - f * h) - b_ * (d * i - f * g) + c * (d * h - e * g);
  };
  const double D = det(S[0], S[1], S[2], S[1], S[2], S[3], S[2], S[3], S[4]);
  const double c1 = det(S[0], T[0], S[2], S[1], T[1], S[3], S[2], T[2], S[4]) / D;
  const double c2 = det(S[0], S[1], T[0], S[1], S[2], T[1], S[2], S[3], T[2]) / D;
  if (!(c2 > 0)) return kNaN;
  return std::log(tau[b]) - c1 / (2 * c2);
}

double breakdown_log_tau(const std::vector<double>& tau, const std::vector<double>& rise, double threshold) {
  const size_t start = size_t(std::min_element(rise.begin(), rise.end()) - rise.begin());
  if (rise[start] >= threshold) return -kInf;
  for (size_t k = start + 1; k < tau.size(); ++k)
    if (rise[k] >= threshold) {
      const double f = (threshold - rise[k - 1]) / (rise[k] - rise[k - 1]);
      return std::log(tau[k - 1]) + f * (std::log(tau[k]) - std::log(tau[k - 1]));
    }
  return kInf;
}

TauLaw tau_law(const std::vector<TauLawCurve>& curves, const TauLawOptions& options) {
  if (curves.empty()) throw std::invalid_argument("tau law: no training context");
  TauLaw law;
  law.options = options;
  law.seeds = int(curves.front().seeds.size());
  std::mt19937_64 rng(options.seed);
  std::map<int64_t, std::vector<std::vector<double>>> star_draws;  // factor → [L][replicate] ln τ*
  for (const auto& c : curves) {
    check_curve(c);
    for (const auto& [factor, y] : c.loss) {
      const MeanSampler s = sampler(y);
      std::vector<double> draws;
      for (int r = 0; r < options.replicates; ++r) draws.push_back(quadratic_log_tau_star(c.tau, s.draw(rng)));
      TauLawRow row{c.L, factor, c.tau[size_t(std::min_element(s.mean.begin(), s.mean.end()) - s.mean.begin())], {}};
      row.tau_star = estimate(quadratic_log_tau_star(c.tau, s.mean), draws, options.level);
      law.rows.push_back(row);
      star_draws[factor].push_back(std::move(draws));
    }
    if (c.loss.count(1) && c.loss.count(options.breakdown_factor)) {
      const MeanSampler s = sampler(rises(c, options.breakdown_factor));
      std::vector<double> draws;
      for (int r = 0; r < options.replicates; ++r)
        draws.push_back(breakdown_log_tau(c.tau, s.draw(rng), options.breakdown_rise));
      TauEstimate b = estimate(breakdown_log_tau(c.tau, s.mean, options.breakdown_rise), draws, options.level);
      if (!b.note.empty()) b.note = b.note.find("smallest") != std::string::npos ? "risen already at the best τ"
                                                                               : "not reached on the grid";
      law.breakdown[c.L] = b;
    }
  }
  for (const auto& [factor, per_L] : star_draws) {
    TauLawSlope slope;
    slope.factor = factor;
    std::vector<double> lnL, point;
    for (const auto& row : law.rows)
      if (row.factor == factor) lnL.push_back(std::log(double(row.L))), point.push_back(std::log(row.tau_star.value));
    slope.k = lnL.size() >= 2 ? slope_of(lnL, point) : kNaN;
    std::vector<double> ks;
    int beyond = 0;
    for (int r = 0; r < options.replicates; ++r) {
      std::vector<double> x;
      for (const auto& draws : per_L) x.push_back(draws[size_t(r)]);
      if (std::any_of(x.begin(), x.end(), [](double v) { return !std::isfinite(v); })) {
        ++beyond;
        continue;
      }
      ks.push_back(slope_of(lnL, x));
    }
    std::tie(slope.lo, slope.hi) = percentiles(ks, options.level);
    slope.unbracketed = double(beyond) / double(options.replicates);
    if (lnL.size() < 2) slope.note = "one training context: no slope";
    else if (std::isnan(slope.k)) slope.note = "no τ* at some L";
    else if (slope.unbracketed > (1 - options.level) / 2)
      slope.note = fmt::format("τ* beyond the grid at some L in {:.0f}% of replicates: the interval is not reliable",
                               100 * slope.unbracketed);
    law.slopes.push_back(slope);
  }
  return law;
}

TauLawCurves tau_law_curves(const RunSet& set) {
  // L → τ → seed → factor → mean window loss of the last validation.
  std::map<int64_t, std::map<double, std::map<int64_t, std::map<int64_t, double>>>> data;
  for (const auto& run : set.runs) {
    if (!run.record || run.state != "done") continue;
    const int64_t L = run.train_context;
    const double tau = run.config.attention.parameters[attention::Parameter::kTau].resolve(L);
    for (const auto& [T, rows] : run.record->eval) {
      if (T % L != 0 || rows.window_loss.empty()) continue;
      double s = 0;
      for (double v : rows.window_loss) s += v;
      data[L][tau][int64_t(run.config.train.seed)][T / L] = s / double(rows.window_loss.size());
    }
  }
  TauLawCurves out;
  for (const auto& [L, by_tau] : data) {
    std::set<int64_t> seeds;
    for (const auto& [tau, by_seed] : by_tau)
      for (const auto& [seed, f] : by_seed) seeds.insert(seed);
    TauLawCurve c;
    c.L = L;
    c.seeds.assign(seeds.begin(), seeds.end());
    for (const auto& [tau, by_seed] : by_tau) {
      if (by_seed.size() < seeds.size()) {
        out.skipped.push_back(fmt::format("L = {}: τ = {:g} left out ({} of {} seeds done)", L, tau, by_seed.size(),
                                          seeds.size()));
        continue;
      }
      c.tau.push_back(tau);
      for (const auto& [factor, loss] : by_seed.begin()->second) {
        auto& rows = c.loss[factor];
        rows.emplace_back();
        for (int64_t seed : seeds) rows.back().push_back(by_seed.at(seed).at(factor));
      }
    }
    if (c.tau.size() < 3 || c.seeds.size() < 2) {
      out.skipped.push_back(fmt::format("L = {} left out: {} τ with all {} seeds done (the law needs 3 τ and 2 seeds)",
                                        L, c.tau.size(), c.seeds.size()));
      continue;
    }
    out.curves.push_back(std::move(c));
  }
  if (out.curves.empty())
    throw harness::InputError(fmt::format("{}: no training context has 3 τ with 2 or more seeds done{}", set.dir,
                                          out.skipped.empty() ? "" : " (" + out.skipped.back() + ")"));
  return out;
}

namespace {

std::string tokens(double t) {
  if (std::isnan(t)) return "–";
  if (std::isinf(t)) return "∞";
  return fmt::format("{:.3g}", t);
}

std::string with_interval(const TauEstimate& e, int64_t L) {
  if (std::isnan(e.value)) return "– (" + e.note + ")";
  return fmt::format("{} [{}, {}] = L/{:.3g}", tokens(e.value), tokens(e.lo), tokens(e.hi), double(L) / e.value) +
         (e.unbracketed > 0 ? fmt::format(" ({:.0f}% beyond the grid)", 100 * e.unbracketed) : "");
}

// What the slope's interval allows one to say.
std::string law_sentence(const TauLawSlope& s, double level) {
  if (std::isnan(s.k)) return fmt::format("at {}L: {}", s.factor, s.note.empty() ? "no slope" : s.note);
  std::string text = fmt::format("at {}L: τ* ∝ L^k, k = {:.2f} [{:.2f}, {:.2f}] ({:.0f}%)", s.factor, s.k, s.lo, s.hi,
                                 100 * level);
  if (s.lo <= 0 && s.hi >= 1)
    text += " — no trend resolvable: neither a fixed size in tokens (k = 0) nor a fixed fraction of L (k = 1) is excluded";
  else if (s.lo > 1)
    text += " — τ* grows faster than L (k = 1 excluded)";
  else if (s.hi < 0)
    text += " — τ* shrinks as L grows";
  else if (s.lo > 0)
    text += s.hi < 1 ? " — τ* grows with L, slower than L (k = 0 and k = 1 excluded)"
                     : " — τ* grows with L (k = 0 excluded); k = 1 is not excluded";
  else
    text += " — k = 1 (a fixed fraction of L) is excluded, k = 0 (a fixed size in tokens) is not";
  return s.note.empty() ? text : text + "; " + s.note;
}

}  // namespace

std::string format_tau_law(const TauLaw& law) {
  std::string out = fmt::format("τ* per training context L and validation context ({} seeds; {:.0f}% parametric "
                                "bootstrap intervals, {} replicates):\n\n| L | context | best τ on the grid | τ* [interval] |\n"
                                "| --- | --- | --- | --- |\n", law.seeds, 100 * law.options.level, law.options.replicates);
  for (const auto& r : law.rows)
    out += fmt::format("| {} | {}L | {} | {} |\n", r.L, r.factor, tokens(r.best_grid_tau), with_interval(r.tau_star, r.L));
  if (!law.breakdown.empty()) {
    out += fmt::format("\nBreakdown τ: where the {}L loss rises {} nats/token above the 1L loss:\n\n| L | breakdown τ [interval] |\n| --- | --- |\n",
                       law.options.breakdown_factor, law.options.breakdown_rise);
    for (const auto& [L, b] : law.breakdown) out += fmt::format("| {} | {} |\n", L, with_interval(b, L));
  }
  out += "\nThe law:\n";
  for (const auto& s : law.slopes) out += "- " + law_sentence(s, law.options.level) + "\n";
  return out;
}

std::string tau_law_csv(const TauLaw& law) {
  std::string out = "L,factor,best_grid_tau,tau_star,lo,hi,unbracketed,breakdown,breakdown_lo,breakdown_hi\n";
  for (const auto& r : law.rows) {
    const auto b = law.breakdown.find(r.L);
    const TauEstimate none{kNaN, kNaN, kNaN, 0, ""};
    const TauEstimate& br = b != law.breakdown.end() ? b->second : none;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", r.L, r.factor, r.best_grid_tau, r.tau_star.value, r.tau_star.lo,
                       r.tau_star.hi, r.tau_star.unbracketed, br.value, br.lo, br.hi);
  }
  return out;
}

}  // namespace analysis
