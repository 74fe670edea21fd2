#include "analysis/export/figure_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "common/mean_se.h"

namespace fs = std::filesystem;

namespace analysis {

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
                           const std::string& x, const std::function<bool(const Series&)>& keep) {
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
                 bool logx, bool logy) {
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

// Series by title, in first-seen order; a new one takes `color` and `variant`.
Series& series_for(std::vector<Series>& all, const std::string& title, const std::string& color,
                   size_t variant) {
  for (auto& s : all)
    if (s.title == title) return s;
  Series s;
  s.title = title;
  s.color = color;
  s.variant = variant;
  all.push_back(std::move(s));
  return all.back();
}

std::string group_attribute(const results::DatasetGroup& g, const std::string& name) {
  const auto it = g.attributes.find(name);
  return it == g.attributes.end() ? "" : results::attribute_text(it->second);
}

void Writer::figure(const std::string& name, const std::vector<std::pair<std::string, Csv>>& csvs,
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

}  // namespace analysis
