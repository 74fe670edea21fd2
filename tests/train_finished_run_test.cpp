// A finished run reopened from its directory gives back the model it trained: the validation loss
// recomputed from the reopened model equals the one the trainer logged. Unfinished or missing
// runs are input errors. Validation (evaluate): split batches change nothing; per-window losses
// and their standard error match a direct computation.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "harness/config/schema.h"
#include "harness/train/evaluate.h"
#include "harness/train/finished_run.h"
#include "harness/train/trainer.h"
#include "common/errors.h"
#include "results/run_file.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

harness::config::LoadedConfig tiny_config(const fs::path& cache) {
  const std::string yaml = std::string("data: {corpus: '") + HARNESS_TEST_DATA +
                           "/sotu', data_dir: '" + cache.string() + "'}\n" +
                           "model: {layers: 1, d_model: 32, heads: 2}\n"
                           "attention: {method: si+p-rope, tau: L/400, p_rope_base: L/4}\n"
                           "train: {context: 32, batch_size: 8, steps: 10, seed: 3}\n"
                           "eval: {contexts: [L, 2L], windows: 4}\n"
                           "run: {threads: 2, checkpoint_every: 5}\n";
  return harness::config::load_run_config_text(yaml, "tiny.yaml", "tiny");
}

harness::train::TrainOutcome train(const harness::config::LoadedConfig& c, const fs::path& dir,
                                   int64_t stop_after = 0) {
  harness::train::TrainOptions o;
  o.run_dir = dir.string();
  o.progress_bar = 0;
  o.stop_after_steps = stop_after;
  return harness::train::train(c, o);
}

}  // namespace

TEST(FinishedRun, ReopenedModelReproducesTheLoggedValidationLoss) {
  test_support::TempDir tmp;
  const auto config = tiny_config(tmp.path / "cache");
  const auto outcome = train(config, tmp.path / "run");
  ASSERT_EQ(outcome.state, results::RunState::kDone);

  auto run = harness::train::open_finished_run((tmp.path / "run").string());
  EXPECT_EQ(harness::config::config_hash(run.loaded.config), harness::config::config_hash(config.config));
  EXPECT_FALSE(run.model->is_training());
  for (const int64_t T : {32, 64}) {
    const auto windows = run.dataset->eval_windows(T, config.config.eval.windows, config.config.eval.seed);
    const auto r = harness::train::evaluate(run.model, windows, 4, 4, torch::kCPU);
    EXPECT_NEAR(r.loss, outcome.eval_loss.at(T), 1e-6) << "T = " << T;
  }
}

