#include "analysis/pairwise_gaps.h"

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>

#include "analysis/export/csv_field.h"

namespace analysis {

std::vector<bool> holm_rejections(const std::vector<double>& p, double alpha) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return p[i] < p[j]; });
  std::vector<bool> rejected(p.size(), false);
  const size_t m = p.size();
  for (size_t k = 0; k < m; ++k) {  // the k-th smallest against α / (m − k); stop at the first kept
    if (!(p[order[k]] <= alpha / double(m - k))) break;
    rejected[order[k]] = true;
  }
  return rejected;
}

namespace {

// The p-value each of `p` had to reach at its rank: α / (m − rank) for Holm, α / m for Bonferroni.
std::vector<double> thresholds(const std::vector<double>& p, double alpha, bool holm) {
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return p[i] < p[j]; });
  std::vector<double> out(p.size());
  for (size_t k = 0; k < p.size(); ++k) out[order[k]] = alpha / double(holm ? p.size() - k : p.size());
  return out;
}

std::string plural(size_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace

PairTable pairwise_gaps(const ArmGrid& grid, double level) {
  if (!(level > 0 && level < 1)) throw std::invalid_argument(fmt::format("level must be in (0, 1), got {}", level));
  PairTable t;
  t.context = grid.context;
  t.level = level;
  t.documents = int(std::set<int64_t>(grid.document.begin(), grid.document.end()).size());
  t.documents_known = grid.documents_known;
  std::vector<size_t> order(grid.arms.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t i, size_t j) { return grid.arms[i].mean() < grid.arms[j].mean(); });
  for (const size_t i : order) {
    t.arms.push_back(grid.arms[i].label);
    t.means.push_back(grid.arms[i].mean());
    t.seeds.push_back(int(grid.arms[i].runs.size()));
  }
  std::vector<double> p;
  std::vector<size_t> estimable;
  for (size_t a = 0; a < order.size(); ++a) {
    for (size_t b = a + 1; b < order.size(); ++b) {
      PairResult r;
      r.a = a;
      r.b = b;
      const auto [ra, rb] = common_seeds(grid.arms[order[a]], grid.arms[order[b]]);
      r.common_seeds = int(ra.size());
      if (ra.size() >= 2) {
        r.gap = seed_paired_gap(ra, rb, grid.document, level);
        r.estimable = std::isfinite(r.gap.se) && r.gap.se > 0;
      }
      if (r.estimable) {
        const boost::math::students_t_distribution<double> t_dist(r.gap.df);
        r.p = 2 * boost::math::cdf(boost::math::complement(t_dist, std::fabs(r.gap.gap) / r.gap.se));
        p.push_back(r.p);
        estimable.push_back(t.pairs.size());
      }
      t.pairs.push_back(r);
    }
  }
  const auto rejected = holm_rejections(p, 1 - level);
  const auto threshold = thresholds(p, 1 - level, true);
  for (auto& r : t.pairs) r.threshold = std::numeric_limits<double>::quiet_NaN();
  for (size_t k = 0; k < estimable.size(); ++k) {
    t.pairs[estimable[k]].resolved = rejected[k];
    t.pairs[estimable[k]].threshold = threshold[k];
  }
  t.family = "Holm's procedure over the " + plural(p.size(), "pair");
  t.family_alpha = 1 - level;
  return t;
}

void apply_planned_family(std::vector<PairTable>& tables, const std::string& correction, double alpha) {
  if (correction != "bonferroni" && correction != "holm")
    throw std::invalid_argument(fmt::format("correction must be bonferroni or holm, got '{}'", correction));
  if (!(alpha > 0 && alpha < 1)) throw std::invalid_argument(fmt::format("alpha must be in (0, 1), got {}", alpha));
  std::vector<PairResult*> tested;
  std::vector<double> p;
  for (auto& t : tables)
    for (auto& r : t.pairs) {
      r.resolved = false;
      r.threshold = std::numeric_limits<double>::quiet_NaN();
      if (r.estimable) tested.push_back(&r), p.push_back(r.p);
    }
  const bool holm = correction == "holm";
  const auto threshold = thresholds(p, alpha, holm);
  const auto rejected = holm ? holm_rejections(p, alpha) : std::vector<bool>{};
  for (size_t k = 0; k < tested.size(); ++k) {
    tested[k]->threshold = threshold[k];
    tested[k]->resolved = holm ? bool(rejected[k]) : p[k] <= threshold[k];
  }
  for (auto& t : tables) {
    t.family = fmt::format("the planned comparison's {} over its {} (every pair at every context)",
                           holm ? "Holm procedure" : "Bonferroni correction", plural(p.size(), "test"));
    t.family_alpha = alpha;
  }
}

