// Each fuzz target's scratch folder in /dev/shm: its own, named by the process id, and the folders
// of earlier processes that crashed removed first (fork mode's jobs end on a crash, before atexit).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace fuzz {

// Creates /dev/shm/<prefix><pid> and returns it.
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
  return dir;
}

}  // namespace fuzz
