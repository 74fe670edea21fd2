// The fused RMSNorm and ReLU² (models/pointwise.h) against their ATen compositions: values and
// gradients in float64 (to rounding) and float32, on contiguous and strided inputs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>

#include "models/pointwise.h"

namespace {

using Op = std::function<torch::Tensor(const torch::Tensor&)>;

// Max |fused − composed| over the output and over dL/dx for L = Σ w·op(x), w random.
std::pair<double, double> compare(const Op& fused, const Op& composed, const torch::Tensor& x) {
  auto xf = x.detach().clone().set_requires_grad(true);
  auto xc = x.detach().clone().set_requires_grad(true);
  const auto yf = fused(xf), yc = composed(xc);
  const auto w = torch::randn(yc.sizes(), x.options());
  (yf * w).sum().backward();
  (yc * w).sum().backward();
  const auto err = [](const torch::Tensor& a, const torch::Tensor& b) {
    return (a - b).abs().max().item<double>();
  };
  return {err(yf, yc), err(xf.grad(), xc.grad())};
}

// (B, H, T, D) as the QK-norm sees it: a transposed view of a (B, T, H·D) projection.
torch::Tensor heads_view(torch::Dtype dtype) {
  return torch::randn({3, 5, 4 * 8}, dtype).view({3, 5, 4, 8}).transpose(1, 2);
}

}  // namespace

TEST(Pointwise, RmsNormMatchesComposedInFloat64) {
  torch::manual_seed(1);
  const Op fused = [](const torch::Tensor& x) { return models::rms_norm(x); };
  const Op composed = [](const torch::Tensor& x) { return models::rms_norm_composed(x); };
  for (const auto& x : {torch::randn({7, 33}, torch::kFloat64) * 3 + 1, heads_view(torch::kFloat64),
                        torch::randn({2, 3, 128}, torch::kFloat64)}) {
    const auto [dy, dx] = compare(fused, composed, x);
    EXPECT_LT(dy, 1e-14) << x.sizes();
    EXPECT_LT(dx, 1e-13) << x.sizes();
  }
}

TEST(Pointwise, RmsNormMatchesComposedInFloat32AndIsContiguous) {
  torch::manual_seed(2);
  const auto x = heads_view(torch::kFloat32);
  ASSERT_FALSE(x.is_contiguous());
  const auto [dy, dx] = compare([](const torch::Tensor& t) { return models::rms_norm(t); },
                                [](const torch::Tensor& t) { return models::rms_norm_composed(t); },
                                x);
  EXPECT_LT(dy, 1e-5);
  EXPECT_LT(dx, 1e-5);
  const auto y = models::rms_norm(x);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_EQ(y.sizes(), x.sizes());
  // Unit RMS per row, against the definition.
  EXPECT_TRUE(torch::allclose(y.pow(2).mean(-1), torch::ones({3, 4, 5}), 1e-5, 1e-5));
}

TEST(Pointwise, RmsNormGradientMatchesFiniteDifferences) {
  torch::manual_seed(3);
  auto x = torch::randn({2, 6}, torch::kFloat64).set_requires_grad(true);
  const auto w = torch::randn({2, 6}, torch::kFloat64);
  (models::rms_norm(x) * w).sum().backward();
  const double h = 1e-6;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      auto xp = x.detach().clone(), xm = x.detach().clone();
      xp[i][j] += h;
      xm[i][j] -= h;
      const double fd = ((models::rms_norm_composed(xp) * w).sum().item<double>() -
                         (models::rms_norm_composed(xm) * w).sum().item<double>()) / (2 * h);
      EXPECT_NEAR(x.grad()[i][j].item<double>(), fd, 1e-7);
    }
}

TEST(Pointwise, ReluSquaredMatchesComposed) {
  torch::manual_seed(4);
  const Op fused = [](const torch::Tensor& x) { return models::relu_squared(x); };
  const Op composed = [](const torch::Tensor& x) { return models::relu_squared_composed(x); };
  const auto [dy64, dx64] = compare(fused, composed, torch::randn({9, 70}, torch::kFloat64));
  EXPECT_EQ(dy64, 0.0);
  EXPECT_LT(dx64, 1e-15);
  const auto [dy32, dx32] = compare(fused, composed, torch::randn({4, 1000}).t());  // strided
  EXPECT_EQ(dy32, 0.0);
  EXPECT_LT(dx32, 1e-6);
}

TEST(Pointwise, ReluSquaredValuesAndNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto x = torch::tensor({-2.0, -0.0, 0.0, 0.5, 3.0, nan}, torch::kFloat64);
  const auto y = models::relu_squared(x);
  const std::vector<double> want{0.0, 0.0, 0.0, 0.25, 9.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y[int64_t(i)].item<double>(), want[i]);
  EXPECT_TRUE(std::isnan(y[5].item<double>()));  // a NaN must reach the loss, not vanish
}

TEST(Pointwise, ReluSquaredGradientIsZeroWhereInputIsNotPositiveEvenForInfiniteGradients) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const bool fused : {true, false}) {
    auto x = torch::tensor({-1.0, 0.0, 2.0}, torch::kFloat64).set_requires_grad(true);
    const auto y = fused ? models::relu_squared(x) : models::relu_squared_composed(x);
    y.backward(torch::tensor({inf, inf, 1.0}, torch::kFloat64));
    EXPECT_EQ(x.grad()[0].item<double>(), 0.0) << fused;
    EXPECT_EQ(x.grad()[1].item<double>(), 0.0) << fused;
    EXPECT_EQ(x.grad()[2].item<double>(), 4.0) << fused;
  }
}

TEST(Pointwise, OtherDtypesFallBackToComposed) {
  const auto x = torch::randn({4, 16}).to(torch::kBFloat16);
  EXPECT_TRUE(torch::equal(models::relu_squared(x), models::relu_squared_composed(x)));
  // RMSNorm of bfloat16 (mixed precision) is computed in float32 and rounded once: within half a
  // bfloat16 step (2^-9 relative, 2^-8 allowed for the float32 arithmetic) of the float64 value.
  const auto y = models::rms_norm(x);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  const auto exact = models::rms_norm_composed(x.to(torch::kFloat64));
  EXPECT_TRUE(((y.to(torch::kFloat64) - exact).abs() <= exact.abs() * std::pow(2.0, -8) + 1e-12).all().item<bool>());
}
