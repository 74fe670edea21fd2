#include "results/attention_group.h"

#include <stdexcept>

namespace results {

const char* statistic_name(AttentionStatistic s) {
  switch (s) {
    case AttentionStatistic::kEntropy: return "entropy";
    case AttentionStatistic::kRecentMass: return "recent_mass";
    case AttentionStatistic::kBandMass: return "band_mass";
    case AttentionStatistic::kBandEntropy: return "band_entropy";
    case AttentionStatistic::kRangeMass: return "range_mass";
    case AttentionStatistic::kRangeEntropy: return "range_entropy";
  }
  throw std::logic_error("statistic_name: unknown statistic");
}

const char* statistic_units(AttentionStatistic s) {
  switch (s) {
    case AttentionStatistic::kEntropy: return "nats (mean over query rows)";
    case AttentionStatistic::kRecentMass: return "fraction of attention on distances [0, recent_keys)";
    case AttentionStatistic::kBandMass: return "fraction of attention in band [band_edges[b], band_edges[b+1])";
    case AttentionStatistic::kBandEntropy:
      return "nats, of the attention renormalised within the band (NaN: no row reaches the band)";
    case AttentionStatistic::kRangeMass: return "fraction of attention in [range_start, range_start*range_ratio)";
    case AttentionStatistic::kRangeEntropy: return "nats, of the attention renormalised within the range";
  }
  throw std::logic_error("statistic_units: unknown statistic");
}

bool per_band(AttentionStatistic s) {
  return s == AttentionStatistic::kBandMass || s == AttentionStatistic::kBandEntropy;
}
bool per_range(AttentionStatistic s) {
  return s == AttentionStatistic::kRangeMass || s == AttentionStatistic::kRangeEntropy;
}

void put_attention_axes(DatasetGroup& g, const AttentionAxes& axes) {
  g.integers["band_edges"] = axes.band_edges;
  g.integer_units["band_edges"] = "key distance t = i - j (tokens); the last band ends at the context";
  g.integers["range_start"] = axes.range_start;
  g.integer_units["range_start"] = "key distance t (tokens)";
  g.integers["range_ratio"] = axes.range_ratio;
  g.integer_units["range_ratio"] = "Delta: the range is [t, t*Delta)";
  g.integers["recent_keys"] = {axes.recent_keys};
  g.integer_units["recent_keys"] = "tokens";
}

Array& attention_array(DatasetGroup& g, AttentionStatistic s, std::vector<int64_t> shape) {
  auto& a = g.arrays[statistic_name(s)];
  a.shape = std::move(shape);
  a.values.clear();
  a.units = statistic_units(s);
  return a;
}

}  // namespace results
