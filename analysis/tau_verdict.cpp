#include "analysis/tau_verdict.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "harness/common/errors.h"
#include "harness/common/mean_se.h"

namespace analysis {

namespace {

// A cell's uncertainty: over seeds when there are two or more, else over validation windows.
double uncertainty(const Cell& c, std::string* source = nullptr) {
  const bool seeds = c.n > 1 && !std::isnan(c.se);
  if (source) *source = seeds ? "seeds" : "windows";
  return seeds ? c.se : c.window_se;
}

// One seed each, scored on the same windows (equal fingerprints): the standard error of the mean
// per-window difference.
std::optional<double> paired_window_se(const Cell& a, const Cell& b) {
  const auto &wa = a.windows, &wb = b.windows;
  if (a.n != 1 || b.n != 1 || wa.fingerprint.empty() || wa.fingerprint != wb.fingerprint ||
      wa.loss.size() < 2 || wa.loss.size() != wb.loss.size())
    return std::nullopt;
  std::vector<double> d(wa.loss.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = wa.loss[i] - wb.loss[i];
  const double se = harness::mean_se(d).se;
  if (!(se > 0)) return std::nullopt;  // identical differences: no spread to measure
  return se;
}

}  // namespace

std::vector<TauVerdict> tau_verdicts(const Table& t, const std::string& tau_text, double k_max) {
  if (t.row_keys != std::vector<std::string>{"attention.tau"} || t.col_keys != std::vector<std::string>{"context"})
    throw harness::InputError("tau verdict: the table must have attention.tau along rows and context along columns");
  size_t own = t.rows.size();
  for (size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r][0] == tau_text) own = r;
  if (own == t.rows.size())
    throw harness::InputError(fmt::format("tau verdict: no finished run has τ = {}", tau_text));
  std::vector<TauVerdict> out;
  for (size_t c = 0; c < t.cols.size(); ++c) {
    if (!t.cells[own][c]) continue;
    size_t best = own, filled = 0;
    for (size_t r = 0; r < t.rows.size(); ++r) {
      if (!t.cells[r][c]) continue;
      ++filled;
      if (t.cells[r][c]->mean < t.cells[best][c]->mean) best = r;
    }
    if (filled < 2) continue;
    TauVerdict v;
    v.context = std::stoll(t.cols[c][0]);
    v.tau = tau_text;
    v.best_tau = t.rows[best][0];
    v.loss = t.cells[own][c]->mean;
    v.loss_u = uncertainty(*t.cells[own][c], &v.uncertainty);
    v.best_loss = t.cells[best][c]->mean;
    v.best_u = uncertainty(*t.cells[best][c]);
    v.gap = v.loss - v.best_loss;
    v.gap_se = std::sqrt(v.loss_u * v.loss_u + v.best_u * v.best_u);
    const auto paired = paired_window_se(*t.cells[own][c], *t.cells[best][c]);
    if (best != own && paired) {
      v.gap_se = *paired;
      v.uncertainty = "paired windows";
    }
    v.k = best == own ? 0.0 : v.gap / v.gap_se;  // NaN when no uncertainty is known
    v.within = v.k <= k_max;
    out.push_back(v);
  }
  return out;
}

std::string format_verdicts(const std::vector<TauVerdict>& verdicts, int64_t L, double k_max) {
  std::string out;
  size_t within = 0, unknown = 0;
  for (const auto& v : verdicts) {
    const std::string where = L > 0 && v.context % L == 0 ? fmt::format("T = {} ({}L)", v.context, v.context / L)
                                                          : fmt::format("T = {}", v.context);
    if (v.tau == v.best_tau) {
      out += fmt::format("{}: τ = {} is the best of the grid ({:.4f} ± {:.4f}, s.e. over {})\n", where, v.tau,
                         v.loss, v.loss_u, v.uncertainty);
    } else if (std::isnan(v.k)) {
      out += fmt::format("{}: τ = {} is {:.4f} nats above the best τ = {}; no standard error (one seed and no "
                         "per-window s.e. in the run files): no verdict\n", where, v.tau, v.gap, v.best_tau);
    } else {
      const bool paired = v.uncertainty == "paired windows";
      out += fmt::format("{}: τ = {} is {} {:.1f} s.e. of the best (best τ = {}: {:.4f} ± {:.4f} vs {:.4f} ± "
                         "{:.4f}, s.e. over {}{})\n", where, v.tau, v.within ? "within" : "worse by", v.k, v.best_tau,
                         v.best_loss, v.best_u, v.loss, v.loss_u, paired ? "windows" : v.uncertainty,
                         paired ? fmt::format("; the gap {:.4f} ± {:.4f} over the same windows, paired", v.gap,
                                              v.gap_se)
                                : "");
    }
    within += v.within;
    unknown += std::isnan(v.k);
  }
  if (verdicts.empty()) return "no verdict: no context has the config's τ and another τ finished\n";
  const size_t worse = verdicts.size() - within - unknown;
  if (worse > 0)
    out += fmt::format("verdict: τ = {} is more than {:g} s.e. from the best τ at {} of {} contexts\n",
                       verdicts[0].tau, k_max, worse, verdicts.size());
  else if (unknown > 0)
    out += fmt::format("verdict: none at {} of {} contexts (no standard error); within {:g} s.e. at the others\n",
                       unknown, verdicts.size(), k_max);
  else
    out += fmt::format("verdict: τ = {} is within {:g} s.e. of the best τ at every context\n", verdicts[0].tau, k_max);
  return out;
}

}  // namespace analysis
