// The chunked head + cross-entropy (models/chunked_loss.h) against the full (rows, V) logits, in
// float64: the loss, the per-row losses and both gradients; and through the GPT, with activation
// checkpointing and bfloat16 mixed precision.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/chunked_loss.h"
#include "models/gpt.h"
#include "test_models.h"

namespace {

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

models::GPTOptions small_gpt(const std::string& method) {
  models::GPTOptions o = test_support::small_gpt_options(16, 24);
  o.vocab_size = 61;  // not a multiple of any chunk below
  o.attention.method = method;
  return o;
}

// A model whose zero-initialised output projections are filled, so every parameter has a gradient.
models::GPT trained_looking(const models::GPTOptions& o, torch::ScalarType dtype) {
  torch::manual_seed(5);
  models::GPT model(o);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.copy_(p + 0.05 * torch::randn_like(p));
  model->to(dtype);
  return model;
}

}  // namespace

TEST(ChunkedLoss, EqualsTheFullLossAndItsGradientsInFloat64) {
  torch::manual_seed(0);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t N = 37, C = 8, V = 50;
  for (const int64_t chunk : {1, 5, 36, 37, 1000}) {  // partial last chunk, one chunk, more than N
    auto h1 = torch::randn({N, C}, f64).requires_grad_(), w1 = torch::randn({V, C}, f64).requires_grad_();
    auto h2 = h1.detach().clone().requires_grad_(), w2 = w1.detach().clone().requires_grad_();
    const auto targets = torch::randint(0, V, {N}, torch::kLong);
    const auto full = torch::nn::functional::cross_entropy(torch::matmul(h1, w1.t()), targets);
    const auto chunked = models::chunked_cross_entropy(h2, w2, targets, torch::kFloat64, chunk);
    EXPECT_NEAR(chunked.item<double>(), full.item<double>(), 1e-12) << chunk;
    (3.0 * full).backward();  // an upstream gradient other than 1
    (3.0 * chunked).backward();
    EXPECT_LT(max_abs_diff(h2.grad(), h1.grad()), 1e-12) << chunk;
    EXPECT_LT(max_abs_diff(w2.grad(), w1.grad()), 1e-12) << chunk;

    const auto per_row = torch::nn::functional::cross_entropy(
        torch::matmul(h1, w1.t()), targets,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    EXPECT_LT(max_abs_diff(models::chunked_nll(h1.detach(), w1.detach(), targets, torch::kFloat64, chunk), per_row),
              1e-12) << chunk;
  }
}

TEST(ChunkedLoss, WithoutGradModeKeepsNoGradient) {
  torch::manual_seed(1);
  auto h = torch::randn({6, 4}).requires_grad_(), w = torch::randn({9, 4}).requires_grad_();
  torch::NoGradGuard no_grad;
  const auto loss = models::chunked_cross_entropy(h, w, torch::randint(0, 9, {6}, torch::kLong), torch::kFloat32, 4);
  EXPECT_FALSE(loss.requires_grad());
}

TEST(ChunkedLoss, BFloat16FollowsFloat32) {
  // bf16 GEMMs (8-bit mantissa, relative rounding 2^-9 per element) over C = 64 terms: the logits
  // move by ~1e-2 at unit scale; the mean loss, an average of 256 rows, by well under 1e-2.
  torch::manual_seed(2);
  const auto h = torch::randn({256, 64}) / 8, w = torch::randn({300, 64});
  const auto t = torch::randint(0, 300, {256}, torch::kLong);
  const double fp32 = models::chunked_cross_entropy(h, w, t, torch::kFloat32, 100).item<double>();
  const double bf16 = models::chunked_cross_entropy(h, w, t, torch::kBFloat16, 100).item<double>();
  EXPECT_NEAR(bf16, fp32, 1e-2 * fp32);
}

TEST(GptLoss, ChunkedEqualsTheLossOfTheFullLogitsInFloat64) {
  auto o = small_gpt("si+p-rope");
  o.loss_chunk_rows = 7;  // 3 × 16 rows in 7 chunks
  auto model = trained_looking(o, torch::kFloat64);
  const auto tokens = torch::randint(0, o.vocab_size, {3, 16}, torch::kLong);
  const auto targets = torch::randint(0, o.vocab_size, {3, 16}, torch::kLong);
  const auto logits = model->forward(tokens);
  const auto full = torch::nn::functional::cross_entropy(logits.reshape({-1, o.vocab_size}), targets.reshape({-1}));
  full.backward();
  std::vector<torch::Tensor> expected;
  for (auto& p : model->parameters()) expected.push_back(p.grad().clone()), p.mutable_grad().zero_();
  const auto chunked = model->loss(tokens, targets);
  chunked.backward();
  EXPECT_NEAR(chunked.item<double>(), full.item<double>(), 1e-6);
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_LT(max_abs_diff(params[i].grad(), expected[i]), 1e-6) << i;
  // The per-position losses average to the loss.
  EXPECT_NEAR(model->position_losses(tokens, targets).mean().item<double>(), full.item<double>(), 1e-9);
}

TEST(GptLoss, ActivationCheckpointingGivesTheSameGradients) {
  // KERPLE's learned bias parameters and LogN's learned head scales get their gradients through
  // the recomputed blocks too.
  for (const std::string method : {"si+p-rope", "kerple+p-rope", "logn+rope"}) {
    auto o = small_gpt(method);
    auto plain = trained_looking(o, torch::kFloat64);
    o.activation_checkpointing = true;
    auto checkpointed = trained_looking(o, torch::kFloat64);
    const auto tokens = torch::randint(0, o.vocab_size, {2, 16}, torch::kLong);
    const auto targets = torch::randint(0, o.vocab_size, {2, 16}, torch::kLong);
    const auto a = plain->loss(tokens, targets), b = checkpointed->loss(tokens, targets);
    a.backward();
    b.backward();
    EXPECT_NEAR(b.item<double>(), a.item<double>(), 1e-12) << method;
    const auto pa = plain->named_parameters(), pb = checkpointed->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_TRUE(pb[i].value().grad().defined()) << method << " " << pb[i].key();
      EXPECT_LT(max_abs_diff(pb[i].value().grad(), pa[i].value().grad()), 1e-6) << method << " " << pb[i].key();
    }
  }
}

TEST(GptLoss, BFloat16MixedPrecisionKeepsFloat32MasterWeights) {
  auto o = small_gpt("si+p-rope");
  auto fp32 = trained_looking(o, torch::kFloat32);
  o.compute_dtype = torch::kBFloat16;
  auto bf16 = trained_looking(o, torch::kFloat32);
  const auto tokens = torch::randint(0, o.vocab_size, {2, 16}, torch::kLong);
  const auto targets = torch::randint(0, o.vocab_size, {2, 16}, torch::kLong);
  const auto logits = bf16->forward(tokens);
  EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
  // bf16 matmuls through 2 blocks: logits within a few percent of their scale.
  const auto ref = fp32->forward(tokens);
  EXPECT_LT(max_abs_diff(logits, ref), 0.05 * ref.abs().max().item<double>());
  const auto a = fp32->loss(tokens, targets), b = bf16->loss(tokens, targets);
  EXPECT_NEAR(b.item<double>(), a.item<double>(), 0.02 * a.item<double>());
  b.backward();
  for (const auto& p : bf16->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), torch::kFloat32) << p.key();
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat32) << p.key();
  }
}
