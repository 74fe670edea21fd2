// What the build holds and what `harness --version` says of it: on a machine with nvcc, the CUDA
// kernels, their LibTorch binding and c10d's NCCL must be in build/harness (compiled on every CI
// run, though nothing here runs them); a CUDA part that silently dropped out (a CPU LibTorch found
// first, nvcc not found by CMake, a binding left out) fails here instead of shipping. And a run
// that asks for a GPU where there is none stops before it writes anything.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/build_info.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

// nvcc where CMake looks for it (PATH, or the toolkit's default place).
bool nvcc_on_this_machine() {
  return std::system("command -v nvcc >/dev/null 2>&1 || test -x /usr/local/cuda/bin/nvcc") == 0;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string run_to_text(const std::string& command, int* code = nullptr) {
  test_support::TempDir tmp;
  const int status = std::system((command + " > " + (tmp.path / "out").string() + " 2>&1").c_str());
  if (code) *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return test_support::read_text(tmp.path / "out");
}

}  // namespace

TEST(BuildInfo, CudaIsCompiledInWhereNvccExists) {
  if (!nvcc_on_this_machine()) GTEST_SKIP() << "no nvcc on this machine: a CPU build is expected";
  if (!HARNESS_CUDA_REQUESTED) GTEST_SKIP() << "configured with -DHARNESS_CUDA=OFF";
  const harness::CudaBuild b = harness::cuda_build();
  EXPECT_TRUE(b.kernels) << "nvcc is here, but the CUDA kernels and their binding are not in this build "
                            "(a CPU LibTorch? see cmake's 'harness: CUDA kernels' line)";
  EXPECT_TRUE(has(b.architectures, "sm_")) << b.architectures;
  EXPECT_FALSE(b.nvcc_version.empty());
  EXPECT_FALSE(b.libtorch_cuda.empty()) << "LibTorch has no CUDA";
  EXPECT_TRUE(b.nccl) << "c10d's NCCL process group is not compiled in";
  EXPECT_TRUE(b.gloo) << "c10d's Gloo process group is not compiled in (libgloo-dev)";
  // The executable itself loads LibTorch's CUDA library.
  const std::string ldd = run_to_text(std::string("ldd ") + HARNESS_BINARY);
  EXPECT_TRUE(has(ldd, "libtorch_cuda.so")) << ldd;
  EXPECT_FALSE(has(ldd, "not found")) << ldd;
}

TEST(BuildInfo, VersionSaysWhatTheBuildHolds) {
  int code = -1;
  const std::string v = run_to_text(std::string(HARNESS_BINARY) + " --version", &code);
  EXPECT_EQ(code, 0) << v;
  const harness::CudaBuild b = harness::cuda_build();
  EXPECT_TRUE(has(v, "(LibTorch " + harness::libtorch_version() + ")")) << v;
  EXPECT_TRUE(has(v, "LibTorch CUDA: " + (b.libtorch_cuda.empty() ? std::string("none") : b.libtorch_cuda))) << v;
  EXPECT_TRUE(has(v, b.kernels ? "CUDA kernels: compiled for " + b.architectures + " (nvcc " + b.nvcc_version + ")"
                               : std::string("CUDA kernels: not compiled"))) << v;
  EXPECT_TRUE(has(v, std::string("NCCL ") + (b.nccl ? "compiled" : "not compiled"))) << v;
  EXPECT_TRUE(has(v, "CUDA devices visible: " + std::to_string(harness::visible_cuda_devices()))) << v;
  EXPECT_TRUE(has(v, "CPU BLAS: ")) << v;
}

TEST(BuildInfo, RunDeviceCudaWithoutAGpuExitsTwoAndWritesNothing) {
  if (harness::visible_cuda_devices() > 0) GTEST_SKIP() << "a CUDA device is visible";
  test_support::TempDir tmp;
  const auto config = tmp.path / "gpu.yaml";
  std::ofstream(config) << "data: {corpus: '" << HARNESS_TEST_DATA << "/sotu'}\n"
                        << "model: {layers: 1, d_model: 64, heads: 1}\n"
                        << "train: {context: 32, batch_size: 2, steps: 2}\n"
                        << "run:\n  device: cuda\n";
  const auto out = tmp.path / "runs";
  int code = -1;
  const std::string log = run_to_text(std::string(HARNESS_BINARY) + " train --no-progress --config " +
                                          config.string() + " --set run.out_dir=" + out.string(), &code);
  EXPECT_EQ(code, 2) << log;
  EXPECT_TRUE(has(log, "gpu.yaml:5:11: run.device: cuda requested, but ")) << log;
  EXPECT_TRUE(has(log, "use run.device: cpu")) << log;
  EXPECT_FALSE(has(log, "Exception raised from")) << log;  // no LibTorch trace
  EXPECT_FALSE(fs::exists(out)) << "something was written";
}
