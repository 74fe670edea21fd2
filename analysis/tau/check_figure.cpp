#include "analysis/tau/check_figure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "analysis/export/plot.h"
#include "analysis/seed_paired_gap.h"

namespace analysis {

namespace {

// Each run's mean window loss.
std::vector<double> run_means(const TauArm& arm) {
  std::vector<double> out;
  for (const auto& run : arm.runs) {
    double m = 0;
    for (const double x : run.loss) m += x / double(run.loss.size());
    out.push_back(m);
  }
  return out;
}

std::string context_label(int64_t T, int64_t L) {
  return L > 0 && T % L == 0 ? fmt::format("T = {}L ({})", T / L, T) : fmt::format("T = {}", T);
}

double value_of(const ContextRuns& c, const std::string& tau) {
  for (const auto& a : c.arms)
    if (a.tau == tau) return a.value;
  return std::nan("");
}

}  // namespace

FigureFiles write_tau_check_figure(const std::string& dir, const std::vector<ContextRuns>& grid,
                                   const std::vector<TauVerdict>& verdicts, double own_tau, int64_t L) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  // tau_check.csv: one row per τ; per context the loss above the best, and its interval.
  Csv curves;
  curves.header = {"tau"};
  std::vector<double> taus;
  for (const auto& c : grid)
    for (const auto& a : c.arms)
      if (std::find(taus.begin(), taus.end(), a.value) == taus.end()) taus.push_back(a.value);
  std::sort(taus.begin(), taus.end());
  for (const auto& c : grid)
    for (const char* part : {"above_best", "lo", "hi"})
      curves.header.push_back(fmt::format("T{}_{}", c.context, part));
  for (const double tau : taus) {
    std::vector<double> row = {tau};
    for (const auto& c : grid) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& a : c.arms) best = std::min(best, a.mean());
      const auto arm = std::find_if(c.arms.begin(), c.arms.end(), [&](const TauArm& a) { return a.value == tau; });
      if (arm == c.arms.end()) {
        row.insert(row.end(), 3, std::nan(""));
        continue;
      }
      const auto means = run_means(*arm);
      const double n = double(means.size()), mean = arm->mean() - best;
      double ss = 0;
      for (const double m : means) ss += (m - arm->mean()) * (m - arm->mean());
      const double half = n > 1 ? t_quantile(0.975, n - 1) * std::sqrt(ss / (n - 1) / n) : std::nan("");
      row.insert(row.end(), {mean, mean - half, mean + half});
    }
    curves.rows.push_back(row);
  }
  // tau_check_best.csv: per context, the best τ and the span of τ not resolved from it.
  Csv best;
  best.header = {"context", "best_tau", "near_best_from", "near_best_to"};
  for (const auto& v : verdicts) {
    const auto c = std::find_if(grid.begin(), grid.end(), [&](const ContextRuns& g) { return g.context == v.context; });
    double from = std::numeric_limits<double>::infinity(), to = 0;
    for (const auto& t : v.near_best) {
      from = std::min(from, value_of(*c, t));
      to = std::max(to, value_of(*c, t));
    }
    best.rows.push_back({double(v.context), value_of(*c, v.best_tau), from, to});
  }
  FigureFiles f;
  f.name = "tau_check";
  for (const auto& [file, csv] : {std::pair<std::string, const Csv&>{"tau_check.csv", curves}, {"tau_check_best.csv", best}}) {
    write_csv((fs::path(dir) / file).string(), csv);
    f.csv.push_back((fs::path(dir) / file).string());
  }
  std::string plots;
  const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"};
  for (size_t i = 0; i < grid.size(); ++i) {
    const std::string color = colors[i % 6];
    const std::string label = context_label(grid[i].context, L);
    plots += fmt::format("{}'tau_check.csv' using 1:{}:{}:{} with yerrorlines lw 2 pt 7 lc rgb '{}' title {}, \\\n",
                         plots.empty() ? "plot " : "     ", 3 * i + 2, 3 * i + 3, 3 * i + 4, color,
                         gnuplot_quote(label));
    plots += fmt::format("     'tau_check_best.csv' using 2:($1 == {0} ? 0 : NaN):3:4 with xerrorbars pt 5 ps 1.5 "
                         "lc rgb '{1}' title {2}, \\\n", grid[i].context, color,
                         gnuplot_quote(label + ": best τ, and the τ not resolved from it"));
  }
  const std::string body = fmt::format(
      "set title 'tau check: loss above the best τ of the grid (mean over seeds, 95% t interval)'\n"
      "set logscale x\n"
      "set xlabel 'τ (tokens)'\n"
      "set ylabel 'validation loss − the best τ''s (nats/token)'\n"
      "set arrow from {0},graph 0 to {0},graph 1 nohead dt 2 lc rgb '#444444'\n"
      "set label 'the config''s τ = {0:g}' at {0},graph 0.95 offset 0.5,0\n"
      "set key below\n"
      "set mytics 2\n"
      "{1}     0 with lines lc rgb '#bbbbbb' notitle\n",
      own_tau, plots);
  f.render = render_gnuplot(dir, f.name, body);
  return f;
}

}  // namespace analysis
