// Small exact and normal-theory procedures the exports report beside their intervals: the sign
// test over seed pairs, the χ² interval of a standard deviation, the F interval of a ratio of two,
// Fisher's exact test on a 2×2 table and the Clopper–Pearson interval of a share. Each is the
// textbook procedure, checked in tests/analysis_stats_test.cpp against hand-computed values and
// scipy's quantiles.
#pragma once

#include <cstdint>

namespace analysis::stats {

struct Interval {
  double lo = 0, hi = 0;
};

// Exact two-sided sign test: under H0 each of the n = positive + negative non-zero differences is
// positive with probability 1/2; p = min(1, 2 · P(Bin(n, 1/2) ≤ min(positive, negative))). Ties
// (zero differences) are dropped before the call, and counted by the caller. n = 0: p = 1.
double sign_test_p(int positive, int negative);

// The sample standard deviation of `n` values (n − 1 in the denominator); NaN for n < 2.
double sample_sd(const double* x, int n);

// The interval of σ at `level` from a sample sd `s` of n normal values (χ² on n − 1 df):
//   [s √((n−1) / χ²_{(1+level)/2}), s √((n−1) / χ²_{(1−level)/2})].
// NaN ends for n < 2 or a non-finite s.
Interval sd_interval(double s, int n, double level);

// The interval of σ_a / σ_b at `level` from sample sds of n_a and n_b normal values, the samples
// independent (F on n_a − 1, n_b − 1 df):
//   [(s_a/s_b) / √F_{(1+level)/2}, (s_a/s_b) / √F_{(1−level)/2}].
// NaN ends for n < 2 or s_b = 0.
Interval sd_ratio_interval(double s_a, int n_a, double s_b, int n_b, double level);

// Fisher's exact test, two-sided, on the table [[a, b], [c, d]] (rows: the two groups, columns:
// success, failure): with the margins fixed, the probability of every table whose hypergeometric
// probability is at most the observed one's (relative tolerance 1e-7, as R's fisher.test).
double fisher_exact_p(int64_t a, int64_t b, int64_t c, int64_t d);

// The hypergeometric probability of the table [[a, b], [c, d]] given its margins.
double hypergeometric_table_probability(int64_t a, int64_t b, int64_t c, int64_t d);

// Clopper–Pearson's exact interval of a binomial share at `level`: k successes of n (n ≥ 1).
Interval clopper_pearson(int64_t k, int64_t n, double level);

}  // namespace analysis::stats
