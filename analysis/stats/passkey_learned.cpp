#include "analysis/stats/passkey_learned.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>
#include <stdexcept>

#include "analysis/export/figure_writer.h"
#include "analysis/pairwise_gaps.h"
#include "analysis/run_set.h"

namespace fs = std::filesystem;

namespace analysis {

bool learned_to_copy(const PasskeyRun& run) {
  return !run.accuracy.empty() && run.accuracy.begin()->second >= kLearnedAccuracy;
}

PasskeyLearned passkey_learned(const std::vector<PasskeyRun>& runs, double alpha) {
  if (!(alpha > 0 && alpha < 1)) throw std::invalid_argument(fmt::format("alpha must be in (0, 1), got {}", alpha));
  PasskeyLearned out;
  out.alpha = alpha;
  for (const auto& r : runs) {
    auto arm = std::find_if(out.arms.begin(), out.arms.end(), [&](const PasskeyArm& a) { return a.label == r.arm; });
    if (arm == out.arms.end()) arm = out.arms.insert(out.arms.end(), PasskeyArm{r.arm, 0, 0, {}});
    arm->seeds += 1;
    arm->learned += learned_to_copy(r);
  }
  for (auto& a : out.arms) a.share_ci = stats::clopper_pearson(a.learned, a.seeds, 0.95);
  std::vector<double> p;
  for (size_t a = 0; a < out.arms.size(); ++a)
    for (size_t b = a + 1; b < out.arms.size(); ++b) {
      const auto& x = out.arms[a];
      const auto& y = out.arms[b];
      PasskeyPair pair;
      pair.a = a, pair.b = b;
      pair.p = stats::fisher_exact_p(x.learned, x.seeds - x.learned, y.learned, y.seeds - y.learned);
      p.push_back(pair.p);
      out.pairs.push_back(pair);
    }
  const auto rejected = holm_rejections(p, alpha);
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return p[i] < p[j]; });
  for (size_t k = 0; k < order.size(); ++k) out.pairs[order[k]].threshold = alpha / double(p.size() - k);
  for (size_t k = 0; k < p.size(); ++k) out.pairs[k].resolved = rejected[k];
  return out;
}

