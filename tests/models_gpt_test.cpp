// The GPT model: shapes, validation, causality, initial loss, score-std recording.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "models/gpt.h"
#include "test_models.h"

namespace {

models::GPTOptions tiny(int64_t context = 16) { return test_support::small_gpt_options(context); }

// Expects std::invalid_argument whose message names `option`.
template <class F>
void expect_invalid(F&& f, const std::string& option) {
  try {
    f();
    ADD_FAILURE() << "no exception for bad " << option;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(GptModel, LogitShapes) {
  torch::manual_seed(0);
  auto o = tiny();
  o.d_model = 48;  // ≠ heads·head_dim = 32
  models::GPT model(o);
  auto tokens = torch::randint(0, 256, {3, 7}, torch::kLong);
  auto logits = model->forward(tokens);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 7, 256}));
  EXPECT_EQ(logits.scalar_type(), torch::kFloat);
  EXPECT_EQ(model->block_list[0]->attn->q->weight.sizes(), (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(model->block_list[0]->attn->o->weight.sizes(), (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(model->block_list[0]->mlp->fc->weight.sizes(), (std::vector<int64_t>{192, 48}));
  // The attention layer receives the model's head geometry.
  EXPECT_EQ(model->block_list[1]->attn->core->options().heads, 2);
  EXPECT_EQ(model->block_list[1]->attn->core->options().head_dim, 16);
  // Parameter count: embed + head + per layer (q,k,v,o + fc,proj) (+ the method's own).
  int64_t expected = 2 * 256 * 48 + 2 * (4 * 48 * 32 + 2 * 48 * 192);
  int64_t core = 0;
  for (const auto& p : model->named_parameters())
    if (p.key().find(".core.") != std::string::npos) core += p.value().numel();
  EXPECT_EQ(model->num_parameters(), expected + core);
}

TEST(GptModel, InitialLossIsLnVocab) {
  torch::manual_seed(0);
  models::GPT model(tiny());
  auto x = torch::randint(0, 256, {4, 16}, torch::kLong);
  auto y = torch::randint(0, 256, {4, 16}, torch::kLong);
  // Zero-initialised head: uniform prediction.
  EXPECT_NEAR(model->loss(x, y).item<double>(), std::log(256.0), 1e-5);
}

TEST(GptModel, ValidatesOptions) {
  auto make = [](auto mutate) {
    return [mutate] {
      auto o = tiny();
      mutate(o);
      models::GPT m(o);
    };
  };
  expect_invalid(make([](models::GPTOptions& o) { o.d_model = 0; }), "d_model");
  expect_invalid(make([](models::GPTOptions& o) { o.heads = -1; }), "heads");
  expect_invalid(make([](models::GPTOptions& o) { o.head_dim = 0; }), "head_dim");
  expect_invalid(make([](models::GPTOptions& o) { o.vocab_size = 0; }), "vocab_size");
  expect_invalid(make([](models::GPTOptions& o) { o.layers = 0; }), "layers");
  expect_invalid(make([](models::GPTOptions& o) { o.mlp_ratio = 0; }), "mlp_ratio");
  expect_invalid(make([](models::GPTOptions& o) { o.mlp_ratio = 0.001; }), "mlp_ratio");
  EXPECT_THROW(models::GPT(tiny())->forward(torch::zeros({4}, torch::kLong)), c10::Error);
  // Method-specific constraints are the attention layer's: an odd head_dim cannot be rotated.
  auto odd = tiny();
  odd.head_dim = 15;
  odd.attention.method = "rope";
  EXPECT_THROW(models::GPT{odd}, std::invalid_argument);
  odd.attention.method = "nope";
  EXPECT_NO_THROW(models::GPT{odd});
}

TEST(GptModel, IsCausal) {
  torch::manual_seed(0);
  models::GPT model(tiny());
  {  // give the zero-initialised projections and head some weight so every path is live
    torch::NoGradGuard ng;
    for (auto& p : model->parameters()) p.add_(0.05 * torch::randn_like(p));
  }
  auto a = torch::randint(0, 256, {2, 12}, torch::kLong);
  auto b = a.clone();
  b.slice(1, 8, 12).random_(0, 256);
  auto la = model->forward(a), lb = model->forward(b);
  EXPECT_TRUE(torch::allclose(la.slice(1, 0, 8), lb.slice(1, 0, 8), 1e-5, 1e-5));
  EXPECT_FALSE(torch::allclose(la.slice(1, 8, 12), lb.slice(1, 8, 12), 1e-5, 1e-5));
}

TEST(GptModel, RecordsScoreStdPerLayer) {
  torch::manual_seed(0);
  auto o = tiny();
  o.layers = 3;
  models::GPT model(o);
  auto x = torch::randint(0, 256, {2, 16}, torch::kLong);
  std::vector<attention::AttentionProbe> probes(3);
  probes[0].score_std = probes[2].score_std = true;  // layer 1 not asked
  const auto probed = model->forward(x, probes);
  EXPECT_TRUE(probed.equal(model->forward(x)));  // probing changes nothing
  // QK-normed q, k: s = q·k/√D has std O(1).
  for (int l : {0, 2}) {
    EXPECT_GT(probes[l].score_std_value, 0.05);
    EXPECT_LT(probes[l].score_std_value, 20.0);
  }
  EXPECT_EQ(probes[1].score_std_value, 0.0);
  std::vector<attention::AttentionProbe> too_few(2);
  EXPECT_ANY_THROW(model->forward(x, too_few));
}

TEST(GptModel, RmsNormHasUnitRms) {
  auto x = torch::randn({5, 7}) * 3 + 1;
  auto y = models::rms_norm(x);
  EXPECT_TRUE(torch::allclose(y.pow(2).mean(-1), torch::ones({5}), 1e-4, 1e-4));
}
