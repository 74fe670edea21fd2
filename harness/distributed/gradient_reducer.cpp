#include "harness/distributed/gradient_reducer.h"

#include <torch/torch.h>

#include <stdexcept>

namespace harness::distributed {

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, models::Collectives& group,
                                 int64_t bucket_bytes)
    : params_(std::move(params)), group_(group) {
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  seen_.assign(params_.size(), 0);
  // Reverse order: the last layers' gradients come first in the backward pass.
  int64_t bytes = 0;
  for (size_t n = params_.size(); n-- > 0;) {
    const auto& p = params_[n];
    if (!p.requires_grad()) continue;
    const bool new_bucket = buckets_.empty() || bytes >= bucket_bytes ||
                            buckets_.back().flat.scalar_type() != p.scalar_type() ||
                            buckets_.back().flat.device() != p.device();
    if (new_bucket) {
      buckets_.emplace_back();
      buckets_.back().flat = torch::empty({0}, p.options());
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[n] = buckets_.size() - 1;
    slot_of_[n] = b.params.size();
    b.offset.push_back(b.params.empty() ? 0 : b.offset.back() + params_[b.params.back()].numel());
    b.params.push_back(n);
    bytes += p.numel() * int64_t(p.element_size());
  }
  for (auto& b : buckets_) {
    const int64_t n = b.params.empty() ? 0 : b.offset.back() + params_[b.params.back()].numel();
    b.flat = torch::zeros({n}, b.flat.options().requires_grad(false));
  }
  for (size_t n = 0; n < params_.size(); ++n) {
    if (!params_[n].requires_grad()) continue;
    hooks_.push_back(params_[n].register_hook([this, n](const torch::Tensor& g) { on_grad(n, g); }));
  }
}

GradientReducer::~GradientReducer() {
  size_t h = 0;
  for (size_t n = 0; n < params_.size() && h < hooks_.size(); ++n)
    if (params_[n].requires_grad()) params_[n].remove_hook(hooks_[h++]);
}

void GradientReducer::arm() {
  armed_ = true;
  next_ = 0;
  std::fill(seen_.begin(), seen_.end(), 0);
  for (auto& b : buckets_) b.ready = 0, b.wait = nullptr;
}

void GradientReducer::on_grad(size_t n, const torch::Tensor& g) {
  if (!armed_ || seen_[n]) return;
  torch::NoGradGuard no_grad;
  Bucket& b = buckets_[bucket_of_[n]];
  auto slice = b.flat.narrow(0, b.offset[slot_of_[n]], params_[n].numel());
  // The step's full gradient: what earlier micro-batches accumulated, plus this one.
  slice.copy_(g.reshape({-1}));
  const auto& before = params_[n].grad();
  if (before.defined()) slice.add_(before.reshape({-1}));
  seen_[n] = 1;
  if (++b.ready == b.params.size()) start_ready();
}

void GradientReducer::start(Bucket& b) { b.wait = group_.all_reduce_sum_start(b.flat); }

void GradientReducer::start_ready() {
  while (next_ < buckets_.size() && buckets_[next_].ready == buckets_[next_].params.size())
    start(buckets_[next_++]);
}

void GradientReducer::finish(torch::Tensor& extra) {
  if (!armed_) throw std::logic_error("GradientReducer::finish without arm");
  armed_ = false;
  torch::NoGradGuard no_grad;
  // Parameters the hooks did not see: their .grad (earlier micro-batches) or zeros. One without
  // any gradient keeps none, as in one process (the same parameters have none on every rank).
  for (size_t n = 0; n < params_.size(); ++n) {
    if (!params_[n].requires_grad() || seen_[n]) continue;
    Bucket& b = buckets_[bucket_of_[n]];
    auto slice = b.flat.narrow(0, b.offset[slot_of_[n]], params_[n].numel());
    const auto& g = params_[n].grad();
    if (g.defined())
      slice.copy_(g.reshape({-1}));
    else
      slice.zero_();
    seen_[n] = 1;
    ++b.ready;
  }
  start_ready();
  auto extra_wait = group_.all_reduce_sum_start(extra);
  for (auto& b : buckets_) {
    b.wait();
    for (size_t s = 0; s < b.params.size(); ++s) {
      auto& p = params_[b.params[s]];
      const auto sum = b.flat.narrow(0, b.offset[s], p.numel()).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(sum);
    }
  }
  extra_wait();
}

}  // namespace harness::distributed
