// The files of one run directory (<run.out_dir>/<name>/ or <sweep dir>/<run id>/). Every stage
// that reads or writes a run (trainer, sweeps, analysis, export) names its files through this.
#pragma once

#include <string>

namespace results {

struct RunPaths {
  std::string dir;         // the run directory
  std::string results;     // run.h5: configuration, status, losses, statistics (run_file.h)
                          // (and its checkpoints: harness/train/checkpoint.h)
  std::string log;         // train.log
  std::string config;      // config.yaml: the resolved config, as `harness config show` prints it
  explicit RunPaths(const std::string& dir);
};

}  // namespace results
