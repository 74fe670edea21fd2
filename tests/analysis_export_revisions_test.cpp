// `harness export revisions` (analysis/export/revisions.h): the revisions and training time of
// synthetic runs whose run.h5 records them, counted by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "analysis/export/revisions.h"
#include "analysis/run_set.h"
#include "harness/config/schema.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

void write_run(const fs::path& dir, int seed, const std::string& revision, std::vector<double> seconds) {
  const auto c = harness::config::load_run_config_text("train: {context: 64, seed: " + std::to_string(seed) + "}\n",
                                                       "x.yaml");
  results::RunRecord r;
  r.config["canonical"] = harness::config::canonical_text(c.config, false);
  r.config["hash"] = harness::config::config_hash(c.config);
  if (!revision.empty()) r.config["git_revision"] = revision;
  r.state = results::RunState::kDone;
  for (size_t k = 0; k < seconds.size(); ++k) {
    r.train.step.push_back(int64_t(k + 1));
    r.train.tokens.push_back(int64_t(64 * (k + 1)));
    r.train.loss.push_back(2.0);
    r.train.lr.push_back(1e-3);
    r.train.grad_norm.push_back(1.0);
    r.train.seconds.push_back(seconds[k]);
  }
  results::publish(r, (dir / "run.h5").string());
}

TEST(ExportRevisions, CountsShortRevisionsAndSumsTheLastTrainingSeconds) {
  test_support::TempDir tmp;
  write_run(tmp.path / "a", 0, "0253b75c6d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a", {10, 70});
  write_run(tmp.path / "b", 1, "0253b75c6d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a", {5, 50});
  write_run(tmp.path / "c", 2, "81522d8aaaabbbbccccddddeeeeffff000011112-dirty", {20, 120});
  write_run(tmp.path / "d", 3, "", {1, 2, 3});
  const auto set = analysis::load_run_set(tmp.path.string());
  ASSERT_EQ(set.runs.size(), 4u);
  EXPECT_EQ(analysis::trained_revisions({set}), "0253b75 (2 runs), 81522d8-dirty (1 run), unknown (1 run)");
  EXPECT_DOUBLE_EQ(analysis::training_seconds({set}), 70 + 50 + 120 + 3);
  EXPECT_EQ(analysis::trained_revisions({set, set}), "0253b75 (4 runs), 81522d8-dirty (2 runs), unknown (2 runs)");
  EXPECT_EQ(analysis::trained_revisions({}), "none");
}

}  // namespace
