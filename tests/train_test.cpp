// End to end through the trainer on the offline fixture corpus: the loss falls, run.h5 holds the
// documented datasets, an interrupted + resumed run equals an uninterrupted one, and bad input
// exits 2 with nothing written.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "harness/config/schema.h"
#include "harness/train/run_directory.h"
#include "harness/train/trainer.h"
#include "common/errors.h"
#include "harness/train/checkpoint.h"
#include "test_support.h"
#include "train_support.h"
#include "results/run_file.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("harness-train-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  return dir;
}

harness::config::LoadedConfig tiny_config(int steps, const std::string& method = "si+p-rope") {
  const std::string yaml = std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" +
                           (fs::temp_directory_path() / "harness-train-cache").string() + "'}\n" +
                           "model: {layers: 1, d_model: 32, heads: 2}\n"
                           "attention: {method: " + method + ", tau: L/400, p_rope_base: L/4}\n"
                           "train: {context: 32, batch_size: 8, steps: " + std::to_string(steps) +
                           ", seed: 3}\n"
                           "eval: {contexts: [L, 4L], windows: 4, every: 10, position_buckets: 4}\n"
                           "run: {threads: 2, checkpoint_every: 5}\n";
  return harness::config::load_run_config_text(yaml, "tiny.yaml", "tiny");
}

using test_support::train_run;

}  // namespace

