// Provenance recorded with every run, and what `harness --version` reports of the build.
#pragma once

#include <string>

namespace harness {

std::string git_revision();      // of the source tree this binary was built from (fixed at build
                                 // time, "-dirty" for uncommitted changes); "unknown" outside git
std::string libtorch_version();  // "2.11.0"
// The BLAS that runs LibTorch's CPU matmuls: OpenBLAS's own description when it is OpenBLAS
// ("OpenBLAS 0.3.21 ... SkylakeX ..."), else LibTorch's BLAS_INFO ("mkl"); its kernels set the
// rounding of every matmul.
std::string blas_config();

// The CUDA side of this build: whether the CUDA attention kernels and their LibTorch binding are
// compiled in, for which architectures ("sm_80 sm_90") and by which nvcc; the CUDA runtime version the
// LibTorch was built against ("13.0"; empty for a CPU LibTorch); whether c10d's NCCL and Gloo
// process groups are compiled in.
struct CudaBuild {
  bool kernels = false;
  std::string architectures, nvcc_version, libtorch_cuda;
  bool nccl = false, gloo = false;
};
CudaBuild cuda_build();
int visible_cuda_devices();  // 0 without a CUDA LibTorch, a driver or a device

// The lines of `harness --version`: revision and LibTorch, CUDA, process groups, devices.
std::string version_text();

}  // namespace harness
