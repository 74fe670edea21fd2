#include "harness/common/build_info.h"

#include <fmt/format.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <array>
#include <cstdio>

namespace harness {

namespace {
std::string run(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    std::array<char, 256> buffer;
    while (std::fgets(buffer.data(), buffer.size(), pipe)) out += buffer.data();
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}
}  // namespace

std::string git_revision() {
  static const std::string revision = [] {
    const std::string dir = HARNESS_SOURCE_DIR;
    std::string rev = run(fmt::format("git -C '{}' rev-parse HEAD 2>/dev/null", dir));
    if (rev.empty()) return std::string("unknown");
    if (!run(fmt::format("git -C '{}' status --porcelain --untracked-files=no 2>/dev/null", dir)).empty())
      rev += "-dirty";
    return rev;
  }();
  return revision;
}

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
