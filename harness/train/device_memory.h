// The CUDA caching allocator's peak, for the run's record and log. Without a CUDA LibTorch (or
// on the CPU) there is nothing to measure: 0.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace harness::train {

// Bytes of tensors allocated at once at most on `device` since the last reset (0 on the CPU).
int64_t peak_device_bytes(const torch::Device& device);
void reset_peak_device_bytes(const torch::Device& device);

// CUDA: whether float32 matmuls may use TF32 tensor cores (run.tf32); nothing on the CPU.
void set_tf32(bool allow);

}  // namespace harness::train
