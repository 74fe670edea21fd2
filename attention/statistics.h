// Attention statistics of query rows: the quantities arXiv 2505.17083 argues with (Figs 1, 2, 5,
// 6, Appendix J), for trained models (per layer and head, from the logits every kernel computes)
// and for the theory's IID Gaussian logits alike:
//
//  * global attention entropy, −Σ p log p (nats);
//  * distance bands [0,1), [1,10), [10,100), …, [10^k, T): the attention mass in each, and the
//    entropy of the attention renormalised within it;
//  * the mass on the most recent 100 keys (distances [0, 100));
//  * ranges [t, t·Δ) on a log grid of t: mass and renormalised entropy (the Fig. 2 quantity);
//  * for trained models, the raw scores s = scale·q·k before the transform: moments and quantiles
//    against a standard normal (Appendix J: the theory assumes them Gaussian with unit variance).
//
// Everything is float64 and works one query row at a time from its logits by distance: a row of
// T keys costs O(T) memory, never T×T. Within a band or range the statistics use that segment's
// own log-normaliser, so a segment whose mass underflows (ALiBi far away) still has an entropy.
#pragma once

#include "attention/score_mod.h"

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace attention {

// Where the statistics look at context T.
struct StatsLayout {
  int64_t context = 0;               // T
  std::vector<int64_t> band_edges;   // 0, 1, 10, …, 10^k, T: band b = [edges[b], edges[b+1])
  int64_t recent = 100;              // the recent mass covers distances [0, recent)
  std::vector<int64_t> range_start;  // range r = [start[r], start[r]·ratio[r])
  std::vector<int64_t> range_ratio;
  size_t bands() const { return band_edges.size() - 1; }
  size_t ranges() const { return range_start.size(); }
};

// Range starts: round(10^(j/per_decade)) for j = 0, 1, …, deduplicated, up to `limit`.
std::vector<int64_t> log_grid(int64_t limit, int per_decade = 4);

// Bands up to `context`; for each Δ in `ratios`, the ranges [t, tΔ) with tΔ ≤ min_keys, so every
// query that sees at least `min_keys` keys sees each range whole.
StatsLayout stats_layout(int64_t context, int64_t min_keys,
                         const std::vector<int64_t>& ratios = {2, 10});

// Sums over query rows (of one head, or of one Monte Carlo trial): divide by the row counts.
struct StatsSums {
  int64_t rows = 0;
  double entropy = 0, recent_mass = 0;
  std::vector<double> band_mass, band_entropy;    // (bands); entropy summed over band_rows only
  std::vector<int64_t> band_rows;                 // rows that saw at least one key of the band
  std::vector<double> range_mass, range_entropy;  // (ranges); summed over range_rows only
  std::vector<int64_t> range_rows;                // rows that saw the whole range

  explicit StatsSums(const StatsLayout& layout = {});
  void add(const StatsSums& other);
};

// Adds one query row: `logit_by_distance[t]` is its logit for the key at distance t, t = 0..n−1
// (n ≥ 1 visible keys; finite values).
void add_row(const double* logit_by_distance, int64_t n, const StatsLayout& layout,
             StatsSums& sums);

// Pooled moments and a quantile sample of raw scores (one layer's, all heads).
struct ScoreSample {
  int64_t count = 0;
  double mean = 0, m2 = 0, m3 = 0, m4 = 0;  // central moment sums (Pébay's pairwise update)
  std::vector<double> sample;               // a deterministic subsample, for quantiles

  void add(const double* values, int64_t n, int64_t keep);  // keep ≤ `keep` evenly spaced values
  void merge(const ScoreSample& other);
  double variance() const;                  // population variance
  double skewness() const;
  double excess_kurtosis() const;
  // Quantiles of the sample standardised by the pooled mean and std, at `probabilities` (for a
  // QQ plot against normal_quantile of the same probabilities).
  std::vector<double> standardised_quantiles(const std::vector<double>& probabilities) const;
};

// Φ⁻¹(p), the standard normal quantile, for p in (0, 1) (Acklam's approximation refined by one
// Halley step: ~1e-15 relative).
double normal_quantile(double p);

// Statistics of the last `queries` rows of every (batch, head), accumulated over forward passes
// at one context T (what a validation or `harness analyse` feeds through the model).
class AttentionStatsRecorder {
 public:
  AttentionStatsRecorder(int64_t queries, bool raw_scores);

  // q, k: (B, H, T, D), already rotated (what the kernel sees); mod: the score-mod at T;
  // head_scale: (H) learned multiplier or undefined; alibi_slopes: (H) or undefined; raw_scale:
  // the scale of the raw scores s = raw_scale·q·k (the method's score_scale, without YaRN's
  // temperature, as CausalAttention's score_std). Throws std::invalid_argument when T differs from
  // the first call's.
  void add(const torch::Tensor& q, const torch::Tensor& k, const ScoreMod& mod,
           const torch::Tensor& head_scale, const torch::Tensor& alibi_slopes, double raw_scale);

  // Data-parallel evaluation sums these over the ranks: every StatsSums field of every head as
  // one vector (counts as exact doubles), zeros of the layout at context T with H heads when this
  // recorder saw no rows; set_flat_sums writes such a vector back.
  std::vector<double> flat_sums(int64_t T, int64_t H);
  void set_flat_sums(const std::vector<double>& flat);

  bool empty() const { return heads_.empty(); }
  const StatsLayout& layout() const { return layout_; }
  const std::vector<StatsSums>& heads() const { return heads_; }  // (H)
  const ScoreSample& scores() const { return scores_; }
  int64_t queries() const { return queries_; }

 private:
  void begin(int64_t T, int64_t H);  // the layout and zero sums of the first call

  int64_t queries_;
  bool raw_scores_;
  StatsLayout layout_;
  std::vector<StatsSums> heads_;
  ScoreSample scores_;
};

// What one forward pass measures of one layer's attention, asked for by its caller and passed
// down as an argument (CausalAttention::forward): nothing is left on the module.
struct AttentionProbe {
  bool score_std = false;                   // measure the std of the raw scores s = scale·q·k
  double score_std_value = 0.0;             // out: that std (see CausalAttention::forward)
  // out, summed over every pass this probe saw: the count, sum and sum of squares of the sampled
  // raw scores, so that a caller pools the std over many batches (of any size) exactly.
  double score_count = 0.0, score_sum = 0.0, score_sum_sq = 0.0;
  double pooled_score_std() const;          // from the sums above; 0 with fewer than 2 scores
  AttentionStatsRecorder* stats = nullptr;  // add this pass's statistics (entropy, bands, ranges)
};

}  // namespace attention
