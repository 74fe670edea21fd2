#include "analysis/tau/law_figure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace analysis {
namespace {

// Loss above the L's lowest seed mean, per seed, against τ / L: one series per L.
std::vector<Series> loss_series(const std::vector<TauLawCurve>& curves, int64_t factor, Palette& palette) {
  std::vector<Series> series;
  for (const auto& c : curves) {
    const auto it = c.loss.find(factor);
    if (it == c.loss.end()) continue;
    double best = std::numeric_limits<double>::infinity();
    for (const auto& row : it->second) {
      double m = 0;
      for (double v : row) m += v / double(row.size());
      best = std::min(best, m);
    }
    const std::string title = fmt::format("L = {}", c.L);
    Series& s = series_for(series, title, palette.group_color(title));
    for (size_t k = 0; k < c.tau.size(); ++k)
      for (double v : it->second[k]) s.at[c.tau[k] / double(c.L)].push_back(v - best);
  }
  return series;
}

// L, then per context factor τ* (empty where not located), and its interval held inside the grid's
// span (an end the grid does not bound drawn at the grid's end; the CSV's <k>L_open column says which).
Csv star_csv(const std::vector<TauLawCurve>& curves, const TauLaw& law, const std::vector<int64_t>& factors) {
  Csv csv;
  csv.header = {"L"};
  for (int64_t f : factors)
    for (const char* part : {"tau_star", "lo", "hi", "open"}) csv.header.push_back(fmt::format("{}L_{}", f, part));
  for (const auto& c : curves) {
    std::vector<double> row = {double(c.L)};
    for (int64_t f : factors) {
      const auto r = std::find_if(law.rows.begin(), law.rows.end(),
                                  [&](const TauLawRow& x) { return x.L == c.L && x.factor == f; });
      if (r == law.rows.end()) {
        row.insert(row.end(), {NAN, NAN, NAN, NAN});
        continue;
      }
      const double lo = std::max(r->tau_star.lo, c.tau.front()), hi = std::min(r->tau_star.hi, c.tau.back());
      const bool open = lo != r->tau_star.lo || hi != r->tau_star.hi;
      row.insert(row.end(), {r->tau_star.value, lo, hi, open ? 1.0 : 0.0});
    }
    csv.rows.push_back(row);
  }
  return csv;
}

}  // namespace

CurvesResult write_tau_law_figures(const std::string& dir, const std::vector<TauLawCurve>& curves, const TauLaw& law) {
  std::filesystem::create_directories(dir);
  CurvesResult out;
  Writer w{dir, out, {}};
  std::vector<int64_t> factors;
  for (const auto& r : law.rows)
    if (std::find(factors.begin(), factors.end(), r.factor) == factors.end()) factors.push_back(r.factor);
  std::sort(factors.begin(), factors.end());
  for (int64_t f : factors) {
    const auto series = loss_series(curves, f, w.palette);
    const std::string name = fmt::format("tau_law_loss_{}L", f);
    w.figure(name, {{name + ".csv", series_csv("tau_over_L", series)}},
             axes(fmt::format("validation loss at {}L above each L's best τ (clipped at 0.1)\n{}", f, seeds_note(series)),
                  "τ / L", "loss − the L's best (nats/token)", true) +
                 "set yrange [-0.01:0.1]\nset ytics 0.01\nset key top left\n"
                 "plot " + series_clauses(name + ".csv", series, "yerrorlines") + ", 0 with lines lc rgb '#bbbbbb' notitle\n");
  }
  if (curves.size() < 2) return out;  // τ* against L needs two L (one point on a log axis has no range)
  std::string plots;
  for (size_t i = 0; i < factors.size(); ++i) {
    const std::string title = fmt::format("{}L", factors[i]);
    const std::string color = w.palette.group_color("context=" + title);
    plots += fmt::format("{}'tau_law_star.csv' using 1:{}:{}:{} with yerrorlines lw 2 pt 7 lc rgb '{}' title 'τ* at {}', \\\n",
                         plots.empty() ? "plot " : "     ", 4 * i + 2, 4 * i + 3, 4 * i + 4, color, title);
  }
  w.figure("tau_law_star", {{"tau_law_star.csv", star_csv(curves, law, factors)}},
           axes(fmt::format("the best τ against the training context ({:.0f}% seed-bootstrap intervals; {} seeds)\n"
                            "an interval the grid does not bound is drawn to the grid's end",
                            100 * law.options.level, law.seeds),
                "training context L (tokens)", "τ* (tokens)", true, true) +
               "set key top left\n" + plots + "     x / 400 with lines dt 2 lc rgb '#444444' title 'τ = L/400 (the paper''s ratio)'\n");
  return out;
}

}  // namespace analysis
