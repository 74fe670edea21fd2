// How often `tau check` declares a difference where there is none: many seeds of one config
// (one τ), split into disjoint arms of k seeds in seed order; arm 2j against arm 2j + 1 is a
// comparison of identical τ, made as `tau check` makes it (the seed-paired gap, seeds paired in
// rank order, windows clustered by document, one comparison so no Bonferroni). A false alarm is an
// interval that excludes 0; its rate per context comes with a Clopper–Pearson interval.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/run_set.h"

namespace analysis {

struct FalseAlarms {
  int64_t context = 0;
  int pairs = 0, alarms = 0;
  double rate = 0, lo = 0, hi = 0;  // alarms / pairs and its interval
};

// `set`: done runs of one τ (several seeds). Throws harness::InputError with fewer than 2·k runs
// or more than one τ.
std::vector<FalseAlarms> false_alarm_rates(const RunSet& set, int arm_seeds, double level = 0.95);

// Clopper–Pearson ("exact") interval for `successes` of `trials` at `level`.
std::pair<double, double> clopper_pearson(int successes, int trials, double level = 0.95);

std::string format_false_alarms(const std::vector<FalseAlarms>& rates, int arm_seeds, int64_t train_context,
                                double level = 0.95);

}  // namespace analysis
