#include "analysis/export/export_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "analysis/export/csv_field.h"
#include "common/errors.h"
#include "common/mean_se.h"
#include "results/attention_group.h"
#include "sweeps/sweep_file.h"

namespace analysis {

using harness::InputError;

namespace {

const char* kMetricForms =
    "loss, attention/<statistic>[@t or @txD] (validation), analysis/<statistic>[@t or @txD] "
    "(harness analyse); statistics: entropy, recent_mass, band_mass, band_entropy, range_mass, "
    "range_entropy, and for analysis/ also loss, loss_se, score_mean, score_std, score_skewness, "
    "score_excess_kurtosis; needle/<accuracy|city_accuracy|number_accuracy> (task: needle), "
    "needle/<accuracy|mean_log_prob> (needle.kind: passkey; columns are distances)";

const results::DatasetGroup* group_of(const results::RunRecord& r, const MetricSpec& m, int64_t T) {
  if (m.source == "needle") {
    const auto it = r.needle.find(T);
    return it == r.needle.end() ? nullptr : &it->second;
  }
  if (m.source == "analysis") {
    const auto it = r.analysis.find(T);
    return it == r.analysis.end() ? nullptr : &it->second;
  }
  const auto it = r.eval.find(T);
  return it == r.eval.end() || it->second.attention.empty() ? nullptr : &it->second.attention;
}

// The index along the last axis that @t / @txΔ selects, or −1 when absent.
int64_t selected_index(const results::DatasetGroup& g, const MetricSpec& m) {
  const bool band = m.name.rfind("band_", 0) == 0;
  if (!g.integers.count(band ? "band_edges" : "range_start")) return -1;
  if (band) {
    const auto& edges = g.integers.at("band_edges");
    for (size_t b = 0; b + 1 < edges.size(); ++b)
      if (edges[b] == m.at) return int64_t(b);
    return -1;
  }
  const auto& start = g.integers.at("range_start");
  const auto& ratio = g.integers.at("range_ratio");
  for (size_t r = 0; r < start.size(); ++r)
    if (start[r] == m.at && ratio[r] == m.ratio) return int64_t(r);
  return -1;
}

bool per_distance(const std::string& name) {
  return name.rfind("band_", 0) == 0 || name.rfind("range_", 0) == 0;
}

}  // namespace

MetricSpec parse_metric(const std::string& text) {
  static const std::regex form(R"(^(loss)$|^(attention|analysis|needle)/([a-z_]+)(@([0-9]+)(x([0-9]+))?)?$)");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw InputError(fmt::format("--metric: '{}' is not a metric; expected {}", text, kMetricForms));
  MetricSpec spec;
  spec.text = text;
  if (m[1].matched) {
    spec.source = "eval";
    spec.name = "loss";
    return spec;
  }
  spec.source = m[2].str() == "attention" ? "eval" : m[2].str();
  spec.name = m[3].str();
  if (spec.source == "needle") {
    static const std::set<std::string> needle_names = {"accuracy", "city_accuracy", "number_accuracy",
                                                          "mean_log_prob"};
    if (!needle_names.count(spec.name) || m[4].matched)
      throw InputError(fmt::format("--metric: unknown needle statistic in '{}'; expected {}", text,
                                   kMetricForms));
    return spec;
  }
  const auto attention_statistic = [](const std::string& name) {
    for (const auto s : results::kAttentionStatistics)
      if (name == results::statistic_name(s)) return true;
    return false;
  };
  static const std::set<std::string> analysis_only = {"loss", "loss_se", "score_mean", "score_std", "score_skewness",
                                                      "score_excess_kurtosis"};
  if (!attention_statistic(spec.name) && !(spec.source == "analysis" && analysis_only.count(spec.name)))
    throw InputError(fmt::format("--metric: unknown statistic '{}' in '{}'; expected {}", spec.name,
                                 text, kMetricForms));
  if (m[4].matched) spec.at = std::stoll(m[5].str());
  if (m[6].matched) spec.ratio = std::stoll(m[7].str());
  const bool band = spec.name.rfind("band_", 0) == 0, range = spec.name.rfind("range_", 0) == 0;
  if (band && (spec.at < 0 || spec.ratio >= 0))
    throw InputError(fmt::format("--metric: {} is per distance band: write {}@<t> for the band that "
                                 "starts at distance t, e.g. {}@10 (bands start at 0, 1, 10, 100, ...)",
                                 spec.name, text.substr(0, text.find('@')), text.substr(0, text.find('@'))));
  if (range && (spec.at < 1 || spec.ratio < 2))
    throw InputError(fmt::format("--metric: {} is per range [t, tD): write {}@<t>x<D>, e.g. {}@10x2",
                                 spec.name, text.substr(0, text.find('@')), text.substr(0, text.find('@'))));
  if (!band && !range && spec.at >= 0)
    throw InputError(fmt::format("--metric: {} takes no @ selection", spec.name));
  return spec;
}

std::vector<int64_t> metric_contexts(const results::RunRecord& r, const MetricSpec& m) {
  std::vector<int64_t> out;
  if (m.source == "needle") {
    for (const auto& [T, g] : r.needle) out.push_back(T);
  } else if (m.source == "analysis") {
    for (const auto& [T, g] : r.analysis) out.push_back(T);
  } else {
    for (const auto& [T, rows] : r.eval)
      if (m.name == "loss" ? !rows.loss.empty() : !rows.attention.empty()) out.push_back(T);
  }
  return out;
}

std::optional<double> metric_value(const results::RunRecord& r, const MetricSpec& m, int64_t T) {
  if (m.source == "eval" && m.name == "loss") {
    const auto it = r.eval.find(T);
    if (it == r.eval.end() || it->second.loss.empty()) return std::nullopt;
    return it->second.loss.back();
  }
  const results::DatasetGroup* g = group_of(r, m, T);
  if (!g) return std::nullopt;
  const auto a = g->arrays.find(m.name);
  if (a == g->arrays.end() || a->second.values.empty()) return std::nullopt;
  const results::Array& array = a->second;
  // Validation arrays lead with the evaluation: take the last.
  size_t begin = 0, count = array.values.size();
  if (m.source == "eval") {
    count = array.row_size();
    begin = (array.rows() - 1) * count;
  }
  int64_t pick = -1;
  size_t inner = 1;
  if (per_distance(m.name)) {
    pick = selected_index(*g, m);
    if (pick < 0) return std::nullopt;
    inner = size_t(array.shape.back());
  }
  double sum = 0;
  size_t n = 0;
  for (size_t i = begin; i < begin + count; ++i) {
    if (pick >= 0 && int64_t((i - begin) % inner) != pick) continue;
    if (std::isnan(array.values[i])) continue;
    sum += array.values[i];
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / double(n);
}

std::optional<double> metric_window_se(const results::RunRecord& r, const MetricSpec& m, int64_t T) {
  if (m.name != "loss" || (m.source != "eval" && m.source != "analysis")) return std::nullopt;
  if (m.source == "eval") {
    const auto it = r.eval.find(T);
    if (it == r.eval.end() || it->second.loss_se.empty() || std::isnan(it->second.loss_se.back()))
      return std::nullopt;
    return it->second.loss_se.back();
  }
  const auto it = r.analysis.find(T);
  if (it == r.analysis.end()) return std::nullopt;
  const auto a = it->second.arrays.find("loss_se");
  if (a == it->second.arrays.end() || a->second.values.empty() || std::isnan(a->second.values[0]))
    return std::nullopt;
  return a->second.values[0];
}

WindowLosses metric_window_losses(const results::RunRecord& r, const MetricSpec& m, int64_t T) {
  if (m.name != "loss") return {};
  if (m.source == "eval") {
    const auto it = r.eval.find(T);
    if (it == r.eval.end()) return {};
    return {it->second.window_loss, it->second.window_fingerprint};
  }
  if (m.source != "analysis") return {};
  const auto it = r.analysis.find(T);
  if (it == r.analysis.end()) return {};
  const auto a = it->second.arrays.find("window_loss");
  const auto f = it->second.attributes.find("window_fingerprint");
  if (a == it->second.arrays.end() || f == it->second.attributes.end()) return {};
  return {a->second.values, results::attribute_text(f->second)};
}

namespace {

// The keys along rows and columns: given, or every varying key but the seed along rows; each
// must vary in the set, and every varying key but the seed must be placed.
std::pair<std::vector<std::string>, std::vector<std::string>> table_axes(const RunSet& set,
                                                                         const TableOptions& o) {
  const auto is_key = [&](const std::string& k) {
    return k == "context" || std::find(set.keys.begin(), set.keys.end(), k) != set.keys.end();
  };
  std::vector<std::string> cols = o.cols.empty() ? std::vector<std::string>{"context"} : o.cols;
  std::vector<std::string> rows = o.rows;
  if (rows.empty())
    for (const auto& k : set.keys)
      if (k != "train.seed" && std::find(cols.begin(), cols.end(), k) == cols.end()) rows.push_back(k);
  for (const auto& [flag, keys] : {std::pair{"--rows", &rows}, std::pair{"--cols", &cols}})
    for (const auto& k : *keys)
      if (!is_key(k))
        throw InputError(fmt::format("{}: '{}' does not vary in {}; choose among: context{}{}", flag, k,
                                     set.name, set.keys.empty() ? "" : ", ", fmt::join(set.keys, ", ")));
  for (const auto& k : set.keys)
    if (k != "train.seed" && std::find(rows.begin(), rows.end(), k) == rows.end() &&
        std::find(cols.begin(), cols.end(), k) == cols.end())
      throw InputError(fmt::format("'{}' varies between the runs: add it to --rows or --cols (only "
                                   "train.seed is averaged)", k));
  return {rows, cols};
}

// One sample per (done run, context): its labels along rows and columns.
struct Sample {
  std::vector<std::string> row, col;
  double value;
  double window_se;  // NaN when unknown
  WindowLosses windows;  // empty when unknown
};

// The samples of the done runs; the others are listed in t.missing. Returns the training
// context the done runs share (0 when they differ).
int64_t collect_samples(const RunSet& set, const MetricSpec& metric, Table& t,
                        std::vector<Sample>& samples) {
  int64_t common_L = -1;
  for (const auto& run : set.runs) {
    if (run.state != "done" || !run.record) {
      std::vector<std::string> where;
      for (const auto& k : set.keys) where.push_back(k + "=" + run.values.at(k));
      t.missing.push_back(fmt::format("{} ({}{}{})", run.id, run.state, where.empty() ? "" : ": ",
                                      fmt::join(where, " ")));
      continue;
    }
    common_L = common_L < 0 || common_L == run.train_context ? run.train_context : 0;
    for (const int64_t T : metric_contexts(*run.record, metric)) {
      const auto v = metric_value(*run.record, metric, T);
      if (!v) continue;
      const auto label = [&](const std::vector<std::string>& keys) {
        std::vector<std::string> out;
        for (const auto& k : keys) out.push_back(k == "context" ? std::to_string(T) : run.values.at(k));
        return out;
      };
      samples.push_back({label(t.row_keys), label(t.col_keys), *v,
                         metric_window_se(*run.record, metric, T).value_or(std::nan("")),
                         metric_window_losses(*run.record, metric, T)});
    }
  }
  return std::max<int64_t>(common_L, 0);
}

// Labels along one axis in first-seen order; contexts ascending.
std::vector<std::vector<std::string>> ordered_labels(const std::vector<Sample>& samples, bool is_row,
                                                     const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> out;
  for (const auto& s : samples) {
    const auto& l = is_row ? s.row : s.col;
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  }
  const auto context_at = std::find(keys.begin(), keys.end(), "context");
  if (context_at != keys.end()) {
    const size_t c = size_t(context_at - keys.begin());
    std::stable_sort(out.begin(), out.end(), [c](const auto& a, const auto& b) {
      return std::stoll(a[c]) < std::stoll(b[c]);
    });
  }
  return out;
}

// A column's header: its values, contexts with their multiple of a shared L ("256 (4L)").
std::string column_name(const std::vector<std::string>& col, const std::vector<std::string>& keys,
                        int64_t common_L) {
  std::vector<std::string> parts;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (keys[k] != "context") {
      parts.push_back(keys.size() == 1 ? col[k] : keys[k] + "=" + col[k]);
      continue;
    }
    const int64_t T = std::stoll(col[k]);
    parts.push_back(common_L > 0 && T % common_L == 0 ? fmt::format("{} ({}L)", T, T / common_L)
                                                     : std::to_string(T));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

bool metric_window_se_known(const MetricSpec& m) {
  return m.name == "loss" && (m.source == "eval" || m.source == "analysis");
}

// Mean and standard error over the samples of a cell (its seeds).
std::optional<Cell> cell_of(const std::vector<Sample>& samples, const std::vector<std::string>& row,
                            const std::vector<std::string>& col) {
  std::vector<double> v, window_se;
  const WindowLosses* windows = nullptr;
  for (const auto& s : samples)
    if (s.row == row && s.col == col) {
      v.push_back(s.value);
      window_se.push_back(s.window_se);  // NaN when any run lacks it: the mean is then unknown
      windows = &s.windows;
    }
  if (v.empty()) return std::nullopt;
  const auto m = harness::mean_se(v);
  Cell cell;
  cell.n = int(m.n);
  cell.mean = m.mean;
  cell.se = m.se;
  cell.window_se = harness::mean_se(window_se).mean;
  if (v.size() == 1) cell.windows = *windows;
  return cell;
}

// Nothing to print: an empty table with exit 0 would read as a result, so say why.
[[noreturn]] void refuse_empty(const RunSet& set, const MetricSpec& metric, const Table& t) {
  std::vector<std::string> why;
  if (!t.missing.empty())
    why.push_back(fmt::format("{} run{} not done: {}", t.missing.size(), t.missing.size() == 1 ? "" : "s",
                              fmt::join(t.missing, "; ")));
  if (t.missing.size() < set.runs.size()) why.push_back(fmt::format("the done runs hold no {}", metric.text));
  if (set.runs.empty()) why.push_back("no readable run");
  throw InputError(fmt::format("{}: no finished run matches ({})", set.name, fmt::join(why, "; ")));
}

// Best per column. Every row that reaches the best value is marked (ties), none when all rows
// do: a column of zero accuracies has no best.
void mark_best(Table& t, const MetricSpec& metric, std::string best) {
  // No attention statistic is better low or high; retrieval is better high.
  if (best.empty()) best = metric.name == "loss" ? "min" : metric.source == "needle" ? "max" : "none";
  if (best != "min" && best != "max" && best != "none")
    throw InputError(fmt::format("--best: expected min, max or none, got '{}'", best));
  t.best.assign(t.rows.size(), std::vector<bool>(t.cols.size(), false));
  if (best == "none") return;
  for (size_t c = 0; c < t.cols.size(); ++c) {
    std::optional<double> top;
    size_t filled = 0, at_top = 0;
    for (size_t r = 0; r < t.rows.size(); ++r)
      if (t.cells[r][c]) {
        const double x = t.cells[r][c]->mean;
        ++filled;
        if (!top || (best == "min" ? x < *top : x > *top)) top = x;
      }
    for (size_t r = 0; r < t.rows.size(); ++r) at_top += t.cells[r][c] && t.cells[r][c]->mean == *top;
    if (filled > 1 && at_top == filled) continue;
    for (size_t r = 0; r < t.rows.size(); ++r) t.best[r][c] = t.cells[r][c] && t.cells[r][c]->mean == *top;
  }
}

}  // namespace

Table build_table(const RunSet& set, const TableOptions& o) {
  const MetricSpec metric = parse_metric(o.metric);
  Table t;
  std::tie(t.row_keys, t.col_keys) = table_axes(set, o);
  t.warnings = set.warnings;
  t.title = fmt::format("{}: {}", set.name, metric.text);
  t.window_se = o.window_se;
  if (o.window_se && !metric_window_se_known(metric))
    throw InputError(fmt::format("--window-se: only a loss has a standard error over validation windows "
                                 "(loss, analysis/loss), not {}", metric.text));
  std::vector<Sample> samples;
  const int64_t common_L = collect_samples(set, metric, t, samples);
  t.rows = ordered_labels(samples, true, t.row_keys);
  t.cols = ordered_labels(samples, false, t.col_keys);
  if (t.rows.empty()) refuse_empty(set, metric, t);
  for (const auto& col : t.cols) t.col_names.push_back(column_name(col, t.col_keys, common_L));
  t.cells.assign(t.rows.size(), std::vector<std::optional<Cell>>(t.cols.size()));
  for (size_t r = 0; r < t.rows.size(); ++r)
    for (size_t c = 0; c < t.cols.size(); ++c) t.cells[r][c] = cell_of(samples, t.rows[r], t.cols[c]);
  mark_best(t, metric, o.best);
  return t;
}

namespace {

std::string tex_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '_' || ch == '&' || ch == '%' || ch == '#' || ch == '$') out += '\\';
    out += ch;
  }
  return out;
}

bool any_best(const Table& t) {
  for (const auto& row : t.best)
    for (const bool b : row)
      if (b) return true;
  return false;
}

std::string footer(const Table& t, const std::string& prefix) {
  std::string out;
  if (!t.missing.empty()) {
    out += fmt::format("{}missing: {} run{} not done\n", prefix, t.missing.size(), t.missing.size() == 1 ? "" : "s");
    for (const auto& m : t.missing) out += fmt::format("{}  {}\n", prefix, m);
  }
  for (const auto& w : t.warnings) out += fmt::format("{}warning: {}\n", prefix, w);
  return out;
}

}  // namespace

