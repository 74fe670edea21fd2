// Learning-rate schedules against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "models/schedule.h"

using models::lr_factor;
using models::ScheduleOptions;

TEST(ScheduleConstantCooldown, ValuesByHand) {
  ScheduleOptions o;  // constant-cooldown, cooldown 0.4, min 0, no warmup
  EXPECT_DOUBLE_EQ(lr_factor(o, 0, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 59, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 60, 100), 1.0);    // w = 0.4/0.4
  EXPECT_DOUBLE_EQ(lr_factor(o, 80, 100), 0.5);    // w = 0.2/0.4
  EXPECT_DOUBLE_EQ(lr_factor(o, 90, 100), 0.25);
  EXPECT_NEAR(lr_factor(o, 99, 100), 0.025, 1e-12);
  EXPECT_DOUBLE_EQ(lr_factor(o, 100, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 150, 100), 0.0);   // clamped past the end
  o.min_factor = 0.1;
  EXPECT_NEAR(lr_factor(o, 80, 100), 0.5 + 0.5 * 0.1, 1e-12);
  EXPECT_NEAR(lr_factor(o, 100, 100), 0.1, 1e-12);
  o.cooldown_fraction = 0.0;
  EXPECT_DOUBLE_EQ(lr_factor(o, 99, 100), 1.0);
  o.cooldown_fraction = 1.0;
  o.min_factor = 0.0;
  EXPECT_DOUBLE_EQ(lr_factor(o, 25, 100), 0.75);
}

TEST(ScheduleWarmup, LinearFromZero) {
  ScheduleOptions o;
  o.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(lr_factor(o, 0, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 5, 100), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(o, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 80, 100), 0.5);
  o.kind = "constant";
  o.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(lr_factor(o, 1, 100), 0.25);
  EXPECT_DOUBLE_EQ(lr_factor(o, 99, 100), 1.0);
  // Warmup overlapping the cooldown (tiny run): the smaller of the two.
  o.kind = "constant-cooldown";
  o.warmup_steps = 8;
  EXPECT_DOUBLE_EQ(lr_factor(o, 7, 10), std::min(7.0 / 8.0, 0.3 / 0.4));
}

TEST(ScheduleCosine, ValuesByHand) {
  ScheduleOptions o;
  o.kind = "cosine";
  o.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(lr_factor(o, 5, 110), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(o, 10, 110), 1.0);
  EXPECT_NEAR(lr_factor(o, 60, 110), 0.5, 1e-12);
  EXPECT_NEAR(lr_factor(o, 35, 110), 0.5 * (1 + std::cos(M_PI / 4)), 1e-12);
  EXPECT_NEAR(lr_factor(o, 110, 110), 0.0, 1e-12);
  o.min_factor = 0.2;
  EXPECT_NEAR(lr_factor(o, 60, 110), 0.6, 1e-12);
  o.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(lr_factor(o, 0, 50), 1.0);
}

TEST(ScheduleOptionsCheck, BadValuesThrow) {
  ScheduleOptions o;
  o.kind = "linear";
  try {
    lr_factor(o, 0, 10);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const auto& n : models::schedule_names()) EXPECT_NE(what.find(n), std::string::npos) << what;
    EXPECT_NE(what.find("linear"), std::string::npos);
  }
  EXPECT_EQ(models::schedule_names(),
            (std::vector<std::string>{"constant-cooldown", "cosine", "constant"}));
  o = {};
  o.cooldown_fraction = 1.5;
  EXPECT_THROW(models::validate(o), std::invalid_argument);
  o = {};
  o.min_factor = -0.1;
  EXPECT_THROW(models::validate(o), std::invalid_argument);
  o = {};
  o.warmup_steps = -1;
  EXPECT_THROW(models::validate(o), std::invalid_argument);
  EXPECT_THROW(lr_factor({}, 0, 0), std::invalid_argument);
  EXPECT_THROW(lr_factor({}, -1, 10), std::invalid_argument);
}