namespace {

std::string context_label(int64_t T, int64_t L) {
  return L > 0 && T % L == 0 ? fmt::format("{} ({}L)", T, T / L) : fmt::format("{}", T);
}

std::string markdown_matrix(const PairTable& t) {
  const size_t n = t.arms.size();
  std::vector<std::vector<std::string>> cell(n, std::vector<std::string>(n, ""));
  for (const auto& r : t.pairs) {
    const std::string gap = r.estimable ? fmt::format("{:+.4f}", r.gap.gap) : "–";
    cell[r.a][r.b] = r.resolved || !r.estimable ? gap : "(" + gap + ")";
  }
  std::string out = "| row − column | ";
  for (size_t j = 1; j < n; ++j) out += t.arms[j] + " | ";
  out += "\n|---|";
  for (size_t j = 1; j < n; ++j) out += "---|";
  out += "\n";
  for (size_t i = 0; i + 1 < n; ++i) {
    out += fmt::format("| {} ({:.4f}, {}) | ", t.arms[i], t.means[i], t.seeds[i]);
    for (size_t j = 1; j < n; ++j) out += (j > i ? cell[i][j] : "") + " | ";
    out += "\n";
  }
  return out;
}

}  // namespace

std::string format_pairs_markdown(const std::vector<PairTable>& tables, int64_t train_context) {
  std::string out;
  for (const auto& t : tables) {
    int resolved = 0;
    for (const auto& r : t.pairs) resolved += r.resolved;
    out += fmt::format("### {}: {} of {} pairs resolved\n\n", context_label(t.context, train_context), resolved,
                       t.pairs.size());
    out += fmt::format("Row's mean loss − column's (nats/token), arms by mean loss (mean, seeds); a gap in "
                       "parentheses is not resolved: {}, family-wise error at most {:g}% (seed-paired, windows "
                       "clustered by {} documents).\n\n",
                       t.family, 100 * t.family_alpha, t.documents);
    if (!t.documents_known)
      out += "Note: the run files do not say which document each window is from (written before 2026-12-07): "
             "windows counted as independent, the intervals too narrow.\n\n";
    out += markdown_matrix(t) + "\n";
    std::vector<std::string> open;
    for (const auto& r : t.pairs) {
      if (r.resolved) continue;
      const std::string pair = fmt::format("{} − {}: ", t.arms[r.a], t.arms[r.b]);
      if (r.estimable)
        open.push_back(pair + fmt::format("{:+.4f} [{:+.4f}, {:+.4f}], p = {:.2g}", r.gap.gap, r.gap.lo, r.gap.hi, r.p));
      else if (r.common_seeds < 2)
        open.push_back(pair + fmt::format("{} seed{} in common, 2 needed", r.common_seeds, r.common_seeds == 1 ? "" : "s"));
      else
        open.push_back(pair + fmt::format("{:+.4f} in every seed and window alike: no spread to test", r.gap.gap));
    }
    out += open.empty() ? "Every pair is resolved.\n\n"
                        : fmt::format("Not resolved (each interval at {:g}%):\n\n- {}\n\n", 100 * t.level,
                                      fmt::join(open, "\n- "));
  }
  return out;
}

std::string format_pairs_csv(const std::vector<PairTable>& tables) {
  std::string out = "context,a,b,gap,se,df,lo,hi,p,resolved,seeds,threshold,family\n";
  for (const auto& t : tables)
    for (const auto& r : t.pairs)
      out += fmt::format("{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{:.6g},{}\n", t.context,
                         csv_field(t.arms[r.a]), csv_field(t.arms[r.b]), r.gap.gap, r.gap.se, r.gap.df, r.gap.lo,
                         r.gap.hi, r.p, r.resolved ? 1 : 0, r.gap.pairs, r.threshold,
                         csv_field(fmt::format("{} at {:g}", t.family, t.family_alpha)));
  return out;
}

}  // namespace analysis
