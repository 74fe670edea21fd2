// harness: one executable, one subcommand per capability (`harness --help`).
#include <c10/util/Exception.h>
#include <fmt/core.h>

#include <cstring>
#include <exception>

#include "cli/commands.h"
#include "common/build_info.h"
#include "common/process_setup.h"
#include "common/errors.h"

namespace {

void print_usage() {
  fmt::print(
      "harness — length-generalisation experiments for attention\n\n"
      "usage: harness <command> [options]     (harness <command> --help for details)\n"
      "       harness --version\n\n"
      "commands:\n");
  for (const auto& c : harness::cli::commands()) fmt::print("  {:<12} {}\n", c.name, c.summary);
  fmt::print(
      "\nexamples:\n"
      "  harness sweep run sweeps/quickstart.yaml --jobs 2 --threads-per-job 1\n"
      "  harness train --config sweeps/examples/tiny.yaml --set train.steps=200\n"
      "  harness export table sweeps/quickstart.yaml\n");
}

}  // namespace

int main(int argc, char** argv) {
  harness::prefer_passive_openmp_waits(argv);
  harness::keep_freed_memory_for_reuse();
  if (argc >= 2 && !std::strcmp(argv[1], "--version")) {
    fmt::print("{}", harness::version_text());
    return harness::kExitOk;
  }
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
    } catch (const harness::PortInUse& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      return harness::kExitPortInUse;
    } catch (const c10::Error& e) {  // LibTorch's: its message, not its C++ frames (a run's log keeps those)
      fmt::print(stderr, "error: {}\n", e.what_without_backtrace());
      return harness::kExitFailure;
    } catch (const std::exception& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      return harness::kExitFailure;
    }
  }
  fmt::print(stderr, "error: unknown command '{}'\n\n", argv[1]);
  print_usage();
  return harness::kExitBadInput;
}
