// The law of the best τ against L: what law.h says, in that order (the fits, the seed
// bootstrap, the slope with its bounds). The text and the CSV are in law_format.cpp, the
// curves from runs or a CSV in law_curves.cpp.
#include "analysis/tau/law.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

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

// n seed indices drawn with replacement: one bootstrap draw of whole per-seed curves.
std::vector<size_t> draw_seeds(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<size_t> draw(n);
  for (auto& s : draw) s = pick(rng);
  return draw;
}

// Seed means per τ over the drawn seeds, their deviations from the full sample's means scaled by
// √(n/(n−1)) so that their variance is the sample's s²/n, not (n−1)/n of it.
std::vector<double> resampled_means(const std::vector<std::vector<double>>& y, const std::vector<double>& mean,
                                    const std::vector<size_t>& draw) {
  const double n = double(draw.size()), scale = std::sqrt(n / (n - 1));
  std::vector<double> m(y.size());
  for (size_t k = 0; k < y.size(); ++k) {
    double s = 0;
    for (size_t i : draw) s += y[k][i];
    m[k] = mean[k] + scale * (s / n - mean[k]);
  }
  return m;
}

// The (1 − level)/2 quantile of `lower` and the (1 + level)/2 quantile of `upper` (±∞ kept), the
// lower one rounded down in rank and the upper one up.
std::pair<double, double> interval(std::vector<double> lower, std::vector<double> upper, double level) {
  std::sort(lower.begin(), lower.end());
  std::sort(upper.begin(), upper.end());
  const double p = (1 - level) / 2, last = double(lower.size() - 1);
  return {lower[size_t(std::floor(p * last))], upper[size_t(std::ceil((1 - p) * last))]};
}

// Replicate counts per cause of censoring, as fractions.
struct CensoringCount {
  int low_edge = 0, high_edge = 0, downward = 0, outside = 0, any = 0;
  void add(const std::vector<TauStarOutcome>& outcomes) {  // one replicate, one outcome per L
    auto has = [&](TauStarOutcome o) { return std::find(outcomes.begin(), outcomes.end(), o) != outcomes.end(); };
    low_edge += has(TauStarOutcome::kLowEdge);
    high_edge += has(TauStarOutcome::kHighEdge);
    downward += has(TauStarOutcome::kDownward);
    outside += has(TauStarOutcome::kOutside);
    any += std::any_of(outcomes.begin(), outcomes.end(), [](TauStarOutcome o) { return o != TauStarOutcome::kLocated; });
  }
  Censoring fractions(int replicates) const {
    const double n = replicates;
    return {low_edge / n, high_edge / n, downward / n, outside / n, any / n};
  }
};

const char* outcome_note(TauStarOutcome o) {
  switch (o) {
    case TauStarOutcome::kLowEdge: return "the best τ is the grid's smallest";
    case TauStarOutcome::kHighEdge: return "the best τ is the grid's largest";
    case TauStarOutcome::kDownward: return "the quadratic through the best τ opens downward";
    case TauStarOutcome::kOutside: return "the quadratic's vertex lies outside the fitted points";
    case TauStarOutcome::kLocated: break;
  }
  return "";
}

// τ* of one (L, context): the point fit and its replicates' fits.
TauEstimate tau_estimate(const TauStarFit& point, const std::vector<TauStarFit>& draws, double level) {
  TauEstimate e;
  const bool located = point.outcome == TauStarOutcome::kLocated;
  e.value = located ? std::exp(point.log_tau) : kNaN;
  e.at_least = std::exp(point.log_lo);
  e.at_most = std::exp(point.log_hi);
  e.note = outcome_note(point.outcome);
  std::vector<double> lower, upper;
  CensoringCount count;
  for (const auto& d : draws) {
    lower.push_back(d.log_lo);
    upper.push_back(d.log_hi);
    count.add({d.outcome});
  }
  const auto [lo, hi] = interval(lower, upper, level);
  e.lo = std::exp(lo);
  e.hi = std::exp(hi);
  e.censored = count.fractions(int(draws.size()));
  return e;
}

