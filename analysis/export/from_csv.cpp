#include "analysis/export/from_csv.h"

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/errors.h"
#include "sweeps/sweep_file.h"

namespace analysis {

using harness::InputError;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

size_t arm_index(PairTable& t, const std::string& arm) {
  const auto it = std::find(t.arms.begin(), t.arms.end(), arm);
  if (it != t.arms.end()) return size_t(it - t.arms.begin());
  t.arms.push_back(arm);
  t.means.push_back(kNaN);  // an export pairs CSV does not hold the arms' means
  t.seeds.push_back(0);
  return t.arms.size() - 1;
}

// The level an interval [lo, hi] around gap with standard error se at df degrees of freedom was
// computed at: 1 − 2 · P(t_df > (hi − gap) / se).
double interval_level(const PairResult& r) {
  const boost::math::students_t_distribution<double> t(r.gap.df);
  return 1 - 2 * boost::math::cdf(boost::math::complement(t, (r.gap.hi - r.gap.gap) / r.gap.se));
}

std::string plural(size_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

// A CSV written before the family column: every context's verdicts were Holm's procedure over its
// testable pairs at 1 − level (export pairs' only procedure then). Decided again here, and the
// CSV's `resolved` column must say the same.
void holm_by_rule(const CsvFile& csv, PairTable& t, const std::vector<int>& lines, double level) {
  std::vector<double> p;
  std::vector<size_t> tested;
  for (size_t k = 0; k < t.pairs.size(); ++k)
    if (t.pairs[k].estimable) p.push_back(t.pairs[k].p), tested.push_back(k);
  const auto rejected = holm_rejections(p, 1 - level);
  for (size_t k = 0; k < tested.size(); ++k) {
    const auto& r = t.pairs[tested[k]];
    if (r.resolved != rejected[k])
      throw InputError(fmt::format(
          "{}:{}: column 'resolved': {} − {} is {} in the CSV, {} by Holm's procedure over the context's {} at {:g}",
          csv.path, lines[tested[k]], t.arms[r.a], t.arms[r.b], r.resolved ? "resolved" : "not resolved",
          rejected[k] ? "resolved" : "not resolved", plural(p.size(), "pair"), 1 - level));
  }
  t.family = "Holm's procedure over the " + plural(p.size(), "pair");
  t.family_alpha = 1 - level;
}

// The family column: "<family> at <alpha>", as format_pairs_csv writes it.
void family_from_column(const CsvFile& csv, PairTable& t, const std::string& text, int line) {
  const size_t at = text.rfind(" at ");
  char* end = nullptr;
  const double alpha = at == std::string::npos ? 0 : std::strtod(text.c_str() + at + 4, &end);
  if (at == std::string::npos || end != text.c_str() + text.size() || !(alpha > 0 && alpha < 1))
    throw InputError(fmt::format("{}:{}: column 'family': expected '<family> at <alpha>', got '{}'", csv.path, line, text));
  const std::string family = text.substr(0, at);
  if (!t.family.empty() && (t.family != family || t.family_alpha != alpha))
    throw InputError(fmt::format("{}:{}: column 'family': '{}' where the context's earlier pairs say '{} at {:g}'",
                                 csv.path, line, text, t.family, t.family_alpha));
  t.family = family;
  t.family_alpha = alpha;
}

std::string context_label(int64_t T, int64_t L) {
  return L > 0 && T % L == 0 ? fmt::format("{} ({}L)", T, T / L) : fmt::format("{}", T);
}

}  // namespace

PairsFromCsv read_pairs_csv(const CsvFile& csv) {
  const size_t c_context = csv.column("context"), c_a = csv.column("a"), c_b = csv.column("b"),
               c_gap = csv.column("gap"), c_se = csv.column("se"), c_df = csv.column("df"), c_lo = csv.column("lo"),
               c_hi = csv.column("hi"), c_p = csv.column("p"), c_resolved = csv.column("resolved"),
               c_seeds = csv.column("seeds");
  const bool has_family = csv.has("family"), has_threshold = csv.has("threshold");
  PairsFromCsv out;
  std::vector<std::vector<int>> lines;  // per table, each pair's line
  double level_se = 0;                  // the level is read from the pair with the widest se
  std::vector<std::pair<double, int>> levels;
  for (size_t row = 0; row < csv.rows.size(); ++row) {
    const double T = csv.number(row, c_context);
    if (!(T > 0 && T == std::floor(T)))
      throw InputError(fmt::format("{}:{}: column 'context': expected a positive whole number, got '{}'", csv.path,
                                   csv.lines[row], csv.rows[row][c_context]));
    auto it = std::find_if(out.tables.begin(), out.tables.end(), [&](const PairTable& t) { return t.context == T; });
    if (it == out.tables.end()) {
      out.tables.emplace_back();
      out.tables.back().context = int64_t(T);
      out.tables.back().documents_known = true;
      lines.emplace_back();
      it = out.tables.end() - 1;
    }
    PairTable& t = *it;
    PairResult r;
    r.a = arm_index(t, csv.rows[row][c_a]);
    r.b = arm_index(t, csv.rows[row][c_b]);
    r.gap.gap = csv.number(row, c_gap);
    r.gap.se = csv.number(row, c_se, true);
    r.gap.df = csv.number(row, c_df, true);
    r.gap.lo = csv.number(row, c_lo, true);
    r.gap.hi = csv.number(row, c_hi, true);
    r.p = csv.number(row, c_p, true);
    const double seeds = csv.number(row, c_seeds);
    if (!(seeds >= 0 && seeds == std::floor(seeds)))
      throw InputError(fmt::format("{}:{}: column 'seeds': expected a whole number, got '{}'", csv.path,
                                   csv.lines[row], csv.rows[row][c_seeds]));
    r.common_seeds = r.gap.pairs = int(seeds);
    r.estimable = seeds >= 2 && std::isfinite(r.gap.se) && r.gap.se > 0;
    const std::string& resolved = csv.rows[row][c_resolved];
    if (resolved != "0" && resolved != "1")
      throw InputError(fmt::format("{}:{}: column 'resolved': expected 0 or 1, got '{}'", csv.path, csv.lines[row], resolved));
    r.resolved = resolved == "1";
    if (r.resolved && !r.estimable)
      throw InputError(fmt::format("{}:{}: column 'resolved': a pair without a standard error cannot be resolved",
                                   csv.path, csv.lines[row]));
    r.threshold = has_threshold ? csv.number(row, csv.column("threshold"), true) : kNaN;
    if (has_threshold && r.resolved && !(r.p <= r.threshold * (1 + 1e-5)))
      throw InputError(fmt::format("{}:{}: column 'resolved': p = {} is above its threshold {}, yet resolved",
                                   csv.path, csv.lines[row], r.p, r.threshold));
    if (has_family) family_from_column(csv, t, csv.rows[row][csv.column("family")], csv.lines[row]);
    if (r.estimable) {
      levels.emplace_back(interval_level(r), csv.lines[row]);
      if (r.gap.se > level_se) level_se = r.gap.se, out.level = std::round(levels.back().first * 1000) / 1000;
    }
    t.pairs.push_back(r);
    lines[size_t(it - out.tables.begin())].push_back(csv.lines[row]);
  }
  for (const auto& [level, line] : levels)
    if (std::fabs(level - out.level) > 0.01)
      throw InputError(fmt::format("{}:{}: an interval at {:.3g}%, where the file's widest is at {:.3g}%: one "
                                   "file holds one level", csv.path, line, 100 * level, 100 * out.level));
  for (size_t k = 0; k < out.tables.size(); ++k) {
    out.tables[k].level = out.level;
    if (!has_family && out.level > 0) holm_by_rule(csv, out.tables[k], lines[k], out.level);
  }
  return out;
}

std::string format_pairs_page(const PairsFromCsv& pairs, int64_t train_context) {
  std::string out;
  for (const auto& t : pairs.tables) {
    const size_t n = t.arms.size();
    int resolved = 0;
    std::vector<std::vector<std::string>> cell(n, std::vector<std::string>(n));
    std::vector<std::string> open;
    for (const auto& r : t.pairs) {
      resolved += r.resolved;
      const std::string gap = r.estimable ? fmt::format("{:+.4f}", r.gap.gap) : "–";
      cell[r.a][r.b] = r.resolved || !r.estimable ? gap : "(" + gap + ")";
      if (r.resolved) continue;
      const std::string pair = fmt::format("{} − {}: ", t.arms[r.a], t.arms[r.b]);
      if (r.estimable)
        open.push_back(pair + fmt::format("{:+.4f} [{:+.4f}, {:+.4f}], p = {:.2g}", r.gap.gap, r.gap.lo, r.gap.hi, r.p));
      else if (r.common_seeds < 2)
        open.push_back(pair + fmt::format("{} in common, 2 needed", plural(size_t(r.common_seeds), "seed")));
      else
        open.push_back(pair + fmt::format("{:+.4f} in every seed and window alike: no spread to test", r.gap.gap));
    }
    out += fmt::format("### At {}: {} of {} resolved\n\n", context_label(t.context, train_context), resolved,
                       plural(t.pairs.size(), "pair"));
    out += fmt::format("Row's mean loss − column's (nats/token), arms ranked by mean loss; a gap in parentheses is not "
                       "resolved: {}, family-wise error at most {:g}% (seed-paired, windows clustered by document).\n\n",
                       t.family.empty() ? "no family recorded" : t.family, 100 * t.family_alpha);
    out += "| row − column | ";
    for (size_t j = 1; j < n; ++j) out += t.arms[j] + " | ";
    out += "\n|---|";
    for (size_t j = 1; j < n; ++j) out += "---|";
    out += "\n";
    for (size_t i = 0; i + 1 < n; ++i) {
      out += "| " + t.arms[i] + " | ";
      for (size_t j = 1; j < n; ++j) out += cell[i][j] + " | ";
      out += "\n";
    }
    out += open.empty() ? "\nEvery pair is resolved.\n\n"
                        : fmt::format("\nNot resolved (each interval at {:g}%):\n\n- {}\n\n", 100 * pairs.level,
                                      fmt::join(open, "\n- "));
  }
  return out;
}

Table read_table_csv(const CsvFile& csv, const std::string& best, const std::string& title) {
  if (best != "min" && best != "max" && best != "none")
    throw InputError(fmt::format("--best: expected min, max or none, got '{}'", best));
  const auto& h = csv.header;
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  size_t first = 0;
  while (first < h.size() && !ends_with(h[first], " mean")) ++first;
  if (first == h.size())
    throw InputError(fmt::format("{}: no '<column> mean' column: not an `export table --format csv`", csv.path));
  Table t;
  t.title = title;
  t.row_keys.assign(h.begin(), h.begin() + long(first));
  t.window_se = first + 3 < h.size() && ends_with(h[first + 3], " window_se");
  const size_t width = t.window_se ? 4 : 3;
  if ((h.size() - first) % width != 0)
    throw InputError(fmt::format("{}: {} columns after the row keys, not a multiple of {} (mean, se, n{})", csv.path,
                                 h.size() - first, width, t.window_se ? ", window_se" : ""));
  for (size_t c = first; c < h.size(); c += width) {
    const std::string name = h[c].substr(0, h[c].size() - 5);
    std::vector<std::string> parts = {" mean", " se", " n"};
    if (t.window_se) parts.push_back(" window_se");
    for (size_t k = 0; k < parts.size(); ++k)
      if (h[c + k] != name + parts[k])
        throw InputError(fmt::format("{}: column {} is '{}', expected '{}'", csv.path, c + k + 1, h[c + k], name + parts[k]));
    t.col_names.push_back(name);
    t.cols.push_back({name});
  }
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    std::vector<std::string> labels(csv.rows[r].begin(), csv.rows[r].begin() + long(first));
    for (auto& v : labels)
      if (v.empty()) v = harness::sweeps::kNotRead;
    t.rows.push_back(labels);
    std::vector<std::optional<Cell>> cells;
    for (size_t c = first; c < h.size(); c += width) {
      const double n = csv.number(r, c + 2);
      if (!(n >= 0 && n == std::floor(n)))
        throw InputError(fmt::format("{}:{}: column '{}': expected a whole number, got '{}'", csv.path, csv.lines[r],
                                     h[c + 2], csv.rows[r][c + 2]));
      if (n == 0) {
        cells.emplace_back();
        continue;
      }
      Cell cell;
      cell.mean = csv.number(r, c);
      cell.se = csv.number(r, c + 1, true);
      cell.n = int(n);
      cell.window_se = t.window_se ? csv.number(r, c + 3, true) : kNaN;
      cells.emplace_back(cell);
    }
    t.cells.push_back(cells);
  }
  // Best per column as export table marks it: every row at the best value, none when all are.
  t.best.assign(t.rows.size(), std::vector<bool>(t.cols.size(), false));
  for (size_t c = 0; c < t.cols.size() && best != "none"; ++c) {
    std::vector<double> means;
    for (size_t r = 0; r < t.rows.size(); ++r)
      if (t.cells[r][c]) means.push_back(t.cells[r][c]->mean);
    if (means.empty()) continue;
    const double top = best == "min" ? *std::min_element(means.begin(), means.end())
                                     : *std::max_element(means.begin(), means.end());
    if (means.size() > 1 && std::count(means.begin(), means.end(), top) == long(means.size())) continue;
    for (size_t r = 0; r < t.rows.size(); ++r) t.best[r][c] = t.cells[r][c] && t.cells[r][c]->mean == top;
  }
  return t;
}

