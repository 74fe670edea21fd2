#include "harness/train/batch_shares.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.h"

namespace harness::train {

BatchShares batch_shares(const config::LoadedConfig& loaded, int world_size, const std::string& source) {
  const auto& c = loaded.config;
  const int64_t B = c.train.batch_size, W = world_size;
  if (B % W != 0)
    throw InputError(fmt::format(
        "{}: train.batch_size ({}) is not divisible by the world size ({} ranks, from {}): every "
        "rank takes an equal share of each step's windows; use a multiple of {}",
        loaded.location_of("train.batch_size").str(), B, W, source, W));
  BatchShares out;
  out.per_rank = B / W;
  const bool explicit_micro = c.train.micro_batch_size > 0;
  out.micro_batch = std::min(out.per_rank, explicit_micro ? c.train.micro_batch_size : B / c.train.grad_accum);
  if (out.per_rank % out.micro_batch != 0) {
    const std::string key = explicit_micro ? "train.micro_batch_size" : "train.grad_accum";
    throw InputError(fmt::format(
        "{}: {} gives micro-batches of {} sequences, which do not divide a rank's share of "
        "train.batch_size ({} / {} ranks = {})",
        loaded.location_of(key).str(), key, out.micro_batch, B, W, out.per_rank));
  }
  return out;
}

}  // namespace harness::train
