// Gradient all-reduce overlapped with the backward pass, as DDP does it: the parameters are cut
// into buckets (in reverse order, roughly the order their gradients are computed); a hook on each
// parameter copies its gradient into its bucket as the backward produces it, and a full bucket is
// summed over the ranks (asynchronously) while the backward computes the rest.
//
// Buckets start in one fixed order on every rank (bucket k only after buckets 0..k-1), whatever
// order the hooks fire in, so the ranks' collectives always pair up; a parameter that gets no
// gradient holds back its bucket and the later ones until finish() (DDP's unused parameters).
//
// Measured on a 2-core VM (bench/dist_scaling.sh): with the cores busy computing, Gloo's copies
// of an overlapped bucket slow the backward more than the overlap saves (256 KiB buckets: 0.89× the
// tokens/s of one bucket after the backward). The default is DDP's 25 MiB, so a small model's
// gradients are one bucket; a large one's are many, overlapped.
#pragma once

#include "models/collectives.h"

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace harness::distributed {

class GradientReducer {
 public:
  // params: the model's parameters (the same list, in the same order, on every rank).
  static constexpr int64_t kDefaultBucketBytes = int64_t(25) << 20;
  GradientReducer(std::vector<torch::Tensor> params, models::Collectives& group,
                  int64_t bucket_bytes = kDefaultBucketBytes);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // The next backward pass completes the step's gradient (the last micro-batch): reduce while it runs.
  void arm();
  // After that backward pass: starts what the hooks did not (parameters without a gradient count
  // as zeros and keep none), sums `extra` (small, any dtype: the loss, a stop flag) over the
  // ranks, waits for every bucket and leaves the sums over the ranks in every parameter's .grad.
  void finish(torch::Tensor& extra);

 private:
  struct Bucket {
    std::vector<size_t> params;   // indices into params_
    std::vector<int64_t> offset;  // element offset of each in flat
    torch::Tensor flat;           // (n) the bucket's gradients, then their sums
    size_t ready = 0;             // parameters copied in this step
    std::function<void()> wait;   // set once started
  };
  void on_grad(size_t param, const torch::Tensor& grad);
  void start_ready();  // starts buckets next_.. in order while they are complete
  void start(Bucket& b);

  std::vector<torch::Tensor> params_;
  models::Collectives& group_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // param → bucket
  std::vector<size_t> slot_of_;    // param → its index in the bucket
  std::vector<char> seen_;         // param → copied this step
  std::vector<unsigned> hooks_;
  size_t next_ = 0;
  bool armed_ = false;
};

}  // namespace harness::distributed
