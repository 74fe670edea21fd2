// The attention group has one writer (results/attention_group.h) and two producers: training's
// per-layer, per-head statistics and the entropy theory's per-context ones. Readers (export,
// figures) take either, so the names, units and axes must agree; only the leading axes differ.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <set>

#include "analysis/theory/theory_entropy.h"
#include "attention/score_mod.h"
#include "attention/statistics.h"
#include "harness/train/attention_datasets.h"
#include "results/attention_group.h"

namespace {

results::DatasetGroup training_group(int64_t layers, int64_t H, int64_t T) {
  torch::manual_seed(3);
  std::vector<std::shared_ptr<attention::AttentionStatsRecorder>> recorders;
  for (int64_t l = 0; l < layers; ++l) {
    auto r = std::make_shared<attention::AttentionStatsRecorder>(/*queries=*/8, /*raw_scores=*/false);
    const auto q = torch::randn({2, H, T, 4}), k = torch::randn({2, H, T, 4});
    r->add(q, k, attention::ScoreMod{}, torch::Tensor(), torch::Tensor(), 1.0);
    recorders.push_back(r);
  }
  return harness::train::attention_datasets(recorders, /*raw_scores=*/false);
}

}  // namespace

TEST(AttentionGroup, TrainingAndTheoryWriteTheSameNamesUnitsAndAxes) {
  const int64_t layers = 2, H = 3, T = 150;
  const auto trained = training_group(layers, H, T);
  analysis::EntropyTheoryOptions o;
  o.contexts = {100, 1000};
  o.trials = 4;
  o.taus = {10};
  o.range_keys = 1000;
  const auto theory = analysis::entropy_theory(o);
  ASSERT_FALSE(theory.empty());

  for (const auto& [who, g] : {std::pair{std::string("training"), trained},
                               std::pair{std::string("theory"), theory.back().datasets}}) {
    for (const char* axis : {"band_edges", "range_start", "range_ratio", "recent_keys"}) {
      ASSERT_TRUE(g.integers.count(axis)) << who << " " << axis;
      EXPECT_EQ(g.integer_units.at(axis), trained.integer_units.at(axis)) << who << " " << axis;
    }
    const int64_t bands = int64_t(g.integers.at("band_edges").size()) - 1;
    const int64_t ranges = int64_t(g.integers.at("range_start").size());
    EXPECT_EQ(int64_t(g.integers.at("range_ratio").size()), ranges) << who;
    ASSERT_GT(ranges, 0) << who;
    for (const auto s : results::kAttentionStatistics) {
      const std::string name = results::statistic_name(s);
      ASSERT_TRUE(g.arrays.count(name)) << who << " " << name;
      const auto& a = g.arrays.at(name);
      EXPECT_EQ(a.units, results::statistic_units(s)) << who << " " << name;
      int64_t size = 1;
      for (const int64_t n : a.shape) size *= n;
      EXPECT_EQ(int64_t(a.values.size()), size) << who << " " << name;
      // The trailing axis is the statistic's own: bands, ranges, or none.
      if (results::per_band(s)) {
        EXPECT_EQ(a.shape.back(), bands) << who << " " << name;
      }
      if (results::per_range(s)) {
        EXPECT_EQ(a.shape.back(), ranges) << who << " " << name;
      }
    }
  }
  // The leading axes: (layers, heads) in training; (contexts) or none (ranges at N = range_keys)
  // in the theory.
  EXPECT_EQ(trained.arrays.at("entropy").shape, (std::vector<int64_t>{layers, H}));
  EXPECT_EQ(trained.arrays.at("range_mass").shape.size(), 3u);
  EXPECT_EQ(theory.back().datasets.arrays.at("entropy").shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(theory.back().datasets.arrays.at("range_mass").shape.size(), 1u);
}

TEST(AttentionGroup, StatisticNamesAreDistinct) {
  std::set<std::string> names;
  for (const auto s : results::kAttentionStatistics) names.insert(results::statistic_name(s));
  EXPECT_EQ(names.size(), std::size(results::kAttentionStatistics));
}