std::string cell_text(const std::optional<Cell>& cell, const char* pm, bool window_se) {
  if (!cell) return "–";
  std::string text = cell->n < 2 ? fmt::format("{:.4f} (1", cell->mean)
                                 : fmt::format("{:.4f} {} {:.4f} ({}", cell->mean, pm, cell->se, cell->n);
  if (window_se)
    text += std::isnan(cell->window_se) ? "; windows ?" : fmt::format("; windows {} {:.4f}", pm, cell->window_se);
  return text + ")";
}

std::string format_table(const Table& t, const std::string& format) {
  std::string out;
  if (format == "md") {
    std::vector<std::string> head = t.row_keys;
    head.insert(head.end(), t.col_names.begin(), t.col_names.end());
    std::string rule;
    for (size_t i = 0; i < head.size(); ++i) rule += " --- |";
    out += fmt::format("| {} |\n|{}\n", fmt::join(head, " | "), rule);
    for (size_t r = 0; r < t.rows.size(); ++r) {
      std::vector<std::string> fields = t.rows[r];
      for (size_t c = 0; c < t.cols.size(); ++c) {
        const std::string text = cell_text(t.cells[r][c], "±", t.window_se);
        fields.push_back(t.best[r][c] ? "**" + text + "**" : text);
      }
      out += fmt::format("| {} |\n", fmt::join(fields, " | "));
    }
    out += fmt::format("\nmean ± standard error over seeds (number of seeds{}){}. {}\n",
                       t.window_se ? "; windows ±: the standard error over validation windows, mean over the seeds" : "",
                       any_best(t) ? "; ** best per column" : "", t.title);
    return out + footer(t, "");
  }
  if (format == "csv") {
    std::vector<std::string> head;
    for (const auto& k : t.row_keys) head.push_back(csv_field(k));
    for (const auto& c : t.col_names)
      for (const char* part : {" mean", " se", " n", " window_se"})
        if (t.window_se || std::string(part) != " window_se") head.push_back(csv_field(c + part));
    out += fmt::format("{}\n", fmt::join(head, ","));
    for (size_t r = 0; r < t.rows.size(); ++r) {
      std::vector<std::string> fields;
      // "–" (a key the run does not read) is a display mark: CSV leaves the field empty.
      for (const auto& v : t.rows[r]) fields.push_back(v == harness::sweeps::kNotRead ? "" : csv_field(v));
      for (size_t c = 0; c < t.cols.size(); ++c) {
        const auto& cell = t.cells[r][c];
        fields.push_back(cell ? fmt::format("{:.9g}", cell->mean) : "");
        fields.push_back(cell && cell->n > 1 ? fmt::format("{:.9g}", cell->se) : "");
        fields.push_back(cell ? std::to_string(cell->n) : "0");
        if (t.window_se)
          fields.push_back(cell && !std::isnan(cell->window_se) ? fmt::format("{:.9g}", cell->window_se) : "");
      }
      out += fmt::format("{}\n", fmt::join(fields, ","));
    }
    return out;
  }
  if (format == "tex") {
    const size_t nk = t.row_keys.size(), nc = t.col_names.size();
    out += fmt::format("% {}: mean $\\pm$ standard error over seeds (seeds){}\n", tex_escape(t.title),
                       any_best(t) ? "; bold: best per column" : "");
    out += fmt::format("\\begin{{tabular}}{{{}|{}}}\n\\hline\n", std::string(nk, 'l'), std::string(nc, 'c'));
    std::vector<std::string> head;
    for (const auto& k : t.row_keys) head.push_back(tex_escape(k));
    for (const auto& c : t.col_names) head.push_back(tex_escape(c));
    out += fmt::format("{} \\\\\n\\hline\n", fmt::join(head, " & "));
    for (size_t r = 0; r < t.rows.size(); ++r) {
      std::vector<std::string> fields;
      for (const auto& v : t.rows[r]) fields.push_back(tex_escape(v == "–" ? "--" : v));
      for (size_t c = 0; c < t.cols.size(); ++c) {
        const auto& cell = t.cells[r][c];
        std::string text = !cell ? "--" : cell_text(cell, "$\\pm$", t.window_se);
        fields.push_back(t.best[r][c] ? "\\textbf{" + text + "}" : text);
      }
      out += fmt::format("{} \\\\\n", fmt::join(fields, " & "));
    }
    out += "\\hline\n\\end{tabular}\n";
    return out + footer(t, "% ");
  }
  throw InputError(fmt::format("--format: expected md, csv or tex, got '{}'", format));
}

}  // namespace analysis
