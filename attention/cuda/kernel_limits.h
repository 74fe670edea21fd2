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

// A FIRE table (score_mod.h, TableIndex::kFire) is (H, G + 2): f on G grid points, then c and L.
// The kernels keep a head's row, and in the backward pass its gradient, in shared memory.
inline constexpr int64_t kMinFireGrid = 2;
inline constexpr int64_t kMaxFireGrid = 4096;

constexpr bool supported_fire_table_len(int64_t len) {
  return len >= kMinFireGrid + 2 && len <= kMaxFireGrid + 2;
}

}  // namespace attention::cuda
