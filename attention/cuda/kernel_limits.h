// What the fused CUDA attention kernels accept, as plain constants: the kernels check their
// arguments with it, and the config schema refuses a run it would fail at its first forward.
#pragma once

#include <cstdint>

namespace attention::cuda {

inline constexpr int64_t kSupportedHeadDims[] = {64, 128};

constexpr bool supported_head_dim(int64_t head_dim) {
  for (const int64_t d : kSupportedHeadDims)
    if (d == head_dim) return true;
  return false;
}

}  // namespace attention::cuda
