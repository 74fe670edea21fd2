#include "models/schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace models {

std::vector<std::string> schedule_names() { return {"constant-cooldown", "cosine", "constant"}; }

void validate(const ScheduleOptions& o) {
  const auto names = schedule_names();
  if (std::find(names.begin(), names.end(), o.kind) == names.end()) {
    std::string list;
    for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + names[i];
    throw std::invalid_argument("unknown schedule '" + o.kind + "' (valid: " + list + ")");
  }
  if (o.warmup_steps < 0)
    throw std::invalid_argument("ScheduleOptions.warmup_steps must be >= 0, got " +
                                std::to_string(o.warmup_steps));
  if (!(o.cooldown_fraction >= 0 && o.cooldown_fraction <= 1))
    throw std::invalid_argument("ScheduleOptions.cooldown_fraction must be in [0, 1], got " +
                                std::to_string(o.cooldown_fraction));
  if (!(o.min_factor >= 0 && o.min_factor <= 1))
    throw std::invalid_argument("ScheduleOptions.min_factor must be in [0, 1], got " +
                                std::to_string(o.min_factor));
}

double lr_factor(const ScheduleOptions& o, int64_t step, int64_t total_steps) {
  validate(o);
  if (total_steps <= 0)
    throw std::invalid_argument("lr_factor: total_steps must be > 0, got " +
                                std::to_string(total_steps));
  if (step < 0) throw std::invalid_argument("lr_factor: step must be >= 0");
  const double s = static_cast<double>(std::min(step, total_steps));
  const double total = static_cast<double>(total_steps);
  double f = 1.0;
  if (o.kind == "constant-cooldown") {
    const double x = s / total, c = o.cooldown_fraction;
    if (c > 0 && x >= 1.0 - c) {
      const double w = (1.0 - x) / c;
      f = w + (1.0 - w) * o.min_factor;
    }
  } else if (o.kind == "cosine") {
    const double w = static_cast<double>(o.warmup_steps);
    const double span = total - w;
    const double p = span > 0 ? std::clamp((s - w) / span, 0.0, 1.0) : 1.0;
    f = o.min_factor + (1.0 - o.min_factor) * 0.5 * (1.0 + std::cos(M_PI * p));
  }
  if (step < o.warmup_steps) f = std::min(f, s / static_cast<double>(o.warmup_steps));
  return f;
}

}  // namespace models
