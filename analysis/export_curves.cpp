#include "analysis/export_curves.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "analysis/critical_figures.h"
#include "analysis/critical_scaling_file.h"
#include "analysis/export_table.h"
#include "analysis/run_set.h"
#include "harness/config/schema.h"
#include "harness/util/errors.h"
#include "results/hdf5_io.h"
#include "sweeps/sweep_file.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

// One line of a figure: samples (one per seed) at each x.
struct Series {
  std::string title;
  std::map<double, std::vector<double>> at;
};

// x, then "<title>" (the mean over samples) and "<title> se" (its standard error; empty for a
// single sample) per series: gnuplot's legend shows the mean column's header.
Csv series_csv(const std::string& x_name, const std::vector<Series>& series) {
  Csv csv;
  csv.header = {x_name};
  std::set<double> xs;
  for (const auto& s : series) {
    csv.header.push_back(s.title);
    csv.header.push_back(s.title + " se");
    for (const auto& [x, v] : s.at) xs.insert(x);
  }
  for (const double x : xs) {
    std::vector<double> row = {x};
    for (const auto& s : series) {
      const auto it = s.at.find(x);
      if (it == s.at.end() || it->second.empty()) {
        row.insert(row.end(), {std::nan(""), std::nan("")});
        continue;
      }
      const auto& v = it->second;
      double mean = 0, ss = 0;
      for (const double y : v) mean += y / double(v.size());
      for (const double y : v) ss += (y - mean) * (y - mean);
      row.push_back(mean);
      row.push_back(v.size() > 1 ? std::sqrt(ss / double(v.size() - 1) / double(v.size())) : std::nan(""));
    }
    csv.rows.push_back(std::move(row));
  }
  return csv;
}

// The gnuplot plot clause of `count` mean/se column pairs from column 2 of `file`.
std::string series_clause(const std::string& file, size_t count, const std::string& style) {
  return fmt::format(
      "for [i=0:{}] {} using 1:(column(2+2*i)):(valid(3+2*i) ? column(3+2*i) : 0) with {} title "
      "columnheader(2+2*i)",
      count - 1, gnuplot_quote(file), style);
}

std::string axes(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 bool logx, bool logy = false) {
  std::string s = fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", gnuplot_quote(title),
                              gnuplot_quote(xlabel), gnuplot_quote(ylabel));
  if (logx) s += "set logscale x 10\n";
  if (logy) s += "set logscale y 10\n";
  return s;
}

struct Writer {
  std::string dir;
  CurvesResult& out;

  void figure(const std::string& name, const std::vector<std::pair<std::string, Csv>>& csvs,
              const std::string& body) {
    FigureFiles f;
    f.name = name;
    for (const auto& [file, csv] : csvs) {
      const std::string path = (fs::path(dir) / file).string();
      write_csv(path, csv);
      f.csv.push_back(path);
    }
    f.render = render_gnuplot(dir, name, body);
    out.figures.push_back(std::move(f));
  }
};

// ---- runs ------------------------------------------------------------------------------------

std::string short_key(const std::string& key) { return key.substr(key.rfind('.') + 1); }

// The label of a run's group: every varying key but the seed, those the run reads.
std::string group_label(const RunSet& set, const RunEntry& run, const std::set<std::string>& leave_out = {}) {
  std::vector<std::string> parts;
  for (const auto& key : set.keys) {
    if (key == "train.seed" || leave_out.count(key)) continue;
    const std::string& v = run.values.at(key);
    if (v != harness::sweeps::kNotRead) parts.push_back(short_key(key) + "=" + v);
  }
  return parts.empty() ? set.name : fmt::format("{}", fmt::join(parts, " "));
}

std::vector<const RunEntry*> done_runs(const RunSet& set) {
  std::vector<const RunEntry*> out;
  for (const auto& r : set.runs)
    if (r.state == "done" && r.record) out.push_back(&r);
  return out;
}

// Series by group label, in first-seen order.
Series& series_for(std::vector<Series>& all, const std::string& title) {
  for (auto& s : all)
    if (s.title == title) return s;
  all.push_back({title, {}});
  return all.back();
}

