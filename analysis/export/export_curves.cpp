#include "analysis/export_curves.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "analysis/theory/critical_figures.h"
#include "analysis/theory/critical_scaling_file.h"
#include "analysis/export_table.h"
#include "analysis/plot_style.h"
#include "analysis/run_set.h"
#include "harness/config/schema.h"
#include "harness/common/errors.h"
#include "harness/common/mean_se.h"
#include "results/hdf5_io.h"
#include "sweeps/sweep_file.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

// One line of a figure: samples (one per seed) at each x. `group` picks its colour (the palette's
// run group or theory transform), `variant` its dash and point type (Δ, band, layer, context).
struct Series {
  std::string title;
  std::map<double, std::vector<double>> at;
  std::string color;
  size_t variant = 0;
  bool theory = false;                // dashed, whatever the variant
  std::map<double, double> given_se;  // a standard error known exactly (theory): used instead
  std::string legend;                 // the key's text when not the column header (small panels)
};

// x, then "<title>" (the mean over samples) and "<title> se" (its standard error: the given one,
// else over samples; empty for a single sample) per series: gnuplot's legend shows the mean
// column's header.
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
      const auto m = harness::mean_se(it->second);
      row.push_back(m.mean);
      const auto given = s.given_se.find(x);
      row.push_back(given != s.given_se.end() ? given->second : m.se);
    }
    csv.rows.push_back(std::move(row));
  }
  return csv;
}

// The largest number of samples (seeds) behind any point of the figure.
size_t max_samples(const std::vector<Series>& series) {
  size_t n = 0;
  for (const auto& s : series)
    for (const auto& [x, v] : s.at) n = std::max(n, v.size());
  return n;
}

// "3 seeds: mean ± s.e." or "1 seed": what a figure's error bars are, for its title.
std::string seeds_note(const std::vector<Series>& series) {
  const size_t n = max_samples(series);
  return n > 1 ? fmt::format("mean ± s.e. over {} seeds", n) : "1 seed, no error bars";
}

SeriesStyle style_of(const Series& s) {
  // Theory: dashed (2) or, for further variants, the dash-dot types; open points.
  return {s.color, s.theory ? (s.variant == 0 ? 2 : 3 + int(s.variant % 3)) : dash_type(s.variant),
          s.theory ? open_point_type(s.variant) : point_type(s.variant)};
}

// One clause per series of `file` (columns: x = 1, mean = 2 + 2i, se = 3 + 2i), each with its
// own colour, dash and point type. `with`: "yerrorlines" and "yerrorbars" draw the se column
// (0 where it is empty); anything else draws the mean only. `x`: the x column expression.
// `keep`: only the series it accepts (one panel of small multiples); all when null.
std::string series_clauses(const std::string& file, const std::vector<Series>& series, const std::string& with,
                           const std::string& x = "1", const std::function<bool(const Series&)>& keep = nullptr) {
  std::vector<std::string> clauses;
  const bool errors = with == "yerrorlines" || with == "yerrorbars";
  for (size_t i = 0; i < series.size(); ++i) {
    if (keep && !keep(series[i])) continue;
    const size_t mean = 2 + 2 * i, se = 3 + 2 * i;
    const std::string using_ = errors ? fmt::format("{}:{}:(valid({}) ? column({}) : 0)", x, mean, se, se)
                                      : fmt::format("{}:{}", x, mean);
    const std::string title = series[i].legend.empty() ? fmt::format("columnheader({})", mean)
                                                       : gnuplot_quote(series[i].legend);
    // noenhanced: a legend is keys and values (train.batch_size=8), not markup; "_" stays "_".
    clauses.push_back(fmt::format("{} using {} with {} {} title {} noenhanced", clauses.empty() ? gnuplot_quote(file) : "''",
                                  using_, with, style_of(series[i]).clause(), title));
  }
  return fmt::format("{}", fmt::join(clauses, ", \\\n     "));
}

