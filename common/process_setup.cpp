#include "common/process_setup.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>

namespace harness {

void prefer_passive_openmp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  // Exec the resolved path, not /proc/self/exe: the kernel names a process after the file it
  // execs, and every harness process (sweep workers, ranks) would show as `exe` in ps and top.
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;  // keep going without the setting rather than fail
  path[n] = '\0';
  ::execv(path, argv);  // returns only on failure
}

void keep_freed_memory_for_reuse() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace harness
