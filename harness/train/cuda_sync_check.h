// A check that a training step never waits for the GPU: with HARNESS_CUDA_SYNC_CHECK=1 in the
// environment, a host synchronisation with the device while the check is armed is an error
// (PyTorch's sync debug mode, torch.cuda.set_sync_debug_mode("error"): .item(), a blocking copy
// to the host, nonzero, ...). The trainer arms it for each step and disarms it where it reads the
// queued steps' values. Nothing on the CPU, without the variable, or without a CUDA LibTorch.
#pragma once

#include <torch/types.h>

namespace harness::train {

class CudaSyncCheck {
 public:
  explicit CudaSyncCheck(const torch::Device& device);
  ~CudaSyncCheck();
  void arm();
  void disarm();
  bool enabled() const { return enabled_; }

 private:
  bool enabled_ = false;
};

}  // namespace harness::train
