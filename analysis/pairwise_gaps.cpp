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

// Each run's mean loss over the windows: the per-seed values whose spread the pair reports.
std::vector<double> run_means(const std::vector<SeedWindows>& runs) {
  std::vector<double> out;
  for (const auto& r : runs) {
    double m = 0;
    for (const double x : r.loss) m += x / double(r.loss.size());
    out.push_back(m);
  }
  return out;
}

void fill_spread(PairResult& r, const std::vector<SeedWindows>& a, const std::vector<SeedWindows>& b) {
  const auto ma = run_means(a), mb = run_means(b);
  const int na = int(ma.size()), nb = int(mb.size());
  r.sd_a = stats::sample_sd(ma.data(), na);
  r.sd_b = stats::sample_sd(mb.data(), nb);
  r.sd_a_ci = stats::sd_interval(r.sd_a, na, kSpreadLevel);
  r.sd_b_ci = stats::sd_interval(r.sd_b, nb, kSpreadLevel);
  r.sd_ratio = r.sd_b > 0 ? r.sd_a / r.sd_b : std::numeric_limits<double>::quiet_NaN();
  r.sd_ratio_ci = stats::sd_ratio_interval(r.sd_a, na, r.sd_b, nb, kSpreadLevel);
}

}  // namespace

PairTable pairwise_gaps(const ArmGrid& grid, double level) {
  if (!(level > 0 && level < 1)) throw std::invalid_argument(fmt::format("level must be in (0, 1), got {}", level));
  PairTable t;
  t.context = grid.context;
  t.level = level;
  t.documents = int(std::set<int64_t>(grid.document.begin(), grid.document.end()).size());
  t.documents_known = grid.documents_known;
  for (size_t i = 0; i < grid.arms.size(); ++i) {
    const int64_t L = grid.arms[i].first ? grid.arms[i].first->train_context : 0;
    if (i == 0) t.train_context = L;
    else if (L != t.train_context) t.train_context = 0;
  }
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
      const double nan = std::numeric_limits<double>::quiet_NaN();
      r.sd_a = r.sd_b = r.sd_ratio = nan;
      r.sd_a_ci = r.sd_b_ci = r.sd_ratio_ci = {nan, nan};
      if (ra.size() >= 2) {
        fill_spread(r, ra, rb);
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

void apply_planned_family(std::vector<PairTable>& tables, const std::string& correction, double alpha,
                          const std::vector<int64_t>& multiples) {
  if (correction != "bonferroni" && correction != "holm")
    throw std::invalid_argument(fmt::format("correction must be bonferroni or holm, got '{}'", correction));
  if (!(alpha > 0 && alpha < 1)) throw std::invalid_argument(fmt::format("alpha must be in (0, 1), got {}", alpha));
  const auto in_family = [&](const PairTable& t) {
    if (multiples.empty()) return true;
    if (t.train_context <= 0 || t.context % t.train_context != 0) return false;
    return std::find(multiples.begin(), multiples.end(), t.context / t.train_context) != multiples.end();
  };
  std::vector<PairResult*> tested;
  std::vector<double> p;
  for (auto& t : tables)
    for (auto& r : t.pairs) {
      r.resolved = false;
      r.threshold = std::numeric_limits<double>::quiet_NaN();
      if (r.estimable && in_family(t)) tested.push_back(&r), p.push_back(r.p);
    }
  const bool holm = correction == "holm";
  const auto threshold = thresholds(p, alpha, holm);
  const auto rejected = holm ? holm_rejections(p, alpha) : std::vector<bool>{};
  for (size_t k = 0; k < tested.size(); ++k) {
    tested[k]->threshold = threshold[k];
    tested[k]->resolved = holm ? bool(rejected[k]) : p[k] <= threshold[k];
  }
  std::vector<std::string> at;
  for (const int64_t k : multiples) at.push_back(fmt::format("{}L", k));
  const std::string where = multiples.empty() ? "every pair at every context"
                                              : fmt::format("every pair at {}", fmt::join(at, ", "));
  for (auto& t : tables) {
    t.family = in_family(t) ? fmt::format("the planned comparison's {} over its {} ({})",
                                          holm ? "Holm procedure" : "Bonferroni correction",
                                          plural(p.size(), "test"), where)
                            : fmt::format("not tested: outside the planned comparison's contexts ({}), described "
                                          "only", fmt::join(at, ", "));
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

std::string interval_text(double x, const stats::Interval& ci) {
  if (!std::isfinite(x)) return "–";
  if (!std::isfinite(ci.lo)) return fmt::format("{:.4f}", x);
  return fmt::format("{:.4f} [{:.4f}, {:.4f}]", x, ci.lo, ci.hi);
}

std::string ratio_text(double x, const stats::Interval& ci) {
  if (!std::isfinite(x)) return "–";
  if (!std::isfinite(ci.lo)) return fmt::format("{:.2f}", x);
  return fmt::format("{:.2f} [{:.2f}, {:.2f}]", x, ci.lo, ci.hi);
}

// Every pair with ≥ 2 common seeds: the sign test over its seed pairs and the two arms' spread.
std::string spread_table(const PairTable& t) {
  std::string rows;
  for (const auto& r : t.pairs) {
    if (r.common_seeds < 2) continue;
    rows += fmt::format("| {} − {} | {} / {} / {} | {:.3g} | {} | {} | {} |\n", t.arms[r.a], t.arms[r.b],
                        r.gap.a_higher, r.gap.b_higher, r.gap.ties, r.gap.sign_p, interval_text(r.sd_a, r.sd_a_ci),
                        interval_text(r.sd_b, r.sd_b_ci), ratio_text(r.sd_ratio, r.sd_ratio_ci));
  }
  if (rows.empty()) return "";
  return fmt::format("Sign test over the seed pairs (seeds where the first arm's loss is higher / the second's / "
                     "tied; exact two-sided binomial p, ties dropped) and each arm's seed-to-seed sd of its mean "
                     "loss with its {:g}% interval (χ² on n − 1 df), and their ratio with its {:g}% interval (F on "
                     "n − 1, n − 1 df; an outcome, not a test):\n\n"
                     "| pair | seeds higher: first / second / tied | sign p | sd first | sd second | sd first / sd "
                     "second |\n|---|---|---|---|---|---|\n{}\n",
                     100 * kSpreadLevel, 100 * kSpreadLevel, rows);
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
    out += spread_table(t);
  }
  return out;
}

std::string format_pairs_csv(const std::vector<PairTable>& tables) {
  std::string out = "context,a,b,gap,se,df,lo,hi,p,resolved,seeds,threshold,family,"
                    "a_higher,b_higher,tied,sign_p,sd_a,sd_a_lo90,sd_a_hi90,sd_b,sd_b_lo90,sd_b_hi90,"
                    "sd_ratio,sd_ratio_lo90,sd_ratio_hi90\n";
  for (const auto& t : tables)
    for (const auto& r : t.pairs)
      out += fmt::format("{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{:.6g},{},"
                         "{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n",
                         t.context, csv_field(t.arms[r.a]), csv_field(t.arms[r.b]), r.gap.gap, r.gap.se, r.gap.df,
                         r.gap.lo, r.gap.hi, r.p, r.resolved ? 1 : 0, r.gap.pairs, r.threshold,
                         csv_field(fmt::format("{} at {:g}", t.family, t.family_alpha)), r.gap.a_higher,
                         r.gap.b_higher, r.gap.ties, r.gap.sign_p, r.sd_a, r.sd_a_ci.lo, r.sd_a_ci.hi, r.sd_b,
                         r.sd_b_ci.lo, r.sd_b_ci.hi, r.sd_ratio, r.sd_ratio_ci.lo, r.sd_ratio_ci.hi);
  return out;
}

}  // namespace analysis
