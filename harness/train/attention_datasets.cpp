#include "harness/train/attention_datasets.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "results/attention_group.h"

namespace harness::train {

std::vector<double> qq_probabilities() {
  std::vector<double> p;
  for (int k = 1; k <= 99; ++k) p.push_back((k - 0.5) / 99.0);
  return p;
}

results::DatasetGroup attention_datasets(
    const std::vector<std::shared_ptr<attention::AttentionStatsRecorder>>& layers, bool raw_scores) {
  results::DatasetGroup g;
  if (layers.empty() || layers.front()->empty()) return g;
  const auto& layout = layers.front()->layout();
  const int64_t L = int64_t(layers.size()), H = int64_t(layers.front()->heads().size());
  const int64_t nb = int64_t(layout.bands()), nr = int64_t(layout.ranges());
  const auto array = [&](const std::string& name, std::vector<int64_t> shape, const std::string& units) -> results::Array& {
    auto& a = g.arrays[name];
    a.shape = std::move(shape);
    a.units = units;
    return a;
  };
  // (L, H), with a trailing bands or ranges axis where the statistic has one.
  const auto statistic = [&](results::AttentionStatistic s) -> results::Array& {
    std::vector<int64_t> shape{L, H};
    if (results::per_band(s)) shape.push_back(nb);
    if (results::per_range(s)) shape.push_back(nr);
    return results::attention_array(g, s, std::move(shape));
  };
  using S = results::AttentionStatistic;
  auto& entropy = statistic(S::kEntropy);
  auto& recent = statistic(S::kRecentMass);
  auto& band_mass = statistic(S::kBandMass);
  auto& band_entropy = statistic(S::kBandEntropy);
  auto& range_mass = statistic(S::kRangeMass);
  auto& range_entropy = statistic(S::kRangeEntropy);
  for (const auto& layer : layers) {
    if (layer->layout().band_edges != layout.band_edges || int64_t(layer->heads().size()) != H)
      throw std::invalid_argument("attention_datasets: layers recorded different contexts");
    for (const auto& s : layer->heads()) {
      const double rows = double(s.rows);
      entropy.values.push_back(s.entropy / rows);
      recent.values.push_back(s.recent_mass / rows);
      for (int64_t b = 0; b < nb; ++b) {
        band_mass.values.push_back(s.band_mass[b] / rows);
        band_entropy.values.push_back(s.band_rows[b] ? s.band_entropy[b] / double(s.band_rows[b])
                                                     : std::nan(""));
      }
      for (int64_t r = 0; r < nr; ++r) {
        range_mass.values.push_back(s.range_rows[r] ? s.range_mass[r] / double(s.range_rows[r]) : std::nan(""));
        range_entropy.values.push_back(s.range_rows[r] ? s.range_entropy[r] / double(s.range_rows[r])
                                                       : std::nan(""));
      }
    }
  }
  results::put_attention_axes(g, {layout.band_edges, layout.range_start, layout.range_ratio, layout.recent});
  g.attributes["context"] = int64_t(layout.context);
  g.attributes["queries_per_window"] = int64_t(layers.front()->queries());
  g.attributes["query_rows"] = int64_t(layers.front()->heads().front().rows);
  g.attributes["description"] =
      "attention of the last queries_per_window positions of each validation window, per layer "
      "and head (arXiv 2505.17083, Figs 1, 2)";

  if (raw_scores) {
    const auto probabilities = qq_probabilities();
    auto& mean = array("score_mean", {L}, "raw score s = scale*q.k (before the transform)");
    auto& sd = array("score_std", {L}, "raw score s = scale*q.k (the theory assumes 1)");
    auto& skew = array("score_skewness", {L}, "dimensionless (Gaussian: 0)");
    auto& kurt = array("score_excess_kurtosis", {L}, "dimensionless (Gaussian: 0)");
    auto& qq = array("qq_score", {L, int64_t(probabilities.size())},
                     "standardised raw-score quantile at qq_probability");
    for (const auto& layer : layers) {
      const auto& s = layer->scores();
      mean.values.push_back(s.mean);
      sd.values.push_back(std::sqrt(s.variance()));
      skew.values.push_back(s.skewness());
      kurt.values.push_back(s.excess_kurtosis());
      const auto q = s.standardised_quantiles(probabilities);
      qq.values.insert(qq.values.end(), q.begin(), q.end());
    }
    auto& p = array("qq_probability", {int64_t(probabilities.size())}, "probability");
    p.values = probabilities;
    auto& normal = array("qq_normal", {int64_t(probabilities.size())}, "standard normal quantile");
    for (const double x : probabilities) normal.values.push_back(attention::normal_quantile(x));
  }
  return g;
}

}  // namespace harness::train
