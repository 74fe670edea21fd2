#include "sweeps/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <thread>

namespace harness::sweeps {

namespace {

std::string lock_path(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "lock").string();
}

std::string read_holder(int fd) {
  char buffer[256];
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return "";
  std::string s(buffer, size_t(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

bool RunLock::try_acquire(const std::string& run_dir) {
  if (fd_ >= 0) return true;
  std::filesystem::create_directories(run_dir);
  const int fd = ::open(lock_path(run_dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot open {}: {}", lock_path(run_dir), std::strerror(errno)));
  // A status probe holds a shared lock for microseconds: retry briefly before concluding that
  // another runner holds it (a real holder holds it for the whole run).
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      char host[128] = {};
      ::gethostname(host, sizeof host - 1);
      const std::string me = fmt::format("{}@{}\n", ::getpid(), host);
      if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) < 0) {
        // The holder note is informational only.
      }
      fd_ = fd;
      return true;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("cannot lock {}: {}", lock_path(run_dir), std::strerror(err)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::close(fd);
  return false;
}

bool run_lock_held(const std::string& run_dir, std::string* holder) {
  const int fd = ::open(lock_path(run_dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // never locked
  bool held = false;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd, LOCK_UN);
  } else {
    held = errno == EWOULDBLOCK;
    if (held && holder) *holder = read_holder(fd);
  }
  ::close(fd);
  return held;
}

}  // namespace harness::sweeps
