#include "harness/common/build_info.h"

#include "harness_revision.h"  // generated at build time (cmake/revision.cmake)

#include <fmt/format.h>
#include <torch/version.h>

#include <dlfcn.h>


namespace harness {

std::string git_revision() { return HARNESS_GIT_REVISION; }

std::string libtorch_version() {
  return fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
}

std::string blas_config() {
  using Config = char* (*)();
  const auto f = reinterpret_cast<Config>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const char* c = f ? f() : nullptr;
  return c ? std::string(c) : std::string("unknown");
}

}  // namespace harness
