// Validation at one context: mean loss over fixed windows, loss by position bucket, and the
// per-layer std of raw attention scores.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "harness/data/windows.h"
#include "models/gpt.h"

namespace harness::train {

struct EvalResult {
  int64_t context = 0;
  double loss = 0.0;                  // mean nats/token over all windows and positions
  std::vector<double> position_loss;  // mean nats/token per equal-width bucket of positions
  std::vector<double> score_std;      // per layer, averaged over batches
};

EvalResult evaluate(models::GPT& model, const data::EvalWindows& windows, int64_t batch_size,
                    int64_t position_buckets, torch::Device device);

}  // namespace harness::train