// The breakdown τ of one L: a point in ln τ (±∞ beyond the grid) and its replicates.
TauEstimate breakdown_estimate(double point, const std::vector<double>& draws, double level) {
  TauEstimate e;
  e.value = std::isfinite(point) ? std::exp(point) : kNaN;
  e.at_least = point < kInf ? std::exp(point) : 0;
  e.at_most = point > -kInf ? std::exp(point) : kInf;
  if (point == -kInf) e.note = "risen already at the best τ";
  if (point == kInf) e.note = "not reached on the grid";
  const auto [lo, hi] = interval(draws, draws, level);
  e.lo = std::exp(lo);
  e.hi = std::exp(hi);
  CensoringCount count;
  for (double d : draws)
    count.add({d == -kInf ? TauStarOutcome::kLowEdge : d == kInf ? TauStarOutcome::kHighEdge : TauStarOutcome::kLocated});
  e.censored = count.fractions(int(draws.size()));
  return e;
}

void check_curve(const TauLawCurve& c) {
  if (c.tau.size() < 3 || c.seeds.size() < 2)
    throw std::invalid_argument(fmt::format("tau law: L = {} needs 3 or more τ and 2 or more seeds", c.L));
  for (const auto& [factor, y] : c.loss) {
    if (y.size() != c.tau.size()) throw std::invalid_argument("tau law: a loss table without a row per τ");
    for (const auto& row : y) {
      if (row.size() != c.seeds.size()) throw std::invalid_argument("tau law: a loss row without a value per seed");
      for (double v : row)
        if (!std::isfinite(v)) throw std::invalid_argument(fmt::format("tau law: L = {}: a loss that is not finite", c.L));
    }
  }
}

// Per-seed rise of the breakdown context over 1L: [τ][seed].
std::vector<std::vector<double>> rises(const TauLawCurve& c, int64_t factor) {
  std::vector<std::vector<double>> r = c.loss.at(factor);
  const auto& base = c.loss.at(1);
  for (size_t k = 0; k < r.size(); ++k)
    for (size_t s = 0; s < r[k].size(); ++s) r[k][s] -= base[k][s];
  return r;
}

// The replicates' τ* fits of one L, per context factor, and its breakdown row, into `law`.
struct PerL {
  std::map<int64_t, std::vector<TauStarFit>> draws;  // factor → [replicate]
  std::map<int64_t, TauStarFit> point;
};

PerL fit_one_L(const TauLawCurve& c, const TauLawOptions& o, std::mt19937_64& rng, TauLaw& law) {
  PerL out;
  std::map<int64_t, std::vector<double>> mean;
  for (const auto& [factor, y] : c.loss) mean[factor] = means(y);
  const bool breakdown = c.loss.count(1) && c.loss.count(o.breakdown_factor);
  const auto rise = breakdown ? rises(c, o.breakdown_factor) : std::vector<std::vector<double>>{};
  const auto rise_mean = means(rise);
  std::vector<double> breakdown_draws;
  for (int r = 0; r < o.replicates; ++r) {
    const auto draw = draw_seeds(c.seeds.size(), rng);  // the same seeds for every τ and context
    for (const auto& [factor, y] : c.loss) out.draws[factor].push_back(fit_tau_star(c.tau, resampled_means(y, mean[factor], draw)));
    if (breakdown) breakdown_draws.push_back(breakdown_log_tau(c.tau, resampled_means(rise, rise_mean, draw), o.breakdown_rise));
  }
  for (const auto& [factor, m] : mean) {
    out.point[factor] = fit_tau_star(c.tau, m);
    TauLawRow row{c.L, factor, c.tau[size_t(std::min_element(m.begin(), m.end()) - m.begin())], {}};
    row.tau_star = tau_estimate(out.point[factor], out.draws[factor], o.level);
    for (const auto& d : out.draws[factor]) row.replicate_log_span.emplace_back(d.log_lo, d.log_hi);
    law.rows.push_back(row);
  }
  if (breakdown)
    law.breakdown[c.L] = breakdown_estimate(breakdown_log_tau(c.tau, rise_mean, o.breakdown_rise), breakdown_draws, o.level);
  return out;
}

