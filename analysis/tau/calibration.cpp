#include "analysis/tau/calibration.h"

#include <boost/math/distributions/binomial.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "analysis/tau/verdict.h"
#include "common/errors.h"

namespace analysis {

std::pair<double, double> clopper_pearson(int successes, int trials, double level) {
  using boost::math::binomial_distribution;
  const double alpha = (1.0 - level) / 2;
  return {binomial_distribution<>::find_lower_bound_on_p(trials, successes, alpha),
          binomial_distribution<>::find_upper_bound_on_p(trials, successes, alpha)};
}

std::vector<FalseAlarms> false_alarm_rates(const RunSet& set, int k, double level) {
  std::vector<FalseAlarms> out;
  for (const auto& context : tau_grid(set)) {
    if (context.arms.size() != 1)
      throw harness::InputError(fmt::format("tau calibrate: the runs hold {} values of τ; calibration takes many "
                                            "seeds of one", context.arms.size()));
    auto runs = context.arms[0].runs;
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.seed < b.seed; });
    const int pairs = int(runs.size()) / (2 * k);
    if (pairs < 1)
      throw harness::InputError(fmt::format("tau calibrate: {} done runs at context {}; two arms of {} seeds need {}",
                                            runs.size(), context.context, k, 2 * k));
    FalseAlarms f;
    f.context = context.context;
    f.pairs = pairs;
    for (int p = 0; p < pairs; ++p) {
      const auto first = runs.begin() + 2 * p * k;
      const std::vector<SeedWindows> a(first, first + k), b(first + k, first + 2 * k);
      f.alarms += seed_paired_gap(a, b, context.document, level).excludes_zero();
    }
    f.rate = double(f.alarms) / double(pairs);
    std::tie(f.lo, f.hi) = clopper_pearson(f.alarms, pairs, level);
    out.push_back(f);
  }
  return out;
}

std::string format_false_alarms(const std::vector<FalseAlarms>& rates, int k, int64_t L, double level) {
  std::string out = fmt::format("false alarms of the seed-paired gap at {:g}%: identical τ, arms of {} seeds, "
                                "each pair of arms from disjoint seeds\n", 100 * level, k);
  out += "| context | pairs | alarms | rate | 95% interval (Clopper–Pearson) |\n|---|---|---|---|---|\n";
  for (const auto& f : rates)
    out += fmt::format("| {}{} | {} | {} | {:.3f} | [{:.3f}, {:.3f}] |\n", f.context,
                       L > 0 && f.context % L == 0 ? fmt::format(" ({}L)", f.context / L) : "", f.pairs, f.alarms,
                       f.rate, f.lo, f.hi);
  return out;
}

}  // namespace analysis
