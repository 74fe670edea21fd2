#include "common/build_info.h"

#include "harness_revision.h"  // generated at build time (cmake/revision.cmake)

#include <ATen/Version.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <sstream>

namespace harness {

std::string git_revision() { return HARNESS_GIT_REVISION; }

std::string libtorch_version() {
  return fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
}

std::string blas_config() {
  using Config = char* (*)();
  const auto f = reinterpret_cast<Config>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (const char* c = f ? f() : nullptr) return c;
  std::istringstream config(at::show_config());
  for (std::string line; std::getline(config, line);) {
    const auto at = line.find("BLAS_INFO=");
    if (at != std::string::npos) return line.substr(at + 10, line.find(',', at) - at - 10);
  }
  return "unknown";
}

CudaBuild cuda_build() {
  CudaBuild b;
#ifdef HARNESS_WITH_CUDA_KERNEL
  b.kernels = true;
#endif
#ifdef HARNESS_CUDA_ARCHITECTURES
  b.architectures = HARNESS_CUDA_ARCHITECTURES;
#endif
#ifdef HARNESS_NVCC_VERSION
  b.nvcc_version = HARNESS_NVCC_VERSION;
#endif
  try {  // the CUDA runtime LibTorch's CUDA library was built against; a CPU LibTorch's stub throws
    const long v = at::detail::getCUDAHooks().versionCUDART();  // e.g. 13000
    b.libtorch_cuda = fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  } catch (const std::exception&) {
  }
#ifdef USE_C10D_NCCL
  b.nccl = true;
#endif
#if defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
  b.gloo = true;  // the condition harness/distributed/process_group.cpp builds Gloo under
#endif
  return b;
}

int visible_cuda_devices() { return int(at::detail::getCUDAHooks().deviceCount()); }  // 0 without driver or device

std::string version_text() {
  const CudaBuild b = cuda_build();
  std::string text = fmt::format("harness {} (LibTorch {})\n", git_revision(), libtorch_version());
  text += fmt::format("LibTorch CUDA: {}\n", b.libtorch_cuda.empty() ? "none (a CPU build)" : b.libtorch_cuda);
  if (b.kernels)
    text += fmt::format("CUDA kernels: compiled for {} (nvcc {})\n", b.architectures, b.nvcc_version);
  else
    text += "CUDA kernels: not compiled (no nvcc, or a CPU LibTorch, at configure time)\n";
  text += fmt::format("process groups: Gloo {}, NCCL {}\n", b.gloo ? "compiled" : "not compiled",
                      b.nccl ? "compiled" : "not compiled");
  const int devices = visible_cuda_devices();
  text += fmt::format("CUDA devices visible: {}\n", devices);
  text += fmt::format("CPU BLAS: {}\n", blas_config());
  return text;
}

}  // namespace harness
