#include "analysis/tau/verdict.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/arm_grid.h"
#include "common/errors.h"

namespace analysis {

double TauArm::mean() const { return mean_loss(runs); }

const char* to_string(TauClass c) {
  switch (c) {
    case TauClass::kNearOptimal: return "near-optimal";
    case TauClass::kBetterExists: return "a better τ exists";
    case TauClass::kWorse: return "worse";
    case TauClass::kInconclusive: return "inconclusive";
  }
  return "?";
}

namespace {

std::string interval(const PairedGap& g) { return fmt::format("{:+.4f} [{:+.4f}, {:+.4f}]", g.gap, g.lo, g.hi); }

// Where the best τ ends the grid: which end, and the factors (of the config's τ) beyond it.
void mark_edge(TauVerdict& v, const ContextRuns& grid, size_t best, double own_value) {
  if (grid.arms.size() < 3 || (best != 0 && best + 1 != grid.arms.size())) return;
  const bool largest = best + 1 == grid.arms.size();
  v.edge = largest ? "largest" : "smallest";
  const double factor = grid.arms[best].value / own_value;
  for (const double step : {3.0, 10.0})
    v.factors_to_add.push_back(fmt::format("{:.3g}", largest ? factor * step : factor / step));
}

TauVerdict verdict_at(const ContextRuns& grid, size_t own, const TauVerdictOptions& o) {
  TauVerdict v;
  v.context = grid.context;
  v.tau = grid.arms[own].tau;
  v.loss = grid.arms[own].mean();
  size_t best = 0;
  for (size_t a = 0; a < grid.arms.size(); ++a)
    if (grid.arms[a].mean() < grid.arms[best].mean()) best = a;
  v.best_tau = grid.arms[best].tau;
  v.best_loss = grid.arms[best].mean();
  v.seeds = int(grid.arms[own].runs.size());
  mark_edge(v, grid, best, grid.arms[own].value);
  for (const auto& arm : grid.arms)
    if (arm.runs.size() != grid.arms[own].runs.size() || arm.runs.size() < 2) {
      v.why = fmt::format("every τ needs the same number of seeds, two or more (τ = {} has {}): one seed "
                          "cannot measure how much seeds vary, which is more than windows do",
                          arm.tau, arm.runs.size());
      return v;
    }
  const size_t m = grid.arms.size() - 1;
  v.level_each = 1.0 - (1.0 - o.level) / double(m);
  for (size_t a = 0; a < grid.arms.size(); ++a) {
    if (a == own) continue;
    v.comparisons.push_back({grid.arms[a].tau, seed_paired_gap(grid.arms[own].runs, grid.arms[a].runs,
                                                              grid.document, v.level_each)});
    v.documents = v.comparisons.back().gap.documents;
  }
  for (size_t a = 0; a < grid.arms.size(); ++a)
    if (a == best || !seed_paired_gap(grid.arms[a].runs, grid.arms[best].runs, grid.document, v.level_each)
                          .excludes_zero())
      v.near_best.push_back(grid.arms[a].tau);

  const TauComparison* worst = nullptr;  // the comparison the verdict rests on
  auto pick = [&](auto predicate) {
    for (const auto& c : v.comparisons)
      if (predicate(c.gap) && (!worst || c.gap.gap > worst->gap.gap)) worst = &c;
    return worst != nullptr;
  };
  if (pick([&](const PairedGap& g) { return g.lo > o.margin; })) {
    v.verdict = TauClass::kWorse;
    v.why = fmt::format("τ = {} is better by more than the margin {:g}: gap {}", worst->tau, o.margin, interval(worst->gap));
  } else if (pick([&](const PairedGap& g) { return g.hi > o.margin; })) {
    v.verdict = TauClass::kInconclusive;
    v.seeds_to_resolve = seeds_to_resolve(worst->gap, o.margin, v.level_each);
    v.why = fmt::format("the interval against τ = {} reaches beyond the margin {:g}: gap {}; {}", worst->tau, o.margin,
                        interval(worst->gap),
                        v.seeds_to_resolve ? fmt::format("at the seed variance measured, about {} seeds per τ would "
                                                         "resolve a gap this size", v.seeds_to_resolve)
                                           : "more seeds alone would not resolve it (the windows' share is too wide: "
                                             "validate on more tokens, `harness analyse --tokens`)");
  } else if (pick([](const PairedGap& g) { return g.lo > 0; })) {
    v.verdict = TauClass::kBetterExists;
    v.why = fmt::format("τ = {} is better, by less than the margin {:g}: gap {}", worst->tau, o.margin, interval(worst->gap));
  } else {
    v.verdict = TauClass::kNearOptimal;
    pick([](const PairedGap&) { return true; });
    v.why = fmt::format("no τ is better by more than {:g}; the largest possible gap, against τ = {}: {}", o.margin,
                        worst->tau, interval(worst->gap));
  }
  return v;
}

}  // namespace

int seeds_to_resolve(const PairedGap& g, double margin, double level) {
  const double seed_variance = g.seed_se * g.seed_se * g.pairs;  // var_s(d_s)
  const double distance = std::fabs(g.gap - margin);
  for (int n = std::max(2, g.pairs); n <= 64; ++n) {
    const double df = g.documents >= 2 ? std::min(double(n - 1), double(g.documents - 1)) : double(n - 1);
    const double half = t_quantile(0.5 + level / 2, df) * std::sqrt(seed_variance / n + g.window_se * g.window_se);
    if (half < distance) return n;
  }
  return 0;
}

std::vector<TauVerdict> tau_verdicts(const std::vector<ContextRuns>& grid, const std::string& tau_text,
                                     const TauVerdictOptions& o) {
  std::vector<TauVerdict> out;
  for (const auto& context : grid) {
    const auto own = std::find_if(context.arms.begin(), context.arms.end(),
                                  [&](const TauArm& a) { return a.tau == tau_text; });
    if (own == context.arms.end())
      throw harness::InputError(fmt::format("tau verdict: no finished run has τ = {} at context {}", tau_text,
                                            context.context));
    if (context.arms.size() < 2) continue;
    out.push_back(verdict_at(context, size_t(own - context.arms.begin()), o));
  }
  return out;
}

std::string format_verdicts(const std::vector<TauVerdict>& verdicts, int64_t L, const TauVerdictOptions& o) {
  if (verdicts.empty()) return "no verdict: no context has the config's τ and another τ finished\n";
  std::string out;
  std::map<TauClass, int> count;
  for (const auto& v : verdicts) {
    const std::string where = L > 0 && v.context % L == 0 ? fmt::format("T = {} ({}L)", v.context, v.context / L)
                                                          : fmt::format("T = {}", v.context);
    out += fmt::format("{}: {} — {}\n", where, to_string(v.verdict), v.why);
    out += fmt::format("  τ = {}: {:.4f}; best of the grid τ = {}: {:.4f}; not resolved from the best: {}\n", v.tau,
                       v.loss, v.best_tau, v.best_loss, fmt::join(v.near_best, ", "));
    if (!v.edge.empty())
      out += fmt::format("  the best τ is the grid's {}: the optimum may lie beyond it; extend --factors with {}\n", v.edge,
                         fmt::join(v.factors_to_add, ","));
    if (!v.comparisons.empty())
      out += fmt::format("  intervals: {:.4g}% each ({:g}% over the {} comparisons), {} seeds paired, windows "
                         "clustered by {} document{}\n",
                         100 * v.level_each, 100 * o.level, v.comparisons.size(), v.seeds, v.documents,
                         v.documents == 1 ? "" : "s");
    ++count[v.verdict];
  }
  std::vector<std::string> parts;
  for (const auto c : {TauClass::kWorse, TauClass::kInconclusive, TauClass::kBetterExists, TauClass::kNearOptimal})
    if (count[c]) parts.push_back(fmt::format("{} at {}", to_string(c), count[c]));
  out += fmt::format("verdict: τ = {} is {} of {} contexts (margin {:g} nats/token)\n", verdicts[0].tau,
                     fmt::join(parts, ", "), verdicts.size(), o.margin);
  return out;
}

std::vector<ContextRuns> tau_grid(const RunSet& set) {
  std::vector<ContextRuns> out;
  for (const auto& g : arm_grid(set, {"attention.tau"})) {
    ContextRuns c;
    c.context = g.context;
    c.document = g.document;
    c.documents_known = g.documents_known;
    for (const auto& arm : g.arms) {
      const auto& first = *arm.first;
      c.arms.push_back({arm.label, first.config.attention.parameters[attention::Parameter::kTau].resolve(first.train_context),
                        arm.runs});
    }
    std::sort(c.arms.begin(), c.arms.end(), [](const TauArm& a, const TauArm& b) { return a.value < b.value; });
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace analysis
