// What a training run builds before it writes anything: its data, validation windows, model and
// optimisers on its device, so that a bad config fails with nothing on disk.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "harness/config/schema.h"
#include "harness/data/dataset.h"
#include "harness/data/windows.h"
#include "harness/distributed/world.h"
#include "models/gpt.h"
#include "models/optimizers.h"

namespace harness::train {

struct RunSetup {
  data::Dataset dataset;
  std::map<int64_t, data::EvalWindows> eval_windows;  // by validation context
  models::GPT model{nullptr};
  std::unique_ptr<models::Optimizers> optim;
  torch::Device device = torch::kCPU;
};

// Seeds torch with train.seed before the model is initialised. An InputError located at
// eval.contexts when a context has no validation window, or naming the config when the model or
// optimiser options are invalid. With CUDA and W > 1 ranks, rank r's device is cuda:local_rank.
std::unique_ptr<RunSetup> build_run_setup(const config::LoadedConfig& loaded, const distributed::World& world);

}  // namespace harness::train
