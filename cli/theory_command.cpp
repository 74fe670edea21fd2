// `harness theory <experiment>`: experiments that need no training run.
#include <fmt/format.h>

#include "cli/commands.h"
#include "harness/util/errors.h"

namespace harness::cli {

int theory_command(const Args& args) {
  const char* usage =
      "usage: harness theory entropy [options]   entropy and attention mass of IID Gaussian logits\n"
      "                                          per transform (harness theory entropy --help)";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("{}\n", usage);
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "entropy") return theory_entropy_command(rest);
  throw InputError(fmt::format("theory: unknown experiment '{}'\n\n{}", args[0], usage));
}

}  // namespace harness::cli
