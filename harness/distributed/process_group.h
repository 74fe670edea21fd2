// A data-parallel process group on PyTorch's own engine (c10d): a TCPStore rendezvous hosted by
// rank 0, then Gloo (CPU tensors) or, where LibTorch has it and the run is on CUDA, NCCL.
// Every collective waits at most `timeout`; a failure names the ranks that stopped answering.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/distributed/world.h"
#include "models/collectives.h"

namespace harness::distributed {

class ProcessGroup final : public models::Collectives {
 public:
  // Rendezvous at world.master_addr:master_port: rank 0 listens, every rank checks in with
  // `run_id`, and a rank whose id differs from rank 0's is an error naming both (the ranks were
  // given different configs). Throws std::runtime_error, within `timeout`, when a rank does not
  // arrive, the port is taken, or the ids differ.
  ProcessGroup(const World& world, const std::string& run_id, std::chrono::milliseconds timeout,
               c10::Device device);
  ~ProcessGroup() override;

  int rank() const override { return world_.rank; }
  int world_size() const override { return world_.size; }
  // Bucketed: the tensors are packed into flat buffers of one dtype (≤ 16 MiB each), summed
  // together in flight, and unpacked.
  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override;
  // Asynchronous (Gloo/NCCL work in flight while the caller computes); the wait, like every
  // collective, fails within the timeout naming a lost rank.
  std::function<void()> all_reduce_sum_start(torch::Tensor flat) override;
  std::vector<torch::Tensor> all_gather(const torch::Tensor& mine) override;
  void broadcast(std::vector<torch::Tensor>& tensors, int root) override;

  // Rank 0's string to every rank (through the store): rank 0 passes it, the others get it.
  std::string share_from_rank0(const std::string& key, const std::string& value);
  // A barrier on rank 0's own work (a checkpoint save): rank 0 marks `key` done, the others wait
  // for the mark at most `allowance` — longer than the collectives' timeout, which is for ranks
  // that stopped answering, not for a slow disk — then fail naming rank 0.
  void wait_for_rank0(const std::string& key, std::chrono::milliseconds allowance);
  // Bytes from rank `root` to every rank (a checkpoint: ranks need no shared file system).
  std::vector<char> broadcast_bytes(std::vector<char> bytes, int root);
  // Every rank's value, in rank order.
  std::vector<int64_t> all_gather_int(int64_t value);

  const World& world() const { return world_; }
  double seconds_in_collectives() const { return seconds_; }
  const char* backend_name() const;

 private:
  struct Impl;
  template <class Op>
  void run(const char* what, Op&& op);
  [[noreturn]] void fail(const char* what, const std::string& error);

  World world_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
  double seconds_ = 0.0;
  int64_t failures_ = 0;
};

// A 64-bit hash of the bytes of `tensors` (copied to the CPU): equal on two ranks iff their
// parameters are bitwise equal, barring a collision.
uint64_t bytes_checksum(const std::vector<torch::Tensor>& tensors);

// A TCP port that was free a moment ago on 127.0.0.1 (for a local launch).
int free_local_port();

}  // namespace harness::distributed
