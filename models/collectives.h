// What data-parallel training needs from a process group, as an interface: the optimisers and the
// evaluation reduce through it without knowing c10d (harness/distributed/process_group.h implements it
// with Gloo or NCCL). Every call is collective: every rank makes it, in the same order.
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace models {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place: every tensor becomes the element-wise sum over the ranks (same dtype and shape on
  // every rank). Every rank ends with the same bits.
  virtual void all_reduce_sum(std::vector<torch::Tensor>& tensors) = 0;
  // Starts summing the contiguous `flat` over the ranks in place and returns at once; the returned
  // function waits for it (flat then holds the sum). Every rank starts the same sequence of these
  // in the same order. Default: synchronous.
  virtual std::function<void()> all_reduce_sum_start(torch::Tensor flat) {
    std::vector<torch::Tensor> one{flat};
    all_reduce_sum(one);
    return [] {};
  }
  // `gathered[r]` ← rank r's `mine` (the same shape and dtype on every rank).
  virtual std::vector<torch::Tensor> all_gather(const torch::Tensor& mine) = 0;
  // In place: every tensor becomes rank `root`'s.
  virtual void broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
};

}  // namespace models