std::string axes(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 bool logx, bool logy = false) {
  // A title's second line (after "\n") says what the error bars are: a double-quoted string,
  // where gnuplot reads \n as a line break.
  std::string quoted = "\"";
  for (const char c : title) quoted += c == '\n' ? std::string("\\n") : c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  quoted += "\"";
  std::string s = fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted, gnuplot_quote(xlabel),
                              gnuplot_quote(ylabel));
  if (logx) s += "set logscale x 10\n";
  if (logy) s += "set logscale y 10\n";
  return s;
}

struct Writer {
  std::string dir;
  CurvesResult& out;
  Palette palette;

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

// Short labels: "si+p-rope τ=L/400", not "tau=L/400 method=si+p-rope".
std::string short_label(const std::string& key, const std::string& value) {
  if (key == "attention.method") return value;
  if (key == "attention.tau") return "τ=" + value;
  return key.substr(key.rfind('.') + 1) + "=" + value;
}

// The label of a run's group: every varying key but the seed, those the run reads; the method
// first.
std::string group_label(const RunSet& set, const RunEntry& run, const std::set<std::string>& leave_out = {}) {
  std::vector<std::string> parts;
  for (const bool method : {true, false})
    for (const auto& key : set.keys) {
      if (key == "train.seed" || leave_out.count(key) || (key == "attention.method") != method) continue;
      const std::string& v = run.values.at(key);
      if (v != harness::sweeps::kNotRead) parts.push_back(short_label(key, v));
    }
  return parts.empty() ? set.name : fmt::format("{}", fmt::join(parts, " "));
}

// The palette's key for a group: "method=<preset>" when the group is one method preset (the
// baselines' fixed colours), else the label.
std::string color_key(const RunSet& set, const RunEntry& run, const std::set<std::string>& leave_out = {}) {
  const std::string label = group_label(set, run, leave_out);
  return label == run.config.attention.method ? "method=" + label : label;
}

std::vector<const RunEntry*> done_runs(const RunSet& set) {
  std::vector<const RunEntry*> out;
  for (const auto& r : set.runs)
    if (r.state == "done" && r.record) out.push_back(&r);
  return out;
}

// Series by title, in first-seen order; a new one takes `color` and `variant`.
Series& series_for(std::vector<Series>& all, const std::string& title, const std::string& color = "",
                   size_t variant = 0) {
  for (auto& s : all)
    if (s.title == title) return s;
  Series s;
  s.title = title;
  s.color = color;
  s.variant = variant;
  all.push_back(std::move(s));
  return all.back();
}

// "256 (4L)" when every run has the same L that divides T.
std::string context_text(const std::vector<const RunEntry*>& runs, int64_t T) {
  int64_t L = -1;
  for (const auto* r : runs) L = L < 0 || L == r->train_context ? r->train_context : 0;
  return L > 0 && T % L == 0 ? fmt::format("{} ({}L)", T, T / L) : std::to_string(T);
}

// A line per run while that stays readable; beyond kMaxRunLines, a line per group with the mean
// ± s.e. over its seeds (Table 1: 14 methods × 3 seeds).
constexpr size_t kMaxRunLines = 12;

void loss_vs_step(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const bool seeds = std::find(set.keys.begin(), set.keys.end(), "train.seed") != set.keys.end();
  std::set<int64_t> contexts;
  std::set<std::string> seed_values;
  for (const auto* r : runs) {
    for (const auto& [T, rows] : r->record->eval) contexts.insert(T);
    if (seeds) seed_values.insert(r->values.at("train.seed"));
  }
  const bool per_run = !seeds || runs.size() <= kMaxRunLines;
  for (const int64_t T : contexts) {
    std::vector<Series> series;
    for (const auto* r : runs) {
      const auto it = r->record->eval.find(T);
      if (it == r->record->eval.end()) continue;
      std::string title = group_label(set, *r);
      size_t variant = 0;
      if (seeds && per_run) {
        title += " seed=" + r->values.at("train.seed");
        variant = size_t(std::distance(seed_values.begin(), seed_values.find(r->values.at("train.seed"))));
      }
      auto& s = series_for(series, title, w.palette.group_color(color_key(set, *r)), variant);
      for (size_t k = 0; k < it->second.step.size(); ++k) s.at[double(it->second.step[k])].push_back(it->second.loss[k]);
    }
    if (series.empty()) continue;
    const std::string name = fmt::format("loss_vs_step_T{}", T);
    const std::string subtitle =
        !seeds ? "1 seed"
        : per_run ? fmt::format("a line per run; {} seeds, dash type per seed", seed_values.size())
                  : seeds_note(series);
    w.figure(name, {{name + ".csv", series_csv("step", series)}},
             axes(fmt::format("validation loss at T = {}\n{}", context_text(runs, T), subtitle), "optimiser step",
                  "validation loss (nats/token)", false) +
                 "plot " + series_clauses(name + ".csv", series, per_run ? "linespoints" : "yerrorlines"));
  }
}

// x: τ / L, or τ in tokens (`in_tokens`: drawn when the runs were trained at several L, where the
// two axes tell a fixed fraction of L from a fixed size in tokens).
void loss_vs_tau(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w, bool in_tokens) {
  const std::string name = in_tokens ? "loss_vs_tau_tokens" : "loss_vs_tau";
  const auto* tau_key = harness::config::find_key("attention.tau");
  std::vector<Series> series, reference;
  std::set<double> taus;
  // A dash type per validation context, as a multiple of each run's L (1L, 4L, 16L) where it is one:
  // runs trained at several L share them.
  const auto multiple = [](int64_t T, int64_t L) { return T % L == 0 ? double(T / L) : double(T) / double(L); };
  std::set<double> contexts;
  for (const auto* r : runs)
    for (const auto& [T, rows] : r->record->eval) contexts.insert(multiple(T, r->train_context));
  const auto variant_of = [&](int64_t T, int64_t L) {
    return size_t(std::distance(contexts.begin(), contexts.find(multiple(T, L))));
  };
  // The re-validated loss of `harness analyse` (more windows) when every run has it at every
  // context it validated at; else the last validation's.
  const auto analysed_loss = [](const RunEntry& r, int64_t T) -> std::optional<double> {
    const auto g = r.record->analysis.find(T);
    if (g == r.record->analysis.end()) return std::nullopt;
    const auto a = g->second.arrays.find("loss");
    if (a == g->second.arrays.end() || a->second.values.empty()) return std::nullopt;
    return a->second.values[0];
  };
  bool analysed = true;
  for (const auto* r : runs)
    for (const auto& [T, rows] : r->record->eval) analysed = analysed && analysed_loss(*r, T).has_value();
  for (const auto* r : runs) {
    const bool reads_tau = tau_key->is_read(r->config);
    const double tau = reads_tau ? r->config.attention.parameters[attention::Parameter::kTau].resolve(r->train_context) : 0.0;
    const double x = in_tokens ? tau : tau / double(r->train_context);
    if (reads_tau) taus.insert(x);
    const std::string group = group_label(set, *r, {"attention.tau"});
    const std::string color = w.palette.group_color(reads_tau ? color_key(set, *r, {"attention.tau"}) : color_key(set, *r));
    for (const auto& [T, rows] : r->record->eval) {
      if (rows.loss.empty()) continue;
      const std::string ctx = T % r->train_context == 0 ? fmt::format("{}L", T / r->train_context) : std::to_string(T);
      // Runs without τ (rope, alibi): one horizontal reference line per context.
      auto& s = series_for(reads_tau ? series : reference, fmt::format("{} T={}", group, ctx), color,
                           variant_of(T, r->train_context));
      s.at[reads_tau ? x : 0.0].push_back(analysed ? *analysed_loss(*r, T) : rows.loss.back());
    }
  }
  if (taus.size() < 2) {
    w.out.notes.push_back(name + ": skipped (fewer than two values of τ among the done runs that read it)");
    return;
  }
  std::vector<std::pair<std::string, Csv>> csvs = {{name + ".csv", series_csv(in_tokens ? "tau" : "tau_over_L", series)}};
  std::string body = axes(fmt::format("final validation loss against τ{}\n{}; lines without points: runs "
                                      "without τ", analysed ? " (re-validated by harness analyse)" : "",
                                      seeds_note(series)),
                          in_tokens ? "τ (tokens)" : "τ / L (training context)", "validation loss (nats/token)", true) +
                     "plot " + series_clauses(name + ".csv", series, max_samples(series) > 1 ? "yerrorlines" : "linespoints");
  if (!reference.empty()) {
    Csv ref = series_csv("x", reference);  // one row at x = 0: each reference run's mean and se
    csvs.push_back({name + "_reference.csv", ref});
    for (size_t i = 0; i < reference.size(); ++i)
      body += fmt::format(", \\\n     {:.9g} with lines lc rgb '{}' dt {} lw 1.5 title {} noenhanced", ref.rows.at(0)[1 + 2 * i],
                          reference[i].color, dash_type(reference[i].variant), gnuplot_quote(reference[i].title));
  }
  w.figure(name, csvs, body);
}

using TheoryGroups = std::vector<std::pair<std::string, results::DatasetGroup>>;

std::string attribute_text(const results::DatasetGroup& g, const std::string& name) {
  const auto it = g.attributes.find(name);
  return it == g.attributes.end() ? "" : results::attribute_text(it->second);
}

// The theory groups that belong beside these runs, each with the colour it is drawn in: standard
// attention and LogN always; a scale-invariant τ only where a run has that τ (in its run's
// colour). A run τ with no theory, and theory τ with no run, are noted, never overlaid silently.
std::vector<std::pair<const results::DatasetGroup*, std::pair<std::string, std::string>>> matching_theory(
    const TheoryGroups& theory, const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w,
    const std::string& figure) {
  const auto* tau_key = harness::config::find_key("attention.tau");
  std::vector<std::pair<const results::DatasetGroup*, std::pair<std::string, std::string>>> out;
  std::vector<double> matched_taus;  // τ of every theory group drawn
  std::vector<std::string> unmatched_theory;
  for (const auto& [name, g] : theory) {
    const std::string kind = attribute_text(g, "transform");
    if (kind != "scale-invariant") {
      out.push_back({&g, {"theory " + name, w.palette.theory_color(kind, name)}});
      continue;
    }
    const double tau = std::stod(attribute_text(g, "tau"));
    // The curve takes the colour of the first run group with its τ (si+p-rope comes first in the
    // paper's order); every run with that τ counts as having its theory.
    const RunEntry* match = nullptr;
    for (const auto* r : runs)
      if (!match && tau_key->is_read(r->config) &&
          std::abs(r->config.attention.parameters[attention::Parameter::kTau].resolve(r->train_context) - tau) <= 1e-6 * tau)
        match = r;
    if (!match) {
      unmatched_theory.push_back(fmt::format("{:g}", tau));
      continue;
    }
    matched_taus.push_back(tau);
    out.push_back({&g, {fmt::format("theory si τ={:g}", tau), w.palette.group_color(color_key(set, *match))}});
  }
  std::set<std::string> run_taus;
  for (const auto* r : runs)
    if (tau_key->is_read(r->config)) {
      const double tau = r->config.attention.parameters[attention::Parameter::kTau].resolve(r->train_context);
      if (std::none_of(matched_taus.begin(), matched_taus.end(),
                       [&](double m) { return std::abs(tau - m) <= 1e-6 * m; }))
        run_taus.insert(fmt::format("{:g}", tau));
    }
  std::vector<std::string> parts;
  if (!unmatched_theory.empty())
    parts.push_back(fmt::format("theory for τ = {} has no run with that τ (not drawn)", fmt::join(unmatched_theory, ", ")));
  if (!run_taus.empty())
    parts.push_back(fmt::format("runs with τ = {} have no theory (harness theory entropy --tau <τ> adds it)",
                                fmt::join(run_taus, ", ")));
  // Said once, not once per figure.
  const std::string note = fmt::format("--theory: {}", fmt::join(parts, "; "));
  if (!parts.empty() && std::find(w.out.notes.begin(), w.out.notes.end(), note) == w.out.notes.end())
    w.out.notes.push_back(note);
  (void)figure;
  return out;
}

// A per-context attention statistic against T, and the theory's against N when given.
void statistic_vs_context(const RunSet& set, const std::vector<const RunEntry*>& runs,
                          const std::string& statistic, const std::string& ylabel, const TheoryGroups& theory,
                          Writer& w) {
  const MetricSpec metric = parse_metric("attention/" + statistic);
  std::vector<Series> series;
  for (const auto* r : runs)
    for (const int64_t T : metric_contexts(*r->record, metric))
      if (const auto v = metric_value(*r->record, metric, T))
        series_for(series, group_label(set, *r), w.palette.group_color(color_key(set, *r))).at[double(T)].push_back(*v);
  if (series.empty()) {
    w.out.notes.push_back(fmt::format("{}_vs_context: skipped (no attention statistics: set "
                                      "eval.attention_queries > 0, or run harness analyse)", statistic));
    return;
  }
  const std::string name = statistic + "_vs_context";
  std::vector<std::pair<std::string, Csv>> csvs = {{name + ".csv", series_csv("context", series)}};
  std::string body = axes(fmt::format("attention {} against context, mean over layers and heads\n{}{}",
                                      statistic == "entropy" ? "entropy" : "on the last 100 keys",
                                      seeds_note(series), theory.empty() ? "" : "; dashed: IID-logit theory ± s.e."),
                          "context T (tokens); theory: keys N", ylabel, true) +
                     "set yrange [0:*]\n" +
                     "plot " + series_clauses(name + ".csv", series, "yerrorlines");
  if (!theory.empty()) {
    std::vector<Series> lines;
    for (const auto& [g, look] : matching_theory(theory, set, runs, w, name)) {
      auto& s = series_for(lines, look.first, look.second);
      s.theory = true;
      const auto& n = g->integers.at("context");
      const auto& v = g->arrays.at(statistic).values;
      const auto& se = g->arrays.at(statistic + "_se").values;
      for (size_t i = 0; i < n.size(); ++i) {
        s.at[double(n[i])].push_back(v[i]);
        s.given_se[double(n[i])] = se[i];
      }
    }
    if (!lines.empty()) {
      csvs.push_back({name + "_theory.csv", series_csv("keys", lines)});
      body += ", \\\n     " + series_clauses(name + "_theory.csv", lines, "yerrorlines");
    }
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
        series_for(series, group_label(set, *r), w.palette.group_color(color_key(set, *r))).at[double(b)].push_back(*v);
  if (series.empty()) return;
  // Bands are categories: points, no lines. The last band ends at T: narrower than a decade
  // when T is not a power of ten, so it is marked.
  Csv csv = series_csv("band", series);
  csv.text_header = {"distances"};
  bool partial = false;
  for (const auto& row : csv.rows) {
    const size_t b = size_t(row[0]);
    const bool last_partial = b + 2 == edges.size() && edges[b] > 0 && edges[b + 1] < 10 * edges[b];
    partial = partial || last_partial;
    csv.text_rows.push_back({fmt::format("[{};{}){}", edges[b], edges[b + 1], last_partial ? " partial" : "")});
  }
  // Points side by side within a band, so that error bars do not hide each other.
  const double spread = series.size() > 1 ? 0.4 / double(series.size() - 1) : 0.0;
  std::vector<std::string> clauses;
  for (size_t i = 0; i < series.size(); ++i) {
    const size_t mean = 3 + 2 * i, se = 4 + 2 * i;
    clauses.push_back(fmt::format("{} using ($2 + {:.4f}):{}:(valid({}) ? column({}) : 0){} with yerrorbars {} title "
                                  "columnheader({})",
                                  i == 0 ? gnuplot_quote(fmt::format("band_mass_T{}.csv", T)) : "''",
                                  series.size() > 1 ? -0.2 + spread * double(i) : 0.0, mean, se, se,
                                  "", style_of(series[i]).clause(), mean));
  }
  // Tics at the bands' centres (the points sit either side of them).
  std::vector<std::string> tics;
  for (size_t k = 0; k < csv.rows.size(); ++k)
    tics.push_back(fmt::format("{} {}", gnuplot_quote(csv.text_rows[k][0]), csv.rows[k][0]));
  const std::string name = fmt::format("band_mass_T{}", T);
  w.figure(name, {{name + ".csv", csv}},
           axes(fmt::format("attention mass per distance band at T = {}\n{}{}", context_text(runs, T), seeds_note(series),
                            partial ? "; the last band is partial: it ends at T" : ""),
                "key distance t = i - j (tokens)", "fraction of attention", false) +
               "set logscale y 10\nset xrange [-0.5:*]\nset offsets 0, 0.5, 0, 0\n" +
               fmt::format("set xtics ({})\n", fmt::join(tics, ", ")) +
               fmt::format("plot {}", fmt::join(clauses, ", \\\n     ")));
}

void range_entropy(const RunSet& set, const std::vector<const RunEntry*>& runs, const TheoryGroups& theory,
                   Writer& w) {
  const int64_t T = longest_context_with(runs, parse_metric("attention/entropy"));
  if (T == 0) return;
  std::vector<Series> series;
  std::set<int64_t> ratios;
  for (const auto* r : runs) {
    const auto it = r->record->eval.find(T);
    if (it == r->record->eval.end() || it->second.attention.empty()) continue;
    const auto& g = it->second.attention;
    if (!g.integers.count("range_ratio")) continue;
    for (const int64_t x : g.integers.at("range_ratio")) ratios.insert(x);
  }
  const auto variant_of = [&](int64_t ratio) { return size_t(std::distance(ratios.begin(), ratios.find(ratio))); };
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
        series_for(series, fmt::format("{} Δ={}", group_label(set, *r), ratio[k]),
                   w.palette.group_color(color_key(set, *r)), variant_of(ratio[k]))
            .at[double(start[k])]
            .push_back(*v);
    }
  }
  if (series.empty()) {
    w.out.notes.push_back(fmt::format("range_entropy_T{}: skipped (T too short for any range [t, tΔ))", T));
    return;
  }
  const std::string name = fmt::format("range_entropy_T{}", T);
  // The theory's ranges that fit in T, at the Δ the runs have.
  std::vector<Series> lines;
  if (!theory.empty())
    for (const auto& [g, look] : matching_theory(theory, set, runs, w, name)) {
      const auto& start = g->integers.at("range_start");
      const auto& ratio = g->integers.at("range_ratio");
      const auto& v = g->arrays.at("range_entropy").values;
      const auto& se = g->arrays.at("range_entropy_se").values;
      for (size_t i = 0; i < start.size(); ++i) {
        if (!ratios.count(ratio[i]) || start[i] * ratio[i] > T) continue;
        auto& s = series_for(lines, fmt::format("{} Δ={}", look.first, ratio[i]), look.second, variant_of(ratio[i]));
        s.theory = true;
        s.legend = look.first;
        s.at[double(start[i])].push_back(v[i]);
        s.given_se[double(start[i])] = se[i];
      }
    }
  for (auto& s : series) s.legend = s.title.substr(0, s.title.rfind(" Δ="));
  std::vector<std::pair<std::string, Csv>> csvs = {{name + ".csv", series_csv("t", series)}};
  if (!lines.empty()) csvs.push_back({name + "_theory.csv", series_csv("t", lines)});
  // Small multiples: one panel per Δ, the same colours in each (Fig. 2 of the paper is drawn so).
  std::string body = fmt::format(
      "set multiplot layout 1,{} title \"entropy of the attention within [t, tΔ) at T = {} (Fig. 2)\\n{}{}\"\n",
      ratios.size(), context_text(runs, T), seeds_note(series), lines.empty() ? "" : "; dashed, open points: IID-logit theory");
  for (const int64_t ratio : ratios) {
    const size_t k = variant_of(ratio);
    const auto this_ratio = [k](const Series& s) { return s.variant == k; };
    body += fmt::format("set title 'Δ = {}'\nset xlabel 'range start t (tokens)'\nset ylabel {}\n", ratio,
                        k == 0 ? "'entropy within the range (nats)'" : "''");
    body += "set logscale x 10\nset yrange [0:*]\nset key inside left top font ',8' spacing 0.9\n";
    body += "plot " + series_clauses(name + ".csv", series, "yerrorlines", "1", this_ratio);
    if (!lines.empty()) body += ", \\\n     " + series_clauses(name + "_theory.csv", lines, "yerrorlines", "1", this_ratio);
    body += "\n";
  }
  w.figure(name, csvs, body);
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
          series_for(series, fmt::format("{} layer {}", group_label(set, *r), layer),
                     w.palette.group_color(color_key(set, *r)), layer)
              .at[normal[k]]
              .push_back(score.values[layer * points + k]);
    }
    if (series.empty()) continue;
    const std::string name = fmt::format("qq_T{}", T);
    w.figure(name, {{name + ".csv", series_csv("normal_quantile", series)}},
             axes(fmt::format("raw scores s = scale·q·k against a Gaussian at T = {} (Appendix J)\n{}; dash type: layer",
                              context_text(runs, T), seeds_note(series)),
                  "standard normal quantile", "standardised raw-score quantile", false) +
                 "plot " + series_clauses(name + ".csv", series, "lines") +
                 ", x with lines dt 3 lc rgb '#000000' title 'Gaussian'");
  }
}