std::string csv_as_markdown(const CsvFile& csv) {
  const auto row = [](const std::vector<std::string>& fields) {
    std::string out = "|";
    for (auto f : fields) {
      for (size_t i = f.find('|'); i != std::string::npos; i = f.find('|', i + 2)) f.replace(i, 1, "\\|");
      out += " " + f + " |";
    }
    return out + "\n";
  };
  std::string out = row(csv.header) + "|";
  for (size_t i = 0; i < csv.header.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& r : csv.rows) out += row(r);
  return out;
}

CurvesColumn parse_curves_column(const std::string& argument) {
  const size_t eq = argument.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == argument.size())
    throw InputError(fmt::format("--from-curves: expected LABEL=FILE[@X], got '{}'", argument));
  CurvesColumn c;
  c.label = argument.substr(0, eq);
  std::string file = argument.substr(eq + 1);
  const size_t at = file.rfind('@');
  if (at != std::string::npos) {
    const std::string x = file.substr(at + 1);
    char* end = nullptr;
    c.x = std::strtod(x.c_str(), &end);
    if (x.empty() || end != x.c_str() + x.size())
      throw InputError(fmt::format("--from-curves: '{}': expected a number after @, got '{}'", argument, x));
    c.last = false;
    file = file.substr(0, at);
  }
  c.csv = read_csv(file);
  return c;
}