TEST(FinishedRun, UnfinishedAndMissingRunsAreInputErrors) {
  test_support::TempDir tmp;
  const auto config = tiny_config(tmp.path / "cache");
  ASSERT_EQ(train(config, tmp.path / "run", 5).state, results::RunState::kInterrupted);
  try {
    harness::train::open_finished_run((tmp.path / "run").string());
    FAIL() << "an interrupted run opened";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("interrupted at step 5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(harness::train::open_finished_run((tmp.path / "nothing").string()), harness::InputError);
  fs::create_directories(tmp.path / "empty");
  EXPECT_THROW(harness::train::open_finished_run((tmp.path / "empty").string()), harness::InputError);
}

TEST(Evaluate, StatisticsQueriesHaveOneRule) {
  // A flag wins; else the run's eval.attention_queries; a run that recorded none (0) is measured
  // with the default.
  EXPECT_EQ(harness::train::statistics_queries(32, 8), 8);
  EXPECT_EQ(harness::train::statistics_queries(32), 32);
  EXPECT_EQ(harness::train::statistics_queries(0), harness::config::kDefaultAttentionQueries);
}

TEST(Evaluate, SplittingAContextsBatchChangesNothing) {
  test_support::TempDir tmp;
  const auto config = tiny_config(tmp.path / "cache");
  ASSERT_EQ(train(config, tmp.path / "run").state, results::RunState::kDone);
  auto run = harness::train::open_finished_run((tmp.path / "run").string());
  const int64_t T = 64;
  const auto windows = run.dataset->eval_windows(T, 6, 7);
  // eval.max_batch_tokens = 2T: batches of 2 windows (3 forwards) instead of one forward of 6.
  EXPECT_EQ(harness::train::eval_batch_windows(6, 2 * T, T), 2);
  EXPECT_EQ(harness::train::eval_batch_windows(6, T - 1, T), 1);  // at least one window
  EXPECT_EQ(harness::train::eval_batch_windows(6, 0, T), 6);      // no limit
  EXPECT_EQ(harness::train::eval_batch_windows(4, 1 << 20, T), 4);
  const auto whole = harness::train::evaluate(run.model, windows, 6, 4, torch::kCPU, 8);
  const auto split = harness::train::evaluate(run.model, windows, harness::train::eval_batch_windows(6, 2 * T, T),
                                              4, torch::kCPU, 8);
  // Equal to float32 rounding: another batch size reorders the float32 GEMMs' sums (~1e-7).
  EXPECT_NEAR(split.loss, whole.loss, 1e-6);
  for (size_t b = 0; b < whole.position_loss.size(); ++b) EXPECT_NEAR(split.position_loss[b], whole.position_loss[b], 1e-6);
  // The raw scores' std is pooled over every sampled score, so the split leaves it too.
  ASSERT_EQ(split.score_std.size(), 1u);
  EXPECT_NEAR(split.score_std[0], whole.score_std[0], 1e-6 * whole.score_std[0]);
  EXPECT_GT(whole.score_std[0], 0.0);
  const auto& entropy = whole.attention.arrays.at("entropy");
  const auto& entropy_split = split.attention.arrays.at("entropy");
  ASSERT_EQ(entropy.values.size(), entropy_split.values.size());
  for (size_t i = 0; i < entropy.values.size(); ++i) EXPECT_NEAR(entropy_split.values[i], entropy.values[i], 1e-6);
}

// eval.tokens sizes validation in tokens (ceil(tokens / T) windows at T); each window's loss and
// the standard error over windows, in the run file and from evaluate, match a direct computation:
// one forward per window, the mean of its per-position losses, and sd / √N by hand.
TEST(Evaluate, WindowLossesAndTheirStandardErrorMatchADirectComputation) {
  test_support::TempDir tmp;
  auto config = tiny_config(tmp.path / "cache");
  harness::config::apply_override(config, "eval.tokens", YAML::Node(100), {"test", 0, 0});
  harness::config::resolve_and_validate(config);
  EXPECT_EQ(config.config.eval_windows_at(32), 4);  // ceil(100 / 32)
  EXPECT_EQ(config.config.eval_windows_at(64), 2);
  EXPECT_EQ(config.config.eval_windows_at(200), 1);
  // Set, eval.tokens is in the run id and eval.windows is not; unset, the id is the old one.
  EXPECT_NE(harness::config::canonical_text(config.config, true).find("eval.tokens: 100"), std::string::npos);
  EXPECT_EQ(harness::config::canonical_text(config.config, true).find("eval.windows"), std::string::npos);
  const auto plain = tiny_config(tmp.path / "cache");
  EXPECT_EQ(harness::config::canonical_text(plain.config, true).find("eval.tokens"), std::string::npos);
  EXPECT_NE(harness::config::canonical_text(plain.config, true).find("eval.windows: 4"), std::string::npos);

  ASSERT_EQ(train(config, tmp.path / "run").state, results::RunState::kDone);
  const auto record = results::read_run_file((tmp.path / "run" / "run.h5").string());
  auto run = harness::train::open_finished_run((tmp.path / "run").string());
  for (const int64_t T : {32, 64}) {
    const auto& rows = record.eval.at(T);
    ASSERT_EQ(rows.windows.size(), rows.loss.size());
    ASSERT_EQ(rows.loss_se.size(), rows.loss.size());
    EXPECT_EQ(rows.windows.back(), config.config.eval_windows_at(T)) << "T = " << T;
    const auto windows = run.dataset->eval_windows(T, config.config.eval_windows_at(T), config.config.eval.seed);
    const int64_t N = windows.tokens.size(0);
    ASSERT_EQ(N, config.config.eval_windows_at(T));
    const auto r = harness::train::evaluate(run.model, windows, 3, 4, torch::kCPU);
    ASSERT_EQ(int64_t(r.window_loss.size()), N);
    std::vector<double> direct;
    torch::NoGradGuard no_grad;
    for (int64_t w = 0; w < N; ++w) {
      const auto row = windows.tokens.slice(0, w, w + 1);
      direct.push_back(run.model->position_losses(row.slice(1, 0, T), row.slice(1, 1, T + 1)).to(torch::kDouble).mean().item<double>());
      EXPECT_NEAR(r.window_loss[size_t(w)], direct.back(), 1e-6) << "T = " << T << ", window " << w;
    }
    double mean = 0, ss = 0;
    for (const double x : direct) mean += x / double(N);
    for (const double x : direct) ss += (x - mean) * (x - mean);
    EXPECT_NEAR(r.loss, mean, 1e-6);
    EXPECT_NEAR(r.loss_se, std::sqrt(ss / double(N - 1) / double(N)), 1e-6);
    EXPECT_GT(r.loss_se, 0.0);
    // What the trainer stored at its last validation is the same model's.
    EXPECT_NEAR(rows.loss.back(), r.loss, 1e-6);
    EXPECT_NEAR(rows.loss_se.back(), r.loss_se, 1e-6);
    ASSERT_EQ(int64_t(rows.window_loss.size()), N);
    for (int64_t w = 0; w < N; ++w) EXPECT_NEAR(rows.window_loss[size_t(w)], direct[size_t(w)], 1e-6);
    EXPECT_EQ(rows.window_fingerprint, harness::data::window_fingerprint(windows));
  }
}
