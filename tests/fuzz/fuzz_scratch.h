// What the fuzz targets share: each one's scratch folder in /dev/shm — its own, named by the process
// id, removed at exit, and the folders of earlier processes that crashed removed first (fork mode's
// jobs end on a crash, before atexit) — and how a finding ends the process.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace fuzz {

inline std::string& scratch_path() {
  static std::string path;
  return path;
}

inline void remove_scratch() {
  std::error_code ec;
  std::filesystem::remove_all(scratch_path(), ec);
}

// Creates /dev/shm/<prefix><pid>, removed at exit, and returns it.
inline std::string scratch_dir(const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
  const std::string dir = "/dev/shm/" + prefix + std::to_string(::getpid());
  fs::create_directories(dir);
  scratch_path() = dir;
  std::atexit(remove_scratch);
  return dir;
}

// A finding of `target` in `reader`: said on stderr, then abort() so that libFuzzer keeps the input.
[[noreturn]] inline void finding(const char* target, const char* reader, const std::string& what) {
  std::fprintf(stderr, "%s: %s: %s\n", target, reader, what.c_str());
  std::abort();
}

}  // namespace fuzz
