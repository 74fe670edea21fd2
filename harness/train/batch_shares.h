// How a data-parallel run divides each step's windows between its ranks; checked before any rank
// starts (harness train --nproc, sweep run --nproc-per-run) and by each rank.
#pragma once

#include <cstdint>
#include <string>

#include "harness/config/schema.h"

namespace harness::train {

// Data parallel: each rank's share of a step's train.batch_size windows and the micro-batch it
// feeds them in (train.micro_batch_size, else batch_size / grad_accum, at most the share). An
// InputError located at the key when world_size (from `source`) does not divide them.
struct BatchShares {
  int64_t per_rank = 0, micro_batch = 0;
};
BatchShares batch_shares(const config::LoadedConfig& loaded, int world_size, const std::string& source);

}  // namespace harness::train
