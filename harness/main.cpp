// harness: one executable, one subcommand per capability (`harness --help`).
#include <fmt/core.h>

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

int main(int argc, char** argv) {
  prefer_passive_openmp_waits(argv);
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
