// Passkey retrieval scored teacher-forced (needle.kind: passkey): one forward pass per example.
// Exact match is every key token being the argmax given the example up to it — exactly when greedy
// decoding would write the key — and the log-probability is the key's, summed over its tokens.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "harness/tasks/needle/passkey_task.h"
#include "models/gpt.h"
#include "results/dataset_group.h"

namespace harness::needle {

struct PasskeyScores {
  std::vector<double> exact;     // (E,) 1 when every key token is the argmax
  std::vector<double> log_prob;  // (E,) nats, summed over the key's tokens
};

// Scores `examples` (all of one length N; their keys may differ in tokens) in forwards of at most
// `batch` examples; each forward uses the method's quantities at the input length N − 1, as
// validation does.
PasskeyScores score_passkeys(models::GPT& model, const std::vector<PasskeyExample>& examples, int64_t batch,
                             torch::Device device = torch::kCPU);

// /needle/<distance>/: exact (E,), log_prob (E,), accuracy, accuracy_se, mean_log_prob,
// mean_log_prob_se; attributes distance, example_tokens, examples, seed, kind, scoring.
results::DatasetGroup passkey_group(const PasskeyScores& scores, int64_t distance, int64_t example_tokens,
                                    uint64_t seed);

}  // namespace harness::needle
