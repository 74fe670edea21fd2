#include "analysis/export/run_figures.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "analysis/export/export_table.h"
#include "harness/config/schema.h"
#include "common/mean_se.h"
#include "sweeps/sweep_file.h"

namespace analysis {

namespace {

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
    const std::string kind = group_attribute(g, "transform");
    if (kind != "scale-invariant") {
      out.push_back({&g, {"theory " + name, w.palette.theory_color(kind, name)}});
      continue;
    }
    const double tau = std::stod(group_attribute(g, "tau"));
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

// Loss by position within the window at the longest validation context (/eval/<T>/position_loss,
// last validation), x in units of the training context: where a long window's loss goes.
void position_loss(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  int64_t T = 0;
  for (const auto* r : runs)
    for (const auto& [t, rows] : r->record->eval)
      if (!rows.position_loss.empty()) T = std::max(T, t);
  if (T == 0) return;
  std::vector<Series> series;
  for (const auto* r : runs) {
    const auto it = r->record->eval.find(T);
    if (it == r->record->eval.end() || it->second.position_loss.empty()) continue;
    const auto& buckets = it->second.position_loss.back();
    const double B = double(buckets.size()), L = double(r->train_context);
    auto& s = series_for(series, group_label(set, *r), w.palette.group_color(color_key(set, *r)));
    for (size_t b = 0; b < buckets.size(); ++b)  // bucket b: positions [b·T/B, (b+1)·T/B), at its centre
      s.at[(double(b) + 0.5) * double(T) / B / L].push_back(buckets[b]);
  }
  if (series.size() < 1 || series.front().at.size() < 2) return;
  const std::string name = fmt::format("position_loss_T{}", T);
  w.figure(name, {{name + ".csv", series_csv("position_over_L", series)}},
           axes(fmt::format("validation loss by position in the window at T = {}\n{}", context_text(runs, T),
                            seeds_note(series)),
                "position in the window / L (centre of each bucket)", "validation loss (nats/token)", false) +
               "set arrow from 1, graph 0 to 1, graph 1 nohead dt 3 lc rgb 'gray40'\nplot " +
               series_clauses(name + ".csv", series, max_samples(series) > 1 ? "yerrorlines" : "linespoints"));
}

// Passkey runs (needle.kind: passkey): exact-match accuracy and the key's log-probability
// against the distance d / L, a line per group, mean ± s.e. over seeds.
void passkey_vs_distance(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const std::vector<std::tuple<std::string, std::string, std::string>> panels = {
      {"accuracy", "passkey_vs_distance", "exact match (fraction of examples)"},
      {"mean_log_prob", "passkey_log_prob_vs_distance", "log-probability of the key (nats)"}};
  for (const auto& [array, name, ylabel] : panels) {
    std::vector<Series> series;
    for (const auto* r : runs)
      for (const auto& [d, g] : r->record->needle) {
        if (group_attribute(g, "kind") != "passkey" || !g.arrays.count(array)) continue;
        series_for(series, group_label(set, *r), w.palette.group_color(color_key(set, *r)))
            .at[double(d) / double(r->train_context)]
            .push_back(g.arrays.at(array).values.at(0));
      }
    if (series.empty()) return;
    // the distances span a few octaves: a log axis framed on them, not on whole decades
    double lo = series.front().at.begin()->first, hi = series.front().at.rbegin()->first;
    for (const auto& s : series) lo = std::min(lo, s.at.begin()->first), hi = std::max(hi, s.at.rbegin()->first);
    w.figure(name, {{name + ".csv", series_csv("distance_over_L", series)}},
             axes(fmt::format("passkey retrieval against the key's distance (examples of d + L/2 + 1 tokens)\n{}",
                              seeds_note(series)),
                  "distance d / L (training context)", ylabel, true) +
                 fmt::format("set xrange [{}:{}]\n", lo / 1.5, hi * 1.5) + (array == "accuracy" ? "set yrange [-0.05:1.05]\n" : "") + "plot " +
                 series_clauses(name + ".csv", series, max_samples(series) > 1 ? "yerrorlines" : "linespoints"));
  }
}

}  // namespace

std::vector<const RunEntry*> done_runs(const RunSet& set) {
  std::vector<const RunEntry*> out;
  for (const auto& r : set.runs)
    if (r.state == "done" && r.record) out.push_back(&r);
  return out;
}

void run_figures(const RunSet& set, const std::vector<const RunEntry*>& runs, const TheoryGroups& theory,
                 Writer& w) {
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
  position_loss(set, runs, w);
  passkey_vs_distance(set, runs, w);
}

}  // namespace analysis
