#include "models/muon.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace models {

torch::Tensor newton_schulz5(const torch::Tensor& G, int64_t steps) {
  TORCH_CHECK(G.dim() == 2, "newton_schulz5: expected a 2-D matrix, got ", G.sizes());
  torch::NoGradGuard ng;
  const auto compute = G.is_cuda() ? torch::kBFloat16 : torch::kFloat;
  auto X = G.to(compute);
  const bool tall = G.size(0) > G.size(1);
  if (tall) X = X.t();                 // (r, c) with r ≤ c: the Gram matrix A is the small one
  X = X / (X.norm() + 1e-7);           // spectral norm ≤ Frobenius norm ≤ 1
  // The scalar multiplies and adds ride in the GEMMs (BLAS alpha/beta): a third less time than
  // separate element-wise ops at d_model 128 (bench_train_step), as modded-nanogpt does.
  for (int64_t i = 0; i < steps; ++i) {
    const auto A = torch::mm(X, X.t());                                        // (r, r)
    const auto B = torch::addmm(A, A, A, kNewtonSchulzB, kNewtonSchulzC);      // b·A + c·A·A
    X = torch::addmm(X, B, X, kNewtonSchulzA, 1.0);                            // a·X + B·X, (r, c)
  }
  if (tall) X = X.t();
  return X.to(G.scalar_type()).contiguous();
}

torch::Tensor muon_momentum(const torch::Tensor& grad, torch::Tensor& buf, double momentum,
                            bool nesterov) {
  torch::NoGradGuard ng;
  buf.lerp_(grad, 1.0 - momentum);
  return nesterov ? grad.lerp(buf, momentum) : buf.clone();
}

double muon_shape_scale(int64_t rows, int64_t cols) {
  return std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
}

Muon::Muon(std::vector<torch::Tensor> params, MuonOptions options)
    : params_(std::move(params)), options_(options) {
  if (!(options_.lr >= 0)) throw std::invalid_argument("Muon: lr must be >= 0");
  if (!(options_.momentum >= 0 && options_.momentum < 1))
    throw std::invalid_argument("Muon: momentum must be in [0, 1)");
  if (options_.ns_steps < 0) throw std::invalid_argument("Muon: ns_steps must be >= 0");
  buffers_.reserve(params_.size());
  for (const auto& p : params_) {
    if (p.dim() != 2)
      throw std::invalid_argument("Muon: only 2-D parameters are supported, got shape " +
                                  c10::str(p.sizes()));
    buffers_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void Muon::step(double lr_factor) {
  const double lr = options_.lr * lr_factor;
  const auto update = [&](size_t i) {
    torch::NoGradGuard ng;  // thread-local: set in each worker
    auto& p = params_[i];
    const auto& g = p.grad();
    if (!g.defined()) return;
    auto u = newton_schulz5(muon_momentum(g, buffers_[i], options_.momentum, options_.nesterov),
                            options_.ns_steps);
    if (options_.weight_decay != 0) p.mul_(1.0 - lr * options_.weight_decay);
    p.add_(u, -lr * muon_shape_scale(p.size(0), p.size(1)));
  };
  // On the CPU the matrices are updated concurrently, one per thread, each with single-threaded
  // BLAS (OpenBLAS and LibTorch run serially inside a parallel region): at d_model 128 a
  // Newton–Schulz GEMM is too small to split over threads well (bench_train_step, 2 threads: the
  // optimiser step 11.3 → 7.2 ms). Costliest first, taken from a shared counter (as the fused
  // attention kernel schedules its tasks). With BLAS serial inside the region, a matrix's result
  // does not depend on which thread computes it, nor on the thread count.
  const bool cpu = !params_.empty() && params_.front().device().is_cpu();
  const int64_t workers = cpu ? std::min<int64_t>(at::get_num_threads(), params_.size()) : 1;
  if (workers <= 1) {
    for (size_t i = 0; i < params_.size(); ++i) update(i);
  } else {
    std::vector<size_t> order(params_.size());
    std::iota(order.begin(), order.end(), size_t(0));
    const auto cost = [&](size_t i) {  // Newton–Schulz FLOPs ∝ min(r, c)²·max(r, c)
      const int64_t r = params_[i].size(0), c = params_[i].size(1);
      return std::min(r, c) * std::min(r, c) * std::max(r, c);
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return cost(a) > cost(b); });
    std::atomic<size_t> next{0};
    at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
      for (size_t n = next++; n < order.size(); n = next++) update(order[n]);
    });
  }
  ++steps_;
}

void Muon::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();  // set to none, as Adam's
}

void Muon::save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  archive.write(prefix + "_steps", torch::tensor(steps_, torch::kLong), /*is_buffer=*/true);
  archive.write(prefix + "_count", torch::tensor(static_cast<int64_t>(params_.size()), torch::kLong),
                /*is_buffer=*/true);
  for (size_t i = 0; i < buffers_.size(); ++i)
    archive.write(prefix + "_" + std::to_string(i) + "_momentum", buffers_[i], /*is_buffer=*/true);
}

void Muon::load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  torch::NoGradGuard ng;
  torch::Tensor t;
  archive.read(prefix + "_count", t, /*is_buffer=*/true);
  if (t.item<int64_t>() != static_cast<int64_t>(params_.size()))
    throw std::runtime_error("Muon::load: checkpoint group '" + prefix + "' has " +
                             std::to_string(t.item<int64_t>()) + " parameters, this one " +
                             std::to_string(params_.size()));
  torch::Tensor s;
  archive.read(prefix + "_steps", s, /*is_buffer=*/true);
  steps_ = s.item<int64_t>();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    torch::Tensor b;
    archive.read(prefix + "_" + std::to_string(i) + "_momentum", b, /*is_buffer=*/true);
    if (!b.sizes().equals(buffers_[i].sizes()))
      throw std::runtime_error("Muon::load: shape mismatch for '" + prefix + "' parameter " +
                               std::to_string(i));
    buffers_[i].copy_(b);
  }
}

}  // namespace models
