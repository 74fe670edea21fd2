// Training a config into a run directory in-process, as `harness train --run-dir` would, without a
// progress bar: the tests' one way to train, stop (--stop-after-steps) and resume.
#pragma once

#include <cstdint>
#include <filesystem>

#include "harness/config/schema.h"
#include "harness/train/trainer.h"

namespace test_support {

inline harness::train::TrainOutcome train_run(const harness::config::LoadedConfig& config,
                                              const std::filesystem::path& dir, bool resume = false,
                                              int64_t stop_after_steps = 0) {
  harness::train::TrainOptions o;
  o.run_dir = dir.string();
  o.resume = resume;
  o.progress_bar = 0;
  o.stop_after_steps = stop_after_steps;
  return harness::train::train(config, o);
}

}  // namespace test_support