void loss_vs_step(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const bool seeds = std::find(set.keys.begin(), set.keys.end(), "train.seed") != set.keys.end();
  std::set<int64_t> contexts;
  for (const auto* r : runs)
    for (const auto& [T, rows] : r->record->eval) contexts.insert(T);
  for (const int64_t T : contexts) {
    std::vector<Series> series;
    for (const auto* r : runs) {
      const auto it = r->record->eval.find(T);
      if (it == r->record->eval.end()) continue;
      std::string title = group_label(set, *r);
      if (seeds) title += " seed=" + r->values.at("train.seed");
      auto& s = series_for(series, title);
      for (size_t k = 0; k < it->second.step.size(); ++k) s.at[double(it->second.step[k])].push_back(it->second.loss[k]);
    }
    if (series.empty()) continue;
    const std::string name = fmt::format("loss_vs_step_T{}", T);
    w.figure(name, {{name + ".csv", series_csv("step", series)}},
             axes(fmt::format("validation loss at T = {}", T), "optimiser step", "validation loss (nats/token)", false) +
                 "plot " + series_clause(name + ".csv", series.size(), "linespoints"));
  }
}

void loss_vs_tau(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const auto* tau_key = harness::config::find_key("attention.tau");
  std::vector<Series> series;
  std::set<double> taus;
  for (const auto* r : runs) {
    if (!tau_key->is_read(r->config)) continue;
    const double x = r->config.attention.tau.resolve(r->train_context) / double(r->train_context);
    taus.insert(x);
    const std::string group = group_label(set, *r, {"attention.tau"});
    for (const auto& [T, rows] : r->record->eval) {
      if (rows.loss.empty()) continue;
      const std::string ctx = T % r->train_context == 0 ? fmt::format("{}L", T / r->train_context) : std::to_string(T);
      series_for(series, fmt::format("T={} {}", ctx, group)).at[x].push_back(rows.loss.back());
    }
  }
  if (taus.size() < 2) {
    w.out.notes.push_back("loss_vs_tau: skipped (fewer than two values of τ among the done runs that read it)");
    return;
  }
  w.figure("loss_vs_tau", {{"loss_vs_tau.csv", series_csv("tau_over_L", series)}},
           axes("final validation loss against τ (mean ± s.e. over seeds)", "τ / L (training context)",
                "validation loss (nats/token)", true) +
               "plot " + series_clause("loss_vs_tau.csv", series.size(), "yerrorlines"));
}

// A per-context attention statistic against T, and the theory's against N when given.
void statistic_vs_context(const RunSet& set, const std::vector<const RunEntry*>& runs,
                          const std::string& statistic, const std::string& ylabel,
                          const std::vector<std::pair<std::string, results::DatasetGroup>>& theory,
                          Writer& w) {
  const MetricSpec metric = parse_metric("attention/" + statistic);
  std::vector<Series> series;
  for (const auto* r : runs)
    for (const int64_t T : metric_contexts(*r->record, metric))
      if (const auto v = metric_value(*r->record, metric, T))
        series_for(series, group_label(set, *r)).at[double(T)].push_back(*v);
  if (series.empty()) {
    w.out.notes.push_back(fmt::format("{}_vs_context: skipped (no attention statistics: set "
                                      "eval.attention_queries > 0, or run harness analyse)", statistic));
    return;
  }
  const std::string name = statistic + "_vs_context";
  std::vector<std::pair<std::string, Csv>> csvs = {{name + ".csv", series_csv("context", series)}};
  std::string body = axes(fmt::format("attention {} against context (mean over layers and heads)",
                                      statistic == "entropy" ? "entropy" : "on the last 100 keys"),
                          "context T (tokens); theory: keys N", ylabel, true) +
                     "plot " + series_clause(name + ".csv", series.size(), "yerrorlines");
  if (!theory.empty()) {
    std::vector<Series> lines;
    for (const auto& [transform, g] : theory) {
      auto& s = series_for(lines, "theory " + transform);
      const auto& n = g.integers.at("context");
      const auto& v = g.arrays.at(statistic).values;
      for (size_t i = 0; i < n.size(); ++i) s.at[double(n[i])].push_back(v[i]);
    }
    csvs.push_back({name + "_theory.csv", series_csv("keys", lines)});
    body += fmt::format(", for [i=0:{}] {} using 1:(column(2+2*i)) with lines dt 2 lw 2 title columnheader(2+2*i)",
                        lines.size() - 1, gnuplot_quote(name + "_theory.csv"));
  }
  w.figure(name, csvs, body);
}

