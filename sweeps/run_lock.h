// One lock per run: flock(2) on <run dir>/lock, held by the process that trains the run. The
// kernel releases it when that process exits or is killed, so a killed run never stays "locked".
#pragma once

#include <string>

namespace harness::sweeps {

class RunLock {
 public:
  RunLock() = default;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  // Takes the lock on <run_dir>/lock (creating both); false when another process holds it.
  // On success the file records this process ("pid@host") for `sweep status`.
  bool try_acquire(const std::string& run_dir);
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Whether some process holds the lock of run_dir. Probes with a shared lock for an instant and
// creates nothing; `holder` (when given) receives the lock file's "pid@host".
bool run_lock_held(const std::string& run_dir, std::string* holder = nullptr);

}  // namespace harness::sweeps
