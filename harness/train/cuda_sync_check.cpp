#include "harness/train/cuda_sync_check.h"

#include <cstdlib>
#include <cstring>

#ifdef HARNESS_WITH_CUDA_KERNEL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace harness::train {

CudaSyncCheck::CudaSyncCheck(const torch::Device& device) {
#ifdef HARNESS_WITH_CUDA_KERNEL
  const char* flag = std::getenv("HARNESS_CUDA_SYNC_CHECK");
  enabled_ = device.is_cuda() && flag && std::strcmp(flag, "1") == 0;
#else
  (void)device;
#endif
}

CudaSyncCheck::~CudaSyncCheck() { disarm(); }

void CudaSyncCheck::arm() {
#ifdef HARNESS_WITH_CUDA_KERNEL
  if (enabled_) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
#endif
}

void CudaSyncCheck::disarm() {
#ifdef HARNESS_WITH_CUDA_KERNEL
  if (enabled_) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
#endif
}

}  // namespace harness::train
