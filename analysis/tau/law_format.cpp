// The law of the best τ in words and as CSV (analysis/tau/law.h): each interval printed as what it
// is — over all bootstrap replicates, censored ones at their bounds — and the law said by rule,
// never stronger than its interval.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "analysis/tau/law.h"

namespace analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string tokens(double t) {
  if (std::isnan(t)) return "–";
  if (std::isinf(t)) return "∞";
  return fmt::format("{:.3g}", t);
}

std::string percent(double f) { return fmt::format("{:.0f}%", 100 * f); }

// A τ interval whose ends may be 0 / ∞ (not bounded by the grid).
std::string tau_interval(double lo, double hi) {
  if (lo <= 0 && std::isinf(hi)) return "not bounded by the grid at either end";
  if (std::isinf(lo)) return "beyond the grid's largest τ in every replicate";
  if (hi <= 0) return "below the grid's smallest τ in every replicate";
  if (lo <= 0) return fmt::format("≤ {} (lower end not bounded by the grid)", tokens(hi));
  if (std::isinf(hi)) return fmt::format("≥ {} (upper end not bounded by the grid)", tokens(lo));
  return fmt::format("[{}, {}]", tokens(lo), tokens(hi));
}

// A located τ with its ratio to L, or where an unlocated one lies.
std::string tau_point(const TauEstimate& e, int64_t L) {
  if (!std::isnan(e.value)) return fmt::format("{} = L/{:.3g}", tokens(e.value), double(L) / e.value);
  if (e.at_least <= 0) return fmt::format("< {} ({})", tokens(e.at_most), e.note);
  if (std::isinf(e.at_most)) return fmt::format("> {} ({})", tokens(e.at_least), e.note);
  return fmt::format("between {} and {} ({})", tokens(e.at_least), tokens(e.at_most), e.note);
}

// "12% (low edge 10%, opens downward 2%)": the replicates not located, by cause.
std::string censoring(const Censoring& c) {
  if (c.any == 0) return "0%";
  std::vector<std::string> parts;
  const std::pair<double, const char*> causes[] = {
      {c.low_edge, "low edge"}, {c.high_edge, "high edge"}, {c.downward, "opens downward"}, {c.outside, "vertex outside"}};
  for (const auto& [f, name] : causes)
    if (f > 0) parts.push_back(fmt::format("{} {}", name, percent(f)));
  return fmt::format("{} ({})", percent(c.any), fmt::join(parts, ", "));
}

// A k interval whose ends may be ±∞.
std::string k_interval(double lo, double hi) {
  if (std::isinf(lo) && std::isinf(hi)) return "not bounded by this grid at either end";
  if (std::isinf(hi)) return fmt::format("k ≥ {:.2f}, upper end not bounded by this grid", lo);
  if (std::isinf(lo)) return fmt::format("k ≤ {:.2f}, lower end not bounded by this grid", hi);
  return fmt::format("[{:.2f}, {:.2f}]", lo, hi);
}

std::string k_value(double v) { return std::isinf(v) ? (v > 0 ? "∞" : "−∞") : fmt::format("{:.2f}", v); }

// What the slope's interval allows one to say.
std::string law_sentence(const TauLawSlope& s, double level) {
  if (std::isnan(s.lo)) return fmt::format("at {}L: {}", s.factor, s.note);
  std::string text = std::isnan(s.k)
                         ? fmt::format("at {}L: τ* ∝ L^k, k not located ({}; between {} and {})", s.factor, s.note,
                                       k_value(s.at_least), k_value(s.at_most))
                         : fmt::format("at {}L: τ* ∝ L^k, k = {:.2f}", s.factor, s.k);
  text += fmt::format("; {:.0f}% interval {}", 100 * level, k_interval(s.lo, s.hi));
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
  if (s.censored.any > 0)
    text += fmt::format(". τ* not located at some L in {} of replicates (best τ at the grid's low edge {}, at its "
                        "high edge {}, quadratic opening downward {}, vertex outside the fitted points {}; a "
                        "replicate may count under several): kept at their bounds, the interval is over all "
                        "replicates", percent(s.censored.any), percent(s.censored.low_edge),
                        percent(s.censored.high_edge), percent(s.censored.downward), percent(s.censored.outside));
  return text;
}

std::string preamble(const TauLaw& law) {
  std::string out = fmt::format(
      "τ* per training context L and validation context ({} seeds per τ at the L with fewest; {:.0f}% seed-bootstrap "
      "intervals over all {} replicates, a replicate whose τ* is not located kept at its bound — 0 or ∞ where the grid "
      "does not bound it):\n",
      law.seeds, 100 * law.options.level, law.options.replicates);
  out += fmt::format("losses: {} from /analysis (`harness analyse`), {} from /eval (the run's last validation)\n",
                     law.from_analysis, law.from_eval);
  for (const auto& m : law.mixed)
    out += fmt::format("warning: {} mixes /analysis and /eval losses: their windows differ, so τ are compared on "
                       "different text (run `harness analyse` on every run of that L)\n", m);
  if (law.seeds < kSeedsForCoverage)
    out += fmt::format("warning: {} seeds: the seed bootstrap's intervals are too narrow with fewer than {} (in "
                       "studies simulated from the measured curves the 90% interval of k covered the true k in 79–83% "
                       "of studies at 3 seeds, 84–87% at 4, 86–89% at 6 to 12); read them as lower bounds on the "
                       "uncertainty\n", law.seeds, kSeedsForCoverage);
  return out;
}

}  // namespace

