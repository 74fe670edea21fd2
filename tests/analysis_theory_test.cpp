// The entropy theory (analysis/theory_entropy.h) against closed forms: standard attention over N
// IID N(0,1) logits has entropy ln N − ½ at large N; scale-invariant attention's total
// unnormalised attention in [t, tΔ) has expectation α·τ·Σ 1/(k+τ) exactly (Lemma 1).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "analysis/theory_entropy.h"
#include "results/hdf5_io.h"
#include "test_support.h"

namespace {

const results::Array& array_of(const analysis::TheoryTransform& t, const std::string& name) {
  return t.datasets.arrays.at(name);
}

analysis::EntropyTheoryOptions small() {
  analysis::EntropyTheoryOptions o;
  o.contexts = {100, 1000, 10000};
  o.trials = 64;
  o.taus = {10};
  o.range_keys = 10000;
  return o;
}

}  // namespace

TEST(TheoryEntropy, StandardAttentionEntropyIsLogNMinusHalf) {
  const auto theory = analysis::entropy_theory(small());
  ASSERT_EQ(theory.size(), 3u);  // standard, logn, one τ
  const auto& standard = theory[0];
  ASSERT_EQ(standard.name, "standard");
  const auto& n = standard.datasets.integers.at("context");
  for (size_t c = 0; c < n.size(); ++c) {
    const double mean = array_of(standard, "entropy").values[c], se = array_of(standard, "entropy_se").values[c];
    EXPECT_GT(se, 0);
    // Finite-N bias is O(1/N); MC error 4 standard errors.
    EXPECT_NEAR(mean, std::log(double(n[c])) - 0.5, 4 * se + 2.0 / double(n[c])) << "N = " << n[c];
  }
  // Band masses of one N add up to 1; the recent mass of N = 100 is all of it.
  const auto& band_mass = array_of(standard, "band_mass");
  const size_t nb = size_t(band_mass.shape[1]);
  for (size_t c = 0; c < n.size(); ++c) {
    double total = 0;
    for (size_t b = 0; b < nb; ++b)
      if (!std::isnan(band_mass.values[c * nb + b])) total += band_mass.values[c * nb + b];
    EXPECT_NEAR(total, 1.0, 1e-12);
  }
  EXPECT_NEAR(array_of(standard, "recent_mass").values[0], 1.0, 1e-12);
}

TEST(TheoryEntropy, ScaleInvariantTotalAttentionFollowsLemmaOne) {
  auto o = small();
  o.contexts = {100};
  o.trials = 4096;  // a log-normal sum: many trials for a tight check
  o.range_keys = 1000;
  const auto theory = analysis::entropy_theory(o);
  const auto& si = theory[2];
  ASSERT_EQ(si.name, "scale-invariant-tau10");
  const auto& total = array_of(si, "range_total");
  const auto& lemma = array_of(si, "lemma1_sum");
  const auto& se = array_of(si, "lemma1_se");  // exact: the sample's own understates a log-normal sum's
  ASSERT_GT(total.values.size(), 5u);
  for (size_t r = 0; r < total.values.size(); ++r) {
    EXPECT_NEAR(total.values[r], lemma.values[r], 4 * se.values[r]) << "range " << r;
    EXPECT_LT(se.values[r], 0.1 * lemma.values[r]) << "range " << r;  // a tight check
  }
  // The limit α·τ·ln Δ is approached from above as t grows (Σ 1/(k+τ) > ln Δ for t ≫ τ? below).
  const auto& ratio = si.datasets.integers.at("range_ratio");
  const auto& limit = array_of(si, "lemma1_limit");
  for (size_t r = 0; r < ratio.size(); ++r)
    EXPECT_NEAR(limit.values[r], std::exp(0.5) * 10 * std::log(double(ratio[r])), 1e-12);
  // Fits exist for every Δ with R² in [0, 1].
  const auto& fit = array_of(si, "fit_ln_t");
  EXPECT_EQ(fit.shape, (std::vector<int64_t>{3, 3}));
  for (size_t k = 0; k < 3; ++k) EXPECT_LE(fit.values[k * 3 + 2], 1.0);
}

TEST(TheoryEntropy, LineFitRecoversAnExactLine) {
  const auto f = analysis::fit_line({0, 1, 2, 3}, {1, 3, 5, 7});
  EXPECT_NEAR(f.slope, 2, 1e-12);
  EXPECT_NEAR(f.intercept, 1, 1e-12);
  EXPECT_NEAR(f.r2, 1, 1e-12);
}

TEST(TheoryEntropy, FileHasTheTrainedModelsDatasetNames) {
  test_support::TempDir tmp;
  auto o = small();
  o.contexts = {100};
  o.trials = 4;
  o.range_keys = 200;
  const auto path = (tmp.path / "theory.h5").string();
  analysis::write_entropy_theory(path, o, analysis::entropy_theory(o));
  auto file = results::h5::open_file(path);
  EXPECT_EQ(results::h5::read_string_attr(file, "kind"), "theory-entropy");
  const auto group = results::read_group(file, "logn");
  for (const char* name : {"entropy", "recent_mass", "band_mass", "band_entropy", "range_mass", "range_entropy"})
    EXPECT_TRUE(group.arrays.count(name)) << name;
  for (const char* name : {"band_edges", "range_start", "range_ratio", "recent_keys", "context"})
    EXPECT_TRUE(group.integers.count(name)) << name;
}
