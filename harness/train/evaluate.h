// Validation at one context: mean loss over fixed windows with its standard error over the windows
// (how far it may be from the validation documents' loss), loss by position bucket, the per-layer
// std of raw attention scores, and (attention_queries > 0) the attention statistics of the last
// attention_queries positions of every window (harness/train/attention_datasets.h).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness/data/windows.h"
#include "models/collectives.h"
#include "models/gpt.h"
#include "results/dataset_group.h"

namespace harness::train {

struct EvalResult {
  int64_t context = 0;
  double loss = 0.0;                  // mean nats/token over all windows and positions
  std::vector<double> window_loss;    // (N,) mean nats/token of each window, in window order
  double loss_se = 0.0;               // standard error of `loss` over windows: sd(window_loss)/√N
                                      // (NaN for one window)
  std::string window_fingerprint;     // data::window_fingerprint of the windows
  std::vector<int64_t> window_document;  // (N,) each window's document: 0, 1, … in the order the
                                         // windows' documents first appear (windows of one
                                         // document are not independent: analysis/tau/verdict.h)
  std::vector<double> position_loss;  // mean nats/token per equal-width bucket of positions
  std::vector<double> score_std;      // per layer, pooled over the sampled scores of all batches
  results::DatasetGroup attention;    // (layers, heads, …) arrays; empty when not asked for
};

// raw_scores: the attention statistics also hold the raw-score moments and QQ quantiles.
// group (data parallel): each rank evaluates its share of the batches and the sums are reduced,
// so every rank returns what one process would (to float rounding); not with raw_scores.
// Windows per validation forward at `context`: batch_size, split so that a forward holds at most
// max_batch_tokens tokens (at least one window; 0: no limit). The result does not depend on it
// (to float rounding): losses are summed per window and the score std is pooled.
int64_t eval_batch_windows(int64_t batch_size, int64_t max_batch_tokens, int64_t context);

// Positions per window a measurement of the attention statistics samples (`harness analyse`, the
// statistics benchmark): `requested` when > 0, else the run's eval.attention_queries (`configured`),
// else kDefaultAttentionQueries, so that a run that recorded none in training is still measured.
// eval.attention_queries itself means one thing: what training's validation records (0: none).
int64_t statistics_queries(int64_t configured, int64_t requested = 0);

EvalResult evaluate(models::GPT& model, const data::EvalWindows& windows, int64_t batch_size,
                    int64_t position_buckets, torch::Device device, int64_t attention_queries = 0,
                    bool raw_scores = false, models::Collectives* group = nullptr);

}  // namespace harness::train
