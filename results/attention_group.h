// The attention statistics group: one place for its dataset names, units and axes, so that the
// two writers of it (training: /eval/<T>/attention, (layers, heads, ...) per evaluation; the
// entropy theory: /<transform>, (contexts, ...)) and every reader agree. They differ in leading
// axes only. Layout: docs/results-format.md; definitions: docs/attention.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "results/dataset_group.h"

namespace results {

enum class AttentionStatistic {
  kEntropy,       // nats, of the attention row
  kRecentMass,    // fraction of attention on distances [0, recent_keys)
  kBandMass,      // fraction of attention in band [band_edges[b], band_edges[b+1])
  kBandEntropy,   // nats, of the attention renormalised within the band
  kRangeMass,     // fraction of attention in [range_start, range_start*range_ratio)
  kRangeEntropy,  // nats, of the attention renormalised within the range
};
inline constexpr AttentionStatistic kAttentionStatistics[] = {
    AttentionStatistic::kEntropy,   AttentionStatistic::kRecentMass, AttentionStatistic::kBandMass,
    AttentionStatistic::kBandEntropy, AttentionStatistic::kRangeMass, AttentionStatistic::kRangeEntropy};

// The dataset's name in the group ("entropy", "band_mass", ...).
const char* statistic_name(AttentionStatistic s);
// Its `units` attribute.
const char* statistic_units(AttentionStatistic s);
// Whether it has a trailing bands (or ranges) axis.
bool per_band(AttentionStatistic s);
bool per_range(AttentionStatistic s);

// The distance axes the statistics are taken over (attention/statistics.h StatsLayout).
struct AttentionAxes {
  std::vector<int64_t> band_edges;   // bands + 1; the last band ends at the context
  std::vector<int64_t> range_start;  // ranges
  std::vector<int64_t> range_ratio;  // ranges: the range is [t, t*Delta)
  int64_t recent_keys = 0;
};
void put_attention_axes(DatasetGroup& g, const AttentionAxes& axes);

// The statistic's array in `g` with `shape` and its units, values empty (to be filled row-major).
Array& attention_array(DatasetGroup& g, AttentionStatistic s, std::vector<int64_t> shape);

}  // namespace results
