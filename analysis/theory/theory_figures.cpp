#include "analysis/theory/theory_figures.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace analysis {

namespace {

// The colour of a theory transform in the theory's own figures.
std::string theory_color(Writer& w, const std::string& name, const results::DatasetGroup& g) {
  return w.palette.theory_color(group_attribute(g, "transform"), name);
}

// Fig. 1: entropy and recent mass against N.
void theory_context_figures(const TheoryGroups& theory, const std::string& over, Writer& w) {
  for (const auto& [statistic, ylabel, title] :
       {std::tuple<std::string, std::string, std::string>{"entropy", "attention entropy (nats)", "entropy of one query over N keys (Fig. 1)"},
        {"recent_mass", "fraction of attention on the last 100 keys", "attention on the most recent 100 keys (Fig. 1)"}}) {
    std::vector<Series> series;
    for (const auto& [transform, g] : theory) {
      const auto& n = g.integers.at("context");
      const auto& mean = g.arrays.at(statistic).values;
      const auto& se = g.arrays.at(statistic + "_se").values;
      auto& s = series_for(series, transform, theory_color(w, transform, g));
      s.theory = true;
      for (size_t i = 0; i < n.size(); ++i) {
        s.at[double(n[i])].push_back(mean[i]);
        s.given_se[double(n[i])] = se[i];
      }
    }
    const std::string name = "theory_" + statistic + "_vs_context";
    std::string body = axes(fmt::format("{}, IID N(0,1) raw scores\n{}", title, over), "keys N", ylabel, true) +
                       "set yrange [0:*]\nplot " + series_clauses(name + ".csv", series, "yerrorlines");
    if (statistic == "entropy") body += ", log(x) - 0.5 with lines dt 3 lc rgb '#000000' title 'ln N - 1/2'";
    w.figure(name, {{name + ".csv", series_csv("keys", series)}}, body);
  }
}

// Band entropy against N: colour per transform, dash and point type per band.
void theory_band_figure(const TheoryGroups& theory, const std::string& over, Writer& w) {
  std::vector<Series> series;
  for (const auto& [transform, g] : theory) {
    const auto& n = g.integers.at("context");
    const auto& edges = g.integers.at("band_edges");
    const auto& a = g.arrays.at("band_entropy");
    const auto& se = g.arrays.at("band_entropy_se").values;
    const size_t nb = size_t(a.shape[1]);
    for (size_t b = 1; b < nb; ++b)
      for (size_t i = 0; i < n.size(); ++i)
        if (!std::isnan(a.values[i * nb + b])) {
          auto& s = series_for(series,
                               fmt::format("{} [{};{})", transform, edges[b], b + 1 < edges.size() ? std::to_string(edges[b + 1]) : "N"),
                               theory_color(w, transform, g), b - 1);
          s.theory = true;
          s.at[double(n[i])].push_back(a.values[i * nb + b]);
          s.given_se[double(n[i])] = se[i * nb + b];
        }
  }
  w.figure("theory_band_entropy", {{"theory_band_entropy.csv", series_csv("keys", series)}},
           axes(fmt::format("entropy within distance bands, the last band ends at N\n{}; colour: transform, "
                            "dash and point: band", over),
                "keys N", "entropy within the band (nats)", true) +
               "set yrange [0:*]\nset key outside right top font ',9'\n" +
               "plot " + series_clauses("theory_band_entropy.csv", series, "yerrorlines"));
}

// Figs 2 and 6: entropy in [t, tΔ) against t, one figure per Δ, with both fits in the
// transform's colour (dotted: a ln t + b; dash-dot: a √(ln t) + b).
void theory_range_figures(const TheoryGroups& theory, const std::string& over, Writer& w) {
  std::set<int64_t> ratios;
  for (const auto& [transform, g] : theory)
    for (const int64_t r : g.integers.at("range_ratio")) ratios.insert(r);
  for (const int64_t ratio : ratios) {
    std::vector<Series> series;
    std::string fits;
    for (const auto& [transform, g] : theory) {
      const auto& start = g.integers.at("range_start");
      const auto& r = g.integers.at("range_ratio");
      const auto& mean = g.arrays.at("range_entropy").values;
      const auto& se = g.arrays.at("range_entropy_se").values;
      const std::string color = theory_color(w, transform, g);
      auto& s = series_for(series, transform, color);
      for (size_t i = 0; i < start.size(); ++i)
        if (r[i] == ratio) {
          s.at[double(start[i])].push_back(mean[i]);
          s.given_se[double(start[i])] = se[i];
        }
      const auto& fit_ratio = g.integers.at("fit_ratio");
      const auto row = std::find(fit_ratio.begin(), fit_ratio.end(), ratio);
      if (row != fit_ratio.end()) {
        const size_t f = size_t(row - fit_ratio.begin());
        const auto& ln = g.arrays.at("fit_ln_t").values;
        const auto& sq = g.arrays.at("fit_sqrt_ln_t").values;
        fits += fmt::format(", \\\n     ({:.6g})*log(x) + ({:.6g}) with lines lc rgb '{}' dt 3 lw 1.5 title {}", ln[3 * f],
                            ln[3 * f + 1], color,
                            gnuplot_quote(fmt::format("{}: a ln t + b, R² = {:.4f}", transform, ln[3 * f + 2])));
        fits += fmt::format(", \\\n     ({:.6g})*sqrt(log(x)) + ({:.6g}) with lines lc rgb '{}' dt 4 lw 1.5 title {}",
                            sq[3 * f], sq[3 * f + 1], color,
                            gnuplot_quote(fmt::format("{}: a √(ln t) + b, R² = {:.4f}", transform, sq[3 * f + 2])));
      }
    }
    const std::string name = fmt::format("theory_range_entropy_D{}", ratio);
    w.figure(name, {{name + ".csv", series_csv("t", series)}},
             axes(fmt::format("expected entropy in [t, {}t) (Figs 2, 6)\n{}", ratio, over), "range start t (tokens)",
                  "entropy within the range (nats)", true) +
                 "set yrange [0:*]\nset key below maxcols 2\n" + "plot " +
                 series_clauses(name + ".csv", series, "yerrorbars") + fits);
  }
}

// Lemma 1: total unnormalised attention in [t, tΔ) against α·τ·Σ 1/(k+τ).
void theory_lemma1_figures(const TheoryGroups& theory, const std::string& over, Writer& w) {
  for (const auto& [transform, g] : theory) {
    if (!g.arrays.count("lemma1_sum")) continue;
    // Per Δ one colour: the Monte Carlo total (points, with its exact standard error), Lemma 1's
    // sum (solid) and its large-t limit α·τ·ln Δ (dashed).
    std::vector<Series> series;
    const auto& start = g.integers.at("range_start");
    const auto& r = g.integers.at("range_ratio");
    std::set<int64_t> ratios_here(r.begin(), r.end());
    size_t k = 0;
    for (const int64_t ratio : ratios_here) {
      const std::string color = w.palette.group_color(fmt::format("Lemma 1 Δ={}", ratio));
      for (const char* what : {"Monte Carlo", "Lemma 1", "limit"}) series_for(series, fmt::format("{} Δ={}", what, ratio), color, k);
      ++k;
    }
    for (size_t i = 0; i < start.size(); ++i) {
      const double t = double(start[i]);
      auto& mc = series_for(series, fmt::format("Monte Carlo Δ={}", r[i]));
      mc.at[t].push_back(g.arrays.at("range_total").values[i]);
      mc.given_se[t] = g.arrays.at("lemma1_se").values[i];  // the exact one, not the sample's
      series_for(series, fmt::format("Lemma 1 Δ={}", r[i])).at[t].push_back(g.arrays.at("lemma1_sum").values[i]);
      series_for(series, fmt::format("limit Δ={}", r[i])).at[t].push_back(g.arrays.at("lemma1_limit").values[i]);
    }
    const std::string name = "theory_lemma1_" + transform;
    const std::string file = name + ".csv";
    std::vector<std::string> clauses;
    for (size_t i = 0; i < series.size(); ++i) {
      const size_t mean = 2 + 2 * i, se = 3 + 2 * i;
      const auto& s = series[i];
      const std::string what = s.title.substr(0, s.title.find(" Δ"));
      const std::string head = i == 0 ? gnuplot_quote(file) : "''";
      if (what == "Monte Carlo")
        clauses.push_back(fmt::format("{} using 1:{}:{} with yerrorbars lc rgb '{}' pt {} title columnheader({})", head,
                                      mean, se, s.color, point_type(s.variant), mean));
      else
        clauses.push_back(fmt::format("{} using 1:{} with lines lw 1.5 lc rgb '{}' dt {} title columnheader({})", head,
                                      mean, s.color, what == "Lemma 1" ? 1 : 2, mean));
    }
    w.figure(name, {{file, series_csv("t", series)}},
             axes(fmt::format("total unnormalised attention in [t, tΔ), {} (Lemma 1)\n{}", transform, over),
                  "range start t (tokens)", "sum of exp(logit) over the range", true) +
                 fmt::format("plot {}", fmt::join(clauses, ", \\\n     ")));
  }
}

}  // namespace

void theory_figures(const TheoryGroups& theory, int64_t trials, Writer& w) {
  const std::string over = fmt::format("mean ± s.e. over {} trials", trials);
  theory_context_figures(theory, over, w);
  theory_band_figure(theory, over, w);
  theory_range_figures(theory, over, w);
  theory_lemma1_figures(theory, over, w);
}

}  // namespace analysis
