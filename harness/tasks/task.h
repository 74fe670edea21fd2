// A run's task, chosen by its config's `task`: language-model training (train/trainer.h) or the
// needle-in-a-haystack fine-tune of a finished run (needle/needle_run.h, beside it). The one place that knows
// both, so that neither depends on the other.
#pragma once

#include "harness/config/schema.h"
#include "harness/train/trainer.h"

namespace harness {

// Trains, resumes or fine-tunes the run `loaded` describes (see train::train, needle::run_needle).
// Throws InputError when the task cannot run as asked (a needle run on several ranks).
train::TrainOutcome run_task(const config::LoadedConfig& loaded, const train::TrainOptions& options);

}  // namespace harness