TEST(Train, LossFallsAndRunFileHasTheDocumentedLayout) {
  const auto dir = scratch("smoke");
  const auto outcome = train_run(tiny_config(20), dir);
  EXPECT_EQ(outcome.state, results::RunState::kDone);
  const auto r = results::read_run_file((dir / "run.h5").string());
  ASSERT_EQ(r.train.step.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(r.train.step[i], int64_t(i + 1));
  EXPECT_EQ(r.train.tokens.back(), 20 * 8 * 32);
  // Byte-level loss starts near ln(256) = 5.55 and must clearly fall within 20 steps.
  const double first = r.train.loss.front();
  const double last = std::accumulate(r.train.loss.end() - 5, r.train.loss.end(), 0.0) / 5;
  EXPECT_GT(first, 4.5);
  EXPECT_LT(last, first - 1.0) << "first " << first << " last " << last;
  ASSERT_EQ(r.eval.size(), 2u);
  for (int64_t T : {32, 128}) {
    const auto& e = r.eval.at(T);
    EXPECT_EQ(e.step, (std::vector<int64_t>{10, 20}));
    ASSERT_EQ(e.position_loss.size(), 2u);
    EXPECT_EQ(e.position_loss[0].size(), 4u);
    ASSERT_EQ(e.score_std.size(), 2u);
    EXPECT_EQ(e.score_std[0].size(), 1u);  // one layer
    EXPECT_GT(e.score_std[0][0], 0.0);
    // The overall loss is the mean of the equal-width buckets.
    const double mean = std::accumulate(e.position_loss[1].begin(), e.position_loss[1].end(), 0.0) / 4;
    EXPECT_NEAR(mean, e.loss[1], 1e-9);
  }
  EXPECT_EQ(r.config.at("hash"), harness::config::config_hash(tiny_config(20).config));
  EXPECT_NE(r.config.at("yaml").find("si+p-rope"), std::string::npos);
  EXPECT_NE(r.config.at("canonical").find("attention.tau: 0.08"), std::string::npos);  // 32/400
  const auto checkpoints = harness::train::RunCheckpoints(dir.string()).entries();
  ASSERT_EQ(checkpoints.size(), 2u);  // run.keep_checkpoints: the newest 2
  EXPECT_EQ(checkpoints.back().step, r.status_step);
  for (const auto& c : checkpoints) EXPECT_TRUE(fs::exists(dir / c.file));
  EXPECT_TRUE(fs::exists(dir / "train.log"));
}

TEST(Train, InterruptedAndResumedEqualsUninterrupted) {
  const auto c = tiny_config(12);
  const auto straight_dir = scratch("straight");
  train_run(c, straight_dir);
  const auto straight = results::read_run_file((straight_dir / "run.h5").string());

  const auto dir = scratch("resumed");
  const auto first = train_run(c, dir, false, /*stop_after=*/7);  // last checkpoint at step 5
  EXPECT_EQ(first.state, results::RunState::kInterrupted);
  EXPECT_EQ(first.step, 7);
  const auto second = train_run(c, dir, /*resume=*/true);
  EXPECT_EQ(second.state, results::RunState::kDone);
  const auto resumed = results::read_run_file((dir / "run.h5").string());

  ASSERT_EQ(resumed.train.step.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(resumed.train.step[i], int64_t(i + 1));  // strictly increasing, no duplicates
    EXPECT_EQ(resumed.train.loss[i], straight.train.loss[i]) << "step " << i + 1;  // bit for bit
  }
  for (const auto& [T, rows] : straight.eval) {
    ASSERT_EQ(resumed.eval.at(T).loss.size(), rows.loss.size());
    EXPECT_EQ(resumed.eval.at(T).loss.back(), rows.loss.back());
  }
  // Resuming a finished run does nothing.
  EXPECT_EQ(train_run(c, dir, true).state, results::RunState::kDone);
  EXPECT_EQ(results::read_run_file((dir / "run.h5").string()).train.step.size(), 12u);
}

TEST(Train, RunFilesOfTheFirstIdSchemeAreTheSameRun) {
  const auto c = tiny_config(2, "rope");
  results::RunRecord record;
  record.config["hash"] = harness::config::legacy_config_hash(c.config);
  // The canonical text as the first scheme wrote it: every key, no comments.
  std::string canonical = harness::config::canonical_text(c.config, false);
  for (size_t at; (at = canonical.find("  # not read by this run")) != std::string::npos;)
    canonical.erase(at, std::string("  # not read by this run").size());
  record.config["canonical"] = canonical;
  EXPECT_TRUE(harness::train::is_same_run(record, c.config));
  // τ is not read by rope: another τ is the same run; another seed is not.
  auto other_tau = c;
  other_tau.config.attention.parameters[attention::Parameter::kTau] = harness::config::ContextValue::absolute(3.0);
  EXPECT_TRUE(harness::train::is_same_run(record, other_tau.config));
  auto other_seed = c;
  other_seed.config.train.seed = 99;
  EXPECT_FALSE(harness::train::is_same_run(record, other_seed.config));
}

TEST(Train, NonFiniteLossStopsTheRunAsFailedWithStepAndReason) {
  // AdamW with lr 100 and weight decay 10 multiplies every weight by 1 − lr·wd = −999 per step:
  // within ~10 steps the activations overflow float32 and the loss is not finite.
  auto c = tiny_config(20);
  for (const auto& [key, value] : {std::pair{"optim.name", "adamw"}, {"optim.weight_decay", "10"},
                                   {"optim.lr_hidden", "100"}, {"optim.lr_embed", "100"},
                                   {"optim.lr_head", "100"}})
    harness::config::apply_override(c, key, YAML::Load(value), {"test", 0, 0});
  harness::config::resolve_and_validate(c);
  const auto dir = scratch("nan");
  const auto outcome = train_run(c, dir);
  EXPECT_EQ(outcome.state, results::RunState::kFailed);
  EXPECT_GE(outcome.step, 1);
  EXPECT_LT(outcome.step, 20);
  EXPECT_NE(outcome.reason.find("non-finite"), std::string::npos) << outcome.reason;
  EXPECT_NE(outcome.reason.find("step " + std::to_string(outcome.step + 1)), std::string::npos)
      << outcome.reason;
  const auto r = results::read_run_file((dir / "run.h5").string());
  EXPECT_EQ(r.state, results::RunState::kFailed);
  EXPECT_EQ(r.reason, outcome.reason);
  EXPECT_EQ(r.status_step, outcome.step);
  // The steps before the failure are kept; the failed step is not recorded as a finite row.
  EXPECT_EQ(r.train.step.size(), size_t(outcome.step));
  for (const double loss : r.train.loss) EXPECT_TRUE(std::isfinite(loss));
}

// The GPU path's bookkeeping, on the CPU (HARNESS_TEST_DEFER_READS=1): each step's loss and
// gradient norm stay queued as tensors and are read only at log, validation and checkpoint steps,
// yet run.h5 holds the same rows, bit for bit, as reading every step; an interrupted and resumed
// run still equals an uninterrupted one; a non-finite step found at a later read leaves the run at
// the step before it, as when read at once.
TEST(Train, StepsReadLaterGiveTheSameRecord) {
  struct DeferReads {
    DeferReads() { ::setenv("HARNESS_TEST_DEFER_READS", "1", 1); }
    ~DeferReads() { ::unsetenv("HARNESS_TEST_DEFER_READS"); }
  };
  auto c = tiny_config(12);
  harness::config::apply_override(c, "run.log_every", YAML::Load("4"), {"test", 0, 0});
  harness::config::resolve_and_validate(c);
  const auto now_dir = scratch("read-now"), later_dir = scratch("read-later"), resumed_dir = scratch("read-later-resumed");
  train_run(c, now_dir);
  {
    DeferReads defer;
    train_run(c, later_dir);
    EXPECT_EQ(train_run(c, resumed_dir, false, /*stop_after=*/7).state, results::RunState::kInterrupted);
    EXPECT_EQ(train_run(c, resumed_dir, /*resume=*/true).state, results::RunState::kDone);
  }
  const auto now = results::read_run_file((now_dir / "run.h5").string());
  for (const auto& dir : {later_dir, resumed_dir}) {
    SCOPED_TRACE(dir.string());
    const auto later = results::read_run_file((dir / "run.h5").string());
    EXPECT_EQ(later.state, results::RunState::kDone);
    EXPECT_EQ(later.train.step, now.train.step);
    EXPECT_EQ(later.train.tokens, now.train.tokens);
    EXPECT_EQ(later.train.lr, now.train.lr);
    EXPECT_EQ(later.train.loss, now.train.loss);
    EXPECT_EQ(later.train.grad_norm, now.train.grad_norm);
    ASSERT_EQ(later.train.seconds.size(), 12u);
    for (size_t i = 1; i < 12; ++i) EXPECT_GE(later.train.seconds[i], later.train.seconds[i - 1]);
    EXPECT_EQ(later.eval.at(32).loss, now.eval.at(32).loss);
  }

  // Diverging (see NonFiniteLossStopsTheRunAsFailedWithStepAndReason), read every 50 steps only.
  auto diverging = tiny_config(20);
  for (const auto& [key, value] : {std::pair{"optim.name", "adamw"}, {"optim.weight_decay", "10"},
                                   {"optim.lr_hidden", "100"}, {"optim.lr_embed", "100"},
                                   {"optim.lr_head", "100"}, {"run.log_every", "50"}, {"eval.every", "0"},
                                   {"run.checkpoint_every", "0"}})
    harness::config::apply_override(diverging, key, YAML::Load(value), {"test", 0, 0});
  harness::config::resolve_and_validate(diverging);
  const auto nan_now_dir = scratch("nan-now"), nan_later_dir = scratch("nan-later");
  const auto at_once = train_run(diverging, nan_now_dir);
  harness::train::TrainOutcome later;
  {
    DeferReads defer;
    later = train_run(diverging, nan_later_dir);
  }
  ASSERT_EQ(at_once.state, results::RunState::kFailed);
  EXPECT_EQ(later.state, results::RunState::kFailed);
  EXPECT_EQ(later.step, at_once.step);
  EXPECT_EQ(later.reason, at_once.reason);
  const auto r = results::read_run_file((nan_later_dir / "run.h5").string());
  EXPECT_EQ(r.status_step, at_once.step);
  EXPECT_EQ(r.train.loss, results::read_run_file((nan_now_dir / "run.h5").string()).train.loss);
}

TEST(Train, ExistingRunIsNotOverwrittenSilently) {
  const auto dir = scratch("exists");
  train_run(tiny_config(2), dir);
  EXPECT_THROW(train_run(tiny_config(2), dir), harness::InputError);
  EXPECT_THROW(train_run(tiny_config(3), dir, true), harness::InputError);  // config changed
}

TEST(TrainCli, BadInputExitsTwoAndWritesNothing) {
  const auto dir = scratch("cli");
  fs::create_directories(dir);
  const auto config = dir / "bad.yaml";
  std::ofstream(config) << "model:\n  layers: 2\n  hedas: 4\n";
  const auto out = dir / "results";
  const std::string cmd = std::string(HARNESS_BINARY) + " train --config " + config.string() +
                          " --set run.out_dir=" + out.string() + " > " + (dir / "log").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_FALSE(fs::exists(out));
  const std::string log = test_support::read_text(dir / "log");
  EXPECT_NE(log.find("bad.yaml:3:3: unknown key 'model.hedas' — did you mean 'model.heads'?"),
            std::string::npos) << log;
  // A context longer than every validation document is caught before training.
  std::ofstream(config) << "data: {corpus: '" << HARNESS_TEST_DATA << "/sotu'}\n"
                        << "train: {context: 64}\neval: {contexts: [L, 100000L]}\n";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2);
  EXPECT_FALSE(fs::exists(out));
  // A name that is a path would write outside run.out_dir (beside it, for ../victim).
  for (const std::string name : {"../victim", "a/b"}) {
    std::ofstream(config) << "data: {corpus: '" << HARNESS_TEST_DATA << "/sotu'}\nname: " << name << "\n";
    EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 2) << name;
    EXPECT_NE(test_support::read_text(dir / "log").find("bad.yaml:2:7: name: expected a name"), std::string::npos)
        << test_support::read_text(dir / "log");
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(dir / "victim"));
  }
}

