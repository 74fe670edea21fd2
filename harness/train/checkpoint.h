// A run's checkpoint: everything needed to continue bit-for-bit (model, optimiser state, step,
// data cursor, RNG state), written atomically (temporary file, fsync, rename).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/data/windows.h"
#include "models/gpt.h"
#include "models/optimizers.h"

namespace harness::train {

struct CheckpointState {
  int64_t step = 0;                       // optimiser steps completed
  int64_t tokens = 0;                     // training tokens seen
  data::TrainStream::Cursor cursor;
  std::string config_hash;                // the run id of the config that wrote it
};

void save_checkpoint(const std::string& path, models::GPT& model, const models::Optimizers& optim,
                     const CheckpointState& state);
// Loads into `model` and `optim` (built from the same config) and returns the rest.
CheckpointState load_checkpoint(const std::string& path, models::GPT& model,
                                models::Optimizers& optim);
// The same from a checkpoint file's bytes: a data-parallel run's rank 0 reads the file and
// broadcasts them, so every rank loads identical state without a shared file system.
CheckpointState load_checkpoint(const std::vector<char>& bytes, models::GPT& model,
                                models::Optimizers& optim);
std::vector<char> read_file_bytes(const std::string& path);

}  // namespace harness::train