int64_t longest_context_with(const std::vector<const RunEntry*>& runs, const MetricSpec& m) {
  int64_t T = 0;
  for (const auto* r : runs)
    for (const int64_t t : metric_contexts(*r->record, m)) T = std::max(T, t);
  return T;
}

void band_mass(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const int64_t T = longest_context_with(runs, parse_metric("attention/entropy"));
  if (T == 0) return;
  std::vector<int64_t> edges;
  for (const auto* r : runs) {
    const auto it = r->record->eval.find(T);
    if (it != r->record->eval.end() && it->second.attention.integers.count("band_edges"))
      edges = it->second.attention.integers.at("band_edges");
  }
  std::vector<Series> series;
  for (const auto* r : runs)
    for (size_t b = 0; b + 1 < edges.size(); ++b)
      if (const auto v = metric_value(*r->record, parse_metric(fmt::format("attention/band_mass@{}", edges[b])), T))
        series_for(series, group_label(set, *r)).at[double(b)].push_back(*v);
  if (series.empty()) return;
  Csv csv = series_csv("band", series);
  csv.text_header = {"distances"};
  for (const auto& row : csv.rows) {
    const size_t b = size_t(row[0]);
    csv.text_rows.push_back({fmt::format("[{};{})", edges[b], edges[b + 1])});
  }
  const std::string name = fmt::format("band_mass_T{}", T);
  w.figure(name, {{name + ".csv", csv}},
           axes(fmt::format("attention mass per distance band at T = {}", T), "key distance t = i - j (tokens)",
                "fraction of attention", false) +
               "set logscale y 10\n" +
               fmt::format("plot for [i=0:{}] {} using 2:(column(3+2*i)):(valid(4+2*i) ? column(4+2*i) : 0):xtic(1) "
                           "with yerrorlines title columnheader(3+2*i)",
                           series.size() - 1, gnuplot_quote(name + ".csv")));
}

void range_entropy(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const int64_t T = longest_context_with(runs, parse_metric("attention/entropy"));
  if (T == 0) return;
  std::vector<Series> series;
  for (const auto* r : runs) {
    const auto it = r->record->eval.find(T);
    if (it == r->record->eval.end() || it->second.attention.empty()) continue;
    const auto& g = it->second.attention;
    if (!g.integers.count("range_start") || !g.integers.count("range_ratio")) continue;
    const auto& start = g.integers.at("range_start");
    const auto& ratio = g.integers.at("range_ratio");
    for (size_t k = 0; k < start.size(); ++k) {
      const auto m = parse_metric(fmt::format("attention/range_entropy@{}x{}", start[k], ratio[k]));
      if (const auto v = metric_value(*r->record, m, T))
        series_for(series, fmt::format("Δ={} {}", ratio[k], group_label(set, *r))).at[double(start[k])].push_back(*v);
    }
  }
  if (series.empty()) {
    w.out.notes.push_back(fmt::format("range_entropy_T{}: skipped (T too short for any range [t, tΔ))", T));
    return;
  }
  const std::string name = fmt::format("range_entropy_T{}", T);
  w.figure(name, {{name + ".csv", series_csv("t", series)}},
           axes(fmt::format("entropy of the attention within [t, tΔ) at T = {} (Fig. 2)", T),
                "range start t (tokens)", "entropy within the range (nats)", true) +
               "plot " + series_clause(name + ".csv", series.size(), "yerrorlines"));
}