// The slope of one context factor over the L that have it (`fits` in L order).
TauLawSlope fit_slope(int64_t factor, const std::vector<int64_t>& Ls, const std::vector<const PerL*>& fits,
                      const TauLawOptions& o) {
  TauLawSlope s;
  s.factor = factor;
  std::vector<double> x;
  for (int64_t L : Ls) x.push_back(std::log(double(L)));
  if (x.size() < 2) {
    s.k = s.at_least = s.at_most = s.lo = s.hi = kNaN;
    s.note = "one training context: no slope";
    return s;
  }
  auto bounds = [&](auto&& fit_at) {  // fit_at(i): the TauStarFit at the i-th L
    std::vector<double> lo, hi;
    for (size_t i = 0; i < x.size(); ++i) lo.push_back(fit_at(i).log_lo), hi.push_back(fit_at(i).log_hi);
    return slope_bounds(x, lo, hi);
  };
  std::tie(s.at_least, s.at_most) = bounds([&](size_t i) -> const TauStarFit& { return fits[i]->point.at(factor); });
  std::vector<std::string> unlocated;
  for (size_t i = 0; i < x.size(); ++i)
    if (fits[i]->point.at(factor).outcome != TauStarOutcome::kLocated) unlocated.push_back(std::to_string(Ls[i]));
  s.k = unlocated.empty() ? s.at_least : kNaN;
  if (!unlocated.empty()) s.note = fmt::format("τ* not located at L = {}", fmt::join(unlocated, ", "));
  std::vector<double> lower, upper;
  CensoringCount count;
  for (int r = 0; r < o.replicates; ++r) {
    const auto [lo, hi] = bounds([&](size_t i) -> const TauStarFit& { return fits[i]->draws.at(factor)[size_t(r)]; });
    lower.push_back(lo);
    upper.push_back(hi);
    std::vector<TauStarOutcome> outcomes;
    for (size_t i = 0; i < x.size(); ++i) outcomes.push_back(fits[i]->draws.at(factor)[size_t(r)].outcome);
    count.add(outcomes);
  }
  std::tie(s.lo, s.hi) = interval(lower, upper, o.level);
  s.censored = count.fractions(o.replicates);
  return s;
}

}  // namespace

const char* to_string(LossSource s) { return s == LossSource::kAnalysis ? "analysis" : "eval"; }

TauStarFit fit_tau_star(const std::vector<double>& tau, const std::vector<double>& mean) {
  const size_t K = tau.size(), b = size_t(std::min_element(mean.begin(), mean.end()) - mean.begin());
  TauStarFit fit;
  fit.best = fit.first = fit.last = b;
  fit.log_tau = kNaN;
  fit.log_lo = b > 0 ? std::log(tau[b - 1]) : -kInf;  // where a curve with one minimum has it
  fit.log_hi = b + 1 < K ? std::log(tau[b + 1]) : kInf;
  if (b == 0 || b == K - 1) {
    fit.outcome = b == 0 ? TauStarOutcome::kLowEdge : TauStarOutcome::kHighEdge;
    return fit;
  }
  // The argmin and the grid points within an octave of it, its two neighbours in any case: points
  // further out lie on the flattening or on the breakdown wall, where a quadratic no longer holds,
  // and drag the vertex (law.h).
  auto u = [&](size_t k) { return std::log(tau[k]) - std::log(tau[b]); };
  const double reach = std::log(2.0) * (1 + 1e-9);
  fit.first = b - 1;
  fit.last = b + 1;
  while (fit.first > 0 && u(fit.first - 1) >= -reach) --fit.first;
  while (fit.last + 1 < K && u(fit.last + 1) <= reach) ++fit.last;
  // Least squares y = c0 + c1·u + c2·u² (exact through three points), by Cramer's rule on the
  // normal equations.
  double S[5] = {0, 0, 0, 0, 0}, T[3] = {0, 0, 0};
  for (size_t k = fit.first; k <= fit.last; ++k) {
    double p = 1;
    for (int i = 0; i < 5; ++i) S[i] += p, p *= u(k);
    T[0] += mean[k], T[1] += mean[k] * u(k), T[2] += mean[k] * u(k) * u(k);
  }
  auto det = [](double a, double b_, double c, double d, double e, double f, double g, double h, double i) {
    return a * (e * i - f * h) - b_ * (d * i - f * g) + c * (d * h - e * g);
  };
  const double D = det(S[0], S[1], S[2], S[1], S[2], S[3], S[2], S[3], S[4]);
  const double c1 = det(S[0], T[0], S[2], S[1], T[1], S[3], S[2], T[2], S[4]) / D;
  const double c2 = det(S[0], S[1], T[0], S[1], S[2], T[1], S[2], S[3], T[2]) / D;
  const double vertex = -c1 / (2 * c2);
  if (!(c2 > 0)) fit.outcome = TauStarOutcome::kDownward;
  else if (vertex < u(fit.first) || vertex > u(fit.last)) fit.outcome = TauStarOutcome::kOutside;
  else fit.log_tau = fit.log_lo = fit.log_hi = std::log(tau[b]) + vertex;
  return fit;
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

std::pair<double, double> slope_bounds(const std::vector<double>& x, const std::vector<double>& lo,
                                       const std::vector<double>& hi) {
  double mx = 0, sxx = 0, largest = 0;
  for (double v : x) mx += v / double(x.size());
  for (double v : x) sxx += (v - mx) * (v - mx);
  if (!(sxx > 0)) return {kNaN, kNaN};
  for (double v : x) largest = std::max(largest, std::fabs(v - mx));
  double at_least = 0, at_most = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = (x[i] - mx) / sxx;  // k = Σ w_i y_i
    if (std::fabs(x[i] - mx) <= 1e-12 * largest) continue;  // the middle L: its τ* does not move k
    at_least += w > 0 ? w * lo[i] : w * hi[i];
    at_most += w > 0 ? w * hi[i] : w * lo[i];
  }
  return {at_least, at_most};
}

