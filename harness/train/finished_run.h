// A finished run, reopened for analysis: its resolved config (from run.h5), its results, its data
// and its model with the final checkpoint's weights, in eval mode. What `harness analyse` and the
// post-hoc experiments (critical scaling of trained LogN models, needle fine-tuning) start from.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>

#include "harness/config/schema.h"
#include "harness/data/dataset.h"
#include "models/gpt.h"
#include "results/run_file.h"
#include "results/run_paths.h"

namespace harness::train {

struct FinishedRun {
  results::RunPaths paths;
  config::LoadedConfig loaded;            // the run's resolved config (/config/canonical)
  results::RunRecord record;              // run.h5 as it is on disk
  std::unique_ptr<data::Dataset> dataset;
  models::GPT model{nullptr};             // final weights, eval mode, on `device`
};

// Throws harness::InputError naming the run directory when it holds no run, the run is not done
// (state and step given), its checkpoint is missing, or its config no longer loads; nothing is
// written.
FinishedRun open_finished_run(const std::string& run_dir, torch::Device device = torch::kCPU);

// Loads only the model weights of a checkpoint's bytes (save_checkpoint) into `model`.
void load_model_weights(const std::vector<char>& checkpoint, models::GPT& model);

}  // namespace harness::train
