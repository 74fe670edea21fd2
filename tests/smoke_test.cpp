#include <gtest/gtest.h>

#include "attention/score_mod.h"

#include <cmath>

TEST(ScoreMod, ScaleInvariantIdentityAtZeroDistance) {
  attention::ScoreMod m;
  m.distance = attention::DistanceMod::kScaleInvariant;
  m.inv_tau = 0.1f;
  EXPECT_DOUBLE_EQ(attention::distance_factor<double>(m, 0), 1.0);
  EXPECT_DOUBLE_EQ(attention::distance_bias<double>(m, 0, 0), 0.0);
  EXPECT_NEAR(attention::distance_bias<double>(m, 10, 0), -2.0 * std::log(2.0), 1e-6);
}
