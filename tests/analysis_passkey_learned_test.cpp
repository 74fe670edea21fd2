// analysis/stats/passkey_learned.h: the share of passkey fine-tunes that learned to copy, Fisher's
// exact test between arms (p-values hand-worked in tests/analysis_stats_test.cpp's Fisher test:
// [[8, 0], [2, 6]] → 56/8008, [[8, 0], [1, 7]] → 16/11440) with Holm over the pairs, and retrieval
// over the seeds that learned only.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/export/figure_writer.h"
#include "analysis/run_set.h"
#include "analysis/stats/exact_tests.h"
#include "analysis/stats/passkey_learned.h"
#include "test_support.h"

namespace {

analysis::PasskeyRun passkey_run(const std::string& arm, int64_t seed, double at_half_l, double at_4l = 0.3) {
  analysis::PasskeyRun r;
  r.arm = arm;
  r.seed = seed;
  r.train_context = 256;
  r.accuracy = {{128, at_half_l}, {1024, at_4l}};
  return r;
}

}  // namespace

TEST(PasskeyLearned, ShareLearnedWithFisherAndHolm) {
  EXPECT_TRUE(analysis::learned_to_copy(passkey_run("m", 0, 0.5)));
  EXPECT_FALSE(analysis::learned_to_copy(passkey_run("m", 0, 0.49, 1.0)));  // the shortest distance decides
  EXPECT_FALSE(analysis::learned_to_copy(analysis::PasskeyRun{}));
  std::vector<analysis::PasskeyRun> runs;
  for (int s = 0; s < 8; ++s) {
    runs.push_back(passkey_run("all", s, 1.0, 0.8 + 0.01 * s));
    runs.push_back(passkey_run("two", s, s < 2 ? 0.97 : 0.0, s < 2 ? 0.5 : 0.0));
    runs.push_back(passkey_run("one", s, s < 1 ? 0.94 : 0.02));
  }
  const auto res = analysis::passkey_learned(runs);
  ASSERT_EQ(res.arms.size(), 3u);
  EXPECT_EQ(res.arms[0].learned, 8);
  EXPECT_EQ(res.arms[1].learned, 2);
  EXPECT_EQ(res.arms[2].learned, 1);
  ASSERT_EQ(res.pairs.size(), 3u);
  // all vs two: [[8, 0], [2, 6]], 56/8008; all vs one: [[8, 0], [1, 7]], 16/11440; two vs one: 1.
  EXPECT_NEAR(res.pairs[0].p, 56.0 / 8008, 1e-14);
  EXPECT_NEAR(res.pairs[1].p, 16.0 / 11440, 1e-14);
  EXPECT_NEAR(res.pairs[2].p, 1.0, 1e-12);  // every table of the margins
  // Holm over 3: 0.0014 ≤ 0.05/3, 0.0070 ≤ 0.05/2, 1 > 0.05.
  EXPECT_TRUE(res.pairs[1].resolved);
  EXPECT_TRUE(res.pairs[0].resolved);
  EXPECT_FALSE(res.pairs[2].resolved);
  EXPECT_DOUBLE_EQ(res.pairs[0].threshold, 0.025);
  EXPECT_NEAR(res.arms[1].share_ci.hi, analysis::stats::clopper_pearson(2, 8, 0.95).hi, 0);
  const std::string md = analysis::format_passkey_learned_markdown(res, runs);
  EXPECT_NE(md.find("| two | 8 | 2 | 0.25 ["), std::string::npos) << md;
  EXPECT_NE(md.find("| all vs two | 8/8 vs 2/8 | 0.00699 | 0.025 | yes |"), std::string::npos) << md;
  // Retrieval over the learned seeds only: "two" at 4L is the mean of its 2 learned seeds (0.5), not of 8.
  EXPECT_NE(md.find("| two (2 of 8 learned) | 0.9700 (2) | 0.5000 (2) |"), std::string::npos) << md;
  EXPECT_THROW(analysis::passkey_learned(runs, 0.0), std::invalid_argument);
}