TEST(Train, BFloat16MixedPrecisionFollowsFloat32Over100Steps) {
  // Same data, seed and initial weights; bf16 matmuls perturb every step by ~1e-2 relative, so
  // the trajectories drift apart slowly but must stay together: within 0.1 nats/byte at every
  // step and 0.05 on average over the last 20 (both runs fall from ln 256 = 5.5 to ~2.5).
  auto fp32 = tiny_config(100);
  fp32.config.eval.every = 0;
  auto bf16 = fp32;
  harness::config::apply_override(bf16, "train.precision", YAML::Load("bf16"), {"test", 0, 0});
  harness::config::resolve_and_validate(bf16);
  EXPECT_NE(harness::config::config_hash(bf16.config), harness::config::config_hash(fp32.config));
  // fp32 is the default and leaves the run id as it was before the key existed.
  EXPECT_EQ(harness::config::canonical_text(fp32.config, true).find("train.precision"), std::string::npos);

  const auto a_dir = scratch("fp32"), b_dir = scratch("bf16");
  ASSERT_EQ(train_run(fp32, a_dir).state, results::RunState::kDone);
  ASSERT_EQ(train_run(bf16, b_dir).state, results::RunState::kDone);
  const auto a = results::read_run_file((a_dir / "run.h5").string());
  const auto b = results::read_run_file((b_dir / "run.h5").string());
  EXPECT_EQ(b.config.at("precision"), "bf16");
  EXPECT_EQ(a.config.at("precision"), "fp32");
  ASSERT_EQ(a.train.loss.size(), 100u);
  ASSERT_EQ(b.train.loss.size(), 100u);
  double max_gap = 0, tail_gap = 0;
  for (size_t i = 0; i < 100; ++i) {
    max_gap = std::max(max_gap, std::fabs(a.train.loss[i] - b.train.loss[i]));
    if (i >= 80) tail_gap += std::fabs(a.train.loss[i] - b.train.loss[i]) / 20;
  }
  EXPECT_LT(max_gap, 0.1);
  EXPECT_LT(tail_gap, 0.05);
  EXPECT_LT(b.train.loss.back(), b.train.loss.front() - 2.0);
  for (const auto& [T, rows] : a.eval) EXPECT_NEAR(b.eval.at(T).loss.back(), rows.loss.back(), 0.1) << T;
}