void qq(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  std::set<int64_t> contexts;
  for (const auto* r : runs)
    for (const auto& [T, g] : r->record->analysis) contexts.insert(T);
  if (contexts.empty()) {
    w.out.notes.push_back("qq: skipped (no run has been analysed: harness analyse <sweep file or run dir>)");
    return;
  }
  for (const int64_t T : contexts) {
    std::vector<Series> series;
    for (const auto* r : runs) {
      const auto it = r->record->analysis.find(T);
      if (it == r->record->analysis.end() || !it->second.arrays.count("qq_score")) continue;
      const auto& normal = it->second.arrays.at("qq_normal").values;
      const auto& score = it->second.arrays.at("qq_score");
      const size_t points = normal.size();
      for (size_t layer = 0; layer < score.rows(); ++layer)
        for (size_t k = 0; k < points; ++k)
          series_for(series, fmt::format("{} layer {}", group_label(set, *r), layer))
              .at[normal[k]]
              .push_back(score.values[layer * points + k]);
    }
    if (series.empty()) continue;
    const std::string name = fmt::format("qq_T{}", T);
    w.figure(name, {{name + ".csv", series_csv("normal_quantile", series)}},
             axes(fmt::format("raw scores s = scale·q·k against a Gaussian at T = {} (Appendix J)", T),
                  "standard normal quantile", "standardised raw-score quantile", false) +
                 "plot " + series_clause(name + ".csv", series.size(), "lines") +
                 ", x with lines dt 2 lc 'black' title 'Gaussian'");
  }
}

std::vector<std::pair<std::string, results::DatasetGroup>> read_theory(const std::string& path) {
  if (results_file_kind(path) != "theory-entropy")
    throw harness::InputError(fmt::format("--theory: {} is not a `harness theory entropy` file", path));
  auto file = results::h5::open_file(path);
  std::vector<std::pair<std::string, results::DatasetGroup>> out;
  for (const auto& name : results::h5::member_names(file)) out.emplace_back(name, results::read_group(file, name));
  return out;
}

// ---- theory file ------------------------------------------------------------------------------