TheoryGroups read_theory(const std::string& path) {
  if (results_file_kind(path) != "theory-entropy")
    throw harness::InputError(fmt::format("--theory: {} is not a `harness theory entropy` file", path));
  auto file = results::h5::open_file(path);
  TheoryGroups out;
  for (const auto& name : results::h5::member_names(file)) out.emplace_back(name, results::read_group(file, name));
  return out;
}

// ---- theory file ------------------------------------------------------------------------------

// The colour of a theory transform in the theory's own figures.
std::string theory_color(Writer& w, const std::string& name, const results::DatasetGroup& g) {
  return w.palette.theory_color(attribute_text(g, "transform"), name);
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

void theory_figures(const TheoryGroups& theory, int64_t trials, Writer& w) {
  const std::string over = fmt::format("mean ± s.e. over {} trials", trials);
  theory_context_figures(theory, over, w);
  theory_band_figure(theory, over, w);
  theory_range_figures(theory, over, w);
  theory_lemma1_figures(theory, over, w);
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
  // Everything is read and checked before DIR is created: a bad input leaves nothing behind.
  CurvesResult out;
  Writer w{o.out_dir, out, {}};
  const std::string kind = results_file_kind(input);
  if (kind == "theory-entropy") {
    const auto theory = read_theory(input);
    fs::create_directories(o.out_dir);
    const auto file = results::h5::open_file(input);
    theory_figures(theory, results::h5::read_int_attr(file, "trials"), w);
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
  const auto theory = o.theory.empty() ? TheoryGroups{} : read_theory(o.theory);
  fs::create_directories(o.out_dir);
  loss_vs_step(set, runs, w);
  loss_vs_tau(set, runs, w, false);
  std::set<int64_t> train_contexts;
  for (const auto* r : runs) train_contexts.insert(r->train_context);
  if (train_contexts.size() > 1) loss_vs_tau(set, runs, w, true);
  statistic_vs_context(set, runs, "entropy", "attention entropy (nats)", theory, w);
  statistic_vs_context(set, runs, "recent_mass", "fraction of attention on the last 100 keys", theory, w);
  band_mass(set, runs, w);
  range_entropy(set, runs, theory, w);
  qq(set, runs, w);
  return out;
}

}  // namespace analysis
