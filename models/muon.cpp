#include "models/muon.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
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

namespace {

// Newton–Schulz FLOPs of a matrix, up to a constant: ∝ min(r, c)²·max(r, c).
int64_t newton_schulz_cost(const torch::Tensor& p) {
  const int64_t r = p.size(0), c = p.size(1);
  return std::min(r, c) * std::min(r, c) * std::max(r, c);
}

// The rank that orthogonalises each matrix: costliest first, each to the least-loaded rank
// (ties: the lowest rank), so every rank computes the same assignment.
std::vector<int> assign_owners(const std::vector<torch::Tensor>& params, int world) {
  std::vector<int> owner(params.size(), 0);
  if (world <= 1) return owner;
  const auto cost = [&](size_t i) { return newton_schulz_cost(params[i]); };
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  for (const size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[i] = static_cast<int>(least);
    load[static_cast<size_t>(least)] += cost(i);
  }
  return owner;
}

}  // namespace

void Muon::step(double lr_factor, Collectives* group) {
  torch::NoGradGuard ng;
  const double lr = options_.lr * lr_factor;
  const int world = group ? group->world_size() : 1;
  const int rank = group ? group->rank() : 0;
  const std::vector<int> owner = assign_owners(params_, world);
  // The momentum of every matrix on every rank (cheap, and it keeps the buffers a checkpoint
  // holds identical everywhere); the Newton–Schulz of a matrix only on its owner.
  // (The RECORD_USER_SCOPEs name the parts for the step breakdown, bench/step_breakdown_bench.cpp.)
  std::vector<torch::Tensor> updates(params_.size());
  {
    RECORD_USER_SCOPE("optim.muon.momentum");
    for (size_t i = 0; i < params_.size(); ++i) {
      const auto& g = params_[i].grad();
      if (g.defined()) updates[i] = muon_momentum(g, buffers_[i], options_.momentum, options_.nesterov);
    }
  }
  std::vector<size_t> mine;  // costliest first
  for (size_t i = 0; i < params_.size(); ++i)
    if (updates[i].defined() && owner[i] == rank) mine.push_back(i);
  const auto cost = [&](size_t i) { return newton_schulz_cost(params_[i]); };
  std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });
  const auto orthogonalise = [&](size_t i) {
    torch::NoGradGuard guard;  // thread-local: set in each worker
    updates[i] = newton_schulz5(updates[i], options_.ns_steps);
  };
  // On the CPU the matrices are orthogonalised concurrently, one per thread, each with
  // single-threaded BLAS (OpenBLAS and LibTorch run serially inside a parallel region): at
  // d_model 128 a Newton–Schulz GEMM is too small to split over threads well (bench_train_step,
  // 2 threads: the optimiser step 11.3 → 7.2 ms). Costliest first, taken from a shared counter
  // (as the fused attention kernel schedules its tasks). With BLAS serial inside the region, a
  // matrix's result does not depend on which thread computes it, nor on the thread count.
  const bool cpu = !params_.empty() && params_.front().device().is_cpu();
  const int64_t workers = cpu ? std::min<int64_t>(at::get_num_threads(), mine.size()) : 1;
  {
    RECORD_USER_SCOPE("optim.muon.newton_schulz");
    if (workers <= 1) {
      for (const size_t i : mine) orthogonalise(i);
    } else {
      std::atomic<size_t> next{0};
      at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
        for (size_t n = next++; n < mine.size(); n = next++) orthogonalise(mine[n]);
      });
    }
  }
  if (world > 1) {
    RECORD_USER_SCOPE("optim.muon.exchange");
    exchange_updates(updates, owner, *group);
  }
  RECORD_USER_SCOPE("optim.muon.update");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!updates[i].defined()) continue;
    auto& p = params_[i];
    if (options_.weight_decay != 0) p.mul_(1.0 - lr * options_.weight_decay);
    p.add_(updates[i], -lr * muon_shape_scale(p.size(0), p.size(1)));
  }
  ++steps_;
}

// modded-nanogpt's distributed Muon: each rank orthogonalised its own matrices; one all-gather
// of a flat buffer per rank (padded to the largest share) gives every rank every update.
void Muon::exchange_updates(std::vector<torch::Tensor>& updates, const std::vector<int>& owner,
                            Collectives& group) const {
  const int world = group.world_size();
  std::vector<int64_t> share(static_cast<size_t>(world), 0);
  for (size_t i = 0; i < updates.size(); ++i)
    if (updates[i].defined()) share[static_cast<size_t>(owner[i])] += updates[i].numel();
  const int64_t width = *std::max_element(share.begin(), share.end());
  if (width == 0) return;
  auto mine = torch::zeros({width}, params_.front().options());
  int64_t offset = 0;
  for (size_t i = 0; i < updates.size(); ++i) {
    if (!updates[i].defined() || owner[i] != group.rank()) continue;
    mine.slice(0, offset, offset + updates[i].numel()).copy_(updates[i].reshape({-1}));
    offset += updates[i].numel();
  }
  const std::vector<torch::Tensor> gathered = group.all_gather(mine);
  std::vector<int64_t> read(static_cast<size_t>(world), 0);
  for (size_t i = 0; i < updates.size(); ++i) {
    if (!updates[i].defined()) continue;
    const auto r = static_cast<size_t>(owner[i]);
    const int64_t n = updates[i].numel();
    updates[i] = gathered[r].slice(0, read[r], read[r] + n).view(params_[i].sizes());
    read[r] += n;
  }
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
