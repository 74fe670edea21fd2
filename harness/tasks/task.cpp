#include "harness/tasks/task.h"

#include <fmt/format.h>

#include "harness/tasks/needle/needle_run.h"
#include "common/errors.h"

namespace harness {

train::TrainOutcome run_task(const config::LoadedConfig& loaded, const train::TrainOptions& options) {
  if (loaded.config.task != "needle") return train::train(loaded, options);
  if (options.world.distributed())
    throw InputError(fmt::format("{}: task: needle runs in one process (world size {} from {})",
                                 loaded.location_of("task").str(), options.world.size, options.world.source));
  return needle::run_needle(loaded, options);
}

}  // namespace harness
