// A run's checkpoint: everything needed to continue bit-for-bit (model, optimiser state, step,
// data cursor, RNG state), written to a temporary file, fsynced, read back and checked, then
// renamed into place. Which checkpoints a run keeps: checkpoint_list.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/data/windows.h"
#include "harness/train/checkpoint_list.h"
#include "models/gpt.h"
#include "models/optimizers.h"

namespace harness::train {

struct CheckpointState {
  int64_t step = 0;                       // optimiser steps completed
  int64_t tokens = 0;                     // training tokens seen
  data::TrainStream::Cursor cursor;
  std::string config_hash;                // the run id of the config that wrote it
};

// Writes one checkpoint file at `path` (atomically) and reads it back: returns its size and CRC-32.
// A failed write (a full disk, a quota, an I/O error) throws std::runtime_error naming `path` and
// the cause, with no temporary file left.
FileDigest save_checkpoint(const std::string& path, models::GPT& model, const models::Optimizers& optim,
                           const CheckpointState& state);
// Loads into `model` and `optim` (built from the same config) and returns the rest.
CheckpointState load_checkpoint(const std::string& path, models::GPT& model,
                                models::Optimizers& optim);
// The same from a checkpoint file's bytes: a data-parallel run's rank 0 reads the file and
// broadcasts them, so every rank loads identical state without a shared file system.
CheckpointState load_checkpoint(const std::vector<char>& bytes, models::GPT& model,
                                models::Optimizers& optim);
// Reads a checkpoint file's bytes into `archive`, every tensor mapped onto `device`. LibTorch reads
// the archive as a TorchScript module, and a damaged one can fail in its TorchScript compiler
// (torch::jit::ErrorReport, no c10::Error): every failure is thrown as a c10::Error, which
// --resume and open_finished_run report naming the file.
void load_checkpoint_archive(torch::serialize::InputArchive& archive, const std::vector<char>& bytes,
                             torch::Device device);
// Loads the model's own entries from a checkpoint's archive (Module::load), after checking that
// each parameter and buffer the archive holds has the model's shape and dtype: LibTorch would take
// another shape as it is. Throws c10::Error naming the entry, the model left as it was.
void load_model_state(torch::serialize::InputArchive& archive, models::GPT& model);
// Writes and verifies `state.step`'s checkpoint in `checkpoints`' directory, lists it, then
// removes every checkpoint but the newest `keep` (and any file a crash left unlisted). Throws
// std::runtime_error naming the file and the cause; the list and the checkpoints before stay.
void save_checkpoint(const RunCheckpoints& checkpoints, models::GPT& model, const models::Optimizers& optim,
                     const CheckpointState& state, int64_t keep);

}  // namespace harness::train