namespace {

analysis::RunEntry fine_tune(const std::string& method, int seed, double at_half_l, double at_4l) {
  analysis::RunEntry e;
  e.dir = "runs/p/" + method + std::to_string(seed);
  e.state = "done";
  e.values = {{"attention.method", method}, {"task", "needle"}, {"init_from", "runs/p"},
              {"train.seed", std::to_string(seed)}};
  e.train_context = 256;
  e.config.task = "needle";
  results::RunRecord record;
  for (const auto& [d, acc] : std::vector<std::pair<int64_t, double>>{{128, at_half_l}, {1024, at_4l}}) {
    auto& g = record.needle[d];
    g.attributes["kind"] = std::string("passkey");
    g.arrays["accuracy"].shape = {1};
    g.arrays["accuracy"].values = {acc};
  }
  e.record = record;
  return e;
}

}  // namespace

// `export curves` on a sweep of pretraining and fine-tune runs: the pretraining runs (task: lm) are
// not arms, the arms are the methods, and the figure and CSVs hold the learned seeds only.
TEST(PasskeyLearned, ExportCurvesWritesTheTablesAndTheFigureOfLearnedSeeds) {
  analysis::RunSet set;
  set.name = "p";
  set.keys = {"attention.method", "task", "init_from", "train.seed"};
  for (int s = 0; s < 3; ++s) {
    analysis::RunEntry lm;
    lm.state = "done";
    lm.values = {{"attention.method", "rope"}, {"task", "–"}, {"init_from", "–"}, {"train.seed", std::to_string(s)}};
    lm.config.task = "lm";
    lm.record = results::RunRecord{};
    set.runs.push_back(lm);
    set.runs.push_back(fine_tune("rope", s, 1.0, 0.1 * s));
    set.runs.push_back(fine_tune("si+p-rope", s, s == 0 ? 0.95 : 0.0, s == 0 ? 0.9 : 0.0));
  }
  std::vector<const analysis::RunEntry*> runs;
  for (const auto& r : set.runs) runs.push_back(&r);
  test_support::TempDir tmp;
  analysis::CurvesResult out;
  analysis::Writer w{tmp.path.string(), out, {}};
  analysis::passkey_learned_figures(set, runs, w);
  ASSERT_EQ(out.tables.size(), 1u);
  EXPECT_NE(out.tables[0].find("| rope | 3 | 3 | 1.00 ["), std::string::npos) << out.tables[0];
  EXPECT_NE(out.tables[0].find("| si+p-rope | 3 | 1 | 0.33 ["), std::string::npos) << out.tables[0];
  EXPECT_NE(out.tables[0].find("Holm over the 1 pair at"), std::string::npos) << out.tables[0];
  const std::string arms = test_support::read_text(tmp.path / "passkey_learned.csv");
  EXPECT_EQ(arms.rfind("arm,seeds,learned,share,share_lo95,share_hi95\n", 0), 0u) << arms;
  const std::string pairs = test_support::read_text(tmp.path / "passkey_learned_pairs.csv");
  // [[3, 0], [1, 2]]: over C(6,4) = 15 the tables a = 1, 2, 3 weigh 3, 9, 3; the observed a = 3 and
  // the as likely a = 1: p = 6/15 = 0.4.
  EXPECT_NE(pairs.find("rope,si+p-rope,3,3,1,3,0.4,"), std::string::npos) << pairs;
  const std::string curve = test_support::read_text(tmp.path / "passkey_learned_vs_distance.csv");
  EXPECT_NE(curve.find("si+p-rope (1 of 3 learned)"), std::string::npos) << curve;
  EXPECT_NE(curve.find("\n4,0.1,"), std::string::npos) << curve;  // rope at 4L: mean of 0, 0.1, 0.2
  ASSERT_FALSE(out.figures.empty());
  EXPECT_EQ(out.figures.back().name, "passkey_learned_vs_distance");
}