std::vector<PasskeyRun> passkey_runs(const RunSet& set, const std::vector<const RunEntry*>& runs) {
  static const std::set<std::string> not_arm = {"train.seed", "task", "init_from"};
  std::vector<PasskeyRun> out;
  for (const auto* r : runs) {
    if (!r->record || r->config.task != "needle") continue;
    PasskeyRun p;
    for (const auto& [d, g] : r->record->needle)
      if (group_attribute(g, "kind") == "passkey" && g.arrays.count("accuracy") &&
          !g.arrays.at("accuracy").values.empty())
        p.accuracy[d] = g.arrays.at("accuracy").values.at(0);
    if (p.accuracy.empty()) continue;
    std::vector<std::string> parts;
    std::vector<std::string> keys;
    for (const auto& key : set.keys)
      if (!not_arm.count(key)) keys.push_back(key);
    for (const auto& key : keys) {
      const auto it = r->values.find(key);
      const std::string v = it != r->values.end() ? it->second : "";
      parts.push_back(keys.size() == 1 ? v : key + "=" + v);
    }
    p.arm = parts.empty() ? set.name : fmt::format("{}", fmt::join(parts, ", "));
    const auto seed = r->values.find("train.seed");
    p.seed = seed != r->values.end() ? std::stoll(seed->second) : int64_t(r->config.train.seed);
    p.train_context = r->train_context;
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

// Over the learned seeds of each arm: exact match at each d / L.
std::vector<Series> learned_series(const PasskeyLearned& result, const std::vector<PasskeyRun>& runs) {
  std::vector<Series> series;
  for (const auto& arm : result.arms) {
    if (arm.learned == 0) continue;
    Series s;
    s.title = fmt::format("{} ({} of {} learned)", arm.label, arm.learned, arm.seeds);
    for (const auto& r : runs)
      if (r.arm == arm.label && learned_to_copy(r))
        for (const auto& [d, acc] : r.accuracy) s.at[double(d) / double(r.train_context)].push_back(acc);
    series.push_back(std::move(s));
  }
  return series;
}

std::string distance_label(double x) { return fmt::format("{:g}L", x); }

}  // namespace

std::string format_passkey_learned_markdown(const PasskeyLearned& result, const std::vector<PasskeyRun>& runs) {
  std::string out = fmt::format(
      "Learned to copy: exact match ≥ {:g} at the shortest distance scored (d = L/2). Share of seeds with its 95% "
      "Clopper–Pearson interval:\n\n| arm | seeds | learned | share [95%] |\n|---|---|---|---|\n",
      kLearnedAccuracy);
  for (const auto& a : result.arms)
    out += fmt::format("| {} | {} | {} | {:.2f} [{:.2f}, {:.2f}] |\n", a.label, a.seeds, a.learned,
                       double(a.learned) / double(a.seeds), a.share_ci.lo, a.share_ci.hi);
  int resolved = 0;
  for (const auto& p : result.pairs) resolved += p.resolved;
  out += fmt::format("\nFisher's exact test (two-sided) on each pair's learned / not learned, Holm over the {} pair{} "
                     "at a family-wise {:g}%: {} resolved.\n\n| pair | learned | p | Holm threshold | resolved |\n"
                     "|---|---|---|---|---|\n",
                     result.pairs.size(), result.pairs.size() == 1 ? "" : "s", 100 * result.alpha, resolved);
  for (const auto& p : result.pairs) {
    const auto& a = result.arms[p.a];
    const auto& b = result.arms[p.b];
    out += fmt::format("| {} vs {} | {}/{} vs {}/{} | {:.3g} | {:.3g} | {} |\n", a.label, b.label, a.learned, a.seeds,
                       b.learned, b.seeds, p.p, p.threshold, p.resolved ? "yes" : "no");
  }
  const auto series = learned_series(result, runs);
  if (series.empty()) return out + "\nNo seed learned: no retrieval to show against the distance.\n";
  std::set<double> xs;
  for (const auto& s : series)
    for (const auto& [x, v] : s.at) xs.insert(x);
  out += "\nExact match against the distance d, over the seeds that learned only (mean over them; number of "
         "seeds):\n\n| arm |";
  for (const double x : xs) out += fmt::format(" {} |", distance_label(x));
  out += "\n|---|";
  for (size_t i = 0; i < xs.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& s : series) {
    out += fmt::format("| {} |", s.title);
    for (const double x : xs) {
      const auto it = s.at.find(x);
      if (it == s.at.end()) {
        out += " – |";
        continue;
      }
      double m = 0;
      for (const double v : it->second) m += v / double(it->second.size());
      out += fmt::format(" {:.4f} ({}) |", m, it->second.size());
    }
    out += "\n";
  }
  return out;
}

void passkey_learned_figures(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w) {
  const auto passkey = passkey_runs(set, runs);
  if (passkey.empty()) return;
  const auto result = passkey_learned(passkey);
  Csv arms;
  arms.text_header = {"arm"};
  arms.header = {"seeds", "learned", "share", "share_lo95", "share_hi95"};
  for (const auto& a : result.arms) {
    arms.text_rows.push_back({a.label});
    arms.rows.push_back({double(a.seeds), double(a.learned), double(a.learned) / double(a.seeds), a.share_ci.lo,
                         a.share_ci.hi});
  }
  Csv pairs;
  pairs.text_header = {"a", "b"};
  pairs.header = {"learned_a", "seeds_a", "learned_b", "seeds_b", "fisher_p", "holm_threshold", "resolved"};
  for (const auto& p : result.pairs) {
    const auto& a = result.arms[p.a];
    const auto& b = result.arms[p.b];
    pairs.text_rows.push_back({a.label, b.label});
    pairs.rows.push_back({double(a.learned), double(a.seeds), double(b.learned), double(b.seeds), p.p, p.threshold,
                          p.resolved ? 1.0 : 0.0});
  }
  Csv per_run;
  per_run.text_header = {"arm"};
  per_run.header = {"seed", "distance", "accuracy", "learned"};
  for (const auto& r : passkey) {
    per_run.text_rows.push_back({r.arm});
    per_run.rows.push_back({double(r.seed), double(r.accuracy.begin()->first), r.accuracy.begin()->second,
                            learned_to_copy(r) ? 1.0 : 0.0});
  }
  const std::vector<std::pair<std::string, Csv>> tables = {
      {"passkey_learned.csv", arms}, {"passkey_learned_pairs.csv", pairs}, {"passkey_learned_runs.csv", per_run}};
  auto series = learned_series(result, passkey);
  for (auto& s : series) {  // the colours of passkey_vs_distance (run_figures.cpp's colour key)
    const std::string label = s.title.substr(0, s.title.find(" ("));
    s.color = w.palette.group_color(label.find('=') == std::string::npos ? "method=" + label : label);
  }
  if (series.empty()) {  // the tables without a figure
    FigureFiles f;
    f.name = "passkey_learned";
    for (const auto& [file, csv] : tables) {
      const std::string path = (fs::path(w.dir) / file).string();
      write_csv(path, csv);
      f.csv.push_back(path);
    }
    f.render.notice = "no seed learned to copy: tables only";
    w.out.figures.push_back(std::move(f));
  } else {
    double lo = series.front().at.begin()->first, hi = series.front().at.rbegin()->first;
    for (const auto& s : series) lo = std::min(lo, s.at.begin()->first), hi = std::max(hi, s.at.rbegin()->first);
    auto csvs = tables;
    csvs.insert(csvs.begin(), {"passkey_learned_vs_distance.csv", series_csv("distance_over_L", series)});
    w.figure("passkey_learned_vs_distance", csvs,
             axes(fmt::format("passkey exact match over the seeds that learned to copy\n{}", seeds_note(series)),
                  "distance d / L (training context)", "exact match (fraction of examples)", true) +
                 fmt::format("set xrange [{}:{}]\nset yrange [-0.05:1.05]\n", lo / 1.5, hi * 1.5) + "plot " +
                 series_clauses("passkey_learned_vs_distance.csv", series,
                                max_samples(series) > 1 ? "yerrorlines" : "linespoints"));
  }
  w.out.tables.push_back(format_passkey_learned_markdown(result, passkey));
}

}  // namespace analysis
