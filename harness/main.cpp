// harness: one executable, one subcommand per capability (`harness --help`).
#include <fmt/core.h>

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>

#include "harness/cli/commands.h"
#include "harness/util/errors.h"

namespace {

void print_usage() {
  fmt::print(
      "harness — length-generalisation experiments for attention\n\n"
      "usage: harness <command> [options]     (harness <command> --help for details)\n\n"
      "commands:\n");
  for (const auto& c : harness::cli::commands()) fmt::print("  {:<12} {}\n", c.name, c.summary);
}

}  // namespace

// OpenMP threads that spin while waiting make multi-threaded runs ~10x slower whenever the cores
// are shared (parallel sweep jobs, a busy laptop): measured 11.8 s vs 1.9 s for the same 3 steps
// at load 10 on 2 cores. libgomp reads OMP_WAIT_POLICY when it loads, before main(), so set it
// and re-execute once. An explicit OMP_WAIT_POLICY from the user is left alone.
void prefer_passive_openmp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY")) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

// A training step allocates and frees the same few-MiB activations every step. glibc's defaults
// hand them back to the kernel (mmap/munmap, heap trimming) and fault them in again: 18% of a
// step in the kernel at L = 64 (perf), vs 2% for the same step from Python, whose heap stays
// larger. Keep blocks up to 32 MiB in the heap and trim it only past 1 GiB free; peak RSS is
// unchanged because the working set is the same (bench/train_vs_peer.sh).
void keep_freed_memory_for_reuse() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

int main(int argc, char** argv) {
  prefer_passive_openmp_waits(argv);
  keep_freed_memory_for_reuse();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? harness::kExitBadInput : harness::kExitOk;
  }
  const harness::cli::Args args(argv + 2, argv + argc);
  for (const auto& c : harness::cli::commands()) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(args);
    } catch (const harness::InputError& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      return harness::kExitBadInput;
    } catch (const std::exception& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      return harness::kExitFailure;
    }
  }
  fmt::print(stderr, "error: unknown command '{}'\n\n", argv[1]);
  print_usage();
  return harness::kExitBadInput;
}
