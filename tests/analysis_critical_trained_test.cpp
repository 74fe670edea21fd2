// The trained-LogN report (analysis/critical_trained.h): the traced forward is the model's own,
// γ_eff reproduces the logit the attention kernels compute (score_mod.h), key cosines equal a
// brute-force pairwise mean, and runs without LogN are input errors.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>

#include "analysis/critical_trained.h"
#include "attention/score_mod.h"
#include "harness/config/schema.h"
#include "harness/train/finished_run.h"
#include "harness/train/trainer.h"
#include "common/errors.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

fs::path train_tiny(const fs::path& dir, const std::string& method) {
  const std::string yaml = std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" +
                           (dir / "cache").string() + "'}\n" +
                           "model: {layers: 2, d_model: 32, heads: 2}\n"
                           "attention: {method: " + method + "}\n"
                           "train: {context: 32, batch_size: 8, steps: 6, seed: 1}\n"
                           "eval: {contexts: [L], windows: 4}\n"
                           "run: {threads: 2, checkpoint_every: 0}\n";
  const auto config = harness::config::load_run_config_text(yaml, "tiny.yaml", "tiny");
  harness::train::TrainOptions o;
  o.run_dir = (dir / "run").string();
  o.progress_bar = 0;
  EXPECT_EQ(harness::train::train(config, o).state, results::RunState::kDone);
  return dir / "run";
}

}  // namespace

TEST(CriticalTrained, PairwiseCosineOverPositionsIsTheBruteForceMean) {
  torch::manual_seed(0);
  const auto x = torch::randn({2, 3, 7, 5}, torch::kFloat64) + 0.5;  // (B, H, T, D)
  const auto fast = analysis::mean_pairwise_cosine_over_positions(x);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h) {
      double sum = 0;
      for (int64_t t = 0; t < 7; ++t)
        for (int64_t u = 0; u < 7; ++u)
          if (t != u)
            sum += torch::cosine_similarity(x[b][h][t], x[b][h][u], 0).item<double>();
      EXPECT_NEAR(fast[b][h].item<double>(), sum / 42, 1e-12);
    }
}

TEST(CriticalTrained, ReportsEffectiveGammaAndKeyCosinesOfALognRun) {
  test_support::TempDir tmp;
  const auto run_dir = train_tiny(tmp.path, "logn+rope");
  auto run = harness::train::open_finished_run(run_dir.string());

  // The traced forward is the model's forward.
  const auto windows = run.dataset->eval_windows(32, 3, 7);
  const auto tokens = windows.tokens.narrow(1, 0, 32);
  torch::Tensor traced_logits;
  const auto keys = analysis::trace_keys(run.model, tokens, &traced_logits);
  torch::NoGradGuard no_grad;
  const auto logits = run.model->forward(tokens);
  EXPECT_LT((traced_logits - logits).abs().max().item<double>(), 1e-5);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].keys.sizes(), torch::IntArrayRef({3, 2, 32, 16}));
  // QK-norm: every key has RMS 1, i.e. norm √D.
  EXPECT_NEAR(keys[1].keys.norm(2, -1).mean().item<double>(), 4.0, 1e-3);

  const auto report = analysis::trained_logn_report(run_dir.string(), 0, 3, 7);
  EXPECT_EQ(report.context, 32);
  EXPECT_EQ(report.windows, 3);
  EXPECT_EQ(report.head_dim, 16);
  ASSERT_EQ(report.table.size(), 4u);
  const auto params = run.model->named_parameters();
  for (const auto& head : report.table) {
    const auto scale =
        params[fmt::format("blocks.{}.attn.core.logn_scale", head.layer)][head.head].item<double>();
    EXPECT_NEAR(head.scale, scale, 1e-7);
    EXPECT_NEAR(head.gamma_eff, scale * std::sqrt(16.0), 1e-6);  // default scale 1/√D
    // The kernels' logit for RMS-normed q, k with cosine c at query i is γ_eff·ln(i+1)·c.
    attention::ScoreMod mod = run.model->block_list[0]->attn->core->score_mod(32);
    const float head_scales[2] = {float(head.scale), float(head.scale)};
    mod.head_scale = head_scales;
    const double cosine = 0.3, dot = cosine * 16.0;  // |q| = |k| = √D
    EXPECT_NEAR(attention::logit<double>(mod, dot, 20, 5, int(head.head)),
                head.gamma_eff * std::log(21.0) * cosine, 1e-5);
    // Key cosines: the traced keys' mean over the same windows.
    const auto expected = analysis::mean_pairwise_cosine_over_positions(keys[size_t(head.layer)].keys)
                              .mean(0)[head.head].item<double>();
    EXPECT_NEAR(head.key_cosine, expected, 1e-9);
    EXPECT_NEAR(head.gamma_c, 1 / (1 - head.key_cosine), 1e-9);
    EXPECT_GT(head.key_cosine, -1);
    EXPECT_LT(head.key_cosine, 1);
  }
  // RoPE rotates the keys the kernel sees: their cosines differ from the content keys'.
  EXPECT_NE(report.table[0].key_cosine_rotated, report.table[0].key_cosine);
  const std::string text = analysis::format_trained_report(report);
  EXPECT_NE(text.find("gamma_eff"), std::string::npos);
  EXPECT_NE(text.find("heuristic"), std::string::npos);  // queries are not keys in a trained model
}

TEST(CriticalTrained, ARunWithoutLognIsAnInputError) {
  test_support::TempDir tmp;
  const auto run_dir = train_tiny(tmp.path, "rope");
  try {
    analysis::trained_logn_report(run_dir.string());
    FAIL() << "a RoPE run was reported";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("learns no LogN scale"), std::string::npos) << e.what();
  }
}
