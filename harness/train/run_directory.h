// What every kind of run (training from scratch, needle fine-tuning) does before its own work:
// refuse to clobber an existing run, take its threads and device, write its resolved config and
// begin its record. One place, so both kinds of run.h5 carry the same provenance.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "harness/config/schema.h"
#include "harness/train/trainer.h"
#include "results/run_file.h"
#include "results/run_paths.h"

namespace harness::train {

// An InputError when `paths` already holds a run (naming its state) and neither --resume nor
// --overwrite was given.
void refuse_existing_run(const results::RunPaths& paths, const TrainOptions& options);

// run.device as a torch device; an InputError located at run.device when CUDA is not available.
torch::Device pick_device(const config::LoadedConfig& loaded);

// Whether `record` (a run.h5) holds a run of `config`: the same run id, or, for a run written under
// the first id scheme, a stored config with today's same id.
bool is_same_run(const results::RunRecord& record, const config::RunConfig& config);

// An InputError when the run recorded in `record` (at `dir`) has another run id than `config`:
// resuming it would mix two configs in one run.h5.
void require_same_run(const results::RunRecord& record, const config::RunConfig& config,
                      const std::string& dir);

// Sets torch's thread count to run.threads (0: every core, shared by the data-parallel ranks on
// this node) and returns it.
int64_t use_run_threads(const config::RunConfig& config, int ranks_on_this_node = 1);

// <run>/config.yaml: the resolved config and its run id (written atomically).
void write_resolved_config(const results::RunPaths& paths, const config::RunConfig& config);

// A new record with the run's provenance in /config: name, yaml, canonical, hash, source,
// git_revision, libtorch_version, blas, device; and its threads.
results::RunRecord fresh_record(const config::LoadedConfig& loaded, int64_t threads,
                                const torch::Device& device);

}  // namespace harness::train
