// Muon: Newton–Schulz orthogonalisation and the Nesterov momentum step.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "models/collectives.h"
#include "models/muon.h"

namespace {

// The quintic iteration written out independently, in float64.
torch::Tensor reference_ns5(torch::Tensor G, int steps = 5) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  auto X = G.to(torch::kDouble);
  const bool tall = X.size(0) > X.size(1);
  if (tall) X = X.t();
  X = X / (std::sqrt(X.pow(2).sum().item<double>()) + 1e-7);
  for (int i = 0; i < steps; ++i) {
    auto A = X.mm(X.t());
    X = a * X + (b * A + c * A.mm(A)).mm(X);
  }
  return tall ? X.t() : X;
}

// The exact orthogonal polar factor U·Vᵀ.
torch::Tensor polar(const torch::Tensor& G) {
  auto usv = torch::linalg_svd(G.to(torch::kDouble), /*full_matrices=*/false);
  return std::get<0>(usv).mm(std::get<2>(usv));
}

double cosine(const torch::Tensor& a, const torch::Tensor& b) {
  auto x = a.to(torch::kDouble).flatten(), y = b.to(torch::kDouble).flatten();
  return (x.dot(y) / (x.norm() * y.norm())).item<double>();
}

}  // namespace

TEST(MuonNewtonSchulz, MatchesFloat64Reference) {
  torch::manual_seed(0);
  for (auto shape : {std::vector<int64_t>{32, 64}, {96, 48}, {40, 40}, {1, 17}}) {
    auto G = torch::randn(shape);
    auto X = models::newton_schulz5(G);
    EXPECT_EQ(X.scalar_type(), torch::kFloat);
    ASSERT_EQ(X.sizes(), G.sizes());
    auto ref = reference_ns5(G);
    const double err = (X.to(torch::kDouble) - ref).abs().max().item<double>();
    EXPECT_LT(err, 1e-4) << "shape " << G.sizes();
  }
}

TEST(MuonNewtonSchulz, SingularValuesInBandAndAlignedWithPolarFactor) {
  torch::manual_seed(1);
  // Rectangular Gaussian matrices are well conditioned enough for 5 steps to reach the band.
  for (auto shape : {std::vector<int64_t>{32, 128}, {128, 32}, {64, 256}}) {
    auto G = torch::randn(shape);
    auto X = models::newton_schulz5(G);
    auto sv = torch::linalg_svdvals(X.to(torch::kDouble));
    EXPECT_GT(sv.min().item<double>(), 0.5) << G.sizes();
    EXPECT_LT(sv.max().item<double>(), 1.5) << G.sizes();
    EXPECT_GT(cosine(X, polar(G)), 0.95) << G.sizes();
  }
  // A square Gaussian matrix has tiny singular values that 5 steps cannot lift; the direction
  // is still close to U·Vᵀ.
  auto G = torch::randn({64, 64});
  EXPECT_GT(cosine(models::newton_schulz5(G), polar(G)), 0.9);
  // Scale invariance (up to the 1e-7): the input's norm does not matter.
  EXPECT_TRUE(torch::allclose(models::newton_schulz5(G), models::newton_schulz5(1000 * G), 1e-4,
                              1e-5));
}

