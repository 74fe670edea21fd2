#include "harness/train/device_memory.h"

#include <ATen/Context.h>

#ifdef HARNESS_WITH_CUDA_KERNEL
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace harness::train {

namespace {
#ifdef HARNESS_WITH_CUDA_KERNEL
c10::DeviceIndex index_of(const torch::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
#endif
}  // namespace

int64_t peak_device_bytes(const torch::Device& device) {
#ifdef HARNESS_WITH_CUDA_KERNEL
  if (device.is_cuda()) {
    // allocated_bytes[0]: the aggregate over small and large pools (StatType::AGGREGATE), in
    // LibTorch 1.13 and 2.x alike.
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
    return stats.allocated_bytes[0].peak;
  }
#endif
  (void)device;
  return 0;
}

void reset_peak_device_bytes(const torch::Device& device) {
#ifdef HARNESS_WITH_CUDA_KERNEL
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
#endif
  (void)device;
}

void set_tf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

}  // namespace harness::train
