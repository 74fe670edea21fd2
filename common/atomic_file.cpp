#include "common/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace harness {

namespace {
[[noreturn]] void fail(const std::string& path, int error, const std::string& tmp = "") {
  if (!tmp.empty()) ::unlink(tmp.c_str());
  throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(error)));
}
}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) fail(path, ec.value());
  }
  // A per-process temporary name: concurrent `sweep run`s may write the same record.
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, errno);
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail(path, error, tmp);
    }
    written += size_t(n);
  }
  int error = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) fail(path, error, tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, errno, tmp);
  const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);  // the rename survives a power cut once the folder is on disk too
    ::close(dir);
  }
}

}  // namespace harness