std::vector<TauStarRatio> compare_tau_star(const TauLaw& a, const std::string& name_a, const TauLaw& b,
                                           const std::string& name_b) {
  if (a.options.replicates != b.options.replicates || a.options.level != b.options.level)
    throw std::invalid_argument("tau law: groups bootstrapped with different replicates or levels");
  std::vector<TauStarRatio> out;
  for (const auto& ra : a.rows)
    for (const auto& rb : b.rows) {
      if (ra.L != rb.L || ra.factor != rb.factor) continue;
      TauStarRatio r{ra.L, ra.factor, name_a, name_b, kNaN, 0, 0, 0, 0};
      const auto &ta = ra.tau_star, &tb = rb.tau_star;
      r.at_least = ta.at_least / tb.at_most;  // 0 / ∞ arithmetic gives the open ends
      r.at_most = tb.at_least > 0 ? ta.at_most / tb.at_least : kInf;
      if (!std::isnan(ta.value) && !std::isnan(tb.value)) r.ratio = r.at_least = r.at_most = ta.value / tb.value;
      std::vector<double> lower, upper;
      for (size_t i = 0; i < ra.replicate_log_span.size(); ++i) {
        const auto [lo_a, hi_a] = ra.replicate_log_span[i];
        const auto [lo_b, hi_b] = rb.replicate_log_span[i];
        lower.push_back(lo_a - hi_b);  // ln: −∞ − x and x − ∞ stay −∞, never ∞ − ∞ (lo < ∞, hi > −∞)
        upper.push_back(hi_a - lo_b);
      }
      const auto [lo, hi] = interval(lower, upper, a.options.level);
      r.lo = std::exp(lo);
      r.hi = std::exp(hi);
      out.push_back(r);
    }
  return out;
}

TauLaw tau_law(const std::vector<TauLawCurve>& curves, const TauLawOptions& options) {
  if (curves.empty()) throw std::invalid_argument("tau law: no training context");
  if (options.replicates < 1) throw std::invalid_argument("tau law: no bootstrap replicates");
  TauLaw law;
  law.options = options;
  law.seeds = int(curves.front().seeds.size());
  std::mt19937_64 rng(options.seed);
  std::vector<PerL> fits;
  for (const auto& c : curves) {
    check_curve(c);
    law.seeds = std::min(law.seeds, int(c.seeds.size()));
    for (const auto& [factor, y] : c.loss) {
      const auto table = c.source.find(factor);  // none: every loss from /eval
      int analysed = 0;
      if (table != c.source.end())
        for (const auto& row : table->second)
          for (LossSource s : row) analysed += s == LossSource::kAnalysis;
      const int total = int(y.size() * c.seeds.size());
      law.from_analysis += analysed;
      law.from_eval += total - analysed;
      if (analysed > 0 && analysed < total) law.mixed.push_back(fmt::format("L = {} at {}L", c.L, factor));
    }
    fits.push_back(fit_one_L(c, options, rng, law));
  }
  std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<const PerL*>>> by_factor;
  for (size_t i = 0; i < curves.size(); ++i)
    for (const auto& [factor, y] : curves[i].loss) by_factor[factor].first.push_back(curves[i].L), by_factor[factor].second.push_back(&fits[i]);
  for (const auto& [factor, at] : by_factor) law.slopes.push_back(fit_slope(factor, at.first, at.second, options));
  return law;
}

}  // namespace analysis
