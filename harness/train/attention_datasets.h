// The attention statistics of a model's layers (attention/statistics.h) as the datasets run.h5
// holds under /eval/<T>/attention and /analysis/<T>/attention (docs/results-format.md):
//
//   entropy, recent_mass                  (layers, heads)             nats; fraction
//   band_mass, band_entropy               (layers, heads, bands)      fraction; nats
//   range_mass, range_entropy             (layers, heads, ranges)     fraction; nats
//   band_edges (bands + 1), range_start, range_ratio (ranges), recent_keys (1)    int64
//   with raw scores: score_mean, score_std, score_skewness, score_excess_kurtosis (layers),
//   qq_probability, qq_normal (points), qq_score (layers, points)
//
// Means over the sampled query rows; a band no sampled row reaches has a NaN entropy. The theory
// file (`harness theory entropy`) uses the same names, so one exporter draws both.
#pragma once

#include <memory>
#include <vector>

#include "attention/statistics.h"
#include "results/dataset_group.h"

namespace harness::train {

results::DatasetGroup attention_datasets(
    const std::vector<std::shared_ptr<attention::AttentionStatsRecorder>>& layers, bool raw_scores);

// The probabilities of the QQ plot: (k − ½)/99, k = 1..99.
std::vector<double> qq_probabilities();

}  // namespace harness::train