void theory_figures(const std::vector<std::pair<std::string, results::DatasetGroup>>& theory, Writer& w) {
  for (const auto& [statistic, ylabel, title] :
       {std::tuple<std::string, std::string, std::string>{"entropy", "attention entropy (nats)", "entropy of one query over N keys (Fig. 1)"},
        {"recent_mass", "fraction of attention on the last 100 keys", "attention on the most recent 100 keys (Fig. 1)"}}) {
    std::vector<Series> series;
    for (const auto& [transform, g] : theory) {
      const auto& n = g.integers.at("context");
      const auto& mean = g.arrays.at(statistic).values;
      auto& s = series_for(series, transform);
      for (size_t i = 0; i < n.size(); ++i) s.at[double(n[i])].push_back(mean[i]);
    }
    // se from the file, not from seeds: write mean and se columns directly.
    Csv csv = series_csv("keys", series);
    for (size_t i = 0; i < csv.rows.size(); ++i)
      for (size_t k = 0; k < theory.size(); ++k) {
        const auto& g = theory[k].second;
        const auto& n = g.integers.at("context");
        const auto at = std::find(n.begin(), n.end(), int64_t(csv.rows[i][0]));
        if (at != n.end()) csv.rows[i][2 + 2 * k] = g.arrays.at(statistic + "_se").values[size_t(at - n.begin())];
      }
    const std::string name = "theory_" + statistic + "_vs_context";
    std::string body = axes(title + ", IID N(0,1) raw scores", "keys N", ylabel, true) + "plot " +
                       series_clause(name + ".csv", series.size(), "yerrorlines");
    if (statistic == "entropy") body += ", log(x) - 0.5 with lines dt 2 lc 'black' title 'ln N - 1/2'";
    w.figure(name, {{name + ".csv", csv}}, body);
  }
  // Band entropy against N: a line per transform and band.
  {
    std::vector<Series> series;
    for (const auto& [transform, g] : theory) {
      const auto& n = g.integers.at("context");
      const auto& edges = g.integers.at("band_edges");
      const auto& a = g.arrays.at("band_entropy");
      const size_t nb = size_t(a.shape[1]);
      for (size_t b = 1; b < nb; ++b)
        for (size_t i = 0; i < n.size(); ++i)
          if (!std::isnan(a.values[i * nb + b]))
            series_for(series, fmt::format("{} [{};{})", transform, edges[b], b + 1 < edges.size() ? edges[b + 1] : 0))
                .at[double(n[i])]
                .push_back(a.values[i * nb + b]);
    }
    w.figure("theory_band_entropy", {{"theory_band_entropy.csv", series_csv("keys", series)}},
             axes("entropy within distance bands (the last band ends at N)", "keys N",
                  "entropy within the band (nats)", true) +
                 "plot " + series_clause("theory_band_entropy.csv", series.size(), "linespoints"));
  }
  // Figs 2 and 6: entropy in [t, tΔ) against t, one figure per Δ, with both fits.
  std::set<int64_t> ratios;
  for (const auto& [transform, g] : theory)
    for (const int64_t r : g.integers.at("range_ratio")) ratios.insert(r);
  for (const int64_t ratio : ratios) {
    std::vector<Series> series;
    std::string fits;
    size_t k = 0;
    for (const auto& [transform, g] : theory) {
      const auto& start = g.integers.at("range_start");
      const auto& r = g.integers.at("range_ratio");
      const auto& mean = g.arrays.at("range_entropy").values;
      auto& s = series_for(series, transform);
      for (size_t i = 0; i < start.size(); ++i)
        if (r[i] == ratio) s.at[double(start[i])].push_back(mean[i]);
      const auto& fit_ratio = g.integers.at("fit_ratio");
      const auto row = std::find(fit_ratio.begin(), fit_ratio.end(), ratio);
      if (row != fit_ratio.end()) {
        const size_t f = size_t(row - fit_ratio.begin());
        const auto& ln = g.arrays.at("fit_ln_t").values;
        const auto& sq = g.arrays.at("fit_sqrt_ln_t").values;
        fits += fmt::format(", ({:.6g})*log(x) + ({:.6g}) with lines dt 3 lc {} title {}", ln[3 * f], ln[3 * f + 1], k + 1,
                            gnuplot_quote(fmt::format("{}: a ln t + b, R² = {:.4f}", transform, ln[3 * f + 2])));
        fits += fmt::format(", ({:.6g})*sqrt(log(x)) + ({:.6g}) with lines dt 2 lc {} title {}", sq[3 * f], sq[3 * f + 1], k + 1,
                            gnuplot_quote(fmt::format("{}: a √(ln t) + b, R² = {:.4f}", transform, sq[3 * f + 2])));
      }
      ++k;
    }
    const std::string name = fmt::format("theory_range_entropy_D{}", ratio);
    w.figure(name, {{name + ".csv", series_csv("t", series)}},
             axes(fmt::format("expected entropy in [t, {}t) (Figs 2, 6)", ratio), "range start t (tokens)",
                  "entropy within the range (nats)", true) +
                 "set key below maxcols 2\n" +
                 fmt::format("plot for [i=0:{}] {} using 1:(column(2+2*i)) with points pt 7 lc (i+1) title columnheader(2+2*i)",
                             series.size() - 1, gnuplot_quote(name + ".csv")) + fits);
  }
  // Lemma 1: total unnormalised attention in [t, tΔ) against α·τ·Σ 1/(k+τ).
  for (const auto& [transform, g] : theory) {
    if (!g.arrays.count("lemma1_sum")) continue;
    // Per Δ three series in one colour: the Monte Carlo total (with its exact standard error),
    // Lemma 1's sum, and its large-t limit α·τ·ln Δ.
    std::vector<Series> series;
    const auto& start = g.integers.at("range_start");
    const auto& r = g.integers.at("range_ratio");
    std::set<int64_t> ratios_here(r.begin(), r.end());
    for (const int64_t ratio : ratios_here)
      for (const char* what : {"Monte Carlo", "Lemma 1", "limit"})
        series_for(series, fmt::format("{} Δ={}", what, ratio));
    for (size_t i = 0; i < start.size(); ++i) {
      const double t = double(start[i]);
      series_for(series, fmt::format("Monte Carlo Δ={}", r[i])).at[t].push_back(g.arrays.at("range_total").values[i]);
      series_for(series, fmt::format("Lemma 1 Δ={}", r[i])).at[t].push_back(g.arrays.at("lemma1_sum").values[i]);
      series_for(series, fmt::format("limit Δ={}", r[i])).at[t].push_back(g.arrays.at("lemma1_limit").values[i]);
    }
    Csv csv = series_csv("t", series);
    for (auto& row : csv.rows)  // the Monte Carlo columns' se: the exact one, not the sample's
      for (size_t k = 0; k < ratios_here.size(); ++k) {
        const int64_t ratio = *std::next(ratios_here.begin(), long(k));
        for (size_t i = 0; i < start.size(); ++i)
          if (r[i] == ratio && double(start[i]) == row[0]) row[2 + 6 * k] = g.arrays.at("lemma1_se").values[i];
      }
    const std::string name = "theory_lemma1_" + transform;
    const std::string file = gnuplot_quote(name + ".csv");
    w.figure(name, {{name + ".csv", csv}},
             axes(fmt::format("total unnormalised attention in [t, tΔ), {} (Lemma 1)", transform),
                  "range start t (tokens)", "sum of exp(logit) over the range", true) +
                 fmt::format("plot for [i=0:{0}] {1} using 1:(column(2+6*i)):(column(3+6*i)) with yerrorbars "
                             "pt 7 lc (i+1) title columnheader(2+6*i), "
                             "for [i=0:{0}] {1} using 1:(column(4+6*i)) with lines lw 2 lc (i+1) title columnheader(4+6*i), "
                             "for [i=0:{0}] {1} using 1:(column(6+6*i)) with lines dt 2 lc (i+1) title columnheader(6+6*i)",
                             ratios_here.size() - 1, file));
  }
}

}  // namespace