std::string curves_table_markdown(const std::vector<CurvesColumn>& columns, const std::string& best) {
  if (best != "min" && best != "max" && best != "none")
    throw InputError(fmt::format("--best: expected min, max or none, got '{}'", best));
  std::vector<std::string> series;  // in the order the files first name them
  std::vector<std::map<std::string, std::pair<double, double>>> value(columns.size());
  std::vector<std::string> files;
  for (size_t k = 0; k < columns.size(); ++k) {
    const auto& csv = columns[k].csv;
    if (csv.rows.empty()) throw InputError(fmt::format("{}: no rows", csv.path));
    size_t row = csv.rows.size() - 1;
    if (!columns[k].last) {
      row = csv.rows.size();
      for (size_t r = 0; r < csv.rows.size(); ++r) {
        const double x = csv.number(r, 0);
        if (std::fabs(x - columns[k].x) <= 1e-9 * std::max(1.0, std::fabs(x))) row = r;
      }
      if (row == csv.rows.size())
        throw InputError(fmt::format("{}: no row with {} = {:g}", csv.path, csv.header[0], columns[k].x));
    }
    for (size_t c = 1; c < csv.header.size(); ++c) {
      const std::string& name = csv.header[c];
      if (name.size() > 3 && name.compare(name.size() - 3, 3, " se") == 0 && csv.has(name.substr(0, name.size() - 3)))
        continue;
      const size_t se = csv.column(name + " se");
      if (std::find(series.begin(), series.end(), name) == series.end()) series.push_back(name);
      const double mean = csv.number(row, c, true);
      if (!std::isnan(mean)) value[k][name] = {mean, csv.number(row, se, true)};
    }
    files.push_back(columns[k].last ? csv.path + " (last row)"
                                    : fmt::format("{} ({} = {:g})", csv.path, csv.header[0], columns[k].x));
  }
  std::vector<double> top(columns.size(), kNaN);
  for (size_t k = 0; k < columns.size() && best != "none"; ++k)
    for (const auto& [name, v] : value[k])
      if (std::isnan(top[k]) || (best == "min" ? v.first < top[k] : v.first > top[k])) top[k] = v.first;
  std::string out = "| series |";
  for (const auto& c : columns) out += " " + c.label + " |";
  out += "\n| --- |";
  for (size_t k = 0; k < columns.size(); ++k) out += " --- |";
  out += "\n";
  for (const auto& name : series) {
    out += "| " + name + " |";
    for (size_t k = 0; k < columns.size(); ++k) {
      const auto it = value[k].find(name);
      if (it == value[k].end()) {
        out += " – |";
        continue;
      }
      const auto [mean, se] = it->second;
      std::string text = std::isnan(se) ? fmt::format("{:.4f}", mean) : fmt::format("{:.4f} ± {:.4f}", mean, se);
      if (mean == top[k] && value[k].size() > 1) text = "**" + text + "**";
      out += " " + text + " |";
    }
    out += "\n";
  }
  return out + fmt::format("\nmean ± standard error, as the figure CSVs hold them{}: {}\n",
                           best == "none" ? "" : "; ** best per column", fmt::join(files, ", "));
}

}  // namespace analysis
