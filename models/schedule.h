// Learning-rate schedules: a factor in [min_factor, 1] that multiplies every group's base lr
// (Optimizers::set_lr_factor). Steps are 0-based, step ∈ [0, total_steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace models {

struct ScheduleOptions {
  // constant-cooldown: 1, then linear to min_factor over the last cooldown_fraction of the run
  //                    (the paper's / modded-nanogpt's);
  // cosine:            half cosine from 1 (after warmup) to min_factor at the end;
  // constant:          1.
  std::string kind = "constant-cooldown";
  int64_t warmup_steps = 0;        // linear ramp from 0: factor = step / warmup_steps
  double cooldown_fraction = 0.4;  // constant-cooldown only, in [0, 1]
  double min_factor = 0.0;         // the factor the decay ends at, in [0, 1]
};

std::vector<std::string> schedule_names();  // {"constant-cooldown", "cosine", "constant"}

// Throws std::invalid_argument: unknown kind (listing the valid names), warmup_steps < 0,
// cooldown_fraction or min_factor outside [0, 1].
void validate(const ScheduleOptions& options);

// The factor at `step` of a run of `total_steps` (> 0). With x = step / total_steps:
//   constant-cooldown: x < 1 − c: 1;  else w = (1 − x)/c, factor = w + (1 − w)·min_factor
//   cosine:            p = (step − warmup)/(total − warmup), factor = min + (1 − min)·½(1 + cos πp)
//   constant:          1
// and during warmup (step < warmup_steps) the result is min(step / warmup_steps, that factor).
// Steps past the end are clamped to x = 1 (p = 1).
double lr_factor(const ScheduleOptions& options, int64_t step, int64_t total_steps);

}  // namespace models