std::string format_tau_law(const TauLaw& law) {
  std::string out = preamble(law);
  out += "\n| L | context | best τ on the grid | τ* | interval | replicates not located (cause) |\n"
         "| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& r : law.rows)
    out += fmt::format("| {} | {}L | {} | {} | {} | {} |\n", r.L, r.factor, tokens(r.best_grid_tau), tau_point(r.tau_star, r.L),
                       tau_interval(r.tau_star.lo, r.tau_star.hi), censoring(r.tau_star.censored));
  if (!law.breakdown.empty()) {
    out += fmt::format("\nBreakdown τ: where the {}L loss rises {} nats/token above the 1L loss:\n\n"
                       "| L | breakdown τ | interval | replicates not reached on the grid |\n| --- | --- | --- | --- |\n",
                       law.options.breakdown_factor, law.options.breakdown_rise);
    for (const auto& [L, b] : law.breakdown)
      out += fmt::format("| {} | {} | {} | {} |\n", L, std::isnan(b.value) ? "– (" + b.note + ")" : tau_point(b, L),
                         tau_interval(b.lo, b.hi), percent(b.censored.any));
  }
  out += "\nThe law:\n";
  for (const auto& s : law.slopes) out += "- " + law_sentence(s, law.options.level) + "\n";
  return out;
}

namespace {

std::string ratio_text(double r) {
  if (std::isnan(r)) return "–";
  if (std::isinf(r)) return "∞";
  return fmt::format("{:.2f}", r);
}

// What a ratio's interval allows one to say.
std::string ratio_verdict(const TauStarRatio& r) {
  if (r.lo > 1) return fmt::format("τ* larger under {} (1 excluded)", r.a);
  if (r.hi < 1) return fmt::format("τ* larger under {} (1 excluded)", r.b);
  return "not resolved (1 inside the interval)";
}

}  // namespace

std::string format_tau_star_ratios(const std::vector<TauStarRatio>& ratios, double level) {
  if (ratios.empty()) return "No L and context is shared by the groups: nothing to compare.\n";
  std::string out = fmt::format(
      "τ*_a / τ*_b at the same L and context ({:.0f}% interval over all replicates of the two groups' independent "
      "seed bootstraps, censored ones at their bounds; at one L this is also the ratio of τ*/L):\n\n"
      "| L | context | a | b | τ*_a / τ*_b | interval | reading |\n| --- | --- | --- | --- | --- | --- | --- |\n",
      100 * level);
  for (const auto& r : ratios) {
    const std::string point = std::isnan(r.ratio)
                                  ? fmt::format("between {} and {} (a τ* not located)", ratio_text(r.at_least), ratio_text(r.at_most))
                                  : ratio_text(r.ratio);
    const std::string span = r.lo <= 0 && std::isinf(r.hi) ? "not bounded at either end"
                             : r.lo <= 0                   ? fmt::format("≤ {}", ratio_text(r.hi))
                             : std::isinf(r.hi)            ? fmt::format("≥ {}", ratio_text(r.lo))
                                                           : fmt::format("[{}, {}]", ratio_text(r.lo), ratio_text(r.hi));
    out += fmt::format("| {} | {}L | {} | {} | {} | {} | {} |\n", r.L, r.factor, r.a, r.b, point, span, ratio_verdict(r));
  }
  return out;
}

std::string tau_star_ratios_csv(const std::vector<TauStarRatio>& ratios) {
  std::string out = "L,factor,a,b,ratio,ratio_at_least,ratio_at_most,lo,hi\n";
  for (const auto& r : ratios)
    out += fmt::format("{},{},\"{}\",\"{}\",{},{},{},{},{}\n", r.L, r.factor, r.a, r.b, r.ratio, r.at_least, r.at_most, r.lo, r.hi);
  return out;
}

std::string tau_law_csv(const TauLaw& law) {
  std::string out =
      "L,factor,best_grid_tau,tau_star,tau_star_at_least,tau_star_at_most,lo,hi,censored,censored_low_edge,"
      "censored_high_edge,censored_downward,censored_outside,breakdown,breakdown_lo,breakdown_hi\n";
  for (const auto& r : law.rows) {
    const auto b = law.breakdown.find(r.L);
    TauEstimate none;
    none.value = none.lo = none.hi = kNaN;
    const TauEstimate& br = b != law.breakdown.end() ? b->second : none;
    const auto& t = r.tau_star;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.L, r.factor, r.best_grid_tau, t.value,
                       t.at_least, t.at_most, t.lo, t.hi, t.censored.any, t.censored.low_edge, t.censored.high_edge,
                       t.censored.downward, t.censored.outside, br.value, br.lo, br.hi);
  }
  return out;
}

}  // namespace analysis