std::string results_file_kind(const std::string& path) {
  if (fs::is_directory(path) || fs::path(path).extension() != ".h5") return "";
  try {
    return results::h5::file_kind(path);
  } catch (const std::exception&) {
    return "";  // not HDF5: not a results file
  }
}

CurvesResult export_curves(const std::string& input, const CurvesOptions& o) {
  if (o.out_dir.empty()) throw harness::InputError("export curves: --out DIR is required");
  CurvesResult out;
  fs::create_directories(o.out_dir);
  Writer w{o.out_dir, out};
  const std::string kind = results_file_kind(input);
  if (kind == "theory-entropy") {
    theory_figures(read_theory(input), w);
    return out;
  }
  if (kind == kCriticalScalingKind) {
    const auto figures = export_critical_scaling_figures(input, o.out_dir);
    FigureFiles f;
    f.name = "critical-scaling";
    for (const auto& file : figures.files) {
      if (fs::path(file).extension() == ".csv") f.csv.push_back(file);
      if (fs::path(file).extension() == ".svg" || fs::path(file).extension() == ".png") f.render.images.push_back(file);
    }
    for (const auto& n : figures.notices) out.notes.push_back(n);
    out.figures.push_back(std::move(f));
    out.tables.push_back(figures.gamma_c_table);
    return out;
  }
  if (!kind.empty()) throw harness::InputError(fmt::format("{}: no figures for a '{}' file", input, kind));
  const RunSet set = load_run_set(input);
  out.notes.insert(out.notes.end(), set.warnings.begin(), set.warnings.end());
  const auto runs = done_runs(set);
  if (runs.empty()) {
    out.notes.push_back(fmt::format("{}: no run is done yet: nothing to draw", input));
    return out;
  }
  if (runs.size() < set.runs.size())
    out.notes.push_back(fmt::format("{} of {} runs are not done and are left out", set.runs.size() - runs.size(),
                                    set.runs.size()));
  const auto theory = o.theory.empty() ? std::vector<std::pair<std::string, results::DatasetGroup>>{} : read_theory(o.theory);
  loss_vs_step(set, runs, w);
  loss_vs_tau(set, runs, w);
  statistic_vs_context(set, runs, "entropy", "attention entropy (nats)", theory, w);
  statistic_vs_context(set, runs, "recent_mass", "fraction of attention on the last 100 keys", theory, w);
  band_mass(set, runs, w);
  range_entropy(set, runs, w);
  qq(set, runs, w);
  return out;
}

}  // namespace analysis