TEST(MuonMomentum, NesterovTwoStepsByHand) {
  const double m = 0.9;
  auto g1 = torch::tensor({1.0f, -2.0f, 4.0f});
  auto g2 = torch::tensor({0.5f, 3.0f, -1.0f});
  auto buf = torch::zeros({3});
  auto u1 = models::muon_momentum(g1, buf, m, /*nesterov=*/true);
  // buf1 = 0.1·g1;  u1 = 0.1·g1 + 0.9·buf1 = 0.19·g1
  EXPECT_TRUE(torch::allclose(buf, 0.1 * g1, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(u1, 0.19 * g1, 1e-6, 1e-6));
  auto u2 = models::muon_momentum(g2, buf, m, true);
  // buf2 = 0.9·0.1·g1 + 0.1·g2;  u2 = 0.1·g2 + 0.9·buf2 = 0.081·g1 + 0.19·g2
  EXPECT_TRUE(torch::allclose(buf, 0.09 * g1 + 0.1 * g2, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(u2, 0.081 * g1 + 0.19 * g2, 1e-6, 1e-6));

  auto plain = torch::zeros({3});
  models::muon_momentum(g1, plain, m, false);
  auto p2 = models::muon_momentum(g2, plain, m, false);
  EXPECT_TRUE(torch::allclose(p2, 0.09 * g1 + 0.1 * g2, 1e-6, 1e-6));
}

TEST(MuonStep, OneStepMatchesHandComputation) {
  torch::manual_seed(2);
  EXPECT_DOUBLE_EQ(models::muon_shape_scale(64, 32), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(models::muon_shape_scale(32, 64), 1.0);
  for (auto shape : {std::vector<int64_t>{64, 32}, {32, 64}}) {
    auto p = torch::randn(shape).requires_grad_();
    auto p0 = p.detach().clone();
    auto g = torch::randn(shape);
    p.mutable_grad() = g.clone();
    models::MuonOptions o;
    o.lr = 0.05;
    o.momentum = 0.95;
    models::Muon muon({p}, o);
    muon.step(/*lr_factor=*/0.5);
    // first step: u = (1 − m)(1 + m)·g, orthogonalised; lr_eff = 0.025
    auto u = reference_ns5((1 - 0.95) * (1 + 0.95) * g.to(torch::kDouble));
    auto expected = p0.to(torch::kDouble) -
                    0.025 * models::muon_shape_scale(shape[0], shape[1]) * u;
    EXPECT_LT((p.detach().to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5);
    EXPECT_TRUE(torch::allclose(muon.momentum_buffers()[0], 0.05 * g, 1e-5, 1e-6));
    EXPECT_EQ(muon.steps(), 1);
  }
}

// The CPU step spreads the matrices over the threads (costliest first): every matrix still gets
// its own update, a matrix without a gradient is left alone, and 1 or 2 threads agree.
TEST(MuonStep, MatricesSpreadOverThreadsEachGetTheirOwnUpdate) {
  const int previous = torch::get_num_threads();
  const std::vector<std::vector<int64_t>> shapes{{24, 40}, {64, 16}, {48, 48}, {8, 96}, {33, 20}};
  std::vector<torch::Tensor> after[2];
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    torch::manual_seed(3);
    std::vector<torch::Tensor> ps, p0, gs;
    for (size_t i = 0; i < shapes.size(); ++i) {
      ps.push_back(torch::randn(shapes[i]).requires_grad_());
      p0.push_back(ps.back().detach().clone());
      gs.push_back(torch::randn(shapes[i]));
      if (i != 3) ps.back().mutable_grad() = gs.back().clone();  // #3 has no gradient
    }
    models::MuonOptions o;
    o.lr = 0.05;
    o.momentum = 0.9;
    models::Muon muon(ps, o);
    muon.step();
    for (size_t i = 0; i < shapes.size(); ++i) {
      const auto got = ps[i].detach().to(torch::kDouble);
      auto expected = p0[i].to(torch::kDouble);
      if (i != 3)
        expected -= 0.05 * models::muon_shape_scale(shapes[i][0], shapes[i][1]) *
                    reference_ns5((1 - 0.9) * (1 + 0.9) * gs[i].to(torch::kDouble));
      EXPECT_LT((got - expected).abs().max().item<double>(), 1e-5)
          << "matrix " << i << ", " << threads << " thread(s)";
      after[threads - 1].push_back(got);
    }
  }
  torch::set_num_threads(previous);
  for (size_t i = 0; i < shapes.size(); ++i)
    EXPECT_LT((after[0][i] - after[1][i]).abs().max().item<double>(), 1e-6) << "matrix " << i;
}

TEST(MuonStep, RejectsNonMatrixParameters) {
  EXPECT_THROW(models::Muon({torch::zeros({3}, torch::requires_grad())}, {}),
               std::invalid_argument);
}

namespace {

// W ranks in threads of one process: all_gather through shared memory (what c10d does over the
// network), enough for Muon's exchange.
class ThreadGroup final : public models::Collectives {
 public:
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    int world = 0, arrived = 0, generation = 0;
    std::vector<torch::Tensor> slots, result;
  };
  ThreadGroup(Shared& shared, int rank) : s_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return s_.world; }
  void all_reduce_sum(std::vector<torch::Tensor>&) override { throw std::logic_error("unused"); }
  void broadcast(std::vector<torch::Tensor>&, int) override { throw std::logic_error("unused"); }
  std::vector<torch::Tensor> all_gather(const torch::Tensor& mine) override {
    std::unique_lock<std::mutex> lock(s_.m);
    s_.slots[size_t(rank_)] = mine.clone();
    const int generation = s_.generation;
    if (++s_.arrived == s_.world) {
      s_.result = s_.slots;
      s_.arrived = 0;
      ++s_.generation;
      s_.cv.notify_all();
    } else {
      s_.cv.wait(lock, [&] { return s_.generation != generation; });
    }
    ++gathers;
    return s_.result;
  }
  int gathers = 0;

 private:
  Shared& s_;
  int rank_;
};

}  // namespace

// Data parallel: each of W ranks orthogonalises its share and all-gathers the rest; every rank
// must end with the single process's parameters and momentum, bit for bit up to BLAS rounding.
TEST(MuonStep, ShardedOverRanksEqualsOneProcess) {
  torch::manual_seed(11);
  std::vector<torch::Tensor> params0, grads;
  for (const auto& [r, c] : std::vector<std::pair<int, int>>{{32, 64}, {64, 32}, {32, 32}, {96, 32}, {16, 48}}) {
    params0.push_back(torch::randn({r, c}));
    grads.push_back(torch::randn({r, c}));
  }
  const auto copy = [&] {
    std::vector<torch::Tensor> p;
    for (size_t i = 0; i < params0.size(); ++i) {
      p.push_back(params0[i].clone().requires_grad_(true));
      p.back().mutable_grad() = grads[i].clone();
    }
    return p;
  };
  const int old_threads = torch::get_num_threads();
  torch::set_num_threads(1);
  models::MuonOptions o;
  o.weight_decay = 0.01;
  auto single = copy();
  models::Muon reference(single, o);
  reference.step(0.5);
  reference.step(0.5);  // twice: the momentum carries over

  for (const int world : {2, 3}) {
    ThreadGroup::Shared shared;
    shared.world = world;
    shared.slots.resize(size_t(world));
    std::vector<std::vector<torch::Tensor>> params(static_cast<size_t>(world));
    std::vector<std::unique_ptr<models::Muon>> muons;
    std::vector<std::unique_ptr<ThreadGroup>> groups;
    for (int r = 0; r < world; ++r) {
      params[size_t(r)] = copy();
      muons.push_back(std::make_unique<models::Muon>(params[size_t(r)], o));
      groups.push_back(std::make_unique<ThreadGroup>(shared, r));
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        torch::set_num_threads(1);
        muons[size_t(r)]->step(0.5, groups[size_t(r)].get());
        muons[size_t(r)]->step(0.5, groups[size_t(r)].get());
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(groups[size_t(r)]->gathers, 2);
      for (size_t i = 0; i < single.size(); ++i) {
        EXPECT_TRUE(torch::equal(params[size_t(r)][i], params[0][i])) << "rank " << r << " matrix " << i;
        EXPECT_TRUE(torch::allclose(params[size_t(r)][i], single[i], 1e-6, 1e-7))
            << "world " << world << " rank " << r << " matrix " << i;
        EXPECT_TRUE(torch::allclose(muons[size_t(r)]->momentum_buffers()[i], reference.momentum_buffers()[i], 1e-6, 1e-7));
      }
    }
  }
  torch::set_num_threads(old_threads);
}
